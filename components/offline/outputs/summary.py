"""What ``plan --quiet`` prints: the few lines a script or a reviewer needs (the stack, its cost,
the storage budget's verdict, the placeholders, what was written), each from what the full plan
prints at length. Pure functions of the plan, its efficiency report and its output folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ...wording import counted

if TYPE_CHECKING:
    from .plan import Plan


def _usd(value: float) -> str:
    return f"${value:,.2f}/h" if value >= 0.01 or value == 0 else f"${value:.4f}/h"


def cost_line(report: Optional[Mapping[str, Any]], experiment: bool = False) -> str:
    """The stack's hourly cost while training and idle (everything it bills by the hour); an
    experiment's nodes and cluster are its platform's, priced by the platform's plan."""
    if report is None:
        return "cost: the platform's (an experiment's nodes are its platform's: its plan prices them)" if experiment else \
            "cost: not estimated (no GPU node group in this plan)"  # fmt: skip
    cost = report["cost"]
    if "items" not in cost:
        if cost["perHourWhileTraining"] is None:
            return f"cost: unknown: {cost['price']['reason']}"
        return f"cost: GPU nodes {_usd(cost['perHourWhileTraining'])} while training, {_usd(cost['perHourIdle'])} idle"
    if cost["totalPerHourWhileTraining"] is None:
        return f"cost: unknown: {cost.get('totalUnknownSummary') or 'no sourced price'}"
    block = cost.get("capacityBlock") or {}
    whole = f"; the Capacity Block ${block['totalUsd']:,.2f}, paid up front" if block.get("totalUsd") is not None else ""
    return (f"cost: {_usd(cost['totalPerHourWhileTraining'])} while training, {_usd(cost['totalPerHourIdle'])} idle "
            f"({report['instanceType']} in {report['region']}; everything the stack bills by the hour, usage-based not included{whole})")  # fmt: skip


def storage_line(budget: Optional[Mapping[str, Any]]) -> str:
    """The storage budget's verdict: what the run needs of what its storage offers."""
    if not budget:
        return "storage budget: none (no run on this stack)"
    storage = budget["storage"]
    return f"storage budget: {budget['verdict']}: {budget['needGiB']:g} of {storage['roomGiB']:g} GiB on {storage['name']}"


def placeholders_line(plan: Plan) -> str:
    """How many placeholders are left, and what ``pulumi up`` does with them."""
    if not plan.placeholders:
        return "placeholders: none"
    allowed = plan.settings is not None and plan.settings.allow_placeholders
    one = len(plan.placeholders) == 1
    if allowed:
        then = f"deployed as {'it is' if one else 'they are'}: allowPlaceholders: true"
    else:
        then = f"pulumi up refuses {'it' if one else 'them'} unless allowPlaceholders: true"
    return f"placeholders: {len(plan.placeholders)} to replace ({then})"


def lines(plan: Plan, report: Optional[Mapping[str, Any]], budget: Optional[Mapping[str, Any]], out: Path,
          plan_file: str, manifests_folder: str) -> list[str]:  # fmt: skip
    """The quiet plan: five lines (``report``: the efficiency report, ``budget``: plan.json's storageBudget)."""
    manifests = len(plan.manifests())
    return [
        f"stack {plan.stack}: {counted(len(plan.resources), 'resource')} in {plan.region}",
        cost_line(report, plan.settings is not None and plan.settings.platform.role == "experiment"),
        storage_line(budget),
        placeholders_line(plan),
        f"wrote {out / plan_file} and {counted(manifests, 'manifest')} in {out / manifests_folder}",
    ]
