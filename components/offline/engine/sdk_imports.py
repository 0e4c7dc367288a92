"""Import only the Pulumi SDK modules a program touches (the offline plan's import cost).

The generated SDK packages (``pulumi_aws.ec2``, ``pulumi_kubernetes.core.v1``, ...) import every
module they hold in their ``__init__``: ``pulumi_aws.ec2`` runs ~185 ``from .x import *`` for the
dozen classes the program uses. ``install()`` puts a finder first on ``sys.meta_path`` that hands
out such a package as a *lazy package*: a module with the real ``__path__``, ``__file__`` and
``__spec__`` whose PEP 562 ``__getattr__`` imports the one submodule that exports the name asked for
(read from the submodules' ``__all__``, honouring the ``__init__``'s order as star imports do: the
last module exporting a name wins) or the submodule/subpackage of that name. Anything it cannot
answer that way (a name no ``__all__`` lists, a module without ``__all__`` after the one that
exports it) makes it run the real ``__init__`` into the module, so a lazy package never answers
differently from the real one; it is only faster when the answer is one submodule.

Only packages whose ``__init__`` has exactly the generated layout are made lazy (``layout_problem``
names the first statement that is not); ``tests/test_sdk_imports.py`` fails naming the SDK version
and the package when an SDK upgrade changes it. The classes, their modules and everything they
register are the SDK's own, so the plan is byte-for-byte the same (``RLINF_EKS_EAGER_SDK=1`` turns
this off, for comparing).

Installed by ``rlinf_eks.offline`` (the offline plan, its tests): ``pulumi up`` (``__main__.py``)
imports the SDKs as they are.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

SDKS = ("pulumi_aws", "pulumi_kubernetes")
EAGER_ENV = "RLINF_EKS_EAGER_SDK"
_ALL = re.compile(r"^__all__ = \[(.*?)\]", re.S | re.M)
_NAME = re.compile(r"""['"]([A-Za-z_][A-Za-z0-9_]*)['"]""")


def layout_problem(init: Path) -> str | None:
    """None when ``init`` (a package's ``__init__.py``) has the generated layout the lazy package
    reproduces: ``import builtins as _builtins``, ``import typing``, ``from ..(.) import
    _utilities``, ``from .x import *``, ``from . import x`` and ``if typing.TYPE_CHECKING:`` blocks
    that import subpackages / ``x = _utilities.lazy_import('...')``; else the first statement that
    is not, as text."""
    tree = ast.parse(init.read_text())
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Import) and [(a.name, a.asname) for a in node.names] in (
            [("builtins", "_builtins")], [("typing", None)]
        ):
            continue
        if isinstance(node, ast.ImportFrom) and node.module is None and node.level >= 1 and all(
            a.asname is None and a.name != "*" for a in node.names
        ):
            continue  # from .. import _utilities / from . import outputs
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and [a.name for a in node.names] == ["*"]:
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) == "typing.TYPE_CHECKING" and all(
            isinstance(s, (ast.Import, ast.Assign)) for s in node.body
        ) and all(
            isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "_utilities.lazy_import"
            for s in node.orelse
        ):
            continue
        return ast.unparse(node).splitlines()[0]
    return None


def _exports(path: Path) -> list[str] | None:
    """The names ``from path import *`` binds, from its ``__all__``; None without one."""
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as f:
        head = f.read(16384)
        if "__all__ = [" in head and "]" not in head.split("__all__ = [", 1)[1]:
            head += f.read()
    match = _ALL.search(head)
    return _NAME.findall(match.group(1)) if match else None


class _Index:
    """Where each name of a lazy package comes from, built on the first name asked for."""

    def __init__(self, directory: Path, init: Path) -> None:
        self.directory = directory
        self.init = init
        self._names: dict[str, str] | None = None
        self._opaque_after: dict[str, bool] = {}

    def source_of(self, name: str, exported_only: bool = False) -> str | None:
        """The submodule that binds ``name`` last in the ``__init__``'s star imports, or None when
        that cannot be told from ``__all__`` alone (``exported_only``: the submodule whose
        ``__all__`` lists it, whatever follows)."""
        if self._names is None:
            self._names = {}
            opaque_since = False
            order = []
            for node in ast.parse(self.init.read_text()).body:
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and node.names[0].name == "*":
                    order.append(node.module)
            for module in reversed(order):  # the last binding wins: walk back, keep the first seen
                exported = _exports(self.directory / f"{module}.py")
                if exported is None:
                    opaque_since = True
                    continue
                for exported_name in exported:
                    if exported_name not in self._names:
                        self._names[exported_name] = module
                        self._opaque_after[exported_name] = opaque_since
        module = self._names.get(name)
        if module is None or (self._opaque_after[name] and not exported_only):
            return None
        return module


class _LazyPackage(types.ModuleType):
    """A lazy package: a name is looked up on first use (``__getattr__``). The import system binds
    each submodule it imports on its package; where the submodule is named like what it exports
    (``pulumi_kubernetes.helm.v3.Release`` exports ``Release``), the real package's star import
    rebinds the name to the export, so here such a binding is left out and the name resolves to
    the export."""

    def __setattr__(self, name: str, value: Any) -> None:
        index = self.__dict__.get("_rlinf_eks_index")
        if isinstance(value, types.ModuleType) and index is not None and index.source_of(name, exported_only=True):
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_rlinf_eks_index" not in self.__dict__:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        index: _Index = self.__dict__["_rlinf_eks_index"]
        source = index.source_of(name)
        if source is not None:
            value = getattr(importlib.import_module(f"{self.__name__}.{source}"), name)
            setattr(self, name, value)
            return value
        if not index.source_of(name, exported_only=True):
            directory = index.directory
            if (directory / f"{name}.py").exists() or (directory / name / "__init__.py").exists():
                return importlib.import_module(f"{self.__name__}.{name}")
        _load_fully(self)
        if name in self.__dict__:
            return self.__dict__[name]
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        _load_fully(self)
        return sorted(self.__dict__)


def _load_fully(module: types.ModuleType) -> None:
    """Run the real ``__init__`` into ``module`` (once): it then holds all the real one holds."""
    if module.__dict__.get("_rlinf_eks_index") is None:
        return
    module.__dict__.pop("_rlinf_eks_index")
    module.__class__ = types.ModuleType
    exec(compile(Path(module.__file__).read_text(), module.__file__, "exec"), module.__dict__)


class _LazyPackageLoader(importlib.abc.Loader):
    def __init__(self, spec: importlib.machinery.ModuleSpec) -> None:
        self.real = spec

    def create_module(self, spec):
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        init = Path(self.real.origin)
        module.__dict__["_rlinf_eks_index"] = _Index(init.parent, init)
        module.__class__ = _LazyPackage


class LazySdkFinder(importlib.abc.MetaPathFinder):
    """Hands out the SDKs' generated subpackages as lazy packages (see the module docstring)."""

    def find_spec(self, fullname, path, target=None):
        if "." not in fullname or fullname.split(".", 1)[0] not in SDKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations or not spec.origin or not spec.origin.endswith("__init__.py"):
            return spec
        if layout_problem(Path(spec.origin)) is not None:
            return spec
        lazy = importlib.machinery.ModuleSpec(fullname, _LazyPackageLoader(spec), origin=spec.origin, is_package=True)
        lazy.submodule_search_locations = list(spec.submodule_search_locations)
        lazy.has_location = True
        return lazy


def install() -> bool:
    """Make the SDKs' generated subpackages imported from now on lazy (idempotent); False when
    ``RLINF_EKS_EAGER_SDK=1`` says not to."""
    if os.environ.get(EAGER_ENV, "").strip().lower() in ("1", "true", "yes"):
        return False
    if not any(isinstance(f, LazySdkFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LazySdkFinder())
    return True


def is_lazy(module: types.ModuleType) -> bool:
    """Whether ``module`` is a lazy package that has not had to run its real ``__init__``."""
    return isinstance(module, _LazyPackage) and "_rlinf_eks_index" in module.__dict__
