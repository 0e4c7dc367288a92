"""The efficiency report (efficiency.json) as a small picture, efficiency.svg: a bar per resource
the training pods fill (GPUs, EFA interfaces, CPU, memory) and the cost per hour, so that a
reviewer sees the stack's shape and cost at a glance. Plain SVG 1.1, no scripts, no fonts
fetched; deterministic (the same report gives the same bytes)."""

from __future__ import annotations

from typing import Any, Mapping, Optional
from xml.sax.saxutils import escape

WIDTH = 480
BAR_X, BAR_W, ROW_H = 150, 240, 26
FILL_OK, FILL_LOW, EMPTY = "#2e7d32", "#c62828", "#e0e0e0"
# below this share a resource the pods should fill (GPUs, EFA) is drawn in red
FULL_ENOUGH = 0.95


def _money(value: Optional[float]) -> str:
    return "unknown" if value is None else f"${value:,.2f}/h"


def _bar(y: int, label: str, fraction: Optional[float], detail: str) -> str:
    share = max(0.0, min(1.0, fraction or 0.0))
    colour = FILL_OK if fraction is not None and fraction >= FULL_ENOUGH else FILL_LOW
    text = "n/a" if fraction is None else f"{fraction:.0%}"
    return (
        f'<g><title>{escape(label)}: {escape(detail)}</title>'
        f'<text x="10" y="{y + 17}">{escape(label)}</text>'
        f'<rect x="{BAR_X}" y="{y + 4}" width="{BAR_W}" height="{ROW_H - 8}" fill="{EMPTY}"/>'
        f'<rect x="{BAR_X}" y="{y + 4}" width="{round(BAR_W * share, 1)}" height="{ROW_H - 8}" fill="{colour}"/>'
        f'<text x="{BAR_X + BAR_W + 8}" y="{y + 17}">{escape(text)}</text></g>'
    )


def efficiency_svg(report: Mapping[str, Any]) -> str:
    """The SVG text of one efficiency report (offline/outputs/efficiency.py's dict)."""
    gpus, efa, cpu, memory = (report.get(k) or {} for k in ("gpus", "efaInterfaces", "cpu", "memory"))
    nodes = (report.get("nodes") or {}).get("whileTraining")
    cost = report.get("cost") or {}
    title = f"{report.get('stack', '')}: {nodes} x {report.get('instanceType', '')}"
    rows = [
        ("GPUs requested", gpus.get("fraction"), f"{gpus.get('requested')} of {gpus.get('onNodes')}"),
        ("EFA interfaces", efa.get("fraction"), f"{efa.get('requested')} of {efa.get('attached')}"),
        ("CPU requested", cpu.get("fraction"), f"{cpu.get('requestedMillicpu')}m of {cpu.get('allocatableMillicpu')}m"),
        ("Memory requested", memory.get("fraction"), f"{memory.get('requestedMiB')} MiB of {memory.get('allocatableMiB')} MiB"),
    ]
    placement = report.get("placement") or {}
    where = "one AZ" if placement.get("oneAvailabilityZone") else "several AZs"
    where += ", one placement group" if placement.get("onePlacementGroup") else ", no single placement group"
    height = 50 + ROW_H * len(rows) + 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="13">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<text x="10" y="40" fill="#555555">{escape(where)}</text>',
    ]
    for n, (label, fraction, detail) in enumerate(rows):
        parts.append(_bar(50 + n * ROW_H, label, fraction, detail))
    y = 50 + ROW_H * len(rows) + 20
    parts.append(f'<text x="10" y="{y}">Cost while training: {escape(_money(cost.get("totalPerHourWhileTraining")))}</text>')
    parts.append(f'<text x="10" y="{y + 20}">Cost idle: {escape(_money(cost.get("totalPerHourIdle")))}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
