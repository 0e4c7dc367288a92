"""The KubeRay operator: one Helm release, on the system nodes, that Ray custom resources depend on.

The chart ships the RayCluster / RayJob / RayService CRDs in its ``crds/`` folder. Helm installs
that folder on the first install only and never upgrades or deletes it (Helm docs, "Custom
Resource Definitions"), so bumping ``kuberay.version`` upgrades the operator but not the CRDs:
apply the new release's CRDs first (``kubectl apply --server-side -k
github.com/ray-project/kuberay/ray-operator/config/crd?ref=vX.Y.Z``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pulumi
import pulumi_kubernetes as k8s

from .helm_releases import RELEASE_OPTIONS
from .scheduling import SYSTEM_NODE_LABELS
from .config import KubeRaySettings

CHART = "kuberay-operator"
CHART_REPO = "https://ray-project.github.io/kuberay-helm/"
RELEASE_NAME = "kuberay-operator"

# The operator reconciles a handful of CRs; the chart's own default (100m / 512Mi) is what
# KubeRay's docs size it at. Requests equal limits so it is never the first to be evicted.
OPERATOR_RESOURCES = {"limits": {"cpu": "100m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "512Mi"}}


def operator_values() -> dict[str, Any]:
    """Helm values of kuberay-operator (keys from the chart's values.yaml, v1.7.0)."""
    return {
        # the GPU nodes are tainted and may scale to zero: keep the operator on the system nodes
        "nodeSelector": dict(SYSTEM_NODE_LABELS),
        "resources": OPERATOR_RESOURCES,
    }


class KubeRayOperator(pulumi.ComponentResource):
    """The kuberay-operator Helm release (chart repo https://ray-project.github.io/kuberay-helm/).

    Args:
        settings: ``KubeRaySettings`` (or a mapping with its camelCase keys): ``version`` (chart
            version, default 1.7.0) and ``namespace`` (default ray-system, created by the release).
        opts: must carry the cluster's Kubernetes provider.

    Outputs: ``release`` (the Helm release: Ray custom resources ``depends_on`` it),
    ``namespace``.
    """

    # the release is annotated where it is set (see DevicePlugins: the class annotations are the
    # hosted package's outputs)
    namespace: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        settings: KubeRaySettings | Mapping[str, Any],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:KubeRayOperator", name, None, opts)
        if not isinstance(settings, KubeRaySettings):
            settings = KubeRaySettings.model_validate(settings)
        self.release: k8s.helm.v3.Release = k8s.helm.v3.Release(
            f"{name}-operator",
            name=RELEASE_NAME,
            chart=CHART,
            version=settings.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CHART_REPO),
            namespace=settings.namespace,
            create_namespace=True,
            values=operator_values(),
            **RELEASE_OPTIONS,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = self.release.namespace
        self.register_outputs({"release": self.release.id, "namespace": self.namespace})
