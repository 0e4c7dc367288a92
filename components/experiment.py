"""Platform and experiment stacks: what a platform exports, and an experiment's settings read from it.

A platform stack (``platform.role: platform``) exports, besides the outputs every stack has, what
an experiment needs (``PLATFORM_OUTPUTS``): the cluster (kubeconfig, OIDC provider), the node shape
(instance type, GPUs and EFA per node, node count and maximum), the checkpoint bucket and shared
filesystem, the Kubernetes, Ray, KubeRay and JobSet versions, and ``platformConfig``: its own
sections (gpuNodes, storage, kuberay, autoscaler, cluster's version, region), so the experiment's
run is validated by the same rule table as a ``both`` stack with exactly the platform's nodes.

An experiment stack (``platform.role: experiment``) reads them through a Pulumi StackReference.
When: the program reads the outputs' values synchronously, right after registering the
StackReference (a read, not a create) and before any other resource, so a missing or mismatched
output, or a run that does not fit the platform's nodes, is a ConfigError before anything is
created, under ``pulumi up``/``preview`` as in the offline plan (whose mocks answer the read from
the platform's plan.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from pydantic import ValidationError

from . import catalog
from .config import PLATFORM_SECTIONS, ConfigError, PlatformSettings, Sections, StackSettings, broken_rules, validate_sections
from .config.errors import describe_errors
from .config.pulumi_config import stack_data

PLATFORM_CONFIG = "platformConfig"
QUEUE_NAME = "queueName"
"""The platform's Kueue queue (issue 19's queue half): read when present, passed on as an output."""

PLATFORM_OUTPUTS: dict[str, str] = {
    "clusterName": "the EKS cluster",
    "kubeconfig": "the cluster's kubeconfig (secret): the experiment's Kubernetes provider",
    "oidcProviderArn": "the cluster's IAM OIDC provider: the experiment's IRSA role trusts it",
    "oidcIssuer": "the cluster's OIDC issuer",
    "namespace": "the platform's own namespace (an experiment runs in another)",
    "checkpointBucket": "the checkpoint bucket",
    "sharedFilesystem": "the FSx for Lustre filesystem id (null without one)",
    "sharedFilesystemClaim": "the platform namespace's claim of the shared filesystem (null without one)",
    "sharedFilesystemDnsName": "the filesystem's DNS name, for the experiment's own PersistentVolume",
    "sharedFilesystemMountName": "the filesystem's mount name",
    "gpuInstanceType": "the GPU nodes' instance type",
    "gpusPerNode": "GPUs per GPU node",
    "efaPerNode": "EFA interfaces per GPU node (0 without EFA)",
    "gpuNodeCount": "GPU nodes (the desired count)",
    "gpuMaxNodes": "the most GPU nodes the autoscaler may bring (the node count without it)",
    "kubernetesVersion": "the cluster's Kubernetes version",
    "rayVersion": "the platform's default Ray version (an experiment's image may set its own)",
    "kuberayVersion": "the KubeRay operator's chart version (null when off)",
    "jobsetVersion": "the JobSet controller's chart version",
    PLATFORM_CONFIG: "the platform's own sections (gpuNodes, storage, kuberay, autoscaler, cluster, region)",
}
"""The outputs a platform stack adds (``platform.role: platform`` only: a ``both`` stack keeps its
outputs), and what each is."""

NULLABLE = frozenset({"sharedFilesystem", "sharedFilesystemClaim", "sharedFilesystemDnsName", "sharedFilesystemMountName", "kuberayVersion"})
"""Outputs a platform may leave null (StackReference cannot tell null from absent: neither is missing)."""

SECRET_OUTPUTS = frozenset({"kubeconfig"})

_CONFIG_SECTIONS = ("region", "availabilityZone", "gpuNodes", "storage", "kuberay", "autoscaler", "devicePlugins", "cluster", "queue", "observability")
SKIPPED_RULE_SECTIONS = frozenset({"network", "cluster"})
"""An experiment's rules skip these: the platform's network and cluster rules ran on the platform."""


def platform_config(settings: StackSettings) -> dict[str, Any]:
    """The platform's sections an experiment's settings take (camelCase, as a stack file), with
    the shared filesystem's on/off and the observability backend made explicit (their defaults
    follow the node count and ``cluster.existing``)."""
    dumped = settings.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    config = {key: dumped[key] for key in _CONFIG_SECTIONS if key in dumped}
    config["region"] = settings.region
    config["cluster"] = {"kubernetesVersion": settings.cluster.kubernetes_version}
    storage = config.setdefault("storage", {})
    storage.setdefault("sharedFilesystem", {})["enabled"] = settings.shared_filesystem
    # the backend stated: its default follows cluster.existing, which an experiment does not read
    config.setdefault("observability", {})["backend"] = settings.observability_backend
    return config


def efa_per_node(gpu_nodes: Any) -> int:
    """EFA interfaces a GPU node gives its pod (the workload's own count: workload/run.py)."""
    instance = gpu_nodes.instance
    return catalog.efa_device_count(instance) if gpu_nodes.efa and instance.efa_capable else 0


def node_shape(settings: StackSettings) -> dict[str, Any]:
    gpu = settings.gpu_nodes
    return {
        "gpuInstanceType": gpu.instance_type,
        "gpusPerNode": gpu.instance.gpus,
        "efaPerNode": efa_per_node(gpu),
        "gpuNodeCount": gpu.node_count,
        "gpuMaxNodes": gpu.max_size,
    }


# --- the experiment's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    """The platform's outputs as an experiment read them (``values``: plain, the kubeconfig too)."""

    stack: str
    values: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values.get(key)

    @property
    def queue_name(self) -> Optional[str]:
        return self.values.get(QUEUE_NAME)

    @property
    def kubeconfig_text(self) -> str:
        kubeconfig = self.values["kubeconfig"]
        return kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig, sort_keys=True)


def role_of(values: Mapping[str, Any]) -> str:
    """The role a whole stack config ("namespace:key" -> value) declares, without validating the rest."""
    data, _ = stack_data(values)
    platform = data.get("platform")
    role = platform.get("role") if isinstance(platform, Mapping) else None
    return role if role in ("platform", "experiment") else "both"


def platform_stack(values: Mapping[str, Any]) -> str:
    """The experiment's validated ``platform.stack``, or ConfigError."""
    data, _ = stack_data(values)
    try:
        return str(PlatformSettings.model_validate(data.get("platform") or {}).stack)
    except ValidationError as err:  # worded like every other problem
        items = [{**item, "loc": ("platform", *item["loc"])} for item in err.errors(include_url=False)]
        raise ConfigError(describe_errors(items, data, StackSettings)) from None


def output_problems(stack: str, read: Mapping[str, Any]) -> list[str]:
    """Missing or mismatched platform outputs, one line each: the output, its value, what is valid."""
    where = f"platform.stack={stack!r}"
    problems = []
    for key, what in PLATFORM_OUTPUTS.items():
        if read.get(key) is None and key not in NULLABLE:
            problems.append(
                f"{where}: the platform's output {key} (its value: None) is missing; a platform stack (platform.role: platform) "
                f"exports it ({what}): update the platform (pulumi up on it), or name a platform stack"
            )
    if problems:
        return problems
    config = read[PLATFORM_CONFIG]
    if not isinstance(config, Mapping) or not isinstance(config.get("gpuNodes", {}), Mapping):
        return [f"{where}: the platform's output {PLATFORM_CONFIG}={config!r:.80} is not an object of its sections (gpuNodes, storage, ...)"]
    sections = validate_sections({**config, "platform": PlatformSettings(role="platform").model_dump(exclude_none=True)})
    if sections.problems:
        return [f"{where}: the platform's output {PLATFORM_CONFIG} does not validate here: {problem}" for problem in sections.problems]
    shape = node_shape(sections.settings)
    for key, expected in shape.items():
        if read[key] != expected:
            problems.append(
                f"{where}: the platform's output {key}={read[key]!r} does not match its gpuNodes ({key} {expected!r} "
                f"for {shape['gpuInstanceType']} in this library's catalog): update the platform with this version (pulumi up on it)"
            )
    return problems


def experiment_settings(values: Mapping[str, Any], stack: Optional[str], platform: Platform, rules: tuple[Any, ...]) -> StackSettings:
    """The experiment's settings: its own sections, the platform's (``platformConfig``) under them,
    then the rule table (``rules``: rlinf_eks.loading.RULES) but the network and cluster rules, which
    ran on the platform. Raises ConfigError naming every problem, the platform's outputs' first."""
    data, problems = stack_data(values)
    problems += output_problems(platform.stack, platform.values)
    for key in PLATFORM_SECTIONS:
        if data.get(key) not in (None, ""):  # Pulumi.yaml's availabilityZone defaults to ""
            problems.append(
                f"{key}: an experiment reads it from its platform {platform.stack} (the platform's outputs); "
                "set it on the platform stack, or leave it out here"
            )
    if problems:
        raise ConfigError(problems)
    own = {k: v for k, v in data.items() if k != "region" and k not in PLATFORM_SECTIONS}
    merged = {**platform[PLATFORM_CONFIG], **own}
    workload = merged.get("workload")
    if isinstance(workload, Mapping) and "rayVersion" not in workload:
        merged["workload"] = {**workload, "rayVersion": platform["rayVersion"]}
    sections = validate_sections(merged)
    skipping = Sections(sections.settings, sections.problems, sections.failed | SKIPPED_RULE_SECTIONS)
    problems = sections.problems + broken_rules(rules, skipping, stack) + _run_problems(sections, platform) + _queue_problems(sections, platform)
    if problems:
        raise ConfigError(problems)
    return sections.settings


def _queue_problems(sections: Sections, platform: Platform) -> list[str]:
    """A queued run needs its platform's queue: the experiment's LocalQueue (``queue.name`` in its
    namespace) sends it to the platform's ClusterQueue (a run labelled for a queue that is not
    there waits for ever, suspended)."""
    if "queue" in sections.failed:
        return []
    queue = sections.settings.queue
    if not queue.enabled:
        return []
    if platform.queue_name is None:
        return [
            f"queue.enabled=true: the platform {platform.stack} exports no {QUEUE_NAME} (its queue is off): "
            "set queue.enabled: false here, or turn the platform's queue on"
        ]
    return []


def _run_problems(sections: Sections, platform: Platform) -> list[str]:
    if "workload" in sections.failed:
        return []
    workload, problems = sections.settings.workload, []
    if workload.namespace == platform["namespace"]:
        problems.append(
            f"workload.namespace={workload.namespace!r}: the platform's own namespace; every experiment runs in a namespace "
            "of its own (its Job, Service and claim have fixed names): choose another, such as exp-<name>"
        )
    return problems


def read_platform(stack: str, get: Callable[[str], tuple[Any, Any]]) -> Platform:
    """The platform's outputs from ``get(name) -> (value, secret_value)`` (a StackReference's
    ``get_output_details``, awaited), one name at a time: PLATFORM_OUTPUTS and the queue name."""
    values: dict[str, Any] = {}
    for key in (*PLATFORM_OUTPUTS, QUEUE_NAME):
        value, secret_value = get(key)
        values[key] = _whole_numbers(secret_value if value is None else value)
    return Platform(stack, values)


def _whole_numbers(value: Any) -> Any:
    """Stack outputs cross the wire as protobuf numbers (doubles): 2 comes back 2.0, which the
    strict integer settings refuse. Whole floats become integers again, at any depth."""
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
