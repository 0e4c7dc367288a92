"""The command line's rough edges (issue 55, item 2; issue 54, item 4's instance type offering), from
the user's side: the command, what it prints, the exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlinf_eks import __version__
from rlinf_eks.__main__ import EX_IOERR, main
from rlinf_eks.wording import counted
from tests.harness import ROOT


def _command(*argv: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlinf_eks", *argv], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120)  # fmt: skip


def test_version_prints_the_packages_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"rlinf-eks {__version__}\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["plan", "quickstart"], ["plan", "quickstart", "--quiet"], ["--version"]], ids=" ".join)
def test_a_full_device_is_one_line_and_ex_ioerr(argv, tmp_path):
    with open("/dev/full", "w") as full:
        done = _command(*argv, *(["--out", str(tmp_path / "out")] if argv[0] == "plan" else []), stdout=full)
    assert done.returncode == EX_IOERR == 74
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "error: could not write standard output: No space left on device (ENOSPC)"


def test_counts_take_their_number():
    assert [counted(1, "placeholder"), counted(2, "placeholder"), counted(0, "manifest")] == ["1 placeholder", "2 placeholders", "0 manifests"]


def test_one_placeholder_is_said_in_the_singular(tmp_path, capsys):
    argv = ["plan", "quickstart", "--out", str(tmp_path), "--set", "cluster.endpointPublicAccessCidrs[0]=198.18.0.7/32"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "1 placeholders" not in err
    assert err.strip().splitlines()[-1] == "1 placeholder to replace: pulumi up refuses it unless the stack sets allowPlaceholders: true"


def test_a_gpu_type_not_sold_in_the_region_fails_strict(tmp_path, capsys):
    argv = ["plan", "single-node", "--quiet", "--allow-placeholders", "--out", str(tmp_path),
            "--set", "aws:region=eu-west-1", "--set", "availabilityZone=eu-west-1a"]  # fmt: skip
    assert main(argv) == 0  # without --strict: said, not fatal
    assert "not sold: gpuNodes.instanceType='p5.48xlarge' in aws:region eu-west-1: not sold On-Demand in eu-west-1 per instances.vantage.sh" in capsys.readouterr().err
    assert main([*argv, "--strict"]) == 1
    err = capsys.readouterr().err
    assert "sold in us-east-1, " in err and "describe-instance-type-offerings --region eu-west-1" in err
    assert err.strip().splitlines()[-1] == "1 GPU instance type not sold in aws:region eu-west-1 (--strict: failing)"


def test_a_capacity_blocks_only_type_on_demand_fails_strict(tmp_path, capsys):
    argv = ["plan", "single-node", "--quiet", "--strict", "--allow-placeholders", "--out", str(tmp_path), "--set", "gpuNodes.instanceType=p5e.48xlarge"]
    assert main(argv) == 1
    assert "not sold: gpuNodes.instanceType='p5e.48xlarge' in aws:region us-east-1: sold as Capacity Blocks only" in capsys.readouterr().err


def test_a_type_sold_in_the_region_passes_strict_and_the_zone_is_named_unchecked(tmp_path, capsys):
    argv = ["plan", "single-node", "--quiet", "--strict", "--allow-placeholders", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "not sold" not in capsys.readouterr().err
    unchecked = (tmp_path / "plan.json").read_text()
    assert "gpuNodes.instanceType='p5.48xlarge': that us-east-1a offers it" in unchecked


def test_the_quiet_lines_of_a_stack_without_a_run_or_its_own_nodes():
    from rlinf_eks.offline.outputs.summary import cost_line, storage_line

    assert cost_line(None, experiment=True) == "cost: the platform's (an experiment's nodes are its platform's: its plan prices them)"
    assert cost_line(None) == "cost: not estimated (no GPU node group in this plan)"
    assert storage_line(None) == "storage budget: none (no run on this stack)"
    unknown = {"cost": {"items": [], "totalPerHourWhileTraining": None, "totalUnknownSummary": "no price for gpuNodes"}}
    assert cost_line(unknown) == "cost: unknown: no price for gpuNodes"


def test_one_placeholder_allowed_by_the_stack_is_said_in_the_singular(tmp_path, capsys):
    argv = ["plan", "quickstart", "--strict", "--quiet", "--out", str(tmp_path), "--set", "allowPlaceholders=true",
            "--set", "cluster.endpointPublicAccessCidrs[0]=198.18.0.7/32"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == "1 placeholder, deployed as it is (allowPlaceholders: true)"
    assert "placeholders: 1 to replace (deployed as it is: allowPlaceholders: true)" in captured.out
