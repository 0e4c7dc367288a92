"""A run that lives for days keeps its node's disk (issue 52, item 6): the rendered launch.sh, with
the sync sidecar's rendered sync.sh beside it and restore.sh before a restart, runs a fake trainer
that writes checkpoints of a chosen size over many saves, is killed in the middle of a save,
restarts on a fresh node (the run directory restored from S3) and resumes. The disk the run
directory takes, measured by the trainer after each save (its peak: retention only lowers it),
stays within (keepLocal + 1) saves plus the files beside them; the resume point survives the
restart; a rerun of a dialect that cannot resume (verl-ppo) never adopts the earlier attempt's
checkpoints.

Ray is the fake of tests/test_checkpoint_resume.py: the disk is the launcher's checkpoint loop, the
trainer's saves and the sidecar's uploads, none of which real Ray takes part in (real Ray hosts the
trainer; tests/test_launch_real_ray.py runs the same launch.sh with it). S3 is a folder behind the
fake ``aws`` CLI (tests/fake_aws.py). The polls are shortened in the rendered scripts (each text
replaced must occur once), the trainer's step takes STEP_SECONDS: saves far closer together than a
real run's, with the sidecar's uploads keeping pace as its interval is made to."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlinf_eks.trainers import launch_for
from rlinf_eks.workload import scripts
from tests import fake_aws
from tests.harness import settings
from tests.test_checkpoint_resume import FAKE_RAY_CLI, FAKE_RAY_MODULE, write_progress

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is needed to run the rendered scripts")
MARKER = scripts.COMPLETE_MARKER
SAVE_BYTES = 1 << 20
KEEP_LOCAL = 2
STEP_SECONDS = "1.0"
# The launcher's checkpoint loop (10 s) and the sidecar's poll (5 s): shortened.
SHORT = {"launch.sh": {"        time.sleep(10)\n": "        time.sleep(0.1)\n"}, "sync.sh": {"sleep 5 & wait $!": "sleep 0.1 & wait $!"}}

# Both layouts from its command line: RLinf's <logger.log_path>/<experiment>/checkpoints/
# global_step_<N>/actor (it resumes from runner.resume_dir, its step + 1), veRL's
# <trainer.default_local_dir>/actor/global_step_<N> (from step 1 every time). Each save writes
# SAVE_BYTES; after it, the bytes under RUN_DIR go to FAKE_DISK_LOG. At FAIL_AT_STEP it dies by
# SIGKILL with the save half written.
FAKE_TRAINER = f"""#!{sys.executable}
import os, re, signal, sys, time
args = sys.argv[1:]
given = dict(a.split("=", 1) for a in args if "=" in a)
if "trainer.default_local_dir" in given:
    folder = lambda step: os.path.join(given["trainer.default_local_dir"], "actor", f"global_step_{{step}}")
else:
    root = os.path.join(given["runner.logger.log_path"], given["runner.logger.experiment_name"], "checkpoints")
    folder = lambda step: os.path.join(root, f"global_step_{{step}}", "actor")
resume = given.get("runner.resume_dir")
with open(os.environ["FAKE_TRAINER_LOG"], "a") as log:
    log.write((resume or "fresh") + "\\n")
start = int(re.search(r"global_step_(\\d+)$", resume).group(1)) + 1 if resume else 1
fail_at = int(os.environ.get("FAIL_AT_STEP", "0"))
size = int(os.environ["SAVE_BYTES"])

def used():
    total = 0
    for base, _dirs, files in os.walk(os.environ["RUN_DIR"]):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(base, name))
            except OSError:
                pass
    return total

for step in range(start, int(os.environ["LAST_STEP"]) + 1):
    time.sleep(float(os.environ["STEP_SECONDS"]))  # the training step
    os.makedirs(folder(step), exist_ok=True)
    with open(os.path.join(folder(step), "model.pt"), "wb") as shard:
        shard.write(b"x" * (size // 2))
        shard.flush()
        if step == fail_at:
            os.kill(os.getpid(), signal.SIGKILL)
        shard.write(b"x" * (size - size // 2))
    with open(os.environ["FAKE_DISK_LOG"], "a") as disk:
        disk.write(f"{{step}} {{used()}}\\n")
"""


@dataclass
class Node:
    """One pod's life: a fresh run directory (emptyDir) and state directory, restored from S3."""

    run_dir: Path
    state: Path


class Run:
    """The run of one stack's trainer over pods that come and go, S3 shared between them."""

    def __init__(self, tmp_path: Path, dialect: str, *, keep_local: int = KEEP_LOCAL, restore: str = "", sync: str = ""):
        """``keep_local`` 0: no retention; ``restore``, ``sync``: other scripts than today's (the
        benchmark's before)."""
        self.tmp = tmp_path
        self.keep_local, self.restore_text, self.sync_text = keep_local, restore or scripts.restore(), sync or scripts.sync()
        self.aws = fake_aws.install(tmp_path)
        bin_dir, module_dir = tmp_path / "bin", tmp_path / "py" / "ray"
        bin_dir.mkdir()
        module_dir.mkdir(parents=True)
        for name, text in (("ray", FAKE_RAY_CLI), ("python", FAKE_TRAINER)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        (bin_dir / "python3").symlink_to(sys.executable)
        (module_dir / "__init__.py").write_text(FAKE_RAY_MODULE)
        self.path = f"{bin_dir}:{self.aws['PATH']}"
        workdir = tmp_path / "workdir"
        (workdir / "examples").mkdir(parents=True)
        (workdir / "examples" / "overwrite_vla_ckpt_utils.sh").write_text("exit 0\n")  # veRL's prepare step
        self.run_dir = tmp_path / "pod" / "rlinf-run"
        s = settings(workload={"image": "x/y:1", "trainer": {"dialect": dialect, "workdir": str(workdir)}})
        self.launch = launch_for(
            s, nnodes=1, gpus_per_node=8, log_dir=str(self.run_dir / "logs"), checkpoint_dir=str(self.run_dir / "checkpoints"),
            inputs_root=str(tmp_path / "models"),
        )  # fmt: skip
        self.pod = 0

    def script(self, name: str, text: str) -> Path:
        for rendered, short in SHORT.get(name, {}).items():
            assert text.count(rendered) == 1, f"{name} should have one {rendered!r}"
            text = text.replace(rendered, short)
        path = self.tmp / "scripts" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return path

    def node(self) -> Node:
        """A new pod: the node-local run directory and state directory start empty."""
        self.pod += 1
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        state = self.tmp / f"state-{self.pod}"
        state.mkdir()
        return Node(self.run_dir, state)

    def restore(self, node: Node) -> subprocess.CompletedProcess:
        script = self.script("restore.sh", self.restore_text)
        return subprocess.run([BASH, str(script)], env={**self.aws, "PATH": self.path, "RUN_DIR": str(node.run_dir)}, capture_output=True, text=True, timeout=60)

    def train(self, node: Node, **extra: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
        """launch.sh with sync.sh beside it (the sidecar uploads every poll); both statuses."""
        (self.tmp / "scripts").mkdir(exist_ok=True)
        (self.tmp / "scripts" / "trainer.sh").write_text(self.launch.script())
        write_progress(self.tmp / "scripts", node.run_dir)
        launch = self.script(
            "launch.sh",
            scripts.manual_launch(
                nnodes=1, gpus_per_node=8, cpus_per_node=8, object_store_bytes=1 << 30, head_host="127.0.0.1", ray_port=6379,
                join_timeout_seconds=60, grace_seconds=60, run_dir=str(node.run_dir), state_dir=str(node.state),
                trainer_pythonpath="/workspace", trainer_script=str(self.tmp / "scripts" / "trainer.sh"),
                checkpoint_patterns=self.launch.checkpoint_patterns, keep_local=self.keep_local, shared=False,
            ),
        )  # fmt: skip
        sync = self.script("sync.sh", self.sync_text)
        env = {
            **self.aws, "PATH": self.path, "PYTHONPATH": str(self.tmp / "py"), "HOME": str(self.tmp), "JOB_COMPLETION_INDEX": "0",
            "RUN_DIR": str(node.run_dir), "STATE_DIR": str(node.state), "SYNC_INTERVAL_SECONDS": "5",
            "FAKE_TRAINER_LOG": str(self.tmp / "trainer.log"), "FAKE_DISK_LOG": str(self.tmp / "disk.log"),
            "SAVE_BYTES": str(SAVE_BYTES), "STEP_SECONDS": STEP_SECONDS, **extra,
        }  # fmt: skip
        sidecar = subprocess.Popen([BASH, str(sync)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        trainer = subprocess.run([BASH, str(launch)], env=env, capture_output=True, text=True, timeout=120)
        out, err = sidecar.communicate(timeout=60)
        return trainer, subprocess.CompletedProcess(sidecar.args, sidecar.returncode, out, err)

    def disk(self) -> list[tuple[int, int]]:
        """(step, bytes under the run directory after that save), in the order of the saves."""
        return [(int(a), int(b)) for a, b in (line.split() for line in (self.tmp / "disk.log").read_text().split("\n") if line)]

    def peak(self) -> int:
        return max(used for _, used in self.disk())

    def resumes(self) -> list[str]:
        return (self.tmp / "trainer.log").read_text().split()

    def s3(self) -> Path:
        return self.tmp / "s3" / "bkt" / "stack"


def complete(parent: Path) -> list[int]:
    return sorted(int(p.name.rsplit("_", 1)[1]) for p in parent.glob("global_step_*") if (p / MARKER).exists())


# What sits beside the checkpoints: markers, logs, the launcher's state; far below one save.
BESIDE = 64 << 10
BUDGET = (KEEP_LOCAL + 1) * SAVE_BYTES + BESIDE


def test_a_resuming_run_keeps_its_disk_within_keep_local_saves_over_many_saves_a_kill_a_restore_and_a_resume(tmp_path):
    run = Run(tmp_path, "rlinf-embodied")
    node = run.node()
    assert run.restore(node).returncode == 0
    first, sync = run.train(node, LAST_STEP="12", FAIL_AT_STEP="10")
    assert first.returncode == 128 + 9, first.stderr  # killed in the middle of save 10
    assert sync.returncode == 0, sync.stderr
    checkpoints = node.run_dir / "logs" / "rlinf" / "checkpoints"
    # the node keeps 2: the cut-off 10 (it counts: it was being written) and 9, the newest complete
    # (8 too if the kill came before the launcher's next pass); the bucket holds 1..9
    assert complete(checkpoints)[-1] == 9 and len(complete(checkpoints)) <= 2, first.stderr
    assert (checkpoints / "global_step_10").exists() and not (checkpoints / "global_step_10" / MARKER).exists()
    assert complete(run.s3() / "logs" / "rlinf" / "checkpoints") == list(range(1, 10))
    assert run.peak() <= BUDGET, f"{run.peak()} bytes on the node after a save, budget {BUDGET}"

    # a new pod: restore brings back the resume point only, and the run resumes from it
    node = run.node()
    restored = run.restore(node)
    assert restored.returncode == 0, restored.stderr
    assert complete(checkpoints) == [9] and sorted(p.name for p in checkpoints.iterdir()) == ["global_step_9"]
    second, sync = run.train(node, LAST_STEP="16")
    assert second.returncode == 0, second.stderr
    assert run.resumes()[-1] == str(checkpoints / "global_step_9")
    # the trainer exited 0: 16 is complete, and 15 stays beside it (keepLocal 2; 14 too if the run
    # ended before the launcher's next pass)
    assert complete(checkpoints)[-2:] == [15, 16] and len(list(checkpoints.iterdir())) <= KEEP_LOCAL + 1
    assert complete(run.s3() / "logs" / "rlinf" / "checkpoints") == list(range(1, 17))
    assert run.peak() <= BUDGET, f"{run.peak()} bytes on the node after a save, budget {BUDGET}"


def test_a_rerun_of_a_dialect_that_cannot_resume_never_adopts_the_earlier_attempts_checkpoints(tmp_path):
    run = Run(tmp_path, "verl-ppo")
    node = run.node()
    assert run.restore(node).returncode == 0
    first, _ = run.train(node, LAST_STEP="8", FAIL_AT_STEP="6")
    assert first.returncode == 128 + 9, first.stderr
    attempts = node.run_dir / "checkpoints"
    assert complete(attempts / "attempt-1" / "actor")[-1] == 5 and (attempts / "attempt-1" / "actor" / "global_step_6").exists()

    node = run.node()
    assert run.restore(node).returncode == 0
    # veRL trains again from step 1 and dies writing its step 3: below the first attempt's 5
    second, sync = run.train(node, LAST_STEP="8", FAIL_AT_STEP="3")
    assert second.returncode == 128 + 9, second.stderr
    assert sync.returncode == 0, sync.stderr
    assert run.resumes()[-2:] == ["fresh", "fresh"]
    new = attempts / "attempt-2" / "actor"
    # the half-written step 3 is not taken for complete; the newest complete is the new attempt's 2
    assert (new / "global_step_3").exists() and not (new / "global_step_3" / MARKER).exists()
    assert complete(new)[-1] == 2
    # the first attempt's checkpoints (restored: its newest, 5) count as older than any of the
    # second's: they leave the node once in S3, and stay in the bucket, apart from the second's
    assert complete(attempts / "attempt-1" / "actor") in ([], [5])
    assert complete(run.s3() / "checkpoints" / "attempt-1" / "actor") == [1, 2, 3, 4, 5]
    assert complete(run.s3() / "checkpoints" / "attempt-2" / "actor") == [1, 2]
    assert not (run.s3() / "checkpoints" / "attempt-2" / "actor" / "global_step_3").exists()
    assert run.peak() <= BUDGET, f"{run.peak()} bytes on the node after a save, budget {BUDGET}"
