"""The observability section: which metrics backend watches the GPUs, EFA and Ray, and the pinned
versions of what it installs."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .. import pins
from .types import ChartVersion, Int, Namespace, SettingsModel

Backend = Literal["cloudwatch", "prometheus", "none"]

# Container Insights with OpenTelemetry metrics (DCGM and EFA metrics attributed to pods) needs
# add-on 6.2.0 or later (CloudWatch user guide, "Quick start: OTel Container Insights on Amazon
# EKS"); EKS Pod Identity for its agent needs 3.1.0 or later.
CLOUDWATCH_MIN_VERSION = (6, 2, 0)


class PrometheusSettings(SettingsModel):
    """The in-cluster Prometheus path (``backend: prometheus``)."""

    namespace: Namespace = "monitoring"
    """Namespace of kube-prometheus-stack and dcgm-exporter. Defaults to monitoring."""
    stack_version: ChartVersion = pins.version("kube-prometheus-stack")
    """kube-prometheus-stack chart version. Defaults to the pin in components/pins.yaml (the values this project checks against)."""
    dcgm_exporter_version: ChartVersion = pins.version("dcgm-exporter")
    """NVIDIA dcgm-exporter chart version. Defaults to the pin in components/pins.yaml (the values this project checks against)."""
    retention_days: Int = Field(15, ge=1, le=365)
    """How long Prometheus keeps samples (in an emptyDir on a system node: lost when the pod moves).
    Defaults to 15."""
    efa_exporter_image: str = f"public.ecr.aws/docker/library/busybox:{pins.version('busybox')}"
    """The image of the EFA counter exporter (busybox: sh and httpd); accepts repo@sha256:digest.
    Defaults to public.ecr.aws/docker/library/busybox at the pin in components/pins.yaml."""

    # kube-prometheus-stack is installed as release "kps" with fullnameOverride "kps": its
    # Prometheus Service is kps-prometheus (9090), the Grafana subchart's kps-grafana (80)
    @property
    def prometheus_url(self) -> str:
        return f"http://kps-prometheus.{self.namespace}.svc:9090"

    @property
    def grafana_url(self) -> str:
        return f"http://kps-grafana.{self.namespace}.svc:80"


class ObservabilitySettings(SettingsModel):
    """GPU, EFA and Ray metrics, and where to look at them."""

    backend: Optional[Backend] = None
    """cloudwatch: the amazon-cloudwatch-observability EKS add-on (Container Insights with
    OpenTelemetry metrics: DCGM GPU and EFA metrics per pod), its agent authorised by EKS Pod
    Identity; prometheus: kube-prometheus-stack (Prometheus, Grafana with this project's
    dashboards) on the system nodes and dcgm-exporter on the GPU nodes, all in-cluster; none:
    nothing. Defaults to cloudwatch on a new cluster and none on an existing one: an existing
    cluster may already run the add-on (a second CreateAddon fails) or its own Prometheus, and
    may lack the EKS Pod Identity agent the cloudwatch path needs; choose for it explicitly."""
    cloudwatch_addon_version: str = pins.version("amazon-cloudwatch-observability")
    """amazon-cloudwatch-observability add-on version (6.2.0 or later: OpenTelemetry metrics).
    Defaults to the pin in components/pins.yaml (the chart whose values the configuration is checked against)."""
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    """The in-cluster Prometheus path's versions and namespace."""

    @field_validator("cloudwatch_addon_version")
    @classmethod
    def _addon_version(cls, value: str) -> str:
        match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+", value)
        if not match:
            raise PydanticCustomError("addon", "an EKS add-on version such as v6.4.0-eksbuild.1")
        if tuple(map(int, match.groups())) < CLOUDWATCH_MIN_VERSION:
            raise PydanticCustomError("addon", "OpenTelemetry metrics (GPU and EFA per pod) need v6.2.0 or newer")
        return value

    def resolved_backend(self, existing_cluster: bool) -> Backend:
        """The backend this stack runs: the one given, else cloudwatch on a new cluster and none on
        an existing one."""
        if self.backend is not None:
            return self.backend
        return "none" if existing_cluster else "cloudwatch"
