"""Checkpoints without the shared filesystem: the run directory is node-local, restored from S3
before the trainer (:func:`restore_container`) and uploaded beside it (:func:`sync_container`),
both with the AWS CLI image ``workload.checkpointSyncImage`` and the training role (IRSA). The
scripts they run (restore.sh, sync.sh) take complete checkpoints only (:mod:`.scripts`)."""

from __future__ import annotations

import pulumi

from .. import catalog
from ..config import StackSettings
from .kube import SCRIPTS_DIR, STATE_DIR, core, cpu, guaranteed, mi
from .run import SYNC_MEMORY_MIB, SYNC_MILLICPU, RunPaths

# A restored run can be large: give the one-shot restore a few CPUs (it runs before the trainer, so
# it costs nothing: init containers' requests count as max(init), not in the sum).
RESTORE_MILLICPU = 4000
RESTORE_MEMORY_MIB = 8 * catalog.GIB_MIB


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
        resources=guaranteed({"cpu": cpu(RESTORE_MILLICPU), "memory": mi(RESTORE_MEMORY_MIB)}),
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
    ends (its exit code appears in STATE_DIR) or the container is stopped (SIGTERM). After each
    upload it records the checkpoints S3 holds in STATE_DIR (the launcher removes older ones from
    the node only then) and, with ``workload.checkpoints.keepInBucket``, deletes older ones from
    the bucket.

    From Kubernetes 1.29 it is a native sidecar (an init container with ``restartPolicy:
    Always``): the kubelet stops it only after the trainer's container has exited, so on eviction
    or deletion the final upload sees the checkpoint the trainer was given the grace period to
    finish, and a trainer container that dies without writing its exit code cannot leave the Job
    pod Running forever. Before 1.29 it is a regular container, and a failed final upload fails
    the pod. Its share of the node is taken from the Ray container's (:class:`.run.RayPodShape`)."""
    return core.ContainerArgs(
        name="sync-checkpoints",
        restart_policy="Always" if native_sidecars(settings.cluster.kubernetes_version) else None,
        image=settings.workload.checkpoint_sync_image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/sync.sh"],
        env=[*s3_env(bucket_name, paths), core.EnvVarArgs(name="SYNC_INTERVAL_SECONDS", value=str(settings.workload.checkpoint_sync_interval_seconds))],
        resources=guaranteed({"cpu": cpu(SYNC_MILLICPU), "memory": mi(SYNC_MEMORY_MIB)}),
        volume_mounts=[
            core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True),
            core.VolumeMountArgs(name="run", mount_path=paths.root, read_only=True),
            # writable: it records there what S3 holds (scripts.UPLOAD_RECORD), which the launcher
            # reads before it removes a checkpoint from the node
            core.VolumeMountArgs(name="state", mount_path=STATE_DIR),
        ],
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["ALL"])
        ),
    )
