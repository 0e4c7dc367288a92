"""Seeing the GPUs work: GPU, EFA and Ray metrics, on AWS's stack or an in-cluster one.

    cloudwatch   the amazon-cloudwatch-observability EKS add-on, its agent on EKS Pod Identity
    prometheus   kube-prometheus-stack on the system nodes, dcgm-exporter and the EFA counter
                 exporter on the GPU nodes, Ray's metrics by PodMonitor, Grafana dashboards
                 (dashboards/*.json, package data) loaded by the chart's sidecar
"""

from __future__ import annotations

from .cloudwatch import CloudWatchObservability
from .prometheus import PrometheusObservability

__all__ = ["CloudWatchObservability", "PrometheusObservability"]
