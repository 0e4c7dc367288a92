"""What the plan says happens on each fault: one function per topic, printed after the efficiency
report. Printed only, never in plan.json: the time left before a Capacity Block ends depends on
the day the plan runs, and plan.json is byte-for-byte deterministic.

Topics of issue 10, part B (fail fast): the fabric, hangs, the Capacity Block's end, node health.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from ..config import CapacityBlockSettings, StackSettings
from ..workload import exit_codes, fabric, progress
from ..workload.pod import pod_shape


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(abs(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    text = (f"{days}d " if days else "") + f"{hours}h {rest // 60:02d}m"
    return text if seconds >= 0 else f"-{text}"


def fabric_lines(settings: StackSettings) -> list[str]:
    if not settings.workload.enabled:
        return []
    if pod_shape(settings, sync=False).efa == 0:
        return ["fabric: no EFA on these nodes: NCCL uses TCP sockets (nothing pinned, no fabric check)"]
    return [
        f"fabric: NCCL_NET={fabric.NCCL_NET!r} (no fallback to sockets); a fabric-check init container fails a pod whose "
        f"EFA devices, libfabric efa domains or NCCL net plugin are missing within a minute (fi_info bounded to "
        f"{fabric.FI_INFO_TIMEOUT_SECONDS}s; exit {exit_codes.FABRIC_FAILED})",
        f"fabric: torch tears down a process on an NCCL error or timeout (TORCH_NCCL_ASYNC_ERROR_HANDLING=1); its "
        f"watchdog thread stuck {settings.workload.nccl_heartbeat_timeout_seconds}s aborts it",
    ]


def hang_lines(settings: StackSettings) -> list[str]:
    if not settings.workload.enabled:
        return []
    timeout = settings.workload.progress_timeout_seconds
    if timeout is None:
        return ["hang: progress watchdog off (workload.progressTimeoutSeconds: null): a silent hang holds the GPUs"]
    return [
        f"hang: no trainer output and no new global_step_N for {_duration(timeout)} stops the trainer "
        f"(SIGINT, SIGTERM, SIGKILL within {settings.workload.termination_grace_period_seconds}s); the pod exits "
        f"{exit_codes.PROGRESS_TIMEOUT} and its GPUs are released"
    ]


def reservation_lines(settings: StackSettings, now: Optional[datetime] = None) -> list[str]:
    gpu = settings.gpu_nodes
    if gpu.capacity_type != "CAPACITY_BLOCK":
        return []
    block = gpu.capacity_block
    if block is None or block.end_time is None:
        return ["reservation: Capacity Block end unknown (gpuNodes.capacityBlock.endTime unset): the run is not stopped before EC2 terminates the nodes"]
    now = now or datetime.now(timezone.utc)
    end = block.end_time.astimezone(timezone.utc)
    stop = progress.stop_at(settings)
    assert stop is not None
    left = (end - now).total_seconds()
    lines = [
        f"reservation: Capacity Block ends {CapacityBlockSettings.api_time(end)} "
        f"({_duration(left)} left)" if left > 0 else f"reservation: Capacity Block ended {CapacityBlockSettings.api_time(end)}",
        f"reservation: EC2 warns at {CapacityBlockSettings.api_time(end - progress.CAPACITY_BLOCK_WARNING)} and terminates the "
        f"instances 30 min before the end; the trainer is stopped from {CapacityBlockSettings.api_time(stop)} "
        f"(checkpoint writes settle first) and the pod exits {exit_codes.RESERVATION_ENDING}",
    ]
    if settings.workload.enabled and (stop - now).total_seconds() <= 0 < left:
        lines.append("reservation: the stop time has passed: a run started now is stopped at once")
    return lines


def node_health_lines(settings: StackSettings) -> list[str]:
    if not settings.gpu_nodes.auto_repair:
        return ["node health: auto repair off (gpuNodes.autoRepair: false): a node with a failed GPU or EFA stays in the group"]
    agent = (
        "the eks-node-monitoring-agent add-on"
        if not settings.cluster.existing
        else "the eks-node-monitoring-agent add-on (install it on the existing cluster: not managed here)"
    )
    return [
        f"node health: {agent} marks a node with GPU XID errors or lost GPUs/network interfaces unhealthy; node auto "
        "repair replaces it; the training pod on it fails (exit status or eviction), and the Job's restart policy decides "
        "whether the run restarts on the replacement"
    ]


def render(settings: StackSettings, now: Optional[datetime] = None) -> str:
    lines = [*fabric_lines(settings), *hang_lines(settings), *reservation_lines(settings, now), *node_health_lines(settings)]
    return "\n".join(["Fail fast:", *(f"  {line}" for line in lines)])
