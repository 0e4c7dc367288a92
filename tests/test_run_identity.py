"""A run's identity: the run directory belongs to one model, dialect and trainer config; a run of
another identity stops at once instead of resuming from another model's checkpoints, and
``workload.runName`` starts a new run beside the old one. The guard run for real, the paths, and
the diff's words."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rlinf_eks.offline.diff.diff import diff_plans
from rlinf_eks.trainers.base import COMPLETE_MARKER
from rlinf_eks.workload import exit_codes, scripts
from rlinf_eks.workload.run import resolve_run, run_identity
from tests.harness import plan_stack, settings

BASH = shutil.which("bash")


def guard(tmp_path: Path, identity: str) -> subprocess.CompletedProcess:
    values = {
        "RUN_DIR": tmp_path / "run", "RUN_IDENTITY": identity, "EXIT_RUN_MISMATCH": exit_codes.RUN_MISMATCH,
        "CHECKPOINT_PATTERNS": f"{tmp_path}/run/logs/checkpoints/global_step_*", "COMPLETE_MARKER": COMPLETE_MARKER,
    }
    text = scripts.render(values, scripts.CHECKPOINTS + scripts.RUN_IDENTITY + '\ncheck_run_identity || exit "${EXIT_RUN_MISMATCH}"\n')
    (tmp_path / "guard.sh").write_text(text)
    return subprocess.run([BASH, str(tmp_path / "guard.sh")], capture_output=True, text=True, timeout=60)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    if BASH is None:
        pytest.skip("bash is needed to run the guard")
    return tmp_path


def test_a_new_run_directory_is_taken_and_the_same_run_goes_on(run_dir):
    assert guard(run_dir, "rlinf-embodied cfg model=a").returncode == 0
    assert (run_dir / "run" / ".rlinf-eks" / "run-identity").read_text().strip() == "rlinf-embodied cfg model=a"
    assert guard(run_dir, "rlinf-embodied cfg model=a").returncode == 0


def test_another_model_stops_at_once_when_the_directory_holds_complete_checkpoints(run_dir):
    assert guard(run_dir, "rlinf-embodied cfg model=a").returncode == 0
    step = run_dir / "run" / "logs" / "checkpoints" / "global_step_10"
    step.mkdir(parents=True)
    (step / COMPLETE_MARKER).write_text("10\n")
    done = guard(run_dir, "rlinf-embodied cfg model=b")
    assert done.returncode == exit_codes.RUN_MISMATCH == 94
    (line,) = done.stderr.strip().splitlines()
    assert "holds the checkpoints of another run (rlinf-embodied cfg model=a; newest" in line and "set workload.runName" in line
    # the recorded identity is the old run's still
    assert (run_dir / "run" / ".rlinf-eks" / "run-identity").read_text().strip() == "rlinf-embodied cfg model=a"


def test_another_model_takes_over_a_directory_without_a_complete_checkpoint(run_dir):
    assert guard(run_dir, "rlinf-embodied cfg model=a").returncode == 0
    (run_dir / "run" / "logs" / "checkpoints" / "global_step_10").mkdir(parents=True)  # cut off: no marker
    assert guard(run_dir, "rlinf-embodied cfg model=b").returncode == 0
    assert (run_dir / "run" / ".rlinf-eks" / "run-identity").read_text().strip() == "rlinf-embodied cfg model=b"


def test_the_identity_is_the_dialect_config_and_model_and_run_name_moves_the_run():
    s = settings(gpuNodes={"nodeCount": 2}, workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-embodied"}})
    assert run_identity(s) == "rlinf-embodied maniskill_ppo_openvlaoft model=hf://RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Main"
    named = settings(gpuNodes={"nodeCount": 2}, workload={"image": "x/y:1", "runName": "try2"})
    run = resolve_run(named, "multi")
    # beside the default run's folder, never inside it (its restore syncs its whole prefix)
    assert run.paths.root == "/fsx/multi-runs/try2" and run.paths.s3_prefix == "multi-runs/try2"
    local = resolve_run(settings(workload={"image": "x/y:1", "runName": "try2"}), "single")
    assert local.paths.root == "/rlinf-run" and local.paths.s3_prefix == "single-runs/try2"
    assert local.paths.location == "s3://<checkpoint bucket>/single-runs/try2/"


def _verdict(stack: str, *sets: str) -> str:
    base, new = plan_stack(stack).to_json(), plan_stack(stack, *sets).to_json()
    (warning,) = [w for w in diff_plans(base, new).warnings if "replaces the training run" in w]
    return warning


@pytest.mark.parametrize(
    "sets, says",
    [
        (("workload.model.source=hf://RLinf/Other-Model",), "the new run stops at once (exit 94, not retried by the manual launcher) if /fsx/multi-node holds complete checkpoints"),
        (("workload.runName=try2",), "the new run is a new run in /fsx/multi-node-runs/try2; the old run's checkpoints stay in /fsx/multi-node"),
        (("workload.progressTimeoutSeconds=3600",), "the new run resumes from the newest complete checkpoint of the same run in /fsx/multi-node"),
    ],
    ids=["model", "run-name", "same-run"],
)
def test_the_diff_says_what_the_new_run_does_with_the_checkpoints(sets, says):
    assert says in _verdict("multi-node", *sets)


def test_the_diff_never_promises_a_resume_the_trainer_cannot_do():
    assert "starts again from step 0 (its trainer cannot resume)" in _verdict("single-node", "workload.progressTimeoutSeconds=3600")


def test_a_named_run_of_a_node_local_stack_is_a_new_run_in_its_own_s3_prefix():
    says = _verdict("single-node", "workload.runName=try2", "workload.model.source=hf://Qwen/Qwen2.5-7B-Instruct")
    assert "the new run is a new run in s3://<checkpoint bucket>/single-node-runs/try2/" in says
    assert "the old run's checkpoints stay in s3://<checkpoint bucket>/single-node/" in says


def test_a_failed_look_for_checkpoints_never_stops_the_run(run_dir):
    assert guard(run_dir, "a").returncode == 0
    (run_dir / "run" / "logs" / "checkpoints" / "global_step_3").mkdir(parents=True)
    ((run_dir / "run" / "logs" / "checkpoints" / "global_step_3") / COMPLETE_MARKER).write_text("3\n")
    broken = run_dir / "bin"
    broken.mkdir()
    (broken / "python3").write_text("#!/bin/sh\nexit 1\n")
    (broken / "python3").chmod(0o755)
    import os

    text = (run_dir / "guard.sh").read_text()
    done = subprocess.run([BASH, "-c", f'PATH="{broken}:$PATH"; source /dev/stdin'], input=text.replace("RUN_IDENTITY=a", "RUN_IDENTITY=b"),
                          capture_output=True, text=True, timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr
