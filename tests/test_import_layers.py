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
    assert "rlinf_eks.config.schema" in loaded  # the check ran on a real import
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


def test_the_loading_step_applies_the_trainer_rules_through_config_parse():
    from rlinf_eks import config, loading

    assert config.parse is loading.parse and config.settings_from_config is loading.settings_from_config
