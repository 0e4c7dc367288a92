"""config and trainers do not import each other's way round: config is below trainers, and the
loading step (rlinf_eks.loading) is above both."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import ROOT

COMPONENTS = ROOT / "components"


def _modules_after_import(module: str) -> list[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(m for m in sys.modules if m.startswith('rlinf_eks'))))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout)


def test_importing_config_does_not_import_trainers():
    loaded = _modules_after_import("rlinf_eks.config")
    assert "rlinf_eks.config.stack" in loaded  # the check ran on a real import (config/schema.py is split by section)
    assert not [m for m in loaded if m.startswith("rlinf_eks.trainers") or m == "rlinf_eks.loading"]


def test_importing_trainers_imports_config_but_not_the_loading_step():
    loaded = _modules_after_import("rlinf_eks.trainers")
    assert "rlinf_eks.config" in loaded and "rlinf_eks.loading" not in loaded


def _module_level_imports(path: Path, package: str) -> set[str]:
    """rlinf_eks modules ``path`` imports at module level (not inside a function or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for item in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ():
            if isinstance(item, ast.ImportFrom) and item.level:
                base = package.split(".")[: len(package.split(".")) - item.level + 1]
                prefix = ".".join(base + ([item.module] if item.module else []))
                found.add(prefix)
                found.update(f"{prefix}.{alias.name}" for alias in item.names)
            elif isinstance(item, ast.Import):
                found.update(a.name for a in item.names if a.name.startswith("rlinf_eks"))
    return found


def _package_of(path: Path) -> str:
    return ".".join(["rlinf_eks", *path.relative_to(COMPONENTS).parent.parts])


@pytest.mark.parametrize(("importer", "imported"), [("config", "trainers"), ("config", "loading"), ("trainers", "loading")])
def test_no_module_level_import_from_a_lower_layer_to_a_higher_one(importer, imported):
    files = sorted((COMPONENTS / importer).glob("*.py"))
    assert files
    offending = {
        str(f.relative_to(ROOT)): sorted(m for m in _module_level_imports(f, _package_of(f)) if m.startswith(f"rlinf_eks.{imported}"))
        for f in files
    }
    assert not {f: m for f, m in offending.items() if m}


def test_the_import_walk_sees_real_imports():
    # trainers import config at module level: the walk must find that, or the test above proves nothing
    found = _module_level_imports(COMPONENTS / "trainers" / "base.py", "rlinf_eks.trainers")
    assert "rlinf_eks.config.StackSettings" in found


def test_config_has_no_loading_step_and_loading_parse_applies_the_trainer_rules():
    from rlinf_eks import config, loading
    from rlinf_eks.trainers import TRAINER_RULES

    assert not any(hasattr(config, name) for name in ("parse", "settings_from_config", "from_pulumi_config"))
    assert set(TRAINER_RULES) <= set(loading.RULES)
    data = {"cluster": {"deployFromVpc": True}, "workload": {"image": "i", "trainer": {"dialect": "rlinf-embodied"}, "rollout": {"backend": "vllm"}}}
    config.validate(data)  # config's own rules: the rollout backend is the trainers' to check
    with pytest.raises(config.ConfigError) as err:
        loading.parse(data)
    assert err.value.problems == ["workload.rollout.backend='vllm': RLinf embodied training rolls out with HuggingFace only: use hf"]


# --- the whole package: no circle, static reading -------------------------------------------------
# Every import is read, wherever it stands: module level, inside a function, under TYPE_CHECKING. A
# function-level import still ties two modules together (one cannot be understood, moved or tested
# without the other), so "no circle" is a property of the source, not only of what a fresh
# interpreter happens to load. workload/programs/ holds scripts that run in the pods: no modules.

NOT_MODULES = ("workload/programs/",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(COMPONENTS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["rlinf_eks", *parts])


def _package_modules() -> dict[str, Path]:
    return {
        _module_name(f): f
        for f in sorted(COMPONENTS.rglob("*.py"))
        if not any(str(f.relative_to(COMPONENTS)).startswith(p) for p in NOT_MODULES)
    }


def _imports_anywhere(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The rlinf_eks modules ``path`` (module ``name``) imports anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:  # `from .pod import core`: the module is .pod
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("rlinf_eks"):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("rlinf_eks"):
                prefix = node.module
            else:
                continue
            for alias in node.names:  # `from . import fabric` imports the module rlinf_eks.workload.fabric
                add(f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _package_modules()
    return {name: _imports_anywhere(path, name, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _path_back(graph: dict[str, set[str]], circle: list[str]) -> str:
    """One concrete loop through the circle, for the failure message: a -> b -> ... -> a."""
    start, members = circle[0], set(circle)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return " -> ".join(paths[v] + [start])
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return ", ".join(circle)


def test_no_module_of_the_package_imports_one_of_its_importers():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles (static, every import):\n" + "\n".join(_path_back(graph, c) for c in found)


def test_the_static_reading_sees_imports_at_every_level():
    # a function-level import, a TYPE_CHECKING import and a `from . import module` all count:
    # otherwise the test above proves nothing
    graph = import_graph()
    assert "rlinf_eks.config" in graph["rlinf_eks.workload"] or any(m.startswith("rlinf_eks.config") for m in graph["rlinf_eks.workload"])
    assert "rlinf_eks.workload.manual" in graph["rlinf_eks.workload"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_static_reading_follows_function_level_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("def f():\n    from .b import x\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    modules = {"rlinf_eks.a": pkg / "a.py", "rlinf_eks.b": pkg / "b.py"}
    assert _imports_anywhere(pkg / "a.py", "rlinf_eks.a", modules) == {"rlinf_eks.b"}
    assert _imports_anywhere(pkg / "b.py", "rlinf_eks.b", modules) == {"rlinf_eks.a"}


MAX_MODULE_LINES = 500


def test_no_module_exceeds_the_size_limit():
    long = {str(p.relative_to(ROOT)): n for p in _package_modules().values() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
