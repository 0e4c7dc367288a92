"""The whole stack: StackSettings (one field per top-level key) and the validation of its
sections, each by itself, so that a section that fails leaves the others usable.

Every key lives in the project namespace (``rlinf-eks:``) except the region (``aws:region``).
Stack files use camelCase (``gpuNodes.instanceType``); Python uses snake_case. Unknown keys are
rejected, and every problem is reported at once, each naming its key path, the value and what
would be valid. The cross-section rules are in :mod:`.stack_rules`; :mod:`rlinf_eks.loading`
runs both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Mapping, Optional

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from .. import aws_names
from .addons import AutoscalerSettings, DevicePluginSettings, KubeRaySettings, PreflightSettings
from .aws_rules import MAX_USER_TAGS, tag_problem
from .cluster import ClusterSettings
from .errors import describe_errors, did_you_mean, key_path, raise_all, rule_error
from .gpu_nodes import GpuNodeSettings
from .images import ImageSettings
from .network import NetworkSettings
from .observability import ObservabilitySettings
from .platform import PlatformSettings
from .queue import QueueSettings
from .storage import StorageSettings
from .types import SettingsModel
from .workload import WorkloadSettings

PROJECT = "rlinf-eks"


def _region(value: str) -> str:
    if value in aws_names.REGIONS:
        return value
    if value[:-1] in aws_names.REGIONS:
        raise PydanticCustomError("region", "{text}", {"text": f"an Availability Zone, not a region: use {value[:-1]}"})
    hint = did_you_mean(value, aws_names.REGIONS, cutoff=0.8, ignore_case=False)
    raise PydanticCustomError(
        "region", "{text}", {"text": f"not an AWS region{hint}, such as us-east-1 (botocore {aws_names.BOTOCORE_VERSION}'s list)"}
    )


def _tags(value: dict[str, str]) -> dict[str, str]:
    # one problem line a tag, at its own key: tags["aws:team"]='ml': ... (a key path as --set reads it)
    raise_all([rule_error(key_path("tags", key).removeprefix("tags").removeprefix("."), item, problem)
               for key, item in value.items() if (problem := tag_problem(key, item))])  # fmt: skip
    if len(value) > MAX_USER_TAGS:
        raise PydanticCustomError(
            "tags", "{text}", {"text": f"{len(value)} tags: at most {MAX_USER_TAGS} (AWS allows 50 per resource; the stack adds up to 5)"}
        )
    return value


Region = Annotated[str, AfterValidator(_region)]
Tags = Annotated[dict[str, str], AfterValidator(_tags)]


class StackSettings(SettingsModel):
    """Everything a stack configures."""

    region: Region = "us-east-1"
    """The AWS region; read from ``aws:region``, outside the project namespace. Defaults to us-east-1."""
    availability_zone: Optional[str] = None
    """The one AZ of the GPU nodes (and of the shared filesystem). Defaults to <region>a."""
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    """The VPC: a new one or an existing one."""
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    """The EKS cluster: a new one or an existing one."""
    gpu_nodes: GpuNodeSettings = Field(default_factory=GpuNodeSettings)
    """The EFA GPU node group."""
    device_plugins: DevicePluginSettings = Field(default_factory=DevicePluginSettings)
    """Chart versions of the NVIDIA and EFA device plugins."""
    kuberay: KubeRaySettings = Field(default_factory=KubeRaySettings)
    """The KubeRay operator (optional)."""
    autoscaler: AutoscalerSettings = Field(default_factory=AutoscalerSettings)
    """The Cluster Autoscaler (optional)."""
    workload: WorkloadSettings
    """The RLinf training workload. Required: at least its image (a platform stack, platform.role:
    platform, has no run and needs none)."""
    storage: StorageSettings = Field(default_factory=StorageSettings)
    """The checkpoint bucket and the shared filesystem."""
    preflight: PreflightSettings = Field(default_factory=PreflightSettings)
    """The GPU, EFA and all-reduce check before training (optional)."""
    queue: QueueSettings = Field(default_factory=QueueSettings)
    """Kueue: the queue that admits a run all or nothing (on by default)."""
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    """GPU, EFA and Ray metrics: the CloudWatch add-on, an in-cluster Prometheus, or none."""
    tags: Tags = Field(default_factory=dict)
    """Extra AWS tags on every resource (besides project and stack)."""
    platform: PlatformSettings = Field(default_factory=PlatformSettings)
    """The stack's role (both, platform, experiment) and an experiment's platform stack. A platform
    stack needs no workload section (it has no run)."""
    images: ImageSettings = Field(default_factory=ImageSettings)
    """The training images built in this account: ECR repositories and CodeBuild projects (optional;
    python -m rlinf_eks build-image)."""
    allow_placeholders: bool = False
    """Deploy the example values a stack file carries (the AWS documentation's example account in
    workload.image, a documentation CIDR, an example resource id: rlinf_eks.placeholders) as they
    are. Defaults to false: ``pulumi up`` and ``pulumi preview`` refuse them before anything is
    created, and ``plan --strict`` fails on them."""

    @property
    def gpu_az(self) -> str:
        return self.availability_zone or f"{self.region}a"

    @property
    def gpu_nodes_grow(self) -> bool:
        """Whether GPU nodes are added for pending pods, up to gpuNodes.maxNodes: by Karpenter
        (provisioner karpenter) or the Cluster Autoscaler."""
        return self.gpu_nodes.provisioner == "karpenter" or self.autoscaler.enabled

    @property
    def observability_backend(self) -> str:
        return self.observability.resolved_backend(self.cluster.existing)

    @property
    def shared_filesystem(self) -> bool:
        enabled = self.storage.shared_filesystem.enabled
        return self.gpu_nodes.node_count > 1 if enabled is None else enabled


@dataclass(frozen=True)
class Sections:
    """A stack's sections, each validated by itself.

    ``failed``: the top-level keys (camelCase, as in a stack file) whose own validation failed,
    described in ``problems``. ``settings`` holds every other section; a failed one is left at its
    default (a failed workload is missing), so a rule may read ``settings`` only when none of the
    sections it reads failed (see stack_rules.StackRule)."""

    settings: StackSettings
    problems: list[str]
    failed: frozenset[str]


_FIELDS = {field.alias or name: name for name, field in StackSettings.model_fields.items()}
_ADAPTERS = {
    name: TypeAdapter(Annotated[(field.annotation, *field.metadata)]) if field.metadata else TypeAdapter(field.annotation)
    for name, field in StackSettings.model_fields.items()
}


def _is_platform(data: Mapping[str, Any]) -> bool:
    platform = data.get("platform")
    return isinstance(platform, Mapping) and platform.get("role") == "platform"


def validate_sections(data: Mapping[str, Any]) -> Sections:
    """Validate every top-level key of ``data`` (camelCase) by itself: the problems come in the
    order of StackSettings' fields (a missing required key where it stands), then unknown keys."""
    values: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    failed: set[str] = set()
    for key, name in _FIELDS.items():
        given = key if key in data else name if name in data else None
        if given is None:
            if StackSettings.model_fields[name].is_required() and not (name == "workload" and _is_platform(data)):
                items.append({"type": "missing", "loc": (key,), "msg": "Field required"})
                failed.add(key)
            continue
        try:
            values[name] = _ADAPTERS[name].validate_python(data[given])
        except ValidationError as err:
            items += [{**item, "loc": (key, *item["loc"])} for item in err.errors(include_url=False)]
            failed.add(key)
    unknown = [key for key in data if key not in _FIELDS and key not in _FIELDS.values()]
    items += [{"type": "extra_forbidden", "loc": (key,), "msg": "Extra inputs are not permitted"} for key in unknown]
    if "workload" not in values and "workload" not in failed:
        # a platform has no run: an empty, disabled workload (its defaults: namespace, versions)
        values["workload"] = WorkloadSettings.model_construct(_fields_set=set(), enabled=False, image="")
    settings = StackSettings.model_construct(**values)
    return Sections(settings, describe_errors(items, data, StackSettings), frozenset(failed))
