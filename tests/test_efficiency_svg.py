"""efficiency.svg: the efficiency report's figures as a picture in the plan's output folder."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from rlinf_eks.offline.outputs.efficiency_svg import efficiency_svg
from rlinf_eks.offline.outputs.plan import write
from tests.harness import plan_stack

SVG = "{http://www.w3.org/2000/svg}"


def test_given_a_planned_stack_then_the_svg_shows_its_fill_and_cost(tmp_path):
    write(plan_stack("multi-node"), tmp_path)
    report = json.loads((tmp_path / "efficiency.json").read_text())
    text = (tmp_path / "efficiency.svg").read_text()
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert [t.split(":")[0] for t in titles] == ["GPUs requested", "EFA interfaces", "CPU requested", "Memory requested"]
    words = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert f"{report['nodes']['whileTraining']} x {report['instanceType']}" in words
    assert f"${report['cost']['totalPerHourWhileTraining']:,.2f}/h" in words
    assert "100%" in words  # every GPU requested
    assert text == efficiency_svg(report)  # deterministic


def test_given_an_unfilled_resource_then_its_bar_is_red_and_an_unknown_cost_says_so():
    report = {"stack": "s", "instanceType": "p5.48xlarge", "nodes": {"whileTraining": 1},
              "gpus": {"fraction": 0.5, "requested": 4, "onNodes": 8}, "cost": {"totalPerHourWhileTraining": None}}
    root = ET.fromstring(efficiency_svg(report))
    fills = [r.get("fill") for r in root.iter(f"{SVG}rect")]
    assert "#c62828" in fills
    assert "unknown" in " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
