"""``--set KEY=VALUE`` and ``--unset KEY`` as the Pulumi CLI reads them (``pulumi config set --path``,
``pulumi config rm --path``): the key path grammar (names, ``[0]``, quoted ``["a.b"]``), the value
(``parse_scalar``) and the edit of a stack's config values. rlinf_eks.offline.engine.stack_config applies
them after the stack file.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any


class StackConfigError(ValueError):
    pass


def _qualify(key: str, project: str) -> str:
    """``ns:path`` for a key path; a ':' inside a quoted key (``tags["team:a"]``) is no namespace."""
    head = re.split(r"[.\[]", key, maxsplit=1)[0]
    return key if ":" in head else f"{project}:{key}"


@dataclass(frozen=True)
class Unset:
    """An ``--unset KEY`` edit: remove KEY, as ``pulumi config rm --path KEY``; the setting falls back
    to the project default or the setting's own default."""

    key: str

    def flag(self) -> str:
        return f"--unset {self.key!r}"


class _UnsetAction(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, value: Any, option: Any = None) -> None:
        getattr(namespace, self.dest).append(Unset(value))


def add_edit_arguments(parser: argparse.ArgumentParser, *, help_set: str = "as for plan") -> None:
    """``--set KEY=VALUE`` and ``--unset KEY``, kept in the order given (in ``args.set``)."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help_set)
    parser.add_argument(
        "--unset", action=_UnsetAction, dest="set", metavar="KEY",
        help="as `pulumi config rm --path KEY`: the key falls back to its default, e.g. workload.env.NCCL_DEBUG",
    )


def split_assignment(item: str) -> tuple[str, str]:
    """KEY and VALUE of a ``--set KEY=VALUE``: the first '=' outside a quoted key, so that
    ``tags["a=b"]=x`` sets the tag ``a=b`` (tag keys may hold '=', ':', '/', '.', '+', '@')."""
    at, depth = 0, False
    while at < len(item):
        char = item[at]
        if depth and char == "\\":
            at += 2
            continue
        if char == '"':
            depth = not depth
        elif char == "=" and not depth:
            return item[:at], item[at + 1 :]
        at += 1
    if depth and "=" in item:  # a quote left open: the path's own parser says where
        key, _, value = item.partition("=")
        return key, value
    raise StackConfigError("expected KEY=VALUE, such as gpuNodes.nodeCount=2 (--unset KEY removes a key)")


def edit(values: dict[str, Any], item: "str | Unset", project: str) -> None:
    """Apply one ``--set KEY=VALUE`` or ``--unset KEY`` to ``values`` (namespaced keys)."""
    key, raw = (item.key, None) if isinstance(item, Unset) else split_assignment(item)
    if not key:
        raise StackConfigError("the key is empty; such as gpuNodes.nodeCount")
    qualified = _qualify(key, project)
    # here, not at the top: the command line's parser (--help, diff) needs no settings models
    from ...config import foreign_project_key

    problem = foreign_project_key(qualified, project)
    if problem:
        raise StackConfigError(problem)
    if raw is None:
        unset_path(values, qualified)
    else:
        set_path(values, qualified, parse_scalar(raw))


def parse_scalar(raw: str) -> Any:
    """A ``--set`` value as ``pulumi config set --path`` stores it (the CLI's ``adjustObjectValue``):
    ``true``/``false`` are booleans, a 64-bit integer without a leading zero is a number, and
    everything else, floats included, stays a string (``1.30`` must not become ``1.3``)."""
    if raw in ("true", "false"):
        return raw == "true"
    if len(raw) > 1 and raw[0] == "0":
        return raw  # "0123" keeps its zeros
    if re.fullmatch(r"[+-]?[0-9]+", raw) and -(2**63) <= int(raw) < 2**63:
        return int(raw)
    return raw


# Path segments as `pulumi config set --path` reads them: name, [index], or ["key.with.dots"].
_NAME = re.compile(r'[^.\[\]"]+')
_INDEX = re.compile(r"\[([0-9]+)\]")
_QUOTED = re.compile(r'\["((?:[^"\\]|\\.)*)"\]')


def parse_path(path: str) -> list[str | int]:
    """The segments of a ``--path`` key, or StackConfigError naming where it is malformed."""
    segments: list[str | int] = []
    at = 0

    def malformed(why: str) -> StackConfigError:
        return StackConfigError(
            f"{path!r} is a malformed key path at character {at + 1} ({why}); paths are names joined by '.', "
            'list indexes [0] and quoted keys ["a.b"], such as workload.trainer.batch["actor.global_batch_size"]'
        )

    while at < len(path):
        if segments and path[at] == ".":
            at += 1
            if at == len(path) or path[at] in ".[":
                raise malformed("a name must follow '.'")
        if path[at] == "[":
            match = _INDEX.match(path, at) or _QUOTED.match(path, at)
            if not match:
                raise malformed("'[' opens a list index such as [0] or a quoted key such as [\"a.b\"], closed by ']'")
            index, quoted = (match.group(1), None) if match.re is _INDEX else (None, match.group(1))
            segments.append(int(index) if index is not None else re.sub(r"\\(.)", r"\1", quoted or ""))
        else:
            match = _NAME.match(path, at)
            if not match or (segments and path[at - 1] not in "."):
                raise malformed(f"unexpected {path[at]!r}")
            segments.append(match.group(0))
        at = match.end()
    if not segments or not isinstance(segments[0], str):
        raise StackConfigError(f"{path!r} is not a config key path; it starts with a key name, such as gpuNodes.nodeCount")
    return segments


def set_path(values: dict[str, Any], qualified_key: str, value: Any) -> None:
    """Set ``ns:top.a.b[0]`` in ``values``, creating objects and lists on the way."""
    namespace, _, path = qualified_key.partition(":")
    segments = parse_path(path)
    top = f"{namespace}:{segments[0]}"
    rest = segments[1:]
    if not rest:
        values[top] = value
        return
    node = values.get(top)
    if not isinstance(node, (dict, list)):
        node = [] if isinstance(rest[0], int) else {}
        values[top] = node
    for here, nxt in zip(rest, rest[1:] + [None]):
        if nxt is None:
            _assign(node, here, value, qualified_key)
            return
        child = node[here] if _has(node, here) else None
        if not isinstance(child, (dict, list)):
            child = [] if isinstance(nxt, int) else {}
            _assign(node, here, child, qualified_key)
        node = child


def unset_path(values: dict[str, Any], qualified_key: str) -> None:
    """Remove ``ns:top.a.b[0]`` from ``values`` (a list item: the items after it move up). A key
    that is not set is no error, as ``pulumi config rm`` says nothing of it either."""
    namespace, _, path = qualified_key.partition(":")
    segments = parse_path(path)
    node: Any = values
    keys: list[str | int] = [f"{namespace}:{segments[0]}", *segments[1:]]
    for here in keys[:-1]:
        if not _has(node, here):
            return
        node = node[here]
    last = keys[-1]
    if isinstance(node, list) and isinstance(last, str):
        raise StackConfigError(f"{_list_at(qualified_key)} is a list: remove an item by its index, such as [0]")
    if _has(node, last):
        del node[last]


def _list_at(qualified_key: str) -> str:
    return qualified_key.split(":", 1)[-1].rsplit("[", 1)[0]


def _has(node: Any, key: str | int) -> bool:
    return (isinstance(node, dict) and key in node) or (isinstance(node, list) and isinstance(key, int) and key < len(node))


def _assign(node: Any, key: str | int, value: Any, where: str) -> None:
    if isinstance(node, list):
        if not isinstance(key, int) or key > len(node):
            raise StackConfigError(f"list index {key} is past the end of {_list_at(where)} ({len(node)} items): use [{len(node)}] to append")
        if key == len(node):
            node.append(value)
        else:
            node[key] = value
    elif isinstance(key, int):
        raise StackConfigError(f"[{key}] indexes an object, not a list: use a key name, such as .nodeCount")
    else:
        node[key] = value
