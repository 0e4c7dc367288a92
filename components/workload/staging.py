"""Input staging: every input of the run's recipe that has a source (the model, a LoRA adapter,
a dataset, simulator assets: ``workload.inputs``, ``workload.model.source`` or the recipe's own)
is copied into the pods before the trainer starts, one init container per input
(``stage-<input>``, so a failure names it), and the trainer's keys are derived from where it lands.

- With the shared filesystem: ``<mountPath>/models/<hf|s3>/...`` on FSx for Lustre, staged once
  for every pod and every later run. All pods start together, so the first to create the lock
  directory (``mkdir`` is atomic on Lustre, as on any POSIX filesystem: no reliance on ``flock``,
  which depends on the client's mount options) downloads; the others wait for the completion
  marker. The holder touches a heartbeat in the lock; a lock whose heartbeat stopped (the holder
  was killed) is taken over, so a dead pod cannot block the next run.
- Without it (one node): a node-local emptyDir sized ``workload.model.sizeGib``.

The image that stages: the training image for Hugging Face (it has Python and ``huggingface_hub``,
which ``transformers`` requires), the AWS CLI image of the checkpoint restore for S3 (credentials
from the training role, IRSA).

Where each input lands, and so the trainer's path to it, is a fact of the run (:class:`.run.Staging`,
:class:`rlinf_eks.trainers.ChosenInput`); this module stages it there.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..config import StackSettings
from ..trainers import ChosenInput
from .checkpoint_sync import RESTORE_MEMORY_MIB, RESTORE_MILLICPU
from .kube import SCRIPTS_DIR, core, cpu, guaranteed, mi
from .run import Staging
from .scripts import body, render

MODELS_VOLUME = "models"
STAGE_SCRIPT = "stage-model.sh"
STAGE_CONTAINER = "stage-model"
MARKER = ".rlinf-eks-staged"
HEARTBEAT_SECONDS = 30
# Well above the heartbeat: a holder busy writing a large file on a loaded filesystem still beats.
LOCK_STALE_SECONDS = 300
POLL_SECONDS = 10
RETRY_SECONDS = 30

STAGE = body("stage-model.sh")


def stage_script() -> str:
    """stage-model.sh: stage once, guarded by the completion marker and the lock."""
    return render(
        {
            "MARKER": MARKER,
            "HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
            "LOCK_STALE_SECONDS": LOCK_STALE_SECONDS,
            "POLL_SECONDS": POLL_SECONDS,
            "RETRY_SECONDS": RETRY_SECONDS,
        },
        STAGE,
    )


def source_env(item: ChosenInput) -> dict[str, str]:
    """What the stage script reads about the input's source."""
    source = item.source
    assert source is not None, "a path in the pod is not staged"
    if source.kind == "hf":
        env = {"MODEL_KIND": "hf", "HF_REPO": source.repo}
        if source.repo_type != "model":
            env["HF_REPO_TYPE"] = source.repo_type
        if source.revision:
            env["HF_REVISION"] = source.revision
        if source.path:
            # only that file or folder of the repository
            env["HF_PATH"] = source.path
        # the Hub's download counters and telemetry are no business of a training cluster
        env["HF_HUB_DISABLE_TELEMETRY"] = "1"
        return env
    uri = f"s3://{source.bucket}/{source.prefix}" if source.prefix else f"s3://{source.bucket}"
    env = {"MODEL_KIND": "s3", "S3_URI": uri}
    if item.spec.file:
        # one object, copied into its folder under its own name
        env["S3_OBJECT"] = "1"
    return env


def models_volume(staging: Staging) -> Optional[tuple[core.VolumeArgs, core.VolumeMountArgs]]:
    """Without the shared filesystem: the node-local emptyDir, sized so the kubelet evicts a pod
    whose model outgrows it rather than letting it fill the node's disk."""
    if staging.shared:
        return None
    return (
        core.VolumeArgs(name=MODELS_VOLUME, empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=f"{staging.size_gib}Gi")),
        core.VolumeMountArgs(name=MODELS_VOLUME, mount_path=staging.root),
    )


def stage_container_name(item: ChosenInput) -> str:
    """``stage-<input>``: the model's is ``stage-model``."""
    return f"{STAGE_CONTAINER.removesuffix('-model')}-{item.name}"


def stage_containers(
    settings: StackSettings,
    staging: Staging,
    *,
    secret_name: Optional[str],
    secret_keys: Sequence[str],
    shared_mount: Optional[core.VolumeMountArgs],
) -> list[core.ContainerArgs]:
    """The init containers that stage the inputs before the trainer's container starts, one per
    input in the recipe's order."""
    return [
        stage_container(settings, staging, item, secret_name=secret_name, secret_keys=secret_keys, shared_mount=shared_mount)
        for item in staging.inputs
    ]


def stage_container(
    settings: StackSettings,
    staging: Staging,
    item: ChosenInput,
    *,
    secret_name: Optional[str],
    secret_keys: Sequence[str],
    shared_mount: Optional[core.VolumeMountArgs],
) -> core.ContainerArgs:
    """The init container that stages one input."""
    source = item.source
    assert source is not None, "a path in the pod is not staged"
    env = [
        core.EnvVarArgs(name="INPUT_NAME", value=item.name),
        core.EnvVarArgs(name="MODEL_SOURCE", value=source.uri),
        core.EnvVarArgs(name="MODEL_DIR", value=item.staged_dir(staging.root)),
        *(core.EnvVarArgs(name=k, value=v) for k, v in source_env(item).items()),
    ]
    if source.kind == "hf" and "HF_TOKEN" in secret_keys:
        # huggingface_hub reads HF_TOKEN; gated and private repositories need it
        env.append(
            core.EnvVarArgs(
                name="HF_TOKEN",
                value_from=core.EnvVarSourceArgs(secret_key_ref=core.SecretKeySelectorArgs(name=secret_name, key="HF_TOKEN")),
            )
        )
    local = models_volume(staging)
    data_mount = local[1] if local else shared_mount
    if data_mount is None:
        raise ValueError("inputs staged on the shared filesystem need the shared volume's mount")
    image = settings.workload.image if source.kind == "hf" else settings.workload.checkpoint_sync_image
    return core.ContainerArgs(
        name=stage_container_name(item),
        image=image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/{STAGE_SCRIPT}"],
        env=env,
        # like the checkpoint restore: before the trainer, so its requests cost nothing extra
        resources=guaranteed({"cpu": cpu(RESTORE_MILLICPU), "memory": mi(RESTORE_MEMORY_MIB)}),
        volume_mounts=[core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True), data_mount],
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["ALL"])
        ),
    )
