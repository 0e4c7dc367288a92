"""Fields the cluster refuses to change in place are planned as replacements (issue 18): the
immutable fields of every object the stacks render, from the real CRDs and Kubernetes' own rules,
are each covered by pulumi-kubernetes' force-new paths or the object's replaceOnChanges, and the
offline diff says ``replace`` for such a change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.diff.diff import diff_plans, render_markdown
from rlinf_eks.offline.diff.replacement import contains, forced, replacement_paths, segments
from tests.harness import ROOT, SHARED, STACKS
from tests.reference import reference
from tests.schemas import crd_schema

SNAPSHOTS = ROOT / "tests" / "snapshots"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RAY_JOB = "kubernetes:ray.io/v1:RayJob"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"

# Immutable fields by Kubernetes' own update validation (kubernetes pkg/apis/*/validation) and
# admission, for the built-in kinds the stacks render; the custom resources' CEL rules are read from
# the CRDs below. Namespace, ServiceAccount, Role, NetworkPolicy: nothing beyond metadata.name.
BUILT_IN_IMMUTABLE: dict[str, tuple[str, ...]] = {
    # batch ValidateJobSpecUpdate (completions only with parallelism for elastic Indexed Jobs)
    "kubernetes:batch/v1:Job": (
        "spec.completions", "spec.selector", "spec.template", "spec.completionMode", "spec.podFailurePolicy",
        "spec.backoffLimitPerIndex", "spec.managedBy", "spec.successPolicy",
    ),
    # core ValidatePersistentVolumeUpdate: the source ("spec.persistentvolumesource is immutable after
    # creation"), volumeMode, nodeAffinity once set
    "kubernetes:core/v1:PersistentVolume": ("spec.csi", "spec.nfs", "spec.hostPath", "spec.local", "spec.volumeMode", "spec.nodeAffinity"),
    # core ValidatePersistentVolumeClaimUpdate: the spec but the storage request, which a claim
    # without an expandable StorageClass cannot grow either (admission PersistentVolumeClaimResize)
    "kubernetes:core/v1:PersistentVolumeClaim": (
        "spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName", "spec.volumeMode",
        "spec.dataSource", "spec.dataSourceRef", "spec.resources",
    ),
    # core ValidateServiceUpdate: cluster IPs may not change once set
    "kubernetes:core/v1:Service": ("spec.clusterIP", "spec.clusterIPs"),
    # rbac ValidateRoleBindingUpdate: roleRef
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
}
# Rules of admission webhooks, which no CRD carries: JobSet ValidateUpdate (v0.11.1, unchanged in v0.12.0)
# (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go, ValidateImmutableField).
WEBHOOK_IMMUTABLE = {JOBSET: ("spec.replicatedJobs", "spec.managedBy")}
KUEUE_TOPOLOGY = "kubernetes:kueue.x-k8s.io/v1beta2:Topology"
KUEUE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
KUEUE_LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
# CEL rules conditional on the old object (not a whole `self == oldSelf`): Kueue v0.19.2's
# ResourceFlavor keeps nodeLabels, tolerations and topologyName once it has a topologyName.
CONDITIONAL_CEL_IMMUTABLE = {KUEUE_FLAVOR: ("spec.nodeLabels", "spec.tolerations", "spec.topologyName")}
CRDS = {
    JOBSET: ("schemas/jobset/jobset.x-k8s.io_jobsets.yaml", "v1alpha2"),
    RAY_JOB: ("schemas/kuberay/ray.io_rayjobs.yaml", "v1"),
    RAY_CLUSTER: ("schemas/kuberay/ray.io_rayclusters.yaml", "v1"),
    KUEUE_TOPOLOGY: ("schemas/kueue/kueue.x-k8s.io_topologies.yaml", "v1beta2"),
    KUEUE_FLAVOR: ("schemas/kueue/kueue.x-k8s.io_resourceflavors.yaml", "v1beta2"),
    KUEUE_LOCAL_QUEUE: ("schemas/kueue/kueue.x-k8s.io_localqueues.yaml", "v1beta2"),
}


def _cel_immutable(node: Any, path: str, out: list[str]) -> None:
    """Every schema path whose CEL rule compares with oldSelf as a whole (``self == oldSelf``)."""
    if not isinstance(node, dict):
        return
    for rule in node.get("x-kubernetes-validations") or ():
        if "self == oldSelf" in rule.get("rule", ""):
            out.append(path)
    for name, sub in (node.get("properties") or {}).items():
        _cel_immutable(sub, f"{path}.{name}" if path else name, out)
    if "items" in node:
        _cel_immutable(node["items"], f"{path}[*]", out)


def crd_immutable(type_: str) -> list[str]:
    """The fields ``type_``'s CRD keeps with a ``self == oldSelf`` rule (tests.schemas.crd_schema:
    each CRD parsed once per process, shared with the CRD validators)."""
    file, version = CRDS[type_]
    found: list[str] = []
    _cel_immutable(crd_schema(reference(file), version, f"the {type_} CRD"), "", found)
    return found


def immutable_fields(type_: str) -> list[str]:
    return [
        *BUILT_IN_IMMUTABLE.get(type_, ()),
        *WEBHOOK_IMMUTABLE.get(type_, ()),
        *CONDITIONAL_CEL_IMMUTABLE.get(type_, ()),
        *(crd_immutable(type_) if type_ in CRDS else ()),
    ]


def test_the_crds_name_the_immutable_fields_this_test_expects():
    assert set(crd_immutable(JOBSET)) == {
        "spec.failurePolicy", "spec.network", "spec.replicatedJobs[*].dependsOn", "spec.startupPolicy", "spec.successPolicy",
        "spec.volumeClaimPolicies",
    }
    assert set(crd_immutable(RAY_CLUSTER)) == {"spec.gcsFaultToleranceOptions.backend", "spec.managedBy"}


def _rendered(type_: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for stack in STACKS:
        plan = json.loads((SNAPSHOTS / f"{stack}.plan.json").read_text())
        found += [(stack, r) for r in plan["resources"] if r["type"] == type_]
    return found


@pytest.mark.parametrize("type_", [*BUILT_IN_IMMUTABLE, JOBSET, RAY_JOB, KUEUE_TOPOLOGY, KUEUE_FLAVOR, KUEUE_LOCAL_QUEUE])
def test_every_immutable_field_of_every_rendered_object_is_replaced_not_updated(type_):
    rendered = _rendered(type_)
    assert rendered, f"no stack renders {type_}"
    for stack, resource in rendered:
        rules = replacement_paths(resource)
        uncovered = [f for f in immutable_fields(type_) if not any(contains(rule, f) for rule in rules)]
        assert uncovered == [], f"{stack} {resource['name']}: an in-place change of {uncovered} would fail on the cluster"


def test_a_ray_cluster_of_the_selector_mode_replaces_on_its_immutable_fields():
    from tests.harness import plan_stack

    plan = plan_stack("multi-node-kuberay", "workload.rayjob.cluster=selector")
    cluster = next(r for r in plan.resources if r["type"] == RAY_CLUSTER)
    uncovered = [f for f in immutable_fields(RAY_CLUSTER) if not any(contains(r, f) for r in replacement_paths(cluster))]
    assert uncovered == []


def test_paths_are_split_into_keys_and_indexes_and_a_star_matches_any():
    assert segments('spec.replicatedJobs[name=training].template.data["launch.sh"][0]') == [
        "spec", "replicatedJobs", "name=training", "template", "data", "launch.sh", "0",
    ]
    assert contains("spec.replicatedJobs", "spec.replicatedJobs[name=training].template.spec.parallelism")
    assert contains("spec.replicatedJobs[*].dependsOn", "spec.replicatedJobs[0].dependsOn")
    assert not contains("spec.replicatedJobs", "spec.replicatedJobsX")
    assert not contains("spec.template", "spec")


def test_metadata_name_replaces_every_kubernetes_object_and_only_those():
    job = {"type": "kubernetes:batch/v1:Job", "options": {}}
    assert forced(job, ["metadata.name", "metadata.labels.a", "spec.template.spec.containers[name=ray].image"]) == [
        "metadata.name", "spec.template.spec.containers[name=ray].image",
    ]
    assert forced({"type": "aws:s3/bucket:Bucket", "options": {}}, ["metadata.name"]) == []


def _plan_into(out: Path, *sets: str) -> Path:
    argv = ["plan", "multi-node", "--quiet", "--out", str(out)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0
    return out


def test_given_multi_node_scaled_to_four_when_diffed_then_the_jobset_is_replaced_and_the_cost_change_shown(tmp_path, capsys):
    base = _plan_into(tmp_path / "base")
    new = _plan_into(tmp_path / "new", "gpuNodes.nodeCount=4", 'workload.trainer.batch["actor.global_batch_size"]=1280')
    capsys.readouterr()
    assert main(["diff", str(base), str(new)]) == 1
    text = capsys.readouterr().out
    replaced = text.split("#### +- replace", 1)[1].split("####", 1)[0]
    assert "`kubernetes:jobset.x-k8s.io/v1alpha2:JobSet` **rlinf-jobset** (replaced because of" in replaced
    assert "template.spec.parallelism" in replaced
    updated = text.split("#### ~ update", 1)[1].split("####", 1)[0]
    assert "JobSet" not in updated and "gpu-nodes" in updated
    assert "**Cost:** +$110.12/h while training ($111.40/h → $221.53/h)" in text


def test_given_plans_without_efficiency_reports_then_no_cost_line(tmp_path, capsys):
    base = _plan_into(tmp_path / "base")
    (base / "efficiency.json").unlink()
    capsys.readouterr()
    assert main(["diff", str(base), str(base)]) == 0
    assert "Cost" not in capsys.readouterr().out


def test_the_warning_box_about_gpu_nodes_and_the_cluster_lists_only_those():
    plan = json.loads((SNAPSHOTS / "single-node.plan.json").read_text())
    new = json.loads(json.dumps(plan))
    for resource in new["resources"]:
        if resource["type"] == "kubernetes:batch/v1:Job":  # the training Job and the watchdog
            resource["inputs"]["spec"]["template"]["metadata"].setdefault("annotations", {})["x"] = "y"
        if resource["type"] == "aws:eks/nodeGroup:NodeGroup" and resource["name"] == "gpu-nodes":
            resource["inputs"]["instanceTypes"] = ["p5en.48xlarge"]
    diff = diff_plans(plan, new)
    text = render_markdown(diff)
    gpu_box = text.split("> Changes that replace or roll the nodes or the cluster:", 1)[1].split("\n\n", 1)[0]
    assert "gpu-nodes" in gpu_box and "Job" not in gpu_box
    run_box = text.split("> Changes that replace the training run:", 1)[1].split("\n\n", 1)[0]
    assert "rlinf-job" in run_box and "watchdog" not in run_box
    assert {rc.name for rc in diff.replaced} == {"rlinf-job", "rlinf-watchdog", "gpu-nodes"}
