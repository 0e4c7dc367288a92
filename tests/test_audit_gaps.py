"""Focused tests for gaps found by a mutation audit: each pins a figure that otherwise only the
golden snapshots caught (a re-recorded snapshot would have hidden the regression)."""

from __future__ import annotations

import pytest

from rlinf_eks import catalog


@pytest.mark.parametrize(
    "name, expected_max_pods",
    [("p5.48xlarge", 250), ("p4d.24xlarge", 250), ("g5.2xlarge", 110)],
)
def test_given_an_instance_when_sized_then_kube_reserved_memory_follows_the_eks_ami_formula(name, expected_max_pods):
    # amazon-eks-ami: 255 MiB + 11 MiB per pod the node may run (maxPods 250 above 30 vCPU, else 110)
    instance = catalog.lookup(name)
    assert catalog.max_pods(instance) == expected_max_pods
    assert catalog.kube_reserved_memory_mib(instance) == 255 + 11 * expected_max_pods


def test_given_a_p5_when_sized_then_allocatable_memory_leaves_out_kube_reserved_eviction_and_hugepages():
    p5 = catalog.lookup("p5.48xlarge")
    capacity = catalog.memory_capacity_mib(p5)
    _, memory = catalog.allocatable(p5, hugepages_2mi_mib=5120)
    # kube-reserved (255 + 11 * 250 = 3005 MiB) + evictionHard (100 MiB) + hugepages (5120 MiB)
    assert memory == capacity - 3005 - 100 - 5120


# checkov's CKV_K8S_25 / CKV_K8S_37 (added capabilities) are skipped per pod for the training pods
# (policy/checkov-skips.yaml, for the Ray container's IPC_LOCK), so they no longer see a sidecar or
# checkpoint container that adds a capability; the existing workload test renders only with a shared
# filesystem, where the checkpoint sync sidecar is absent.
@pytest.mark.parametrize("shared", [True, False])
def test_given_any_storage_when_rendered_then_only_the_efa_containers_add_a_capability_and_only_ipc_lock(shared):
    from tests.test_workload import multi_node, pod_spec, render

    spec = pod_spec(render(multi_node(preflight={"enabled": True}), shared=shared))
    helpers = spec["containers"][1:] + spec.get("initContainers", [])
    if not shared:
        assert helpers, "without a shared filesystem the checkpoint restore/sync containers must be rendered"
    # the EFA users (the Ray container and the NCCL preflight) pin memory: IPC_LOCK, nothing else
    efa_users = {spec["containers"][0]["name"], "preflight"}
    for container in spec["containers"] + spec.get("initContainers", []):
        ctx = container.get("securityContext", {})
        assert not ctx.get("privileged") and ctx.get("allowPrivilegeEscalation") is False, container["name"]
        added = set(ctx.get("capabilities", {}).get("add", []))
        assert added <= ({"IPC_LOCK"} if container["name"] in efa_users else set()), (container["name"], added)


# --- Hydra overrides: which keys the user's overrides touch (trainers/base.py) ---------------------
# Mutations no test caught: `overridden` matching the exact key only (not a key below it), or not
# stripping Hydra's ~ / + / ++ prefixes; integer sizes given as +key= / ++key= being ignored.


def _trainer_settings(*overrides: str):
    from tests.harness import settings

    return settings(workload={"image": "example.com/t:1", "trainer": {"dialect": "rlinf-embodied", "overrides": list(overrides)}})


@pytest.mark.parametrize(
    "override, key, expected",
    [
        ("cluster.component_placement.actor=0-7", "cluster.component_placement", True),  # a key below it
        ("~cluster.component_placement", "cluster.component_placement", True),  # deleted
        ("+cluster.component_placement={actor:0-7}", "cluster.component_placement", True),
        ("++runner.resume_dir=/fsx/keep", "runner.resume_dir", True),
        ("+cluster.component_placement_extra=1", "cluster.component_placement", False),  # a sibling, not below (added: the config has no such key)
        ("algorithm=x", "algorithm.resume_dir", False),  # a key above it (runner=x is refused: it replaces pinned keys)
    ],
)
def test_given_a_hydra_override_when_checked_then_it_touches_its_key_and_the_keys_below_it(override, key, expected):
    from rlinf_eks.trainers.base import overridden

    assert overridden(_trainer_settings(override), key) is expected


@pytest.mark.parametrize("prefix", ["", "+", "++"])
def test_given_an_integer_size_override_with_any_hydra_prefix_then_it_is_the_effective_size(prefix):
    from rlinf_eks.trainers.base import effective_sizes

    sizes = effective_sizes(_trainer_settings(f"{prefix}actor.global_batch_size=640"), {"actor.global_batch_size": 256})
    assert sizes["actor.global_batch_size"].value == 640
    assert sizes["actor.global_batch_size"].path == "workload.trainer.overrides[0]"


# test_workload / test_workload_stacks assert ``nodeSelector.items() <= labels.items()``, which an
# empty (or missing-key) selector passes: dropping the seed's ``role: gpu-training`` selector went
# unnoticed.
@pytest.mark.parametrize("stack", ["single-node", "multi-node", "multi-node-kuberay"])
def test_given_a_stack_when_planned_then_every_training_pod_selects_the_gpu_node_labels(stack):
    from rlinf_eks.scheduling import GPU_NODE_LABELS
    from tests.harness import one, plan_stack
    from tests.test_workload_stacks import pod_templates

    plan = plan_stack(stack)
    labels = one(plan, "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")["inputs"]["labels"]
    templates = pod_templates(plan)
    assert templates, "no training pods"
    for template in templates:
        selector = template["spec"].get("nodeSelector") or {}
        assert selector, "training pod without a nodeSelector"
        assert selector.items() >= GPU_NODE_LABELS.items(), selector  # the seed's role: gpu-training
        assert selector.items() <= labels.items(), (selector, labels)
