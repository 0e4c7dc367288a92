"""The JobSet controller (kubernetes-sigs/jobset): one Helm release, on the system nodes, that the
manual launcher's JobSet depends on when ``workload.restart.maxRestarts`` > 0.

JobSet is the gang-restart engine: when a child Job fails, its ``failurePolicy`` recreates every
Job (and so every pod) of the set, up to ``maxRestarts`` times, and its rules tell which failures
count (:func:`rlinf_eks.workload.manual.jobset_spec`). The chart is published only as an OCI
artifact (``helm install oci://registry.k8s.io/jobset/charts/jobset --version X``: there is no
``latest`` tag, so the version is required). Like KubeRay's, the chart's ``crds/`` folder is
installed on the first install only (Helm never upgrades CRDs): after bumping the version, apply
the release's CRDs first (``kubectl apply --server-side -f
https://github.com/kubernetes-sigs/jobset/releases/download/vX.Y.Z/manifests.yaml``).
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from .helm_releases import RELEASE_OPTIONS
from .scheduling import SYSTEM_NODE_LABELS
from .config import RestartSettings

CHART = "oci://registry.k8s.io/jobset/charts/jobset"
RELEASE_NAME = "jobset"

# The chart's default limits are 2 CPUs / 4 GiB (requests 500m / 128Mi): sized for thousands of
# JobSets. One JobSet per stack needs little; requests equal limits so it is never evicted first.
CONTROLLER_RESOURCES = {"limits": {"cpu": "250m", "memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "512Mi"}}


def controller_values() -> dict[str, Any]:
    """Helm values of the jobset chart (keys from its values.yaml: ``controller.nodeSelector``,
    ``controller.resources``; chart 0.8 and newer)."""
    return {
        "controller": {
            # the GPU nodes are tainted and may scale to zero: keep the controller on the system nodes
            "nodeSelector": dict(SYSTEM_NODE_LABELS),
            "resources": CONTROLLER_RESOURCES,
        },
        # the chart's ServiceMonitor needs the Prometheus Operator's CRD and fails the install
        # without it ("The cluster does not support ... monitoring.coreos.com/v1/ServiceMonitor");
        # off by default in newer charts, said here so an older pin cannot turn it on
        "prometheus": {"enable": False},
    }


class JobSetController(pulumi.ComponentResource):
    """The jobset Helm release.

    Args:
        settings: the stack's ``workload.restart`` (``RestartSettings``): ``jobsetVersion`` and
            ``jobsetNamespace`` (created by the release).
        opts: must carry the cluster's Kubernetes provider.

    Output: ``release`` (the JobSet ``depends_on`` it).
    """

    release: k8s.helm.v3.Release

    def __init__(self, name: str, *, settings: RestartSettings, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("rlinf-eks:index:JobSetController", name, None, opts)
        self.release = k8s.helm.v3.Release(
            f"{name}-controller",
            name=RELEASE_NAME,
            # an OCI chart reference needs no repository_opts
            chart=CHART,
            version=settings.jobset_version,
            namespace=settings.jobset_namespace,
            create_namespace=True,
            values=controller_values(),
            **RELEASE_OPTIONS,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"release": self.release.id})
