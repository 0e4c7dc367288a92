"""The trainer's supervisor: a hang releases its GPUs, and a Capacity Block's end stops the run in time.

``progress.sh`` runs the trainer as its child (both launchers: the manual launcher's head starts
``progress.sh bash trainer.sh``, the RayJob's driver.sh execs it) and relays the trainer's stdout
and stderr unchanged. It stops the trainer, and exits with a status of its own
(:mod:`.exit_codes`), when:

- **no progress** (``workload.progressTimeoutSeconds``): no output from the trainer and no new
  ``global_step_N`` directory under the run directory for that long. A collective that never
  completes prints nothing; torch's NCCL watchdog (``TORCH_NCCL_*``, :func:`.env.nccl_timeout_env`)
  catches hung collectives inside a process group, this catches the rest (a dead Ray actor the
  driver waits on for ever, a stuck rollout). Exit ``PROGRESS_TIMEOUT``.
- **the Capacity Block ends** (``gpuNodes.capacityBlock.endTime``): EC2 sends the instances'
  interruption warning 40 minutes before the block's end and terminates them 30 minutes before
  (EC2 User Guide, "Capacity Blocks for ML"); the supervisor starts stopping at
  ``end - 40 min - terminationGracePeriodSeconds``, lets the checkpoint write in progress end (not
  later ones), then stops the trainer. Exit ``RESERVATION_ENDING`` (not a failure: a later block resumes the run from
  its newest complete checkpoint).

Stopping is SIGINT, SIGTERM, SIGKILL to the trainer's process group within the stop budget.
Signals sent to the supervisor's group by the launcher (a pod being stopped) reach the trainer
directly; the supervisor only waits for it then and passes its status through, so the
launcher's own stop path is unchanged.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional

from ..config import StackSettings
from ..trainers.base import COMPLETE_MARKER
from . import exit_codes, scripts
from .kube import PROGRESS_METRICS_PORT

PROGRESS_SCRIPT = "progress.sh"
# EC2 warns 40 minutes before a Capacity Block ends (and terminates its instances at 30).
CAPACITY_BLOCK_WARNING = timedelta(minutes=40)
# How often the run directory is walked for a new checkpoint step: each walk lists directories
# on FSx (metadata operations), so at most once a minute on a real run.
CHECKPOINT_SCAN_SECONDS = 60
# The trainer settles for at most this share of the stop budget; the rest is for SIGINT/TERM.
SETTLE_SHARE = 0.5
# A checkpoint's write has ended once a newer global_step_M began beside it, or no file of it changed
# this long (the launcher's rule too: programs/checkpoint_writes.py).
SETTLE_QUIET_SECONDS = 30

def stop_at(settings: StackSettings) -> Optional[datetime]:
    """When the supervisor starts stopping the trainer before a Capacity Block ends, else None."""
    gpu = settings.gpu_nodes
    block = gpu.capacity_block
    if gpu.capacity_type != "CAPACITY_BLOCK" or block is None or block.end_time is None:
        return None
    budget = timedelta(seconds=settings.workload.termination_grace_period_seconds)
    return block.end_time.astimezone(timezone.utc) - CAPACITY_BLOCK_WARNING - budget


# values of the prelude (python3 -c "${CHECKPOINT_WRITES}${SUPERVISOR}"), not a heredoc: stdin
# stays the trainer's. The checkpoint-write walk is the one launch.sh settles on (one program).
CHECKPOINT_WRITES = "\n" + scripts.program("checkpoint_writes.py")
SUPERVISOR = "\n" + scripts.program("progress_supervisor.py")

PROGRESS = scripts.body("progress.sh")


def progress_script(
    *,
    run_dir: str,
    timeout_seconds: Optional[int],
    stop_at_time: Optional[datetime],
    stop_budget_seconds: int,
    scan_seconds: float = CHECKPOINT_SCAN_SECONDS,
    settle_quiet_seconds: float = SETTLE_QUIET_SECONDS,
    metrics_port: Optional[int] = PROGRESS_METRICS_PORT,
) -> str:
    """progress.sh: ``progress.sh COMMAND...`` runs the trainer under the supervisor, which also
    serves the run's step, newest complete checkpoint and last progress on ``metrics_port``
    (Prometheus text; None: not served)."""
    codes = exit_codes.shell_values()
    return scripts.render(
        {
            "PROGRESS_RUN_DIR": run_dir,
            "PROGRESS_TIMEOUT_SECONDS": timeout_seconds or "",
            "PROGRESS_STOP_AT_EPOCH": int(stop_at_time.timestamp()) if stop_at_time is not None else "",
            "PROGRESS_STOP_BUDGET_SECONDS": stop_budget_seconds,
            "PROGRESS_SCAN_SECONDS": scan_seconds,
            "PROGRESS_SETTLE_SHARE": SETTLE_SHARE,
            "PROGRESS_SETTLE_QUIET_SECONDS": settle_quiet_seconds,
            "EXIT_PROGRESS_TIMEOUT": codes["EXIT_PROGRESS_TIMEOUT"],
            "EXIT_RESERVATION_ENDING": codes["EXIT_RESERVATION_ENDING"],
            "PROGRESS_METRICS_PORT": metrics_port or "",
            "PROGRESS_COMPLETE_MARKER": COMPLETE_MARKER,
            "CHECKPOINT_WRITES": CHECKPOINT_WRITES,
            "SUPERVISOR": SUPERVISOR,
        },
        PROGRESS,
    )


def for_stack(settings: StackSettings, run_dir: str) -> str:
    """progress.sh of a stack."""
    return progress_script(
        run_dir=run_dir,
        timeout_seconds=settings.workload.progress_timeout_seconds,
        stop_at_time=stop_at(settings),
        stop_budget_seconds=settings.workload.termination_grace_period_seconds,
    )
