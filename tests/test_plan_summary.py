"""What ``python -m rlinf_eks plan`` prints, and what the README's Quick start promises (issue 18):
``--quiet`` prints five lines instead of the sections (issue 55), and the default stack's lack of resume is said up front."""

from __future__ import annotations

import json

import pytest

from rlinf_eks.__main__ import main
from tests.harness import ROOT


def test_quiet_help_says_what_it_prints(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--quiet print a five-line summary (the stack, its cost, the storage budget's verdict, the placeholders, what was written)" in help_text


def test_quiet_prints_the_five_lines_a_script_needs_and_problems_still_on_stderr(tmp_path, capsys):
    assert main(["plan", "quickstart", "--quiet", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    plan = json.loads((tmp_path / "plan.json").read_text())
    cost = json.loads((tmp_path / "efficiency.json").read_text())["cost"]
    budget, manifests = plan["storageBudget"], len(list((tmp_path / "manifests").glob("*.yaml")))
    assert captured.out.splitlines() == [
        f"stack quickstart: {len(plan['resources'])} resources in us-east-1",
        f"cost: ${cost['totalPerHourWhileTraining']:,.2f}/h while training, ${cost['totalPerHourIdle']:,.2f}/h idle (g5.2xlarge in "
        "us-east-1; everything the stack bills by the hour, usage-based not included)",
        f"storage budget: fits: {budget['needGiB']:g} of {budget['storage']['roomGiB']:g} GiB on NVMe RAID0 (1 x 450 GB)",
        "placeholders: 2 to replace (pulumi up refuses them unless allowPlaceholders: true)",
        f"wrote {tmp_path}/plan.json and {manifests} manifests in {tmp_path}/manifests",
    ]
    assert "placeholder: workload.image='123456789012." in captured.err
    assert captured.err.strip().splitlines()[-1] == "2 placeholders to replace: pulumi up refuses them unless the stack sets allowPlaceholders: true"


def test_the_full_plan_keeps_the_cost_faults_and_outputs(tmp_path, capsys):
    assert main(["plan", "single-node", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "stack cost" in printed and "\n\nFaults:\n" in printed and "\n\nOutputs:\n" in printed
    assert "resume: none: verl-ppo" in printed


def test_the_quick_start_says_the_default_stack_cannot_resume_and_names_one_that_can():
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    text = " ".join(quick_start.split())
    assert "`single-node`, runs veRL PPO (SimpleVLA-RL), which **cannot resume from a checkpoint**" in text
    assert "`vllm-rollout`" in text and "`multi-node`" in text
    from rlinf_eks.offline.engine.stack_config import available_stacks

    assert {"vllm-rollout", "multi-node"} <= set(available_stacks(ROOT))


def test_the_stack_the_quick_start_names_for_resume_does_resume(tmp_path, capsys):
    assert main(["plan", "vllm-rollout", "--out", str(tmp_path)]) == 0
    assert "resume: the newest complete checkpoint" in capsys.readouterr().out
