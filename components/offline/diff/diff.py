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
from typing import Any, Callable

from . import verdicts
from .changes import MISSING, Change, ItemRun, ResourceChange, changed_paths, input_paths, summarised
from ..outputs.plan import EFFICIENCY_FILE, PLAN_FILE

__all__ = ["MISSING", "Change", "PlanDiff", "PlanError", "ResourceChange", "changed_paths", "diff_plans", "load_plan", "render_markdown", "run"]


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
    other_stacks: str = ""
    """When the plans are of two different stacks, the line that says so (shown first)."""

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
    def sections(self) -> list[tuple[str, list[ResourceChange]]]:
        """The changed resources as both renderings list them: created, deleted, replaced, updated in
        place (the kind of each), the empty ones left out."""
        return [(kind, rcs) for kind, rcs in (("create", self.created), ("delete", self.deleted), ("replace", self.replaced), ("update", self.in_place)) if rcs]

    @property
    def warnings(self) -> list[str]:
        return [f"{rc.type} {rc.name}: {w}" for rc in (*self.deleted, *self.updated) for w in rc.warnings]

    @property
    def gpu_or_cluster_warnings(self) -> list[str]:
        """The warnings about the GPU nodes or the cluster (the first warning box)."""
        return [f"{rc.type} {rc.name}: {w}" for rc in (*self.deleted, *self.updated) if rc.type in verdicts.GPU_OR_CLUSTER for w in rc.warnings]

    @property
    def other_warnings(self) -> list[str]:
        """The rest: the training run replaced, a data store deleted (the second box)."""
        return [f"{rc.type} {rc.name}: {w}" for rc in (*self.deleted, *self.updated) if rc.type not in verdicts.GPU_OR_CLUSTER for w in rc.warnings]


def _resource_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes = changed_paths(old.get("inputs", {}), new.get("inputs", {}), "inputs")
    changes += changed_paths(old.get("options", {}), new.get("options", {}), "options")
    for key in ("parent", "provider", "custom"):
        changes += changed_paths(old.get(key), new.get(key), key)
    return changes


def diff_plans(base: dict[str, Any], new: dict[str, Any], base_label: str = "base", new_label: str = "new") -> PlanDiff:
    """Compare two plans (plan.json shape) and judge every change (:mod:`.verdicts`)."""
    olds = {r["urn"]: r for r in base["resources"]}
    news = {r["urn"]: r for r in new["resources"]}
    created = [ResourceChange(u, news[u]["type"], news[u]["name"], "create") for u in sorted(set(news) - set(olds))]
    deleted = [ResourceChange(u, olds[u]["type"], olds[u]["name"], "delete") for u in sorted(set(olds) - set(news))]
    moved = bool(base.get("region") and new.get("region") and base["region"] != new["region"])
    updated: list[ResourceChange] = []
    notes: list[str] = []
    for urn in sorted(set(olds) & set(news)):
        changes = _resource_changes(olds[urn], news[urn])
        regional = moved and verdicts.regional(news[urn]["type"])
        if changes or regional:
            rc = ResourceChange(urn, news[urn]["type"], news[urn]["name"], "update", changes)
            forced, unknown = verdicts.replaced_by(olds[urn], news[urn], input_paths(rc))
            if regional:
                forced = [f"aws:region {base['region']} → {new['region']}", *forced]
            if forced:
                rc.kind, rc.replaced_by = "replace", forced
            updated.append(rc)
            notes += [f"{rc.type} {rc.name} may be replaced: {line}" for line in dict.fromkeys(unknown)]
    updated += verdicts.propagate(updated, olds, news)
    updated.sort(key=lambda rc: rc.urn)
    data_risks: list[str] = []
    # another region is another VPC: no CIDR there is held
    refused = [] if moved else verdicts.cidr_refusals(created, deleted, updated, olds, news)
    for rc in (*deleted, *updated):
        resource = news.get(rc.urn) or olds.get(rc.urn)
        rc.warnings = verdicts.warnings_of(rc, resource, olds.get(rc.urn))
        risk = verdicts.data_risk(rc, olds.get(rc.urn) or resource)
        if risk:
            data_risks.append(risk)
        for refusal in (verdicts.version_refusal(rc), verdicts.zone_refusal(rc, olds, news) if rc.urn in olds and rc.urn in news else None):
            if refusal:
                refused.append(f"{rc.type} {rc.name}: {refusal}")
    other_stacks = ""
    if base.get("stack") != new.get("stack") or base.get("project") != new.get("project"):
        other_stacks = (f"these are plans of two different stacks ({base.get('project')}/{base.get('stack')} and "
                        f"{new.get('project')}/{new.get('stack')}): URNs carry the stack, so every resource differs")  # fmt: skip
    if moved:
        notes.append(f"aws:region {base['region']} → {new['region']}: every regional AWS resource is created anew in {new['region']} "
                     f"and the old one deleted in {base['region']} (IAM's are global and stay)")
    renamed = {(r.type, r.name) for r in created} & {(r.type, r.name) for r in deleted}
    for type_, name in sorted(renamed):
        notes.append(f"{type_} {name} changed URN (new parent?): Pulumi replaces it unless given an alias")
    outputs = changed_paths(base.get("outputs", {}), new.get("outputs", {}), "outputs")
    return PlanDiff(
        base_label, new_label, created, deleted, updated, outputs, notes, data_risks=data_risks, refused=refused, other_stacks=other_stacks
    )


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


def item_run_text(run: ItemRun, code: str = "") -> str:
    """A run of list items added or removed, as one line (``code``: the quote around paths and values)."""
    side = run.example.new if run.added else run.example.old
    return (f"{code}{run.path}[{run.first}..{run.last}]{code}: {run.count} items {'added' if run.added else 'removed'} "
            f"(the first: {code}{_value(side)}{code})")  # fmt: skip


def text_change_lines(change: Change) -> list[str]:
    """The lines (or, in a one-line text such as a command line, the words) a long text changed,
    as a unified diff body, at most _MAX_TEXT_DIFF_LINES of them: for every rendering of the diff."""
    old, new = _pieces(change.old, change.new)
    by_line = "\n" in change.old or "\n" in change.new
    # hunk headers give line numbers; for the words of a command line they would only be noise
    skip = ("---", "+++") if by_line else ("---", "+++", "@@")
    body = [line for line in difflib.unified_diff(old, new, lineterm="", n=0) if not line.startswith(skip)]
    shown = body[:_MAX_TEXT_DIFF_LINES]
    if len(body) > len(shown):
        shown.append(f"... {len(body) - len(shown)} more lines")
    return shown


def _change_lines(change: "Change | ItemRun", indent: str) -> list[str]:
    """One changed value as Markdown list lines. A long text on both sides (a launch script, a
    command line) shows the lines (or words) that changed, as a diff block, instead of the first
    characters of each side, which are usually the same."""
    if isinstance(change, ItemRun):
        return [f"{indent}- {item_run_text(change, '`')}"]
    if not (_is_text(change.old) and _is_text(change.new)):
        return [f"{indent}- `{change.path}`: `{_value(change.old)}` → `{_value(change.new)}`"]
    shown = text_change_lines(change)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", "\n".join(shown))), default=0))
    pad = indent + "  "
    return [f"{indent}- `{change.path}`: text changed", f"{pad}{fence}diff", *(pad + line for line in shown), f"{pad}{fence}"]


def _boxes(kind: str, *boxes: tuple[str, list[str]]) -> list[str]:
    """GitHub alert boxes (``> [!CAUTION]``), one per non-empty list, each under its heading."""
    lines: list[str] = []
    for heading, items in boxes:
        if items:
            lines += [f"> [!{kind}]", f"> {heading}", *(f"> - {item}" for item in items), ""]
    return lines


SECTION_HEADINGS = {"create": "+ create", "delete": "- delete", "replace": "+- replace (cannot change in place)", "update": "~ update"}
"""The heading of each of :attr:`PlanDiff.sections`, its mark first."""


def render_markdown(diff: PlanDiff) -> str:
    """The diff as Markdown text, readable in a PR comment, a job summary or a terminal."""
    lines = [f"### Offline infrastructure diff: `{diff.base}` → `{diff.new}`", ""]
    if diff.other_stacks:
        lines += [f"> [!NOTE]\n> {diff.other_stacks[0].upper()}{diff.other_stacks[1:]}.", ""]
    if diff.equal:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    lines.append(
        f"**{len(diff.created)} to create, {len(diff.in_place)} to update in place, {len(diff.replaced)} to replace "
        f"(delete, then create), {len(diff.deleted)} to delete**"
        + (f", {len(diff.outputs)} output changes" if diff.outputs else "")
    )
    lines.append("")
    lines += _boxes(
        "CAUTION",
        ("Refused: `pulumi up` fails on these changes:", diff.refused),
        ("Data at risk: these changes replace or delete a store that holds data:", diff.data_risks),
    )
    for line in diff.cost:
        lines.append(f"**Cost:** {line}")
    if diff.cost:
        lines.append("")
    lines += _boxes(
        "WARNING",
        ("Changes that replace or roll the nodes or the cluster:", diff.gpu_or_cluster_warnings),
        ("Changes that replace the training run:", diff.other_warnings),
    )
    for note in diff.notes:
        lines.append(f"_Note: {note}_")
    if diff.notes:
        lines.append("")
    for kind, changed in diff.sections:
        lines.append(f"#### {SECTION_HEADINGS[kind]}")
        for rc in changed:
            because = f" (replaced because of {', '.join(f'`{p}`' for p in rc.replaced_by)})" if rc.replaced_by else ""
            lines.append(f"- `{rc.type}` **{rc.name}**{because}")
            for change in summarised(rc.changes):
                lines.extend(_change_lines(change, "  "))
        lines.append("")
    if diff.outputs:
        lines.append("#### outputs")
        for change in summarised(diff.outputs):
            lines.extend(_change_lines(change, ""))
        lines.append("")
    return "\n".join(lines)


def run(base_path: str, new_path: str, render: Callable[[PlanDiff], str] | None = None) -> tuple[int, str]:
    """The CLI's work: (exit status, text). 0 equal, 1 different, 2 bad input. ``render``:
    render_markdown (a PR comment, a job summary; the default) or offline/diff_text.render_text (a
    terminal)."""
    try:
        base = load_plan(base_path)
        new = load_plan(new_path)
    except PlanError as err:
        return 2, f"error: {err}"
    diff = diff_plans(base, new, str(base_path), str(new_path))
    diff.cost = cost_change(_efficiency_beside(base_path), _efficiency_beside(new_path))
    return (0 if diff.equal else 1), (render or render_markdown)(diff)


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
            # the short phrase (the reasons are in efficiency.json); a report from before it had none
            summary = new["cost"].get("totalUnknownSummary") or base["cost"].get("totalUnknownSummary") or "no sourced price"
            lines.append(f"unknown {when}: {summary}")
    return lines
