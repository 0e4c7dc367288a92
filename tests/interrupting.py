"""Interrupt a command for real: start ``python -m rlinf_eks ...`` as a process, send SIGINT at a
chosen moment, and judge what it left: one line on stderr, exit 130, no hang, and an output folder
that is either as it was before or whole (tests/test_interrupts.py; bench/interrupt_bench.py runs
it at random moments).

The moment is counted from when the command's own code runs: the process catches SIGTERM (Python
itself leaves SIGTERM alone; rlinf_eks.interrupts catches it as it installs the Ctrl-C handler,
read from /proc/<pid>/status). Before that, in the interpreter's own start (site, the first tens
of milliseconds), SIGINT is Python's to handle, before any line of this project runs. From the
package's import on, the command line's handler holds, for ``python -m rlinf_eks`` and for the
``rlinf-eks`` script alike (rlinf_eks/__init__.py; test_interrupts.py sends the script's Ctrl-C
right after that import).
"""

from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from rlinf_eks.interrupts import message
from tests.harness import ROOT

HANG_SECONDS = 60
"""A command that has not ended this long after SIGINT hangs (a plan takes about 3 s)."""


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


@dataclass(frozen=True)
class Outcome:
    delay: float
    status: Optional[int]
    """None: still running HANG_SECONDS after the signal (killed then)."""
    stderr: str
    seconds: float
    """From the command's code starting to its end."""


def run(argv: Sequence[str], *, delay: Optional[float] = None, cwd: Path = ROOT) -> Outcome:
    """Run ``python -m rlinf_eks argv``; with ``delay``, send SIGINT that long after its code starts."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rlinf_eks", *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    deadline = time.monotonic() + HANG_SECONDS
    while not _catches_sigterm(process.pid) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    started = time.monotonic()
    if delay is not None:
        time.sleep(delay)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=HANG_SECONDS)
        status: Optional[int] = process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        status = None
    return Outcome(delay or 0.0, status, stderr, time.monotonic() - started)


def same_tree(a: Path, b: Path) -> bool:
    """Whether two folders hold the same files with the same bytes."""
    compare = filecmp.dircmp(a, b)
    if compare.left_only or compare.right_only or compare.funny_files:
        return False
    if filecmp.cmpfiles(a, b, compare.common_files, shallow=False)[1:] != ([], []):
        return False
    return all(same_tree(a / name, b / name) for name in compare.common_dirs)


def problem(outcome: Outcome, out: Path, states: Sequence[Optional[Path]]) -> Optional[str]:
    """What is wrong with an interrupted command, or None: it ended (no hang) with no traceback;
    either it finished (0, the signal came too late) or it wrote the one line and exited 130; the
    output folder is one of ``states`` (None: absent; else a folder to compare with), and no
    staging folder is left beside it."""
    if outcome.status is None:
        return f"hung: still running {HANG_SECONDS} s after SIGINT at {outcome.delay:.3f} s"
    if "Traceback" in outcome.stderr:
        return f"a traceback (SIGINT at {outcome.delay:.3f} s):\n{outcome.stderr[-2000:]}"
    lines = outcome.stderr.strip().splitlines()
    if outcome.status == 130:
        if not lines or lines[-1] != message(signal.SIGINT) or sum("interrupted" in line for line in lines) != 1:
            return f"exit 130 without exactly one line {message(signal.SIGINT)!r} last (SIGINT at {outcome.delay:.3f} s): {lines[-3:]}"
    elif outcome.status != 0:
        return f"exit {outcome.status} (SIGINT at {outcome.delay:.3f} s): {lines[-3:]}"
    leftovers = [p.name for p in out.parent.iterdir() if p.name.endswith(".partial")]
    if leftovers:
        return f"staging folders left beside {out}: {leftovers}"
    if not any((state is None and not out.exists()) or (state is not None and out.is_dir() and same_tree(out, state)) for state in states):
        return f"{out} is half-written (SIGINT at {outcome.delay:.3f} s, exit {outcome.status}): neither as it was nor whole"
    return None


def fresh(out: Path, state: Optional[Path]) -> None:
    """Put ``out`` in ``state`` (absent, or a copy of a folder) before a run."""
    shutil.rmtree(out, ignore_errors=True)
    if state is not None:
        shutil.copytree(state, out)
