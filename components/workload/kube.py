"""Kubernetes object helpers of the workload's pods: typed ``pulumi_kubernetes`` Args (so a
misspelt key fails loudly), quantities, the one security context of the Ray containers, the GPU
nodes' scheduling, and :func:`to_manifest`, which turns Args into the camelCase dicts a custom
resource (RayCluster, RayJob, JobSet) embeds. Also the names every pod of the run shares: where
the launch ConfigMap and the state directory are mounted, the Ray container, the labels.

The bottom of the workload's modules: it knows nothing of the run.
"""

from __future__ import annotations

from typing import Any, Mapping

import pulumi_kubernetes as k8s
from pulumi import _types

from .. import catalog
from ..scheduling import GPU_NODE_LABELS, gpu_toleration

core = k8s.core.v1
meta = k8s.meta.v1

SCRIPTS_DIR = "/etc/rlinf"
"""Where the launch ConfigMap is mounted: the user's image needs no change."""
IMAGE_CHECK_CONTAINER = "image-check"
"""The init container that checks the image contract (image_check.py); manual.py's failure rules name it."""
CONFIG_CHECK_CONTAINER = "config-check"
"""The init container that composes the trainer's config in the image (config_check.py); manual.py's failure rules name it."""
STATE_DIR = "/var/run/rlinf"
"""Shared by the trainer and the checkpoint-sync container: the trainer's exit code lands here."""
RAY_CONTAINER = "ray"
APP_LABELS = {"app.kubernetes.io/name": "rlinf-training", "app.kubernetes.io/part-of": "rlinf-eks"}

# Ray's Prometheus metrics on every Ray node: KubeRay's default metrics-export-port (its pods
# declare it as the container port "metrics"); launch.sh passes it to `ray start`
RAY_METRICS_PORT = 8080
RAY_METRICS_PORT_NAME = "metrics"
# the progress supervisor's figures (step, newest complete checkpoint, last progress) on the pod
# that runs the trainer: the head (programs/progress_supervisor.py)
PROGRESS_METRICS_PORT = 9121
PROGRESS_METRICS_PORT_NAME = "progress"


def mi(mib: int) -> str:
    """A memory quantity: whole GiB as ``<n>Gi``, else ``<n>Mi``."""
    return f"{mib // catalog.GIB_MIB}Gi" if mib % catalog.GIB_MIB == 0 else f"{mib}Mi"


def cpu(millicpu: int) -> str:
    """A CPU quantity: whole CPUs as ``<n>``, else ``<n>m``."""
    return str(millicpu // 1000) if millicpu % 1000 == 0 else f"{millicpu}m"


def guaranteed(quantities: Mapping[str, str]) -> core.ResourceRequirementsArgs:
    """Requests equal to limits: Guaranteed QoS, so the kubelet evicts a training pod last."""
    return core.ResourceRequirementsArgs(requests=dict(quantities), limits=dict(quantities))


def security_context() -> core.SecurityContextArgs:
    """Not privileged: EFA needs its devices (mounted by the EFA device plugin) and the right to
    pin memory. IPC_LOCK lifts RLIMIT_MEMLOCK for libfabric's memory registration whatever the
    container runtime's default ulimit is. Training images run as root (pip installs, /workspace
    owned by root), so runAsNonRoot is not set."""
    return core.SecurityContextArgs(
        privileged=False,
        allow_privilege_escalation=False,
        capabilities=core.CapabilitiesArgs(add=["IPC_LOCK"], drop=["NET_RAW"]),
    )


def check_container(name: str, image: str, script: str, *, env: list[core.EnvVarArgs], **more: Any) -> core.ContainerArgs:
    """An init container that runs ``script`` of the launch ConfigMap in the training image before
    anything else (image_check.py, config_check.py): the image's environment, no devices, 1 CPU
    and 4 GiB (below the trainer's requests, so it costs the pod nothing; the check's imports run
    one python3 at a time: vLLM or TensorFlow with torch take about 1 GiB), read-only, no
    capabilities. ``more``: further ContainerArgs (a termination message policy)."""
    return core.ContainerArgs(
        name=name,
        image=image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/{script}"],
        env=env,
        resources=guaranteed({"cpu": "1", "memory": "4Gi"}),
        volume_mounts=[core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True)],
        **more,
        security_context=core.SecurityContextArgs(
            privileged=False,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=core.CapabilitiesArgs(drop=["ALL"]),
        ),
    )


def scheduling() -> dict[str, Any]:
    """The GPU node group's label and taint (scheduling.py is their one source)."""
    return {
        "node_selector": dict(GPU_NODE_LABELS),
        "tolerations": [core.TolerationArgs(**gpu_toleration())],
    }


def to_manifest(value: Any) -> Any:
    """Typed Args (nested) as the camelCase dict the Kubernetes API takes; Outputs stay Outputs."""
    if _types.is_input_type(type(value)):
        return {k: to_manifest(v) for k, v in _types.input_type_to_dict(value).items() if v is not None}
    if isinstance(value, dict):
        return {k: to_manifest(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_manifest(v) for v in value]
    return value
