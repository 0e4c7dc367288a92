"""Scheduling facts are stated once (scheduling.py) and EKS node roles are built once (node_role.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pulumi

from rlinf_eks import scheduling
from rlinf_eks.node_role import SSM_POLICY, WORKER_NODE_POLICIES, eks_node_role
from tests.harness import one, plan_stack, run_component

COMPONENTS = Path(__file__).resolve().parent.parent / "components"
ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def test_given_scheduling_facts_then_they_are_the_seeds_and_the_device_plugins_spellings():
    # spelled out on purpose: a changed fact breaks running pods' selectors and tolerations
    assert scheduling.GPU_TAINT.as_dict() == {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert scheduling.GPU_TAINT.eks_effect == "NO_SCHEDULE"
    assert scheduling.gpu_toleration() == {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert scheduling.node_taints() == [scheduling.GPU_TAINT.as_dict()]
    assert dict(scheduling.GPU_NODE_LABELS) == {"role": "gpu-training"}
    assert dict(scheduling.SYSTEM_NODE_LABELS) == {"role": "system"}
    assert scheduling.EFA_LABEL == "vpc.amazonaws.com/efa.present"
    assert scheduling.AUTOSCALER_GPU_LABEL == "k8s.amazonaws.com/accelerator"
    assert (scheduling.GPU_RESOURCE, scheduling.EFA_RESOURCE, scheduling.HUGEPAGES_2MI_RESOURCE) == (
        "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi",
    )


def test_given_old_import_paths_then_they_name_the_same_objects():
    from rlinf_eks import cluster, gpu_nodes, plan_reader

    assert cluster.SYSTEM_NODE_LABELS is scheduling.SYSTEM_NODE_LABELS
    assert gpu_nodes.GPU_TAINT is scheduling.GPU_TAINT and gpu_nodes.node_labels is scheduling.node_labels
    assert (plan_reader.GPU, plan_reader.EFA) == (scheduling.GPU_RESOURCE, scheduling.EFA_RESOURCE)


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    """String constants that are code, not docstrings."""
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        for body in [node.body]
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    }
    # attribute docstrings (a string statement after an assignment) are documentation too
    docstrings |= {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_given_the_library_then_only_scheduling_py_spells_a_scheduling_fact():
    facts = {
        scheduling.GPU_TAINT.key, scheduling.GPU_TAINT.effect, scheduling.GPU_TAINT.eks_effect,
        *scheduling.GPU_NODE_LABELS.values(), scheduling.EFA_LABEL, scheduling.AUTOSCALER_GPU_LABEL,
        scheduling.GPU_RESOURCE, scheduling.EFA_RESOURCE, scheduling.HUGEPAGES_2MI_RESOURCE,
    }
    label_keys = set(scheduling.GPU_NODE_LABELS) | set(scheduling.SYSTEM_NODE_LABELS)
    found = []
    for path in sorted(COMPONENTS.rglob("*.py")):
        if path.name == "scheduling.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(COMPONENTS)
        found += [f"{where}:{n.lineno}: {n.value!r}" for n in _code_strings(tree) if any(f in n.value for f in facts)]
        found += [
            f"{where}:{k.lineno}: dict key {k.value!r}"
            for node in ast.walk(tree) if isinstance(node, ast.Dict)
            for k in node.keys if isinstance(k, ast.Constant) and k.value in label_keys
        ]
    assert not found, "scheduling facts spelt outside components/scheduling.py:\n" + "\n".join(found)


def test_given_the_scan_then_it_sees_a_spelt_fact():
    # the scan above must be able to fail: a literal in code is found, the same text in a docstring is not
    tree = ast.parse('"""nvidia.com/gpu in a docstring"""\nSELECTOR = {"role": "gpu-training"}\n')
    assert [n.value for n in _code_strings(tree)] == ["role", "gpu-training"]


# --- the node role builder ----------------------------------------------------------------------


class _Parent(pulumi.ComponentResource):
    def __init__(self, name: str):
        super().__init__("test:index:Parent", name, None, None)
        self.node_role = eks_node_role(
            f"{name}-nodes", attachment_prefix=f"{name}-nodes", policies=WORKER_NODE_POLICIES, parent=self, tags={"team": "rl"}
        )
        self.register_outputs({})


def test_given_the_builder_when_run_then_role_and_one_attachment_per_policy_are_children_of_the_parent():
    run = run_component(lambda: _Parent("p"))
    role = one(run, ROLE, "p-nodes")
    assert role["parent"].endswith("test:index:Parent::p")
    assert json.loads(role["inputs"]["assumeRolePolicy"]) == {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    assert role["inputs"]["tags"] == {"team": "rl"}
    attachments = run.of_type(ATTACHMENT)
    assert sorted(a["name"] for a in attachments) == sorted(f"p-nodes-{p}" for p in WORKER_NODE_POLICIES)
    for attachment in attachments:
        assert attachment["parent"] == role["parent"]
        assert attachment["inputs"]["role"] == role["id"]
        assert attachment["inputs"]["policyArn"] == "arn:aws:iam::aws:policy/" + attachment["name"].removeprefix("p-nodes-")


def test_given_a_stack_then_both_node_roles_trust_ec2_and_carry_the_worker_policies():
    plan = plan_stack("single-node")
    roles = {r["name"]: r for r in plan.resources if r["type"] == ROLE and r["name"] in ("rlinf-system-nodes", "gpu-node-role")}
    assert set(roles) == {"rlinf-system-nodes", "gpu-node-role"}
    assert roles["rlinf-system-nodes"]["inputs"]["assumeRolePolicy"] == roles["gpu-node-role"]["inputs"]["assumeRolePolicy"]
    attached = {
        role: {a["inputs"]["policyArn"].rsplit("/", 1)[-1] for a in plan.resources if a["type"] == ATTACHMENT and a["inputs"]["role"] == r["id"]}
        for role, r in roles.items()
    }
    assert attached["rlinf-system-nodes"] == set(WORKER_NODE_POLICIES)
    assert attached["gpu-node-role"] == {*WORKER_NODE_POLICIES, SSM_POLICY}
