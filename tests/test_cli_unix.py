"""The command line behaves like a Unix tool: a reader that stops early (`plan | head`) ends it
quietly with SIGPIPE's status, and every subcommand either works for every stack role or says
why not in one line (issue 34, the CLI's rough edges)."""

from __future__ import annotations

import subprocess
import sys

from rlinf_eks.__main__ import main
from tests.harness import ROOT


def test_a_reader_that_stops_early_ends_the_plan_without_a_traceback(tmp_path):
    command = f"set -o pipefail; {sys.executable} -m rlinf_eks plan single-node --out {tmp_path} | head -n 1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.stdout.strip() == "rlinf-eks-single-node (offline plan)"
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert done.returncode == 141  # 128 + SIGPIPE, as a process SIGPIPE ended


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
