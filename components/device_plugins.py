"""Device plugins that advertise the GPU nodes' GPUs (``nvidia.com/gpu``) and EFA devices
(``vpc.amazonaws.com/efa``) to the scheduler, as pinned Helm releases in kube-system.

- NVIDIA ``nvidia-device-plugin`` (https://nvidia.github.io/k8s-device-plugin): on AL2023 NVIDIA
  AMIs only; Bottlerocket NVIDIA AMIs ship their own plugin, and a second one would fight it.
- ``aws-efa-k8s-device-plugin`` (https://aws.github.io/eks-charts): only when the nodes use EFA.

Both tolerate exactly the GPU taint and are pinned to the GPU nodes: the EFA plugin crash-loops on
nodes without EFA devices, and the NVIDIA chart's default affinity wants labels from Node Feature
Discovery, which this cluster does not run.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pulumi
import pulumi_kubernetes as k8s

from .config import DevicePluginSettings, GpuNodeSettings
from .gpu_nodes import is_bottlerocket
from .helm_releases import RELEASE_OPTIONS
from .scheduling import EFA_LABEL, GPU_NODE_LABELS, gpu_toleration

NAMESPACE = "kube-system"
NVIDIA_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_CHART = "nvidia-device-plugin"
EFA_REPO = "https://aws.github.io/eks-charts"
EFA_CHART = "aws-efa-k8s-device-plugin"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def wants_nvidia_plugin(gpu_nodes: GpuNodeSettings) -> bool:
    """The NVIDIA plugin runs everywhere except on Bottlerocket, which ships its own."""
    return not is_bottlerocket(gpu_nodes)


def _required_node_affinity(labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "In", "values": [value]} for key, value in labels.items()]}
                ]
            }
        }
    }


def nvidia_values(gpu_nodes: GpuNodeSettings) -> dict[str, Any]:
    """Values of the NVIDIA chart.

    ``tolerations`` replaces the chart's list (Helm replaces lists), leaving exactly the GPU
    taint. ``affinity`` replaces the chart's ``nodeSelectorTerms`` (NFD labels such as
    ``feature.node.kubernetes.io/pci-10de.present``, absent here) with the GPU node label, so the
    DaemonSet does schedule on our nodes."""
    del gpu_nodes  # every GPU node carries GPU_NODE_LABELS
    return {
        "nodeSelector": dict(GPU_NODE_LABELS),
        "affinity": _required_node_affinity(GPU_NODE_LABELS),
        "tolerations": [gpu_toleration()],
    }


def efa_values(gpu_nodes: GpuNodeSettings) -> dict[str, Any]:
    """Values of the EFA chart.

    The chart builds a required node affinity from ``supportedInstanceLabels`` (a list of EFA
    instance types that can lag new types): it is narrowed to this node group's type. The
    nodeSelector adds the EFA and GPU labels; ``tolerations`` is appended by the chart after its
    own fixed ``CriticalAddonsOnly`` toleration, so ours is the GPU taint only."""
    return {
        "nodeSelector": {**GPU_NODE_LABELS, EFA_LABEL: "true"},
        "tolerations": [gpu_toleration()],
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": [gpu_nodes.instance_type]},
    }


class DevicePlugins(pulumi.ComponentResource):
    """The NVIDIA and EFA device plugins for the GPU node group.

    Args:
        settings: ``DevicePluginSettings`` (chart versions), or a mapping with its camelCase keys.
        gpu_nodes: ``GpuNodeSettings`` of the node group (AMI type, EFA, instance type).
        opts: must carry the cluster's Kubernetes provider.

    Outputs: ``nvidia_release`` and ``efa_release`` (the Helm releases, None when not installed).
    """

    # The Helm releases are annotated where they are set, not on the class: the class annotations
    # are what the hosted package (rlinf_eks.hosted) exposes to other languages, and a resource
    # output there would make every consumer depend on the Kubernetes package's schema.

    def __init__(
        self,
        name: str,
        *,
        settings: DevicePluginSettings | Mapping[str, Any],
        gpu_nodes: GpuNodeSettings | Mapping[str, Any],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:DevicePlugins", name, None, opts)
        if not isinstance(settings, DevicePluginSettings):
            settings = DevicePluginSettings.model_validate(settings)
        if not isinstance(gpu_nodes, GpuNodeSettings):
            gpu_nodes = GpuNodeSettings.model_validate(gpu_nodes)
        child = pulumi.ResourceOptions(parent=self)

        self.nvidia_release: Optional[k8s.helm.v3.Release] = None
        if wants_nvidia_plugin(gpu_nodes):
            self.nvidia_release = self._release(
                f"{name}-nvidia", NVIDIA_CHART, NVIDIA_REPO, settings.nvidia_version, nvidia_values(gpu_nodes), child
            )
        self.efa_release: Optional[k8s.helm.v3.Release] = None
        if gpu_nodes.efa:
            self.efa_release = self._release(
                f"{name}-efa", EFA_CHART, EFA_REPO, settings.efa_version, efa_values(gpu_nodes), child
            )
        self.register_outputs(
            {
                "nvidiaRelease": self.nvidia_release.name if self.nvidia_release else None,
                "efaRelease": self.efa_release.name if self.efa_release else None,
            }
        )

    @staticmethod
    def _release(
        resource_name: str, chart: str, repo: str, version: str, values: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> k8s.helm.v3.Release:
        return k8s.helm.v3.Release(
            resource_name,
            k8s.helm.v3.ReleaseArgs(
                # A fixed release name keeps the DaemonSet's name stable (no random suffix).
                name=chart,
                chart=chart,
                version=version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo),
                namespace=NAMESPACE,
                values=values,
                **RELEASE_OPTIONS,
            ),
            opts=opts,
        )
