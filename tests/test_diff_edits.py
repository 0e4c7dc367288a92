"""Golden diffs for the edits people make, on every stack: the verdict per changed resource
(create, update in place, replace, delete), the data at risk, what `pulumi up` would refuse and the
warnings, as a real `pulumi preview` would give them. Recorded in tests/snapshots/diffs/<stack>.json
(re-record with RLINF_EKS_UPDATE_SNAPSHOTS=1 and review the change), with the verdicts issue 38
names asserted outright."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.offline.diff.diff import diff_plans
from rlinf_eks.offline.diff.verdicts import regional
from rlinf_eks.offline.engine.stack_config import StackConfigError
from tests.harness import ALL_STACKS, ROLES, plan_stack

SNAPSHOTS = Path(__file__).parent / "snapshots" / "diffs"
UPDATE = os.environ.get("RLINF_EKS_UPDATE_SNAPSHOTS") == "1"
OTHER_TYPE = {"p5.48xlarge": "p5en.48xlarge", "p5en.48xlarge": "p5.48xlarge", "p4d.24xlarge": "p5.48xlarge", "g5.2xlarge": "g6e.8xlarge"}
OTHER_AZ = {"us-east-1a": "us-east-1c", "us-east-1b": "us-east-1c"}


def edits(stack: str) -> dict[str, tuple[str, ...]]:
    """The edits of one stack, each as its --set settings (chosen from the stack's own values)."""
    s = plan_stack(stack).settings
    gpu = s.gpu_nodes
    backend = "cloudwatch" if s.observability_backend == "prometheus" else "prometheus"
    return {
        "instance-type": (f"gpuNodes.instanceType={OTHER_TYPE[gpu.instance_type]}",),
        # maxNodes only where something scales (it would have no effect elsewhere: refused)
        "node-count": (f"gpuNodes.nodeCount={gpu.node_count + 1}", *([f"gpuNodes.maxNodes={max(gpu.node_count + 1, gpu.max_nodes)}"] if gpu.max_nodes else [])),
        "availability-zone": (f"availabilityZone={OTHER_AZ.get(s.availability_zone or '', 'us-east-1c')}",),
        "region": ("aws:region=us-west-2", "availabilityZone=us-west-2a"),
        "bucket-name": ("storage.bucketName=rlinf-checkpoints-example-4242",),
        "model": ("workload.model.source=hf://Qwen/Qwen2.5-7B-Instruct",),
        "kubernetes-up": ("cluster.kubernetesVersion=1.36",),
        "kubernetes-down": ("cluster.kubernetesVersion=1.34",),
        "observability-backend": (f"observability.backend={backend}",),
        "kuberay": (f"kuberay.enabled={'false' if s.kuberay.enabled else 'true'}",),
    }


def verdict(stack: str, sets: tuple[str, ...]) -> dict[str, Any]:
    try:
        new = plan_stack(stack, *sets).to_json()
    except (ConfigError, StackConfigError) as err:
        return {"refusedAtPlanTime": str(err).splitlines()[1:] or [str(err)]}
    diff = diff_plans(plan_stack(stack).to_json(), new)
    resources = {f"{rc.type} {rc.name}": rc.kind for rc in (*diff.created, *diff.deleted, *diff.updated)}
    return {
        "resources": dict(sorted(resources.items())),
        "dataRisks": diff.data_risks,
        "refused": diff.refused,
        "warnings": diff.warnings,
    }


def stack_verdicts(stack: str) -> dict[str, Any]:
    return {name: verdict(stack, sets) for name, sets in edits(stack).items()}


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_each_edit_gives_the_verdicts_a_real_preview_would(stack):
    found = stack_verdicts(stack)
    golden = SNAPSHOTS / f"{stack}.json"
    text = json.dumps(found, indent=2, sort_keys=True) + "\n"
    if UPDATE:
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    # a test never writes into the repository unasked: a new stack's verdicts are recorded on purpose
    assert golden.exists(), f"no recorded verdicts for {stack}: record them with RLINF_EKS_UPDATE_SNAPSHOTS=1, review and commit them"
    assert text == golden.read_text(), (
        f"{stack}: the diff's verdicts changed; if intended, re-record with RLINF_EKS_UPDATE_SNAPSHOTS=1 and review tests/snapshots/diffs/"
    )
    _the_verdicts_issue_38_names(stack, found)


def _the_verdicts_issue_38_names(stack: str, found: dict[str, Any]) -> None:
    role = ROLES[stack]
    if role == "experiment":
        # an experiment's nodes, cluster, network and bucket are its platform's
        for name in ("instance-type", "availability-zone", "bucket-name", "kuberay"):
            assert "refusedAtPlanTime" in found[name], (stack, name)
        return
    bucket = found["bucket-name"]
    assert bucket["resources"]["aws:s3/bucket:Bucket checkpoints-bucket"] == "replace"
    assert any("checkpoints-bucket" in risk and "`pulumi up` stops at it" in risk for risk in bucket["dataRisks"])
    down = found["kubernetes-down"]
    # refused: by the diff (pulumi up would fail at the cluster), or already by a plan-time rule
    assert "refusedAtPlanTime" in down or (down["refused"] and "EKS cannot downgrade" in down["refused"][0])
    up = found["kubernetes-up"]
    assert "refusedAtPlanTime" in up or (not up["refused"] and any("upgrades the control plane" in w for w in up["warnings"]))
    zone = found["availability-zone"]
    assert any("rlinf-system" in w and "system node group" in w for w in zone["warnings"])
    assert not any("rlinf-system" in w and "GPU" in w for w in zone["warnings"])
    if any(key.startswith("aws:fsx/lustreFileSystem") for key in zone["resources"]):
        assert any("FSx for Lustre" in risk for risk in zone["dataRisks"])
    region = found["region"]
    regional_kinds = {kind for key, kind in region["resources"].items() if regional(key.split()[0])}
    assert regional_kinds and regional_kinds <= {"replace", "create", "delete"}, "a region change leaves no regional resource in place"
    assert not any(kind == "replace" for key, kind in region["resources"].items() if key.startswith("aws:iam/")), "IAM is global"
    # a new cluster: every Kubernetes object is replaced with it
    assert all(kind != "update" for key, kind in region["resources"].items() if key.startswith("kubernetes:"))
    assert not region["refused"], "another region is another VPC: no CIDR conflict"
    zone_refusals = " ".join(zone.get("refused", []))
    assert "EKS keeps a cluster's subnets in the AZs it was created in" in zone_refusals
    model = found["model"]
    if "resources" in model:
        # a workload setting changes no AWS resource
        assert not [key for key in model["resources"] if key.startswith("aws:")], stack
