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

from ..config import StackSettings
from .pod import RayPodShape

RAY_CLUSTER_NAME = "rlinf-cluster"  # <= 53 characters (KubeRay)
RAY_JOB_NAME = "rlinf-training"  # <= 47 characters (KubeRay)
WORKER_GROUP = "gpu-workers"
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"


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
    if rayjob.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = rayjob.active_deadline_seconds
    if cluster_spec is not None:
        spec["rayClusterSpec"] = dict(cluster_spec)
        spec["shutdownAfterJobFinishes"] = True
        spec["ttlSecondsAfterFinished"] = rayjob.ttl_seconds_after_finished
        spec["backoffLimit"] = rayjob.backoff_limit
    else:
        spec["clusterSelector"] = {"ray.io/cluster": RAY_CLUSTER_NAME}
    return spec
