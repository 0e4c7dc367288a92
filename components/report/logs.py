"""Read what a run logged, in the formats the pinned trainers write.

- RLinf v0.3 (both dialects): ``MetricLogger`` writes TensorBoard event files with
  ``SummaryWriter.add_scalar(tag, value, step)`` into ``<log_path>/tensorboard/`` (``tensorboard``
  is its default backend; ``wandb`` and ``swanlab`` go to their services and only add to it). The
  stack sets ``log_path`` to ``<run dir>/logs``; an evaluation's is ``<run dir>/eval/step-<N>``.
  Read with the ``tensorboard`` package's EventAccumulator.
- veRL in SimpleVLA-RL: ``Tracking``'s ``console`` backend (the stack always sets it; ``wandb``
  goes to its service) is a ``LocalLogger`` that appends ``<ISO time>\\t<step>\\t<JSON>`` lines to
  ``<default_local_dir>/run_<YYYYmmdd_HHMMSS>.log`` after ``#`` header lines; the stack sets
  ``default_local_dir`` to ``<run dir>/checkpoints`` (an evaluation's: its own directory).

A run in progress has a last line or record being written: a line that is not complete JSON is
skipped, and EventAccumulator stops at a truncated record.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable, Optional

__all__ = ["DIALECT_FORMATS", "EVAL_DIR", "RunLogs", "Series", "foreign_logs", "read_logs", "read_run"]

EVAL_DIR = "eval"
DIALECT_FORMATS = {"verl-ppo": "verl-console", "rlinf-embodied": "tensorboard", "rlinf-reasoning": "tensorboard"}
"""The log format each trainer dialect writes (above)."""
_FORMAT_NAMES = {"tensorboard": "TensorBoard events (RLinf's)", "verl-console": "veRL console logs, run_*.log (verl-ppo's)"}


def foreign_logs(dialect: str, formats: Iterable[str]) -> Optional[str]:
    """A warning when the logs read are only another dialect's (a run directory of another stack,
    or a copy of the wrong one), else None."""
    expected = DIALECT_FORMATS.get(dialect)
    found = sorted(set(formats))
    if expected is None or not found or expected in found:
        return None
    return (f"the run directory holds {' and '.join(_FORMAT_NAMES.get(f, f) for f in found)}, but the stack runs {dialect}, which "
            f"writes {_FORMAT_NAMES[expected]}: drawn as found; is it this stack's run directory (--run-dir)?")  # fmt: skip
EVENTS = "events.out.tfevents."
STEP_TIME_FROM_LOG = "time/step (from the log's timestamps)"
"""veRL logs no step time: the wall time between consecutive training lines stands for it."""
_SKIP_DIRS = {"worker_logs", "wandb", "swanlab", ".rlinf-eks"}


@dataclass
class Series:
    """One metric: its values by step (a step logged twice keeps the later value: a restarted
    run writes its steps again) and when each was written (seconds since the epoch)."""

    tag: str
    points: dict[int, float] = field(default_factory=dict)
    wall: dict[int, float] = field(default_factory=dict)

    def add(self, step: int, value: float, wall_time: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return
        self.points[int(step)] = float(value)
        self.wall[int(step)] = float(wall_time)

    @property
    def steps(self) -> list[int]:
        return sorted(self.points)

    @property
    def values(self) -> list[float]:
        return [self.points[s] for s in self.steps]


@dataclass
class RunLogs:
    """Every series found below one directory, and the files they came from."""

    series: dict[str, Series] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    formats: set[str] = field(default_factory=set)
    skipped_lines: int = 0

    def get(self, tag: str) -> Series:
        return self.series.setdefault(tag, Series(tag))

    @property
    def empty(self) -> bool:
        return not any(s.points for s in self.series.values())

    @property
    def last_step(self) -> Optional[int]:
        steps = [max(s.points) for s in self.series.values() if s.points]
        return max(steps) if steps else None

    @property
    def last_write(self) -> Optional[float]:
        walls = [max(s.wall.values()) for s in self.series.values() if s.wall]
        return max(walls) if walls else None


def _walk(root: Path, skip_eval: bool) -> Iterable[Path]:
    for folder, dirs, files in os.walk(root):
        # checkpoints hold weights, not logs; an evaluation is read on its own
        dirs[:] = sorted(
            d for d in dirs
            if d not in _SKIP_DIRS and not d.startswith("global_step_") and not (skip_eval and Path(folder) == root and d == EVAL_DIR)
        )  # fmt: skip
        for name in sorted(files):
            yield Path(folder, name)


def _read_events(folder: Path, logs: RunLogs) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    for tag in tags.get("scalars", []):
        for event in accumulator.Scalars(tag):
            logs.get(tag).add(event.step, event.value, event.wall_time)
    # TensorBoard 2.x writers may store scalars as rank-0 tensors
    for tag in tags.get("tensors", []):
        for event in accumulator.Tensors(tag):
            try:
                from tensorboard.util import tensor_util

                value = tensor_util.make_ndarray(event.tensor_proto)
                if value.shape == ():
                    logs.get(tag).add(event.step, float(value), event.wall_time)
            except (ValueError, TypeError, ImportError):
                continue


def _read_verl_log(path: Path, logs: RunLogs, training_walls: dict[int, float]) -> None:
    with path.open(encoding="utf-8", errors="replace") as text:
        for line in text:
            if line.startswith("#") or not line.strip():
                continue
            parts = line.rstrip("\n").split("\t", 2)
            try:
                wall = datetime.fromisoformat(parts[0]).timestamp()
                step = int(parts[1])
                data = json.loads(parts[2])
            except (IndexError, ValueError):
                logs.skipped_lines += 1  # a line being written, or not LocalLogger's
                continue
            if not isinstance(data, dict):
                logs.skipped_lines += 1
                continue
            for key, value in data.items():
                logs.get(str(key)).add(step, value, wall)
            if any(str(key).startswith("timing/") for key in data):
                training_walls[step] = wall


def read_logs(root: Path, *, skip_eval: bool = True) -> RunLogs:
    """Every TensorBoard event folder and veRL ``run_*.log`` below ``root`` (not below
    ``root/eval`` when ``skip_eval``, nor in checkpoint folders)."""
    logs = RunLogs()
    event_folders: list[Path] = []
    verl_logs: list[Path] = []
    for path in _walk(root, skip_eval):
        if path.name.startswith(EVENTS):
            if path.parent not in event_folders:
                event_folders.append(path.parent)
            logs.files.append(str(path.relative_to(root)))
        elif path.name.startswith("run_") and path.name.endswith(".log"):
            verl_logs.append(path)
            logs.files.append(str(path.relative_to(root)))
    for folder in event_folders:
        _read_events(folder, logs)
        logs.formats.add("tensorboard")
    training_walls: dict[int, float] = {}
    for path in sorted(verl_logs, key=lambda p: p.name):  # run_<time>.log: oldest first
        _read_verl_log(path, logs, training_walls)
        logs.formats.add("verl-console")
    steps = sorted(training_walls)
    for before, after in zip(steps, steps[1:]):
        if after == before + 1:
            logs.get(STEP_TIME_FROM_LOG).add(after, training_walls[after] - training_walls[before], training_walls[after])
    logs.series = {tag: s for tag, s in logs.series.items() if s.points}
    return logs


@dataclass
class Evaluation:
    """One ``<run dir>/eval/step-<N>`` (or ``attempt-<K>-step-<N>``): its metrics (the summary's, else its own logs), videos
    (paths relative to the run directory) and exit status when the summary says it."""

    name: str
    step: Optional[int]
    metrics: dict[str, float]
    videos: list[str]
    status: Optional[int]
    checkpoint: str = ""


def _evaluation(run_dir: Path, folder: Path) -> Evaluation:
    summary: dict = {}
    try:
        summary = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = {}
    metrics = {k: float(v) for k, v in (summary.get("metrics") or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if not metrics:
        logs = read_logs(folder, skip_eval=False)
        metrics = {tag: s.points[max(s.points)] for tag, s in logs.series.items() if tag != STEP_TIME_FROM_LOG}
    videos = sorted(str(p.relative_to(run_dir)) for p in folder.rglob("*.mp4"))
    try:
        step: Optional[int] = int(folder.name.rsplit("-", 1)[1])  # step-<N>, attempt-<K>-step-<N>
    except (IndexError, ValueError):
        step = None
    status = summary.get("status")
    return Evaluation(folder.name, step, metrics, videos, status if isinstance(status, int) else None, str(summary.get("checkpoint", "")))


@dataclass
class Run:
    training: RunLogs
    evaluations: list[Evaluation]


def read_run(run_dir: Path) -> Run:
    """The training run's logs and every evaluation below ``<run_dir>/eval``: each folder there but
    the hidden ones (the launcher's ``eval/.rlinf-eks``, its own records, is no evaluation)."""
    evaluations = []
    eval_root = run_dir / EVAL_DIR
    if eval_root.is_dir():
        folders = [p for p in eval_root.iterdir() if p.is_dir() and not p.name.startswith(".")]
        for folder in sorted(folders, key=lambda p: (len(p.name), p.name)):
            evaluations.append(_evaluation(run_dir, folder))
    return Run(read_logs(run_dir), evaluations)
