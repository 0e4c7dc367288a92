"""Ctrl-C at any moment of a command ends it with one line and exit 130, never a traceback or a
hang, and never leaves its output folder half-written (issue 45, item 1). Each command runs for
real as a process and gets SIGINT at moments spread over its run's length (tests/interrupting.py);
bench/interrupt_bench.py does the same at random moments, as many times as asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import report_logs
from tests.harness import ROOT
from tests.interrupting import fresh, problem, run

# the moment a command's code starts is read from /proc (tests/interrupting.py): Linux, as CI
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc/<pid>/status (Linux)")

MOMENTS = 6
"""Moments per command: (i + 0.5) / MOMENTS of its run's length, and one past its end."""


def _moments(length: float) -> list[float]:
    return [(i + 0.5) / MOMENTS * length for i in range(MOMENTS)] + [length * 1.2]


def _overlay(old, new, into):
    """What a whole write of ``new`` over ``old`` leaves: old's files, new's replacing them."""
    shutil.copytree(old, into)
    shutil.copytree(new, into, dirs_exist_ok=True)
    return into


def _interrupted_everywhere(argv_to, out, old, new) -> list[str]:
    """Interrupt the command at every moment, its output folder first absent, then an old one: it
    must be left as it was or whole (new, or new written over old). ``old``: a folder, or what
    makes it from the uninterrupted run's output."""
    reference = run(argv_to(new))
    assert reference.status == 0, reference.stderr[-2000:]
    if callable(old):
        old = old(new)
    over = _overlay(old, new, out.parent.parent / f"{out.parent.name}-over")
    problems = []
    for index, delay in enumerate(_moments(reference.seconds)):
        before = old if index % 2 else None
        fresh(out, before)
        outcome = run(argv_to(out), delay=delay)
        # whole: new (a plan removes the files the old plan wrote), or new written over old (a report keeps old figures)
        found = problem(outcome, out, [before, new] if before is None else [before, new, over])
        if found:
            problems.append(found)
    return problems


def test_ctrl_c_at_any_moment_of_a_plan_is_one_line_exit_130_and_no_half_written_out(tmp_path):
    old, new, out = tmp_path / "old", tmp_path / "new", tmp_path / "runs" / "out"
    assert run(["plan", "single-node", "--quiet", "--out", str(old), "--set", "workload.runName=before"]).status == 0
    out.parent.mkdir()
    assert _interrupted_everywhere(lambda where: ["plan", "single-node", "--quiet", "--out", str(where)], out, old, new) == []


def test_ctrl_c_at_any_moment_of_verify_dry_run_is_one_line_exit_130(tmp_path):
    verify = lambda where: ["verify", "vllm-rollout", "--dry-run", "--out", str(where)]  # noqa: E731
    old, new, out = tmp_path / "v-old", tmp_path / "v-new", tmp_path / "v" / "out"
    assert run([*verify(old), "--set", "gpuNodes.nodeCount=2"]).status == 0
    out.parent.mkdir()
    assert _interrupted_everywhere(verify, out, old, new) == []


def test_ctrl_c_at_any_moment_of_a_report_is_one_line_exit_130(tmp_path):
    logs = report_logs.verl_run(tmp_path / "run")
    report = lambda where: ["report", "single-node", "--run-dir", str(logs), "--out", str(where)]  # noqa: E731
    new, out = tmp_path / "r-new", tmp_path / "r" / "out"

    def older(new: Path) -> Path:
        # an earlier report of the same run: the same files, and a figure this one does not draw
        old = shutil.copytree(new, tmp_path / "r-old")
        (old / "figures" / "from-before.png").write_bytes(b"an older report's figure")
        return old

    out.parent.mkdir()
    assert _interrupted_everywhere(report, out, older, new) == []


def test_an_interrupt_while_an_output_is_moved_into_place_waits_for_the_move(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from rlinf_eks import interrupts
        from rlinf_eks.offline.outputs.output import commit, staged

        interrupts.install()
        out = Path({str(tmp_path / "out")!r})
        with staged(out) as folder:
            (folder / "a.json").write_text("a")
            (folder / "b.json").write_text("b")
            with interrupts.held():
                os.kill(os.getpid(), signal.SIGINT)  # arrives while the files move
                commit(folder, out)
                print("moved", flush=True)
        print("not reached", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 130
    assert done.stdout.split() == ["moved"]
    assert done.stderr.strip().splitlines() == ["error: interrupted by Ctrl-C (SIGINT): stopped; no output folder was left half-written"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.json", "b.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # the staging folder is gone


def test_image_contract_interrupted_says_one_line():
    outcome = run(["image-contract", "multi-node"], delay=0.0)
    assert outcome.status == 130 and "Traceback" not in outcome.stderr
    assert outcome.stderr.strip().splitlines() == ["error: interrupted by Ctrl-C (SIGINT): stopped; no output folder was left half-written"]


def _script_that_is_interrupted_after_the_package_import(tmp_path: Path) -> Path:
    """The `rlinf-eks` console script as pip writes it (pyproject.toml [project.scripts]), with a
    Ctrl-C right after its first import of this project, before the command's own modules load."""
    script = tmp_path / "bin" / "rlinf-eks"
    script.parent.mkdir()
    script.write_text(textwrap.dedent("""
        import os, signal, sys
        import rlinf_eks
        os.kill(os.getpid(), signal.SIGINT)  # delivered before the next line: argparse, the CLI's imports
        from rlinf_eks.__main__ import cli
        sys.exit(cli())
    """))
    return script


def test_the_console_script_takes_ctrl_c_from_the_package_import_on(tmp_path):
    """Ctrl-C clean from the first instruction (issue 55): the script's handler is installed while
    the package is imported, not in cli() after the command line's imports."""
    script = _script_that_is_interrupted_after_the_package_import(tmp_path)
    done = subprocess.run([sys.executable, str(script), "image-contract", "multi-node"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "Traceback" not in done.stderr and done.returncode == 130, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == ["error: interrupted by Ctrl-C (SIGINT): stopped; no output folder was left half-written"]


def test_a_program_that_imports_the_library_keeps_its_own_ctrl_c(tmp_path):
    """Only the command line installs the handler: a program (not named rlinf-eks) gets Python's
    KeyboardInterrupt as before."""
    script = tmp_path / "train.py"
    script.write_text("import os, signal\nimport rlinf_eks\ntry:\n    os.kill(os.getpid(), signal.SIGINT)\n    import time; time.sleep(5)\n"
                      "except KeyboardInterrupt:\n    print('mine')\n")  # fmt: skip
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "mine"), done.stderr[-2000:]
