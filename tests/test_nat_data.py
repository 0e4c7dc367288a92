"""Issue 55, item 3: the plan estimates the data a run's start sends through the NAT gateway (the
image on every node, the staged inputs), without and with the S3 gateway endpoint a new VPC has."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.outputs.nat_data import nat_data_at_start
from tests.harness import plan_stack

ROOT = Path(__file__).resolve().parents[1]


def test_two_nodes_pull_the_ecr_image_through_the_endpoint_and_the_hub_model_through_nat():
    data = nat_data_at_start(plan_stack("multi-node").settings)
    image = next(p for p in data["parts"] if p["what"] == "image")
    assert image["gb"] == [30.0, 40.0] and image["viaS3"] is True
    model = next(p for p in data["parts"] if p["what"] == "model")
    assert model["viaS3"] is False and "once, on the shared filesystem" in model["why"]
    # with the endpoint only the Hub's model crosses the NAT gateway
    assert data["withEndpoint"]["gb"] == model["gb"]
    assert data["withoutEndpoint"]["gb"] == [round(30 + model["gb"][0], 1), round(40 + model["gb"][1], 1)]
    assert data["withoutEndpoint"]["usd"] == [round(g * 0.045, 2) for g in data["withoutEndpoint"]["gb"]]
    assert data["stackHasEndpoint"] is True
    assert any(n.startswith("lora hf://") for n in data["notCounted"])


def test_an_input_whose_size_is_unknown_is_named_not_counted():
    data = nat_data_at_start(plan_stack("vllm-rollout", "workload.model.source=s3://acme-models/qwen2.5-1.5b").settings)
    assert not any(p["what"] == "model" for p in data["parts"])
    assert "model s3://acme-models/qwen2.5-1.5b (size unknown offline)" in data["notCounted"]


def test_one_node_without_the_shared_filesystem_downloads_on_the_node():
    data = nat_data_at_start(plan_stack("single-node").settings)
    model = next(p for p in data["parts"] if p["what"] == "model")
    assert model["why"].endswith("about 15 GB on the node") and model["gb"] == data["withEndpoint"]["gb"]


def test_an_image_outside_ecr_crosses_nat_either_way():
    data = nat_data_at_start(plan_stack("quickstart", "workload.image=nvcr.io/nvidia/pytorch:25.01-py3").settings)
    assert data["withEndpoint"]["gb"] == data["withoutEndpoint"]["gb"] == [15.0, 20.0]


def test_the_plan_prints_the_line(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "multi-node", "--out", str(tmp_path / "o")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "NAT data at a run's start" in x)
    assert line.startswith("  NAT data at a run's start: ") and "without the S3 gateway endpoint" in line
    assert "0 GB" not in line.split("with it")[0] and "this stack's new VPC has it; at $0.045/GB" in line


@pytest.mark.parametrize("stack", ["platform"])
def test_a_stack_that_runs_nothing_has_no_estimate(stack):
    assert nat_data_at_start(plan_stack(stack).settings) is None
