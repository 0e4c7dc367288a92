"""The changes between two offline plans, as data: one changed value (:class:`Change`), one
resource's changes and verdict (:class:`ResourceChange`), and how two values are compared
(:func:`changed_paths`: dicts by key, lists of named objects by name, other lists by index). The
diff (:mod:`.diff`) builds them; :mod:`.verdicts` judges them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable


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
    """For ``replace``: the changed input paths that force it (offline/diff/replacement.py)."""




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


def under(path: str, prefixes: Iterable[str]) -> bool:
    """``path`` is one of ``prefixes`` or below it (``a.b``, ``a[0]``)."""
    return any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in prefixes)


def input_paths(rc: ResourceChange) -> list[str]:
    """The changed input paths of ``rc``, relative to ``inputs``."""
    return [c.path[len("inputs."):] for c in rc.changes if c.path.startswith("inputs.")]


SUMMARISED_RUN = 4
"""A run of this many list items added or removed (in index order) is shown as one line."""
_ITEM = re.compile(r"(?P<list>.*)\[(?P<index>\d+)\]")


@dataclass(frozen=True)
class ItemRun:
    """Consecutive items of one list all added or all removed (a p5 -> p5en launch template loses
    16 network interfaces): shown as one line instead of one line per item."""

    path: str
    """The list's path, such as ``inputs.networkInterfaces``."""
    first: int
    last: int
    added: bool
    example: Change

    @property
    def count(self) -> int:
        return self.last - self.first + 1


def summarised(changes: list[Change]) -> list["Change | ItemRun"]:
    """``changes`` with each run of at least SUMMARISED_RUN consecutive list items that were all
    added or all removed replaced by one ItemRun."""
    result: list[Change | ItemRun] = []
    at = 0
    while at < len(changes):
        run = _run_at(changes, at)
        if len(run) >= SUMMARISED_RUN:
            match = _ITEM.fullmatch(run[0].path)
            assert match is not None
            first = int(match.group("index"))
            result.append(ItemRun(match.group("list"), first, first + len(run) - 1, run[0].old is MISSING, run[0]))
            at += len(run)
        else:
            result.append(changes[at])
            at += 1
    return result


def _run_at(changes: list[Change], at: int) -> list[Change]:
    """The changes from ``at`` on that add (or remove) consecutive items of one list."""
    head = _ITEM.fullmatch(changes[at].path)
    added = changes[at].old is MISSING
    if head is None or (changes[at].new is MISSING) == added:
        return [changes[at]]
    run = [changes[at]]
    for change in changes[at + 1 :]:
        match = _ITEM.fullmatch(change.path)
        if (match is None or match.group("list") != head.group("list") or int(match.group("index")) != int(head.group("index")) + len(run)
                or (change.old is MISSING) != added or (change.new is MISSING) == added):  # fmt: skip
            break
        run.append(change)
    return run
