"""``python -m rlinf_eks report STACK``: a run's curves and evaluations, drawn from what it logged.

Reads the run directory (or its copy in the bucket): the trainer's logs in the formats the pinned
trainers write (:mod:`.logs`), sorts the metrics into figures (:mod:`.metrics`), draws them with
matplotlib (:mod:`.figures`) and writes a page (:mod:`.page`): ``index.html`` with the figures
inlined, ``figures/*.png|svg``, ``report.json`` (the drawn data), plus a short summary for the
terminal. :mod:`.bucket` copies the logs of a run from S3; :mod:`.cli` is the command.

Nothing else in the project imports this package (the command line registers :mod:`.cli` only):
it needs the ``report`` extra (matplotlib, tensorboard; boto3 for ``--from-bucket``).

    from rlinf_eks.report import make_report
    result = make_report(Path("/fsx/my-stack"), Path("build/my-stack/report"), title="my-stack")
    print(result.summary)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from ..wording import counted
from .logs import Evaluation, RunLogs, read_run
from .metrics import grouped, summarise

__all__ = ["ReportResult", "gpu_note", "make_report", "render_summary"]

GPU_NOTES = {
    "prometheus": (
        "Not in the run's logs: the DCGM exporter's DCGM_FI_DEV_GPU_UTIL is in the stack's Prometheus (Grafana dashboard "
        "'GPU utilisation per GPU'), live and for its retention only; look there while the run's data is kept."
    ),
    "cloudwatch": (
        "Not in the run's logs: CloudWatch Container Insights records it (node_gpu_utilization, pod_gpu_utilization) "
        "for its retention; look there (it is available live only, not copied into the run directory)."
    ),
    "none": "Not recorded: the stack has no observability backend (observability.backend: none) and the trainer does not log it.",
}


def gpu_note(backend: Optional[str], logged: bool) -> str:
    if logged:
        return "From the run's own logs (the GPU utilisation figure above)."
    if backend in GPU_NOTES:
        return GPU_NOTES[backend]
    return "Not in the run's logs; the stack's observability backend (Prometheus or CloudWatch) records it live."


@dataclass(frozen=True)
class ReportResult:
    status: int
    """0: curves drawn; 1: the run has logged nothing yet (the page says so)."""
    summary: str
    files: tuple[str, ...]
    formats: tuple[str, ...] = ()
    """The log formats read (logs.DIALECT_FORMATS): tensorboard, verl-console."""


def _utc(seconds: Optional[float]) -> str:
    if seconds is None:
        return "unknown"
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def render_summary(logs: RunLogs, evaluations: list[Evaluation], note: str, step_offset: int = 0) -> str:
    """The terminal summary: the step reached, the best success rate and where, time per step.
    ``step_offset``: the trainer logs its step N at N - step_offset (its recipe's ``loggedStep``):
    the summary's steps are the trainer's (the step reached is the one its newest checkpoint is
    named after); the figures' axes are the logged steps."""
    s = summarise(logs)
    if logs.empty and logs.files:
        # files there, no value in them: the report says which, rather than that there are none
        shown = ", ".join(logs.files[:3]) + (f" and {len(logs.files) - 3} more" if len(logs.files) > 3 else "")
        files = "1 log file" if len(logs.files) == 1 else f"{len(logs.files)} log files"
        lines = [f"no metrics logged yet: {files} ({shown}) without a complete step: a run that just started "
                 "writes its first step soon; a file that stays so is truncated or not a log of this kind"]  # fmt: skip
    elif logs.empty:
        lines = ["no metrics logged yet: no TensorBoard events (RLinf: <run dir>/logs/tensorboard) and no veRL "
                 "run_*.log (<run dir>/checkpoints) with a complete line; a run that just started writes its first step soon"]  # fmt: skip
    else:
        formats = {"tensorboard": "TensorBoard events", "verl-console": "veRL console log (run_*.log)"}
        lines = [f"read: {', '.join(formats[f] for f in sorted(logs.formats))}, {counted(len(logs.files), 'file')}"]
        logged = f"logged as step {s.last_step}, the trainer logs step N at N-{step_offset}; " if step_offset and s.last_step is not None else ""
        reached = s.last_step + step_offset if s.last_step is not None else None
        lines.append(f"step reached: {reached} ({logged}last logged {_utc(logs.last_write)}; a run in progress adds steps)")
        if s.best_success is None:
            lines.append("best success rate: none logged (no success-rate metric among the run's metrics)")
        else:
            lines.append(f"best success rate: {s.best_success:.3f} ({s.success_tag}) at step {s.best_step + step_offset}")
        if s.median_step_seconds is None:
            lines.append("time per step: not logged")
        else:
            lines.append(f"time per step: median {s.median_step_seconds:.1f} s, last {s.last_step_seconds:.1f} s ({s.step_time_tag})")
        if logs.skipped_lines:
            lines.append(f"skipped {logs.skipped_lines} incomplete or foreign log lines")
    for evaluation in evaluations:
        shown = ", ".join(f"{k} {v:.3f}" for k, v in sorted(evaluation.metrics.items()) if "success" in k or "test_score" in k) or (
            counted(len(evaluation.metrics), "metric") if evaluation.metrics else "no metrics yet"
        )
        lines.append(f"evaluation {evaluation.name}: {shown}, {counted(len(evaluation.videos), 'video')}")
    lines.append(f"GPU utilisation: {note}")
    return "\n".join(lines)


def make_report(
    run_dir: Path, out: Path, *, title: str, backend: Optional[str] = None, meta: str = "", into: Optional[Path] = None,
    step_offset: int = 0,
) -> ReportResult:
    """Read ``run_dir``, write the page, figures and data into ``out``; the summary and status.
    ``into``: the folder to write instead, to be moved to ``out`` (the page's links are ``out``'s);
    ``step_offset``: as :func:`render_summary`'s."""
    from .figures import draw
    from .page import DATA, PAGE, render_page, report_data, video_base

    run = read_run(run_dir)
    groups, other = grouped(run.training)
    note = gpu_note(backend, "gpu" in groups)
    summary = render_summary(run.training, run.evaluations, note, step_offset)
    folder = into or out
    folder.mkdir(parents=True, exist_ok=True)
    figures = draw(groups, folder)
    data = report_data(summary, figures, run.evaluations, other, video_base(out, run_dir))
    (folder / DATA).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (folder / PAGE).write_text(render_page(title, meta or str(run_dir), data, figures, note), encoding="utf-8")
    files = (PAGE, DATA, *(f.png for f in figures), *(f.svg for f in figures))
    return ReportResult(1 if run.training.empty and not run.evaluations else 0, summary, files, tuple(sorted(run.training.formats)))
