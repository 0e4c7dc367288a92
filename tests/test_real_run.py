"""What real RLinf runs wrote, read by the project: the report draws their TensorBoard events, and
the launcher's checkpoint patterns find their checkpoints, mark them complete and resume from the
newest complete one. The synthetic runs of tests/report_logs.py and test_checkpoint_resume.py stay
beside these; here the files are RLinf's own (tests/data/rlinf-run-*/PROVENANCE.md says which
run wrote each): its events as written, and ``tree.txt``, the run's log directory as ``find``
listed it after the run (weights are not kept: the layout is what the patterns read)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlinf_eks.trainers import launch_for, recipe_of
from rlinf_eks.trainers.rlinf_embodied import DIALECT
from rlinf_eks.workload import scripts
from tests.harness import settings

pytest.importorskip("tensorboard")

DATA = Path(__file__).parent / "data"
RUNS = sorted(p.name for p in DATA.glob("rlinf-run-*") if p.is_dir())
LOG_PATH = "<log_path>"


def listing(run: str) -> list[str]:
    """tree.txt's paths below the log path (``<log_path>/a/b``), in the order listed."""
    lines = (DATA / run / "tree.txt").read_text().splitlines()
    return [line[len(LOG_PATH) + 1 :] for line in lines if line.startswith(LOG_PATH + "/")]


def materialize(run: str, log_dir: Path) -> None:
    """The listed tree under ``log_dir``: a path that is some other path's parent is a folder, the
    rest are (empty) files; RLinf's event files are copied from the data."""
    paths = listing(run)
    parents = {str(Path(p).parent) for p in paths}
    for path in paths:
        target = log_dir / path
        if path in parents:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        source = DATA / run / Path(path).name
        target.write_bytes(source.read_bytes() if source.name.startswith("events.out.tfevents.") else b"")


def experiment_of(run: str) -> str:
    (name,) = {p.split("/")[0] for p in listing(run) if re.fullmatch(r"[^/]+/checkpoints/global_step_\d+", p)}
    return name


def steps_of(run: str) -> list[int]:
    return sorted({int(m.group(1)) for p in listing(run) for m in [re.fullmatch(r"[^/]+/checkpoints/global_step_(\d+)", p)] if m})


def launch(run: str, log_dir: Path):
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": DIALECT, "configName": "maniskill_ppo_mlp", "experimentName": experiment_of(run)}})
    return launch_for(s, nnodes=1, gpus_per_node=1, log_dir=str(log_dir), checkpoint_dir=str(log_dir.parent / "checkpoints"), inputs_root="/models")


def checkpoints(mode: str, patterns: tuple[str, ...]) -> str:
    """The launcher's own program (launch.sh's ``checkpoints``), run as the pod runs it."""
    program = scripts.program("checkpoints.py")
    result = subprocess.run([sys.executable, "-c", program, mode, "\n".join(patterns), scripts.COMPLETE_MARKER], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_there_is_real_data():
    assert RUNS and all((DATA / run / "PROVENANCE.md").is_file() for run in RUNS)


@pytest.mark.parametrize("run", RUNS)
def test_rlinf_writes_events_to_the_log_path_s_tensorboard_folder_and_checkpoints_below_the_experiment(run):
    paths = listing(run)
    events = [p for p in paths if Path(p).name.startswith("events.out.tfevents.")]
    assert events and all(str(Path(p).parent) == "tensorboard" for p in events)
    checkpoint_file = recipe_of(DIALECT).evaluation.checkpoint_file  # what workload.mode eval loads
    for step in steps_of(run):
        step_dir = f"{experiment_of(run)}/checkpoints/global_step_{step}"
        assert {f"{step_dir}/actor/dcp_checkpoint", f"{step_dir}/{checkpoint_file}"} <= set(paths)


@pytest.mark.parametrize("run", RUNS)
def test_the_launchers_patterns_mark_the_real_checkpoints_and_resume_from_the_newest_complete(run, tmp_path):
    log_dir = tmp_path / "run" / "logs"
    materialize(run, log_dir)
    started = launch(run, log_dir)
    steps = steps_of(run)
    step_dir = lambda n: log_dir / experiment_of(run) / "checkpoints" / f"global_step_{n}"  # noqa: E731
    # while the trainer runs: every step but the newest is complete (a newer one exists)
    assert checkpoints("newest", started.checkpoint_patterns) == "none"
    checkpoints("mark", started.checkpoint_patterns)
    assert [n for n in steps if (step_dir(n) / scripts.COMPLETE_MARKER).exists()] == steps[:-1]
    newest = checkpoints("newest", started.checkpoint_patterns)
    assert newest == (str(step_dir(steps[-2])) if len(steps) > 1 else "none")
    # the trainer exited 0: all of them
    checkpoints("final", started.checkpoint_patterns)
    assert checkpoints("newest", started.checkpoint_patterns) == str(step_dir(steps[-1]))
    # trainer.sh resumes from it: RLinf reads <resume_dir>/actor and the step from the name
    # (rlinf/runners/embodied_runner.py:175-185)
    script = started.script()
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    (fake / "python").chmod(0o755)
    out = subprocess.run(["bash", "-c", script.replace("cd /workspace || exit", f"cd {tmp_path}")], env={"PATH": f"{fake}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    (resume,) = [a for a in out.stdout.splitlines() if a.startswith("runner.resume_dir=")]
    resume_dir = resume.split("=", 1)[1]
    assert (Path(resume_dir) / "actor").is_dir() and int(resume_dir.split("global_step_")[-1]) == steps[-1]


@pytest.mark.parametrize("run", RUNS)
def test_the_report_draws_a_real_run(run, tmp_path):
    from rlinf_eks.report import make_report
    from rlinf_eks.report.logs import read_logs

    run_dir = tmp_path / "run"
    materialize(run, run_dir / "logs")
    logs = read_logs(run_dir)
    assert logs.formats == {"tensorboard"}
    # RLinf logs global step N at TensorBoard step N-1: each checkpoint's step was logged
    for tag in ("env/success_once", "train/actor/policy_loss", "train/critic/value_loss", "time/step"):
        assert {n - 1 for n in steps_of(run)} <= set(logs.series[tag].steps), tag
    result = make_report(run_dir, tmp_path / "report", title=run)
    assert result.status == 0, result.summary
    assert "best success rate" in result.summary
    assert (tmp_path / "report" / "index.html").is_file() and any((tmp_path / "report" / "figures").iterdir())


@pytest.mark.parametrize("run", RUNS)
def test_the_report_reaches_the_step_of_the_newest_checkpoint(run, tmp_path, capsys):
    """RLinf logs its step N at N-1 (the recipe's loggedStep): `report` says the trainer's step,
    the one the newest checkpoint is named after, and the step it was logged as."""
    from rlinf_eks.__main__ import main

    run_dir = tmp_path / "run"
    materialize(run, run_dir / "logs")
    assert main(["report", "quickstart", "--run-dir", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    newest = steps_of(run)[-1]
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step reached:")]
    assert line.startswith(f"step reached: {newest} (logged as step {newest - 1}, the trainer logs step N at N-1; "), line
