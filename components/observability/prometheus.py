"""The prometheus backend: everything in-cluster, nothing exposed outside it (port-forward).

- kube-prometheus-stack (Prometheus, its operator, Grafana, kube-state-metrics) on the system
  nodes; its node exporter on every node (hostNetwork: node CPU, memory, disks, NICs).
- NVIDIA's dcgm-exporter on the GPU nodes (tolerating the taint, selecting ``role:
  gpu-training``): GPU utilisation, memory, power, NVLink; scraped by the chart's ServiceMonitor.
- ``efa-exporter``, a DaemonSet on the GPU nodes that serves the EFA devices' ``hw_counters``
  (``/sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>``: rx_bytes, tx_bytes,
  rx_drops, rdma_read_bytes, ...) as ``efa_hw_counter{device,port,counter}``. Not node exporter's
  infiniband collector: it reads each port's ``counters`` directory (procfs
  ``class_infiniband.go``), whose names (port_rcv_data, ...) the EFA driver does not provide, and of
  ``hw_counters`` only the mlx5 names; EFA's counters would be missing.
- PodMonitors for Ray's metrics (head and workers, port ``metrics``) and the EFA exporter.
- The dashboards in ``dashboards/*.json`` as ConfigMaps labelled for Grafana's dashboard sidecar.
- NetworkPolicies: the exporters admit only Prometheus (the node exporter runs on the host
  network, which NetworkPolicy does not filter).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Mapping, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..config import GpuNodeSettings, ObservabilitySettings
from ..helm_releases import RELEASE_OPTIONS
from ..scheduling import GPU_NODE_LABELS, SYSTEM_NODE_LABELS, gpu_toleration, node_labels
from ..workload import manual, rayjob
from ..workload.kube import APP_LABELS, PROGRESS_METRICS_PORT_NAME, RAY_METRICS_PORT_NAME
from ..workload.network_policy import PROMETHEUS_POD_LABELS

STACK_CHART = "kube-prometheus-stack"
STACK_REPO = "https://prometheus-community.github.io/helm-charts"
STACK_RELEASE = "kps"
DCGM_CHART = "dcgm-exporter"
DCGM_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_RELEASE = "dcgm-exporter"
# Grafana's dashboard sidecar loads ConfigMaps with this label (kube-prometheus-stack values:
# grafana.sidecar.dashboards.label / labelValue)
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
EFA_EXPORTER = "efa-exporter"
EFA_EXPORTER_PORT = 9120
EFA_EXPORTER_PATH = "/metrics.txt"  # busybox httpd serves .txt as text/plain, Prometheus' text format
EFA_EXPORTER_LABELS = {"app.kubernetes.io/name": EFA_EXPORTER, "app.kubernetes.io/part-of": "rlinf-eks"}
DCGM_POD_LABELS = {"app.kubernetes.io/name": DCGM_CHART}
DCGM_PORT = 9400
SCRAPE_INTERVAL = "15s"

# The DaemonSets' requests; catalog.OBSERVABILITY_DAEMONSETS["prometheus"] counts them
NODE_EXPORTER_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "250m", "memory": "128Mi"}}
DCGM_RESOURCES = {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
EFA_EXPORTER_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "32Mi"}}

# sh (busybox): every 15 s, one line per EFA hardware counter into a file that httpd serves
EFA_EXPORTER_SCRIPT = r"""set -eu
collect() {
  echo '# HELP efa_hw_counter EFA hardware counter, /sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>'
  echo '# TYPE efa_hw_counter untyped'
  for f in /sys/class/infiniband/*/ports/*/hw_counters/*; do
    [ -r "$f" ] || continue
    counter=${f##*/}; rest=${f%/hw_counters/*}; port=${rest##*/}; rest=${rest%/ports/*}; device=${rest##*/}
    read -r value < "$f" || continue
    echo "efa_hw_counter{device=\"$device\",port=\"$port\",counter=\"$counter\"} $value"
  done
}
while true; do collect > /www/.metrics.tmp && mv /www/.metrics.tmp /www/metrics.txt; sleep 15; done &
exec httpd -f -p "$PORT" -h /www
"""


def stack_values(settings: ObservabilitySettings) -> dict[str, Any]:
    """kube-prometheus-stack's values (keys of its values.yaml; grafana, kube-state-metrics and
    prometheus-node-exporter keys are their subcharts')."""
    system = dict(SYSTEM_NODE_LABELS)
    ns = settings.prometheus.namespace
    return {
        "fullnameOverride": STACK_RELEASE,
        # no receivers to alert: Grafana and the README's healthy/stalled charts are the interface
        "alertmanager": {"enabled": False},
        "prometheusOperator": {"nodeSelector": system, "admissionWebhooks": {"patch": {"nodeSelector": system}}},
        "prometheus": {
            "prometheusSpec": {
                "nodeSelector": system,
                "retention": f"{settings.prometheus.retention_days}d",
                "scrapeInterval": SCRAPE_INTERVAL,
                # select every ServiceMonitor/PodMonitor, not only the release's own (dcgm-exporter's, ours)
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
            }
        },
        "grafana": {
            "nodeSelector": system,
            "sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1", "searchNamespace": ns}},
            # the Ray dashboard embeds Grafana panels in an iframe: embedding on, anonymous viewers
            # (Ray docs, "Embedding Grafana visualizations into Ray Dashboard"); Grafana is
            # reached only through port-forward
            "grafana.ini": {"security": {"allow_embedding": True}, "auth.anonymous": {"enabled": True, "org_role": "Viewer"}},
        },
        "kube-state-metrics": {"nodeSelector": system},
        "prometheus-node-exporter": {"tolerations": [gpu_toleration()], "resources": NODE_EXPORTER_RESOURCES},
    }


def dcgm_values() -> dict[str, Any]:
    """dcgm-exporter's values (keys of its values.yaml): on the GPU nodes only."""
    return {
        "nodeSelector": dict(GPU_NODE_LABELS),
        "tolerations": [gpu_toleration()],
        "resources": DCGM_RESOURCES,
        "serviceMonitor": {"enabled": True, "interval": SCRAPE_INTERVAL},
        # label each GPU's series with the pod that holds it
        "kubernetes": {"enablePodLabels": True},
    }


def dashboards() -> dict[str, str]:
    """The Grafana dashboards shipped with the package: file stem -> JSON text."""
    folder = resources.files(__package__) / "dashboards"
    return {f.name.removesuffix(".json"): f.read_text() for f in sorted(folder.iterdir(), key=lambda f: f.name) if f.name.endswith(".json")}


def efa_exporter_spec(image: str, gpu_labels: Mapping[str, str]) -> dict[str, Any]:
    """The EFA exporter DaemonSet's spec: GPU nodes only, unprivileged (sysfs counters are world
    readable), read-only root, no token."""
    container = {
        "name": EFA_EXPORTER,
        "image": image,
        "imagePullPolicy": "Always",
        "command": ["sh", "-c", EFA_EXPORTER_SCRIPT],
        "env": [{"name": "PORT", "value": str(EFA_EXPORTER_PORT)}],
        "ports": [{"name": "metrics", "containerPort": EFA_EXPORTER_PORT, "protocol": "TCP"}],
        "resources": EFA_EXPORTER_RESOURCES,
        "readinessProbe": {"httpGet": {"path": EFA_EXPORTER_PATH, "port": "metrics"}, "periodSeconds": 30},
        "livenessProbe": {"httpGet": {"path": EFA_EXPORTER_PATH, "port": "metrics"}, "initialDelaySeconds": 30, "periodSeconds": 60},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "www", "mountPath": "/www"}],
    }
    return {
        "selector": {"matchLabels": dict(EFA_EXPORTER_LABELS)},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": dict(EFA_EXPORTER_LABELS)},
            "spec": {
                "nodeSelector": dict(gpu_labels),
                "tolerations": [gpu_toleration()],
                "automountServiceAccountToken": False,
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True},
                "priorityClassName": "system-node-critical",
                "containers": [container],
                "volumes": [{"name": "www", "emptyDir": {"sizeLimit": "1Mi"}}],
            },
        },
    }


def head_labels(launcher: str) -> dict[str, str]:
    """The labels of the pod that runs the trainer: the Indexed Job's pod 0, or KubeRay's head."""
    if launcher == "manual":
        return {**manual.LAUNCHER_LABELS, "batch.kubernetes.io/job-completion-index": "0"}
    return {**rayjob.POD_LABELS, "ray.io/node-type": "head"}


def pod_monitor_spec(namespace: str, labels: Mapping[str, str], port: str, path: Optional[str] = None) -> dict[str, Any]:
    # each series names the node it came from (the EFA counters carry only device and port)
    endpoint: dict[str, Any] = {
        "port": port,
        "interval": SCRAPE_INTERVAL,
        "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}],
    }
    if path:
        endpoint["path"] = path
    return {
        "namespaceSelector": {"matchNames": [namespace]},
        "selector": {"matchLabels": dict(labels)},
        "podMetricsEndpoints": [endpoint],
    }


def scrapers_only_spec(pod_labels: Mapping[str, str], port: int) -> dict[str, Any]:
    """A NetworkPolicy spec: the pods with ``pod_labels`` admit Prometheus on ``port`` and nothing else."""
    return {
        "podSelector": {"matchLabels": dict(pod_labels)},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": dict(PROMETHEUS_POD_LABELS)}}], "ports": [{"protocol": "TCP", "port": port}]}],
    }


class PrometheusObservability(pulumi.ComponentResource):
    """kube-prometheus-stack, dcgm-exporter, the EFA exporter, Ray's PodMonitor and the dashboards.

    Args:
        settings: ``ObservabilitySettings`` (its ``prometheus`` section: namespace, chart versions,
            retention, the EFA exporter's image).
        gpu_nodes: the GPU node settings (their labels: the GPU DaemonSets select them).
        workload_namespace: where the Ray pods run (their PodMonitors select them there).
        launcher: ``workload.launcher`` (manual, kuberay): which pod runs the trainer's supervisor.
        opts: must carry the cluster's Kubernetes provider.
    """

    def __init__(
        self,
        name: str,
        *,
        settings: ObservabilitySettings,
        gpu_nodes: GpuNodeSettings,
        workload_namespace: str,
        launcher: str = "manual",
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:PrometheusObservability", name, None, opts)
        ns = settings.prometheus.namespace
        helm = k8s.helm.v3
        self.stack = helm.Release(
            f"{name}-stack",
            name=STACK_RELEASE,
            chart=STACK_CHART,
            version=settings.prometheus.stack_version,
            repository_opts=helm.RepositoryOptsArgs(repo=STACK_REPO),
            namespace=ns,
            create_namespace=True,
            values=stack_values(settings),
            **RELEASE_OPTIONS,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # the ServiceMonitor/PodMonitor CRDs and the namespace come with the stack's release
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.stack])
        helm.Release(
            f"{name}-dcgm",
            name=DCGM_RELEASE,
            chart=DCGM_CHART,
            version=settings.prometheus.dcgm_exporter_version,
            repository_opts=helm.RepositoryOptsArgs(repo=DCGM_REPO),
            namespace=ns,
            values=dcgm_values(),
            **RELEASE_OPTIONS,
            opts=after,
        )
        meta = k8s.meta.v1.ObjectMetaArgs
        labels = {"app.kubernetes.io/part-of": "rlinf-eks"}
        k8s.apps.v1.DaemonSet(
            f"{name}-efa-exporter",
            metadata=meta(name=EFA_EXPORTER, namespace=ns, labels=dict(EFA_EXPORTER_LABELS)),
            spec=efa_exporter_spec(settings.prometheus.efa_exporter_image, node_labels(gpu_nodes)),
            opts=after,
        )
        monitors = {
            "ray": (workload_namespace, APP_LABELS, RAY_METRICS_PORT_NAME, None),
            # the progress supervisor runs beside the trainer, on the head only
            "rlinf-run": (workload_namespace, head_labels(launcher), PROGRESS_METRICS_PORT_NAME, None),
            EFA_EXPORTER: (ns, EFA_EXPORTER_LABELS, "metrics", EFA_EXPORTER_PATH),
        }
        for monitor, (namespace, selected, port, path) in monitors.items():
            k8s.apiextensions.CustomResource(
                f"{name}-{monitor}-monitor",
                api_version="monitoring.coreos.com/v1",
                kind="PodMonitor",
                metadata=meta(name=monitor, namespace=ns, labels=labels),
                spec=pod_monitor_spec(namespace, selected, port, path),
                opts=after,
            )
        for policy, (selected, port) in {"dcgm-exporter": (DCGM_POD_LABELS, DCGM_PORT), EFA_EXPORTER: (EFA_EXPORTER_LABELS, EFA_EXPORTER_PORT)}.items():
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy}-ingress",
                metadata=meta(name=f"{policy}-scrapers-only", namespace=ns, labels=labels),
                spec=scrapers_only_spec(selected, port),
                opts=after,
            )
        for dashboard, text in dashboards().items():
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{dashboard}",
                metadata=meta(name=f"rlinf-dashboard-{dashboard}", namespace=ns, labels={**labels, **DASHBOARD_LABEL}),
                data={f"{dashboard}.json": text},
                opts=after,
            )
        self.register_outputs({"namespace": ns})
