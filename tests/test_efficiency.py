"""The efficiency report: computed from registered resources (hand-built plan.json dicts here, whole
stacks at the end), priced from the dated table."""

from __future__ import annotations

import re
from typing import Any, Optional

import pytest

from rlinf_eks import catalog, pricing
from rlinf_eks.offline.outputs import efficiency
from rlinf_eks.offline.outputs.efficiency import efficiency_of, quantity, render_efficiency

from tests.harness import ROOT, STACKS, plan_stack

P5 = catalog.CATALOG["p5.48xlarge"]
HUGEPAGES_MIB = 5120


# --- hand-built plans -----------------------------------------------------------------------------


def _res(type_: str, name: str, inputs: dict[str, Any], id_: Optional[str] = None) -> dict[str, Any]:
    return {"type": type_, "name": name, "id": id_ or f"{name}-id", "urn": f"urn:{type_}::{name}", "parent": None, "inputs": inputs}


def _container(shape: catalog.PodShape, gpus: Optional[int] = None, efa: Optional[int] = None) -> dict[str, Any]:
    extended = {
        "nvidia.com/gpu": str(shape.gpus if gpus is None else gpus),
        "vpc.amazonaws.com/efa": str(shape.efa if efa is None else efa),
        "hugepages-2Mi": f"{shape.hugepages_2mi_mib}Mi",
    }
    return {
        "name": "trainer",
        "resources": {
            "requests": {"cpu": shape.cpu, "memory": shape.memory, **extended},
            "limits": {"memory": shape.memory, **extended},
        },
    }


def hand_built_plan(
    instance: catalog.InstanceType = P5,
    *,
    nodes: int = 2,
    min_size: Optional[int] = None,
    desired: Optional[int] = None,
    azs: tuple[str, ...] = ("us-east-1a",),
    placement_group: Optional[str] = "gpu-pg",
    pod_gpus: Optional[int] = None,
    pods: Optional[int] = None,
    capacity_type: str = "ON_DEMAND",
) -> list[dict[str, Any]]:
    """A GPU node group of ``nodes`` nodes (one subnet per AZ in ``azs``), its launch template with
    the catalog's EFA interfaces, and an Indexed Job of one full-node training pod per node."""
    shape = catalog.pod_shape_for(instance, HUGEPAGES_MIB, 0.4)
    subnets = [_res("aws:ec2/subnet:Subnet", f"private-{az}", {"availabilityZone": az}, f"subnet-{az}") for az in azs]
    nics = [
        {"networkCardIndex": nic.network_card_index, "deviceIndex": nic.device_index, "interfaceType": nic.interface_type}
        for nic in catalog.efa_interfaces_for(instance)
    ]
    template_inputs: dict[str, Any] = {"instanceType": instance.name, "networkInterfaces": nics}
    resources = [*subnets]
    if placement_group:
        # auto-named: no name input, the id (EC2's group name) is what the template refers to
        resources.append(_res("aws:ec2/placementGroup:PlacementGroup", "gpu-placement", {"strategy": "cluster"}, placement_group))
        template_inputs["placement"] = {"groupName": placement_group}
    resources.append(_res("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt", template_inputs, "lt-0123"))
    resources.append(
        _res(
            "aws:eks/nodeGroup:NodeGroup",
            "gpu-nodes",
            {
                "scalingConfig": {
                    "minSize": nodes if min_size is None else min_size,
                    "desiredSize": nodes if desired is None else desired,
                    "maxSize": nodes,
                },
                "subnetIds": [s["id"] for s in subnets],
                "launchTemplate": {"id": "lt-0123", "version": "1"},
                "capacityType": capacity_type,
            },
        )
    )
    resources.append(_res("aws:eks/nodeGroup:NodeGroup", "system", {"instanceTypes": ["m6i.xlarge"], "scalingConfig": {"minSize": 2, "desiredSize": 2, "maxSize": 2}}))
    count = nodes if pods is None else pods
    resources.append(
        _res(
            "kubernetes:batch/v1:Job",
            "rlinf-trainer",
            {
                "kind": "Job",
                "metadata": {"name": "rlinf-trainer", "namespace": "rlinf"},
                "spec": {"parallelism": count, "completions": count, "template": {"spec": {"containers": [_container(shape, gpus=pod_gpus)]}}},
            },
        )
    )
    return resources


# --- fractions ------------------------------------------------------------------------------------


def test_given_one_full_node_pod_per_node_when_reported_then_gpus_and_efa_are_fully_used():
    report = efficiency_of(hand_built_plan(nodes=2), instance=P5, region="us-east-1")

    assert report["trainingPods"]["count"] == 2
    assert report["gpus"] == {"requested": 2 * P5.gpus, "onNodes": 2 * P5.gpus, "fraction": 1.0}
    assert report["efaInterfaces"]["attached"] == 2 * len(catalog.efa_interfaces_for(P5))
    assert report["efaInterfaces"]["fraction"] == 1.0


def test_given_full_node_pods_when_reported_then_cpu_and_memory_fractions_follow_the_catalog():
    shape = catalog.pod_shape_for(P5, HUGEPAGES_MIB, 0.4)
    alloc_cpu, alloc_mem = catalog.allocatable(P5, HUGEPAGES_MIB)

    report = efficiency_of(hand_built_plan(nodes=3), instance=P5, region="us-east-1")

    assert report["cpu"]["allocatableMillicpu"] == 3 * alloc_cpu
    assert report["cpu"]["fraction"] == pytest.approx(shape.millicpu / alloc_cpu, abs=1e-4)
    assert report["memory"]["fraction"] == pytest.approx(shape.memory_mib / alloc_mem, abs=1e-4)
    assert 0.8 < report["cpu"]["fraction"] <= 1.0 and 0.8 < report["memory"]["fraction"] <= 1.0


def test_given_pods_asking_half_the_gpus_when_reported_then_the_gpu_fraction_is_one_half():
    report = efficiency_of(hand_built_plan(pod_gpus=P5.gpus // 2), instance=P5, region="us-east-1")
    assert report["gpus"]["fraction"] == 0.5


def test_given_fewer_pods_than_nodes_when_reported_then_the_idle_node_shows_in_every_fraction():
    report = efficiency_of(hand_built_plan(nodes=4, pods=3), instance=P5, region="us-east-1")
    assert report["gpus"]["fraction"] == 0.75
    assert report["efaInterfaces"]["fraction"] == 0.75


def test_given_limits_only_and_an_init_container_when_pod_requests_then_limits_count_and_init_takes_the_max():
    spec = {
        "initContainers": [{"name": "wait", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
        "containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1500m", "nvidia.com/gpu": 8}}},
            {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}},
        ],
    }
    requests = efficiency.pod_requests(spec)
    assert requests["cpu"] == 4.0  # init container 4 > 1.5 + 1
    assert requests["nvidia.com/gpu"] == 8
    assert requests["memory"] == 1024**3


@pytest.mark.parametrize(
    "text, value", [("190", 190.0), ("500m", 0.5), ("2Gi", 2 * 1024**3), ("5120Mi", 5120 * 1024**2), ("1G", 1e9), (8, 8.0)]
)
def test_quantities_parse_like_kubernetes(text, value):
    assert quantity(text) == value


def test_a_malformed_quantity_is_refused():
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("12 cores")


def test_given_a_rayjob_with_an_embedded_cluster_when_reported_then_head_and_workers_with_gpus_count():
    shape = catalog.pod_shape_for(P5, HUGEPAGES_MIB, 0.4)
    resources = [r for r in hand_built_plan(nodes=3) if r["type"] != "kubernetes:batch/v1:Job"]
    pod = {"containers": [_container(shape)]}
    resources.append(
        _res(
            "kubernetes:ray.io/v1:RayJob",
            "rlinf",
            {
                "kind": "RayJob",
                "metadata": {"name": "rlinf"},
                "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": pod}}, "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2, "template": {"spec": pod}}]}},
            },
        )
    )
    report = efficiency_of(resources, instance=P5, region="us-east-1")
    assert report["trainingPods"]["count"] == 3
    assert report["gpus"]["fraction"] == 1.0


def test_given_a_preflight_job_when_reported_then_it_is_not_counted_as_a_training_pod():
    resources = hand_built_plan(nodes=2)
    preflight = dict(resources[-1], name="rlinf-preflight", urn="urn:preflight")
    report = efficiency_of([*resources, preflight], instance=P5, region="us-east-1")
    assert report["trainingPods"]["count"] == 2


# --- placement ------------------------------------------------------------------------------------


def test_given_one_subnet_and_one_placement_group_then_one_az_and_one_group():
    report = efficiency_of(hand_built_plan(azs=("us-east-1a",)), instance=P5, region="us-east-1")
    assert report["placement"]["oneAvailabilityZone"] is True
    assert report["placement"]["availabilityZones"] == ["us-east-1a"]
    assert report["placement"]["onePlacementGroup"] is True
    assert report["placement"]["placementGroupStrategies"] == ["cluster"]


def test_given_subnets_in_two_azs_then_not_one_az():
    report = efficiency_of(hand_built_plan(azs=("us-east-1a", "us-east-1b")), instance=P5, region="us-east-1")
    assert report["placement"]["oneAvailabilityZone"] is False
    assert report["placement"]["availabilityZones"] == ["us-east-1a", "us-east-1b"]


def test_given_no_placement_group_then_not_one_placement_group():
    report = efficiency_of(hand_built_plan(placement_group=None), instance=P5, region="us-east-1")
    assert report["placement"]["onePlacementGroup"] is False


def test_given_a_subnet_given_by_id_then_its_az_comes_from_the_settings():
    resources = [r for r in hand_built_plan() if r["type"] != "aws:ec2/subnet:Subnet"]
    assert efficiency_of(resources, instance=P5, region="us-east-1")["placement"]["oneAvailabilityZone"] is False
    report = efficiency_of(resources, instance=P5, region="us-east-1", known_az="us-east-1a")
    assert report["placement"]["oneAvailabilityZone"] is True


# --- prices ---------------------------------------------------------------------------------------


def test_given_two_always_on_nodes_then_training_and_idle_cost_are_two_node_hours():
    price = pricing.on_demand_price("p5.48xlarge", "us-east-1").usd_per_hour
    report = efficiency_of(hand_built_plan(nodes=2), instance=P5, region="us-east-1")
    assert report["cost"]["perHourWhileTraining"] == pytest.approx(2 * price)
    assert report["cost"]["perHourIdle"] == pytest.approx(2 * price)


def test_given_scale_to_zero_then_idle_costs_nothing_and_training_nodes_come_from_the_pods():
    price = pricing.on_demand_price("p5.48xlarge", "us-east-1").usd_per_hour
    report = efficiency_of(hand_built_plan(nodes=4, min_size=0, desired=0, pods=3), instance=P5, region="us-east-1")
    assert report["cost"]["perHourIdle"] == 0
    assert report["nodes"]["whileTraining"] == 3
    assert report["cost"]["perHourWhileTraining"] == pytest.approx(3 * price)
    assert report["cost"]["perHourAtMax"] == pytest.approx(4 * price)
    assert report["gpus"]["fraction"] == 1.0


def test_given_a_region_without_prices_then_cost_is_unknown_with_a_reason():
    report = efficiency_of(hand_built_plan(), instance=P5, region="af-south-1")
    assert report["cost"]["perHourWhileTraining"] is None
    assert "af-south-1" in report["cost"]["price"]["reason"]
    assert "unknown: p5.48xlarge: no price sourced for region af-south-1" in render_efficiency(report)


def test_given_spot_capacity_then_a_warning_says_the_on_demand_price_is_a_reference():
    report = efficiency_of(hand_built_plan(capacity_type="SPOT"), instance=P5, region="us-east-1")
    assert any("SPOT" in w for w in report["warnings"])


def test_every_catalog_type_has_a_row_in_every_priced_region_with_a_source_and_date_or_a_reason():
    for region in pricing.REGIONS:
        for name in catalog.CATALOG:
            row = pricing.PRICES[(name, region)]
            # a row without a price names the source that does not sell the type there
            assert row.source in pricing.SOURCES and row.as_of
            assert row.usd_per_hour > 0 if row.known else row.reason


def test_p4_and_p5_prices_are_dated_after_the_june_2025_cut():
    for (name, region), row in pricing.PRICES.items():
        if row.known and catalog.CATALOG[name].family in ("p4d", "p4de", "p5", "p5e", "p5en"):
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.as_of) and row.as_of >= "2025-06", (name, region, row.as_of)


def test_render_names_fractions_and_cost():
    report = efficiency_of(hand_built_plan(nodes=2), instance=P5, region="us-east-1")
    text = render_efficiency(report)
    assert "GPUs         16 of 16" in text and "(100.0%)" in text
    assert f"${2 * pricing.on_demand_price('p5.48xlarge', 'us-east-1').usd_per_hour:,.2f}/h while training" in text


# --- whole stacks ---------------------------------------------------------------------------------


def _stack_plan(stack: str):
    return plan_stack(stack)


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_training_pods_fill_the_gpu_nodes(stack):
    from rlinf_eks.offline.outputs.plan import settings_of
    from rlinf_eks.offline.engine.stack_config import load

    stack_settings = settings_of(load(ROOT, stack, []))
    if not stack_settings.workload.enabled:
        pytest.skip(f"stack {stack} has no workload")
    report = efficiency.efficiency_report(_stack_plan(stack), stack_settings)

    assert report["gpus"]["fraction"] == 1.0, report["gpus"]
    if stack_settings.gpu_nodes.efa:
        assert report["efaInterfaces"]["fraction"] == 1.0, report["efaInterfaces"]
    # of what the node can spare after the kubelet and its DaemonSets (a fixed share of a small
    # node: 1.6 of a g5.2xlarge's 7.9 allocatable cores with CloudWatch)
    spare = report["cpu"]["allocatableMillicpu"] - catalog.daemonset_budget(stack_settings.observability_backend)[0]
    assert 0.8 < report["cpu"]["requestedMillicpu"] / spare <= 1.0, report["cpu"]
    assert 0.8 < report["memory"]["fraction"] <= 1.0, report["memory"]
    assert report["placement"]["oneAvailabilityZone"] is True
    # nodes idle at zero with scale-to-zero, and before a Capacity Block starts; a Capacity Block is
    # paid whether its nodes run or not (offline/outputs/capacity_block.py: its rate, here the On-Demand stand-in)
    gpu = stack_settings.gpu_nodes
    block = gpu.capacity_type == "CAPACITY_BLOCK"
    expected_idle = gpu.node_count if block else 0 if gpu.scale_to_zero or gpu.scheduled_start else gpu.node_count
    if report["cost"]["onDemandPerNodeHour"] is not None:
        assert report["cost"]["perHourIdle"] == pytest.approx(expected_idle * report["cost"]["onDemandPerNodeHour"])



# --- the offline plan writes it -------------------------------------------------------------------


def test_given_a_plan_with_settings_when_written_then_efficiency_json_sits_beside_an_unchanged_plan_json(tmp_path):
    import json

    from rlinf_eks.offline.outputs import plan as plan_mod
    from tests.harness import settings

    stack_settings = settings(gpuNodes={"instanceType": "p5.48xlarge", "nodeCount": 2})
    plan = plan_mod.Plan("rlinf-eks", "test", hand_built_plan(nodes=2), {}, [], stack_settings)

    plan_mod.write(plan, tmp_path)

    written = json.loads((tmp_path / plan_mod.EFFICIENCY_FILE).read_text())
    assert written == json.loads(json.dumps(efficiency.efficiency_report(plan, stack_settings)))
    assert written["stack"] == "test" and written["gpus"]["fraction"] == 1.0
    # the efficiency report stays out of plan.json; firstStep (issue 35), the storage budget and the GPU
    # memory (issue 52) are plan.json's own for a stack that trains
    assert set(json.loads((tmp_path / plan_mod.PLAN_FILE).read_text())) == {
        "project", "stack", "resources", "outputs", "notPlanned", "firstStep", "storageBudget", "gpuMemory",
    }


def test_given_a_plan_without_settings_when_written_then_no_efficiency_json(tmp_path):
    from rlinf_eks.offline.outputs import plan as plan_mod

    plan_mod.write(plan_mod.Plan("rlinf-eks", "test", hand_built_plan(), {}, []), tmp_path)
    assert not (tmp_path / plan_mod.EFFICIENCY_FILE).exists()


# --- against the real GPU node group component ----------------------------------------------------


@pytest.mark.parametrize("scale_to_zero", [False, True])
def test_given_the_registered_gpu_node_group_then_the_report_reads_its_scaling_efa_and_placement(scale_to_zero):
    gpu_nodes = pytest.importorskip("rlinf_eks.gpu_nodes", reason="the GPU node group component is not written yet")
    from tests.harness import run_component, settings

    stack = settings(gpuNodes={"instanceType": "p5.48xlarge", "nodeCount": 2, "scaleToZero": scale_to_zero}, autoscaler={"enabled": True})
    registered = run_component(
        lambda: gpu_nodes.EfaGpuNodeGroup(
            "gpu", settings=stack.gpu_nodes, cluster_name="c", cluster_security_group_id="sg-1",
            subnet_id="subnet-0abc", autoscaled=True, tags={},
        )
    )
    training_job = [r for r in hand_built_plan(nodes=2) if r["type"] == "kubernetes:batch/v1:Job"]

    report = efficiency_of([*registered, *training_job], instance=P5, region="us-east-1", known_az="us-east-1a")

    price = pricing.on_demand_price("p5.48xlarge", "us-east-1").usd_per_hour
    assert report["nodes"]["whileTraining"] == 2
    assert report["efaInterfaces"]["perNode"] == len(catalog.efa_interfaces_for(P5))
    assert report["efaInterfaces"]["fraction"] == 1.0 and report["gpus"]["fraction"] == 1.0
    assert report["placement"]["onePlacementGroup"] is True and report["placement"]["placementGroupStrategies"] == ["cluster"]
    assert report["cost"]["perHourIdle"] == pytest.approx(0 if scale_to_zero else 2 * price)


def test_render_names_zones_and_groups_plainly_and_counts_pods_in_words():
    report = efficiency_of(hand_built_plan(nodes=1), instance=P5, region="us-east-1")
    text = render_efficiency(report)
    (placement,) = [line for line in text.splitlines() if line.strip().startswith("placement")]
    assert "[" not in placement and "'" not in placement
    zones = ", ".join(report["placement"]["availabilityZones"])
    assert f"one AZ: yes ({zones})" in placement
    assert report["trainingPods"]["count"] == 1 and "requested by 1 training pod (" in text
