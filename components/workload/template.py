"""The pod template every Ray pod shares (the manual Job's pods, the RayCluster's head and workers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import pulumi

from ..config import StackSettings
from .pod import (
    RunPaths,
    RayPodShape,
    core,
    env_vars,
    meta,
    ray_resources,
    ray_volumes,
    restore_container,
    scheduling,
    security_context,
    sync_container,
)
from .fabric import fabric_check_container
from .preflight import preflight_container
from .staging import ModelStaging, models_volume, stage_container


@dataclass(frozen=True)
class RayPodInputs:
    """What every Ray pod is built from. ``claim_name``/``bucket_name``/``service_account`` may be
    unresolved Outputs; everything else is plain."""

    settings: StackSettings
    shape: RayPodShape
    paths: RunPaths
    plain_env: Mapping[str, str]
    secret_name: Optional[str]
    secret_keys: Sequence[str]
    service_account: pulumi.Input[str]
    claim_name: Optional[pulumi.Input[str]]
    bucket_name: pulumi.Input[str]
    config_map: str
    preflight: bool
    staging: Optional[ModelStaging] = None
    """The model staged before the trainer (workload.model.source), None: nothing to stage."""


def ray_container(inputs: RayPodInputs, name: str, command: Optional[list[str]], mounts: list[core.VolumeMountArgs]) -> core.ContainerArgs:
    """containers[0] of the pod (KubeRay requires the Ray container first)."""
    return core.ContainerArgs(
        name=name,
        image=inputs.settings.workload.image,
        command=command,
        env=env_vars(inputs.plain_env, inputs.secret_name, inputs.secret_keys),
        resources=ray_resources(inputs.shape),
        volume_mounts=mounts,
        security_context=security_context(),
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
    settings = inputs.settings
    vols = ray_volumes(
        inputs.shape,
        config_map=inputs.config_map,
        claim_name=inputs.claim_name,
        shared_mount_path=settings.storage.shared_filesystem.mount_path,
        paths=inputs.paths,
    )
    staging = inputs.staging
    local_models = models_volume(staging) if staging is not None else None
    if local_models is not None:
        vols.volumes.append(local_models[0])
        vols.mounts.append(local_models[1])
    containers = [ray_container(inputs, container_name, command, vols.mounts)]
    # first: the restart backoff (a restarted gang waits before anything else runs)
    init_containers: list[core.ContainerArgs] = list(first_init_containers)
    if inputs.shape.efa:
        # then: a node without a working EFA fails here, within a minute (fabric.py)
        init_containers.append(
            fabric_check_container(
                settings,
                resources=ray_resources(inputs.shape),
                mounts=vols.mounts,
                env=env_vars(inputs.plain_env, None, []),
            )
        )
    if inputs.preflight:
        init_containers.append(preflight_container(settings, resources=ray_resources(inputs.shape), mounts=vols.mounts))
    if staging is not None:
        # after the preflight: no download onto a node whose GPUs or EFA failed the checks
        shared_mount = next((m for m in vols.mounts if m.name == "shared"), None)
        init_containers.append(
            stage_container(settings, staging, secret_name=inputs.secret_name, secret_keys=inputs.secret_keys, shared_mount=shared_mount)
        )
    if not inputs.paths.shared:
        init_containers.append(restore_container(settings, inputs.bucket_name, inputs.paths))
        sync = sync_container(settings, inputs.bucket_name, inputs.paths)
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
