"""The render check: an init container of every Ray pod of a run whose simulator renders (the
dialect's recipe: a config's ``renders``, its ``renderers``), in the training image, on the pod's
GPUs, after the image, config and fabric checks and before the preflight, the staging and Ray.
It renders one frame with the renderer the trainer will use and the pod's own environment (the
trainer's MUJOCO_GL, the image's Vulkan ICD, ``workload.env``): ManiSkill through SAPIEN's Vulkan
renderer, LIBERO through MuJoCo with MUJOCO_GL. Where the run saves videos (the recipe's
``videoWriter``: every embodied config's evaluation does) it writes the frame as the trainer writes
them, with imageio to an MP4. A node or image that cannot render fails the pod within minutes with
``exit_codes.RENDER_FAILED`` and one line naming the simulator, the backend, why and the remedy
(also the container's termination message), instead of the env workers' first reset after the
cluster formed and the model loaded.

Why a frame in the run's pod: the NVIDIA container toolkit mounts the driver's EGL and Vulkan
libraries only for the graphics capability, and whether EGL works under the node's driver is a
fact of the node and the image together (aws-samples/sample-rlinf-on-eks had to render LIBERO with
osmesa where RLinf's scripts use egl); verify's smoke test (L3) checks an EGL context on fresh
nodes, this checks the frame on the node the run got. The restart policy counts a failure as any
other pod failure (a node fault is the likely cause; the JobSet's restart can land elsewhere).

The program is ``programs/render_probe.py``; the script ``sh/render-check.sh``."""

from __future__ import annotations

from typing import Optional

from ..config import StackSettings
from ..scheduling import GPU_RESOURCE
from ..trainers import config_name_of, recipe_of
from ..trainers.recipe import Renderer
from . import exit_codes, scripts
from .kube import SCRIPTS_DIR, core, cpu, guaranteed, mi
from .run import RayPodShape

RENDER_CHECK_SCRIPT = "render-check.sh"
CONTAINER = "render-check"
TERMINATION_LOG = "/dev/termination-log"
TIMEOUT_SECONDS = 300
"""Importing ManiSkill imports torch and SAPIEN, and its first environment compiles SAPIEN's
shaders: about a minute; MuJoCo's frame takes seconds."""

VIDEO_REMEDY = "install imageio-ffmpeg into the trainer's venv in the image ({dockerfile})"
"""What a frame that rendered but could not be written as a video asks of the image."""
RENDER_MILLICPU = 4000
RENDER_MEMORY_MIB = 16 * 1024
"""ManiSkill's import (torch, SAPIEN) and one environment: a few GiB; never more than the Ray
container has, so the init container costs the pod nothing (its effective request is the larger of
the two)."""

RENDER_CHECK = scripts.body(RENDER_CHECK_SCRIPT)


def render_resources(shape: RayPodShape) -> core.ResourceRequirementsArgs:
    """One GPU (the frame renders on one; the kubelet hands it on to the Ray container), CPU and
    memory capped by the Ray container's, requests equal to limits (the pod stays Guaranteed)."""
    return guaranteed(
        {
            "cpu": cpu(min(RENDER_MILLICPU, shape.ray_millicpu)),
            "memory": mi(min(RENDER_MEMORY_MIB, shape.ray_memory_mib)),
            GPU_RESOURCE: "1",
        }
    )


def renderer_for(settings: StackSettings) -> Optional[Renderer]:
    """The renderer of the stack's config (None: it renders nothing, or the recipe does not know it)."""
    trainer = settings.workload.trainer
    return recipe_of(trainer.dialect).renderer_of(config_name_of(trainer))


def saves_videos(settings: StackSettings) -> bool:
    """The run writes videos with imageio (the recipe's ``videoWriter``)."""
    return bool(recipe_of(settings.workload.trainer.dialect).video_writer)


def render_check_script(
    settings: StackSettings, *, termination_log: str = TERMINATION_LOG, timeout_seconds: int = TIMEOUT_SECONDS
) -> str:
    """``termination_log``: where the failure line goes besides stderr (tests: a file)."""
    renderer = renderer_for(settings)
    if renderer is None:
        raise ValueError(f"{config_name_of(settings.workload.trainer)} renders nothing: no render check")
    return scripts.render(
        {
            "SIMULATOR": renderer.name,
            "BACKEND": renderer.backend,
            "PROBE": renderer.probe,
            "CONFIG_NAME": config_name_of(settings.workload.trainer),
            "REMEDY": renderer.remedy,
            "VIDEO_REMEDY": VIDEO_REMEDY.format(dockerfile=recipe_of(settings.workload.trainer.dialect).dockerfile),
            "VIDEO": int(saves_videos(settings)),
            "TIMEOUT_SECONDS": timeout_seconds,
            "TERMINATION_LOG": termination_log,
            "EXIT_RENDER_FAILED": exit_codes.RENDER_FAILED,
        },
        RENDER_CHECK,
    )


def render_check_container(image: str, *, shape: RayPodShape, env: list[core.EnvVarArgs]) -> core.ContainerArgs:
    """The training image and the Ray container's environment, one GPU (:func:`render_resources`:
    EGL and Vulkan render on it), the launch scripts only; not privileged, no capabilities. Its
    termination message is the failure line."""
    return core.ContainerArgs(
        name=CONTAINER,
        image=image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/{RENDER_CHECK_SCRIPT}"],
        env=env,
        resources=render_resources(shape),
        volume_mounts=[core.VolumeMountArgs(name="launch", mount_path=SCRIPTS_DIR, read_only=True)],
        termination_message_policy="FallbackToLogsOnError",
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["ALL"])
        ),
    )
