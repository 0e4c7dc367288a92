"""The offline plan: ``python -m rlinf_eks plan [STACK] [--out DIR] [--set KEY=VALUE ...]``.

Writes ``DIR/plan.json`` and ``DIR/manifests/`` (a public contract read by tools outside this
repository: extend, never rename) and prints a preview-like tree.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import yaml

from .. import config as config_mod
from ..loading import settings_from_config
from . import deployer_policy, engine
from .stack_config import StackConfig
from ..plan_reader import HELM_PREFIX, KUBERNETES_PREFIX, PROVIDER_PREFIX

if TYPE_CHECKING:
    from ..placeholders import Placeholder
    from ..policies import Violation

PLAN_FILE = "plan.json"
MANIFESTS = "manifests"
EFFICIENCY_FILE = "efficiency.json"
WRITTEN_FILE = ".rlinf-eks-manifests"
"""In DIR: the manifest files the last plan wrote, one a line: the only files a plan removes."""
_MANIFEST_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\.yaml")


class OutputError(ValueError):
    """An --out folder the plan cannot write."""

# Kubernetes types that are not objects in the cluster's API (Helm releases are in plan.json only).
_NOT_MANIFESTS = (HELM_PREFIX, PROVIDER_PREFIX)


@dataclass
class Plan:
    project: str
    stack: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    warnings: list[str]
    settings: config_mod.StackSettings | None = None
    """The validated settings the plan ran with (not part of plan.json); feeds the efficiency report."""
    placeholders: list[Placeholder] = field(default_factory=list)
    """Example values to replace before ``pulumi up`` (``rlinf_eks.placeholders``; not part of plan.json)."""

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "stack": self.stack, "resources": self.resources, "outputs": self.outputs}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_]

    def manifests(self) -> dict[str, dict[str, Any]]:
        """Every Kubernetes object, by its file name."""
        files: dict[str, dict[str, Any]] = {}
        for resource in self.resources:
            if is_manifest(resource):
                files[manifest_file_name(resource["inputs"])] = resource["inputs"]
        return dict(sorted(files.items()))


def is_manifest(resource: dict[str, Any]) -> bool:
    return resource["type"].startswith(KUBERNETES_PREFIX) and not resource["type"].startswith(_NOT_MANIFESTS)


def manifest_file_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    scope = meta.get("namespace") or "cluster"
    return f"{obj['kind']}-{scope}-{meta['name']}.yaml".lower()


def settings_of(stack_config: StackConfig) -> config_mod.StackSettings:
    """Validate the stack's config exactly as the program will (raises ConfigError)."""
    return settings_from_config(stack_config.values, stack_config.stack)


def make_plan(stack_config: StackConfig) -> Plan:
    """Validate, then run the program under mocks and collect the plan."""
    from ..program import run_program

    settings = settings_of(stack_config)
    run = engine.run(
        run_program,
        project=stack_config.project,
        stack=stack_config.stack,
        config=stack_config.flat(),
        secret_keys=stack_config.secret_keys,
        region=settings.region,
    )
    from ..placeholders import find_placeholders

    resources = sorted((r.to_json() for r in run.registrations), key=lambda r: r["urn"])
    return Plan(
        run.project, run.stack, resources, dict(sorted(run.outputs.items())), run.warnings, settings, find_placeholders(settings)
    )


def check_output(out: Path) -> None:
    """Raise OutputError unless the plan can be written into ``out``, leaving no trace: run before
    the plan, so a bad --out costs nothing. (A write that fails later is an OutputError too.)"""
    for path in (out, out / MANIFESTS):
        if path.exists() and not path.is_dir():
            raise OutputError(f"{path} is a file, not a folder")
    existing = next(folder for folder in (out, *out.absolute().parents) if folder.exists())
    if not existing.is_dir():
        raise OutputError(f"cannot create {out}: {existing} is a file")
    try:
        # the folder that will receive the first new entry must take a file (as root too: os.access cannot tell)
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        what = f"cannot write in {out}" if existing == out else f"cannot create {out} in {existing}"
        raise OutputError(f"{what}: {err.strerror or err}") from None


def _previously_written(out: Path) -> set[str]:
    try:
        lines = (out / WRITTEN_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    # Only plain manifest names: the list never lets a plan reach outside manifests/.
    return {line for line in lines if _MANIFEST_NAME.fullmatch(line)}


def write(plan: Plan, out: Path) -> list[str]:
    """Write plan.json, manifests/ and efficiency.json into ``out``; return warnings.

    A file in manifests/ is removed only when the previous plan wrote it (listed in
    ``.rlinf-eks-manifests``) and this plan does not; any other file there is left alone and
    named in a warning. Raises OutputError when ``out`` cannot be written.
    """
    try:
        check_output(out)
        manifests = out / MANIFESTS
        manifests.mkdir(parents=True, exist_ok=True)
        files = plan.manifests()
        (out / PLAN_FILE).write_text(plan.dumps())
        for file_name, obj in files.items():
            (manifests / file_name).write_text(yaml.safe_dump(obj, sort_keys=True, default_flow_style=False))
        for stale in sorted(_previously_written(out) - set(files)):
            (manifests / stale).unlink(missing_ok=True)
        (out / WRITTEN_FILE).write_text("".join(f"{name}\n" for name in files))
        report = efficiency_of_plan(plan)
        if report is not None:
            (out / EFFICIENCY_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        (out / deployer_policy.POLICY_FILE).write_text(deployer_policy.dumps(deployer_policy_of_plan(plan)))
    except OSError as err:
        raise OutputError(f"cannot write in {out}: {err.strerror or err} ({getattr(err, 'filename', '') or out})") from None
    foreign = sorted(p.name for p in manifests.iterdir() if p.name not in files)
    return [f"{manifests / name}: not written by this plan, left in place" for name in foreign]


def deployer_policy_of_plan(plan: Plan) -> dict[str, Any]:
    """The least-privilege policy of the identity that runs ``pulumi up`` (offline/deployer_policy.py),
    with the lookups an existing cluster or VPC makes."""
    invokes: list[str] = []
    if plan.settings is not None and plan.settings.cluster.existing:
        invokes += ["aws:eks/getCluster:getCluster", "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider"]
    if plan.settings is not None and plan.settings.network.vpc_id:
        invokes += ["aws:ec2/getVpc:getVpc", "aws:ec2/getSubnet:getSubnet"]
    return deployer_policy.deployer_policy(plan.resources, invokes)


def efficiency_of_plan(plan: Plan) -> dict[str, Any] | None:
    """The plan's efficiency report (offline/efficiency.py), or None for a plan without settings."""
    from .efficiency import efficiency_report

    return efficiency_report(plan, plan.settings) if plan.settings is not None else None


def violations_of_plan(plan: Plan) -> list[Violation]:
    """The policies (rlinf_eks.policies, the same functions as the CrossGuard pack) over the plan."""
    from .. import policies

    return policies.evaluate(plan.resources, policies.options_from_settings(plan.settings))


# --- the preview-like tree ----------------------------------------------------------------------

_KEY_INPUTS = (
    "instanceTypes", "instanceType", "scalingConfig", "strategy", "chart", "version", "cidrBlock",
    "availabilityZone", "capacityType", "storageCapacity", "bucket", "name",
)


def _summary(resource: dict[str, Any]) -> str:
    inputs = resource["inputs"]
    if is_manifest(resource):
        meta = inputs.get("metadata") or {}
        where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        return f"{inputs.get('kind')} {where}{meta.get('name')}"
    parts = []
    for key in _KEY_INPUTS:
        if key in inputs and not isinstance(inputs[key], dict) or key == "scalingConfig" and key in inputs:
            value = inputs[key]
            parts.append(f"{key}={json.dumps(value, separators=(',', ':'))}")
    return " ".join(parts[:3])


def render_tree(plan: Plan) -> str:
    children: dict[str | None, list[dict[str, Any]]] = {}
    urns = {r["urn"] for r in plan.resources}
    for resource in plan.resources:
        parent = resource["parent"] if resource["parent"] in urns else None
        children.setdefault(parent, []).append(resource)

    lines = [f"{plan.project}-{plan.stack} (offline plan)"]

    def walk(parent: str | None, depth: int) -> None:
        for resource in children.get(parent, []):
            flags = "".join(
                mark for mark, on in (
                    (" [protect]", resource["options"]["protect"]),
                    (" [retain]", resource["options"]["retainOnDelete"]),
                ) if on
            )
            summary = _summary(resource)
            lines.append(f"{'  ' * depth}+ {resource['type']}  {resource['name']}{flags}{'  ' + summary if summary else ''}")
            walk(resource["urn"], depth + 1)

    walk(None, 1)
    counts = Counter(r["type"] for r in plan.resources)
    lines.append("")
    lines.append(f"Resources: {len(plan.resources)} to create")
    lines.extend(f"  {count:4d} {type_}" for type_, count in sorted(counts.items()))
    return "\n".join(lines)


def render_outputs(outputs: dict[str, Any]) -> Iterable[str]:
    yield "Outputs:"
    for key, value in outputs.items():
        text = json.dumps(value) if not isinstance(value, str) else value
        yield f"  {key}: {text if len(text) < 100 else text[:97] + '...'}"
