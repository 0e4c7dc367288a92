"""Every Ray pod of the training run, whichever launcher starts it: one pod fills one GPU node.

Pure functions from resolved settings to typed Kubernetes specs (``pulumi_kubernetes`` Args, so a
misspelt key fails loudly); :func:`to_manifest` turns them into the camelCase dicts a KubeRay
custom resource embeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
from pulumi import _types

from .. import catalog
from ..config import StackSettings
from ..scheduling import EFA_RESOURCE, GPU_NODE_LABELS, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE, gpu_toleration

core = k8s.core.v1
meta = k8s.meta.v1

SCRIPTS_DIR = "/etc/rlinf"
"""Where the launch ConfigMap is mounted: the user's image needs no change."""
STATE_DIR = "/var/run/rlinf"
"""Shared by the trainer and the checkpoint-sync container: the trainer's exit code lands here."""
LOCAL_RUN_DIR = "/rlinf-run"
"""Without the shared filesystem: the node-local run directory, restored from and synced to S3."""
RAY_CONTAINER = "ray"
APP_LABELS = {"app.kubernetes.io/name": "rlinf-training", "app.kubernetes.io/part-of": "rlinf-eks"}

# The checkpoint-sync container's share of the node (it runs the AWS CLI only).
SYNC_MILLICPU = 500
SYNC_MEMORY_MIB = 1024
# A restored run can be large: give the one-shot restore a few CPUs (it runs before the trainer, so
# it costs nothing: init containers' requests count as max(init), not in the sum).
RESTORE_MILLICPU = 4000
RESTORE_MEMORY_MIB = 8 * catalog.GIB_MIB
# Ray's object store lives in /dev/shm; leave headroom for NCCL's own shared-memory segments.
OBJECT_STORE_SHARE_OF_SHM = 0.8

SEED_ENV = {
    "NCCL_DEBUG": "WARN",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
}
SOCKET_INTERFACE = "eth0"  # the VPC CNI's pod interface


@dataclass(frozen=True)
class RunPaths:
    """Where the run keeps its state. ``root`` holds logs and checkpoints; ``shared``: on the shared
    filesystem (FSx, exported to s3://<bucket>/ by its data repository association), else on the
    node and synced to ``s3://<bucket>/<s3_prefix>/``."""

    root: str
    shared: bool
    s3_prefix: str

    @property
    def log_dir(self) -> str:
        return f"{self.root}/logs"

    @property
    def checkpoint_dir(self) -> str:
        return f"{self.root}/checkpoints"


def run_paths(settings: StackSettings, stack: str, shared: bool) -> RunPaths:
    """``<mountPath>/<stack>`` on the shared filesystem (the association maps it to
    ``s3://<bucket>/<stack>/``), else ``/rlinf-run`` synced to the same S3 prefix."""
    if shared:
        mount = settings.storage.shared_filesystem.mount_path.rstrip("/")
        return RunPaths(f"{mount}/{stack}", True, stack)
    return RunPaths(LOCAL_RUN_DIR, False, stack)


@dataclass(frozen=True)
class RayPodShape:
    """The catalog's pod shape, split between the Ray container and the sync container."""

    pod: catalog.PodShape
    efa: int
    sync: bool

    @property
    def ray_millicpu(self) -> int:
        return self.pod.millicpu - (SYNC_MILLICPU if self.sync else 0)

    @property
    def ray_memory_mib(self) -> int:
        return self.pod.memory_mib - (SYNC_MEMORY_MIB if self.sync else 0)

    @property
    def ray_cpus(self) -> int:
        """Whole CPUs Ray schedules on (``--num-cpus``)."""
        return self.ray_millicpu // 1000

    @property
    def object_store_bytes(self) -> int:
        return int(self.pod.shm_mib * OBJECT_STORE_SHARE_OF_SHM) * 1024 * 1024


def pod_shape(settings: StackSettings, sync: bool) -> RayPodShape:
    """All GPUs and EFA devices of a node and what CPU and memory it can spare (catalog)."""
    gpu = settings.gpu_nodes
    instance = gpu.instance
    shape = catalog.pod_shape_for(instance, gpu.hugepages_gib * catalog.GIB_MIB, settings.workload.shm_fraction)
    efa = len(catalog.efa_interfaces_for(instance)) if gpu.efa else 0
    return RayPodShape(shape, efa, sync)


def _mi(mib: int) -> str:
    return f"{mib // catalog.GIB_MIB}Gi" if mib % catalog.GIB_MIB == 0 else f"{mib}Mi"


def _cpu(millicpu: int) -> str:
    return str(millicpu // 1000) if millicpu % 1000 == 0 else f"{millicpu}m"


def guaranteed(quantities: Mapping[str, str]) -> core.ResourceRequirementsArgs:
    """Requests equal to limits: Guaranteed QoS, so the kubelet evicts a training pod last."""
    return core.ResourceRequirementsArgs(requests=dict(quantities), limits=dict(quantities))


def accelerator_quantities(shape: RayPodShape) -> dict[str, str]:
    """GPUs, EFA devices and 2 MiB hugepages (libfabric's buffers) of one node."""
    quantities = {GPU_RESOURCE: str(shape.pod.gpus)}
    if shape.efa:
        quantities[EFA_RESOURCE] = str(shape.efa)
    if shape.pod.hugepages_2mi_mib:
        quantities[HUGEPAGES_2MI_RESOURCE] = _mi(shape.pod.hugepages_2mi_mib)
    return quantities


def ray_resources(shape: RayPodShape) -> core.ResourceRequirementsArgs:
    """KubeRay reads num-gpus and num-cpus from these limits; EFA it does not map, so it is here."""
    return guaranteed({"cpu": _cpu(shape.ray_millicpu), "memory": _mi(shape.ray_memory_mib), **accelerator_quantities(shape)})


def network_env(settings: StackSettings) -> dict[str, str]:
    """EFA / NCCL variables (field notes, sections 1 and 3)."""
    env = {
        "NCCL_SOCKET_IFNAME": SOCKET_INTERFACE,
        "GLOO_SOCKET_IFNAME": SOCKET_INTERFACE,
        "RLINF_COMM_NET_DEVICES": SOCKET_INTERFACE,
    }
    instance = settings.gpu_nodes.instance
    if settings.gpu_nodes.efa and instance.efa_capable:
        env["FI_PROVIDER"] = "efa"
        # libfabric registers memory that a fork()ed child could corrupt: Ray and dataloaders fork
        env["FI_EFA_FORK_SAFE"] = "1"
        if instance.gpudirect_rdma:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    # NCCL pinned to aws-ofi-nccl on EFA nodes and torch's NCCL timeouts (fabric.py says why)
    from .fabric import nccl_env, nccl_timeout_env

    env.update(nccl_env(settings))
    env.update(nccl_timeout_env(settings))
    return env


def plain_env(settings: StackSettings, trainer_env: Mapping[str, str], paths: RunPaths) -> dict[str, str]:
    """Every plain (non-secret) variable of the Ray pods, in precedence order: the seed's, the
    network's, the trainer dialect's, then ``workload.env`` (the user wins). PYTHONPATH is left
    out: the launchers prepend the trainer's checkout to the image's own PYTHONPATH."""
    env: dict[str, str] = {**SEED_ENV, **network_env(settings)}
    if settings.workload.mlflow_tracking_uri:
        env["MLFLOW_TRACKING_URI"] = settings.workload.mlflow_tracking_uri
    env["RLINF_RUN_DIR"] = paths.root
    env.update({k: v for k, v in trainer_env.items() if k != "PYTHONPATH"})
    env.update({k: v for k, v in settings.workload.env.items() if k != "PYTHONPATH"})
    return env


def trainer_pythonpath(settings: StackSettings, trainer_env: Mapping[str, str]) -> str:
    """The trainer's checkout first (the seed's ``/workspace``), then what the user adds."""
    parts = [trainer_env.get("PYTHONPATH") or settings.workload.trainer.workdir]
    if settings.workload.env.get("PYTHONPATH"):
        parts.append(settings.workload.env["PYTHONPATH"])
    return ":".join(parts)


SECRET_ENV = {"hf_token": "HF_TOKEN", "wandb_api_key": "WANDB_API_KEY"}
"""Secret config value -> the variable the trainer's libraries read (huggingface_hub, wandb)."""


def env_vars(plain: Mapping[str, str], secret_name: Optional[str], secret_keys: Sequence[str]) -> list[core.EnvVarArgs]:
    """Plain variables by value; secrets only by reference to the Kubernetes Secret."""
    env = [core.EnvVarArgs(name=k, value=v) for k, v in plain.items()]
    for key in secret_keys:
        env.append(
            core.EnvVarArgs(
                name=key,
                value_from=core.EnvVarSourceArgs(secret_key_ref=core.SecretKeySelectorArgs(name=secret_name, key=key)),
            )
        )
    return env


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


@dataclass(frozen=True)
class Volumes:
    """The pod's volumes and where the Ray container mounts them."""

    volumes: list[core.VolumeArgs]
    mounts: list[core.VolumeMountArgs]


def ray_volumes(
    shape: RayPodShape,
    *,
    config_map: str,
    claim_name: Optional[pulumi.Input[str]],
    shared_mount_path: str,
    paths: RunPaths,
) -> Volumes:
    volumes = [
        # Ray's object store; a memory-backed emptyDir is charged to the pod's memory limit
        core.VolumeArgs(name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=_mi(shape.pod.shm_mib))),
        core.VolumeArgs(name="launch", config_map=core.ConfigMapVolumeSourceArgs(name=config_map, default_mode=0o555)),
        core.VolumeArgs(name="state", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit="1Mi")),
    ]
    mounts = [
        core.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
        core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True),
        core.VolumeMountArgs(name="state", mount_path=STATE_DIR),
    ]
    if claim_name is not None:
        volumes.append(core.VolumeArgs(name="shared", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(claim_name=claim_name)))
        mounts.append(core.VolumeMountArgs(name="shared", mount_path=shared_mount_path))
    if not paths.shared:
        volumes.append(core.VolumeArgs(name="run", empty_dir=core.EmptyDirVolumeSourceArgs()))
        mounts.append(core.VolumeMountArgs(name="run", mount_path=paths.root))
    return Volumes(volumes, mounts)


def s3_env(bucket_name: pulumi.Input[str], paths: RunPaths) -> list[core.EnvVarArgs]:
    return [
        core.EnvVarArgs(name="RUN_DIR", value=paths.root),
        core.EnvVarArgs(name="STATE_DIR", value=STATE_DIR),
        core.EnvVarArgs(name="S3_URI", value=pulumi.Output.concat("s3://", bucket_name, f"/{paths.s3_prefix}")),
    ]


def restore_container(settings: StackSettings, bucket_name: pulumi.Input[str], paths: RunPaths) -> core.ContainerArgs:
    """Before the trainer: copy the run directory back from S3 so the trainer resumes from its
    latest checkpoint. Credentials come from the service account (IRSA)."""
    return core.ContainerArgs(
        name="restore-checkpoints",
        image=settings.workload.checkpoint_sync_image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/restore.sh"],
        env=s3_env(bucket_name, paths),
        resources=guaranteed({"cpu": _cpu(RESTORE_MILLICPU), "memory": _mi(RESTORE_MEMORY_MIB)}),
        volume_mounts=[
            core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True),
            core.VolumeMountArgs(name="run", mount_path=paths.root),
        ],
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["ALL"])
        ),
    )


def native_sidecars(kubernetes_version: str) -> bool:
    """Sidecar containers (an init container with ``restartPolicy: Always``, KEP-753) are on by
    default from Kubernetes 1.29 (beta) and GA in 1.33."""
    major, minor = (int(part) for part in kubernetes_version.split(".")[:2])
    return (major, minor) >= (1, 29)


def sync_container(settings: StackSettings, bucket_name: pulumi.Input[str], paths: RunPaths) -> core.ContainerArgs:
    """Beside the trainer: upload the run directory every interval, and once more when the trainer
    ends (its exit code appears in STATE_DIR) or the container is stopped (SIGTERM).

    From Kubernetes 1.29 it is a native sidecar (an init container with ``restartPolicy:
    Always``): the kubelet stops it only after the trainer's container has exited, so on eviction
    or deletion the final upload sees the checkpoint the trainer was given the grace period to
    finish, and a trainer container that dies without writing its exit code cannot leave the Job
    pod Running forever. Before 1.29 it is a regular container, and a failed final upload fails
    the pod."""
    return core.ContainerArgs(
        name="sync-checkpoints",
        restart_policy="Always" if native_sidecars(settings.cluster.kubernetes_version) else None,
        image=settings.workload.checkpoint_sync_image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/sync.sh"],
        env=[*s3_env(bucket_name, paths), core.EnvVarArgs(name="SYNC_INTERVAL_SECONDS", value=str(settings.workload.checkpoint_sync_interval_seconds))],
        resources=guaranteed({"cpu": _cpu(SYNC_MILLICPU), "memory": _mi(SYNC_MEMORY_MIB)}),
        volume_mounts=[
            core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True),
            core.VolumeMountArgs(name="run", mount_path=paths.root, read_only=True),
            core.VolumeMountArgs(name="state", mount_path=STATE_DIR, read_only=True),
        ],
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["ALL"])
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

