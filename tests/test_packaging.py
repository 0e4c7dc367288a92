"""pyproject.toml packages what exists, and the package exports every component."""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import pkgutil

import pulumi

import rlinf_eks
from tests.harness import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
SOURCE = ROOT / SETUPTOOLS["package-dir"]["rlinf_eks"]


def test_the_packages_list_is_every_folder_with_an_init_and_nothing_else():
    found = {
        ".".join(["rlinf_eks", *init.parent.relative_to(SOURCE).parts])
        for init in SOURCE.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert sorted(SETUPTOOLS["packages"]) == sorted(found)


def test_package_data_covers_every_other_file_and_each_pattern_matches_one():
    patterns = SETUPTOOLS["package-data"]["rlinf_eks"]
    files = [
        p.relative_to(SOURCE).as_posix()
        for p in SOURCE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        # Python outside a package (no __init__.py beside it) is data too: workload/programs
        and (p.suffix != ".py" or not (p.parent / "__init__.py").exists())
    ]
    unpackaged = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert not unpackaged, f"not in [tool.setuptools.package-data] rlinf_eks: {unpackaged}"
    unused = [pattern for pattern in patterns if not any(fnmatch.fnmatch(f, pattern) for f in files)]
    assert not unused, f"[tool.setuptools.package-data] patterns that match no file: {unused}"


def _components() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(rlinf_eks.__path__, "rlinf_eks."):
        # rlinf_eks.hosted: the component package's classes (subclasses of these), served by provider/
        if info.name.startswith(("rlinf_eks.__main__", "rlinf_eks.offline", "rlinf_eks.hosted")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, pulumi.ComponentResource) and value.__module__ == module.__name__:
                found[name] = value
    return found


def test_every_component_is_exported_from_the_package():
    components = _components()
    assert "ClusterAutoscaler" in components and "EfaGpuNodeGroup" in components
    assert sorted(rlinf_eks.__all__) == sorted(components)
    for name, cls in components.items():
        assert getattr(rlinf_eks, name) is cls


def test_the_components_guide_names_every_exported_component():
    sentence = next(line for line in (ROOT / "docs" / "components.md").read_text().split("\n\n") if line.startswith("Every component ("))
    assert sorted(rlinf_eks.__all__) == sorted(n.strip("`") for n in sentence.split("(")[1].split(")")[0].replace("\n", " ").split(", "))
