"""The plan as ``python -m rlinf_eks plan`` prints it first: a preview-like tree of every resource
(protected and retained ones marked, what pulumi-eks creates out of the plan's sight, what destroy
keeps), then the stack's outputs."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable

from . import destroy
from .plan import Plan, is_manifest

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
    hidden: dict[str, list[dict[str, Any]]] = {}
    for child in plan.not_planned:
        hidden.setdefault(child["parent"], []).append(child)

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
            for child in hidden.get(resource["urn"], ()):
                lines.append(f"{'  ' * (depth + 1)}. {child['type']}  {child['name']}  created by {child['createdBy']}")
            walk(resource["urn"], depth + 1)

    walk(None, 1)
    counts = Counter(r["type"] for r in plan.resources)
    lines.append("")
    lines.append(f"Resources: {len(plan.resources)} to create")
    lines.extend(f"  {count:4d} {type_}" for type_, count in sorted(counts.items()))
    if plan.not_planned:
        lines.append(
            f"  plus {len(plan.not_planned)} created by pulumi-eks inside eks:index:Cluster (marked '.'; not planned here:"
            " not in this count, the manifests or the policy checks; plan.json notPlanned)"
        )
    lines.extend(destroy.destroy_lines(plan.resources))
    return "\n".join(lines)


def render_outputs(outputs: dict[str, Any]) -> Iterable[str]:
    yield "Outputs:"
    for key, value in outputs.items():
        text = json.dumps(value) if not isinstance(value, str) else value
        yield f"  {key}: {text if len(text) < 100 else text[:97] + '...'}"
