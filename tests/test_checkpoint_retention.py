"""Checkpoint retention, the rendered scripts run for real against folders: the launcher's
``checkpoints`` function (checkpoints.sh, programs/checkpoints.py) removes older local checkpoints
only once S3 holds them and never the newest complete one, the one being written or the resume
point; ``final`` marks only the trainer's own attempt; restore.sh brings back only the newest
complete checkpoint (of the newest attempt) and the run's other files; sync.sh records what it
uploaded and, with keepInBucket, deletes older checkpoints from the bucket. S3 is a folder behind a
fake ``aws`` CLI (tests/fake_aws.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlinf_eks.workload import scripts
from tests import fake_aws

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is needed to run the rendered scripts")
MARKER = scripts.COMPLETE_MARKER


def step(parent: Path, n: int, *, complete: bool, size: int = 16) -> Path:
    folder = parent / f"global_step_{n}"
    (folder / "actor").mkdir(parents=True)
    (folder / "actor" / "model.pt").write_bytes(b"x" * size)
    if complete:
        (folder / MARKER).write_text(f"{n}\n")
    return folder


def steps(parent: Path) -> list[int]:
    return sorted(int(p.name.rsplit("_", 1)[1]) for p in parent.glob("global_step_*"))


def checkpoints(tmp_path: Path, mode: str, pattern: str, *, keep: int = 0, record: str = "", resumed: str = "", settle: int = 900) -> subprocess.CompletedProcess:
    """The launcher's ``checkpoints MODE`` (the loop's one pass: mark then retain, for ``retain``)."""
    values = {"CHECKPOINT_PATTERNS": pattern, "COMPLETE_MARKER": MARKER, "UPLOAD_RECORD": record, "EXPORT_SETTLE_SECONDS": settle}
    body = scripts.CHECKPOINTS
    if mode == "retain":
        # the loop, one pass: the rendered program's sleep ends it
        body = body.replace("        time.sleep(10)\n", "        sys.exit(0)\n")
        assert "sys.exit(0)" in body
        mode = "loop"
    script = tmp_path / "checkpoints.sh"
    script.write_text(scripts.render(values, body + f'RETAIN_LOCAL={keep} RESUME_RECORD={resumed!r} checkpoints {mode}\n'))
    bin_dir = tmp_path / "pybin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)
    return subprocess.run([BASH, str(script)], env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}, capture_output=True, text=True, timeout=60)


def test_retention_removes_only_uploaded_older_checkpoints_and_keeps_the_newest_complete_and_the_one_being_written(tmp_path):
    parent = tmp_path / "run" / "checkpoints"
    for n in (1, 2, 3, 4, 5):
        step(parent, n, complete=True)
    step(parent, 6, complete=False)  # being written
    record = tmp_path / "uploaded"
    # S3 holds 1, 2 and 5; 3 and 4 not yet
    record.write_text("".join(f"{parent}/global_step_{n}\n" for n in (1, 2, 5)))
    result = checkpoints(tmp_path, "retain", f"{parent}/global_step_*", keep=2, record=str(record))
    assert result.returncode == 0, result.stderr
    # keep 2: 6 (being written) and 5 (the newest complete); 3 and 4 wait for their upload
    assert steps(parent) == [3, 4, 5, 6]
    assert "keepLocal=2; a copy is in S3" in result.stderr

    record.write_text("".join(f"{parent}/global_step_{n}\n" for n in (3, 4, 5)))
    assert checkpoints(tmp_path, "retain", f"{parent}/global_step_*", keep=2, record=str(record)).returncode == 0
    assert steps(parent) == [5, 6]


def test_a_removal_cut_off_midway_is_never_marked_again_nor_resumed_from_and_the_next_pass_ends_it(tmp_path):
    parent = tmp_path / "run" / "checkpoints"
    for n in (1, 2, 3):
        step(parent, n, complete=True)
    # the launcher was killed removing 1: its tombstone written, its marker gone, files left
    (parent / "global_step_1" / scripts.REMOVING).write_text("")
    (parent / "global_step_1" / MARKER).unlink()
    pattern = f"{parent}/global_step_*"
    assert checkpoints(tmp_path, "mark", pattern).returncode == 0
    assert not (parent / "global_step_1" / MARKER).exists()  # 1 < 3, yet not marked again
    assert checkpoints(tmp_path, "retain", pattern, keep=3, record=str(tmp_path / "none")).returncode == 0
    assert steps(parent) == [2, 3]


def test_retention_without_an_upload_record_keeps_everything_and_never_removes_the_resume_point(tmp_path):
    parent = tmp_path / "run" / "checkpoints"
    for n in (1, 2, 3):
        step(parent, n, complete=True)
    # no record yet (the sync has not uploaded since the pod started): nothing leaves the node
    assert checkpoints(tmp_path, "retain", f"{parent}/global_step_*", keep=1, record=str(tmp_path / "none")).returncode == 0
    assert steps(parent) == [1, 2, 3]
    record = tmp_path / "uploaded"
    record.write_text("".join(f"{parent}/global_step_{n}\n" for n in (1, 2, 3)))
    resumed = tmp_path / "resumed-from"
    resumed.write_text(f"{parent}/global_step_3\n")
    assert checkpoints(tmp_path, "retain", f"{parent}/global_step_*", keep=1, record=str(record), resumed=str(resumed)).returncode == 0
    assert steps(parent) == [3]


def test_on_the_shared_filesystem_a_checkpoint_leaves_only_once_fsx_had_time_to_export_it(tmp_path):
    parent = tmp_path / "fsx" / "checkpoints"
    for n in (1, 2, 3, 4):
        step(parent, n, complete=True)
    old = time.time() - 1000
    for n in (1, 2):
        os.utime(parent / f"global_step_{n}" / MARKER, (old, old))
    assert checkpoints(tmp_path, "retain", f"{parent}/global_step_*", keep=2, settle=900).returncode == 0
    # 1 and 2 were marked 1000 s ago (exported); 3 is beyond keep but was marked just now
    assert steps(parent) == [3, 4]


def test_a_new_attempt_never_marks_an_earlier_attempts_cut_off_step_and_retention_drops_it(tmp_path):
    root = tmp_path / "run" / "checkpoints"
    first, second = root / "attempt-1" / "actor", root / "attempt-2" / "actor"
    for n in (25, 50):
        step(first, n, complete=True)
    step(first, 75, complete=False)  # the first attempt died writing it
    step(second, 25, complete=False)  # the second attempt trains again from step 0
    pattern = f"{root}/attempt-*/*/global_step_*"
    result = checkpoints(tmp_path, "mark", pattern)
    # step numbers start again: 25 < 75 says nothing about the second attempt's save
    assert not (second / "global_step_25" / MARKER).exists(), result.stderr
    # the trainer exits 0: every step of its own attempt is complete, not the first attempt's 75
    assert checkpoints(tmp_path, "final", pattern).returncode == 0
    assert (second / "global_step_25" / MARKER).exists()
    assert not (first / "global_step_75" / MARKER).exists()
    newest = checkpoints(tmp_path, "newest", pattern)
    assert newest.stdout.strip() == str(second / "global_step_25")
    # keep 2 counts the second attempt's 25 and the first attempt's 50 (older attempt, older)
    record = tmp_path / "uploaded"
    record.write_text("".join(f"{d}\n" for d in (first / "global_step_25", first / "global_step_50", second / "global_step_25")))
    assert checkpoints(tmp_path, "retain", pattern, keep=2, record=str(record)).returncode == 0
    assert steps(first) == [50] and steps(second) == [25]


def test_an_attempt_that_saved_nothing_is_still_the_current_one(tmp_path):
    root = tmp_path / "run" / "checkpoints"
    first = root / "attempt-1" / "actor"
    step(first, 25, complete=True)
    step(first, 50, complete=False)  # cut off
    (root / "attempt-2").mkdir()  # trainer.sh began attempt 2, which exits 0 before its first save
    pattern = f"{root}/attempt-*/*/global_step_*"
    assert checkpoints(tmp_path, "final", pattern).returncode == 0
    assert not (first / "global_step_50" / MARKER).exists()
    assert checkpoints(tmp_path, "retain", pattern, keep=2, record=str(tmp_path / "none")).returncode == 0
    assert steps(first) == [25]  # the cut-off step goes; the complete one waits for its upload


# --- restore and sync against the fake S3 -----------------------------------------------------


@pytest.fixture
def aws(tmp_path: Path) -> dict[str, str]:
    return fake_aws.install(tmp_path)


def bucket(tmp_path: Path) -> Path:
    return tmp_path / "s3" / "bkt" / "stack"


def run_script(tmp_path: Path, name: str, text: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / name).write_text(text)
    return subprocess.run([BASH, str(tmp_path / name)], env=env, capture_output=True, text=True, timeout=60)


def test_restore_brings_back_the_newest_complete_checkpoint_and_every_other_file_only(tmp_path, aws):
    s3 = bucket(tmp_path)
    parent = s3 / "logs" / "rlinf" / "checkpoints"
    for n in (1, 2, 3, 4):
        step(parent, n, complete=True)
    step(parent, 5, complete=False)  # files up, marker not: an upload cut off
    (s3 / "logs" / "train.log").write_text("step 5\n")
    (s3 / ".rlinf-eks").mkdir()
    (s3 / ".rlinf-eks" / "run-identity").write_text("rlinf-embodied x\n")
    run = tmp_path / "run"
    run.mkdir()
    result = run_script(tmp_path, "restore.sh", scripts.restore(), {**aws, "RUN_DIR": str(run)})
    assert result.returncode == 0, result.stderr
    assert steps(run / "logs" / "rlinf" / "checkpoints") == [4]
    assert (run / "logs/rlinf/checkpoints/global_step_4" / MARKER).exists()
    assert (run / "logs" / "train.log").read_text() == "step 5\n"
    assert (run / ".rlinf-eks" / "run-identity").exists()
    assert "1 checkpoint(s)" in result.stderr


def test_restore_of_a_fresh_run_is_empty_and_a_failed_listing_fails_it(tmp_path, aws):
    run = tmp_path / "run"
    run.mkdir()
    assert run_script(tmp_path, "restore.sh", scripts.restore(), {**aws, "RUN_DIR": str(run)}).returncode == 0
    assert list(run.iterdir()) == []
    (tmp_path / "awsbin" / "aws").write_text("#!/bin/bash\necho 'An error occurred (AccessDenied)' >&2\nexit 254\n")
    failed = run_script(tmp_path, "restore.sh", scripts.restore(), {**aws, "RUN_DIR": str(run)})
    assert failed.returncode == 254 and "could not list s3://bkt/stack/" in failed.stderr


def test_restore_of_a_dialect_that_cannot_resume_takes_the_newest_attempt_and_eval_takes_the_named_step(tmp_path, aws):
    s3 = bucket(tmp_path)
    first, second = s3 / "checkpoints" / "attempt-1", s3 / "checkpoints" / "attempt-2"
    for n in (25, 50):
        step(first / "actor", n, complete=True)
    step(second / "actor", 25, complete=True)
    (first / "run_1.log").write_text("attempt 1\n")
    (second / "run_2.log").write_text("attempt 2\n")
    run = tmp_path / "run"
    run.mkdir()
    assert run_script(tmp_path, "restore.sh", scripts.restore(), {**aws, "RUN_DIR": str(run)}).returncode == 0
    assert steps(run / "checkpoints/attempt-2/actor") == [25] and steps(run / "checkpoints/attempt-1/actor") == []
    # the logs of both attempts are the run's files: both come back (the next attempt is 3)
    assert (run / "checkpoints/attempt-1/run_1.log").exists() and (run / "checkpoints/attempt-2/run_2.log").exists()

    evaluated = tmp_path / "eval-run"
    evaluated.mkdir()
    named = run_script(tmp_path, "restore-eval.sh", scripts.restore("global_step_50"), {**aws, "RUN_DIR": str(evaluated)})
    assert named.returncode == 0, named.stderr
    assert steps(evaluated / "checkpoints/attempt-1/actor") == [50] and steps(evaluated / "checkpoints/attempt-2/actor") == []


def test_sync_records_what_it_uploaded_and_keeps_keep_in_bucket_checkpoints_there(tmp_path, aws):
    run, state = tmp_path / "run", tmp_path / "state"
    state.mkdir()
    parent = run / "logs" / "checkpoints"
    for n in (1, 2, 3, 4):
        step(parent, n, complete=True)
    step(parent, 5, complete=False)
    (parent / "global_step_4" / scripts.REMOVING).write_text("")  # being removed, marker still there
    (state / "exit-code").write_text("0\n")
    env = {**aws, "RUN_DIR": str(run), "STATE_DIR": str(state), "SYNC_INTERVAL_SECONDS": "30"}
    result = run_script(tmp_path, "sync.sh", scripts.sync(keep_in_bucket=2), env)
    assert result.returncode == 0, result.stderr
    recorded = (state / scripts.UPLOAD_RECORD).read_text().split()
    assert recorded == [str(parent / f"global_step_{n}") for n in (1, 2, 3, 4)]
    s3 = bucket(tmp_path) / "logs" / "checkpoints"
    # the two newest complete ones stay; 5 (not complete) and a removal's tombstone never went up
    assert steps(s3) == [3, 4] and all((s3 / f"global_step_{n}" / MARKER).exists() for n in (3, 4))
    assert not (s3 / "global_step_4" / scripts.REMOVING).exists()
    assert "keepInBucket=2" in result.stderr

    # without keepInBucket the bucket keeps every one
    assert run_script(tmp_path, "sync-all.sh", scripts.sync(), env).returncode == 0
    assert steps(s3) == [1, 2, 3, 4]


def test_a_step_the_trainer_begins_during_an_upload_is_not_sent_with_it(tmp_path, aws):
    """The upload's first pass leaves out every step but those complete when it began: one the
    trainer begins between the look at the run directory and the copy (here: made by the first
    `aws s3 sync` itself) stays on the node, files and all, until it is complete."""
    run, state = tmp_path / "run", tmp_path / "state"
    state.mkdir()
    parent = run / "logs" / "checkpoints"
    step(parent, 1, complete=True)
    (state / "exit-code").write_text("0\n")
    wrap = tmp_path / "wrap"
    wrap.mkdir()
    begun = parent / "global_step_2"
    (wrap / "aws").write_text(
        f"#!{BASH}\nif [ \"$2\" = sync ] && [ ! -e {begun} ]; then mkdir -p {begun} && echo shard > {begun}/shard-0; fi\n"
        f'exec {tmp_path / "awsbin" / "aws"} "$@"\n'
    )
    (wrap / "aws").chmod(0o755)
    env = {**aws, "PATH": f"{wrap}:{aws['PATH']}", "RUN_DIR": str(run), "STATE_DIR": str(state), "SYNC_INTERVAL_SECONDS": "30"}
    result = run_script(tmp_path, "sync.sh", scripts.sync(), env)
    assert result.returncode == 0, result.stderr
    s3 = bucket(tmp_path) / "logs" / "checkpoints"
    assert (begun / "shard-0").exists() and steps(s3) == [1] and (s3 / "global_step_1" / MARKER).exists()
    assert not (s3 / "global_step_2").exists()
