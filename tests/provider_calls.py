"""The AWS calls the Terraform AWS provider (which pulumi-aws bridges) makes for each resource type,
which of them the stacks' plans reach, and the authorizations each one needs, by action and ARN.

The calls are ``tests/data/provider-api-calls.json`` (its ``provenance``: a static reading of the
provider's Create, Read, Update and Delete functions at a pinned commit, each call with the
function path it came from and ``when`` it is made). Every call is on the plans' paths (a first
``pulumi up``, a refresh, a later ``up`` that changes what the stack file changes: tags, node
counts, versions, add-ons; ``destroy``) unless :data:`OFF_PATH` lists its type and action with the
reason, and even then it is on the path for a planned resource whose inputs set what the reason
says the plans do not set (``Off.unless``): a plan that starts setting it turns the call back on.
``docs/deployer-policy.md`` gives the same reasons.

:func:`authorizations` turns one call of one planned resource into the requests IAM evaluates, by
the AWS Service Authorization Reference (``tests/iam_reference.py``): ``"*"`` for an action
without a resource type, else the planned resource's own ARN where the action acts on its type and
the other resources the action requires (its cluster, its role, its bucket: ``tests/iam_arns.py``
``related_resources``), each with its tags; the role passed (``iam:PassRole``, from the create
request ``tests/iam_arns.py`` derives), the service-linked role (``iam:AWSServiceName``), the key
EKS uses for secrets encryption.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from rlinf_eks.offline.deployer import deployer_policy as dp
from rlinf_eks.offline.engine.eks_children import cluster_children
from tests import aws_models as m
from tests import iam_reference
from tests.harness import ROOT
from tests.iam_arns import ACCOUNT, EKS_UUID, World, related_resources, requests_for
from tests.iam_eval import Request

DATA = ROOT / "tests" / "data" / "provider-api-calls.json"
PHASES = ("create", "read", "update", "delete")


@functools.lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def _set(*keys: str) -> Callable[[Mapping[str, Any]], bool]:
    """On the path after all where the resource's inputs set one of ``keys`` (to anything but false/empty)."""
    return lambda inputs: any(inputs.get(k) not in (None, False, "", [], {}) for k in keys)


def _never(inputs: Mapping[str, Any]) -> bool:
    return False


@dataclass(frozen=True)
class Off:
    """A call the plans do not make, and why."""

    why: str
    unless: Callable[[Mapping[str, Any]], bool] = field(default=_never)
    """True for a planned resource's inputs that put the call on the path after all."""


_S3_INLINE = _set(
    "acl", "corsRules", "website", "loggings", "logging", "lifecycleRules", "replicationConfiguration", "accelerationStatus",
    "requestPayer", "objectLockConfiguration", "policy", "versioning", "serverSideEncryptionConfiguration", "grants",
)  # fmt: skip
_S3_INLINE_WHY = (
    "the bucket's deprecated inline settings (acl, cors_rule, website, logging, lifecycle_rule, replication, acceleration, "
    "request_payer, object_lock, policy, versioning, server_side_encryption): the plans set each through its own resource "
    "(aws:s3/bucketVersioning, ...) and none inline"
)
_LINGERING_ENIS = (
    "only on a DependencyViolation at delete (deleteLingeringENIs): the provider then deletes the network interfaces that "
    "Lambda and a few other services leave behind; the stacks create none of those services' interfaces, and the nodes' "
    "(VPC CNI, EFA) go with their instances"
)
_FORCE_DESTROY = (
    "only with force_destroy: on the path for the build contexts' bucket, which destroy empties; the checkpoint bucket "
    "never sets it (protected and retained: docs/deploying.md)"
)

# (type, IAM action) -> why the plans never make the call
OFF_PATH: dict[tuple[str, str], Off] = {
    ("aws:cloudwatch/logGroup:LogGroup", "logs:PutLogGroupDeletionProtection"): Off(
        "deletion_protection_enabled: the build log groups do not set it", _set("deletionProtectionEnabled")),
    ("aws:cloudwatch/logGroup:LogGroup", "logs:AssociateKmsKey"): Off("kms_key_id: the build log groups do not set it", _set("kmsKeyId")),
    ("aws:cloudwatch/logGroup:LogGroup", "logs:DisassociateKmsKey"): Off("kms_key_id: the build log groups do not set it", _set("kmsKeyId")),
    ("aws:codebuild/project:Project", "codebuild:UpdateProjectVisibility"): Off(
        "project_visibility: the build projects stay PRIVATE (not set)", _set("projectVisibility")),
    ("aws:ec2/eip:Eip", "ec2:AssociateAddress"): Off(
        "instance / network_interface: the NAT gateway's address is associated by the NAT gateway, not by the address",
        _set("instance", "networkInterface", "associateWithPrivateIp")),
    ("aws:ec2/launchTemplate:LaunchTemplate", "ec2:DescribeInstanceTypes"): Off(
        "instance_requirements: the launch templates name their instance type", _set("instanceRequirements")),
    **{("aws:ec2/natGateway:NatGateway", a): Off(
        "secondary addresses: the NAT gateway has its one address",
        _set("secondaryAllocationIds", "secondaryPrivateIpAddresses", "secondaryPrivateIpAddressCount"))
       for a in ("ec2:AssignPrivateNatGatewayAddress", "ec2:AssociateNatGatewayAddress", "ec2:DisassociateNatGatewayAddress",
                 "ec2:UnassignPrivateNatGatewayAddress")},
    **{("aws:ec2/routeTable:RouteTable", a): Off(
        "inline route blocks: the plans' routes are aws:ec2/route:Route resources of their own", _set("routes"))
       for a in ("ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DeleteRoute", "ec2:DescribeNetworkInterfaces")},
    **{("aws:ec2/routeTable:RouteTable", a): Off("propagating_vgws: no virtual private gateway", _set("propagatingVgws"))
       for a in ("ec2:EnableVgwRoutePropagation", "ec2:DisableVgwRoutePropagation")},
    **{("aws:ec2/securityGroup:SecurityGroup", a): Off(
        "inline ingress/egress blocks: the plans' rules are aws:vpc/securityGroup*Rule resources of their own", _set("ingress", "egress"))
       for a in ("ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress")},
    **{("aws:ec2/securityGroup:SecurityGroup", a): Off(_LINGERING_ENIS + "; or with revoke_rules_on_delete (not set)", _set("revokeRulesOnDelete"))
       for a in ("ec2:DeleteNetworkInterface", "ec2:DetachNetworkInterface")},
    **{("aws:ec2/subnet:Subnet", a): Off("an IPv6 CIDR block: the subnets are IPv4 only", _set("ipv6CidrBlock", "assignIpv6AddressOnCreation", "ipv6Native"))
       for a in ("ec2:AssociateSubnetCidrBlock", "ec2:DisassociateSubnetCidrBlock")},
    **{("aws:ec2/subnet:Subnet", a): Off(_LINGERING_ENIS)
       for a in ("ec2:DeleteNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DetachNetworkInterface")},
    **{("aws:ec2/vpc:Vpc", a): Off("an IPv6 CIDR block: the VPC is IPv4 only", _set("assignGeneratedIpv6CidrBlock", "ipv6CidrBlock", "ipv6IpamPoolId"))
       for a in ("ec2:AssociateVpcCidrBlock", "ec2:DisassociateVpcCidrBlock")},
    **{("aws:ec2/vpcEndpoint:VpcEndpoint", a): Off(
        "auto_accept: the endpoints are to AWS services, which accept their own connections", _set("autoAccept"))
       for a in ("ec2:AcceptVpcEndpointConnections", "ec2:DescribeVpcEndpointServiceConfigurations")},
    ("aws:ec2/vpcEndpoint:VpcEndpoint", "ec2:DescribeNetworkInterfaces"): Off(
        "an endpoint's network interfaces: the S3 endpoint is a gateway endpoint (route tables, no subnets)", _set("subnetIds", "subnetConfigurations")),
    ("aws:ec2/vpc:Vpc", "ec2:ModifyVpcTenancy"): Off("instance_tenancy: not set (default tenancy)", _set("instanceTenancy")),
    ("aws:ec2/vpc:Vpc", "ec2:GetIpamPoolAllocations"): Off("an IPAM pool: the VPC's CIDR is the plan's", _set("ipv4IpamPoolId", "ipv6IpamPoolId")),
    ("aws:eks/addon:Addon", "iam:PassRole"): Off(
        "service_account_role_arn / pod_identity_association: the add-ons run with the node role (the observability agent's "
        "role goes through its own aws:eks/podIdentityAssociation)", _set("serviceAccountRoleArn", "podIdentityAssociations")),
    ("aws:eks/cluster:Cluster", "eks:AssociateEncryptionConfig"): Off(
        "only to add secrets encryption to a cluster created without it: pulumi-eks creates every planned cluster with the "
        "stack's key (encryptionConfigKeyArn)", lambda inputs: not inputs.get("encryptionConfig")),
    **{(t, a): Off(
        "tags: the plans' security group rules carry none (their group does), so the provider sends none",  _set("tags"))
       for t in ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
       for a in ("ec2:CreateTags", "ec2:DeleteTags")},
    ("aws:fsx/lustreFileSystem:LustreFileSystem", "fsx:CreateFileSystemFromBackup"): Off("backup_id: not set", _set("backupId")),
    ("aws:iam/openIdConnectProvider:OpenIdConnectProvider", "iam:UntagOpenIDConnectProvider"): Off(
        "tags: pulumi-eks creates the OIDC provider without tags, so no tag is ever removed", _set("tags")),
    ("aws:iam/role:Role", "iam:PutRolePolicy"): Off(
        "the role's deprecated inline_policy: the plans' inline policies are aws:iam/rolePolicy resources of their own", _set("inlinePolicies")),
    ("aws:iam/role:Role", "iam:DeleteRolePolicy"): Off(
        "the role's deprecated inline_policy, or force_detach_policies at delete: neither is set (the aws:iam/rolePolicy "
        "resources delete their own)", _set("inlinePolicies", "forceDetachPolicies")),
    **{("aws:iam/role:Role", a): Off(
        "the role's deprecated managed_policy_arns, or force_detach_policies at delete: neither is set (the "
        "aws:iam/rolePolicyAttachment resources attach and detach)", _set("managedPolicyArns", "forceDetachPolicies"))
       for a in ("iam:AttachRolePolicy", "iam:DetachRolePolicy")},
    ("aws:iam/role:Role", "iam:UpdateRoleDescription"): Off(
        "description: on the path for the roles whose description the plan sets (pulumi-eks's cluster role has none)", _set("description")),
    **{("aws:iam/role:Role", a): Off("permissions_boundary: the roles set none", _set("permissionsBoundary"))
       for a in ("iam:PutRolePermissionsBoundary", "iam:DeleteRolePermissionsBoundary")},
    ("aws:iam/role:Role", "iam:RemoveRoleFromInstanceProfile"): Off(
        "only for a role still in an instance profile at delete: EKS's managed node groups and Karpenter (its EC2NodeClass's "
        "finalizer) remove the profiles they made, and both are deleted before the role they depend on; a profile left behind "
        "(Karpenter gone first) fails the destroy naming this action, and the profile is not the stack's to scope"),
    **{("aws:kms/key:Key", a): Off("is_enabled: not set (the key stays enabled)", _set("isEnabled"))
       for a in ("kms:EnableKey", "kms:DisableKey")},
    ("aws:kms/key:Key", "kms:DisableKeyRotation"): Off(
        "enable_key_rotation false: every planned key rotates", lambda inputs: inputs.get("enableKeyRotation") is not True),
    **{("aws:s3/bucket:Bucket", a): Off(_S3_INLINE_WHY, _S3_INLINE)
       for a in ("s3:PutBucketCORS", "s3:PutEncryptionConfiguration", "s3:PutLifecycleConfiguration", "s3:DeleteBucketPolicy",
                 "s3:PutReplicationConfiguration", "s3:DeleteBucketWebsite", "s3:PutAccelerateConfiguration", "s3:PutBucketAcl",
                 "s3:PutBucketLogging", "s3:PutBucketPolicy", "s3:PutBucketRequestPayment", "s3:PutBucketVersioning",
                 "s3:PutBucketWebsite", "s3:PutBucketObjectLockConfiguration")},
    **{("aws:s3/bucket:Bucket", a): Off(_FORCE_DESTROY, _set("forceDestroy"))
       for a in ("s3:DeleteObject", "s3:ListBucketVersions")},
    ("aws:s3/bucket:Bucket", "s3:PutObjectLegalHold"): Off(
        "only when emptying the bucket is denied an object under an Object Lock legal hold: no bucket of the plans has "
        "Object Lock", _set("objectLockEnabled", "objectLockConfiguration")),
}  # fmt: skip

# the service-linked role a type's first creation in an account makes (iam:AWSServiceName)
SERVICE_LINKED = {
    "aws:eks/cluster:Cluster": "eks.amazonaws.com",
    "aws:eks/nodeGroup:NodeGroup": "eks-nodegroup.amazonaws.com",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fsx.amazonaws.com",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "s3.data-source.lustre.fsx.amazonaws.com",
}


def calls(type_: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (phase, call) of the type in the data."""
    entry = data()["types"][type_]
    for phase in PHASES:
        for call in entry.get(phase, []):
            yield phase, call


def on_path(type_: str, inputs: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The type's calls a resource with these inputs makes on the plans' paths."""
    for phase, call in calls(type_):
        off = OFF_PATH.get((type_, call["action"]))
        if off is None or off.unless(inputs):
            yield phase, call


@dataclass(frozen=True)
class Planned:
    """One resource the provider handles: a planned one, or a child pulumi-eks creates inside a cluster."""

    type: str
    name: str
    inputs: Mapping[str, Any]
    resource: Mapping[str, Any]
    """The planned resource (for a pulumi-eks child: its cluster)."""


def provider_resources(plan) -> list[Planned]:
    """The plan's resources of the types in the data, pulumi-eks's children of each cluster included."""
    types = data()["types"]
    children = set(data()["eks_children"]["eks:index:Cluster"])
    out = []
    for r in plan.resources:
        if r["type"] in types:
            out.append(Planned(r["type"], r["name"], r.get("inputs") or {}, r))
        if r["type"] == "eks:index:Cluster":
            out += [Planned(c["type"], c["name"], c.get("sets") or {}, r) for c in cluster_children(dict(r)) if c["type"] in children]
    return out


def _child_related(world: World, p: Planned) -> list[Request]:
    """The ARNs (with tags) a pulumi-eks child's calls act on: its own first, then its cluster's."""
    cluster = p.resource["inputs"]["name"]
    tags = {f"aws:ResourceTag/{k}": v for k, v in (p.inputs.get("tags") or {}).items()}
    if p.type == "aws:eks/cluster:Cluster":
        return [Request("", r.resource, {**r.context, **tags}) for r in related_resources(world, p.resource)]
    if p.type == "aws:eks/addon:Addon":
        return [Request("", world.arn("eks", f"addon/{cluster}/{p.inputs['addonName']}/{EKS_UUID}"), tags),
                Request("", world.arn("eks", f"cluster/{cluster}"))]  # fmt: skip
    if p.type == "aws:iam/role:Role":
        return [Request("", world.arn("iam", f"role/{p.name}-4ad3f2c"), tags)]
    if p.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
        role = next(c for c in cluster_children(dict(p.resource)) if c["type"] == "aws:iam/role:Role" and c["name"] == p.inputs["role"])
        policy = p.inputs["policyArn"].replace("<partition>", world.arn("iam", "x").split(":")[1])
        role_tags = {f"aws:ResourceTag/{k}": v for k, v in (role["sets"].get("tags") or {}).items()}
        return [Request("", world.arn("iam", f"role/{role['name']}-4ad3f2c"), {**role_tags, "iam:PolicyARN": policy})]
    if p.type == "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
        return [Request("", world.arn("iam", f"oidc-provider/oidc.eks.{world.region}.amazonaws.com/id/0A1B2C3D4E5F60718293A4B5C6D7E8F9"))]
    raise AssertionError(f"{p.type}: a pulumi-eks child without an ARN rule in tests/provider_calls.py")


def _create_action(type_: str) -> str | None:
    """The EC2 create call of the type (``ec2:CreateAction`` of the tags it sends)."""
    for call in data()["types"][type_].get("create", []):
        op = call["action"].split(":")[1]
        if call["action"].startswith("ec2:") and op != "CreateTags" and op.startswith(("Create", "Allocate")):
            return op
    return None


def authorizations(world: World, plan, p: Planned, phase: str, action: str) -> list[Request]:
    """The requests IAM evaluates for one call (see the module's doc); [] where the reference has no such action."""
    ref = iam_reference.action(action)
    if ref is None:
        raise AssertionError(f"{p.type}: {action} is not an action in the Service Authorization Reference")
    inputs = p.inputs
    context: dict[str, Any] = {"ec2:Region": world.region}
    if phase == "create":
        context.update({f"aws:RequestTag/{k}": v for k, v in (inputs.get("tags") or {}).items()})
        if (op := _create_action(p.type)) is not None:
            context["ec2:CreateAction"] = op
    if action == "iam:PassRole":
        # the role the create request passes, as tests/iam_arns.py derives it from the planned resource's call
        return [r for call in m.calls_for(p.resource, world.region) for r in requests_for(world, call, p.resource) if r.action == "iam:PassRole"]
    if action == "iam:CreateServiceLinkedRole":
        service = SERVICE_LINKED[p.type]
        return [Request(action, world.arn("iam", f"role/aws-service-role/{service}/AWSServiceRole"), {"iam:AWSServiceName": service})]
    if action.startswith("kms:") and p.type == "aws:eks/cluster:Cluster":
        key = p.resource["inputs"]["encryptionConfigKeyArn"]
        (planned,) = [r for r in plan.resources if r["type"] == "aws:kms/key:Key" and key.endswith(f"key/{r['id']}")]
        return [world.existing(action, "kms", f"key/{planned['id']}", planned["id"])]
    if not ref.types:
        return [Request(action, "*", context)]
    related = _child_related(world, p) if p.resource["type"] == "eks:index:Cluster" else related_resources(world, p.resource)
    if p.type == "aws:s3/bucket:Bucket":  # emptying the bucket (force_destroy) acts on its objects
        related.append(Request("", f"{related[0].resource}/run/global_step_10/model.pt"))
    own, others = related[0], related[1:]
    required = [t for t in ref.types if t.required]
    on = [own] if any(t.names(own.resource) for t in ref.types) else []
    on += [r for r in others if any(t.names(r.resource) for t in required) and r not in on]
    if not on:
        on = [r for r in others if any(t.names(r.resource) for t in ref.types)][:1]
    named = {t.name for t in ref.types for r in on if t.names(r.resource)}
    missing = [t.name for t in required if t.name not in named]
    if not on or missing:
        raise AssertionError(f"{p.type} {p.name}: {action} acts on {[t.name for t in ref.types]} (required missing: {missing}), "
                             f"none among {[r.resource for r in related]}")  # fmt: skip
    return [Request(action, r.resource, {**context, **r.context}) for r in on]
