"""Complete checkpoints, run for real: the rendered launch.sh (with a fake ``ray``) runs the rendered
trainer.sh, whose ``python`` is a fake trainer that writes RLinf-layout checkpoints and is killed
(SIGKILL) in the middle of a save. The restarted run must resume from the previous complete step;
a second failure from that same step must stop retrying (exit 86). The S3 upload and restore
scripts run against a fake ``aws`` CLI (tests/fake_aws.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlinf_eks.trainers import launch_for
from rlinf_eks.workload import progress, scripts
from tests import fake_aws
from tests.harness import settings

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is needed to run the rendered scripts")
MARKER = scripts.COMPLETE_MARKER


def write_progress(folder: Path, run_dir: Path) -> None:
    """The progress watchdog both launchers run the trainer under, beside trainer.sh (off here)."""
    (folder / "progress.sh").write_text(progress.progress_script(run_dir=str(run_dir), timeout_seconds=None, stop_at_time=None, stop_budget_seconds=60))


FAKE_RAY_CLI = "#!/bin/bash\nexit 0\n"
FAKE_RAY_MODULE = """

def init(*args, **kwargs): pass
def shutdown(): pass
def nodes(): return [{"Alive": True}]
def cluster_resources(): return {"GPU": 8.0}
"""

# The fake trainer: resumes from runner.resume_dir=<dir> (its step + 1), saves every step where
# RLinf's embodied runner does, from its command line (<logger.log_path>/<logger.experiment_name>/
# checkpoints/global_step_<N>/actor/<shard>, rlinf/runners/embodied_runner.py:643-652), and, at
# FAIL_AT_STEP, dies by SIGKILL with the save half written. FAIL_AT_START: fails before its first step.
FAKE_TRAINER = f"""#!{sys.executable}
import os, re, signal, sys
args = sys.argv[1:]
given = dict(a.split("=", 1) for a in args if "=" in a)
checkpoints = os.path.join(given["runner.logger.log_path"], given["runner.logger.experiment_name"], "checkpoints")
resume = [a.split("=", 1)[1] for a in args if a.startswith("runner.resume_dir=")]
with open(os.environ["FAKE_TRAINER_LOG"], "a") as log:
    log.write((resume[0] if resume else "fresh") + "\\n")
if os.environ.get("FAIL_AT_START"):
    sys.exit(1)
start = int(re.search(r"global_step_(\\d+)$", resume[0]).group(1)) + 1 if resume else 1
fail_at = int(os.environ.get("FAIL_AT_STEP", "0"))
for step in range(start, int(os.environ["LAST_STEP"]) + 1):
    actor = os.path.join(checkpoints, f"global_step_{{step}}", "actor")
    os.makedirs(actor, exist_ok=True)
    with open(os.path.join(actor, "model_rank_0.pt"), "w") as shard:
        shard.write("half a shard")
        shard.flush()
        if step == fail_at:
            os.kill(os.getpid(), signal.SIGKILL)
        shard.write(" and the rest\\n")
"""


@pytest.fixture
def run(tmp_path: Path):
    """A one-node manual launcher around the rendered trainer.sh of rlinf-embodied."""
    bin_dir, module_dir, run_dir = tmp_path / "bin", tmp_path / "py" / "ray", tmp_path / "run"
    bin_dir.mkdir()
    module_dir.mkdir(parents=True)
    run_dir.mkdir()
    (tmp_path / "state").mkdir()
    for name, text in (("ray", FAKE_RAY_CLI), ("python", FAKE_TRAINER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    (module_dir / "__init__.py").write_text(FAKE_RAY_MODULE)
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-embodied", "workdir": str(tmp_path)}})
    log_dir = run_dir / "logs"
    launch = launch_for(s, nnodes=1, gpus_per_node=8, log_dir=str(log_dir), checkpoint_dir=str(run_dir / "checkpoints"), inputs_root=str(run_dir / "models"))
    (tmp_path / "trainer.sh").write_text(launch.script())
    write_progress(tmp_path, run_dir)
    (tmp_path / "launch.sh").write_text(
        scripts.manual_launch(
            nnodes=1, gpus_per_node=8, cpus_per_node=8, object_store_bytes=1 << 30, head_host="127.0.0.1", ray_port=6379,
            join_timeout_seconds=60, grace_seconds=60, run_dir=str(run_dir), state_dir=str(tmp_path / "state"),
            trainer_pythonpath="/workspace", trainer_script=str(tmp_path / "trainer.sh"),
            checkpoint_patterns=launch.checkpoint_patterns,
        )
    )  # fmt: skip
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp_path / "py"),
        "HOME": str(tmp_path),
        "JOB_COMPLETION_INDEX": "0",
        "FAKE_TRAINER_LOG": str(tmp_path / "trainer.log"),
    }

    def attempt(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([BASH, str(tmp_path / "launch.sh")], env={**env, **extra}, capture_output=True, text=True, timeout=60)

    attempt.log_dir = log_dir  # type: ignore[attr-defined]
    attempt.resumes = lambda: (tmp_path / "trainer.log").read_text().split()  # type: ignore[attr-defined]
    return attempt


def step_dir(log_dir: Path, step: int) -> Path:
    """Where the trainer wrote step ``step`` (the default experiment name, rlinf)."""
    return log_dir / "rlinf" / "checkpoints" / f"global_step_{step}"


def test_a_run_killed_mid_checkpoint_resumes_from_the_previous_complete_step_and_a_repeat_failure_stops(run):
    first = run(LAST_STEP="5", FAIL_AT_STEP="3")
    assert first.returncode == 128 + 9, first.stderr  # the trainer was SIGKILLed
    log_dir = run.log_dir
    # step 3 was cut off: its shard is half written and it carries no marker; 1 and 2 are complete
    assert (step_dir(log_dir, 3) / "actor" / "model_rank_0.pt").read_text() == "half a shard"
    assert not (step_dir(log_dir, 3) / MARKER).exists()
    assert (step_dir(log_dir, 1) / MARKER).exists() and (step_dir(log_dir, 2) / MARKER).exists()

    # the restarted run resumes from step 2, not the partial step 3, and fails again at once
    second = run(LAST_STEP="5", FAIL_AT_START="1")
    assert run.resumes()[-1] == str(step_dir(log_dir, 2))
    # failing again from the same complete checkpoint: a trainer bug, the pod says so
    assert second.returncode == scripts.REPEATED_FAILURE, second.stderr
    assert "failed again (status 1) from the same checkpoint" in second.stderr

    # a run that gets further (it rewrites step 3 and finishes) marks every step it wrote
    third = run(LAST_STEP="4")
    assert third.returncode == 0, third.stderr
    assert run.resumes()[-1] == str(step_dir(log_dir, 2))
    assert all((step_dir(log_dir, n) / MARKER).exists() for n in (1, 2, 3, 4))
    assert (step_dir(log_dir, 3) / "actor" / "model_rank_0.pt").read_text() == "half a shard and the rest\n"
    assert not (log_dir.parent / ".rlinf-eks" / "last-failure").exists()


def test_a_failure_after_progress_is_not_a_repeat(run):
    assert run(LAST_STEP="5", FAIL_AT_STEP="3").returncode == 128 + 9
    # resumes from 2, makes progress (3 and 4 complete), fails at 5: a new resume point, retry allowed
    again = run(LAST_STEP="6", FAIL_AT_STEP="5")
    assert again.returncode == 128 + 9, again.stderr
    assert (step_dir(run.log_dir, 4) / MARKER).exists() and not (step_dir(run.log_dir, 5) / MARKER).exists()


# --- the S3 upload and restore ------------------------------------------------------------------

@pytest.fixture
def aws(tmp_path: Path) -> dict[str, str]:
    return fake_aws.install(tmp_path)


def write_step(run_dir: Path, step: int, complete: bool) -> None:
    actor = run_dir / "logs" / "checkpoints" / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    (actor / "model_rank_0.pt").write_text(f"step {step}\n")
    if complete:
        (actor.parent / MARKER).write_text(f"{step}\n")


def test_the_upload_skips_a_partial_step_and_the_restore_drops_an_upload_cut_off_midway(tmp_path, aws):
    run_dir, state = tmp_path / "run", tmp_path / "state"
    state.mkdir()
    write_step(run_dir, 1, complete=True)
    write_step(run_dir, 2, complete=False)
    (run_dir / "logs" / "train.log").write_text("step 2\n")
    (state / "exit-code").write_text("1\n")  # the trainer has ended: straight to the final upload
    (tmp_path / "sync.sh").write_text(scripts.sync())
    env = {**aws, "RUN_DIR": str(run_dir), "STATE_DIR": str(state), "SYNC_INTERVAL_SECONDS": "30"}
    result = subprocess.run([BASH, str(tmp_path / "sync.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    s3 = tmp_path / "s3" / "bkt" / "stack"
    assert (s3 / "logs/checkpoints/global_step_1/actor/model_rank_0.pt").exists()
    assert (s3 / "logs/checkpoints/global_step_1" / MARKER).exists()
    assert not (s3 / "logs/checkpoints/global_step_2").exists()
    assert (s3 / "logs/train.log").exists()

    # an earlier upload cut off between a step's files and its marker
    (s3 / "logs/checkpoints/global_step_3/actor").mkdir(parents=True)
    (s3 / "logs/checkpoints/global_step_3/actor/model_rank_0.pt").write_text("step 3\n")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (tmp_path / "restore.sh").write_text(scripts.restore())
    restored = subprocess.run([BASH, str(tmp_path / "restore.sh")], env={**aws, "RUN_DIR": str(fresh)}, capture_output=True, text=True, timeout=60)
    assert restored.returncode == 0, restored.stderr
    assert (fresh / "logs/checkpoints/global_step_1" / MARKER).exists()
    # only steps whose marker is in S3 are restored: the cut-off step 3 never comes down
    assert not (fresh / "logs/checkpoints/global_step_3").exists()


def test_the_kuberay_driver_marks_every_checkpoint_once_the_trainer_succeeds(tmp_path):
    run_dir = tmp_path / "run"
    for step in (1, 2):
        write_step(run_dir, step, complete=False)
    (tmp_path / "trainer.sh").write_text("exit 0\n")
    write_progress(tmp_path, run_dir)
    patterns = (f"{run_dir}/logs/checkpoints/global_step_*",)
    (tmp_path / "driver.sh").write_text(scripts.kuberay_driver(trainer_pythonpath="/w", trainer_script=str(tmp_path / "trainer.sh"), checkpoint_patterns=patterns))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    result = subprocess.run([BASH, str(tmp_path / "driver.sh")], env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert all((run_dir / "logs/checkpoints" / f"global_step_{n}" / MARKER).exists() for n in (1, 2))


def test_the_kuberay_driver_passes_ray_job_stop_to_the_trainer_under_the_progress_watchdog(tmp_path):
    # The watchdog ignores signals sent to it (the launcher signals the whole group); the driver
    # must therefore signal the group, or `ray job stop` would wait out its SIGKILL timeout.
    started = tmp_path / "started"
    (tmp_path / "trainer.sh").write_text(f'trap "echo trainer stopped; exit 143" TERM\ntouch {started}\nsleep 100 & wait\n')
    write_progress(tmp_path, tmp_path / "run")
    (tmp_path / "driver.sh").write_text(scripts.kuberay_driver(trainer_pythonpath="/w", trainer_script=str(tmp_path / "trainer.sh")))
    proc = subprocess.Popen([BASH, str(tmp_path / "driver.sh")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    while not started.exists():
        assert time.monotonic() < deadline, "the trainer never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 143 and "trainer stopped" in out, out
