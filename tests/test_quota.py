"""The Kueue quota arithmetic as pure functions: one node's pod x the nodes the pool holds, what a
run asks, and a run that can never fit rejected with its numbers before anything is created."""

from __future__ import annotations

import pytest

from rlinf_eks import catalog
from rlinf_eks.config import ConfigError
from rlinf_eks.quota import Resources, fit_problems, node_share, pool_nodes, queue_plan, shortfalls, topology_request
from rlinf_eks.workload.run import pod_shape
from tests.harness import plan_stack, settings

P5 = catalog.CATALOG["p5.48xlarge"]


def test_one_node_of_p5_holds_its_gpus_efa_and_the_pod_shape():
    shape = catalog.pod_shape_for(P5, 5 * 1024, 0.5)
    share = node_share(shape, efa=32)
    assert share.quantities() == {
        "cpu": "190",
        "memory": "1884Gi",
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "hugepages-2Mi": "5Gi",
    }
    assert share.times(3).quantities()["nvidia.com/gpu"] == "24"
    assert share.times(3).quantities()["memory"] == "5652Gi"
    # without EFA or hugepages those resources are not asked for, so not covered
    assert set(node_share(catalog.pod_shape_for(P5, 0, 0.5), efa=0).quantities()) == {"cpu", "memory", "nvidia.com/gpu"}


@pytest.mark.parametrize(
    ("node_count", "max_nodes", "autoscaled", "nodes"),
    [(2, None, False, 2), (2, 4, False, 2), (2, 4, True, 4), (2, None, True, 2), (1, 8, True, 8)],
)
def test_the_pool_holds_node_count_or_max_nodes_when_the_autoscaler_may_add_them(node_count, max_nodes, autoscaled, nodes):
    assert pool_nodes(node_count, max_nodes, autoscaled) == nodes


def test_the_autoscaled_stack_quota_is_max_nodes_of_p4d():
    plan = queue_plan(plan_stack("autoscaled").settings)
    assert plan.nodes == 2 and "maxNodes" in plan.nodes_from
    assert plan.quota.quantities() == {
        "cpu": "188",
        "memory": "2110Gi",
        "nvidia.com/gpu": "16",
        "vpc.amazonaws.com/efa": "8",
        "hugepages-2Mi": "10Gi",
    }
    wider = queue_plan(settings(gpuNodes={"instanceType": "p4d.24xlarge", "nodeCount": 2, "maxNodes": 6, "scaleToZero": True}, autoscaler={"enabled": True}))
    assert wider.nodes == 6 and wider.quota.gpus == 48 and wider.ask.gpus == 16 and not wider.shortfalls


def test_the_capacity_block_quota_is_the_blocks_nodes():
    plan = queue_plan(plan_stack("capacity-block").settings)
    assert plan.nodes == 2 and "Capacity Block" in plan.nodes_from
    # p5en: 16 EFA interfaces per node, not p5's 32
    assert plan.per_node.efa == 16 and plan.quota.quantities()["vpc.amazonaws.com/efa"] == "32"
    assert plan.quota.gpus == 16 and not plan.shortfalls


@pytest.mark.parametrize("stack", ["single-node", "multi-node", "multi-node-kuberay", "capacity-block", "autoscaled", "vllm-rollout"])
def test_the_node_share_is_the_runs_own_pod_shape(stack):
    s = plan_stack(stack).settings
    run_shape = pod_shape(s, sync=not s.shared_filesystem)
    share = queue_plan(s).per_node
    assert (share.gpus, share.efa, share.millicpu, share.memory_mib, share.hugepages_mib) == (
        run_shape.pod.gpus,
        run_shape.efa,
        run_shape.pod.millicpu,
        run_shape.pod.memory_mib,
        run_shape.pod.hugepages_2mi_mib,
    )


def test_shortfalls_name_each_resource_with_both_numbers():
    held = Resources(gpus=16, efa=64, millicpu=380_000, memory_mib=3768 * 1024)
    ask = Resources(gpus=24, efa=96, millicpu=570_000, memory_mib=3768 * 1024)
    assert shortfalls(ask, held) == [
        "cpu: asks 570, the pool holds 380",
        "nvidia.com/gpu: asks 24, the pool holds 16",
        "vpc.amazonaws.com/efa: asks 96, the pool holds 64",
    ]
    assert shortfalls(held, held) == []


def test_a_run_larger_than_the_pool_is_a_config_error_naming_the_numbers():
    s = plan_stack("multi-node").settings
    problems = fit_problems(queue_plan(s, run_nodes=3))
    assert len(problems) == 1
    assert problems[0].startswith("gpuNodes.nodeCount=3: the run asks for 3 nodes' worth but the pool holds 2 (gpuNodes.nodeCount 2)")
    assert "nvidia.com/gpu: asks 24, the pool holds 16" in problems[0]
    assert "Kueue would never admit it" in problems[0]
    assert fit_problems(queue_plan(s)) == []


def test_a_required_topology_that_cannot_be_met_is_rejected_before_anything_is_created():
    with pytest.raises(ConfigError) as err:
        settings(gpuNodes={"instanceType": "p4d.24xlarge", "nodeCount": 1, "maxNodes": 2, "scaleToZero": True}, autoscaler={"enabled": True}, queue={"topology": "required"})
    assert "queue.topology='required': cannot be required: the Cluster Autoscaler adds nodes only for pending pods" in str(err.value)
    with pytest.raises(ConfigError) as err:
        settings(gpuNodes={"instanceType": "g6e.48xlarge"}, queue={"topology": "required"})
    assert "g6e.48xlarge nodes carry no topology.k8s.aws/network-node-layer labels" in str(err.value)


def test_the_run_priority_must_be_one_of_the_classes():
    with pytest.raises(ConfigError) as err:
        settings(queue={"priority": "rlinf-hurry"})
    assert "priority 'rlinf-hurry' is not one of priorityClasses (rlinf-urgent, rlinf-normal, rlinf-low)" in str(err.value)


def test_the_topology_request():
    on = topology_request("required", 2, instance_type="p5.48xlarge", autoscaled=False)
    assert (on.on, on.label, on.annotation) == (True, "topology.k8s.aws/network-node-layer-2", "kueue.x-k8s.io/podset-required-topology")
    assert topology_request("preferred", 3, instance_type="p5.48xlarge", autoscaled=False).annotation == "kueue.x-k8s.io/podset-preferred-topology"
    assert not topology_request("preferred", 3, instance_type="p5.48xlarge", autoscaled=True).on
    assert not topology_request("off", 3, instance_type="p5.48xlarge", autoscaled=False).on
