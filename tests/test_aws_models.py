"""The plan obeys the real AWS APIs: every planned AWS request passes botocore's service models
(plus the rules the API reference documents beyond them) and every IAM policy is well formed
with real action names, for every stack and many variants. See tests/aws_models.py."""

from __future__ import annotations

import copy
import json

import pytest

from rlinf_eks.config import ConfigError
from tests import aws_models as m
from tests.harness import ALL_STACKS, plan_stack, settings

# (stack, --set edits): instance types from the catalog, capacity types, placement strategies,
# existing VPC, autoscaling, KubeRay, shared filesystem, node counts, AMIs.
VARIANTS: list[tuple[str, tuple[str, ...]]] = [
    ("single-node", ("gpuNodes.instanceType=p4d.24xlarge",)),
    ("single-node", ("gpuNodes.instanceType=p4de.24xlarge",)),
    ("single-node", ("gpuNodes.instanceType=p5e.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=p5en.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=p6-b200.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g6e.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g5.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g6.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g5.8xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g5.2xlarge", "gpuNodes.efa=false")),
    # today's fleet (issue 53): card 0 ENA only on p6-b300, one H100, L40S and RTX PRO 6000 sizes
    ("single-node", ("gpuNodes.instanceType=p6-b300.48xlarge",)),
    ("single-node", ("gpuNodes.instanceType=p5.4xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g6e.12xlarge",)),
    ("single-node", ("gpuNodes.instanceType=g7e.48xlarge",)),
    ("single-node", ("gpuNodes.capacityType=SPOT",)),
    ("single-node", ("gpuNodes.capacityReservationId=cr-0123456789abcdef0",)),
    ("single-node", ("gpuNodes.placementGroup.strategy=none",)),
    ("single-node", ("gpuNodes.placementGroup.strategy=existing", "gpuNodes.placementGroup.name=rlinf-training-pg")),
    # Bottlerocket's data volume holds the run directory (no NVMe RAID0): the storage budget's size
    ("single-node", ("gpuNodes.amiType=BOTTLEROCKET_x86_64_NVIDIA", "gpuNodes.rootVolumeGib=400")),
    ("single-node", ("gpuNodes.localNvmeRaid0=true", "gpuNodes.hugepagesGib=0")),
    ("single-node", ("storage.sharedFilesystem.enabled=true",)),
    ("single-node", ("storage.bucketName=rlinf-checkpoints-0123",)),
    ("single-node", ("network.natGateways=one-per-az",)),
    ("single-node", ("network.interfaceEndpoints=true",)),
    ("single-node", ("cluster.endpointPublicAccessCidrs[0]=203.0.113.0/24",)),
    ("single-node", ("cluster.adminRoleArns[0]=arn:aws:iam::123456789012:role/admin",)),
    (
        "single-node",
        (
            "network.vpcId=vpc-0123456789abcdef0",
            "network.privateSubnetIds[0]=subnet-0123456789abcdef0",
            "network.privateSubnetIds[1]=subnet-0123456789abcdef1",
            "network.gpuSubnetId=subnet-0123456789abcdef0",
        ),
    ),
    # RLinf: global batch = a multiple of micro batch (40) x world size (8 GPUs x nodes)
    (
        "multi-node",
        (
            "cluster.existing=true",
            "cluster.name=shared-training",
            "kubeconfig=apiVersion: v1",
            "network.vpcId=vpc-0123456789abcdef0",
            "network.privateSubnetIds[0]=subnet-0123456789abcdef0",
            "network.privateSubnetIds[1]=subnet-0123456789abcdef1",
            "network.gpuSubnetId=subnet-0123456789abcdef0",
        ),
    ),
    ("multi-node", ("gpuNodes.nodeCount=4", 'workload.trainer.batch["actor.global_batch_size"]=1280')),
    ("multi-node", ("gpuNodes.nodeCount=8", "gpuNodes.instanceType=p5en.48xlarge", 'workload.trainer.batch["actor.global_batch_size"]=2560')),
    ("multi-node", ("storage.sharedFilesystem.storageCapacityGib=4800",)),
    ("multi-node", ("kuberay.enabled=true",)),
    ("multi-node-kuberay", ("gpuNodes.nodeCount=4", 'workload.trainer.batch["actor.global_batch_size"]=1280')),
    ("capacity-block", ("gpuNodes.instanceType=p5.48xlarge",)),
    ("capacity-block", ("gpuNodes.nodeCount=4", 'workload.trainer.batch["actor.global_batch_size"]=1280')),
    ("autoscaled", ("gpuNodes.maxNodes=4",)),
    ("autoscaled", ("gpuNodes.scaleToZero=false", "autoscaler.enabled=false")),
    ("autoscaled", ("preflight.enabled=false", "--unset preflight.minBusBandwidthFraction")),
    (
        "autoscaled",
        (
            "gpuNodes.capacityType=CAPACITY_BLOCK",
            "gpuNodes.capacityReservationId=cr-0123456789abcdef0",
            "gpuNodes.capacityBlock.startTime=2027-02-01T11:30:00Z",
        ),
    ),
    ("single-node", ("tags.team=ml research", 'tags["cost-center"]=robotics/rl', 'gpuNodes.labels["example.com/tier"]=gold')),
    ("single-node", ("aws:region=us-west-2", "availabilityZone=us-west-2b")),
    ("vllm-rollout", ("gpuNodes.capacityType=SPOT", "gpuNodes.placementGroup.strategy=none")),
    ("single-node", ("aws:region=cn-north-1", "availabilityZone=cn-north-1a")),
    ("multi-node", ("observability.backend=prometheus",)),
    ("single-node", ("observability.backend=none",)),
    ("multi-node", ("gpuNodes.provisioner=karpenter",)),
    ("capacity-block", ("gpuNodes.provisioner=karpenter",)),
    ("single-node", ("gpuNodes.provisioner=karpenter", "gpuNodes.capacityReservationId=cr-0123456789abcdef0", "aws:region=us-west-2", "availabilityZone=us-west-2b")),
    # the training images built in the account (images.build), with and without the Docker Hub cache
    ("single-node", ("images.build=true",)),
    ("multi-node", ("images.build=true", "images.families[0]=rlinf-embodied", "images.families[1]=simplevla-rl",
                    "images.computeType=BUILD_GENERAL1_LARGE", "images.logRetentionDays=7")),
    ("platform", ("images.dockerHubCache.credentialArn=arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf",)),
]


def _problems(stack: str, *sets: str) -> list[str]:
    plan = plan_stack(stack, *sets)
    assert plan.settings is not None
    return m.plan_problems(plan.resources, region=plan.settings.region)


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_stack_passes_the_aws_models(stack: str) -> None:
    # GIVEN a stack WHEN it is planned THEN every AWS request it implies is valid for the real API
    assert _problems(stack) == []


@pytest.mark.parametrize("stack,sets", VARIANTS, ids=[f"{s}:{','.join(v)}" for s, v in VARIANTS])
def test_variants_pass_the_aws_models(stack: str, sets: tuple[str, ...]) -> None:
    assert _problems(stack, *sets) == []


def test_every_planned_type_is_translated_or_declared_not_an_aws_call() -> None:
    types = {r["type"] for stack in ALL_STACKS for r in plan_stack(stack).resources}
    types |= {r["type"] for stack, sets in VARIANTS for r in plan_stack(stack, *sets).resources}
    uncovered = sorted(t for t in types if t not in m.TRANSLATORS and m.not_aws_reason(t) is None)
    assert uncovered == []
    # the AWS resources really are translated (not waved through as "not AWS")
    assert all(t in m.TRANSLATORS for t in types if t.startswith("aws:"))


# --- the checker itself can fail -----------------------------------------------------------------


def _resource(type_: str, inputs: dict, name: str = "x", id_: str = "x-id") -> dict:
    return {"type": type_, "name": name, "id": id_, "inputs": inputs}


def _plan_resource(stack: str, type_: str, name: str) -> dict:
    return copy.deepcopy(next(r for r in plan_stack(stack).resources if r["type"] == type_ and r["name"] == name))


def test_an_unknown_aws_type_fails_coverage() -> None:
    with pytest.raises(m.Untranslated, match="aws:ec2/flowLog:FlowLog"):
        m.calls_for(_resource("aws:ec2/flowLog:FlowLog", {}))


def test_an_input_no_request_carries_fails() -> None:
    vpc = _resource("aws:ec2/vpc:Vpc", {"cidrBlock": "10.0.0.0/16", "instanceTenancy": "dedicated"})
    with pytest.raises(m.Untranslated, match="instanceTenancy"):
        m.calls_for(vpc)


def test_enum_pattern_max_and_required_are_enforced() -> None:
    template = _plan_resource("single-node", "aws:ec2/launchTemplate:LaunchTemplate", "gpu-template")
    template["inputs"]["instanceType"] = "p9.48xlarge"
    template["inputs"]["metadataOptions"]["httpTokens"] = "sometimes"
    template["inputs"]["metadataOptions"]["httpPutResponseHopLimit"] = 65
    problems = m.plan_problems([template])
    assert any("InstanceType='p9.48xlarge'" in p for p in problems)
    assert any("HttpTokens='sometimes'" in p for p in problems)
    assert any("HttpPutResponseHopLimit=65" in p for p in problems)

    group = _plan_resource("single-node", "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")
    group["inputs"]["labels"] = {"x" * 64: "v"}  # EKS label keys: at most 63 characters
    group["inputs"]["capacityType"] = "CAPACITY-BLOCK"
    del group["inputs"]["subnetIds"]
    with pytest.raises(KeyError):  # the translator needs subnets like the API does
        m.plan_problems([group])
    group["inputs"]["subnetIds"] = ["subnet-0123456789abcdef0"]
    problems = m.plan_problems([group])
    assert any("capacityType='CAPACITY-BLOCK'" in p for p in problems)
    assert any("at most 63" in p for p in problems)
    # botocore's own checks: required members and types
    problems = m.validate(m.Call("eks", "CreateNodegroup", {"clusterName": "c", "nodegroupName": "n", "subnets": "s"}))
    assert any("nodeRole" in p for p in problems)
    assert any("subnets" in p and "type" in p for p in problems)


def test_model_patterns_are_applied() -> None:
    # IAM's roleNameType pattern is [\w+=,.@-]+ (botocore leaves patterns to the server)
    problems = m.validate(m.Call("iam", "CreateRole", {"RoleName": "has space", "AssumeRolePolicyDocument": "{}"}))
    assert any("RoleName='has space'" in p and "pattern" in p for p in problems)


def test_security_group_text_charset_from_the_ec2_reference() -> None:
    call = m.Call("ec2", "CreateSecurityGroup", {"GroupName": "g", "Description": "the cluster's VPC"})
    assert m.validate(call) == [
        "CreateSecurityGroup: Description=\"the cluster's VPC\": EC2 allows only a-zA-Z0-9, spaces and "
        "._-:/()#,@[]+=&;{}!$* (up to 255), not [\"'\"]"
    ]
    rule = m.Call(
        "ec2",
        "AuthorizeSecurityGroupIngress",
        {"GroupId": "sg-1", "IpPermissions": [{"IpProtocol": "tcp", "FromPort": 1, "ToPort": 2, "IpRanges": [{"CidrIp": "10.0.0.0/8", "Description": "ü"}]}]},
    )
    assert any("IpRanges[0].Description" in p for p in m.validate(rule))


def test_fsx_security_group_description_is_accepted_by_ec2() -> None:
    # the defect this module found: "the cluster's VPC" (an apostrophe) failed every stack with FSx
    group = _plan_resource("multi-node", "aws:ec2/securityGroup:SecurityGroup", "shared-fs-lustre")
    assert m.SECURITY_GROUP_TEXT.fullmatch(group["inputs"]["description"])
    assert m.plan_problems([group]) == []


def test_bucket_names_follow_s3_rules() -> None:
    assert m.validate(m.Call("s3", "CreateBucket", {"Bucket": "Rlinf_Checkpoints"}))
    assert m.validate(m.Call("s3", "CreateBucket", {"Bucket": "rlinf-checkpoints"})) == []


# --- IAM policies ---------------------------------------------------------------------------------


def test_policy_grammar_problems_are_found() -> None:
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "allow", "Action": ["s3:GetObjekt", "nosuchservice:Do"], "Resource": "bucket"},
            {"Effect": "Allow", "Action": "s3:GetObject", "NotAction": "s3:PutObject", "Resource": "*", "Condition": {"StringEqual": {"a": "b"}}},
        ],
    }
    document["Statement"].append({"Effect": "Allow", "Principal": {"Service": "ec2"}, "Action": "sts:AssumeRole"})
    problems = m.policy_problems(json.dumps(document))
    assert any("Principal.Service='ec2'" in p for p in problems)
    assert any("Effect='allow'" in p for p in problems)
    assert any("GetObjekt" in p for p in problems)
    assert any("nosuchservice" in p for p in problems)
    assert any("Resource='bucket'" in p for p in problems)
    assert any("exactly one of Action / NotAction" in p for p in problems)
    assert any("unknown operator 'StringEqual'" in p for p in problems)


@pytest.mark.parametrize(
    "operator,valid",
    [("StringEquals", True), ("ForAnyValue:StringLike", True), ("ArnLikeIfExists", True), ("Null", True), ("NullIfExists", False), ("StringEqual", False)],
)
def test_condition_operators(operator: str, valid: bool) -> None:
    assert m.condition_operator_valid(operator) is valid


def test_action_names_map_through_the_signing_name() -> None:
    # ecr's model is api.ecr but signs as ecr; elasticfilesystem is the efs model
    assert m.action_problem("ecr:GetAuthorizationToken") is None
    assert m.action_problem("elasticfilesystem:DescribeFileSystems") is None
    assert m.action_problem("ec2:Describe*") is None
    assert m.action_problem("ec2:Descrbe*") is not None
    # an API operation botocore knows that is no IAM action (s3:PutBucketOwnershipControls authorizes it)
    assert "Service Authorization Reference" in m.action_problem("s3:DeleteBucketOwnershipControls")


@pytest.mark.parametrize("action,operation", sorted(m.ACTION_EXCEPTIONS.items()))
def test_action_exceptions_name_real_operations(action: str, operation: str) -> None:
    service = action.split(":")[0]
    assert operation in m.service_model(service).operation_names
    assert m.action_problem(action) is None


def test_a_schedule_that_leaves_a_size_unset_sends_zero_and_fails() -> None:
    # aws_autoscaling_schedule sends 0 for an unset size: desired 4 with max 0 is refused
    schedule = _resource(
        "aws:autoscaling/schedule:Schedule",
        {"autoscalingGroupName": "eks-gpu", "scheduledActionName": "start", "startTime": "2027-01-11T11:30:00Z", "desiredCapacity": 4},
    )
    assert any("MinSize <= DesiredCapacity <= MaxSize" in p for p in m.plan_problems([schedule]))
    schedule["inputs"].update(minSize=-1, maxSize=-1)  # -1: leave the size as it is
    assert m.plan_problems([schedule]) == []


def test_the_capacity_block_stack_schedules_its_start_on_the_node_groups_asg() -> None:
    plan = plan_stack("capacity-block")
    (schedule,) = [r for r in plan.resources if r["type"] == "aws:autoscaling/schedule:Schedule"]
    (call,) = m.calls_for(schedule)
    assert (call.service, call.operation) == ("autoscaling", "PutScheduledUpdateGroupAction")
    assert m.validate(call) == []


def test_attached_policies_are_managed_policy_arns() -> None:
    ok = m.Call("iam", "AttachRolePolicy", {"RoleName": "r", "PolicyArn": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"})
    bad = m.Call("iam", "AttachRolePolicy", {"RoleName": "r", "PolicyArn": "arn:aws:iam::aws:role/AmazonEKSWorkerNodePolicy"})
    assert m.validate(ok) == []
    assert m.validate(bad) != []


# Tags the AWS models refuse (found by the variants above: the EKS, IAM and FSx tag patterns, 50
# tags per resource) are refused by the config first, by key and value. (Names, labels and tag
# lengths: tests/test_config.py.)
@pytest.mark.parametrize(
    "tags,expected",
    [
        ({"team": "r&d"}, "tags.team='r&d': EKS, IAM and FSx allow only letters, numbers, spaces and _.:/=+-@ in tags, not '&'"),
        ({"owner's": "ml"}, """tags["owner's"]='ml': EKS, IAM and FSx allow only"""),
        ({str(n): "v" for n in range(46)}, "46 tags: at most 45"),
    ],
)
def test_config_refuses_tags_the_apis_refuse(tags: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings(tags=tags)
    assert any(expected in problem for problem in err.value.problems), err.value.problems


def test_config_accepts_tags_of_letters_numbers_spaces_and_the_allowed_marks() -> None:
    assert settings(tags={"team": "ML research", "cost-center": "robotics/rl:2027", "Größe": "groß"}).tags["Größe"] == "groß"


def test_node_group_instance_types_must_exist_in_ec2() -> None:
    # the EKS model types instanceTypes as free strings; EC2's enumerates the real ones
    group = _plan_resource("single-node", "aws:eks/nodeGroup:NodeGroup", "rlinf-system")
    assert m.plan_problems([group]) == []
    group["inputs"]["instanceTypes"] = ["m6i.xlrge"]
    assert m.plan_problems([group]) == ["aws:eks/nodeGroup:NodeGroup rlinf-system: CreateNodegroup: instanceTypes[0]='m6i.xlrge': not an EC2 instance type"]


def test_buckets_outside_us_east_1_carry_their_region() -> None:
    bucket = _plan_resource("single-node", "aws:s3/bucket:Bucket", "checkpoints-bucket")
    (create, *_) = m.calls_for(bucket, region="eu-west-1")
    assert create.params["CreateBucketConfiguration"] == {"LocationConstraint": "eu-west-1"}
    assert m.validate(create) == []
    (create, *_) = m.calls_for(bucket, region="xx-nowhere-1")
    assert any("LocationConstraint='xx-nowhere-1'" in p for p in m.validate(create))
