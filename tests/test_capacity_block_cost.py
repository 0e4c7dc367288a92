"""Issue 55, item 3: a Capacity Block's price is the block's whole price, paid up front at
reservation whether its nodes run or not: the plan bills the GPU nodes at the block's rate idle
too, prints the block's whole price (instances x hours x rate, and what it leaves out), and warns
when the On-Demand price stands in for the block's rate."""

from __future__ import annotations

from pathlib import Path

from rlinf_eks import pricing
from rlinf_eks.__main__ import main
from rlinf_eks.offline.outputs.capacity_block import capacity_block_cost, render
from rlinf_eks.offline.outputs.efficiency import efficiency_report, render_efficiency
from tests.harness import plan_stack, settings

ROOT = Path(__file__).resolve().parents[1]
HOURS = 168  # the example block: 2031-01-13T11:30Z to 2031-01-20T11:30Z


def _report(*sets: str):
    plan = plan_stack("capacity-block", *sets)
    return efficiency_report(plan, plan.settings)


def test_the_block_is_billed_idle_too_and_priced_whole_at_the_on_demand_stand_in():
    report = _report()
    on_demand = pricing.on_demand_price("p5en.48xlarge", "us-east-1").usd_per_hour
    gpu = next(i for i in report["cost"]["items"] if i["item"] == "gpuNodes")
    assert gpu["perHourIdle"] == gpu["perHourWhileTraining"] == round(2 * on_demand, 4)
    block = report["cost"]["capacityBlock"]
    assert (block["instances"], block["hours"], block["totalUsd"]) == (2, HOURS, round(2 * HOURS * on_demand, 2))
    text = render_efficiency(report)
    assert f"the Capacity Block: ${2 * HOURS * on_demand:,.2f}, paid up front at reservation, in full whether its nodes run or not" in text
    assert "not included: the operating system fee" in text
    assert "$0.00/h idle  (Capacity Block" not in text and "a 30-minute run: " not in text
    assert any(w.startswith("Capacity Block rate not given") and "gpuNodes.capacityBlock.usdPerInstanceHour" in w for w in report["warnings"])
    assert not any(w.startswith("capacity type CAPACITY_BLOCK") for w in report["warnings"])


def test_the_blocks_own_rate_prices_it_and_silences_the_warning():
    report = _report("gpuNodes.capacityBlock.usdPerInstanceHour=31.464")
    block = report["cost"]["capacityBlock"]
    assert block["totalUsd"] == round(2 * HOURS * 31.464, 2) == 10571.9
    assert block["rateFrom"] == "gpuNodes.capacityBlock.usdPerInstanceHour"
    assert report["cost"]["totalPerHourIdle"] >= 2 * 31.464
    assert not any("Capacity Block rate" in w for w in report["warnings"])


def test_the_plan_prints_the_blocks_whole_price(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    status = main(["plan", "capacity-block", "--set", "gpuNodes.capacityBlock.usdPerInstanceHour=31.464", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert status == 0
    assert "  the Capacity Block: $10,571.90, paid up front at reservation" in out
    assert "(2 instances x 168 h x $31.46 per instance-hour: gpuNodes.capacityBlock.usdPerInstanceHour)" in out
    assert "  cost         $62.93/h while the Capacity Block lasts, its 2 nodes running or not" in out


def test_a_block_without_its_times_says_its_whole_price_is_not_known():
    s = settings(gpuNodes={"instanceType": "p5.48xlarge", "nodeCount": 2, "capacityType": "CAPACITY_BLOCK",
                       "capacityReservationId": "cr-0a1b2c3d4e5f67890"})
    block = capacity_block_cost(s)
    assert block["hours"] is None and block["totalUsd"] is None and block["perHour"] is not None
    assert render(block) == [
        "  the Capacity Block: paid up front at reservation, in full whether its nodes run or not; its whole price is not known "
        "offline (its hours: capacityBlock.startTime and endTime give them)"
    ]


def test_other_capacity_types_have_no_block():
    assert capacity_block_cost(plan_stack("multi-node").settings) is None


def test_quiet_says_the_block_is_paid_up_front(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    status = main(["plan", "capacity-block", "--quiet", "--set", "gpuNodes.capacityBlock.usdPerInstanceHour=31.464", "--out", str(tmp_path / "o")])
    cost = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cost: "))
    assert status == 0 and cost.endswith("; the Capacity Block $10,571.90, paid up front)")
