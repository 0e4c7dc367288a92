"""verify knows Karpenter's fallback types: a GPU node of any type the NodePool allows
(gpuNodes.instanceType, then gpuNodes.fallbackInstanceTypes) is judged by that type's catalog row
(GPUs, EFA devices, hugepages exactly; memory capacity at least the type's RAM less the VM
overhead), not reported as the wrong type; a type the NodePool does not allow still is."""

from __future__ import annotations

import functools
from typing import Any

from rlinf_eks import catalog
from rlinf_eks.offline.outputs import plan as plan_mod
from rlinf_eks.offline.engine.stack_config import load, project_root
from rlinf_eks.verify.expect import Expectation, expectation_of
from rlinf_eks.verify.model import Observed
from rlinf_eks.verify.nodes import check_nodes
from tests.test_verify_checks import all_pass, failed_one, gpu_node, result

KARPENTER = ("gpuNodes.provisioner=karpenter",)


@functools.lru_cache(maxsize=None)
def karpenter_expect(*sets: str) -> Expectation:
    """multi-node with Karpenter and ``sets``, read as verify reads a stack (no plan needed)."""
    settings = plan_mod.settings_of(load(project_root(), "multi-node", [*KARPENTER, *sets]), None)
    return expectation_of(settings, "multi-node")


def p5e() -> Expectation:
    return karpenter_expect("gpuNodes.fallbackInstanceTypes[0]=p5e.48xlarge")


def g5_g6e() -> Expectation:
    return karpenter_expect("gpuNodes.instanceType=g5.8xlarge", "gpuNodes.fallbackInstanceTypes[0]=g6e.8xlarge")


def of_type(e: Expectation, index: int, instance_type: str, **edits: Any) -> dict[str, Any]:
    """A GPU node as Karpenter launches one of ``instance_type``: its type's labels, memory and
    allocatable (GPUs, EFA devices, hugepages from its own catalog row)."""
    node = gpu_node(e, index, **edits)
    instance = catalog.CATALOG[instance_type]
    labels = node["metadata"]["labels"]
    labels["node.kubernetes.io/instance-type"] = labels["beta.kubernetes.io/instance-type"] = instance_type
    labels["karpenter.sh/nodepool"] = "rlinf-gpu"
    shape = e.gpu.shape(instance_type)
    status = node["status"]
    _, memory_mib = catalog.allocatable(instance, 5 * 1024)
    status["allocatable"].update({**(shape.allocatable if shape else {}), "cpu": str(instance.vcpu - 1), "memory": f"{memory_mib}Mi"})
    status["capacity"].update({"cpu": str(instance.vcpu), "memory": f"{catalog.memory_capacity_mib(instance)}Mi"})
    for path, value in edits.items():  # the edits win over the type's figures
        *parents, last = path.split(".")
        obj = node
        for part in parents:
            obj = obj.setdefault(part, {})
        obj[last] = value
    return node


def nodes(e: Expectation, *types: str, **edits: Any) -> Observed:
    return Observed(nodes=[of_type(e, i, kind, **(edits if i == len(types) - 1 else {})) for i, kind in enumerate(types)])


def test_the_expectation_holds_each_allowed_types_shape_in_order():
    fallback_p5e, fallback_g6e = p5e(), g5_g6e()
    assert fallback_p5e.gpu.instance_types == ("p5.48xlarge", "p5e.48xlarge")
    assert fallback_g6e.gpu.instance_types == ("g5.8xlarge", "g6e.8xlarge")
    g5, g6e = fallback_g6e.gpu.shapes
    assert g5.allocatable == g6e.allocatable == {"nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1", "hugepages-2Mi": "5Gi"}
    assert (g5.memory_capacity, g6e.memory_capacity) == ("121241Mi", "242483Mi")  # 128 and 256 GiB less 7.5%


def test_a_managed_group_allows_its_one_type():
    e = expectation_of(plan_mod.settings_of(load(project_root(), "multi-node", []), None), "multi-node")
    assert e.gpu.instance_types == ("p5.48xlarge",)


def test_nodes_of_the_preferred_and_a_fallback_type_pass_and_the_fallback_is_named():
    fallback_p5e = p5e()
    results = check_nodes(fallback_p5e, nodes(fallback_p5e, "p5.48xlarge", "p5e.48xlarge"))
    all_pass(results)
    assert result(results, "gpu-nodes.instance-type").detail == (
        "every GPU node of a type the NodePool allows: 1 p5.48xlarge, 1 p5e.48xlarge (fallback)"
    )


def test_a_fallback_node_is_judged_by_its_own_memory_not_the_preferred_types():
    fallback_g6e = g5_g6e()
    # 200 GiB passes for a g5.8xlarge (128 GiB) but a g6e.8xlarge has 256 GiB
    short = {"status.capacity.memory": "200Gi"}
    check = failed_one(check_nodes(fallback_g6e, nodes(fallback_g6e, "g5.8xlarge", "g6e.8xlarge", **short)), "gpu-nodes.allocatable")
    assert check.detail.endswith("memory capacity 200Gi (a g6e.8xlarge has at least 242483Mi)")
    assert "less memory than a g6e.8xlarge" in check.remedy
    all_pass(check_nodes(fallback_g6e, nodes(fallback_g6e, "g6e.8xlarge", "g5.8xlarge", **short)))


def test_a_fallback_node_without_its_efa_devices_fails_naming_the_efa_plugin():
    fallback_p5e = p5e()
    observed = nodes(fallback_p5e, "p5.48xlarge", "p5e.48xlarge")
    observed.nodes[1]["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "0"
    check = failed_one(check_nodes(fallback_p5e, observed), "gpu-nodes.allocatable")
    assert "vpc.amazonaws.com/efa 0 (expects 32)" in check.detail and "aws-efa-k8s-device-plugin" in check.remedy


def test_a_type_the_nodepool_does_not_allow_is_still_the_wrong_type():
    fallback_p5e = p5e()
    check = failed_one(check_nodes(fallback_p5e, nodes(fallback_p5e, "p5.48xlarge", "p5en.48xlarge")), "gpu-nodes.instance-type")
    assert "not p5.48xlarge or p5e.48xlarge" in check.detail and "p5en.48xlarge" in check.detail
    assert check.remedy.startswith("the NodePool allows p5.48xlarge, p5e.48xlarge (gpuNodes.instanceType, then fallbackInstanceTypes)")
