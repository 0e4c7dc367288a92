"""The offline infrastructure diff: ``python -m rlinf_eks diff BASE NEW``.

Compares two offline plans (``plan.json`` files, or the plan folders that hold them) the way a
reviewer reads ``pulumi preview --diff``: resources created, deleted and updated (keyed by URN),
each update with the changed input and option paths and their old and new values, and a warning
for every change that would replace or roll the GPU nodes or the cluster. CI posts the text as a
job summary, so it needs no credentials.

Secrets are already masked (``plan_reader.SECRET``) in plan.json and stay masked here (a change inside
a secret is therefore invisible to this diff; the real preview shows it as ``[secret]`` too).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..plan_reader import (
    AWS_EKS_CLUSTER,
    BUCKETS,
    EKS_CLUSTER,
    EKS_CLUSTERS,
    JOB,
    JOBSET,
    LAUNCH_TEMPLATE,
    LUSTRE,
    NODE_GROUP,
    PLACEMENT_GROUP,
    RAY_JOB,
)
from ..workload import RESUME_ANNOTATION, RUN_DIR_ANNOTATION, RUN_IDENTITY_ANNOTATION
from . import replacement
from .plan import EFFICIENCY_FILE, PLAN_FILE


class PlanError(ValueError):
    """A path that is not an offline plan (missing file, not JSON, not plan-shaped)."""


# --- reading ------------------------------------------------------------------------------------


def load_plan(path: str | Path) -> dict[str, Any]:
    """A plan.json, given as the file or as the folder holding it (``build/<stack>``)."""
    path = Path(path)
    file = path / PLAN_FILE if path.is_dir() else path
    if not file.is_file():
        raise PlanError(f"{path}: no such plan (expected a plan.json file or a folder holding one)")
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PlanError(f"{file}: not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("resources"), list):
        raise PlanError(f"{file}: not an offline plan (no 'resources' list)")
    for index, resource in enumerate(data["resources"]):
        if not isinstance(resource, dict) or not {"urn", "type", "name"} <= set(resource):
            raise PlanError(f"{file}: resources[{index}] lacks urn, type or name")
        for key in ("urn", "type", "name"):
            if not isinstance(resource[key], str):
                raise PlanError(f"{file}: resources[{index}].{key} is {json.dumps(resource[key])}, not a string")
        for key in ("inputs", "options"):
            if not isinstance(resource.get(key, {}), dict):
                raise PlanError(f"{file}: resources[{index}].{key} is {type(resource[key]).__name__}, not an object")
    if not isinstance(data.get("outputs", {}), dict):
        raise PlanError(f"{file}: outputs is {type(data['outputs']).__name__}, not an object")
    return data


# --- comparing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One changed value: ``path`` like ``inputs.scalingConfig.desiredSize``; a missing side is ``MISSING``."""

    path: str
    old: Any
    new: Any


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


@dataclass
class ResourceChange:
    urn: str
    type: str
    name: str
    kind: str  # "create" | "delete" | "update" | "replace"
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    replaced_by: list[str] = field(default_factory=list)
    """For ``replace``: the changed input paths that force it (offline/replacement.py)."""


@dataclass
class PlanDiff:
    base: str
    new: str
    created: list[ResourceChange]
    deleted: list[ResourceChange]
    updated: list[ResourceChange]
    outputs: list[Change]
    notes: list[str]
    cost: list[str] = field(default_factory=list)
    """The change of the hourly cost, when both plan folders hold efficiency.json."""
    data_risks: list[str] = field(default_factory=list)
    """Replaced or deleted stores that hold data (a bucket, a file system, anything protected or
    retained): the blocking warning at the top."""
    refused: list[str] = field(default_factory=list)
    """Changes the real engine refuses (an EKS downgrade): pulumi up would fail on them."""

    @property
    def equal(self) -> bool:
        return not (self.created or self.deleted or self.updated or self.outputs)

    @property
    def replaced(self) -> list[ResourceChange]:
        """The updates that Pulumi carries out as a replacement (delete and create)."""
        return [rc for rc in self.updated if rc.kind == "replace"]

    @property
    def in_place(self) -> list[ResourceChange]:
        """The updates carried out in place."""
        return [rc for rc in self.updated if rc.kind == "update"]

    @property
    def warnings(self) -> list[str]:
        return [f"{rc.type} {rc.name}: {w}" for rc in (*self.deleted, *self.updated) for w in rc.warnings]

    @property
    def gpu_or_cluster_warnings(self) -> list[str]:
        """The warnings about the GPU nodes or the cluster (the first warning box)."""
        return [f"{rc.type} {rc.name}: {w}" for rc in (*self.deleted, *self.updated) if rc.type in _GPU_OR_CLUSTER for w in rc.warnings]

    @property
    def other_warnings(self) -> list[str]:
        """The rest: the training run replaced, a data store deleted (the second box)."""
        return [f"{rc.type} {rc.name}: {w}" for rc in (*self.deleted, *self.updated) if rc.type not in _GPU_OR_CLUSTER for w in rc.warnings]


def _list_key(items: list[Any]) -> str | None:
    """Lists of objects with a unique ``name`` (containers, env, ports) compare by name, so an
    insertion reads as one added item, not a shift of every later one."""
    for key in ("name",):
        if items and all(isinstance(i, dict) and isinstance(i.get(key), str) for i in items):
            names = [i[key] for i in items]
            if len(set(names)) == len(names):
                return key
    return None


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _join(path: str, key: str) -> str:
    """``a.b``; keys that hold dots or slashes (``vpc.amazonaws.com/efa``, labels) as ``a["k"]``."""
    if not _PLAIN_KEY.match(key):
        return f"{path}[{json.dumps(key)}]"
    return f"{path}.{key}" if path else key


def changed_paths(old: Any, new: Any, path: str = "") -> list[Change]:
    """Every leaf that differs between ``old`` and ``new`` (dicts by key, lists by name or index)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[Change] = []
        for key in sorted(set(old) | set(new)):
            sub = _join(path, str(key))
            changes += changed_paths(old.get(key, MISSING), new.get(key, MISSING), sub)
        return changes
    if isinstance(old, list) and isinstance(new, list):
        key = _list_key(old) if _list_key(old) == _list_key(new) else None
        if key:
            olds = {i[key]: i for i in old}
            news = {i[key]: i for i in new}
            changes = []
            for name in [*olds, *(n for n in news if n not in olds)]:
                changes += changed_paths(olds.get(name, MISSING), news.get(name, MISSING), f"{path}[{key}={name}]")
            return changes
        changes = []
        for index in range(max(len(old), len(new))):
            changes += changed_paths(
                old[index] if index < len(old) else MISSING, new[index] if index < len(new) else MISSING, f"{path}[{index}]"
            )
        return changes
    return [Change(path, old, new)]


# What replaces the pulumi-eks Cluster component (no provider table covers a component): the
# component inputs that reach a force-new input of aws:eks/cluster:Cluster (aws_force_new.py:
# name; roleArn from serviceRole; kubernetesNetworkConfig.serviceIpv4Cidr and ipFamily; the
# encryption key, which replaces when it goes from one key to another) or move it to another VPC.
# Its subnets are not among them: vpc_config.subnet_ids updates in place (UpdateClusterConfig).
_COMPONENT_REPLACES: dict[str, tuple[str, ...]] = {
    EKS_CLUSTER: ("name", "vpcId", "serviceRole", "encryptionConfigKeyArn", "kubernetesServiceIpAddressRange", "ipFamily"),
}
# In place, but every node of the node group is replaced one by one (aws_eks_node_group: version,
# release_version and launch_template.version update in place by a rolling update).
_ROLLS: dict[str, tuple[str, ...]] = {
    NODE_GROUP: ("version", "releaseVersion", "launchTemplate.version"),
}
_UPGRADES: dict[str, tuple[str, ...]] = {cluster: ("version",) for cluster in EKS_CLUSTERS}
_MINOR = re.compile(r"^(\d+)\.(\d+)")
_GPU_OR_CLUSTER = (NODE_GROUP, LAUNCH_TEMPLATE, *EKS_CLUSTERS, PLACEMENT_GROUP)
_DATA_STORES = (*BUCKETS, LUSTRE)


def _under(path: str, prefixes: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in prefixes)


# Changes that recreate the training run itself (a Job or JobSet of the manual launcher, the RayJob).
_RESTARTS: dict[str, tuple[str, ...]] = {
    JOB: ("spec",),
    JOBSET: ("spec",),
    RAY_JOB: ("spec",),
}
_WATCHDOG_COMPONENT = "watchdog"


def _is_training_run(rc_type: str, resource: dict[str, Any] | None) -> bool:
    """A Job, JobSet or RayJob of the run; not the watchdog Job (its component label says so)."""
    if rc_type not in _RESTARTS:
        return False
    labels = (((resource or {}).get("inputs") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get("app.kubernetes.io/component") != _WATCHDOG_COMPONENT


def _node_group_role(resource: dict[str, Any] | None) -> str:
    """What a node group is, from what it carries: the GPU training nodes (the role label or the
    GPU taint the GPU group has), the system nodes, or neither."""
    inputs = (resource or {}).get("inputs") or {}
    role = (inputs.get("labels") or {}).get("role")
    taints = inputs.get("taints") or []
    if role == "gpu-training" or any(t.get("key") == "nvidia.com/gpu" for t in taints if isinstance(t, dict)):
        return "gpu"
    return "system" if role == "system" else "other"


_NODE_GROUP_WORDS = {
    "gpu": ("the GPU node group (every GPU node is terminated)", "rolls every GPU node (running training is interrupted)"),
    "system": (
        "the system node group (CoreDNS, the operators and the controllers move to new nodes; no training runs there)",
        "rolls every system node (the controllers move, one node at a time)",
    ),
    "other": ("this node group (every node is terminated)", "rolls every node of this node group"),
}


def minor(version: Any) -> tuple[int, int] | None:
    """``(1, 35)`` of a Kubernetes version such as ``1.35`` or ``1.35.2``, else None."""
    match = _MINOR.match(str(version)) if isinstance(version, (str, int, float)) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def downgrade(rc: ResourceChange) -> str | None:
    """The refusal of an EKS control-plane downgrade (EKS moves only forward), or None."""
    if rc.type not in EKS_CLUSTERS:
        return None
    for change in rc.changes:
        if change.path == "inputs.version":
            old, new = minor(change.old), minor(change.new)
            if old and new and new < old:
                return (
                    f"refused: EKS cannot downgrade a cluster ({change.old} → {change.new}); `pulumi up` fails at the cluster. "
                    "Set cluster.kubernetesVersion back, or build a new cluster"
                )
    return None


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


def _annotations(resource: dict[str, Any] | None) -> dict[str, Any]:
    return (((resource or {}).get("inputs") or {}).get("metadata") or {}).get("annotations") or {}


def run_verdict(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str:
    """What the replaced training run does with the checkpoints, from the run annotations of its
    old and new object: resume the same run, start a new run (another run directory), or stop at
    once (another model or config in the same run directory). Empty for a plan without them."""
    before, after = _annotations(old), _annotations(new)
    old_dir, new_dir = before.get(RUN_DIR_ANNOTATION), after.get(RUN_DIR_ANNOTATION)
    if not old_dir or not new_dir:
        return ""
    if old_dir != new_dir:
        return f"is a new run under {new_dir}; the old run's checkpoints stay under {old_dir}"
    old_id, new_id = before.get(RUN_IDENTITY_ANNOTATION), after.get(RUN_IDENTITY_ANNOTATION)
    if old_id != new_id:
        return (
            f"stops at once (exit 94) if {new_dir} holds complete checkpoints: they are of another run ({old_id}), this one trains "
            f"{new_id}; set workload.runName to start a new run beside it"
        )
    if after.get(RESUME_ANNOTATION) == "none":
        return f"starts again from step 0 (its trainer cannot resume); the same run's checkpoints stay under {new_dir}"
    return f"resumes from the newest complete checkpoint of the same run under {new_dir}"


def replacement_warnings(rc: ResourceChange, resource: dict[str, Any] | None = None, old: dict[str, Any] | None = None) -> list[str]:
    """Why a change would replace or roll the GPU or system nodes or the cluster, replace the
    training run (``resource``: its plan entry, which tells the run from the watchdog, a GPU node
    group from the system one) or delete a data store (empty when it does none of these)."""
    if rc.kind == "delete":
        if rc.type == NODE_GROUP:
            return [f"deleted: {_NODE_GROUP_WORDS[_node_group_role(resource)][0].replace(' (every', ' goes away (every', 1)}"]
        if rc.type in _GPU_OR_CLUSTER:
            return ["deleted: the GPU nodes or the cluster go away"]
        return []
    if rc.kind not in ("update", "replace"):
        return []
    inputs = [c.path[len("inputs."):] for c in rc.changes if c.path.startswith("inputs.")]
    warnings: list[str] = []
    if rc.replaced_by and rc.type in _GPU_OR_CLUSTER:
        what = "this resource"
        if rc.type == NODE_GROUP:
            what = _NODE_GROUP_WORDS[_node_group_role(resource)][0]
        elif rc.type in EKS_CLUSTERS:
            what = "the EKS cluster (and everything running on it)"
        elif rc.type == PLACEMENT_GROUP:
            what = "the placement group, and through the launch template the GPU nodes"
        elif rc.type == LAUNCH_TEMPLATE:
            what = "the launch template, and so the GPU node group"
        warnings.append(f"replaces {what}: {', '.join(rc.replaced_by)}")
    rolled = sorted({p for p in inputs if _under(p, _ROLLS.get(rc.type, ()))})
    if rolled and rc.kind == "update":
        warnings.append(f"{_NODE_GROUP_WORDS[_node_group_role(resource)][1]}: {', '.join(rolled)}")
    refused = downgrade(rc)
    upgraded = sorted({p for p in inputs if _under(p, _UPGRADES.get(rc.type, ()))})
    if upgraded and refused is None and rc.kind == "update":
        warnings.append(f"upgrades the control plane (then the node groups roll): {', '.join(upgraded)}")
    restarted = sorted({p for p in inputs if _under(p, _RESTARTS.get(rc.type, ()))})
    if restarted and _is_training_run(rc.type, resource):
        # A Job's pod template is immutable, so pulumi-kubernetes deletes and recreates the Job
        # (the JobSet's and RayJob's spec carry replaceOnChanges): the run restarts.
        verdict = run_verdict(old, resource)
        warnings.append(f"replaces the training run (running pods stop{'; the new run ' + verdict if verdict else ''}): {', '.join(restarted)}")
    if rc.type == LAUNCH_TEMPLATE and inputs and rc.kind == "update":
        # Any launch template change makes a new version; the node group follows latestVersion,
        # so its nodes roll (and a name change replaces the template, so the node group too).
        warnings.append("a new launch template version: the GPU node group rolls its nodes")
    return warnings


def _resource_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes = changed_paths(old.get("inputs", {}), new.get("inputs", {}), "inputs")
    changes += changed_paths(old.get("options", {}), new.get("options", {}), "options")
    for key in ("parent", "provider", "custom"):
        changes += changed_paths(old.get(key), new.get(key), key)
    return changes


def diff_plans(base: dict[str, Any], new: dict[str, Any], base_label: str = "base", new_label: str = "new") -> PlanDiff:
    """Compare two plans (plan.json shape)."""
    olds = {r["urn"]: r for r in base["resources"]}
    news = {r["urn"]: r for r in new["resources"]}
    created = [ResourceChange(u, news[u]["type"], news[u]["name"], "create") for u in sorted(set(news) - set(olds))]
    deleted = [ResourceChange(u, olds[u]["type"], olds[u]["name"], "delete") for u in sorted(set(olds) - set(news))]
    moved = base.get("region") and new.get("region") and base["region"] != new["region"]
    updated = []
    notes = []
    for urn in sorted(set(olds) & set(news)):
        changes = _resource_changes(olds[urn], news[urn])
        regional = moved and news[urn]["type"].startswith("aws:")
        if changes or regional:
            # the engine applies the new registration's replaceOnChanges to the provider's diff
            inputs = [c.path[len("inputs."):] for c in changes if c.path.startswith("inputs.")]
            component = (p for p in inputs if _under(p, _COMPONENT_REPLACES.get(news[urn]["type"], ())))
            holds, unknown = replacement.conditional(news[urn], olds[urn].get("inputs") or {}, inputs)
            forced = sorted({*replacement.forced(news[urn], inputs), *component, *holds})
            if regional:
                forced = [f"aws:region {base['region']} → {new['region']}", *forced]
            kind = "replace" if forced else "update"
            updated.append(ResourceChange(urn, news[urn]["type"], news[urn]["name"], kind, changes, replaced_by=forced))
            notes += [f"{news[urn]['type']} {news[urn]['name']} may be replaced: {line}" for line in unknown]
    data_risks, refused = [], []
    for rc in (*deleted, *updated):
        resource = news.get(rc.urn) or olds.get(rc.urn)
        rc.warnings = replacement_warnings(rc, resource, olds.get(rc.urn))
        risk = data_risk(rc, olds.get(rc.urn) or resource)
        if risk:
            data_risks.append(risk)
        refusal = downgrade(rc)
        if refusal:
            refused.append(f"{rc.type} {rc.name}: {refusal}")
    if base.get("stack") != new.get("stack") or base.get("project") != new.get("project"):
        notes.append(f"comparing different stacks ({base.get('project')}/{base.get('stack')} and "
                     f"{new.get('project')}/{new.get('stack')}): URNs carry the stack, so every resource differs")
    if moved:
        notes.append(f"aws:region {base['region']} → {new['region']}: every AWS resource is created anew in {new['region']} "
                     f"and the old ones deleted in {base['region']}")
    renamed = {(r.type, r.name) for r in created} & {(r.type, r.name) for r in deleted}
    for type_, name in sorted(renamed):
        notes.append(f"{type_} {name} changed URN (new parent?): Pulumi replaces it unless given an alias")
    outputs = changed_paths(base.get("outputs", {}), new.get("outputs", {}), "outputs")
    return PlanDiff(base_label, new_label, created, deleted, updated, outputs, notes, data_risks=data_risks, refused=refused)


# --- rendering ----------------------------------------------------------------------------------


def _value(value: Any, limit: int = 120) -> str:
    if value is MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, separators=(",", ":")) if not isinstance(value, str) else json.dumps(value)
    text = text.replace("`", "'")  # a backtick would end the Markdown code span
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MAX_TEXT_DIFF_LINES = 40


def _is_text(value: Any) -> bool:
    """Text too long for one line of the report: a script, or a long command line."""
    return isinstance(value, str) and ("\n" in value or len(value) > 120)


def _pieces(old: str, new: str) -> tuple[list[str], list[str]]:
    """Lines of a multi-line text; the words of a long one-line text (a command line)."""
    if "\n" in old or "\n" in new:
        return old.splitlines(), new.splitlines()
    return old.split(" "), new.split(" ")


def _change_lines(change: Change, indent: str) -> list[str]:
    """One changed value as Markdown list lines. A long text on both sides (a launch script, a
    command line) shows the lines (or words) that changed, as a diff block, instead of the first
    characters of each side, which are usually the same."""
    if not (_is_text(change.old) and _is_text(change.new)):
        return [f"{indent}- `{change.path}`: `{_value(change.old)}` → `{_value(change.new)}`"]
    old, new = _pieces(change.old, change.new)
    by_line = "\n" in change.old or "\n" in change.new
    # hunk headers give line numbers; for the words of a command line they would only be noise
    skip = ("---", "+++") if by_line else ("---", "+++", "@@")
    body = [line for line in difflib.unified_diff(old, new, lineterm="", n=0) if not line.startswith(skip)]
    shown = body[:_MAX_TEXT_DIFF_LINES]
    if len(body) > len(shown):
        shown.append(f"... {len(body) - len(shown)} more lines")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", "\n".join(shown))), default=0))
    pad = indent + "  "
    return [f"{indent}- `{change.path}`: text changed", f"{pad}{fence}diff", *(pad + line for line in shown), f"{pad}{fence}"]


def render_markdown(diff: PlanDiff) -> str:
    """The diff as Markdown text, readable in a PR comment, a job summary or a terminal."""
    lines = [f"### Offline infrastructure diff: `{diff.base}` → `{diff.new}`", ""]
    if diff.equal:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    lines.append(
        f"**{len(diff.created)} to create, {len(diff.in_place)} to update in place, {len(diff.replaced)} to replace "
        f"(delete, then create), {len(diff.deleted)} to delete**"
        + (f", {len(diff.outputs)} output changes" if diff.outputs else "")
    )
    lines.append("")
    for heading, items in (
        ("Refused: `pulumi up` fails on these changes:", diff.refused),
        ("Data at risk: these changes replace or delete a store that holds data:", diff.data_risks),
    ):
        if items:
            lines.append("> [!CAUTION]")
            lines.append(f"> {heading}")
            lines.extend(f"> - {item}" for item in items)
            lines.append("")
    for line in diff.cost:
        lines.append(f"**Cost:** {line}")
    if diff.cost:
        lines.append("")
    for heading, warnings in (
        ("Changes that replace or roll the nodes or the cluster:", diff.gpu_or_cluster_warnings),
        ("Changes that replace the training run:", diff.other_warnings),
    ):
        if warnings:
            lines.append("> [!WARNING]")
            lines.append(f"> {heading}")
            lines.extend(f"> - {w}" for w in warnings)
            lines.append("")
    for note in diff.notes:
        lines.append(f"_Note: {note}_")
    if diff.notes:
        lines.append("")
    if diff.created:
        lines.append("#### + create")
        lines.extend(f"- `{rc.type}` **{rc.name}**" for rc in diff.created)
        lines.append("")
    if diff.deleted:
        lines.append("#### - delete")
        lines.extend(f"- `{rc.type}` **{rc.name}**" for rc in diff.deleted)
        lines.append("")
    for heading, kind in (("#### +- replace (cannot change in place)", "replace"), ("#### ~ update", "update")):
        changed = [rc for rc in diff.updated if rc.kind == kind]
        if not changed:
            continue
        lines.append(heading)
        for rc in changed:
            because = f" (replaced because of {', '.join(f'`{p}`' for p in rc.replaced_by)})" if rc.replaced_by else ""
            lines.append(f"- `{rc.type}` **{rc.name}**{because}")
            for change in rc.changes:
                lines.extend(_change_lines(change, "  "))
        lines.append("")
    if diff.outputs:
        lines.append("#### outputs")
        for change in diff.outputs:
            lines.extend(_change_lines(change, ""))
        lines.append("")
    return "\n".join(lines)


def run(base_path: str, new_path: str) -> tuple[int, str]:
    """The CLI's work: (exit status, text). 0 equal, 1 different, 2 bad input."""
    try:
        base = load_plan(base_path)
        new = load_plan(new_path)
    except PlanError as err:
        return 2, f"error: {err}"
    diff = diff_plans(base, new, str(base_path), str(new_path))
    diff.cost = cost_change(_efficiency_beside(base_path), _efficiency_beside(new_path))
    return (0 if diff.equal else 1), render_markdown(diff)


# --- cost ---------------------------------------------------------------------------------------


def _efficiency_beside(path: str | Path) -> dict[str, Any] | None:
    """The efficiency.json the plan wrote beside its plan.json (None when absent or unreadable)."""
    path = Path(path)
    file = (path if path.is_dir() else path.parent) / EFFICIENCY_FILE
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("cost"), dict) else None


def _money(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}/h"


def cost_change(base: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """The change of the stack's hourly cost between two efficiency reports, while training and
    idle: ``+$110.08/h while training ($111.40/h -> $221.48/h)``. Empty without both reports or
    when nothing changed; a total one side cannot price is said so."""
    if base is None or new is None:
        return []
    lines = []
    for key, when in (("totalPerHourWhileTraining", "while training"), ("totalPerHourIdle", "idle")):
        old, now = base["cost"].get(key), new["cost"].get(key)
        if isinstance(old, (int, float)) and isinstance(now, (int, float)):
            if round(now - old, 2) != 0:
                lines.append(f"{_money(now - old)} {when} (${old:,.2f}/h → ${now:,.2f}/h)")
        elif old != now:
            reason = new["cost"].get("totalUnknownReason") or base["cost"].get("totalUnknownReason") or "no sourced price"
            lines.append(f"unknown {when}: {reason}")
    return lines
