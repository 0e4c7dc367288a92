"""The deployer policy against the calls the Terraform AWS provider really makes (tests/data/
provider-api-calls.json, read by tests/provider_calls.py): every call on the plans' paths (create,
refresh, the day-2 updates and their waiters: a node group scaled, a version bumped, an add-on
updated; destroy) is allowed, by action and on the ARN it acts on; every call left out is in
OFF_PATH with a reason that docs/deployer-policy.md gives too, and stays out only while no plan sets
what would make it."""

from __future__ import annotations

import re

import pytest

from rlinf_eks.offline.deployer import deployer_policy as dp
from rlinf_eks.offline.outputs.plan import deployer_policy_of_plan
from tests import provider_calls as pc
from tests.harness import ROOT, plan_stack
from tests.iam_eval import Request, as_iam_sees_it, authorized
from tests.test_deployer_policy import CASES, _world


def _ids(value):
    return value if isinstance(value, str) else ",".join(value) or "-"


def _denied_calls(plan, policy) -> tuple[int, list[str]]:
    """How many authorizations the plan's provider calls need, and those the policy denies."""
    world = _world(plan)
    checked, denied = 0, []
    for p in pc.provider_resources(plan):
        for phase, call in pc.on_path(p.type, p.inputs):
            for request in pc.authorizations(world, plan, p, phase, call["action"]):
                checked += 1
                if not authorized(policy, request):
                    denied.append(f"{p.type} {p.name} {phase} ({call['when']}): {as_iam_sees_it(request)}")
    return checked, denied


@pytest.mark.parametrize("stack, sets", CASES, ids=_ids)
def test_every_provider_call_on_the_plans_paths_is_allowed_on_its_arn(stack, sets):
    plan = plan_stack(stack, *sets)
    checked, denied = _denied_calls(plan, deployer_policy_of_plan(plan))
    assert checked and denied == []


@pytest.fixture(scope="module")
def multi():
    plan = plan_stack("multi-node")
    return plan, deployer_policy_of_plan(plan)


def _without(policy, action):
    return {**policy, "Statement": [{**s, "Action": [a for a in s["Action"] if a != action]} for s in policy["Statement"]]}


def test_the_day_two_waiters_and_the_tolerated_reads_are_checked(multi):
    """Without the update waiter's eks:DescribeUpdate (node group, cluster, add-on), the VPC's
    default ACL read or the bucket's S3 Control tagging, the plan's calls are denied, on the ARNs
    they act on: the check can fail, and it reaches the calls the issue names."""
    plan, policy = multi
    for action, on in (
        ("eks:DescribeUpdate", ("nodegroup/rlinf-multi-node/", "cluster/rlinf-multi-node", "addon/rlinf-multi-node/")),
        ("ec2:DescribeNetworkAcls", ("*",)),
        ("s3:TagResource", ("arn:aws:s3:::",)),
        ("s3:ListTagsForResource", ("arn:aws:s3:::",)),
    ):
        _, denied = _denied_calls(plan, _without(policy, action))
        hits = [d for d in denied if action in d]
        assert hits, action
        assert all(any(o in d for d in hits) for o in on), (action, hits)


def test_the_new_grants_keep_to_the_stack(multi):
    _, policy = multi
    ours = "arn:aws:eks:us-east-1:123456789012:nodegroup/rlinf-multi-node/gpu-nodes/0ac1"
    assert authorized(policy, Request("eks:DescribeUpdate", ours))
    assert not authorized(policy, Request("eks:DescribeUpdate", "arn:aws:eks:us-east-1:123456789012:nodegroup/rlinf-single-node/gpu-nodes/0ac1"))
    assert not authorized(policy, Request("eks:DescribeUpdate", "arn:aws:eks:us-east-1:123456789012:cluster/rlinf-multi-node-kuberay"))
    assert authorized(policy, Request("ec2:DescribeNetworkAcls", "*", {"ec2:Region": "us-east-1"}))
    assert not authorized(policy, Request("ec2:DescribeNetworkAcls", "*", {"ec2:Region": "eu-west-1"}))
    bucket = next(s for s in policy["Statement"] if s["Sid"] == "S3OnlyTheStacksBuckets")["Resource"][0]
    assert authorized(policy, Request("s3:TagResource", bucket.replace("*", "0a1b2c3")))
    assert not authorized(policy, Request("s3:TagResource", "arn:aws:s3:::someone-elses-bucket"))
    address = "arn:aws:ec2:us-east-1:123456789012:elastic-ip/eipalloc-1"
    assert authorized(policy, Request("ec2:DisassociateAddress", address, {"aws:ResourceTag/stack": "multi-node"}))
    assert not authorized(policy, Request("ec2:DisassociateAddress", address, {"aws:ResourceTag/stack": "single-node"}))


def test_each_call_left_out_is_in_the_data_and_documented():
    actions = {(t, c["action"]) for t in pc.data()["types"] for _, c in pc.calls(t)}
    stale = sorted(set(pc.OFF_PATH) - actions)
    assert not stale, f"OFF_PATH names calls the data does not have: {stale}"
    doc = (ROOT / "docs" / "deployer-policy.md").read_text()
    undocumented = sorted({a for _, a in pc.OFF_PATH if f"`{a}`" not in doc})
    assert not undocumented, f"docs/deployer-policy.md does not say why these stay out: {undocumented}"


def test_a_call_left_out_comes_back_when_a_plan_sets_what_makes_it():
    """force_destroy on a bucket puts emptying it on the path: the policy (which has no s3:DeleteObject) is then short."""
    plan = plan_stack("multi-node")
    policy = deployer_policy_of_plan(plan)
    bucket = next(r for r in plan.resources if r["type"] == "aws:s3/bucket:Bucket")
    forced = {**bucket, "inputs": {**bucket["inputs"], "forceDestroy": True}}
    assert {c["action"] for _, c in pc.on_path(bucket["type"], forced["inputs"])} >= {"s3:DeleteObject", "s3:ListBucketVersions"}
    assert "s3:DeleteObject" not in {c["action"] for _, c in pc.on_path(bucket["type"], bucket["inputs"])}
    plan.resources[plan.resources.index(bucket)] = forced
    try:
        _, denied = _denied_calls(plan, policy)
    finally:
        plan.resources[plan.resources.index(forced)] = bucket
    assert any("s3:ListBucketVersions" in d for d in denied)


def test_the_types_without_provider_data_are_the_known_ones():
    """Types the plans create that the data does not cover (their calls are this project's reading,
    checked by tests/test_deployer_policy.py only): a new one must be added to the data or here."""
    covered = set(pc.data()["types"])
    planned = {t for t in dp.ACTIONS if t.startswith("aws:")} - covered
    assert planned == {
        "aws:sqs/queue:Queue", "aws:sqs/queuePolicy:QueuePolicy", "aws:cloudwatch/eventRule:EventRule",
        "aws:cloudwatch/eventTarget:EventTarget", "aws:eks/accessEntry:AccessEntry", "aws:ecr/pullThroughCacheRule:PullThroughCacheRule",
    }  # fmt: skip
    doc = (ROOT / "docs" / "deployer-policy.md").read_text()
    assert all(f"`{t}`" in doc for t in planned)


def test_the_data_says_where_it_came_from():
    prov = pc.data()["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"]) and prov["source_repository"] == "hashicorp/terraform-provider-aws"
    assert all(re.fullmatch(r"[0-9a-f]{40}", c["commit"]) if c["commit"] else c["note"] for c in prov["confirmed_in_current_source"])
    assert len(pc.data()["types"]) == 37
