"""Which checkpoint write a stop waits for (programs/checkpoint_writes.py, run by launch.sh's
settle_checkpoints and the progress supervisor's Capacity Block stop): the one in progress at the
request, judged from the step directories and their files' times (set here, never waited for)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlinf_eks.workload import scripts

MARKER = scripts.COMPLETE_MARKER
QUIET = 30


@pytest.fixture(scope="module")
def settle():
    program: dict = {}
    exec(scripts.program("checkpoint_writes.py"), program)  # noqa: S102 - the pods' own program text
    return program["settle_checkpoint_writes"]


def write(path: Path, age: float) -> Path:
    """A file written `age` seconds ago (its directories too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    when = time.time() - age
    for item in (path, *path.parents):
        os.utime(item, (when, when))
        if item.name == "checkpoints":
            break
    return path


def test_nothing_written_lately_is_nothing_to_wait_for(tmp_path, settle):
    write(tmp_path / "checkpoints" / "global_step_4" / "actor" / "rank_0.pt", age=120)
    write(tmp_path / "logs" / "events.out", age=0)  # logs are no checkpoint
    assert settle(str(tmp_path), 10, QUIET, MARKER, poll=0.05) == "no checkpoint write in progress"


def test_the_step_in_progress_ends_once_a_newer_one_begins(tmp_path, settle):
    write(tmp_path / "checkpoints" / "global_step_4" / "rank_0.pt", age=3)  # its save returned: 5 began
    write(tmp_path / "checkpoints" / "global_step_5" / "rank_0.pt", age=1)
    began = []

    def running():  # the trainer goes on to step 6 while the stop waits
        if not began:
            write(tmp_path / "checkpoints" / "global_step_6" / "rank_0.pt", age=0)
            began.append(6)
        return True

    outcome = settle(str(tmp_path), 10, QUIET, MARKER, running=running, poll=0.05)
    assert outcome == "the checkpoint write in progress ended: checkpoints/global_step_5 (global_step_6 began)"


def test_a_newer_step_left_by_an_earlier_run_does_not_end_the_write_in_progress(tmp_path, settle):
    # a resumed run writes global_step_5 beside an unfinished global_step_9 of the run it resumed
    write(tmp_path / "checkpoints" / "global_step_9" / "rank_0.pt", age=3600)
    write(tmp_path / "checkpoints" / "global_step_5" / "rank_0.pt", age=1)
    outcome = settle(str(tmp_path), 0.3, QUIET, MARKER, poll=0.05)
    assert outcome == "checkpoint writes still in progress after 0.3s: checkpoints/global_step_5"


def test_the_tracker_naming_the_step_ends_it(tmp_path, settle):
    parent = tmp_path / "checkpoints" / "proj" / "exp"
    write(parent / "global_step_5" / "actor" / "rank_0.pt", age=1)
    write(parent / "latest_checkpointed_iteration.txt", age=0).write_text("5\n")  # beside the steps: no write
    outcome = settle(str(tmp_path), 10, QUIET, MARKER, poll=0.05)
    assert outcome == "the checkpoint write in progress ended: checkpoints/proj/exp/global_step_5 (latest_checkpointed_iteration.txt names it)"


def test_a_step_quiet_for_the_quiet_time_has_ended(tmp_path, settle):
    write(tmp_path / "checkpoints" / "global_step_5" / "rank_0.pt", age=1)
    write(tmp_path / "checkpoints" / "global_step_5" / MARKER, age=0)  # a marker is no write
    outcome = settle(str(tmp_path), 10, 1.5, MARKER, poll=0.05)
    assert outcome == "the checkpoint write in progress ended: checkpoints/global_step_5 (no change for 1.5s)"


def test_a_layout_without_steps_waits_for_quiet_and_the_trainers_exit_ends_the_wait(tmp_path, settle):
    write(tmp_path / "checkpoints" / "model.pt", age=1)
    assert settle(str(tmp_path), 0.3, QUIET, MARKER, poll=0.05) == "checkpoint writes still in progress after 0.3s: checkpoints"
    assert settle(str(tmp_path), 10, QUIET, MARKER, running=lambda: False, poll=0.05) == "the trainer exited"
