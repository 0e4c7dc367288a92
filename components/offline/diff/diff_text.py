"""The offline diff as plain text for a terminal (``python -m rlinf_eks diff --format text``, the
default when stdout is a terminal): the same content as the Markdown of a PR comment
(:func:`rlinf_eks.offline.diff.diff.render_markdown`) in the same order, without its markup (``###``,
``**``, backticks, ``> [!CAUTION]`` boxes): headings in capitals, boxes as indented lists."""

from __future__ import annotations

from .changes import Change, ItemRun, summarised
from .diff import SECTION_HEADINGS, PlanDiff, _is_text, _value, item_run_text, text_change_lines


def _change_lines(change: "Change | ItemRun", indent: str) -> list[str]:
    if isinstance(change, ItemRun):
        return [f"{indent}{item_run_text(change)}"]
    if not (_is_text(change.old) and _is_text(change.new)):
        return [f"{indent}{change.path}: {_value(change.old)} -> {_value(change.new)}"]
    return [f"{indent}{change.path}: text changed", *(f"{indent}  | {line}" for line in text_change_lines(change))]


def _box(heading: str, items: list[str]) -> list[str]:
    return [heading, *(f"  - {item}" for item in items), ""] if items else []


def render_text(diff: PlanDiff) -> str:
    """The diff as plain text, for reading in a terminal."""
    lines = [f"Offline infrastructure diff: {diff.base} -> {diff.new}", ""]
    if diff.other_stacks:
        lines += [f"Note: {diff.other_stacks}.", ""]
    if diff.equal:
        return "\n".join([*lines, "No changes."]) + "\n"
    lines.append(
        f"{len(diff.created)} to create, {len(diff.in_place)} to update in place, {len(diff.replaced)} to replace "
        f"(delete, then create), {len(diff.deleted)} to delete" + (f", {len(diff.outputs)} output changes" if diff.outputs else "")
    )
    lines.append("")
    lines += _box("REFUSED: pulumi up fails on these changes:", diff.refused)
    lines += _box("DATA AT RISK: these changes replace or delete a store that holds data:", diff.data_risks)
    lines += [f"Cost: {line}" for line in diff.cost] + ([""] if diff.cost else [])
    lines += _box("Changes that replace or roll the nodes or the cluster:", diff.gpu_or_cluster_warnings)
    lines += _box("Changes that replace the training run:", diff.other_warnings)
    lines += [f"Note: {note}" for note in diff.notes] + ([""] if diff.notes else [])
    for kind, changed in diff.sections:
        heading = SECTION_HEADINGS[kind]
        mark = heading.split()[0]
        lines.append(heading)
        for rc in changed:
            because = f" (replaced because of {', '.join(rc.replaced_by)})" if rc.replaced_by else ""
            lines.append(f"  {mark} {rc.type}  {rc.name}{because}")
            for change in summarised(rc.changes):
                lines.extend(_change_lines(change, "      "))
        lines.append("")
    if diff.outputs:
        lines.append("outputs")
        for change in summarised(diff.outputs):
            lines.extend(_change_lines(change, "  "))
        lines.append("")
    return "\n".join(lines)
