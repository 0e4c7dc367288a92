"""Typed stack configuration: one frozen pydantic model tree, read from Pulumi config.

Every key lives in the project namespace (``rlinf-eks:``) except the region (``aws:region``).
Stack files use camelCase (``gpuNodes.instanceType``); Python uses snake_case. Unknown keys are
rejected, and every problem is reported at once, each naming its key path, the value and what
would be valid, before any resource is created.

    types          field types every section shares (Int, Bool, Namespace, ...) and SettingsModel
    network, cluster, gpu_nodes, workload, storage, addons, observability, images
                   one module per section of a stack file (addons: kuberay, devicePlugins,
                   autoscaler, preflight); model_source parses workload.model.source
    platform       the stack's role (both, platform, experiment) and an experiment's platform
    stack          StackSettings, PROJECT and the validation of the sections, each by itself
    stack_rules    the cross-section rules: a table of StackRule(sections, check)
    aws_rules      AWS and Kubernetes value rules (labels, tags, bucket and cluster names, AZs)
    errors         ConfigError, the wording of every problem line, the "did you mean" hint
    pulumi_config  reading Pulumi config (namespaces, secret keys)

Loading a stack is :mod:`rlinf_eks.loading` (``parse``, ``settings_from_config``,
``from_pulumi_config``): the sections, then the rule table with the trainers' rules. This package
imports neither it nor rlinf_eks.trainers (both import this one).
"""

from __future__ import annotations

from .addons import AutoscalerSettings, DevicePluginSettings, KubeRaySettings, PreflightSettings
from .aws_rules import (
    EKS_CLUSTER_NAME_MAX,
    EKS_NODEGROUP_NAME_MAX,
    MAX_USER_TAGS,
    SYSTEM_NODEGROUP_SUFFIX,
    bucket_problem,
    cluster_name_problem,
    label_problem,
    tag_problem,
)
from .cluster import ClusterSettings, SystemNodeSettings
from .errors import ConfigError, describe
from .gpu_nodes import (
    CAPACITY_BLOCK_END_UTC,
    CAPACITY_BLOCK_MAX_DAYS,
    CAPACITY_BLOCK_MAX_INSTANCES,
    CapacityBlockSettings,
    GpuNodeSettings,
    InstanceOverrides,
    KarpenterSettings,
    PlacementGroupSettings,
    capacity_block_time_problems,
)
from .images import IMAGE_FAMILIES, PULL_THROUGH_SECRET_PREFIX, DockerHubCacheSettings, ImageSettings, secret_arn_problem
from .model_source import MODEL_SOURCE_FORMS, ModelSource, parse_model_source
from .network import NetworkSettings
from .queue import PriorityClassSettings, QueueSettings
from .platform import PLATFORM_SECTIONS, PlatformSettings, Role
from .observability import ObservabilitySettings, PrometheusSettings
from .pulumi_config import PROVIDER_NAMESPACES, SECRET_KEY_DESCRIPTIONS, SECRET_KEYS, TOP_LEVEL_KEYS, foreign_project_key
from .stack import PROJECT, Sections, StackSettings, validate_sections
from .stack_rules import NODE_RULES, STACK_RULES, StackRule, broken_rules, validate
from .storage import SharedFilesystemSettings, StorageSettings
from .types import AbsolutePath, Bool, ChartVersion, Ec2InstanceType, Float, Int, Namespace, SettingsModel, SubnetId, VpcId
from .workload import (
    Dialect,
    ManualJobSettings,
    ModelSettings,
    RayJobSettings,
    RestartSettings,
    RolloutBackend,
    RolloutSettings,
    TrainerSettings,
    WorkloadSettings,
)

__all__ = [
    "AbsolutePath", "AutoscalerSettings", "Bool", "CAPACITY_BLOCK_END_UTC", "CAPACITY_BLOCK_MAX_DAYS",
    "CAPACITY_BLOCK_MAX_INSTANCES", "CapacityBlockSettings", "ChartVersion", "ClusterSettings", "ConfigError",
    "DevicePluginSettings", "Dialect", "EKS_CLUSTER_NAME_MAX", "EKS_NODEGROUP_NAME_MAX", "Ec2InstanceType", "Float",
    "GpuNodeSettings", "IMAGE_FAMILIES", "ImageSettings", "DockerHubCacheSettings", "PULL_THROUGH_SECRET_PREFIX", "secret_arn_problem", "InstanceOverrides", "Int", "KarpenterSettings", "KubeRaySettings", "MAX_USER_TAGS", "MODEL_SOURCE_FORMS",
    "ManualJobSettings", "ModelSettings", "ModelSource", "NODE_RULES", "Namespace", "NetworkSettings", "ObservabilitySettings", "PROJECT",
    "PLATFORM_SECTIONS", "PROVIDER_NAMESPACES", "PlacementGroupSettings", "PlatformSettings", "PreflightSettings", "PriorityClassSettings",
    "PrometheusSettings", "QueueSettings", "RayJobSettings",
    "RestartSettings", "Role", "RolloutBackend", "RolloutSettings", "SECRET_KEYS", "SECRET_KEY_DESCRIPTIONS",
    "STACK_RULES", "SYSTEM_NODEGROUP_SUFFIX", "Sections", "SettingsModel", "SharedFilesystemSettings", "StackRule",
    "StackSettings", "StorageSettings", "SubnetId", "SystemNodeSettings", "TOP_LEVEL_KEYS", "TrainerSettings", "VpcId",
    "WorkloadSettings", "broken_rules", "bucket_problem", "capacity_block_time_problems", "cluster_name_problem", "describe", "foreign_project_key",
    "label_problem", "parse_model_source", "tag_problem", "validate", "validate_sections",
]  # fmt: skip
