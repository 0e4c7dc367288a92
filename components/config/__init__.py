"""Typed stack configuration: one frozen pydantic model tree, read from Pulumi config.

Every key lives in the project namespace (``rlinf-eks:``) except the region (``aws:region``).
Stack files use camelCase (``gpuNodes.instanceType``); Python uses snake_case. Unknown keys are
rejected, and every violated rule is reported at once, each naming its key path, the value and
what would be valid, before any resource is created.

    schema         the pydantic models and field types
    rules          value rules and the cross-section rules of a stack
    errors         ConfigError and the wording of every problem line
    pulumi_config  reading Pulumi config (namespaces, secret keys)

This package does not import rlinf_eks.trainers (trainers import it). ``parse``,
``settings_from_config`` and ``from_pulumi_config`` are the loading step of
:mod:`rlinf_eks.loading`, which applies the schema and then the trainers' world-size rules; they
are re-exported here on first use, so ``import rlinf_eks.config`` alone stays trainer-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ConfigError, describe
from .pulumi_config import PROVIDER_NAMESPACES, SECRET_KEY_DESCRIPTIONS, SECRET_KEYS, TOP_LEVEL_KEYS, foreign_project_key
from .rules import (
    EKS_CLUSTER_NAME_MAX,
    EKS_NODEGROUP_NAME_MAX,
    MAX_USER_TAGS,
    ROOT_VOLUME_RESERVE_GIB,
    SYSTEM_NODEGROUP_SUFFIX,
    StackRule,
    bucket_problem,
    cluster_name_problem,
    label_problem,
    stack_rules,
    tag_problem,
)
from .schema import (
    CAPACITY_BLOCK_END_UTC,
    CAPACITY_BLOCK_MAX_DAYS,
    CAPACITY_BLOCK_MAX_INSTANCES,
    MODEL_SOURCE_FORMS,
    PROJECT,
    AbsolutePath,
    AutoscalerSettings,
    Bool,
    CapacityBlockSettings,
    ChartVersion,
    ClusterSettings,
    DevicePluginSettings,
    Dialect,
    Ec2InstanceType,
    Float,
    GpuNodeSettings,
    InstanceOverrides,
    Int,
    KubeRaySettings,
    ManualJobSettings,
    ModelSettings,
    ModelSource,
    NetworkSettings,
    PlacementGroupSettings,
    PreflightSettings,
    RayJobSettings,
    RestartSettings,
    RolloutBackend,
    RolloutSettings,
    SharedFilesystemSettings,
    StackSettings,
    StorageSettings,
    SubnetId,
    SystemNodeSettings,
    TrainerSettings,
    VpcId,
    WorkloadSettings,
    _Model,  # noqa: F401 (tests walk the models below it)
    parse_model_source,
    validate,
)

if TYPE_CHECKING:
    from ..loading import from_pulumi_config, parse, settings_from_config

_LOADING = ("parse", "settings_from_config", "from_pulumi_config")


def __getattr__(name: str) -> Any:
    # PEP 562: the loading step sits above config and trainers; importing it here at module level
    # would make config import trainers (which import config).
    if name in _LOADING:
        from .. import loading

        return getattr(loading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AbsolutePath", "AutoscalerSettings", "Bool", "CAPACITY_BLOCK_END_UTC", "CAPACITY_BLOCK_MAX_DAYS",
    "CAPACITY_BLOCK_MAX_INSTANCES", "CapacityBlockSettings", "ChartVersion", "ClusterSettings", "ConfigError",
    "DevicePluginSettings", "Dialect", "EKS_CLUSTER_NAME_MAX", "EKS_NODEGROUP_NAME_MAX", "Ec2InstanceType", "Float",
    "GpuNodeSettings", "InstanceOverrides", "Int", "KubeRaySettings", "MAX_USER_TAGS", "MODEL_SOURCE_FORMS",
    "ManualJobSettings", "ModelSettings", "ModelSource", "NetworkSettings", "PROJECT", "PROVIDER_NAMESPACES",
    "PlacementGroupSettings", "PreflightSettings", "ROOT_VOLUME_RESERVE_GIB", "RayJobSettings", "RestartSettings",
    "RolloutBackend", "RolloutSettings", "SECRET_KEYS", "SECRET_KEY_DESCRIPTIONS", "SYSTEM_NODEGROUP_SUFFIX",
    "SharedFilesystemSettings", "StackRule", "StackSettings", "StorageSettings", "SubnetId", "SystemNodeSettings",
    "TOP_LEVEL_KEYS", "TrainerSettings", "VpcId", "WorkloadSettings", "bucket_problem", "cluster_name_problem",
    "describe", "foreign_project_key", "from_pulumi_config", "label_problem", "parse", "parse_model_source",
    "settings_from_config", "stack_rules", "tag_problem", "validate",
]
