"""What a change between two plans means, as a real ``pulumi preview`` and ``pulumi up`` would
have it: which changes the engine carries out as a replacement (:func:`replaced_by`), what a
replacement drags along (:func:`propagate`: the resources that read a replaced resource's id, the
node groups of a new launch template version, every Kubernetes object of a replaced cluster), what
``pulumi up`` refuses (:func:`refusals`: an EKS downgrade or a skipped minor, a cluster moved to
other AZs, a new subnet that takes a CIDR an old one still holds), which data is at risk
(:func:`data_risk`) and the warnings a reviewer reads (:func:`warnings_of`), worded from the
resource's role (GPU or system nodes), not from its type alone.

Sources: the force-new tables (:mod:`.replacement`, :mod:`.aws_force_new`); EKS's own rules
(UpdateClusterVersion moves one minor at a time and never back; UpdateClusterConfig keeps a
cluster's subnets in the AZs it was created in); the run annotations the training objects carry
(:mod:`rlinf_eks.workload`).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ...plan_reader import (
    AWS_EKS_CLUSTER,
    BUCKETS,
    EKS_CLUSTER,
    EKS_CLUSTERS,
    JOB,
    JOBSET,
    KUBERNETES_PREFIX,
    LAUNCH_TEMPLATE,
    LUSTRE,
    NODE_GROUP,
    PLACEMENT_GROUP,
    RAY_JOB,
    SUBNET,
)
from ...karpenter_reader import NODE_CLASS, NODE_POOL
from ...scheduling import GPU_NODE_LABELS, GPU_TAINT
from ...workload import RESUME_ANNOTATION, RUN_DIR_ANNOTATION, RUN_IDENTITY_ANNOTATION
from . import replacement
from .aws_force_new import FORCE_NEW as AWS_FORCE_NEW
from .changes import Change, ResourceChange, input_paths, under

# What replaces the pulumi-eks Cluster component (no provider table covers a component): the
# component inputs that reach a force-new input of aws:eks/cluster:Cluster (aws_force_new.py:
# name; roleArn from serviceRole; kubernetesNetworkConfig.serviceIpv4Cidr and ipFamily) or move it
# to another VPC. Not its subnets (vpc_config.subnet_ids updates in place, within the AZs the
# cluster was created in: refusals) nor its encryption key (encryption_config replaces only when
# it goes from a key to none).
COMPONENT_REPLACES: dict[str, tuple[str, ...]] = {
    EKS_CLUSTER: ("name", "vpcId", "serviceRole", "kubernetesServiceIpAddressRange", "ipFamily"),
}
# In place, but every node of the node group is replaced one by one (aws_eks_node_group: version,
# release_version and launch_template.version update in place by a rolling update).
_ROLLS: dict[str, tuple[str, ...]] = {
    NODE_GROUP: ("version", "releaseVersion", "launchTemplate.version"),
}
KARPENTER_NODES = (NODE_POOL, NODE_CLASS)
"""Karpenter's NodePool and EC2NodeClass (gpuNodes.provisioner karpenter): the GPU nodes' group and template."""
GPU_OR_CLUSTER = (NODE_GROUP, LAUNCH_TEMPLATE, *EKS_CLUSTERS, PLACEMENT_GROUP, *KARPENTER_NODES)
_DATA_STORES = (*BUCKETS, LUSTRE)
# Changes that recreate the training run itself (a Job or JobSet of the manual launcher, the RayJob).
_RESTARTS: dict[str, tuple[str, ...]] = {JOB: ("spec",), JOBSET: ("spec",), RAY_JOB: ("spec",)}
_WATCHDOG_COMPONENT = "watchdog"
_MINOR = re.compile(r"^v?(\d+)\.(\d+)")


def minor(version: Any) -> tuple[int, int] | None:
    """``(1, 35)`` of a Kubernetes version such as ``1.35``, ``1.35.2`` or ``v1.35.2-eks``, else None."""
    match = _MINOR.match(str(version)) if isinstance(version, (str, int, float)) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def regional(type_: str) -> bool:
    """An AWS type that lives in a region (all the stacks create but IAM's), or the EKS component."""
    spec = AWS_FORCE_NEW.get(type_)
    return type_ == EKS_CLUSTER or (spec is not None and spec.regional)


# --- replacements ----------------------------------------------------------------------------------


def replaced_by(old: dict[str, Any], new: dict[str, Any], paths: list[str]) -> tuple[list[str], list[str]]:
    """The changed input ``paths`` of a resource that replace it (its replaceOnChanges, the
    providers' force-new inputs, the component's, the conditions that hold), and ``path:
    condition`` lines of the conditional ones this diff cannot judge."""
    component = (p for p in paths if under(p, COMPONENT_REPLACES.get(new["type"], ())))
    holds, unknown = replacement.conditional(new, old.get("inputs") or {}, paths)
    return sorted({*replacement.forced(new, paths), *component, *holds}), unknown


def _find(value: Any, needle: str, path: str = "") -> list[str]:
    """The input paths below ``value`` that hold exactly ``needle``."""
    if value == needle:
        return [path]
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _find(item, needle, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _find(item, needle, f"{path}[{index}]")
    return found


def _cluster_replaced(changes: Iterable[ResourceChange]) -> ResourceChange | None:
    return next((rc for rc in changes if rc.type in EKS_CLUSTERS and rc.kind in ("replace", "delete")), None)


def propagate(updated: list[ResourceChange], olds: dict[str, dict], news: dict[str, dict]) -> list[ResourceChange]:
    """What the replacements in ``updated`` drag along, as a real preview shows it (the offline
    mocks keep a replaced resource's id, where the engine would see a new, unknown one): a resource
    that reads a replaced one's id is updated, or replaced when that input is force-new; the node
    groups of an updated launch template roll to its new version; every Kubernetes object is
    replaced with its cluster (pulumi-kubernetes' provider takes the cluster's kubeconfig). Returns
    the new ResourceChanges (``updated`` itself is extended in place for those already there)."""
    by_urn = {rc.urn: rc for rc in updated}
    added: list[ResourceChange] = []

    def mark(urn: str, kind: str, path: str, why: str, old: Any) -> None:
        rc = by_urn.get(urn)
        if rc is None:
            rc = ResourceChange(urn, news[urn]["type"], news[urn]["name"], "update")
            by_urn[urn] = rc
            added.append(rc)
        rc.changes.append(Change(f"inputs.{path}" if path else "provider", old, why))
        if kind == "replace":
            rc.kind = "replace"
            rc.replaced_by = sorted({*rc.replaced_by, f"{path or 'provider'} ({why})"})

    common = sorted(set(olds) & set(news))
    for rc in list(updated):
        if rc.kind != "replace" or not olds[rc.urn].get("id"):
            continue
        old_id = olds[rc.urn]["id"]
        for urn in common:
            if urn == rc.urn:
                continue
            for path in _find(news[urn].get("inputs") or {}, old_id):
                forced = replacement.forced(news[urn], [path])
                mark(urn, "replace" if forced else "update", path, f"the new id of {rc.type} {rc.name}", old_id)
    for rc in list(updated):
        if rc.type == LAUNCH_TEMPLATE and rc.kind == "update" and olds[rc.urn].get("id"):
            for urn in common:
                if news[urn]["type"] == NODE_GROUP and ((news[urn].get("inputs") or {}).get("launchTemplate") or {}).get("id") == olds[rc.urn]["id"]:
                    mark(urn, "update", "launchTemplate.version", f"the next version of {rc.name}", "(current)")
    cluster = _cluster_replaced([*updated, *added])
    if cluster is not None:
        for urn in common:
            if news[urn]["type"].startswith(KUBERNETES_PREFIX):
                mark(urn, "replace", "", f"{cluster.type} {cluster.name} is replaced: a new kubeconfig", "(the old cluster)")
    return added


# --- refusals ----------------------------------------------------------------------------------------


def version_refusal(rc: ResourceChange) -> str | None:
    """An EKS cluster updated (not replaced) to a lower minor, or by more than one minor."""
    if rc.type not in EKS_CLUSTERS or rc.kind != "update":
        return None
    change = next((c for c in rc.changes if c.path == "inputs.version"), None)
    if change is None:
        return None
    old, new = minor(change.old), minor(change.new)
    if not old or not new:
        return None
    if new < old:
        return (
            f"refused: EKS cannot downgrade a cluster ({change.old} → {change.new}); `pulumi up` fails at the cluster. "
            "Set cluster.kubernetesVersion back, or build a new cluster"
        )
    if new[0] == old[0] and new[1] > old[1] + 1:
        return (
            f"refused: EKS upgrades a cluster one minor at a time ({change.old} → {change.new}); `pulumi up` fails at the cluster. "
            f"Upgrade to {old[0]}.{old[1] + 1} first"
        )
    return None


def _subnet_zones(plan: dict[str, dict]) -> dict[str, str]:
    return {r["id"]: (r.get("inputs") or {}).get("availabilityZone", "") for r in plan.values() if r["type"] == SUBNET and r.get("id")}


def zone_refusal(rc: ResourceChange, olds: dict[str, dict], news: dict[str, dict]) -> str | None:
    """An EKS cluster updated in place onto subnets of other AZs: UpdateClusterConfig keeps a
    cluster in the AZs it was created in."""
    if rc.type not in EKS_CLUSTERS or rc.kind != "update":
        return None
    old_zones, new_zones = _subnet_zones(olds), _subnet_zones(news)

    def zones(resource: dict, plan_zones: dict[str, str]) -> set[str]:
        inputs = resource.get("inputs") or {}
        ids = [*(inputs.get("privateSubnetIds") or []), *(inputs.get("subnetIds") or []), *((inputs.get("vpcConfig") or {}).get("subnetIds") or [])]
        return {plan_zones[i] for i in ids if isinstance(i, str) and i in plan_zones}

    before, after = zones(olds[rc.urn], old_zones), zones(news[rc.urn], new_zones)
    if before and after and not after <= before:
        return (
            f"refused: EKS keeps a cluster's subnets in the AZs it was created in ({', '.join(sorted(before))}); "
            f"`pulumi up` fails moving it to {', '.join(sorted(after - before))}. Keep the AZ, or build a new cluster (cluster.name)"
        )
    return None


def cidr_refusals(
    created: list[ResourceChange], deleted: list[ResourceChange], updated: list[ResourceChange], olds: dict[str, dict], news: dict[str, dict]
) -> list[str]:
    """A new subnet that takes the CIDR an old one holds until Pulumi deletes it, after creating
    the new one (another subnet in the same VPC, or the same subnet replaced create-before-delete):
    AWS refuses the create (InvalidSubnet.Conflict). Call it for plans of one region."""
    remedy = "Give the network another CIDR, or move in two steps"
    held = {
        ((olds[rc.urn].get("inputs") or {}).get("vpcId"), (olds[rc.urn].get("inputs") or {}).get("cidrBlock")): rc.name
        for rc in deleted
        if rc.type == SUBNET
    }
    lines = []
    for rc in created:
        if rc.type != SUBNET:
            continue
        inputs = news[rc.urn].get("inputs") or {}
        old_name = held.get((inputs.get("vpcId"), inputs.get("cidrBlock")))
        if old_name is not None:
            lines.append(
                f"{rc.type} {rc.name}: refused: it takes {inputs.get('cidrBlock')}, which {old_name} holds until Pulumi deletes it after "
                f"creating the new one; AWS refuses the create (InvalidSubnet.Conflict). {remedy}"
            )
    for rc in updated:
        if rc.type != SUBNET or rc.kind != "replace" or (news[rc.urn].get("options") or {}).get("deleteBeforeReplace"):
            continue
        old_cidr, new_cidr = ((olds[rc.urn].get("inputs") or {}).get("cidrBlock"), (news[rc.urn].get("inputs") or {}).get("cidrBlock"))
        if old_cidr == new_cidr:
            lines.append(
                f"{rc.type} {rc.name}: refused: replaced create-before-delete, its new self takes {new_cidr} while the old one still holds "
                f"it; AWS refuses the create (InvalidSubnet.Conflict). {remedy}"
            )
    return lines


# --- data and words --------------------------------------------------------------------------------


def _data_store(rc: ResourceChange, resource: dict[str, Any] | None) -> bool:
    options = (resource or {}).get("options") or {}
    return rc.type in _DATA_STORES or bool(options.get("protect")) or bool(options.get("retainOnDelete"))


_DATA_WORDS = {
    LUSTRE: "every file on the FSx for Lustre file system (checkpoints not yet exported to S3, staged models and datasets)",
}


def data_risk(rc: ResourceChange, resource: dict[str, Any] | None) -> str | None:
    """The blocking warning for a replaced or deleted store that holds data, or None."""
    if rc.kind not in ("replace", "delete") or not _data_store(rc, resource):
        return None
    options = (resource or {}).get("options") or {}
    what = _DATA_WORDS.get(rc.type) or (
        "every object in the bucket (the runs' checkpoints and logs)" if rc.type in BUCKETS else "what this resource holds"
    )
    verb = f"replaced ({', '.join(rc.replaced_by)})" if rc.kind == "replace" else "deleted"
    guard = []
    if options.get("protect"):
        guard.append("it is protected, so `pulumi up` stops at it with an error until you `pulumi state unprotect` it")
    if options.get("retainOnDelete"):
        guard.append("retainOnDelete leaves the old one and its data in AWS, no longer managed by the stack")
    return f"{rc.type} {rc.name}: {verb}: {what} is at risk" + (f"; {'; '.join(guard)}" if guard else "")


def _node_group_role(resource: dict[str, Any] | None) -> str:
    """What a node group is, from what it carries: the GPU training nodes (the GPU nodes' labels
    or taint), the system nodes, or neither."""
    inputs = (resource or {}).get("inputs") or {}
    labels = inputs.get("labels") or {}
    taints = inputs.get("taints") or []
    if all(labels.get(k) == v for k, v in GPU_NODE_LABELS.items()) or any(
        isinstance(t, dict) and t.get("key") == GPU_TAINT.key for t in taints
    ):
        return "gpu"
    return "system" if labels.get("role") == "system" else "other"


_NODE_GROUP_WORDS = {
    "gpu": ("the GPU node group", "every GPU node is terminated", "rolls every GPU node (running training is interrupted)"),
    "system": (
        "the system node group", "CoreDNS, the operators and the controllers move to new nodes; no training runs there",
        "rolls every system node (the controllers move, one node at a time)",
    ),
    "other": ("this node group", "every node is terminated", "rolls every node of this node group"),
}


def _annotations(resource: dict[str, Any] | None) -> dict[str, Any]:
    return (((resource or {}).get("inputs") or {}).get("metadata") or {}).get("annotations") or {}


def run_verdict(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str:
    """What the replaced training run does with the checkpoints, from the run annotations of its
    old and new object: resume the same run, start a new run (another run location), or stop at
    once (another model or config in the same place). Empty for a plan without them."""
    before, after = _annotations(old), _annotations(new)
    old_dir, new_dir = before.get(RUN_DIR_ANNOTATION), after.get(RUN_DIR_ANNOTATION)
    if not old_dir or not new_dir:
        return ""
    if old_dir != new_dir:
        return f"is a new run in {new_dir}; the old run's checkpoints stay in {old_dir}"
    old_id, new_id = before.get(RUN_IDENTITY_ANNOTATION), after.get(RUN_IDENTITY_ANNOTATION)
    if old_id != new_id:
        return (
            f"stops at once (exit 94, not retried by the manual launcher) if {new_dir} holds complete checkpoints: they are of another run ({old_id}), this "
            f"one trains {new_id}; set workload.runName to start a new run beside it"
        )
    if after.get(RESUME_ANNOTATION) == "none":
        return f"starts again from step 0 (its trainer cannot resume); the same run's checkpoints stay in {new_dir}"
    return f"resumes from the newest complete checkpoint of the same run in {new_dir}"


def _is_training_run(rc_type: str, resource: dict[str, Any] | None) -> bool:
    """A Job, JobSet or RayJob of the run; not the watchdog Job (its component label says so)."""
    if rc_type not in _RESTARTS:
        return False
    labels = (((resource or {}).get("inputs") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get("app.kubernetes.io/component") != _WATCHDOG_COMPONENT


def warnings_of(rc: ResourceChange, resource: dict[str, Any] | None = None, old: dict[str, Any] | None = None) -> list[str]:
    """Why a change replaces or rolls the GPU or system nodes or the cluster, upgrades the
    control plane, or replaces the training run (``resource``: its new plan entry, ``old``: its
    old one), empty when it does none of these."""
    if rc.kind == "delete":
        if rc.type == NODE_GROUP:
            name, effect, _ = _NODE_GROUP_WORDS[_node_group_role(old or resource)]
            return [f"deletes {name} ({effect})"]
        if rc.type in KARPENTER_NODES:
            return ["deleted: Karpenter terminates every GPU node it launched from it (running training is interrupted)"]
        if rc.type in GPU_OR_CLUSTER:
            return ["deleted: the GPU nodes or the cluster go away"]
        return []
    if rc.kind not in ("update", "replace"):
        return []
    inputs = input_paths(rc)
    warnings: list[str] = []
    if rc.replaced_by and rc.type in GPU_OR_CLUSTER:
        what = "this resource"
        if rc.type == NODE_GROUP:
            name, effect, _ = _NODE_GROUP_WORDS[_node_group_role(resource)]
            what = f"{name} ({effect})"
        elif rc.type in EKS_CLUSTERS:
            what = "the EKS cluster (and everything running on it)"
        elif rc.type == PLACEMENT_GROUP:
            what = "the placement group, and through the launch template the GPU nodes"
        elif rc.type == LAUNCH_TEMPLATE:
            what = "the launch template, and so the GPU node group"
        elif rc.type in KARPENTER_NODES:
            what = "Karpenter's GPU node template: its nodes are terminated with it (running training is interrupted)"
        warnings.append(f"replaces {what}: {', '.join(rc.replaced_by)}")
    rolled = sorted({p for p in inputs if under(p, _ROLLS.get(rc.type, ()))})
    if rolled and rc.kind == "update":
        warnings.append(f"{_NODE_GROUP_WORDS[_node_group_role(resource)][2]}: {', '.join(rolled)}")
    if rc.type in EKS_CLUSTERS and rc.kind == "update" and "version" in inputs and version_refusal(rc) is None:
        warnings.append("upgrades the control plane one minor; the node groups keep their minor until they are updated after it: version")
    restarted = sorted({p for p in inputs if under(p, _RESTARTS.get(rc.type, ()))})
    if (restarted or rc.kind == "replace") and _is_training_run(rc.type, resource):
        # A Job's pod template is immutable, so pulumi-kubernetes deletes and recreates the Job
        # (the JobSet's and RayJob's spec carry replaceOnChanges): the run restarts.
        verdict = run_verdict(old, resource)
        because = ", ".join(restarted or rc.replaced_by)
        warnings.append(f"replaces the training run (running pods stop{'; the new run ' + verdict if verdict else ''}): {because}")
    if rc.type in KARPENTER_NODES and rc.kind == "update" and any(under(p, ("spec",)) for p in inputs):
        # Karpenter's drift: nodes that no longer match their NodePool / EC2NodeClass are replaced,
        # voluntarily, so never under a pod with karpenter.sh/do-not-disrupt (every training pod)
        warnings.append(
            "Karpenter replaces the GPU nodes as drifted, each once no training pod runs on it (karpenter.sh/do-not-disrupt): "
            "a running run keeps its nodes, the next run gets new ones"
        )
    if rc.type == LAUNCH_TEMPLATE and inputs and rc.kind == "update":
        # Any launch template change makes a new version; the node group follows latestVersion,
        # so its nodes roll (and a name change replaces the template, so the node group too).
        warnings.append("a new launch template version: the GPU node group rolls its nodes")
    return warnings

