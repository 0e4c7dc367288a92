"""The pod template every Ray pod shares (the manual Job's pods, the RayCluster's head and workers):
one pod fills one GPU node, with the run's shape (:class:`.run.RayPodShape`) and volumes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import pulumi

from ..scheduling import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE
from .checkpoint_sync import restore_container, sync_container
from .env import env_vars
from .config_check import config_check_container
from .fabric import fabric_check_container
from .image_check import image_check_container
from .kube import PROGRESS_METRICS_PORT, PROGRESS_METRICS_PORT_NAME, RAY_METRICS_PORT, RAY_METRICS_PORT_NAME, SCRIPTS_DIR, STATE_DIR, core, cpu, guaranteed, meta, mi, scheduling, security_context
from .preflight import preflight_container
from .render_check import render_check_container, renderer_for
from .run import RayPodShape, Run, RunPaths
from .staging import models_volume, stage_containers


@dataclass(frozen=True)
class RayPodInputs:
    """What every Ray pod is built from: the run, and what the deployment hands in.
    ``claim_name``/``bucket_name``/``service_account`` may be unresolved Outputs; everything else
    is plain."""

    run: Run
    plain_env: Mapping[str, str]
    secret_name: Optional[str]
    secret_keys: Sequence[str]
    service_account: pulumi.Input[str]
    claim_name: Optional[pulumi.Input[str]]
    """The shared filesystem's claim: given exactly when the run has the shared filesystem."""
    bucket_name: pulumi.Input[str]
    config_map: str


def accelerator_quantities(shape: RayPodShape) -> dict[str, str]:
    """GPUs, EFA devices and 2 MiB hugepages (libfabric's buffers) of one node."""
    quantities = {GPU_RESOURCE: str(shape.pod.gpus)}
    if shape.efa:
        quantities[EFA_RESOURCE] = str(shape.efa)
    if shape.pod.hugepages_2mi_mib:
        quantities[HUGEPAGES_2MI_RESOURCE] = mi(shape.pod.hugepages_2mi_mib)
    return quantities


def ray_resources(shape: RayPodShape) -> core.ResourceRequirementsArgs:
    """KubeRay reads num-gpus and num-cpus from these limits; EFA it does not map, so it is here."""
    return guaranteed({"cpu": cpu(shape.ray_millicpu), "memory": mi(shape.ray_memory_mib), **accelerator_quantities(shape)})


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
    run_dir_gib: Optional[int] = None,
) -> Volumes:
    volumes = [
        # Ray's object store; a memory-backed emptyDir is charged to the pod's memory limit
        core.VolumeArgs(name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=mi(shape.pod.shm_mib))),
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
        # limited to the room the node's disk leaves it (storage_budget.run_directory_gib), not to
        # the kept saves' estimate: an emptyDir over its limit is evicted with a 1 s grace period,
        # before the sync sidecar's last upload, while saves outpace a lagging upload; no
        # ephemeral-storage request, which Kueue would refuse to admit as a resource its
        # ClusterQueue does not cover (kubernetes-sigs/kueue#4848): the plan's budget checks the fit
        limit = f"{run_dir_gib}Gi" if run_dir_gib else None
        volumes.append(core.VolumeArgs(name="run", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=limit)))
        mounts.append(core.VolumeMountArgs(name="run", mount_path=paths.root))
    return Volumes(volumes, mounts)


def ray_container(inputs: RayPodInputs, name: str, command: Optional[list[str]], mounts: list[core.VolumeMountArgs]) -> core.ContainerArgs:
    """containers[0] of the pod (KubeRay requires the Ray container first)."""
    return core.ContainerArgs(
        name=name,
        image=inputs.run.settings.workload.image,
        command=command,
        env=env_vars(inputs.plain_env, inputs.secret_name, inputs.secret_keys),
        resources=ray_resources(inputs.run.shape),
        volume_mounts=mounts,
        security_context=security_context(),
        # Ray's metrics (the PodMonitor ray scrapes it by this name)
        ports=[
            core.ContainerPortArgs(name=RAY_METRICS_PORT_NAME, container_port=RAY_METRICS_PORT, protocol="TCP"),
            core.ContainerPortArgs(name=PROGRESS_METRICS_PORT_NAME, container_port=PROGRESS_METRICS_PORT, protocol="TCP"),
        ],
    )


def ray_pod_template(
    inputs: RayPodInputs,
    *,
    container_name: str,
    command: Optional[list[str]],
    labels: Mapping[str, str],
    annotations: Optional[Mapping[str, str]] = None,
    restart_policy: Optional[str] = None,
    subdomain: Optional[str] = None,
    first_init_containers: Sequence[core.ContainerArgs] = (),
) -> core.PodTemplateSpecArgs:
    run = inputs.run
    settings = run.settings
    vols = ray_volumes(
        run.shape,
        config_map=inputs.config_map,
        claim_name=inputs.claim_name,
        shared_mount_path=settings.storage.shared_filesystem.mount_path,
        paths=run.paths,
        run_dir_gib=run.run_dir_gib,
    )
    staging = run.staging
    local_models = models_volume(staging) if staging is not None else None
    if local_models is not None:
        vols.volumes.append(local_models[0])
        vols.mounts.append(local_models[1])
    containers = [ray_container(inputs, container_name, command, vols.mounts)]
    # first: the restart backoff (a restarted gang waits before anything else runs)
    init_containers: list[core.ContainerArgs] = list(first_init_containers)
    # then: an image that lacks what the scripts and the trainer need fails here, in seconds
    init_containers.append(image_check_container(settings.workload.image, env=env_vars(inputs.plain_env, None, [])))
    # then: a config the trainer would refuse fails here, in seconds, before staging and Ray
    init_containers.append(config_check_container(settings.workload.image, env=env_vars(inputs.plain_env, None, [])))
    if run.shape.efa:
        # then: a node without a working EFA fails here, within a minute (fabric.py)
        init_containers.append(
            fabric_check_container(
                settings,
                resources=ray_resources(run.shape),
                mounts=vols.mounts,
                env=env_vars(inputs.plain_env, None, []),
            )
        )
    if renderer_for(settings) is not None:
        # then: a node or image whose simulator cannot render one frame fails here (render_check.py)
        init_containers.append(
            render_check_container(settings.workload.image, shape=run.shape, env=env_vars(inputs.plain_env, None, []))
        )
    if settings.preflight.enabled:
        init_containers.append(preflight_container(settings, resources=ray_resources(run.shape), mounts=vols.mounts))
    if staging is not None:
        # after the preflight: no download onto a node whose GPUs or EFA failed the checks
        shared_mount = next((m for m in vols.mounts if m.name == "shared"), None)
        init_containers += stage_containers(
            settings, staging, secret_name=inputs.secret_name, secret_keys=inputs.secret_keys, shared_mount=shared_mount
        )
    if not run.shared:
        init_containers.append(restore_container(settings, inputs.bucket_name, run.paths))
        sync = sync_container(settings, inputs.bucket_name, run.paths)
        # a native sidecar starts after the restore (init containers run in order)
        (init_containers if sync.restart_policy == "Always" else containers).append(sync)
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(labels=dict(labels), annotations=dict(annotations) if annotations else None),
        spec=core.PodSpecArgs(
            service_account_name=inputs.service_account,
            restart_policy=restart_policy,
            subdomain=subdomain,
            # the trainer's env stays what we set: no *_SERVICE_HOST variables per Service
            enable_service_links=False,
            termination_grace_period_seconds=settings.workload.termination_grace_period_seconds,
            init_containers=init_containers or None,
            containers=containers,
            volumes=vols.volumes,
            **scheduling(),
        ),
    )
