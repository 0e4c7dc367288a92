"""The efficiency report as the plan prints it (``render_efficiency``): GPUs, EFA and CPU requested
against the nodes, placement, and the cost of the stack. The report itself is
:mod:`rlinf_eks.offline.outputs.efficiency`'s."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .capacity_block import render as render_capacity_block
from .image_cost import render as render_image_cost
from .nat_data import render as render_nat_data


def _pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _usd(value: Optional[float]) -> str:
    return "unknown" if value is None else f"${value:,.2f}/h"


def _names(items: list[Any]) -> str:
    return ", ".join(str(i) for i in items) or "none"


def render_efficiency(report: Mapping[str, Any]) -> str:
    """The report as a few lines for the terminal."""
    nodes, gpus, efa = report["nodes"], report["gpus"], report["efaInterfaces"]
    cpu, mem, place, cost = report["cpu"], report["memory"], report["placement"], report["cost"]
    price = cost["price"]
    lines = [
        f"Efficiency ({report['instanceType']} in {report['region']}):",
        f"  nodes        {nodes['whileTraining']} while training (min {nodes['min']}, desired {nodes['desired']}, max {nodes['max']})",
        f"  GPUs         {gpus['requested']:g} of {gpus['onNodes']} requested by {report['trainingPods']['count']} training pod{'' if report['trainingPods']['count'] == 1 else 's'} ({_pct(gpus['fraction'])})",
        f"  EFA          {efa['requested']:g} of {efa['attached']} interfaces requested ({_pct(efa['fraction'])})",
        f"  CPU          {cpu['requestedMillicpu'] / 1000:g} of {cpu['allocatableMillicpu'] / 1000:g} allocatable cores ({_pct(cpu['fraction'])})",
        f"  memory       {mem['requestedMiB'] / 1024:g} of {mem['allocatableMiB'] / 1024:.1f} allocatable GiB ({_pct(mem['fraction'])})",
        f"  placement    one AZ: {'yes' if place['oneAvailabilityZone'] else 'no'} ({_names(place['availabilityZones'])}); "
        f"one placement group: {'yes' if place['onePlacementGroup'] else 'no'} ({_names(place['placementGroups'])})",
    ]
    block = cost.get("capacityBlock")
    if block is not None and block["perHour"] is not None:
        lines.append(
            f"  cost         {_usd(block['perHour'])} while the Capacity Block lasts, its {block['instances']} nodes running or not "
            f"(${block['usdPerInstanceHour']:,.2f} per instance-hour)"
        )
    elif cost["onDemandPerNodeHour"] is None:
        lines.append(f"  cost         unknown: {price['reason']}")
    else:
        lines.append(
            f"  cost         {_usd(cost['perHourWhileTraining'])} while training, {_usd(cost['perHourIdle'])} idle, "
            f"{_usd(cost['perHourAtMax'])} at max ({_usd(cost['onDemandPerNodeHour'])} per node on-demand, as of {price['asOf']})"
        )
    if "items" in cost:
        lines.extend(_render_stack_cost(cost))
    lines.extend(f"  warning: {w}" for w in report.get("warnings", []))
    return "\n".join(lines)


def _usd_fine(value: Optional[float]) -> str:
    # cents hide the small items (a KMS key is $0.0014/h)
    return _usd(value) if value is None or value == 0 or value >= 0.01 else f"${value:.4f}/h"


def _render_stack_cost(cost: Mapping[str, Any]) -> list[str]:
    if cost["totalPerHourWhileTraining"] is None:
        summary = cost.get("totalUnknownSummary") or "no sourced price"
        lines = [f"  stack cost   unknown: {summary} (why: below)"]
    else:
        lines = [
            f"  stack cost   {_usd(cost['totalPerHourWhileTraining'])} while training, {_usd(cost['totalPerHourIdle'])} idle, "
            f"{_usd(cost['totalPerHourAtMax'])} at max, everything the stack bills by the hour:"
        ]
    for item in cost["items"]:
        if item["price"]["usdPerUnitHour"] is None:
            lines.append(f"    {item['item']:<18} unknown: {item['price']['reason'] or 'no sourced price'}")
            continue
        detail = item["price"]["detail"] or ""
        lines.append(
            f"    {item['item']:<18} {_usd_fine(item['perHourWhileTraining']):>13} while training, {_usd_fine(item['perHourIdle'])} idle"
            f"{'  (' + detail + ')' if detail else ''}"
        )
    lines.extend(f"    note: {note}" for note in cost.get("notes", []))
    lines.append("    plus usage-based: " + "; ".join(cost["usageBased"]))
    block = cost.get("capacityBlock")
    if block is not None:
        lines += render_capacity_block(block)
        if cost["totalPerHourWhileTraining"] is not None and block["perHour"] is not None:
            rest = cost["totalPerHourWhileTraining"] - block["perHour"]
            lines.append(f"  a 30-minute run within it: {_usd_total(rest * TRY_HOURS)} more (the rest of the stack x 0.5 h, usage-based not included)")
    elif cost["totalPerHourWhileTraining"] is not None:
        lines.append(f"  a 30-minute run: {_usd_total(cost['totalPerHourWhileTraining'] * TRY_HOURS)} (the stack cost while training x 0.5 h, usage-based not included)")
    lines += render_nat_data(cost.get("natDataAtStart"))
    lines += render_image_cost(cost.get("imageBuild"))
    return lines


TRY_HOURS = 0.5
"""A first try's length, whose cost the plan prints (README: the quickstart stack's 30 minutes)."""


def _usd_total(value: float) -> str:
    return f"${value:,.2f}"
