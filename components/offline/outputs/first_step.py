"""The wait before the first step, on paper: from a GPU node's Ready to the trainer's first step,
as the plan prints it (section "First step:") and plan.json holds it (``firstStep``).

Four parts, each a figure with its source or labelled an estimate:

- image pull: the training image's compressed size over the node's pull throughput. The size is
  unknown offline (build-image prints it once built); the family's typical size is used, labelled;
- input staging: the staged inputs' size over the slower of their source and the target (FSx for
  Lustre's throughput follows from storage.sharedFilesystem; the node-local volume's from the
  node's disk); their sizes are unknown offline, so the figure is per 10 GB;
- the Ray join: every pod's Ray node registered with the head (bounded by workload.joinTimeoutSeconds);
- the trainer's start-up: imports, model load, sharding, the rollout engine.

What cuts the pull is named where this project sets it (gpuNodes.localNvmeRaid0) or where the AMI
already does (AL2023's nodeadm pulls images in parallel by default).
"""

from __future__ import annotations

from typing import Any, Optional

from ...config import StackSettings

SECTION = "firstStep"

# The images' compressed sizes are not known offline (none was built here); these are the figures
# the project works with (issue 35: "15-20 GB compressed"), for every family alike.
TYPICAL_IMAGE_GB = (15.0, 20.0)
IMAGE_SIZE_SOURCE = ("estimate: 15-20 GB compressed, the size the project expects of these images (none was built here; "
                     "build-image prints the real size)")

# containerd fetches layers in parallel but unpacks them one at a time: a 5.4 GB deep-learning
# image took 120 s on a 32-vCPU node with an SSD persistent disk (containerd/containerd#8881), 45 MB/s
PULL_MB_PER_S = 45.0
PULL_SOURCE = "containerd/containerd#8881: a 5.4 GB deep-learning image pulled in 120 s (32 vCPUs, SSD), layers unpacked one at a time"

# EBS user guide, "Amazon EBS volume types": gp3 gives a baseline 125 MiB/s unless throughput is provisioned
GP3_BASELINE_MB_PER_S = 131.0  # 125 MiB/s
AL2023_PARALLEL_PULLS = ("awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go @01375496: nodeadm's default kubelet "
                         "config sets serializeImagePulls: false")  # fmt: skip

RAY_JOIN_SECONDS = (10, 60)
TRAINER_START_SECONDS = (60, 300)
ESTIMATE = "estimate, not measured here"


def fsx_throughput_mb_per_s(settings: StackSettings) -> int:
    """FSx for Lustre PERSISTENT_2 throughput: storage (TiB, as FSx counts 1200 GiB as 1.2 TiB)
    times the per-unit throughput (FSx for Lustre user guide, "Aggregate file system performance")."""
    fs = settings.storage.shared_filesystem
    return round(fs.storage_capacity_gib / 1000 * fs.throughput_mbps_per_tib)


def _volume(settings: StackSettings) -> str:
    """Where containerd keeps the layers without the NVMe RAID0: Bottlerocket's data volume, else the root volume."""
    return "data volume" if settings.gpu_nodes.ami_type.startswith("BOTTLEROCKET") else "root volume"


def _pull(settings: StackSettings, family: Optional[str]) -> dict[str, Any]:
    low, high = TYPICAL_IMAGE_GB
    return {
        "image": settings.workload.image,
        "family": family,
        "sizeGb": {"low": low, "high": high, "source": IMAGE_SIZE_SOURCE},
        "throughputMBps": PULL_MB_PER_S,
        "throughputSource": PULL_SOURCE,
        "seconds": {"low": round(low * 1000 / PULL_MB_PER_S), "high": round(high * 1000 / PULL_MB_PER_S)},
        "formula": "compressed image size (MB) / pull throughput (MB/s)",
        "containerdRoot": "instance-store NVMe RAID0 (gpuNodes.localNvmeRaid0)" if settings.gpu_nodes.nvme_raid0
        else f"the gp3 {_volume(settings)} (baseline {GP3_BASELINE_MB_PER_S:.0f} MB/s for the unpacked layers)",
    }  # fmt: skip


def _staging(settings: StackSettings, stack: str) -> dict[str, Any]:
    from ...workload.run import resolve_run

    staging = resolve_run(settings, stack).staging
    if staging is None:
        return {"inputs": [], "seconds": 0, "note": "nothing to stage: every input is in the image"}
    inputs = [f"{item.name} {item.value}" for item in staging.inputs]
    if staging.shared:
        target, target_mb = f"FSx for Lustre ({fsx_throughput_mb_per_s(settings)} MB/s)", fsx_throughput_mb_per_s(settings)
        note = "staged once for every pod and every later run (a later run waits 0 s)"
    else:
        target_mb = GP3_BASELINE_MB_PER_S if not settings.gpu_nodes.nvme_raid0 else None
        target = "the node-local volume " + (f"(gp3 {_volume(settings)}, {GP3_BASELINE_MB_PER_S:.0f} MB/s baseline)" if target_mb else "(NVMe RAID0)")
        note = "staged on every node, on every run"
    return {
        "inputs": inputs,
        "target": target,
        "targetMBps": target_mb,
        "secondsPer10Gb": round(10_000 / target_mb) if target_mb else None,
        "formula": "input size (MB) / min(source throughput, target MB/s); sizes unknown offline, the source's throughput "
                   "(Hugging Face, S3) not sourced",
        "note": note,
    }  # fmt: skip


def first_step(settings: Optional[StackSettings], stack: str) -> Optional[dict[str, Any]]:
    """The estimate of a stack that trains, None for one that does not (a platform)."""
    if settings is None or not settings.workload.enabled:
        return None
    from ...trainers import recipe_of

    dockerfile = recipe_of(settings.workload.trainer.dialect).dockerfile
    family = dockerfile.split("/")[1] if dockerfile.count("/") == 2 else None
    pull = _pull(settings, family)
    join = {"seconds": {"low": RAY_JOIN_SECONDS[0], "high": RAY_JOIN_SECONDS[1]}, "source": ESTIMATE,
            "boundSeconds": settings.workload.join_timeout_seconds}  # fmt: skip
    start = {"seconds": {"low": TRAINER_START_SECONDS[0], "high": TRAINER_START_SECONDS[1]}, "source": ESTIMATE}
    total = {k: pull["seconds"][k] + join["seconds"][k] + start["seconds"][k] for k in ("low", "high")}
    cuts = []
    if not settings.gpu_nodes.nvme_raid0 and settings.gpu_nodes.ami_type == "AL2023_x86_64_NVIDIA":
        cuts.append("gpuNodes.localNvmeRaid0: true puts containerd's root (the unpacked layers) on the instance-store NVMe RAID0 "
                    "instead of the gp3 root volume")  # fmt: skip
    if settings.gpu_nodes.ami_type == "AL2023_x86_64_NVIDIA":
        cuts.append(f"parallel image pulls: already on ({AL2023_PARALLEL_PULLS}), nothing to set")
    return {
        "imagePull": pull,
        "inputStaging": _staging(settings, stack),
        "rayJoin": join,
        "trainerStart": start,
        "totalSeconds": {**total, "excludes": "input staging (input sizes unknown offline)"},
        "cuts": cuts,
    }


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def render(estimate: Optional[dict[str, Any]]) -> str:
    """The plan's "First step:" section ("" for a stack that trains nothing)."""
    if estimate is None:
        return ""
    pull, staging, join, start, total = (estimate[k] for k in ("imagePull", "inputStaging", "rayJoin", "trainerStart", "totalSeconds"))
    size = pull["sizeGb"]
    lines = [
        "First step (GPU node Ready to the trainer's first step, on paper):",
        f"  image pull     {_minutes(pull['seconds']['low'])}-{_minutes(pull['seconds']['high'])}: {size['low']:.0f}-{size['high']:.0f} GB "
        f"/ {pull['throughputMBps']:.0f} MB/s ({pull['formula']})",
        f"                 size: {size['source']}",
        f"                 throughput: {pull['throughputSource']}; containerd's root: {pull['containerdRoot']}",
    ]
    if staging.get("inputs"):
        per = f"{staging['secondsPer10Gb']} s per 10 GB at most" if staging.get("secondsPer10Gb") else "bound by the source"
        lines.append(f"  input staging  {', '.join(staging['inputs'])} into {staging['target']}: {per} ({staging['note']}; {staging['formula']})")
    else:
        lines.append(f"  input staging  0 s: {staging['note']}")
    lines += [
        f"  Ray join       {join['seconds']['low']}-{join['seconds']['high']} s ({join['source']}; fails after "
        f"workload.joinTimeoutSeconds={join['boundSeconds']})",
        f"  trainer start  {_minutes(start['seconds']['low'])}-{_minutes(start['seconds']['high'])} ({start['source']}: imports, "
        "model load, sharding, the rollout engine)",
        f"  total          {_minutes(total['low'])}-{_minutes(total['high'])}, not counting {total['excludes']}",
    ]
    lines += [f"  cut it: {cut}" for cut in estimate["cuts"]]
    return "\n".join(lines)
