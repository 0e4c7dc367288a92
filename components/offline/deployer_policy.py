"""The IAM policy of the identity that runs ``pulumi up``, derived from the plan's resource types.

Each AWS resource type the plan contains maps to the actions its provider calls to create, read,
update and delete it (:data:`ACTIONS`); the plan's ``DIR/deployer-policy.json`` is the union, one
statement per service, with the reads every run makes (caller identity, AZs). Resources are ``*``:
most names and ids exist only after creation. Kubernetes objects and Helm releases go through the
cluster's API with the deployer's EKS access entry (the cluster creator's admin), not IAM. A plan
with a resource type missing here fails (``tests/test_deployer_policy.py``), and every action name
is checked against botocore's service models there, as the IAM grammar test does.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

POLICY_FILE = "deployer-policy.json"

_TAGS_EC2 = ("ec2:CreateTags", "ec2:DeleteTags")
# type -> actions (create, read, update, delete, tag) of the AWS provider for that type
ACTIONS: dict[str, tuple[str, ...]] = {
    "aws:ec2/vpc:Vpc": ("ec2:CreateVpc", "ec2:DescribeVpcs", "ec2:DescribeVpcAttribute", "ec2:ModifyVpcAttribute", "ec2:DeleteVpc", *_TAGS_EC2),
    "aws:ec2/subnet:Subnet": ("ec2:CreateSubnet", "ec2:DescribeSubnets", "ec2:ModifySubnetAttribute", "ec2:DeleteSubnet", *_TAGS_EC2),
    "aws:ec2/internetGateway:InternetGateway": (
        "ec2:CreateInternetGateway", "ec2:AttachInternetGateway", "ec2:DescribeInternetGateways",
        "ec2:DetachInternetGateway", "ec2:DeleteInternetGateway", *_TAGS_EC2,
    ),
    "aws:ec2/eip:Eip": ("ec2:AllocateAddress", "ec2:DescribeAddresses", "ec2:DescribeAddressesAttribute", "ec2:ReleaseAddress", *_TAGS_EC2),
    "aws:ec2/natGateway:NatGateway": ("ec2:CreateNatGateway", "ec2:DescribeNatGateways", "ec2:DeleteNatGateway", *_TAGS_EC2),
    "aws:ec2/routeTable:RouteTable": ("ec2:CreateRouteTable", "ec2:DescribeRouteTables", "ec2:DeleteRouteTable", *_TAGS_EC2),
    "aws:ec2/route:Route": ("ec2:CreateRoute", "ec2:DescribeRouteTables", "ec2:ReplaceRoute", "ec2:DeleteRoute"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (
        "ec2:AssociateRouteTable", "ec2:DescribeRouteTables", "ec2:ReplaceRouteTableAssociation", "ec2:DisassociateRouteTable",
    ),
    "aws:ec2/securityGroup:SecurityGroup": (
        "ec2:CreateSecurityGroup", "ec2:DescribeSecurityGroups", "ec2:DescribeSecurityGroupRules", "ec2:DescribeNetworkInterfaces",
        "ec2:RevokeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup", *_TAGS_EC2,
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        "ec2:AuthorizeSecurityGroupIngress", "ec2:DescribeSecurityGroupRules", "ec2:ModifySecurityGroupRules",
        "ec2:RevokeSecurityGroupIngress", *_TAGS_EC2,
    ),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        "ec2:AuthorizeSecurityGroupEgress", "ec2:DescribeSecurityGroupRules", "ec2:ModifySecurityGroupRules",
        "ec2:RevokeSecurityGroupEgress", *_TAGS_EC2,
    ),
    "aws:ec2/placementGroup:PlacementGroup": ("ec2:CreatePlacementGroup", "ec2:DescribePlacementGroups", "ec2:DeletePlacementGroup", *_TAGS_EC2),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "ec2:CreateLaunchTemplate", "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions",
        "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate", "ec2:DeleteLaunchTemplate", *_TAGS_EC2,
    ),
    "aws:eks/nodeGroup:NodeGroup": (
        "eks:CreateNodegroup", "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig", "eks:UpdateNodegroupVersion",
        "eks:DeleteNodegroup", "eks:TagResource", "eks:UntagResource", "iam:PassRole", "iam:GetRole",
        # a managed node group with a launch template: EKS checks the caller may launch from it
        "ec2:RunInstances", "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSubnets",
    ),
    "aws:eks/addon:Addon": (
        "eks:CreateAddon", "eks:DescribeAddon", "eks:DescribeAddonVersions", "eks:UpdateAddon", "eks:DeleteAddon",
        "eks:TagResource", "eks:UntagResource",
    ),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": (
        # the observability agent's (observability.backend cloudwatch); EKS passes the role to the pods
        "eks:CreatePodIdentityAssociation", "eks:DescribePodIdentityAssociation", "eks:UpdatePodIdentityAssociation",
        "eks:DeletePodIdentityAssociation", "eks:TagResource", "eks:UntagResource", "iam:PassRole", "iam:GetRole",
    ),
    "eks:index:Cluster": (
        # pulumi-eks: the EKS cluster, its IAM role, OIDC provider, security groups and access entries
        "eks:CreateCluster", "eks:DescribeCluster", "eks:UpdateClusterConfig", "eks:UpdateClusterVersion", "eks:DeleteCluster",
        "eks:CreateAccessEntry", "eks:DescribeAccessEntry", "eks:DeleteAccessEntry", "eks:AssociateAccessPolicy",
        "eks:DisassociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "eks:TagResource", "eks:UntagResource",
        "iam:CreateRole", "iam:GetRole", "iam:DeleteRole", "iam:TagRole", "iam:PassRole", "iam:AttachRolePolicy",
        "iam:DetachRolePolicy", "iam:ListAttachedRolePolicies", "iam:ListRolePolicies", "iam:ListInstanceProfilesForRole",
        "iam:CreateOpenIDConnectProvider", "iam:GetOpenIDConnectProvider", "iam:DeleteOpenIDConnectProvider",
        "iam:TagOpenIDConnectProvider", "iam:CreateServiceLinkedRole",
        "ec2:CreateSecurityGroup", "ec2:DescribeSecurityGroups", "ec2:AuthorizeSecurityGroupIngress",
        "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress", "ec2:RevokeSecurityGroupEgress",
        "ec2:DeleteSecurityGroup", "ec2:DescribeSubnets", "ec2:DescribeVpcs", *_TAGS_EC2,
        # secrets encryption with the stack's KMS key
        "kms:DescribeKey", "kms:CreateGrant",
    ),
    "aws:iam/role:Role": (
        "iam:CreateRole", "iam:GetRole", "iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:DeleteRole", "iam:TagRole",
        "iam:UntagRole", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole",
    ),
    "aws:iam/rolePolicy:RolePolicy": ("iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("iam:AttachRolePolicy", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy"),
    "aws:kms/key:Key": (
        "kms:CreateKey", "kms:DescribeKey", "kms:GetKeyPolicy", "kms:GetKeyRotationStatus", "kms:ListResourceTags",
        "kms:PutKeyPolicy", "kms:EnableKeyRotation", "kms:UpdateKeyDescription", "kms:ScheduleKeyDeletion", "kms:TagResource",
        "kms:UntagResource",
    ),
    "aws:s3/bucket:Bucket": (
        "s3:CreateBucket", "s3:ListBucket", "s3:GetBucketTagging", "s3:PutBucketTagging", "s3:GetBucketLocation",
        "s3:GetBucketAcl", "s3:GetBucketCORS", "s3:GetBucketWebsite", "s3:GetBucketLogging", "s3:GetLifecycleConfiguration",
        "s3:GetReplicationConfiguration", "s3:GetBucketRequestPayment", "s3:GetBucketObjectLockConfiguration",
        "s3:GetAccelerateConfiguration", "s3:GetBucketPolicy", "s3:GetBucketVersioning", "s3:GetEncryptionConfiguration",
        "s3:DeleteBucket",
    ),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": ("s3:PutBucketOwnershipControls", "s3:GetBucketOwnershipControls", "s3:DeleteBucketOwnershipControls"),
    "aws:s3/bucketPolicy:BucketPolicy": ("s3:PutBucketPolicy", "s3:GetBucketPolicy", "s3:DeleteBucketPolicy"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": ("s3:PutBucketPublicAccessBlock", "s3:GetBucketPublicAccessBlock", "s3:DeleteBucketPublicAccessBlock"),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "s3:PutEncryptionConfiguration", "s3:GetEncryptionConfiguration",
    ),
    "aws:s3/bucketVersioning:BucketVersioning": ("s3:PutBucketVersioning", "s3:GetBucketVersioning"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        "fsx:CreateFileSystem", "fsx:DescribeFileSystems", "fsx:UpdateFileSystem", "fsx:DeleteFileSystem", "fsx:TagResource",
        "fsx:UntagResource", "fsx:ListTagsForResource", "iam:CreateServiceLinkedRole",
        "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces",
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fsx:CreateDataRepositoryAssociation", "fsx:DescribeDataRepositoryAssociations", "fsx:UpdateDataRepositoryAssociation",
        "fsx:DeleteDataRepositoryAssociation", "fsx:TagResource", "fsx:ListTagsForResource",
        # FSx checks the caller may use the bucket it links
        "s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:GetBucketNotification", "s3:PutBucketNotification",
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "s3:PutLifecycleConfiguration", "s3:GetLifecycleConfiguration",
    ),
    # the training images (images.build: training_image.py)
    "aws:ecr/repository:Repository": (
        "ecr:CreateRepository", "ecr:DescribeRepositories", "ecr:ListTagsForResource", "ecr:PutImageScanningConfiguration",
        "ecr:PutImageTagMutability", "ecr:DeleteRepository", "ecr:TagResource", "ecr:UntagResource",
        # KMS encryption (the AWS managed key aws/ecr): ECR creates it and a grant on the caller's behalf
        "kms:CreateGrant", "kms:DescribeKey", "kms:RetireGrant",
    ),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ("ecr:PutLifecyclePolicy", "ecr:GetLifecyclePolicy", "ecr:DeleteLifecyclePolicy"),
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": (
        "ecr:CreatePullThroughCacheRule", "ecr:DescribePullThroughCacheRules", "ecr:UpdatePullThroughCacheRule",
        "ecr:DeletePullThroughCacheRule",
        # ECR checks the credentials secret when the rule is created
        "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue",
    ),
    "aws:codebuild/project:Project": (
        "codebuild:CreateProject", "codebuild:BatchGetProjects", "codebuild:UpdateProject", "codebuild:DeleteProject",
        # CodeBuild is passed the project's service role
        "iam:PassRole", "iam:GetRole",
    ),
    "aws:cloudwatch/logGroup:LogGroup": (
        "logs:CreateLogGroup", "logs:DescribeLogGroups", "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy",
        "logs:DeleteLogGroup", "logs:TagResource", "logs:UntagResource", "logs:ListTagsForResource",
    ),
    "aws:autoscaling/schedule:Schedule": (
        "autoscaling:PutScheduledUpdateGroupAction", "autoscaling:DescribeScheduledActions", "autoscaling:DeleteScheduledAction",
    ),
}  # fmt: skip

# Every run: who am I, the partition and region, the AZs; the existing-cluster and -VPC lookups.
ALWAYS: tuple[str, ...] = ("sts:GetCallerIdentity", "ec2:DescribeAvailabilityZones")
INVOKES: dict[str, tuple[str, ...]] = {
    "aws:eks/getCluster:getCluster": ("eks:DescribeCluster",),
    "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider": ("iam:GetOpenIDConnectProvider", "iam:ListOpenIDConnectProviders"),
    "aws:ec2/getVpc:getVpc": ("ec2:DescribeVpcs",),
    "aws:ec2/getSubnet:getSubnet": ("ec2:DescribeSubnets",),
}


class UnknownResourceType(ValueError):
    pass


def aws_types(resources: Iterable[Mapping[str, Any]]) -> set[str]:
    """The plan's resource types that reach AWS (not components, providers, Kubernetes or Helm)."""
    return {r["type"] for r in resources if r.get("custom", True) and r["type"].startswith(("aws:", "eks:"))} | {
        r["type"] for r in resources if r["type"] == "eks:index:Cluster"
    }


def deployer_policy(resources: Iterable[Mapping[str, Any]], invokes: Iterable[str] = ()) -> dict[str, Any]:
    """The policy document: one Allow statement per service, actions sorted."""
    types = aws_types(resources)
    unknown = sorted(t for t in types if t not in ACTIONS)
    if unknown:
        raise UnknownResourceType(f"no deployer actions known for {', '.join(unknown)}: add them to offline/deployer_policy.py ACTIONS")
    actions = set(ALWAYS)
    for t in types:
        actions.update(ACTIONS[t])
    for token in invokes:
        actions.update(INVOKES.get(token, ()))
    by_service: dict[str, list[str]] = {}
    for action in sorted(actions):
        by_service.setdefault(action.split(":", 1)[0], []).append(action)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": f"Deploy{service.capitalize()}", "Effect": "Allow", "Action": names, "Resource": "*"}
            for service, names in sorted(by_service.items())
        ],
    }


def dumps(policy: Mapping[str, Any]) -> str:
    return json.dumps(policy, indent=2, sort_keys=True) + "\n"
