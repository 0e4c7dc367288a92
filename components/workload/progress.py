"""The trainer's supervisor: a hang releases its GPUs, and a Capacity Block's end stops the run in time.

``progress.sh`` runs the trainer as its child (both launchers: the manual launcher's head starts
``progress.sh bash trainer.sh``, the RayJob's driver.sh execs it) and relays the trainer's stdout
and stderr unchanged. It stops the trainer, and exits with a status of its own
(:mod:`.exit_codes`), when:

- **no progress** (``workload.progressTimeoutSeconds``): no output from the trainer and no new
  ``global_step_N`` directory under the run directory for that long. A collective that never
  completes prints nothing; torch's NCCL watchdog (``TORCH_NCCL_*``, :func:`nccl_timeout_env`)
  catches hung collectives inside a process group, this catches the rest (a dead Ray actor the
  driver waits on for ever, a stuck rollout). Exit ``PROGRESS_TIMEOUT``.
- **the Capacity Block ends** (``gpuNodes.capacityBlock.endTime``): EC2 sends the instances'
  interruption warning 40 minutes before the block's end and terminates them 30 minutes before
  (EC2 User Guide, "Capacity Blocks for ML"); the supervisor starts stopping at
  ``end - 40 min - terminationGracePeriodSeconds``, lets a checkpoint being written settle, then
  stops the trainer. Exit ``RESERVATION_ENDING`` (not a failure: a later block resumes the run from
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
from . import exit_codes, scripts

PROGRESS_SCRIPT = "progress.sh"
# EC2 warns 40 minutes before a Capacity Block ends (and terminates its instances at 30).
CAPACITY_BLOCK_WARNING = timedelta(minutes=40)
# How often the run directory is walked for a new checkpoint step: each walk lists directories
# on FSx (metadata operations), so at most once a minute on a real run.
CHECKPOINT_SCAN_SECONDS = 60
# The trainer settles for at most this share of the stop budget; the rest is for SIGINT/TERM.
SETTLE_SHARE = 0.5
# A checkpoint counts as written once no file of it changed this long (the launcher's rule too).
SETTLE_QUIET_SECONDS = 30

def stop_at(settings: StackSettings) -> Optional[datetime]:
    """When the supervisor starts stopping the trainer before a Capacity Block ends, else None."""
    gpu = settings.gpu_nodes
    block = gpu.capacity_block
    if gpu.capacity_type != "CAPACITY_BLOCK" or block is None or block.end_time is None:
        return None
    budget = timedelta(seconds=settings.workload.termination_grace_period_seconds)
    return block.end_time.astimezone(timezone.utc) - CAPACITY_BLOCK_WARNING - budget


SUPERVISOR = r'''
import os, re, signal, subprocess, sys, threading, time

RUN_DIR = os.environ["PROGRESS_RUN_DIR"]
TIMEOUT = int(os.environ["PROGRESS_TIMEOUT_SECONDS"] or 0)
STOP_AT = int(os.environ["PROGRESS_STOP_AT_EPOCH"] or 0)
BUDGET = int(os.environ["PROGRESS_STOP_BUDGET_SECONDS"])
SCAN = float(os.environ["PROGRESS_SCAN_SECONDS"])
SETTLE = float(os.environ["PROGRESS_SETTLE_SHARE"])
QUIET = float(os.environ["PROGRESS_SETTLE_QUIET_SECONDS"])
EXIT_PROGRESS_TIMEOUT = int(os.environ["EXIT_PROGRESS_TIMEOUT"])
EXIT_RESERVATION_ENDING = int(os.environ["EXIT_RESERVATION_ENDING"])
STEP = re.compile(r"^global_step_(\d+)$")
CHECKPOINT_PART = re.compile(r"^(checkpoints|global_step_\d+)$")


def log(message):
    print(f"rlinf-eks[progress]: {message}", file=sys.stderr, flush=True)


# A signal to our process group (the launcher stopping the pod) reaches the trainer too: note it,
# and keep relaying until the trainer has exited.
signal.signal(signal.SIGINT, lambda *_: None)
signal.signal(signal.SIGTERM, lambda *_: None)

trainer = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
last_output = time.monotonic()


def relay(source, sink):
    global last_output
    while True:
        chunk = os.read(source.fileno(), 65536)
        if not chunk:
            return
        last_output = time.monotonic()
        sink.write(chunk)
        sink.flush()


relays = [threading.Thread(target=relay, args=(trainer.stdout, sys.stdout.buffer), daemon=True),
          threading.Thread(target=relay, args=(trainer.stderr, sys.stderr.buffer), daemon=True)]
for thread in relays:
    thread.start()


def newest_step():
    """The highest global_step_N under RUN_DIR (not descending into a step's own files)."""
    best = -1
    for base, dirs, _ in os.walk(RUN_DIR):
        keep = []
        for name in dirs:
            match = STEP.match(name)
            if match:
                best = max(best, int(match.group(1)))
            elif base.count(os.sep) - RUN_DIR.count(os.sep) < 4:
                keep.append(name)
        dirs[:] = keep
    return best


def newest_checkpoint_write():
    latest = 0.0
    for base, _, files in os.walk(RUN_DIR):
        if not any(CHECKPOINT_PART.match(p) for p in os.path.relpath(base, RUN_DIR).split(os.sep)):
            continue
        for name in files:
            try:
                latest = max(latest, os.stat(os.path.join(base, name)).st_mtime)
            except OSError:
                pass
    return latest


def group_members():
    """Every other process of our process group (the trainer and whatever it started)."""
    me, group = os.getpid(), os.getpgrp()
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == group:
                    members.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return members


def signal_trainer(sig):
    # our own group when we lead it (both launchers start us as a group leader), else the trainer
    targets = group_members() if os.getpgrp() == os.getpid() else [trainer.pid]
    for pid in targets:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def wait_trainer(seconds):
    try:
        trainer.wait(timeout=max(0.0, seconds))
        return True
    except subprocess.TimeoutExpired:
        return False


def stop(reason, status, budget):
    log(f"{reason}: stopping the trainer (SIGINT, SIGTERM, then SIGKILL within {int(budget)}s)")
    started = time.monotonic()
    for sig, share in ((signal.SIGINT, 0.5), (signal.SIGTERM, 0.9)):
        signal_trainer(sig)
        if wait_trainer(started + budget * share - time.monotonic()):
            break
    else:
        signal_trainer(signal.SIGKILL)
        trainer.wait()
    log(f"the trainer exited with status {trainer.returncode}; exiting {status}")
    sys.exit(status)


step = newest_step()
last_step_change = time.monotonic()
next_scan = time.monotonic() + SCAN
poll = max(0.2, min(5.0, (TIMEOUT or 50) / 10))
if TIMEOUT:
    log(f"watching the trainer: stopped after {TIMEOUT}s without output or a new checkpoint step")
if STOP_AT:
    log(f"the Capacity Block ends soon after {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(STOP_AT))}: the trainer is stopped then")
while True:
    if wait_trainer(poll):
        for thread in relays:
            thread.join(timeout=5)
        code = trainer.returncode
        sys.exit(code if code >= 0 else 128 - code)
    now = time.monotonic()
    if TIMEOUT and now >= next_scan:
        found = newest_step()
        if found > step:
            step, last_step_change = found, now
        next_scan = now + SCAN
    if STOP_AT and time.time() >= STOP_AT:
        log("the Capacity Block ends in less than 40 minutes plus the stop budget: letting checkpoint writes settle")
        began = time.monotonic()
        settle_until = began + BUDGET * SETTLE
        while time.monotonic() < settle_until and time.time() - newest_checkpoint_write() < QUIET and trainer.poll() is None:
            time.sleep(min(1.0, max(0.0, settle_until - time.monotonic())))
        stop("the Capacity Block is ending", EXIT_RESERVATION_ENDING, BUDGET - (time.monotonic() - began))
    idle = now - max(last_output, last_step_change)
    if TIMEOUT and idle >= TIMEOUT:
        stop(f"no output and no new checkpoint step for {int(idle)}s (progressTimeoutSeconds {TIMEOUT})", EXIT_PROGRESS_TIMEOUT, BUDGET)
'''

PROGRESS = (
    "\nset -uo pipefail\n"
    "# Usage: progress.sh COMMAND [ARGS...]: runs COMMAND (the trainer) under the supervisor.\n"
    "export PROGRESS_RUN_DIR PROGRESS_TIMEOUT_SECONDS PROGRESS_STOP_AT_EPOCH PROGRESS_STOP_BUDGET_SECONDS\n"
    "export PROGRESS_SCAN_SECONDS PROGRESS_SETTLE_SHARE PROGRESS_SETTLE_QUIET_SECONDS EXIT_PROGRESS_TIMEOUT EXIT_RESERVATION_ENDING\n"
    "exec python3 -c \"${SUPERVISOR}\" \"$@\"\n"
)


def progress_script(
    *,
    run_dir: str,
    timeout_seconds: Optional[int],
    stop_at_time: Optional[datetime],
    stop_budget_seconds: int,
    scan_seconds: float = CHECKPOINT_SCAN_SECONDS,
    settle_quiet_seconds: float = SETTLE_QUIET_SECONDS,
) -> str:
    """progress.sh: ``progress.sh COMMAND...`` runs the trainer under the supervisor."""
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
