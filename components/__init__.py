"""rlinf-eks: Pulumi components for RLinf reinforcement-learning training on EKS GPU nodes with EFA.

Import the components into any Pulumi program::

    from rlinf_eks import EfaGpuNodeGroup, RlinfTraining

Each component takes its own settings model from :mod:`rlinf_eks.config` (or a plain mapping with
the same camelCase keys) plus the outputs of the others, so they can be used one at a time
(``RlinfTraining`` takes :class:`rlinf_eks.workload.TrainingSettings`, the sections it reads).
:mod:`rlinf_eks.testing` plans such a program offline, as ``python -m rlinf_eks plan`` plans a stack.
"""

from __future__ import annotations

import sys as _sys

_COMMAND = ("rlinf_eks", "rlinf_eks.__main__")
_SCRIPT = "rlinf-eks"
"""The console script (pyproject.toml [project.scripts]): it imports rlinf_eks.__main__, so this package first."""
if (_sys.argv[:1] == ["-m"] and any(
    (a == "-m" and b in _COMMAND) or a in [f"-m{name}" for name in _COMMAND] for a, b in zip(_sys.orig_argv, [*_sys.orig_argv[1:], ""])
)) or _sys.argv[:1] and _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] == _SCRIPT:  # fmt: skip
    # `python -m rlinf_eks` or the `rlinf-eks` script: the package is imported before the command's
    # code runs; Ctrl-C is the command line's from here on (one line, exit 130: rlinf_eks.interrupts),
    # not a traceback of an import
    from . import interrupts as _interrupts

    _interrupts.install()

import importlib
from typing import Any

__version__ = "0.3.0"
"""The one place the version is written: pyproject.toml reads it (setuptools dynamic version),
CHANGELOG.md's newest entry and every install tag in README.md and docs/ name it (tests/test_release.py)."""

# Component name -> module; imported on first use so that `import rlinf_eks` stays cheap.
_COMPONENTS = {
    "Network": "network",
    "Cluster": "cluster",
    "EfaGpuNodeGroup": "gpu_nodes",
    "DevicePlugins": "device_plugins",
    "CheckpointStorage": "storage",
    "SharedFilesystem": "storage",
    "TrainingIdentity": "identity",
    "KubeRayOperator": "kuberay",
    "JobSetController": "jobset",
    "KueueQueue": "kueue",
    "ClusterAutoscaler": "autoscaler",
    "KarpenterGpuNodes": "karpenter",
    "RlinfTraining": "workload",
    "CloudWatchObservability": "observability",
    "PrometheusObservability": "observability",
    "TrainingImage": "training_image",
}

__all__ = sorted(_COMPONENTS)


def __getattr__(name: str) -> Any:
    module = _COMPONENTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlinf_eks' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
