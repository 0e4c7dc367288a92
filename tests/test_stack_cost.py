"""The cost line bills the whole stack: control plane (standard or extended support), system nodes,
NAT gateways and their addresses, FSx for Lustre, volumes and keys, not only the GPU nodes; an
item without a price says why, and then the total is unknown too, by one rule."""

from __future__ import annotations

import pytest

from rlinf_eks import pricing
from rlinf_eks.offline.outputs.efficiency import efficiency_report, render_efficiency
from tests.harness import STACKS, plan_stack

BEFORE_1_34_ENDS, AFTER_1_34_ENDS = "2026-11-30", "2026-12-03"


def _cost(stack: str, *sets: str, on: str = BEFORE_1_34_ENDS) -> dict:
    plan = plan_stack(stack, *sets)
    return efficiency_report(plan, plan.settings, on_date=on)["cost"]


def _items(cost: dict) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for item in cost["items"]:
        assert item["item"] not in found or item["item"].startswith("system"), item["item"]
        found[item["item"]] = item
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_bills_control_plane_system_nodes_nat_and_gpu_nodes_and_the_total_adds_up(stack):
    cost = _cost(stack)
    items = _items(cost)
    assert {"gpuNodes", "controlPlane", "systemNodes", "natGateways", "publicIpv4", "kmsKeys"} <= set(items)
    assert items["controlPlane"]["perHourWhileTraining"] == pricing.EKS_STANDARD_PER_HOUR
    assert items["systemNodes"]["quantity"]["idle"] == 2 and items["systemNodes"]["unit"] == "m6i.xlarge instance-hour"
    assert items["systemNodes"]["perHourIdle"] == pytest.approx(2 * 0.192)
    # one Elastic IP per NAT gateway
    assert items["publicIpv4"]["quantity"]["idle"] == items["natGateways"]["quantity"]["idle"]
    assert ("sharedFilesystem" in items) is plan_stack(stack).settings.shared_filesystem
    for scenario in ("WhileTraining", "Idle", "AtMax"):
        assert cost[f"totalPerHour{scenario}"] == pytest.approx(sum(i[f"perHour{scenario}"] for i in cost["items"]), abs=1e-3)
    assert cost["items"][0]["perHourWhileTraining"] == cost["perHourWhileTraining"]  # the GPU line as before
    assert cost["totalPerHourWhileTraining"] > cost["perHourWhileTraining"] + 0.5
    assert any("S3" in line for line in cost["usageBased"])


def test_nat_gateways_follow_the_network_setting():
    assert _items(_cost("single-node"))["natGateways"]["quantity"]["idle"] == 1
    multi = _items(_cost("multi-node"))  # natGateways: one-per-az
    assert multi["natGateways"]["quantity"]["idle"] == 2
    assert multi["natGateways"]["perHourIdle"] == pytest.approx(2 * 0.045)


def test_fsx_is_billed_per_gb_month_of_its_throughput_tier():
    fsx = _items(_cost("multi-node"))["sharedFilesystem"]  # 2400 GiB at 250 MB/s/TiB
    assert fsx["quantity"]["idle"] == 2400
    assert fsx["perHourIdle"] == pytest.approx(2400 * 0.210 / 730, abs=1e-4)
    faster = _items(_cost("multi-node", "storage.sharedFilesystem.throughputMbpsPerTib=1000"))["sharedFilesystem"]
    assert faster["perHourIdle"] == pytest.approx(2400 * 0.600 / 730, abs=1e-4)


@pytest.mark.parametrize(
    "version, on, rate, tier",
    [
        ("1.34", BEFORE_1_34_ENDS, 0.10, "standard support until 2026-12-02"),
        ("1.34", AFTER_1_34_ENDS, 0.60, "extended support: standard support of 1.34 ended 2026-12-02"),
        ("1.35", AFTER_1_34_ENDS, 0.10, "standard support until 2027-03-27"),
        ("1.32", BEFORE_1_34_ENDS, 0.60, "extended support"),
    ],
)
def test_the_control_plane_costs_six_times_more_in_extended_support(version, on, rate, tier):
    from rlinf_eks.offline.outputs.plan import make_plan
    from rlinf_eks.offline.engine.stack_config import load
    from tests.harness import ROOT

    config = load(ROOT, "autoscaled")  # a structured value: `--set` would read 1.30 as a number
    config.values["rlinf-eks:cluster"] = {**config.values["rlinf-eks:cluster"], "kubernetesVersion": version}
    config.values["rlinf-eks:autoscaler"] = {"enabled": True, "imageTag": {"1.32": "v1.32.1", "1.34": "v1.34.2", "1.35": "v1.35.0"}[version]}
    plan = make_plan(config)
    cost = efficiency_report(plan, plan.settings, on_date=on)["cost"]
    plane = _items(cost)["controlPlane"]
    assert plane["perHourIdle"] == rate
    assert plane["price"]["detail"].startswith(tier)
    assert cost["supportTierDate"] == on
    warned = [w for w in efficiency_report(plan, plan.settings, on_date=on)["warnings"] if "extended support" in w]
    assert bool(warned) is (rate == pricing.EKS_EXTENDED_PER_HOUR)


def test_scale_to_zero_idles_at_the_cost_of_everything_but_the_gpu_nodes():
    cost = _cost("autoscaled")
    gpu = _items(cost)["gpuNodes"]
    assert gpu["perHourIdle"] == 0 and gpu["perHourWhileTraining"] > 0
    assert cost["totalPerHourIdle"] == pytest.approx(
        cost["totalPerHourWhileTraining"] - gpu["perHourWhileTraining"] - _items(cost)["gpuNodeVolumes"]["perHourWhileTraining"], abs=1e-3
    )
    assert cost["totalPerHourIdle"] > 0.5  # control plane, system nodes, NAT


@pytest.mark.parametrize(
    "stack, sets, unknown",
    [
        # p5 is not sold in eu-west-1; its system nodes are priced, its volumes and NAT not
        ("single-node", ("aws:region=eu-west-1", "availabilityZone=eu-west-1a"),
         {"gpuNodes", "gpuNodeVolumes", "systemNodeVolumes", "natGateways"}),
        # a region outside the price table: every regional item says so
        ("single-node", ("aws:region=af-south-1", "availabilityZone=af-south-1a"),
         {"gpuNodes", "gpuNodeVolumes", "systemNodeVolumes", "natGateways"}),
        # GPU nodes, system nodes (and volumes, NAT) priced in us-west-2, the shared filesystem
        # not: the total is still unknown
        ("capacity-block", ("aws:region=us-west-2", "availabilityZone=us-west-2a"), {"sharedFilesystem"}),
    ],
    ids=["eu-west-1", "af-south-1", "us-west-2-fsx"],
)
def test_an_item_without_a_price_says_why_and_makes_the_total_unknown(stack, sets, unknown):
    cost = _cost(stack, *sets)
    items = _items(cost)
    assert {name for name, i in items.items() if i["price"]["usdPerUnitHour"] is None} == unknown
    for name in unknown:
        assert items[name]["perHourWhileTraining"] is None and items[name]["perHourIdle"] is None
        assert items[name]["price"]["reason"] and name in cost["totalUnknownReason"]
    assert cost["totalPerHourWhileTraining"] is None and cost["totalPerHourIdle"] is None and cost["totalPerHourAtMax"] is None
    # the priced items keep their figures: the control plane costs the same in every region
    assert items["controlPlane"]["perHourIdle"] == 0.10
    assert all(items[name]["perHourIdle"] is not None for name in set(items) - unknown)
    plan = plan_stack(stack, *sets)
    assert "stack cost   unknown: " in render_efficiency(efficiency_report(plan, plan.settings, on_date=BEFORE_1_34_ENDS))


def test_an_existing_cluster_bills_no_control_plane_here():
    sets = (
        "cluster.existing=true", "cluster.name=shared", "network.vpcId=vpc-0a1b2c3d4e5f60718",
        "network.privateSubnetIds[0]=subnet-0a1b2c3d4e5f60711", "network.privateSubnetIds[1]=subnet-0a1b2c3d4e5f60712",
        "network.gpuSubnetId=subnet-0a1b2c3d4e5f60711", "kubeconfig={}",
    )
    cost = _cost("single-node", *sets)
    assert "controlPlane" not in _items(cost) and "natGateways" not in _items(cost)
    assert any("existing cluster" in note for note in cost["notes"])


def test_the_rendered_report_lists_every_item_and_the_usage_based_charges():
    plan = plan_stack("multi-node", "cluster.kubernetesVersion=1.34")
    text = render_efficiency(efficiency_report(plan, plan.settings, on_date=AFTER_1_34_ENDS))
    assert "  stack cost   $" in text and "everything the stack bills by the hour" in text
    for name in ("gpuNodes", "controlPlane", "systemNodes", "natGateways", "sharedFilesystem", "kmsKeys"):
        assert f"    {name} " in text
    assert "extended support" in text and "$0.0014/h" in text and "plus usage-based: S3" in text
