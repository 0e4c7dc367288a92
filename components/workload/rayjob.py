"""The KubeRay launcher: a RayCluster ``rlinf-cluster`` and a RayJob ``rlinf-training`` (ray.io/v1,
KubeRay 1.7 CRDs), as plain dicts validated in tests against the CRDs' openAPIV3Schema.

Facts (field notes, section 2): the Ray container is ``containers[0]``; ``rayStartParams`` values
are strings; KubeRay derives num-gpus / num-cpus from the container's limits; with autoscaling off
a worker group needs both ``minReplicas`` and ``maxReplicas``; ``runtimeEnvYAML`` is a YAML
string; exactly one of ``rayClusterSpec`` / ``clusterSelector``; ``backoffLimit`` and
``shutdownAfterJobFinishes`` are not used with ``clusterSelector``; ``ttlSecondsAfterFinished``
> 0 needs ``shutdownAfterJobFinishes``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import yaml

from ..scheduling import SYSTEM_NODE_LABELS
from ..config import StackSettings
from .kube import APP_LABELS, core, guaranteed, to_manifest
from .run import RayPodShape

RAY_CLUSTER_NAME = "rlinf-cluster"  # <= 53 characters (KubeRay)
RAY_JOB_NAME = "rlinf-training"  # <= 47 characters (KubeRay)
RAY_EVAL_JOB_NAME = "rlinf-evaluation"  # workload.mode eval
# KubeRay v1.7.0 submits a RayJob once: a changed entrypoint, runtime env or cluster spec of an
# existing RayJob is not run (its webhook checks only the new object; the CRD makes managedBy and
# the GCS fault-tolerance backend immutable), so a changed spec is a new RayJob (replaceOnChanges).
RAY_JOB_REPLACE_ON_CHANGES = ("spec",)
RAY_CLUSTER_REPLACE_ON_CHANGES = ("spec.managedBy", "spec.gcsFaultToleranceOptions.backend")
"""The RayCluster CRD's CEL rules (``self == oldSelf``); the operator reconciles the rest."""
WORKER_GROUP = "gpu-workers"
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
# the head's and the workers' pod labels (KubeRay adds its own ray.io/* labels)
POD_LABELS = {**APP_LABELS, "app.kubernetes.io/component": "kuberay"}


def ray_start_params(shape: RayPodShape, *, head: bool) -> dict[str, str]:
    """Strings only (the CRD's map<string,string>). num-cpus and the object store size follow the
    pod shape; num-gpus KubeRay reads from the GPU limit."""
    params = {
        "num-cpus": str(shape.ray_cpus),
        "object-store-memory": str(shape.object_store_bytes),
    }
    if head:
        params["dashboard-host"] = "0.0.0.0"
    return params


def runtime_env_yaml(plain_env: Mapping[str, str], pythonpath: str) -> str:
    """The job's runtime_env: the pods' plain variables (never secrets: the RayJob is not a
    Secret) and PYTHONPATH with the trainer's checkout first. Ray expands ``${PYTHONPATH}`` from
    the worker's environment (ray-project/ray#36187), so the image's own path stays."""
    env = {**plain_env, "PYTHONPATH": f"{pythonpath}:${{PYTHONPATH}}"}
    return yaml.safe_dump({"env_vars": env}, sort_keys=True, default_flow_style=False)


SUBMITTER_CONTAINER = "ray-job-submitter"
RAY_IMAGE_UID = 1000  # rayproject/ray's Dockerfile: useradd ray --uid 1000; USER 1000


def submitter_pod_template(settings: StackSettings) -> dict[str, Any]:
    """K8sJobMode's submitter pod (``ray job submit`` + ``ray job logs --follow``, KubeRay adds the
    command and the dashboard address to the first container). KubeRay's default template runs the
    head's image with no nodeSelector: the tens-of-GB training image pulled onto a system node
    (20 GiB root volume by default) just to submit. A Ray image of the same version on the system
    nodes, where the operator runs, does the same."""
    image = settings.workload.rayjob.submitter_image or f"rayproject/ray:{settings.workload.ray_version}"
    template = core.PodTemplateSpecArgs(
        spec=core.PodSpecArgs(
            restart_policy="Never",
            node_selector=dict(SYSTEM_NODE_LABELS),
            # it only talks HTTP to the head's dashboard: no Kubernetes API token, no root (the Ray
            # images' user is ray, UID 1000)
            automount_service_account_token=False,
            security_context=core.PodSecurityContextArgs(
                run_as_non_root=True, run_as_user=RAY_IMAGE_UID, seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")
            ),
            containers=[
                core.ContainerArgs(
                    name=SUBMITTER_CONTAINER,
                    image=image,
                    image_pull_policy="Always",
                    # KubeRay's default submitter resources (1 CPU / 1Gi limits), requests = limits
                    resources=guaranteed({"cpu": "1", "memory": "1Gi"}),
                    security_context=core.SecurityContextArgs(
                        privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["ALL"])
                    ),
                )
            ],
        )
    )
    return to_manifest(template)


def ray_cluster_spec(
    settings: StackSettings,
    *,
    shape: RayPodShape,
    nnodes: int,
    head_template: Mapping[str, Any],
    worker_template: Optional[Mapping[str, Any]],
) -> dict[str, Any]:
    """A GPU head that runs the driver (one node's worth of GPUs) and N-1 GPU workers."""
    spec: dict[str, Any] = {
        "rayVersion": settings.workload.ray_version,
        "enableInTreeAutoscaling": False,
        "headGroupSpec": {
            "rayStartParams": ray_start_params(shape, head=True),
            "template": dict(head_template),
        },
    }
    workers = nnodes - 1
    if workers > 0 and worker_template is not None:
        spec["workerGroupSpecs"] = [
            {
                "groupName": WORKER_GROUP,
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": ray_start_params(shape, head=False),
                "template": dict(worker_template),
            }
        ]
    return spec


def ray_job_spec(
    settings: StackSettings,
    *,
    entrypoint: str,
    runtime_env: str,
    cluster_spec: Optional[Mapping[str, Any]],
) -> dict[str, Any]:
    """Embedded (``cluster_spec`` given): the job brings its own cluster and deletes it when it
    ends, releasing the GPUs. Otherwise submitted to ``rlinf-cluster`` by clusterSelector."""
    rayjob = settings.workload.rayjob
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "runtimeEnvYAML": runtime_env,
        "submissionMode": rayjob.submission_mode,
    }
    if rayjob.submission_mode == "K8sJobMode":
        spec["submitterPodTemplate"] = submitter_pod_template(settings)
    if rayjob.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = rayjob.active_deadline_seconds
    if rayjob.pre_running_deadline_seconds is not None and _kuberay_at_least(settings.kuberay.version, (1, 6, 0)):
        # An older operator's CRD lacks the field, and the API server would prune it silently.
        spec["preRunningDeadlineSeconds"] = rayjob.pre_running_deadline_seconds
    if cluster_spec is not None:
        spec["rayClusterSpec"] = dict(cluster_spec)
        spec["shutdownAfterJobFinishes"] = True
        spec["ttlSecondsAfterFinished"] = rayjob.ttl_seconds_after_finished
        spec["backoffLimit"] = settings.workload.rayjob_backoff_limit
    else:
        spec["clusterSelector"] = {"ray.io/cluster": RAY_CLUSTER_NAME}
    return spec


def _kuberay_at_least(version: str, minimum: tuple[int, int, int]) -> bool:
    parts = tuple(int(p) for p in version.lstrip("v").split(".")[:3] if p.isdigit())
    return parts >= minimum

