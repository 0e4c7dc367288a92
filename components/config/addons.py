"""The small add-on sections: the KubeRay operator, the device plugins, the Cluster Autoscaler
and the preflight check."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .. import pins
from .types import Bool, ChartVersion, Float, Int, Namespace, SettingsModel, chart_version


class KubeRaySettings(SettingsModel):
    enabled: Bool = False
    """Install the KubeRay operator. Defaults to false."""
    version: ChartVersion = pins.version("kuberay-operator")
    """kuberay-operator chart version. Defaults to the pin in components/pins.yaml (the CRDs this project validates against)."""
    namespace: Namespace = "ray-system"
    """Namespace of the KubeRay operator release. Defaults to ray-system."""


class DevicePluginSettings(SettingsModel):
    nvidia_version: ChartVersion = pins.version("nvidia-device-plugin")
    """nvidia-device-plugin chart version (not installed on Bottlerocket, which ships its own).
    Defaults to the pin in components/pins.yaml (the values this project checks against)."""
    efa_version: Annotated[str, chart_version("v")] = pins.version("aws-efa-k8s-device-plugin")
    """aws-efa-k8s-device-plugin chart version; this chart's versions carry a leading v.
    Defaults to the pin in components/pins.yaml."""


class AutoscalerSettings(SettingsModel):
    enabled: Bool = False
    """Install the Cluster Autoscaler so GPU nodes exist only while a job needs them."""
    version: ChartVersion = pins.version("cluster-autoscaler")
    """cluster-autoscaler chart version. Defaults to the pin in components/pins.yaml."""
    image_tag: str = pins.version("cluster-autoscaler-image")
    """Cluster Autoscaler image tag; its minor must equal the cluster's Kubernetes minor
    (the autoscaler embeds that release's scheduler). Defaults to the pin in components/pins.yaml,
    for the default cluster.kubernetesVersion (the chart's own default image may be older)."""
    scale_down_unneeded_minutes: Int = Field(10, ge=1, le=1440)
    """How long a node must be unneeded before it is removed. Defaults to 10."""
    expander: Literal["least-waste", "random", "most-pods", "priority"] = "least-waste"
    """Which node group to grow when several fit. Defaults to least-waste. (The price expander
    is not implemented by the autoscaler's AWS provider.)"""

    @field_validator("image_tag")
    @classmethod
    def _image_tag(cls, value: str) -> str:
        if not re.fullmatch(r"v1\.\d+\.\d+", value):
            raise PydanticCustomError("tag", "a Cluster Autoscaler release tag such as v1.34.2")
        return value

    @property
    def kubernetes_minor(self) -> str:
        """The Kubernetes minor the image is built for (v1.34.2 -> 1.34)."""
        return ".".join(self.image_tag.lstrip("v").split(".")[:2])


class PreflightSettings(SettingsModel):
    enabled: Bool = False
    """Check GPUs, EFA devices and all-reduce bandwidth on every node before training starts."""
    image: str = f"public.ecr.aws/hpc-cloud/nccl-tests:{pins.version('nccl-tests')}"
    """An nccl-tests image with libfabric, aws-ofi-nccl and Open MPI (awsome-distributed-training's
    build, pinned: its tag names CUDA, EFA installer, aws-ofi-nccl, NCCL and nccl-tests versions)."""
    min_bus_bandwidth_fraction: Float = Field(0.5, gt=0, le=1)
    """Fail unless all_reduce_perf bus bandwidth reaches this fraction of the network line rate."""
