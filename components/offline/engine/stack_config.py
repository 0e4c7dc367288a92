"""Stack configuration as the Pulumi CLI would hand it to the program, read from the files.

Mocks do not read Pulumi.yaml or stack files, so this module does: project-level values and
defaults from ``Pulumi.yaml``, then ``stacks/Pulumi.<stack>.yaml``, then ``--set`` edits with the
meaning of ``pulumi config set --path KEY VALUE``.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...config import PROJECT
from ...plan_reader import SECRET as SECRET_PLACEHOLDER
from .config_edits import (
    StackConfigError,
    Unset,
    add_edit_arguments,
    edit,
    parse_path,
    parse_scalar,
    set_path,
    split_assignment,
    unset_path,
    _qualify,
)


@dataclass
class StackConfig:
    project: str
    stack: str
    values: dict[str, Any]  # "namespace:key" -> structured value
    secret_keys: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    """The ``--set``/``--unset`` edits that could not be applied, one line each: reported together
    with the settings' own problems (``rlinf_eks.offline.outputs.plan.settings_of``)."""

    def flat(self) -> dict[str, str]:
        """The values as the Pulumi engine passes them: strings, objects as JSON."""
        return {key: value if isinstance(value, str) else json.dumps(value) for key, value in self.values.items()}


def project_root(start: Path | None = None) -> Path:
    """The folder holding Pulumi.yaml: the current one or a parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    raise StackConfigError(f"no Pulumi.yaml in {here} or its parents: run from the project folder")


def available_stacks(root: Path) -> list[str]:
    config_dir = root / _project_file(root).get("stackConfigDir", ".")
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in config_dir.glob("Pulumi.*.yaml") if p.is_file())


def _shown_path(path: Path, root: Path) -> Path:
    return path.relative_to(root) if path.is_relative_to(root) else path


def stack_file_path(root: Path, stack: str) -> Path:
    """Where the stack's file is: ``<stackConfigDir>/Pulumi.<stack>.yaml`` (it may not exist)."""
    return root / _project_file(root).get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"


def _project_file(root: Path) -> dict[str, Any]:
    return _read_yaml(root / "Pulumi.yaml", root)


def _read_yaml(path: Path, root: Path) -> dict[str, Any]:
    """A YAML file holding a mapping, or a StackConfigError naming the file, line and problem."""
    where = path.relative_to(root) if path.is_relative_to(root) else path
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise StackConfigError(f"{where}: cannot be read: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        # YAML 1.2 and the Pulumi CLI read stack files as UTF-8.
        line = raw[: err.start].count(b"\n") + 1
        raise StackConfigError(
            f"{where} line {line}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}); save the file as UTF-8"
        ) from None
    try:
        data = _load_stack_yaml(text, where) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise StackConfigError(f"{where}{line}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise StackConfigError(f"{where}: must be a mapping with a config: key; got {type(data).__name__} {data!r:.60}")
    problem = _non_string_key(data)
    if problem:
        raise StackConfigError(f"{where}: {problem}")
    return data


class _StackFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader reading values as the Pulumi CLI does: Go's YAML libraries hand an
    unquoted timestamp or date to an untyped value as its text, so ``startTime:
    2027-01-11T11:30:00Z`` and ``built: 2026-01-01`` reach the program as those strings, and
    ``yes``/``no``/``on``/``off`` as text too. Numbers keep the text they were written as
    (WrittenFloat) for the problem lines."""


class _Written:
    """A number as read from a stack file, with its text: ``1.30`` reads as 1.3 and ``007`` as 7, and
    a problem line (a number where text is meant) shows the text to quote."""

    written: str

    def __new__(cls, value: Any, written: str) -> Any:
        number = super().__new__(cls, value)  # type: ignore[call-arg]
        number.written = written
        return number

    def __reduce__(self) -> Any:
        return (type(self), (type(self).__mro__[2](self), self.written))


class WrittenFloat(_Written, float):
    pass


class WrittenInt(_Written, int):
    """An integer whose text is not its digits (``007``, ``1_000``, ``0x1f``)."""


def _float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    return WrittenFloat(loader.construct_yaml_float(node), node.value)


def _int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    number = loader.construct_yaml_int(node)
    return number if str(number) == node.value else WrittenInt(number, node.value)


# YAML 1.1's yes/no/on/off, which PyYAML reads as booleans, are text to the Pulumi CLI (go-yaml v3
# reads them as booleans only into a typed bool, and config values are untyped): only true/false are.
_YAML_1_2_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    return _YAML_1_2_BOOLS.get(node.value, node.value)


_StackFileLoader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))
_StackFileLoader.add_constructor("tag:yaml.org,2002:float", _float)
_StackFileLoader.add_constructor("tag:yaml.org,2002:int", _int)
_StackFileLoader.add_constructor("tag:yaml.org,2002:bool", _bool)

# Values a Pulumi config (JSON) cannot hold: the JSON encoder refuses NaN and infinities, and
# binary data, sets and ordered pair lists have no JSON form.
_NOT_JSON_TAGS = {
    "tag:yaml.org,2002:binary": "binary data",
    "tag:yaml.org,2002:set": "a set",
    "tag:yaml.org,2002:omap": "an ordered map",
    "tag:yaml.org,2002:pairs": "a list of pairs",
}
_NOT_A_NUMBER = re.compile(r"[-+]?\.(inf|Inf|INF|nan|NaN|NAN)")


def _load_stack_yaml(text: str, where: Any) -> Any:
    """The YAML document of ``text``; a key given twice (Pulumi refuses it) or a value Pulumi
    config cannot hold is a StackConfigError naming the file, the key path and the line(s)."""
    loader = _StackFileLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problem = _node_problem(node, "")
        if problem:
            raise StackConfigError(f"{where}{problem}")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _written(node: yaml.Node) -> str:
    """A value as the file spells it: a scalar's text (with an explicit tag), else the tag."""
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    if isinstance(node, yaml.ScalarNode):
        return f"{tag} {node.value}" if tag.startswith("!!") and tag[2:] in ("binary",) else node.value
    return tag


def _node_problem(node: yaml.Node, path: str) -> str | None:
    """The first duplicate key or non-JSON value below ``node`` (``path`` its key path)."""
    line = node.start_mark.line + 1
    if node.tag in _NOT_JSON_TAGS or (node.tag == "tag:yaml.org,2002:float" and _NOT_A_NUMBER.fullmatch(str(node.value))):
        what = _NOT_JSON_TAGS.get(node.tag, "not a finite number")
        return (
            f" line {line}: {path or 'the document'}={_written(node)}: {what}, which Pulumi config (JSON) cannot hold; "
            "values are strings, numbers, true/false, null, lists and objects (quote it to mean the text)"
        )
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                continue  # `<<:` merges may be overridden by the mapping's own keys
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            here = f"{path}.{name}" if path else str(name)
            if isinstance(key, yaml.ScalarNode):
                if (key.tag, name) in seen:
                    return f": {here} is given twice, at lines {seen[(key.tag, name)]} and {key.start_mark.line + 1}; Pulumi refuses a key given twice: keep one"
                seen[(key.tag, name)] = key.start_mark.line + 1
            found = _node_problem(value, here)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found = _node_problem(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _non_string_key(node: Any, path: str = "") -> str | None:
    """The first mapping key that is not a string (YAML reads `1:`, `true:` or `null:` as such),
    which Pulumi's config (JSON objects) cannot hold."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                shown = "null" if key is None else json.dumps(key) if isinstance(key, (bool, int, float)) else repr(key)
                return f"{path or 'the top level'}: key {shown} is a {type(key).__name__}, not a string; quote it ('{shown}':)"
            found = _non_string_key(value, f"{path}.{key}" if path else key)
            if found:
                return found
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found = _non_string_key(item, f"{path}[{index}]")
            if found:
                return found
    return None


_STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[^/\\]+)\.ya?ml")


def is_stack_path(stack: str) -> bool:
    """Whether a STACK argument names a stack file (``path/to/Pulumi.x.yaml``) rather than a stack."""
    return "/" in stack or stack.endswith((".yaml", ".yml"))


def stack_name(stack: str) -> str:
    """The stack a STACK argument names: ``x`` for ``x`` and for ``path/to/Pulumi.x.yaml``."""
    if not is_stack_path(stack):
        return stack
    match = _STACK_FILE.fullmatch(Path(stack).name)
    if match is None:
        raise StackConfigError(
            f"{stack!r}: a stack file is named Pulumi.<stack>.yaml (the Pulumi CLI finds it by that name), such as "
            "stacks/Pulumi.my-run.yaml; or give a stack name, such as single-node"
        )
    return match.group("stack")


def stack_file_of(root: Path, stack: str) -> tuple[str, Path]:
    """The stack name and file of a STACK argument: a name (``stacks/Pulumi.<name>.yaml`` of the
    project) or the path of a stack file anywhere, as ``pulumi -C`` with ``--config-file`` reads one."""
    name = stack_name(stack)
    if is_stack_path(stack):
        path = Path(stack).expanduser()
        if not path.is_file():
            raise StackConfigError(f"{stack!r}: no such stack file" + (" (it is a folder)" if path.is_dir() else ""))
        return name, path.resolve()
    path = stack_file_path(root, stack)
    if path.is_dir():
        raise StackConfigError(f"{path.relative_to(root)} is a folder, not a stack file")
    if not path.is_file():
        from ...config.errors import did_you_mean

        stacks = available_stacks(root)
        known = ", ".join(stacks) or "none"
        raise StackConfigError(
            f"unknown stack {stack!r}{did_you_mean(stack, stacks)}: no {path.relative_to(root)} (stacks: {known}; or give a stack file's path, "
            "such as path/to/Pulumi.my-run.yaml)"
        )
    return name, path


def _unset_key_known(key: str, project: str) -> None:
    """An ``--unset`` of a key no setting has (a typo: ``gpuNodes.nodecount``) is refused as a
    ``--set`` of it is, with the nearest key: removing it would silently change nothing."""
    from ...config.pulumi_config import unknown_key_path

    qualified = _qualify(key, project)
    namespace, _, path = qualified.partition(":")
    if namespace == project:
        problem = unknown_key_path(parse_path(path))
        if problem:
            raise StackConfigError(problem.split(": ", 1)[1])  # the flag names the key already


def load(root: Path, stack: str, sets: list[str] | None = None) -> StackConfig:
    """The full config of ``stack`` (a stack name or a stack file's path): project defaults, the
    stack file, then ``sets``."""
    project_file = _project_file(root)
    project = project_file.get("name", PROJECT)
    values: dict[str, Any] = {}
    for key, decl in (project_file.get("config") or {}).items():
        if isinstance(decl, dict) and ("value" in decl or "default" in decl):
            values[_qualify(key, project)] = copy.deepcopy(decl.get("value", decl.get("default")))
        elif not isinstance(decl, dict):
            values[_qualify(key, project)] = decl

    stack, path = stack_file_of(root, stack)
    stack_file = _read_yaml(path, root)
    if stack_file.get("config") is None:
        raise StackConfigError(
            f"{_shown_path(path, root)}: has no config: key (keys: {', '.join(map(str, stack_file)) or 'none'}); the settings "
            "live under it, such as config: {rlinf-eks:workload: {image: ...}}"
        )
    stack_values = stack_file["config"]
    if not isinstance(stack_values, dict):
        raise StackConfigError(
            f"{_shown_path(path, root)}: config must map keys to values (such as rlinf-eks:gpuNodes: {{nodeCount: 2}}), "
            f"got {type(stack_values).__name__} {stack_values!r:.60}"
        )
    secret_keys: set[str] = set()
    for key, value in stack_values.items():
        qualified = _qualify(key, project)
        if isinstance(value, dict) and set(value) == {"secure"}:
            # Encrypted with the stack's secrets provider: unreadable offline, and never needed in clear.
            value = SECRET_PLACEHOLDER
            secret_keys.add(qualified)
        values[qualified] = value

    problems: list[str] = []
    for item in sets or []:
        try:
            edit(values, item, project)
            if isinstance(item, Unset):
                _unset_key_known(item.key, project)
        except StackConfigError as err:
            problems.append(f"{item.flag()}: {err}" if isinstance(item, Unset) else f"--set {item!r}: {err}")
    return StackConfig(project=project, stack=stack, values=values, secret_keys=secret_keys, problems=problems)
