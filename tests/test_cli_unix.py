"""The command line behaves like a Unix tool: a reader that stops early (`plan | head`) ends it
quietly with SIGPIPE's status, and every subcommand either works for every stack role or says
why not in one line (issue 34, the CLI's rough edges)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from rlinf_eks.__main__ import main
from tests.harness import ROOT

# Linux's fcntl F_SETPIPE_SZ (named by Python from 3.10): a pipe of one page, the smallest there is
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PAGE = os.sysconf("SC_PAGE_SIZE")


def plan_into_pipe(tmp_path, reader):
    """`plan single-node` writing into a one-page pipe read by ``reader`` (argv; None: no reader,
    the read end closed before plan starts): (plan's status, its stderr, what the reader printed)."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, PAGE)
    head = None
    if reader is not None:
        head = subprocess.Popen(reader, stdin=read_end, stdout=subprocess.PIPE, text=True)
    os.close(read_end)
    try:
        plan = subprocess.Popen(
            [sys.executable, "-m", "rlinf_eks", "plan", "single-node", "--out", str(tmp_path)],
            stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
    finally:
        os.close(write_end)
    _, err = plan.communicate(timeout=300)
    shown = head.communicate(timeout=60)[0] if head is not None else ""
    return plan.returncode, err, shown


def test_a_reader_that_stops_early_ends_the_plan_without_a_traceback(tmp_path):
    # `plan | head -n 1`, made certain: the plan prints about 20 kB, and a one-page pipe takes one
    # page while head reads its first line (at most a page a read), so plan still writes after
    # head has gone, whatever the timing (a 64 kB pipe took all of it before head ended, and plan
    # exited 0)
    status, err, shown = plan_into_pipe(tmp_path, ["head", "-n", "1"])
    assert shown.strip() == "rlinf-eks-single-node (offline plan)"
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert status == 141, err  # 128 + SIGPIPE, as a process SIGPIPE ended


def test_a_reader_gone_before_the_first_line_ends_the_plan_without_a_traceback(tmp_path):
    status, err, _ = plan_into_pipe(tmp_path, None)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert status == 141, err


def test_image_contract_of_a_platform_says_why_there_is_none(capsys):
    assert main(["image-contract", "platform"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a platform (platform.role: platform) runs no training pods, so no image contract" in line


def test_image_contract_of_an_experiment_reads_its_platforms_plan(tmp_path, capsys):
    assert main(["plan", "platform", "--quiet", "--out", str(tmp_path / "platform")]) == 0
    capsys.readouterr()
    assert main(["image-contract", "experiment-embodied", "--platform", str(tmp_path / "platform")]) == 0
    out = capsys.readouterr().out
    assert "trainer: rlinf-embodied (manual launcher); built by images/rlinf-embodied/Dockerfile" in out
    assert "trainer imports (maniskill_ppo_openvlaoft, checked first): torch mani_skill prismatic" in out
