"""DIR/deployer-policy.json: the least-privilege policy of the identity that runs `pulumi up`,
derived from the plan's resource types; every action is a real one (botocore's models, as the IAM
grammar test checks the stacks' own policies), every AWS resource type of every stack and variant
has its actions, and the file is written with the plan."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlinf_eks.offline import deployer_policy as dp
from rlinf_eks.offline.plan import deployer_policy_of_plan
from tests import aws_models as m
from tests.harness import ROOT, STACKS, plan_stack
from tests.test_aws_models import VARIANTS


def test_every_action_the_deployer_may_be_given_is_a_real_action():
    actions = {a for group in dp.ACTIONS.values() for a in group} | set(dp.ALWAYS) | {a for g in dp.INVOKES.values() for a in g}
    problems = [p for p in (m.action_problem(a) for a in sorted(actions)) if p]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack, sets", [(s, ()) for s in STACKS] + VARIANTS[::4], ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_every_plan_gets_a_well_formed_policy_covering_each_of_its_aws_resource_types(stack, sets):
    plan = plan_stack(stack, *sets)
    policy = deployer_policy_of_plan(plan)
    assert not m.policy_problems(json.dumps(policy))
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    for t in dp.aws_types(plan.resources):
        assert set(dp.ACTIONS[t]) <= actions, t
    assert all(s["Effect"] == "Allow" and s["Resource"] == "*" for s in policy["Statement"])
    assert not any(a.endswith(":*") or a == "*" for a in actions)  # no wildcard action


def test_the_policy_follows_the_plan_least_privilege():
    single = {a for s in deployer_policy_of_plan(plan_stack("single-node"))["Statement"] for a in s["Action"]}
    multi = {a for s in deployer_policy_of_plan(plan_stack("multi-node"))["Statement"] for a in s["Action"]}
    assert "fsx:CreateFileSystem" in multi and "fsx:CreateFileSystem" not in single  # FSx only where planned
    assert "autoscaling:PutScheduledUpdateGroupAction" not in multi
    block = {a for s in deployer_policy_of_plan(plan_stack("capacity-block"))["Statement"] for a in s["Action"]}
    assert "autoscaling:PutScheduledUpdateGroupAction" in block


def test_a_resource_type_without_actions_fails_naming_it():
    # (SQS queues have actions since Karpenter's interruption queue: a type no stack plans)
    with pytest.raises(dp.UnknownResourceType, match="aws:sns/topic:Topic"):
        dp.deployer_policy([{"type": "aws:sns/topic:Topic", "custom": True}])


def test_the_plan_writes_the_deployer_policy(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rlinf_eks", "plan", "single-node", "--out", str(tmp_path), "--quiet"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    policy = json.loads((tmp_path / dp.POLICY_FILE).read_text())
    assert policy["Version"] == "2012-10-17" and "eks:CreateCluster" in {a for s in policy["Statement"] for a in s["Action"]}
