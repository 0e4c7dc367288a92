"""The image contract: what the rendered pods need inside ``workload.image``, stated once.

Per run (dialect, launcher, EFA or not, model staging), derived from the same :class:`.run.Run`
the scripts are rendered from:

- the shell and tools the launch scripts call (``TRAINING_IMAGE_TOOLS``, plus ``python`` for the
  trainer's own command line), ``python3``, and Ray at exactly ``workload.rayVersion``;
- the trainer's entry script and Hydra config dir, at the paths the dialect's command line uses
  (read back from that command line, so they cannot disagree);
- on EFA nodes: libfabric with the EFA provider (``fi_info``, in ``/opt/amazon/efa/bin`` where the
  AWS EFA installer puts it) and the aws-ofi-nccl plugin in one of :data:`.fabric.PLUGIN_DIRS`;
- the Python modules the trainer imports first, in its order (the dialect's recipe, its config's
  or, for an upstream config it knows without staging anything, its ``otherConfigs`` entry's: e.g.
  embodied ManiSkill ``torch`` and ``mani_skill``; reasoning ``vllm`` or ``sglang`` per rollout
  backend; verl-ppo ``timm``, ``tensorflow`` and ``libero``), checked before anything else;
- with Hugging Face staging: ``huggingface_hub`` (the staging program imports it);
- no environment the trainer refuses at startup with the run's rollout backend (its recipe's
  ``startup.environment``: RLinf's vLLM rollout and ``PYTORCH_CUDA_ALLOC_CONF`` with expandable
  segments). The pods never set it (the stack refuses it in ``workload.env``); the image's own
  ``ENV`` is what the check finds.

The scripts that run in the project's other images (preflight, checkpoint sync and restore, the
watchdog) rely on those images for their tools: :data:`OTHER_IMAGES` states what each must hold.
``tests/test_image_contract.py`` reads every rendered script of every stack and fails when a
command or path it uses is in neither, so the contract cannot drift from the scripts.
``python -m rlinf_eks image-contract [STACK]`` prints it; the ``image-check`` init container
(:mod:`.image_check`) checks it inside the image before anything else runs.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Optional

from ..trainers import DIALECTS, config_name_of, recipe_of
from .fabric import PLUGIN_DIRS
from .kube import SCRIPTS_DIR, STATE_DIR
from .run import Run

EFA_BIN_DIR = "/opt/amazon/efa/bin"
"""Where the AWS EFA installer puts fi_info (fabric-check.sh and preflight.sh put it on PATH)."""

# Every command the scripts that run in the training image call, beyond bash's builtins and their
# own functions: launch.sh, driver.sh, progress.sh, fabric-check.sh, image-check.sh, the restart
# backoff and (Hugging Face) stage-model.sh. coreutils, grep, gawk/mawk, procps' kill is a builtin.
TRAINING_IMAGE_TOOLS: tuple[str, ...] = (
    "bash", "python3", "ray",
    "awk", "cat", "cut", "date", "dirname", "grep", "mkdir", "mv", "rm", "sleep", "sort", "stat",
    "tail", "timeout", "touch", "wc",
)  # fmt: skip
EFA_TOOLS: tuple[str, ...] = ("fi_info", "ldconfig")
"""On EFA nodes: libfabric's fi_info (the EFA provider's domains) and the linker cache, where
fabric-check.sh looks for aws-ofi-nccl when it is in none of the plugin dirs."""

DOCKERFILES = {name: recipe_of(name).dockerfile for name in DIALECTS}
"""The Dockerfile of this repository that builds the image family of each dialect (its recipe's
``image.dockerfile``; docs/training-images-and-recipes.md)."""

HF_STAGING_MODULES: tuple[str, ...] = ("huggingface_hub",)

SYSTEM_PATHS: tuple[str, ...] = ("/dev/null", "/dev/termination-log", "/proc", "/tmp")
"""Paths every Linux image and pod has (the kubelet mounts every container's terminationMessagePath,
/dev/termination-log by default)."""
DEVICE_PATHS: tuple[str, ...] = ("/dev/infiniband",)
"""Mounted by the device plugins (EFA: /dev/infiniband/uverbs*), not carried by any image."""


@dataclass(frozen=True)
class OtherImage:
    """An image the project names for a container other than the training pods' own."""

    what: str
    setting: str
    """The stack key that names it."""
    scripts: tuple[str, ...]
    """The ConfigMap files that run in it."""
    tools: tuple[str, ...]
    paths: tuple[str, ...] = ()


OTHER_IMAGES: tuple[OtherImage, ...] = (
    OtherImage(
        "preflight (nccl-tests, OpenMPI, OpenSSH, EFA)",
        "preflight.image",
        ("preflight.sh",),
        ("bash", "nvidia-smi", "grep", "wc", "fi_info", "mkdir", "chmod", "ssh-keygen", "sleep", "cp", "ssh", "seq", "mpirun",
         "dirname", "tee", "awk", "cat", "rm"),
        ("/opt/amazon/openmpi/bin", EFA_BIN_DIR, "/usr/sbin/sshd", "/root/.ssh", "/run/sshd", "/opt/nccl-tests/build/all_reduce_perf"),
    ),
    OtherImage(
        "checkpoint restore, sync and S3 model staging (the AWS CLI)",
        "workload.checkpointSyncImage",
        ("restore.sh", "sync.sh", "stage-model.sh"),
        ("bash", "aws", "rm", "sleep", "mkdir", "cat", "mv", "touch", "date", "stat", "dirname", "sort"),
    ),
    OtherImage(
        "the pre-running watchdog (kubectl)",
        "workload.manual.watchdogImage",
        ("watchdog.sh",),
        ("bash", "kubectl", "grep", "awk", "wc", "date", "sleep"),
    ),
)


@dataclass(frozen=True)
class ImageContract:
    """What one run needs inside ``workload.image``."""

    image: str
    dialect: str
    launcher: str
    ray_version: str
    workdir: str
    entry_script: str
    """Absolute path of the trainer's entry script in the image."""
    config_dir: str
    """Absolute path of the Hydra config dir the trainer reads."""
    tools: tuple[str, ...]
    python_modules: tuple[str, ...]
    """Modules the scripts import (ray; huggingface_hub for staging)."""
    efa: bool
    plugin_dirs: tuple[str, ...] = ()
    mounts: tuple[str, ...] = field(default=())
    """Paths the pod mounts (the launch scripts, state, /dev/shm, the run directory, the shared
    filesystem, staged models): the image need not carry them."""
    trainer_modules: tuple[str, ...] = ()
    """What the trainer imports first, in its order (the recipe's ``imports`` of the config, then
    its rollout backend's): checked before everything else."""
    config_name: str = ""
    refused_env: tuple[tuple[str, str, str], ...] = ()
    """(variable, what its value may not contain, the upstream source): the environment the trainer
    refuses at startup with the run's rollout backend (the recipe's ``startup.environment``)."""

    @property
    def dockerfile(self) -> str:
        return DOCKERFILES[self.dialect]

    def paths(self) -> tuple[str, ...]:
        """Paths the image itself must provide."""
        extra = (EFA_BIN_DIR, *self.plugin_dirs) if self.efa else ()
        return (self.workdir, self.entry_script, self.config_dir, *extra)

    def render(self) -> str:
        lines = [
            f"image contract of {self.image}",
            f"  trainer: {self.dialect} ({self.launcher} launcher); built by {self.dockerfile}",
            f"  ray: exactly {self.ray_version} (workload.rayVersion), importable by python3",
            f"  entry script: {self.entry_script}",
            f"  hydra config dir: {self.config_dir}",
            f"  trainer checkout: {self.workdir} (workload.trainer.workdir, first on PYTHONPATH)",
            f"  commands on PATH: {' '.join(self.tools)}",
        ]
        if self.trainer_modules:
            lines.append(f"  trainer imports ({self.config_name}, checked first): {' '.join(self.trainer_modules)}")
        if self.python_modules:
            lines.append(f"  python modules: {' '.join(self.python_modules)}")
        for name, contains, source in self.refused_env:
            lines.append(f"  environment: no {name} containing {contains} (the trainer dies of it at startup: {source})")
        if self.efa:
            lines.append(f"  EFA: libfabric with the efa provider (fi_info -p efa; {EFA_BIN_DIR} is put on PATH)")
            lines.append(f"  EFA: aws-ofi-nccl (libnccl-net*.so) in LD_LIBRARY_PATH, one of {' '.join(self.plugin_dirs)} or the linker cache")
        else:
            lines.append("  EFA: not used (gpuNodes.efa off or no EFA on the instance type)")
        lines.append(f"  mounted by the pod, not in the image: {' '.join(self.mounts)}")
        return "\n".join(lines)


def _entry(workdir: str, argv: list[str]) -> tuple[str, str]:
    """The entry script and config dir the trainer's command line uses: ``python -m a.b.c`` is
    ``<workdir>/a/b/c.py`` (the checkout is first on PYTHONPATH), with its Hydra config beside it
    (``config/``, veRL's ``@hydra.main(config_path="config")``); ``python x.py --config-path D`` is
    ``<workdir>/x.py`` and D."""
    if argv[1] == "-m":
        script = posixpath.join(workdir, *argv[2].split(".")) + ".py"
    else:
        script = posixpath.join(workdir, argv[1])
    config: Optional[str] = None
    if "--config-path" in argv:
        config = argv[argv.index("--config-path") + 1]
    if config is None:
        config = posixpath.join(posixpath.dirname(script), "config")
    return script, posixpath.join(workdir, config)


def contract_for(run: Run) -> ImageContract:
    settings = run.settings
    wl = settings.workload
    script, config = _entry(wl.trainer.workdir, run.launch.argv)
    efa = bool(run.shape.efa)
    hf = run.staging is not None and "hf" in run.staging.kinds
    mounts = [SCRIPTS_DIR, STATE_DIR, "/dev/shm", run.paths.root]
    if run.shared:
        mounts.append(settings.storage.shared_filesystem.mount_path)
    if run.staging is not None:
        mounts.append(run.staging.root)
    return ImageContract(
        image=wl.image,
        dialect=wl.trainer.dialect,
        launcher=wl.launcher,
        ray_version=wl.ray_version,
        workdir=wl.trainer.workdir,
        entry_script=script,
        config_dir=config,
        tools=(*TRAINING_IMAGE_TOOLS, run.launch.argv[0], *(EFA_TOOLS if efa else ())),
        python_modules=("ray", *(HF_STAGING_MODULES if hf else ())),
        efa=efa,
        plugin_dirs=tuple(PLUGIN_DIRS.split()) if efa else (),
        mounts=tuple(dict.fromkeys(m.rstrip("/") for m in mounts)),
        # the config's recipe, else the recipe's otherConfigs (maniskill_ppo_mlp: torch, mani_skill)
        trainer_modules=recipe_of(wl.trainer.dialect).imports_of(config_name_of(wl.trainer), wl.rollout.backend),
        config_name=config_name_of(wl.trainer),
        refused_env=tuple(
            (item.name, item.contains, item.source) for item in recipe_of(wl.trainer.dialect).startup.env_refused(wl.rollout.backend)
        ),
    )
