"""What ``python -m rlinf_eks plan`` prints, and what the README's Quick start promises (issue 18):
``--quiet`` leaves out the tree only, and the default stack's lack of resume is said up front."""

from __future__ import annotations

import pytest

from rlinf_eks.__main__ import main
from tests.harness import ROOT


def test_quiet_help_says_what_it_hides_and_what_it_keeps(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--quiet do not print the resource tree and its counts (the cost, Faults and Outputs are still printed)" in help_text


def test_quiet_keeps_the_cost_faults_and_outputs_and_drops_the_tree(tmp_path, capsys):
    assert main(["plan", "single-node", "--quiet", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "(offline plan)" not in printed and "Resources:" not in printed
    assert "stack cost" in printed and "\n\nFaults:\n" in printed and "\n\nOutputs:\n" in printed
    assert "resume: none: verl-ppo" in printed


def test_the_quick_start_says_the_default_stack_cannot_resume_and_names_one_that_can():
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    text = " ".join(quick_start.split())
    assert "`single-node`, runs veRL PPO (SimpleVLA-RL), which **cannot resume from a checkpoint**" in text
    assert "`vllm-rollout`" in text and "`multi-node`" in text
    from rlinf_eks.offline.stack_config import available_stacks

    assert {"vllm-rollout", "multi-node"} <= set(available_stacks(ROOT))


def test_the_stack_the_quick_start_names_for_resume_does_resume(tmp_path, capsys):
    assert main(["plan", "vllm-rollout", "--quiet", "--out", str(tmp_path)]) == 0
    assert "resume: the newest complete checkpoint" in capsys.readouterr().out
