"""Runs' logs as the pinned trainers write them, for the report's tests.

RLinf's MetricLogger calls ``SummaryWriter(<log_path>/tensorboard).add_scalar(tag, value, step)``;
here tensorboardX's SummaryWriter (the same event-file format; torch is not installed) writes
them. SimpleVLA-RL's veRL LocalLogger (verl/utils/logger/aggregate_logger.py:47-95 at 7c51662,
not a published package) appends ``<isoformat time>\\t<step>\\t<json.dumps(data)>`` after two
``#`` header lines: :func:`verl_run` writes exactly that, line for line. Values follow a fixed
curve, and the wall times are fixed, so a report of them is reproducible.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc).timestamp()
STEP_SECONDS = 230.0


def rlinf_success(step: int) -> float:
    """From ~0.32 towards ~0.92, with a deterministic wobble (a success rate over 128 envs)."""
    return round(min(1.0, 0.92 - 0.6 * math.exp(-step / 45) + 0.02 * math.sin(1.7 * step)), 4)


def rlinf_policy_loss(step: int) -> float:
    return round(0.5 / (1 + 0.05 * step), 5)


def rlinf_step_time(step: int) -> float:
    return round(STEP_SECONDS + 4 * math.sin(step / 6) + (step % 3), 3)


def rlinf_run(run_dir: Path, steps: int = 12, *, evaluations: bool = True) -> Path:
    """An rlinf-embodied run: <run>/logs/tensorboard events of ``steps`` steps, one complete
    evaluation (eval.json and two videos) and one in progress (events only)."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(run_dir / "logs" / "tensorboard"))
    for step in range(steps):
        wall = T0 + STEP_SECONDS * step
        for tag, value in (
            ("env/success_once", rlinf_success(step)),
            ("env/return", round(20 * rlinf_success(step) - 4, 4)),
            ("env/episode_len", 80.0 - step),
            ("train/actor/policy_loss", rlinf_policy_loss(step)),
            ("train/critic/value_loss", round(1.0 / (1 + step), 5)),
            ("train/actor/approx_kl", 0.01),
            ("time/step", rlinf_step_time(step)),
            ("time/generate_rollouts", 120.0),
        ):
            writer.add_scalar(tag, value, step, walltime=wall)
    writer.close()
    (run_dir / "logs" / "checkpoints" / "global_step_10" / "actor").mkdir(parents=True)
    if evaluations:
        done = run_dir / "eval" / "step-10"
        eval_writer = SummaryWriter(str(done / "tensorboard"))
        eval_writer.add_scalar("eval/success_once", 0.875, 0, walltime=T0 + 9000)
        eval_writer.add_scalar("eval/return", 3.5, 0, walltime=T0 + 9000)
        eval_writer.close()
        (done / "video" / "eval" / "seed_0").mkdir(parents=True)
        for i in range(2):
            (done / "video" / "eval" / "seed_0" / f"{i}.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
        summary = {"checkpoint": str(run_dir / "logs/checkpoints/global_step_10"), "step": 10, "status": 0,
                   "metrics": {"eval/success_once": 0.875, "eval/return": 3.5}, "videos": ["video/eval/seed_0/0.mp4", "video/eval/seed_0/1.mp4"]}  # fmt: skip
        (done / "eval.json").write_text(json.dumps(summary))
        running = run_dir / "eval" / "step-5"
        run_writer = SummaryWriter(str(running / "tensorboard"))
        run_writer.add_scalar("eval/success_once", 0.5, 0, walltime=T0 + 9500)
        run_writer.close()
    return run_dir


def verl_success(step: int) -> float:
    return round(0.4 + 0.05 * step, 4)


def verl_run(run_dir: Path, steps: int = 9, *, partial_last_line: bool = False) -> Path:
    """A verl-ppo run: <run>/checkpoints/run_<time>.log as LocalLogger writes it: validation at
    step 0 and every 4 steps (its own line), one training line per step."""
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True)
    path = folder / "run_20261102_080000.log"
    lines = [f"# Log started at {datetime.fromtimestamp(T0, tz=timezone.utc).isoformat()}\n", "# Format: {timestamp}\t{step}\t{data_json}\n"]

    def line(wall: float, step: int, data: dict) -> None:
        lines.append(f"{datetime.fromtimestamp(wall, tz=timezone.utc).isoformat()}\t{step}\t{json.dumps(data)}\n")

    line(T0, 0, {"val/test_score/libero_10": 0.4, "val/test_score/all": 0.4})
    for step in range(steps):
        wall = T0 + 600 + 300.0 * step + (step % 2) * 10
        data = {
            "timing/gen": 200.0, "timing/verify": 1.0, "timing/update_actor": 80.0,
            "train_verify_score/all": verl_success(step), "critic/score/mean": verl_success(step), "critic/rewards/mean": verl_success(step),
            "actor/pg_loss": round(0.2 - 0.01 * step, 4), "actor/entropy_loss": 1.5, "actor/grad_norm": 0.7,
        }  # fmt: skip
        if (step + 1) % 4 == 0:
            line(wall - 5, step, {"val/test_score/libero_10": verl_success(step) + 0.02, "val/test_score/all": verl_success(step) + 0.02})
        line(wall, step, data)
    text = "".join(lines)
    if partial_last_line:
        text += '2026-11-02T10:00:00+00:00\t9\t{"timing/gen": 20'
    path.write_text(text)
    (folder / "actor" / "global_step_4").mkdir(parents=True)
    return run_dir
