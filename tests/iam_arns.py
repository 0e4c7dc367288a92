"""Which IAM authorizations each API request of a plan needs: action, resource ARN, condition keys.

botocore's models carry neither the IAM actions' resource types nor their ARN formats, so this
table writes them down, from the AWS Service Authorization Reference, "Actions, resources, and
condition keys for <service>" (https://docs.aws.amazon.com/service-authorization/latest/reference/):

- Amazon EC2: ``arn:${Partition}:ec2:${Region}:${Account}:<vpc|subnet|internet-gateway|elastic-ip|
  natgateway|route-table|security-group|placement-group|launch-template>/<id>``; a create with
  TagSpecifications authorizes the new resource with ``aws:RequestTag/${TagKey}`` and, for the tags,
  ``ec2:CreateTags`` with ``ec2:CreateAction``; the other resources a request names (the VPC of a
  subnet, the subnet and address of a NAT gateway, ...) are authorized with their
  ``aws:ResourceTag/${TagKey}``. A placement group's ARN ends in its name.
- Amazon EKS: ``cluster/${ClusterName}``; CreateNodegroup, CreateAddon, CreateAccessEntry and
  CreatePodIdentityAssociation act on the cluster; ``addon/${ClusterName}/${AddonName}/${UUID}``;
  ``access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}``.
  A role handed to EKS is an ``iam:PassRole`` with ``iam:PassedToService`` (Step Functions guide,
  "IAM policies for Amazon EKS": eks.amazonaws.com; EKS Pod Identity: pods.eks.amazonaws.com).
- IAM: ``arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}``,
  ``oidc-provider/${OidcProviderName}``; CreateRole with Tags also needs ``iam:TagRole``.
- AWS KMS: ``kms:CreateKey`` has no resource (``*``), with Tags also ``kms:TagResource``;
  ``key/${KeyId}`` otherwise.
- Amazon S3: ``arn:${Partition}:s3:::${BucketName}``; the IAM action of each bucket request is
  ``tests/aws_models.ACTION_EXCEPTIONS`` read backwards where the names differ.
- Amazon FSx: ``file-system/${FileSystemId}``, ``association/${FileSystemId}/${AssociationId}``;
  CreateDataRepositoryAssociation authorizes the new association and the file system.
- Amazon EC2 Auto Scaling: ``autoScalingGroup:${GroupId}:autoScalingGroupName/${GroupName}``; EKS
  tags a managed node group's group ``eks:cluster-name``.
- Amazon ECR: ``repository/${RepositoryName}``; CreateRepository supports ``aws:RequestTag/${TagKey}``,
  with tags also ``ecr:TagResource``; PutLifecyclePolicy acts on the repository; the pull through
  cache rule actions list no resource type (``*``).
- AWS CodeBuild: ``arn:${Partition}:codebuild:${Region}:${Account}:project/${ProjectName}``;
  CreateProject supports ``aws:RequestTag/${TagKey}`` and passes ``serviceRole`` (``iam:PassRole``
  with ``iam:PassedToService`` ``codebuild.amazonaws.com``).
- Amazon CloudWatch Logs: ``log-group:${LogGroupName}``; CreateLogGroup supports
  ``aws:RequestTag/${TagKey}``, and with ``tags`` also needs ``logs:TagResource`` (CloudWatch Logs API
  reference, CreateLogGroup); PutRetentionPolicy acts on the group.
- Amazon SQS: ``arn:${Partition}:sqs:${Region}:${Account}:${QueueName}`` (a queue URL's last path
  segment); CreateQueue supports ``aws:RequestTag/${TagKey}`` and with ``tags`` also needs
  ``sqs:TagQueue`` (SQS API reference, CreateQueue); SetQueueAttributes acts on the queue, with its
  ``aws:ResourceTag/${TagKey}`` (SQS developer guide, "ABAC condition keys for Amazon SQS").
- Amazon EventBridge: ``rule/${RuleName}`` on the default event bus; PutRule supports
  ``aws:RequestTag/${TagKey}`` and with ``Tags`` also needs ``events:TagResource`` (EventBridge API
  reference, PutRule); PutTargets acts on the rule, with its ``aws:ResourceTag/${TagKey}`` and each
  target's ARN as ``events:TargetArn`` (EventBridge user guide, "Using IAM policy conditions in
  Amazon EventBridge").

The ids of resources that do not exist yet are the mocks' ids in the plan; the tags of an existing
resource are the planned resource's with that id (none for a resource outside the plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from tests.aws_models import Call
from tests.iam_eval import Request

ACCOUNT = "123456789012"
EKS_UUID = "0ac1d2e3-0000-4000-8000-000000000000"
ASG_ID = "8f1c2d3e-0000-4000-8000-000000000000"


def partition(region: str) -> str:
    return {"cn-": "aws-cn", "us-gov-": "aws-us-gov"}.get(next((p for p in ("cn-", "us-gov-") if region.startswith(p)), ""), "aws")


@dataclass
class World:
    """Where the requests happen: the region, the planned resources (by id, for their tags) and the cluster."""

    region: str
    resources: list[Mapping[str, Any]]
    cluster: str

    def arn(self, service: str, resource: str) -> str:
        region, account = ("", ACCOUNT) if service == "iam" else ("", "") if service == "s3" else (self.region, ACCOUNT)
        return f"arn:{partition(self.region)}:{service}:{region}:{account}:{resource}"

    def tags_of(self, id_: str) -> dict[str, str]:
        for r in self.resources:
            if r.get("id") == id_ or (r["type"] == "aws:iam/role:Role" and (r["inputs"].get("name") or r.get("id")) == id_):
                return dict(r["inputs"].get("tags") or {})
        if id_.startswith("sg-") and any(r["type"] == "eks:index:Cluster" for r in self.resources):
            # a security group the plan names but does not create, next to a cluster it creates: the
            # cluster security group EKS makes, which EKS tags aws:eks:cluster-name (EKS user guide,
            # "View Amazon EKS security group requirements for clusters")
            return {"aws:eks:cluster-name": self.cluster}
        return {}

    def existing(self, action: str, service: str, resource: str, id_: str, **context: str) -> Request:
        tags = {f"aws:ResourceTag/{k}": v for k, v in self.tags_of(id_).items()}
        return Request(action, self.arn(service, resource), {**tags, **context})


def _request_tags(tags: Mapping[str, str] | Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    if not tags:
        return {}
    if isinstance(tags, Mapping):
        return {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    return {f"aws:RequestTag/{t.get('Key', t.get('TagKey', t.get('key')))}": t.get("Value", t.get("TagValue", t.get("value"))) for t in tags}


def _ec2_new(w: World, call: Call, resource: Mapping[str, Any], kind: str, id_: str) -> list[Request]:
    specs = call.params.get("TagSpecifications") or []
    tags = _request_tags(specs[0]["Tags"]) if specs else {}
    out = [Request(f"ec2:{call.operation}", w.arn("ec2", f"{kind}/{id_}"), tags)]
    if specs:
        out.append(Request("ec2:CreateTags", w.arn("ec2", f"{kind}/{id_}"), {**tags, "ec2:CreateAction": call.operation}))
    return out


def _ec2_on(kind: str, key: str) -> Callable[[World, Call, Mapping[str, Any]], list[Request]]:
    def rule(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
        return [w.existing(f"ec2:{call.operation}", "ec2", f"{kind}/{call.params[key]}", call.params[key])]

    return rule


def _ec2_create(kind: str, *also: tuple[str, str]) -> Callable[[World, Call, Mapping[str, Any]], list[Request]]:
    """A create: the new resource (its id the plan's) and the existing ones the request names."""

    def rule(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
        new_id = call.params.get("GroupName") if kind == "placement-group" else resource["id"]
        out = _ec2_new(w, call, resource, kind, new_id)
        for other, key in also:
            if key in call.params:
                out += _ec2_on(other, key)(w, call, resource)
        return out

    return rule


def _eks_cluster(name_key: str = "clusterName") -> Callable[[World, Call, Mapping[str, Any]], list[Request]]:
    def rule(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
        out = [Request(f"eks:{call.operation}", w.arn("eks", f"cluster/{call.params[name_key]}"), _request_tags(call.params.get("tags")))]
        for key, service in (("nodeRole", "eks.amazonaws.com"), ("roleArn", _PASSED_TO.get(call.operation, "eks.amazonaws.com")), ("serviceAccountRoleArn", "eks.amazonaws.com")):
            if key in call.params:
                out.append(Request("iam:PassRole", call.params[key], {"iam:PassedToService": service}))
        return out

    return rule


_PASSED_TO = {"CreateCluster": "eks.amazonaws.com", "CreatePodIdentityAssociation": "pods.eks.amazonaws.com"}


def _eks_access_policy(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    principal = call.params["principalArn"].split(":")
    kind, name = principal[5].split("/", 1)
    entry = f"access-entry/{call.params['clusterName']}/{kind}/{principal[4]}/{name.rsplit('/', 1)[-1]}/{EKS_UUID}"
    return [Request("eks:AssociateAccessPolicy", w.arn("eks", entry))]


def _eks_addon(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [Request("eks:UpdateAddon", w.arn("eks", f"addon/{call.params['clusterName']}/{call.params['addonName']}/{EKS_UUID}"))]


def _iam_create_role(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    arn, tags = w.arn("iam", f"role/{call.params['RoleName']}"), _request_tags(call.params.get("Tags"))
    return [Request("iam:CreateRole", arn, tags)] + ([Request("iam:TagRole", arn, tags)] if tags else [])


def _iam_on_role(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    # AttachRolePolicy carries the policy's ARN as iam:PolicyARN
    extra = {"iam:PolicyARN": call.params["PolicyArn"]} if "PolicyArn" in call.params else {}
    return [w.existing(f"iam:{call.operation}", "iam", f"role/{call.params['RoleName']}", call.params["RoleName"], **extra)]


def _iam_oidc(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [Request("iam:CreateOpenIDConnectProvider", w.arn("iam", f"oidc-provider/{call.params['Url'].removeprefix('https://')}"))]


def _kms_create(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    # kms:CreateKey has no resource type; the tags are authorized on the new key (kms:TagResource: key)
    tags = _request_tags(call.params.get("Tags"))
    return [Request("kms:CreateKey", "*", tags)] + ([Request("kms:TagResource", w.arn("kms", f"key/{resource['id']}"), tags)] if tags else [])


def _kms_on_key(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [w.existing(f"kms:{call.operation}", "kms", f"key/{call.params['KeyId']}", call.params["KeyId"])]


# S3 request -> IAM action where they differ (aws_models.ACTION_EXCEPTIONS, read backwards)
_S3_ACTION = {
    "PutBucketEncryption": "s3:PutEncryptionConfiguration",
    "PutPublicAccessBlock": "s3:PutBucketPublicAccessBlock",
    "PutBucketLifecycleConfiguration": "s3:PutLifecycleConfiguration",
}


def _s3_bucket(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [Request(_S3_ACTION.get(call.operation, f"s3:{call.operation}"), w.arn("s3", call.params["Bucket"]))]


def _tagged(action: str, arn: str, tags: dict[str, str], tag_action: str) -> list[Request]:
    """A create with tags: the create, and the tag action the tags need, both on the new resource."""
    return [Request(action, arn, tags)] + ([Request(tag_action, arn, tags)] if tags else [])


def _ecr_create(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    arn = w.arn("ecr", f"repository/{call.params['repositoryName']}")
    return _tagged("ecr:CreateRepository", arn, _request_tags(call.params.get("tags")), "ecr:TagResource")


def _ecr_on_repository(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [Request(f"ecr:{call.operation}", w.arn("ecr", f"repository/{call.params['repositoryName']}"))]


def _codebuild_create(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    tags = _request_tags(call.params.get("tags"))
    return [
        Request("codebuild:CreateProject", w.arn("codebuild", f"project/{call.params['name']}"), tags),
        Request("iam:PassRole", call.params["serviceRole"], {"iam:PassedToService": "codebuild.amazonaws.com"}),
    ]


def _logs_create(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    arn = w.arn("logs", f"log-group:{call.params['logGroupName']}")
    return _tagged("logs:CreateLogGroup", arn, _request_tags(call.params.get("tags")), "logs:TagResource")


def _logs_on_group(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [Request(f"logs:{call.operation}", w.arn("logs", f"log-group:{call.params['logGroupName']}"))]


def _queue_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _sqs_create(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    arn = w.arn("sqs", call.params["QueueName"])
    return _tagged("sqs:CreateQueue", arn, _request_tags(call.params.get("tags")), "sqs:TagQueue")


def _sqs_on_queue(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    url = call.params["QueueUrl"]
    return [w.existing(f"sqs:{call.operation}", "sqs", _queue_name(url), url)]


def _events_put_rule(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    arn = w.arn("events", f"rule/{call.params['Name']}")
    return _tagged("events:PutRule", arn, _request_tags(call.params.get("Tags")), "events:TagResource")


def _events_put_targets(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    rule = call.params["Rule"]
    return [w.existing("events:PutTargets", "events", f"rule/{rule}", rule, **{"events:TargetArn": t["Arn"]}) for t in call.params["Targets"]]


def _fsx_create(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    tags = _request_tags(call.params.get("Tags"))
    arn = w.arn("fsx", f"file-system/{resource['id']}")
    return [Request("fsx:CreateFileSystem", arn, tags)] + ([Request("fsx:TagResource", arn, tags)] if tags else [])


def _fsx_delete(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    return [w.existing("fsx:DeleteFileSystem", "fsx", f"file-system/{call.params['FileSystemId']}", call.params["FileSystemId"])]


def _fsx_association(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    fs = resource["inputs"]["fileSystemId"]
    if call.operation == "DeleteDataRepositoryAssociation":
        return [w.existing("fsx:DeleteDataRepositoryAssociation", "fsx", f"association/{fs}/{call.params['AssociationId']}", resource["id"])]
    tags = _request_tags(call.params.get("Tags"))
    new = w.arn("fsx", f"association/{fs}/{resource['id']}")
    out = [Request("fsx:CreateDataRepositoryAssociation", new, tags), w.existing("fsx:CreateDataRepositoryAssociation", "fsx", f"file-system/{fs}", fs)]
    return out + ([Request("fsx:TagResource", new, tags)] if tags else [])


def _asg(w: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    group = f"autoScalingGroup:{ASG_ID}:autoScalingGroupName/{call.params['AutoScalingGroupName']}"
    # EKS tags a managed node group's Auto Scaling group with its cluster (eks:cluster-name)
    return [Request(f"autoscaling:{call.operation}", w.arn("autoscaling", group), {"aws:ResourceTag/eks:cluster-name": w.cluster})]


Rule = Callable[[World, Call, Mapping[str, Any]], list[Request]]
RULES: dict[tuple[str, str], Rule] = {
    ("ec2", "CreateVpc"): _ec2_create("vpc"),
    ("ec2", "ModifyVpcAttribute"): _ec2_on("vpc", "VpcId"),
    ("ec2", "CreateSubnet"): _ec2_create("subnet", ("vpc", "VpcId")),
    ("ec2", "ModifySubnetAttribute"): _ec2_on("subnet", "SubnetId"),
    ("ec2", "CreateInternetGateway"): _ec2_create("internet-gateway"),
    ("ec2", "AttachInternetGateway"): lambda w, c, r: _ec2_on("internet-gateway", "InternetGatewayId")(w, c, r) + _ec2_on("vpc", "VpcId")(w, c, r),
    ("ec2", "AllocateAddress"): _ec2_create("elastic-ip"),
    ("ec2", "CreateNatGateway"): _ec2_create("natgateway", ("subnet", "SubnetId"), ("elastic-ip", "AllocationId")),
    ("ec2", "CreateRouteTable"): _ec2_create("route-table", ("vpc", "VpcId")),
    ("ec2", "CreateRoute"): _ec2_on("route-table", "RouteTableId"),
    # CreateVpcEndpoint authorizes the new endpoint, its VPC and each route table, subnet and security
    # group it names (reference)
    ("ec2", "CreateVpcEndpoint"): lambda w, c, r: _ec2_create("vpc-endpoint", ("vpc", "VpcId"))(w, c, r) + [
        w.existing("ec2:CreateVpcEndpoint", "ec2", f"{kind}/{id_}", id_)
        for key, kind in (("RouteTableIds", "route-table"), ("SubnetIds", "subnet"), ("SecurityGroupIds", "security-group"))
        for id_ in c.params.get(key, ())
    ],
    ("ec2", "AssociateRouteTable"): lambda w, c, r: _ec2_on("route-table", "RouteTableId")(w, c, r) + _ec2_on("subnet", "SubnetId")(w, c, r),
    ("ec2", "CreateSecurityGroup"): _ec2_create("security-group", ("vpc", "VpcId")),
    ("ec2", "AuthorizeSecurityGroupIngress"): _ec2_on("security-group", "GroupId"),
    ("ec2", "AuthorizeSecurityGroupEgress"): _ec2_on("security-group", "GroupId"),
    ("ec2", "CreatePlacementGroup"): _ec2_create("placement-group"),
    ("ec2", "CreateLaunchTemplate"): _ec2_create("launch-template"),
    ("ec2", "ModifyLaunchTemplate"): _ec2_on("launch-template", "LaunchTemplateId"),
    ("eks", "CreateCluster"): _eks_cluster("name"),
    ("eks", "CreateNodegroup"): _eks_cluster(),
    ("eks", "CreateAddon"): _eks_cluster(),
    ("eks", "UpdateAddon"): _eks_addon,
    ("eks", "CreateAccessEntry"): _eks_cluster(),
    ("eks", "AssociateAccessPolicy"): _eks_access_policy,
    ("eks", "CreatePodIdentityAssociation"): _eks_cluster(),
    ("iam", "CreateRole"): _iam_create_role,
    ("iam", "PutRolePolicy"): _iam_on_role,
    ("iam", "AttachRolePolicy"): _iam_on_role,
    ("iam", "CreateOpenIDConnectProvider"): _iam_oidc,
    ("kms", "CreateKey"): _kms_create,
    ("kms", "EnableKeyRotation"): _kms_on_key,
    ("kms", "ScheduleKeyDeletion"): _kms_on_key,
    ("s3", "CreateBucket"): _s3_bucket,
    ("s3", "PutBucketTagging"): _s3_bucket,
    ("s3", "PutBucketOwnershipControls"): _s3_bucket,
    ("s3", "PutBucketPolicy"): _s3_bucket,
    ("s3", "PutPublicAccessBlock"): _s3_bucket,
    ("s3", "PutBucketEncryption"): _s3_bucket,
    ("s3", "PutBucketVersioning"): _s3_bucket,
    ("fsx", "CreateFileSystem"): _fsx_create,
    ("fsx", "DeleteFileSystem"): _fsx_delete,
    ("fsx", "CreateDataRepositoryAssociation"): _fsx_association,
    ("fsx", "DeleteDataRepositoryAssociation"): _fsx_association,
    ("autoscaling", "PutScheduledUpdateGroupAction"): _asg,
    ("s3", "PutBucketLifecycleConfiguration"): _s3_bucket,
    ("ecr", "CreateRepository"): _ecr_create,
    ("ecr", "PutLifecyclePolicy"): _ecr_on_repository,
    # no resource type: a registry setting
    ("ecr", "CreatePullThroughCacheRule"): lambda w, c, r: [Request("ecr:CreatePullThroughCacheRule", "*")],
    ("codebuild", "CreateProject"): _codebuild_create,
    ("logs", "CreateLogGroup"): _logs_create,
    ("logs", "PutRetentionPolicy"): _logs_on_group,
    ("sqs", "CreateQueue"): _sqs_create,
    ("sqs", "SetQueueAttributes"): _sqs_on_queue,
    ("events", "PutRule"): _events_put_rule,
    ("events", "PutTargets"): _events_put_targets,
}


class NoRule(AssertionError):
    pass


def requests_for(world: World, call: Call, resource: Mapping[str, Any]) -> list[Request]:
    rule = RULES.get((call.service, call.operation))
    if rule is None:
        raise NoRule(f"{call.service} {call.operation}: no IAM resource rule in tests/iam_arns.py RULES (add its ARN format with the source)")
    return rule(world, call, resource)


# --- the resource each type's read/update/delete actions act on --------------------------------------
# (same sources as above): the planned resource's own ARN, or its parent's where the provider's
# calls name the parent (a route names its route table, a rule its security group, a role policy
# its role, a bucket setting its bucket), with that resource's tags as aws:ResourceTag.


def _own_ec2(kind: str, key: str | None = None) -> Callable[[World, Mapping[str, Any]], Request]:
    def rule(w: World, r: Mapping[str, Any]) -> Request:
        id_ = r["inputs"][key] if key else (r["inputs"].get("name") or r["id"]) if kind == "placement-group" else r["id"]
        return w.existing("", "ec2", f"{kind}/{id_}", id_)

    return rule


def _own_eks(w: World, r: Mapping[str, Any]) -> Request:
    i, t = r["inputs"], r["type"]
    if t == "eks:index:Cluster":
        path = f"cluster/{i['name']}"
    elif t == "aws:eks/nodeGroup:NodeGroup":
        path = f"nodegroup/{i['clusterName']}/{i.get('nodeGroupName') or r['id'].split(':', 1)[-1]}/{EKS_UUID}"
    elif t == "aws:eks/addon:Addon":
        path = f"addon/{i['clusterName']}/{i['addonName']}/{EKS_UUID}"
    elif t == "aws:eks/accessEntry:AccessEntry":
        principal = i["principalArn"].split(":")
        kind, name = principal[5].split("/", 1)
        path = f"access-entry/{i['clusterName']}/{kind}/{principal[4]}/{name.rsplit('/', 1)[-1]}/{EKS_UUID}"
    else:
        path = f"podidentityassociation/{i['clusterName']}/a-{EKS_UUID[:17].replace('-', '')}"
    return Request("", w.arn("eks", path))


def _own_role(key: str | None) -> Callable[[World, Mapping[str, Any]], Request]:
    def rule(w: World, r: Mapping[str, Any]) -> Request:
        name = r["inputs"][key] if key else (r["inputs"].get("name") or r["id"])
        # an attachment's calls (AttachRolePolicy, DetachRolePolicy) carry its policy as iam:PolicyARN
        extra = {"iam:PolicyARN": r["inputs"]["policyArn"]} if isinstance(r["inputs"].get("policyArn"), str) else {}
        return w.existing("", "iam", f"role/{name}", name, **extra)

    return rule


def _own_bucket(key: str | None) -> Callable[[World, Mapping[str, Any]], Request]:
    return lambda w, r: Request("", w.arn("s3", r["inputs"][key] if key else (r["inputs"].get("bucket") or r["id"])))


OWN: dict[str, Callable[[World, Mapping[str, Any]], Request]] = {
    "aws:ec2/vpc:Vpc": _own_ec2("vpc"),
    "aws:ec2/subnet:Subnet": _own_ec2("subnet"),
    "aws:ec2/internetGateway:InternetGateway": _own_ec2("internet-gateway"),
    "aws:ec2/eip:Eip": _own_ec2("elastic-ip"),
    "aws:ec2/natGateway:NatGateway": _own_ec2("natgateway"),
    "aws:ec2/routeTable:RouteTable": _own_ec2("route-table"),
    "aws:ec2/route:Route": _own_ec2("route-table", "routeTableId"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": _own_ec2("route-table", "routeTableId"),
    # arn:aws:ec2:<region>:<account>:vpc-endpoint/<id> (Service Authorization Reference, EC2's resource types)
    "aws:ec2/vpcEndpoint:VpcEndpoint": _own_ec2("vpc-endpoint"),
    "aws:ec2/securityGroup:SecurityGroup": _own_ec2("security-group"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _own_ec2("security-group", "securityGroupId"),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _own_ec2("security-group", "securityGroupId"),
    "aws:ec2/placementGroup:PlacementGroup": _own_ec2("placement-group"),
    "aws:ec2/launchTemplate:LaunchTemplate": _own_ec2("launch-template"),
    "eks:index:Cluster": _own_eks,
    "aws:eks/nodeGroup:NodeGroup": _own_eks,
    "aws:eks/addon:Addon": _own_eks,
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": _own_eks,
    "aws:eks/accessEntry:AccessEntry": _own_eks,
    "aws:iam/role:Role": _own_role(None),
    "aws:iam/rolePolicy:RolePolicy": _own_role("role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": _own_role("role"),
    "aws:kms/key:Key": lambda w, r: w.existing("", "kms", f"key/{r['id']}", r["id"]),
    "aws:s3/bucket:Bucket": _own_bucket(None),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _own_bucket("bucket"),
    "aws:s3/bucketPolicy:BucketPolicy": _own_bucket("bucket"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _own_bucket("bucket"),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _own_bucket("bucket"),
    "aws:s3/bucketVersioning:BucketVersioning": _own_bucket("bucket"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": lambda w, r: w.existing("", "fsx", f"file-system/{r['id']}", r["id"]),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": lambda w, r: w.existing(
        "", "fsx", f"association/{r['inputs']['fileSystemId']}/{r['id']}", r["id"]
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": _own_bucket("bucket"),
    "aws:ecr/repository:Repository": lambda w, r: Request("", w.arn("ecr", f"repository/{r['inputs']['name']}")),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": lambda w, r: Request("", w.arn("ecr", f"repository/{r['inputs']['repository']}")),
    # the rule governs the repositories under its prefix (its own actions take Resource "*")
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": lambda w, r: Request(
        "", w.arn("ecr", f"repository/{r['inputs']['ecrRepositoryPrefix']}/*")
    ),
    "aws:codebuild/project:Project": lambda w, r: Request("", w.arn("codebuild", f"project/{r['inputs']['name']}")),
    "aws:cloudwatch/logGroup:LogGroup": lambda w, r: Request("", w.arn("logs", f"log-group:{r['inputs']['name']}")),
    "aws:sqs/queue:Queue": lambda w, r: w.existing("", "sqs", _queue_name(r["id"]), r["id"]),
    "aws:sqs/queuePolicy:QueuePolicy": lambda w, r: w.existing(
        "", "sqs", _queue_name(r["inputs"]["queueUrl"]), r["inputs"]["queueUrl"]
    ),
    # a rule's id is its name on the default bus; a target's calls name its rule
    "aws:cloudwatch/eventRule:EventRule": lambda w, r: w.existing("", "events", f"rule/{r['inputs'].get('name') or r['id']}", r["id"]),
    "aws:cloudwatch/eventTarget:EventTarget": lambda w, r: w.existing("", "events", f"rule/{r['inputs']['rule']}", r["inputs"]["rule"]),
    "aws:autoscaling/schedule:Schedule": lambda w, r: Request(
        "", w.arn("autoscaling", f"autoScalingGroup:{ASG_ID}:autoScalingGroupName/{r['inputs']['autoscalingGroupName']}"),
        {"aws:ResourceTag/eks:cluster-name": w.cluster},
    ),
}


def own_resource(world: World, resource: Mapping[str, Any]) -> Request:
    """The ARN and tags the type's read/update/delete actions act on (``action`` left empty)."""
    if resource["type"] not in OWN:
        raise NoRule(f"{resource['type']}: no own-ARN rule in tests/iam_arns.py OWN (add its ARN format with the source)")
    return OWN[resource["type"]](world, resource)


_EKS_CHILDREN = {
    "aws:eks/nodeGroup:NodeGroup", "aws:eks/addon:Addon", "aws:eks/podIdentityAssociation:PodIdentityAssociation",
    "aws:eks/accessEntry:AccessEntry",
}  # fmt: skip


# EC2 inputs that name another resource an action on this one also authorizes (the reference marks
# them required: AttachInternetGateway and DetachInternetGateway the VPC, CreateNatGateway the subnet)
_EC2_PARENTS = {"vpcId": "vpc", "subnetId": "subnet", "allocationId": "elastic-ip"}


def related_resources(world: World, resource: Mapping[str, Any]) -> list[Request]:
    """The resource's own ARN (first) and the others its type's actions act on, by the reference's
    resource types (``action`` left empty), each with its tags: the EC2 resources its inputs name
    (its VPC, subnet, address); a security group rule itself (``security-group-rule/<id>``:
    ModifySecurityGroupRules authorizes the rule as well as its group); a repository association's
    file system; an EKS node group's, add-on's, access entry's or pod identity association's
    cluster (CreateNodegroup, CreateAddon, ... take the ``cluster`` type); pulumi-eks's cluster's
    add-ons and access entries (offline/engine/eks_children.py), and the cluster creator's access entry EKS
    makes (``bootstrapClusterCreatorAdminPermissions``)."""
    own = own_resource(world, resource)
    out = [own]
    inputs = resource.get("inputs") or {}
    if resource["type"].startswith(("aws:ec2/", "aws:vpc/")):
        out += [world.existing("", "ec2", f"{kind}/{inputs[key]}", inputs[key]) for key, kind in _EC2_PARENTS.items() if isinstance(inputs.get(key), str)]
    if resource["type"] == "aws:ec2/vpcEndpoint:VpcEndpoint":
        # CreateVpcEndpoint and ModifyVpcEndpoint also authorize each route table a gateway endpoint joins
        # and each subnet and security group of an interface endpoint
        for key, kind in (("routeTableIds", "route-table"), ("subnetIds", "subnet"), ("securityGroupIds", "security-group")):
            out += [world.existing("", "ec2", f"{kind}/{i}", i) for i in inputs.get(key) or () if isinstance(i, str)]
    if resource["type"].startswith("aws:vpc/securityGroup") and resource["type"].endswith("Rule"):
        out.append(world.existing("", "ec2", f"security-group-rule/{resource['id']}", resource["id"]))
    if resource["type"] == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation":
        fs = inputs["fileSystemId"]
        out.append(world.existing("", "fsx", f"file-system/{fs}", fs))
    if resource["type"] in _EKS_CHILDREN:
        out.append(Request("", world.arn("eks", f"cluster/{inputs['clusterName']}")))
    if resource["type"] == "eks:index:Cluster":
        from rlinf_eks.offline.engine.eks_children import cluster_children

        cluster = inputs["name"]
        for child in cluster_children(dict(resource)):
            if child["type"] == "aws:eks/addon:Addon":
                out.append(Request("", world.arn("eks", f"addon/{cluster}/{child['sets']['addonName']}/{EKS_UUID}")))
        creator = f"access-entry/{cluster}/role/{ACCOUNT}/deployer/{EKS_UUID}"
        out.append(Request("", world.arn("eks", creator)))
    return out
