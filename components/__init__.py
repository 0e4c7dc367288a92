"""rlinf-eks: Pulumi components for RLinf reinforcement-learning training on EKS GPU nodes with EFA.

Import the components into any Pulumi program::

    from rlinf_eks import EfaGpuNodeGroup, RlinfTraining

Each component takes its own settings model from :mod:`rlinf_eks.config` (or a plain mapping with
the same camelCase keys) plus the outputs of the others, so they can be used one at a time.
"""

from __future__ import annotations

import importlib
from typing import Any

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
    "ClusterAutoscaler": "autoscaler",
    "RlinfTraining": "workload",
    "CloudWatchObservability": "observability",
    "PrometheusObservability": "observability",
}

__all__ = sorted(_COMPONENTS)


def __getattr__(name: str) -> Any:
    module = _COMPONENTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlinf_eks' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
