"""The training run of a stack, resolved once (:func:`resolve_run`): where its files live, the
shape of its pods, where its inputs (model, adapters, datasets, assets) are staged, how its pods are named, and the trainer's launch.

``RlinfTraining`` builds its resources from the :class:`Run`, the launch scripts are rendered from
it, and the plan's Faults section (``offline/outputs/resilience.py``) describes the same :class:`Run`:
nothing here is derived twice. Whether the run has the shared filesystem is the settings' call
(``StackSettings.shared_filesystem``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

from .. import catalog
from ..config import StackSettings
from ..storage_budget import run_directory_gib
from ..trainers import ChosenInput, TrainerLaunch, chosen_inputs, config_name_of, launch_for
from .manual import PodNames, pod_names

LOCAL_RUN_DIR = "/rlinf-run"
"""Without the shared filesystem: the node-local run directory, restored from and synced to S3."""
MODEL_ROOT_LOCAL = "/rlinf-models"
"""Without the shared filesystem: where the node-local models volume is mounted."""

# The checkpoint-sync container's share of the node (it runs the AWS CLI only).
SYNC_MILLICPU = 500
SYNC_MEMORY_MIB = 1024
# Ray's object store lives in /dev/shm; leave headroom for NCCL's own shared-memory segments.
OBJECT_STORE_SHARE_OF_SHM = 0.8


def efa_enabled(settings: StackSettings) -> bool:
    """The run uses EFA: ``gpuNodes.efa`` on an EFA-capable instance type (validated settings
    refuse ``efa`` on any other). The pods' EFA devices, the fabric check and NCCL's pinning to
    aws-ofi-nccl all follow from this one answer."""
    return settings.gpu_nodes.efa and settings.gpu_nodes.instance.efa_capable


@dataclass(frozen=True)
class RunPaths:
    """Where the run keeps its state. ``root`` holds logs and checkpoints; ``shared``: on the shared
    filesystem (FSx, exported to s3://<bucket>/ by its data repository association), else on the
    node and synced to ``s3://<bucket>/<s3_prefix>/``."""

    root: str
    shared: bool
    s3_prefix: str

    @property
    def location(self) -> str:
        """Where the run's checkpoints are kept: the run directory on FSx, else the S3 prefix the
        node-local directory is synced to (the same /rlinf-run on every run)."""
        return self.root if self.shared else f"s3://<checkpoint bucket>/{self.s3_prefix}/"

    @property
    def log_dir(self) -> str:
        return f"{self.root}/logs"

    @property
    def eval_dir(self) -> str:
        """workload.mode eval: where the evaluations and their launcher's own state go."""
        return f"{self.root}/eval"

    @property
    def checkpoint_dir(self) -> str:
        return f"{self.root}/checkpoints"


def run_paths(settings: StackSettings, stack: str, shared: bool) -> RunPaths:
    """``<mountPath>/<stack>`` (or ``<mountPath>/<stack>-runs/<runName>``) on the shared filesystem
    (the association maps it to the same S3 prefix), else ``/rlinf-run`` synced to that prefix."""
    name = settings.workload.run_name
    # beside the default run, never inside it: the default run's restore syncs its whole prefix
    prefix = f"{stack}-runs/{name}" if name else stack
    if shared:
        mount = settings.storage.shared_filesystem.mount_path.rstrip("/")
        return RunPaths(f"{mount}/{prefix}", True, prefix)
    return RunPaths(LOCAL_RUN_DIR, False, prefix)


def run_identity(settings: StackSettings, inputs: Optional[tuple[ChosenInput, ...]] = None) -> str:
    """What a run's checkpoints belong to: the dialect, the trainer config and the model (its
    source or path; ``inputs``: the run's, when already chosen). Recorded in the run directory; a
    run of another identity never resumes from them (launch.sh, driver.sh) and the diff says so."""
    trainer = settings.workload.trainer
    model = next((item.value for item in inputs or chosen_inputs(settings) if item.name == "model"), None)
    return f"{trainer.dialect} {config_name_of(trainer)} model={model or 'the config default'}"


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
    shape = catalog.pod_shape_for(
        instance, gpu.hugepages_gib * catalog.GIB_MIB, settings.workload.shm_fraction, settings.observability_backend
    )
    efa = catalog.efa_device_count(instance) if efa_enabled(settings) else 0
    return RayPodShape(shape, efa, sync)


@dataclass(frozen=True)
class Staging:
    """The inputs staged below ``root`` (on FSx when ``shared``, else in a node-local emptyDir of
    ``size_gib``), each into a folder of its own; how they get there: :mod:`.staging`."""

    root: str
    shared: bool
    size_gib: int
    inputs: tuple[ChosenInput, ...]
    """The inputs with a source (hf:// or s3://), in the recipe's order."""

    @property
    def kinds(self) -> frozenset[str]:
        """hf and/or s3: which images stage (the training image, the AWS CLI image)."""
        return frozenset(item.source.kind for item in self.inputs if item.source is not None)


def inputs_root(settings: StackSettings, shared: bool) -> str:
    """Where inputs are staged: ``<mountPath>/models`` on the shared filesystem, else the
    node-local models volume."""
    return f"{settings.storage.shared_filesystem.mount_path.rstrip('/')}/models" if shared else MODEL_ROOT_LOCAL


def input_staging(settings: StackSettings, shared: bool, inputs: tuple[ChosenInput, ...]) -> Optional[Staging]:
    """The staging of every input of ``inputs`` with a source, or None when nothing is staged."""
    staged = tuple(item for item in inputs if item.source is not None)
    if not staged:
        return None
    return Staging(inputs_root(settings, shared), shared, settings.workload.model.size_gib, staged)


@dataclass(frozen=True)
class Run:
    """Everything about the run that follows from the settings and the stack's name."""

    settings: StackSettings
    paths: RunPaths
    shape: RayPodShape
    staging: Optional[Staging]
    """The inputs staged before the trainer (the recipe's, ``workload.inputs``, ``workload.model.source``), None: nothing to stage."""
    names: PodNames
    """The manual launcher's Job, pod host names and Service (the head is pod 0)."""
    launch: TrainerLaunch
    inputs: tuple[ChosenInput, ...] = ()
    """Every input of the run (its recipe's), staged or already in the pod."""
    run_dir_gib: Optional[int] = None
    """Without the shared filesystem: the node-local run directory's size limit, the room its
    storage leaves it (rlinf_eks.storage_budget.run_directory_gib); None: no limit (on FSx, or a
    save size the recipe does not know)."""

    @functools.cached_property
    def identity(self) -> str:
        """What its checkpoints belong to (:func:`run_identity`)."""
        return run_identity(self.settings, self.inputs)

    @property
    def shared(self) -> bool:
        """The run directory (and the staged model) are on the shared filesystem."""
        return self.paths.shared

    @property
    def nnodes(self) -> int:
        return self.settings.gpu_nodes.node_count

    @property
    def head_host(self) -> str:
        return self.names.head_host()


def resolve_run(settings: StackSettings, stack: str, *, wandb: bool = False) -> Run:
    """The run of ``settings`` on stack ``stack``; ``wandb``: the trainer also logs to W&B (the
    stack has a W&B API key). Raises ConfigError when the trainer's world-size rules fail."""
    shared = settings.shared_filesystem
    paths = run_paths(settings, stack, shared)
    shape = pod_shape(settings, sync=not shared)
    inputs = chosen_inputs(settings)
    staging = input_staging(settings, shared, inputs)
    launch = launch_for(
        settings,
        nnodes=settings.gpu_nodes.node_count,
        gpus_per_node=shape.pod.gpus,
        log_dir=paths.log_dir,
        checkpoint_dir=paths.checkpoint_dir,
        # every input's path derived from where it is staged, never typed twice
        inputs_root=inputs_root(settings, shared),
        wandb=wandb,
        run_dir=paths.root,
        identity=run_identity(settings, inputs),
    )
    names = pod_names(settings.workload.uses_jobset, evaluation=settings.workload.mode == "eval")
    return Run(settings, paths, shape, staging, names, launch, inputs, None if shared else run_directory_gib(settings))
