"""The storage budget of a run: what its checkpoints, inputs and image take on the storage that
holds its run directory, against what that storage offers, as pure functions of the settings.

- one save: the model's parameter count, precision and the dialect's checkpoint layout (the
  recipe's ``models`` and ``checkpointLayout``, each fact with its upstream file:line);
- saves per run: the trainer's steps over its save interval, as the rendered command sets them
  (the config's default, the recipe's run-script value, ``workload.trainer.batch``, an override);
- what stays in the run directory: at most max(``workload.checkpoints.keepLocal``, 2) + 1 saves,
  the bound of the launcher's retention (it removes an older complete save only once S3 holds it,
  never the newest complete one; the one being written counts; a restore brings back only the
  newest complete one: docs/what-a-stack-deploys.md), plus the logs;
- where the run directory lives: on FSx (``storage.sharedFilesystem``), else on the node, on the
  instance-store NVMe RAID0 (``gpuNodes.localNvmeRaid0``) or the root volume
  (``gpuNodes.rootVolumeGib``), beside the training image and the staged inputs
  (``workload.model.sizeGib``).

:data:`STORAGE_RULES` refuses, before anything is created, a run whose budget does not fit, naming
the keys that change it; :func:`storage_warnings` names one near the limit; :func:`storage_budget`
is plan.json's ``storageBudget`` and :func:`render` the plan's lines. The node-local run directory's
emptyDir is limited by :func:`run_directory_gib` (workload/run.py): the room its storage leaves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from . import catalog
from .config import StackRule, StackSettings
from .config.errors import problem_line
from .trainers.base import Value, config_name_of, effective_sizes
from .trainers.recipe import ModelFacts, recipe_of


# Estimates, not measurements: what a node's disk holds besides the run.
IMAGE_ON_DISK_GIB = 50
"""The training image unpacked by containerd: 15-20 GB compressed (offline/outputs/first_step.py
TYPICAL_IMAGE_GB, issue 35), about 2.5 times that unpacked; nodeadm's containerd drops the
compressed layers once unpacked (discard_unpacked_layers defaults to true: amazon-eks-ami's nodeadm
docs, "Configuring containerd"): 50 GiB, an estimate (none of the images was built here)."""
SYSTEM_GIB = 10
"""The AMI's own files on the root volume (the OS, the NVIDIA driver, journald): an estimate."""
LOGS_GIB = 5
"""The run's logs and TensorBoard events in the run directory: an estimate."""
WRITABLE_GIB = 10
"""The containers' writable layers (Ray's session logs under /tmp/ray, caches): an estimate."""
NEAR_FRACTION = 0.85
"""A budget above this share of the room its storage offers is warned of."""


@dataclass(frozen=True)
class Save:
    """One checkpoint save: its size and parts (GiB), and where the figures come from."""

    gib: float
    parts: tuple[tuple[str, float], ...]
    source: str


def model_facts(settings: StackSettings) -> Optional[ModelFacts]:
    """The recipe's facts of the model the run trains, or None for a config the recipe does not know."""
    trainer = settings.workload.trainer
    return recipe_of(trainer.dialect).models.get(config_name_of(trainer))


def save_of(settings: StackSettings) -> Optional[Save]:
    """The size of one save (the dialect's layout over the config's model), or None when unknown."""
    trainer = settings.workload.trainer
    model = model_facts(settings)
    if model is None:
        return None
    layout = recipe_of(trainer.dialect).checkpoint_layout
    parts = tuple((part.part, part.count(model) * model.bytes_per_value / catalog.GIB) for part in layout)
    count = f"{model.parameters / 1e9:.2f}B" if model.parameters >= 1e8 else f"{model.parameters / 1e6:.1f}M"
    source = f"recipes/{trainer.dialect}.yaml: {count} parameters x {model.bytes_per_value} bytes"
    return Save(sum(gib for _, gib in parts), parts, source)


@dataclass(frozen=True)
class SavesPerRun:
    """``count`` saves in a run of ``steps`` steps (None: not known offline, ``reason`` says why);
    ``interval``: the save interval as the command sets it, with the key path that sets it."""

    count: Optional[int]
    steps: Optional[int]
    interval: Optional[Value]
    reason: str = ""


def saves_per_run(settings: StackSettings) -> SavesPerRun:
    model = model_facts(settings)
    if model is None or model.steps is None:
        return SavesPerRun(None, None, None, "the config's step count and save interval are not in its recipe")
    facts = model.steps
    defaults = {facts.save_key: facts.save_every, facts.epochs_key: facts.epochs}
    if facts.max_steps_key:
        defaults[facts.max_steps_key] = facts.max_steps
    sizes = effective_sizes(settings, defaults)
    interval = sizes[facts.save_key]
    if interval.value <= 0:
        return SavesPerRun(0, None, interval, "no checkpoint is saved")
    max_steps = sizes[facts.max_steps_key].value if facts.max_steps_key else -1
    steps: Optional[int] = None
    if facts.steps_per_epoch is not None:
        steps = facts.steps_per_epoch * sizes[facts.epochs_key].value
    if max_steps >= 0:
        steps = max_steps if steps is None else min(steps, max_steps)
    if steps is None:
        return SavesPerRun(None, None, interval, f"{facts.epochs_key} x the dataset's batches an epoch")
    return SavesPerRun(steps // interval.value, steps, interval)


# --- where the run directory lives --------------------------------------------------------------


@dataclass(frozen=True)
class Storage:
    """The storage holding the run directory: ``key`` sets its size; ``room_gib`` is what may be
    filled (a node disk's eviction threshold kept free); ``shares``: what else lives on it."""

    name: str
    key: str
    value: Any
    capacity_gib: float
    room_gib: float
    node: bool
    shares: tuple[tuple[str, float], ...]


def storage_of(settings: StackSettings) -> Storage:
    gpu = settings.gpu_nodes
    if settings.shared_filesystem:
        capacity = float(settings.storage.shared_filesystem.storage_capacity_gib)
        return Storage("FSx for Lustre", "storage.sharedFilesystem.storageCapacityGib", int(capacity), capacity, capacity, False, ())
    store = catalog.instance_store(gpu.instance_type)
    if gpu.nvme_raid0 and store is not None:
        capacity = store.total_gib
        return Storage(
            f"NVMe RAID0 ({store.disks} x {store.disk_gb} GB)", "gpuNodes.localNvmeRaid0", True, capacity,
            capacity * (1 - catalog.NODEFS_EVICTION_FRACTION), True, (("image (estimate)", IMAGE_ON_DISK_GIB),),
        )
    capacity = float(gpu.root_volume_gib)
    # Bottlerocket keeps its OS on a volume of its own; rootVolumeGib sizes the data volume that
    # holds the images and the pods' storage (gpu_nodes.block_devices)
    bottlerocket = gpu.ami_type.startswith("BOTTLEROCKET")
    shares = (("image (estimate)", IMAGE_ON_DISK_GIB),) + (() if bottlerocket else (("system (estimate)", SYSTEM_GIB),))
    return Storage(
        "data volume" if bottlerocket else "root volume", "gpuNodes.rootVolumeGib", gpu.root_volume_gib, capacity,
        capacity * (1 - catalog.NODEFS_EVICTION_FRACTION), True, shares,
    )


def _staged_inputs(settings: StackSettings) -> bool:
    from .trainers import chosen_inputs

    return any(item.source is not None for item in chosen_inputs(settings))


def kept_saves(settings: StackSettings, saves: SavesPerRun) -> int:
    """Saves in the run directory at most: max(keepLocal, 2) + 1, the retention's bound (the newest
    complete one, the one before it until S3 holds the newest, and the one being written), no more
    than the run makes."""
    if settings.workload.mode == "eval":
        # the evaluated checkpoint restored, and the copy a dialect that writes into the folder it
        # loads evaluates (recipe evaluation.copyCheckpoint); an evaluation saves none
        return 1 + int(recipe_of(settings.workload.trainer.dialect).evaluation.copy_checkpoint)
    kept = max(settings.workload.checkpoints.keep_local, 2) + 1
    return kept if saves.count is None else min(kept, saves.count)


def run_directory_gib(settings: StackSettings) -> Optional[int]:
    """The node-local run directory's size limit (its emptyDir's sizeLimit), rounded down: the room
    its storage leaves it once the image, the system, the staged inputs and the containers'
    writable layers are counted, and never below the kept saves' estimate; None when the save size
    is unknown. Not the estimate itself: a pod over its emptyDir's sizeLimit is evicted with a 1 s
    grace period (the kubelet's immediateEvictionGracePeriodSeconds), so the sync sidecar's last
    upload never runs and the saves not yet in S3 go with the emptyDir, while saves outpace the
    retention whenever the uploads lag (a save more often than the sync interval) and one save's
    size is an estimate. The limit stops the run directory only where the node's disk would be
    under pressure anyway."""
    save = save_of(settings)
    if save is None:
        return None
    estimate = math.ceil(kept_saves(settings, saves_per_run(settings)) * save.gib + LOGS_GIB)
    storage = storage_of(settings)
    inputs = float(settings.workload.model.size_gib) if _staged_inputs(settings) else 0.0
    others = sum(gib for _, gib in storage.shares) + inputs + (WRITABLE_GIB if storage.node else 0.0)
    return max(estimate, math.floor(storage.room_gib - others))


def storage_budget(settings: StackSettings) -> Optional[dict[str, Any]]:
    """plan.json's ``storageBudget``: None for a stack that runs no training."""
    workload = settings.workload
    if not workload.enabled:
        return None
    save, saves, storage = save_of(settings), saves_per_run(settings), storage_of(settings)
    kept = kept_saves(settings, saves)
    uses: list[tuple[str, float]] = []
    if save is not None:
        uses.append((f"run directory: {kept} saves + logs", kept * save.gib + LOGS_GIB))
    inputs = float(workload.model.size_gib) if _staged_inputs(settings) else 0.0
    if inputs:
        uses.append(("staged inputs (workload.model.sizeGib)", inputs))
    if storage.node:
        uses.append(("containers' writable layers (estimate)", WRITABLE_GIB))
    uses += storage.shares
    need = sum(gib for _, gib in uses)
    fraction = need / storage.room_gib if storage.room_gib > 0 else None
    verdict = "unknown" if save is None else "does not fit" if need > storage.room_gib else "near the limit" if need > storage.room_gib * NEAR_FRACTION else "fits"
    bucket_saves = saves.count
    if settings.workload.checkpoints.keep_in_bucket is not None:
        bucket_saves = settings.workload.checkpoints.keep_in_bucket if saves.count is None else min(saves.count, settings.workload.checkpoints.keep_in_bucket)
    budget: dict[str, Any] = {
        "save": {"gib": round(save.gib, 3), "parts": [{"part": p, "gib": round(g, 3)} for p, g in save.parts], "source": save.source}
        if save is not None else {"gib": None, "reason": f"no model facts for {config_name_of(workload.trainer)!r} in recipes/{workload.trainer.dialect}.yaml"},
        "savesPerRun": {
            "count": saves.count, "steps": saves.steps, "reason": saves.reason or None,
            "interval": {"value": saves.interval.value, "hydraKey": model_facts(settings).steps.save_key, "setBy": saves.interval.path,
                         "note": saves.interval.note.strip(" ()") or None} if saves.interval else None,
        },
        "keepLocal": workload.checkpoints.keep_local,
        "keptSaves": kept,
        "keptBasis": "workload.mode eval: the evaluated checkpoint (and the copy it evaluates)" if workload.mode == "eval"
        else f"keepLocal {workload.checkpoints.keep_local}: max(keepLocal, 2) + 1",
        "storage": {"name": storage.name, "key": storage.key, "capacityGiB": round(storage.capacity_gib, 1), "roomGiB": round(storage.room_gib, 1)},
        "uses": [{"item": item, "gib": round(gib, 1)} for item, gib in uses],
        "needGiB": round(need, 1),
        "fraction": round(fraction, 3) if fraction is not None else None,
        "verdict": verdict,
        "bucket": {
            "keepInBucket": workload.checkpoints.keep_in_bucket, "saves": bucket_saves,
            "gib": round(bucket_saves * save.gib, 3) if bucket_saves is not None and save is not None else None,
        },
    }
    if storage.node:
        allocatable = catalog.ephemeral_allocatable_gib(storage.capacity_gib)
        budget["podEphemeralStorage"] = {"emptyDirGiB": round(need - sum(g for _, g in storage.shares), 1), "allocatableGiB": round(allocatable, 1)}
    return budget


# --- the rule and the warning -------------------------------------------------------------------


def _at_least(settings: StackSettings, budget: Mapping[str, Any], share: float = 1.0) -> int:
    """The root volume (or FSx capacity) whose room the budget fills to ``share`` at most."""
    storage = storage_of(settings)
    if storage.node:
        return math.ceil(budget["needGiB"] / share / (1 - catalog.NODEFS_EVICTION_FRACTION))
    size = math.ceil(budget["needGiB"] / share)
    return 1200 if size <= 1200 else math.ceil(size / 2400) * 2400


def _fixes(settings: StackSettings, budget: Mapping[str, Any], share: float = 1.0) -> str:
    storage = storage_of(settings)
    gpu = settings.gpu_nodes
    keep = f"lower workload.checkpoints.keepLocal={settings.workload.checkpoints.keep_local}" if settings.workload.checkpoints.keep_local > 2 else ""
    fixes: list[str] = []
    if storage.key == "storage.sharedFilesystem.storageCapacityGib":
        fixes.append(f"raise storage.sharedFilesystem.storageCapacityGib to {_at_least(settings, budget, share)}")
    elif storage.key == "gpuNodes.rootVolumeGib":
        fixes.append(f"raise gpuNodes.rootVolumeGib to at least {_at_least(settings, budget, share)}")
        store = catalog.instance_store(gpu.instance_type)
        if store is not None and gpu.ami_type == "AL2023_x86_64_NVIDIA":
            fixes.append(f"set gpuNodes.localNvmeRaid0: true ({gpu.instance_type} has {store.disks} x {store.disk_gb} GB of NVMe)")
        fixes.append("use the shared filesystem (storage.sharedFilesystem.enabled: true)")
    else:
        fixes.append("use the shared filesystem (storage.sharedFilesystem.enabled: true)")
    if keep:
        fixes.append(keep)
    saves = saves_per_run(settings)
    if saves.interval is not None and saves.count is not None and saves.count > 1 and saves.count <= max(settings.workload.checkpoints.keep_local, 2) + 1:
        fixes.append(f"save less often ({saves.interval.path}={saves.interval.value})")
    return ", ".join(fixes[:-1]) + (" or " if len(fixes) > 1 else "") + fixes[-1]


def _summary(budget: Mapping[str, Any]) -> str:
    return " + ".join(f"{use['item']} {use['gib']:g} GiB" for use in budget["uses"])


def storage_problems(settings: StackSettings, stack: Optional[str] = None) -> list[str]:
    """A stack rule: the run's budget does not fit the storage of its run directory."""
    budget = storage_budget(settings)
    if budget is None or budget["verdict"] != "does not fit":
        return []
    storage = storage_of(settings)
    return [
        problem_line(
            storage.key, storage.value,
            f"the run needs {budget['needGiB']:g} GiB of the {storage.name}, which offers {budget['storage']['roomGiB']:g} GiB "
            f"(one save of {budget['save']['gib']:.3g} GiB, {budget['keptSaves']} kept at most with workload.checkpoints.keepLocal="
            f"{settings.workload.checkpoints.keep_local}: {_summary(budget)}): {_fixes(settings, budget)}",
        )
    ]


def storage_warnings(settings: StackSettings) -> list[str]:
    """The budget near its storage's limit, or a save size the recipe does not know."""
    budget = storage_budget(settings)
    if budget is None:
        return []
    if budget["verdict"] == "near the limit":
        storage = storage_of(settings)
        return [
            f"storage budget: the run needs {budget['needGiB']:g} of the {budget['storage']['roomGiB']:g} GiB its {storage.name} offers "
            f"({budget['fraction'] * 100:.0f}%), so a save larger than estimated fills it; for room, {_fixes(settings, budget, NEAR_FRACTION)}"
        ]
    return []


STORAGE_RULES: tuple[StackRule, ...] = (StackRule(("gpuNodes", "storage", "workload"), storage_problems),)
"""The storage budget's rule (rlinf_eks.loading runs it after config's GPU node rules)."""


# --- text ---------------------------------------------------------------------------------------


def _interval(interval: Mapping[str, Any]) -> str:
    by = interval["note"] if interval["setBy"].startswith("workload.trainer.batch") and interval["note"] else interval["setBy"]
    return f"{interval['hydraKey']}={interval['value']}, {by}"


def render(budget: Optional[Mapping[str, Any]]) -> str:
    """The budget as a few lines for the terminal ("" without one)."""
    if not budget:
        return ""
    save, saves, storage = budget["save"], budget["savesPerRun"], budget["storage"]
    if saves["count"] is None:
        per_run = f"not known offline ({saves['reason']})"
    elif saves["count"] == 0:
        per_run = f"none ({_interval(saves['interval'])})"
    else:
        per_run = f"{saves['count']} in {saves['steps']} steps ({_interval(saves['interval'])})"
    size = f"{save['gib']:.3g} GiB ({save['source']})" if save["gib"] is not None else f"unknown: {save['reason']}"
    lines = [
        f"Storage budget ({budget['verdict']}):",
        f"  one save     {size}",
        f"  saves        {per_run}; in the run directory {budget['keptSaves']} at most ({budget['keptBasis']})",
        f"  on {storage['name']}: {budget['needGiB']:g} of {storage['roomGiB']:g} GiB ({_summary(budget)})",
    ]
    bucket = budget["bucket"]
    kept = "every save" if bucket["keepInBucket"] is None else f"the newest {bucket['keepInBucket']} (keepInBucket)"
    lines.append(f"  bucket       {kept}" + (f": {bucket['gib']:.3g} GiB at most" if bucket["gib"] is not None else ""))
    if storage["key"] == "storage.sharedFilesystem.storageCapacityGib":
        lines.append("  note: other runs on the same filesystem (runName, experiments of a platform) are not counted")
    return "\n".join(lines)
