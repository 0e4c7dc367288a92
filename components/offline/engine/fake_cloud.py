"""Pulumi mocks that play the cloud: fake but well-formed ids, ARNs, endpoints and kubeconfigs.

Every value is derived from the resource's name, so two runs give identical bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Mapping

import pulumi

from ...plan_reader import (
    AWS_EKS_CLUSTER,
    BUCKET,
    BUCKET_V2,
    DATA_REPOSITORY_ASSOCIATION,
    EGRESS_RULE,
    EIP,
    EVENT_RULE,
    EKS_CLUSTER,
    IAM_POLICY,
    IAM_ROLE,
    INGRESS_RULE,
    INTERNET_GATEWAY,
    KMS_KEY,
    KUBERNETES_PREFIX,
    LAUNCH_TEMPLATE,
    LUSTRE,
    NAT_GATEWAY,
    NODE_GROUP,
    OIDC_PROVIDER,
    PLACEMENT_GROUP,
    ROUTE,
    ROUTE_TABLE,
    ROUTE_TABLE_ASSOCIATION,
    SECURITY_GROUP,
    SQS_QUEUE,
    SUBNET,
    VPC,
)

ACCOUNT = "123456789012"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
STACK_REFERENCE_SECRETS = frozenset({"kubeconfig"})
"""Outputs every stack of this project exports as secrets (program._outputs)."""


def _hex(seed: str, length: int = 17) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def fake_kubeconfig(cluster: str, region: str) -> dict[str, Any]:
    endpoint = f"https://{_hex(cluster, 32).upper()}.gr7.{region}.eks.amazonaws.com"
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                     "args": ["eks", "get-token", "--cluster-name", cluster, "--region", region]}}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": endpoint, "certificate-authority-data": "LS0tLS1CRUdJTg=="}}],
        "contexts": [{"name": "aws", "context": {"cluster": cluster, "user": "aws"}}],
        "current-context": "aws",
        "users": [{"name": "aws", "user": user}],
    }


class FakeCloud(pulumi.runtime.Mocks):
    """Answers resource registrations and invokes the way AWS and EKS would, offline."""

    def __init__(
        self, region: str = "us-east-1", stack_references: Mapping[str, Mapping[str, Any]] | None = None, vpc_id: str | None = None
    ):
        self.region = region
        self.vpc_id = vpc_id
        """The existing VPC the stack names (network.vpcId), else None."""
        self.stack_references = dict(stack_references or {})
        """Outputs of other stacks by fully qualified name (an experiment's platform, from its plan):
        what a StackReference reads; the SECRET_OUTPUTS among them are read as secrets."""
        self.subnets: dict[str, dict] = {}
        """The subnets this plan created, by id: a lookup of one answers with its own VPC and AZ."""
        self.vpcs: list[str] = []
        """The VPCs this plan created or looked up, in order: the VPC of a looked-up subnet the plan
        did not create (an existing one, network.subnetIds) is the one the stack names."""

    # -- resources ---------------------------------------------------------------------------

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        state = dict(args.inputs)
        typ, name = args.typ, args.name
        if typ == STACK_REFERENCE:
            return self._stack_reference(state)
        handler = _RESOURCES.get(typ)
        if handler is not None:
            resource_id, extra = handler(self, name, state)
        elif typ.startswith(KUBERNETES_PREFIX):
            meta = state.get("metadata") or {}
            namespace = meta.get("namespace")
            resource_id = f"{namespace}/{meta.get('name', name)}" if namespace else meta.get("name", name)
            extra = {}
        elif typ.startswith("aws:"):
            resource_id = f"{name}-{_hex(typ + name, 8)}"
            extra = {"arn": self._arn(typ, resource_id)}
        else:
            resource_id, extra = f"{name}-id", {}
        for key, value in extra.items():
            state.setdefault(key, value)
        if typ == SUBNET:
            self.subnets[resource_id] = state
        elif typ == VPC:
            self.vpcs.append(resource_id)
        return resource_id, state

    def _stack_reference(self, state: dict) -> tuple[str, dict]:
        """A StackReference's read: the referenced stack's outputs (none for a stack not given)."""
        target = state.get("name") or ""
        outputs = dict(self.stack_references.get(target) or {})
        secret = sorted(key for key in outputs if key in STACK_REFERENCE_SECRETS)
        return target, {"name": target, "outputs": outputs, "secretOutputNames": secret}

    def _arn(self, typ: str, resource: str) -> str:
        service = typ.split(":")[1].split("/")[0]
        return f"arn:aws:{service}:{self.region}:{ACCOUNT}:{resource}"

    # -- invokes -----------------------------------------------------------------------------

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        # pulumi's MockMonitor iterates the failures list: it must be a list, never None
        handler = _CALLS.get(args.token)
        if handler is None:
            return {}, []
        return handler(self, dict(args.args)), []


def _prefixed(prefix: str) -> Callable[[FakeCloud, str, dict], tuple[str, dict]]:
    def handler(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
        resource_id = f"{prefix}-{_hex(name)}"
        return resource_id, {"arn": cloud._arn("aws:ec2", f"{prefix}/{resource_id}")}

    return handler


def _iam_role(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    role = state.get("name") or f"{name}-{_hex(name, 7)}"
    return role, {"name": role, "arn": f"arn:aws:iam::{ACCOUNT}:role/{role}", "uniqueId": f"AROA{_hex(name, 17).upper()}"}


def _iam_policy(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    policy = state.get("name") or f"{name}-{_hex(name, 7)}"
    arn = f"arn:aws:iam::{ACCOUNT}:policy/{policy}"
    return arn, {"name": policy, "arn": arn}


def _bucket(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    bucket = state.get("bucket") or f"{name}-{_hex(name, 7)}"
    return bucket, {
        "bucket": bucket,
        "arn": f"arn:aws:s3:::{bucket}",
        "bucketDomainName": f"{bucket}.s3.amazonaws.com",
        "bucketRegionalDomainName": f"{bucket}.s3.{cloud.region}.amazonaws.com",
    }


def _kms_key(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    key_id = f"{_hex(name, 8)}-{_hex(name + '1', 4)}-{_hex(name + '2', 4)}-{_hex(name + '3', 4)}-{_hex(name + '4', 12)}"
    return key_id, {"keyId": key_id, "arn": cloud._arn("aws:kms", f"key/{key_id}")}


def _launch_template(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    resource_id = f"lt-{_hex(name)}"
    return resource_id, {"arn": cloud._arn("aws:ec2", f"launch-template/{resource_id}"), "latestVersion": 1, "defaultVersion": 1}


def _placement_group(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    group = state.get("name") or f"{name}-{_hex(name, 7)}"
    return group, {"name": group, "placementGroupId": f"pg-{_hex(name)}", "arn": cloud._arn("aws:ec2", f"placement-group/{group}")}


def _sqs_queue(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    """An SQS queue: its id is its URL; name (auto-named as Pulumi does), ARN and URL."""
    queue = state.get("name") or f"{name}-{_hex(name, 7)}"
    url = f"https://sqs.{cloud.region}.amazonaws.com/{ACCOUNT}/{queue}"
    return url, {"name": queue, "arn": f"arn:aws:sqs:{cloud.region}:{ACCOUNT}:{queue}", "url": url}


def _event_rule(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    """An EventBridge rule on the default bus: its id and name (auto-named as Pulumi does)."""
    rule = state.get("name") or f"{name}-{_hex(name, 7)}"
    return rule, {"name": rule, "arn": f"arn:aws:events:{cloud.region}:{ACCOUNT}:rule/{rule}"}


def _node_group(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    group = state.get("nodeGroupName") or f"{name}-{_hex(name, 7)}"
    cluster = state.get("clusterName", "cluster")
    return f"{cluster}:{group}", {
        "nodeGroupName": group,
        "arn": f"arn:aws:eks:{cloud.region}:{ACCOUNT}:nodegroup/{cluster}/{group}/{_hex(name, 8)}",
        "status": "ACTIVE",
        # EKS names a managed node group's Auto Scaling group eks-<node group>-<uuid>
        "resources": [{"autoscalingGroups": [{"name": f"eks-{group}-{_hex(name, 8)}-{_hex(name + 'asg', 4)}"}]}],
    }


def _lustre(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    fs_id = f"fs-{_hex(name)}"
    return fs_id, {
        "dnsName": f"{fs_id}.fsx.{cloud.region}.amazonaws.com",
        "mountName": _hex(name + "mount", 8),
        "arn": cloud._arn("aws:fsx", f"file-system/{fs_id}"),
    }


def _data_repository_association(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    association = f"dra-{_hex(name)}"
    return association, {"associationId": association, "arn": cloud._arn("aws:fsx", f"association/{state.get('fileSystemId', 'fs')}/{association}")}


def _oidc_provider(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    url = (state.get("url") or "").removeprefix("https://")
    arn = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{url}"
    return arn, {"arn": arn}


def _eks_cluster(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    """pulumi_eks.Cluster is a remote component: every output is None unless the mock gives it."""
    cluster = state.get("name") or f"{name}-eksCluster-{_hex(name, 7)}"
    issuer = f"https://oidc.eks.{cloud.region}.amazonaws.com/id/{_hex(cluster, 32).upper()}"
    kubeconfig = fake_kubeconfig(cluster, cloud.region)
    return f"{name}-id", {
        "kubeconfig": kubeconfig,
        "kubeconfigJson": json.dumps(kubeconfig, sort_keys=True),
        "clusterSecurityGroupId": f"sg-{_hex(cluster + 'cluster')}",
        "nodeSecurityGroupId": f"sg-{_hex(cluster + 'node')}",
        "oidcProviderArn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{issuer.removeprefix('https://')}",
        "oidcProviderUrl": issuer.removeprefix("https://"),
        "oidcIssuer": issuer.removeprefix("https://"),
    }


def _aws_eks_cluster(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    """A plain aws.eks.Cluster (as a foreign program may create): EKS fills in the cluster
    security group it creates, inside vpcConfig."""
    cluster = state.get("name") or f"{name}-{_hex(name, 7)}"
    # vpcConfig is an input too, so it is completed in place (extra keys only fill missing ones).
    state["vpcConfig"] = {**(state.get("vpcConfig") or {}), "clusterSecurityGroupId": f"sg-{_hex(cluster + 'cluster')}"}
    return cluster, {
        "name": cluster,
        "arn": f"arn:aws:eks:{cloud.region}:{ACCOUNT}:cluster/{cluster}",
        "endpoint": f"https://{_hex(cluster, 32).upper()}.gr7.{cloud.region}.eks.amazonaws.com",
    }


def _ecr_repository(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    repository = state.get("name") or f"{name}-{_hex(name, 7)}"
    return repository, {
        "name": repository,
        "arn": cloud._arn("aws:ecr", f"repository/{repository}"),
        "registryId": ACCOUNT,
        "repositoryUrl": f"{ACCOUNT}.dkr.ecr.{cloud.region}.amazonaws.com/{repository}",
    }


def _log_group(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    group = state.get("name") or f"{name}-{_hex(name, 7)}"
    return group, {"name": group, "arn": cloud._arn("aws:logs", f"log-group:{group}")}


def _codebuild_project(cloud: FakeCloud, name: str, state: dict) -> tuple[str, dict]:
    project = state.get("name") or f"{name}-{_hex(name, 7)}"
    return project, {"name": project, "arn": cloud._arn("aws:codebuild", f"project/{project}")}


_RESOURCES: dict[str, Callable[[FakeCloud, str, dict], tuple[str, dict]]] = {
    VPC: _prefixed("vpc"),
    SUBNET: _prefixed("subnet"),
    SECURITY_GROUP: _prefixed("sg"),
    INGRESS_RULE: _prefixed("sgr"),
    EGRESS_RULE: _prefixed("sgr"),
    INTERNET_GATEWAY: _prefixed("igw"),
    NAT_GATEWAY: _prefixed("nat"),
    EIP: _prefixed("eipalloc"),
    ROUTE_TABLE: _prefixed("rtb"),
    ROUTE: _prefixed("r"),
    ROUTE_TABLE_ASSOCIATION: _prefixed("rtbassoc"),
    LAUNCH_TEMPLATE: _launch_template,
    PLACEMENT_GROUP: _placement_group,
    SQS_QUEUE: _sqs_queue,
    EVENT_RULE: _event_rule,
    IAM_ROLE: _iam_role,
    IAM_POLICY: _iam_policy,
    OIDC_PROVIDER: _oidc_provider,
    BUCKET: _bucket,
    BUCKET_V2: _bucket,
    KMS_KEY: _kms_key,
    NODE_GROUP: _node_group,
    LUSTRE: _lustre,
    DATA_REPOSITORY_ASSOCIATION: _data_repository_association,
    EKS_CLUSTER: _eks_cluster,
    AWS_EKS_CLUSTER: _aws_eks_cluster,
    "aws:ecr/repository:Repository": _ecr_repository,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:codebuild/project:Project": _codebuild_project,
}


def _azs(cloud: FakeCloud, args: dict) -> dict:
    names = [f"{cloud.region}{letter}" for letter in "abcdef"]
    return {"names": names, "zoneIds": [f"use1-az{i}" for i in range(1, 7)], "id": cloud.region}


def _caller(cloud: FakeCloud, args: dict) -> dict:
    return {"accountId": ACCOUNT, "arn": f"arn:aws:iam::{ACCOUNT}:user/offline", "userId": "AIDAOFFLINE", "id": ACCOUNT}


def _partition(cloud: FakeCloud, args: dict) -> dict:
    return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}


def _region(cloud: FakeCloud, args: dict) -> dict:
    return {"name": cloud.region, "region": cloud.region, "id": cloud.region}


def _get_cluster(cloud: FakeCloud, args: dict) -> dict:
    name = args.get("name", "cluster")
    issuer = f"https://oidc.eks.{cloud.region}.amazonaws.com/id/{_hex(name, 32).upper()}"
    return {
        "name": name,
        "arn": f"arn:aws:eks:{cloud.region}:{ACCOUNT}:cluster/{name}",
        "endpoint": f"https://{_hex(name, 32).upper()}.gr7.{cloud.region}.eks.amazonaws.com",
        "version": "1.34",
        "identities": [{"oidcs": [{"issuer": issuer}]}],
        "vpcConfig": {"clusterSecurityGroupId": f"sg-{_hex(name + 'cluster')}", "vpcId": f"vpc-{_hex(name)}",
                      "subnetIds": [], "securityGroupIds": [], "endpointPrivateAccess": True,
                      "endpointPublicAccess": False, "publicAccessCidrs": []},
        "id": name,
    }


def _get_oidc_provider(cloud: FakeCloud, args: dict) -> dict:
    url = (args.get("url") or "").removeprefix("https://")
    return {"arn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{url}", "url": url, "id": url}


def _get_vpc(cloud: FakeCloud, args: dict) -> dict:
    vpc_id = args.get("id") or f"vpc-{_hex('default')}"
    if vpc_id not in cloud.vpcs:
        cloud.vpcs.append(vpc_id)
    return {"id": vpc_id, "cidrBlock": "10.0.0.0/16", "arn": cloud._arn("aws:ec2", f"vpc/{vpc_id}"),
            "enableDnsSupport": True, "enableDnsHostnames": True, "ownerId": ACCOUNT}


def _get_subnet(cloud: FakeCloud, args: dict) -> dict:
    """A subnet the plan created answers with its own VPC, AZ and CIDR; another (an existing
    subnet the stack names) lies in the VPC the stack names, as AWS would have it: a lookup never
    makes two plans of one stack differ where a real preview would not."""
    subnet_id = args.get("id") or f"subnet-{_hex('default')}"
    created = cloud.subnets.get(subnet_id) or {}
    vpc_id = created.get("vpcId") or cloud.vpc_id or (cloud.vpcs[0] if cloud.vpcs else f"vpc-{_hex('default')}")
    return {"id": subnet_id, "vpcId": vpc_id, "availabilityZone": created.get("availabilityZone") or f"{cloud.region}a",
            "cidrBlock": created.get("cidrBlock") or "10.0.0.0/20", "arn": cloud._arn("aws:ec2", f"subnet/{subnet_id}"), "ownerId": ACCOUNT}


_CALLS: dict[str, Callable[[FakeCloud, dict], dict]] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": _azs,
    "aws:index/getCallerIdentity:getCallerIdentity": _caller,
    "aws:index/getPartition:getPartition": _partition,
    "aws:index/getRegion:getRegion": _region,
    "aws:eks/getCluster:getCluster": _get_cluster,
    "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider": _get_oidc_provider,
    "aws:ec2/getVpc:getVpc": _get_vpc,
    "aws:ec2/getSubnet:getSubnet": _get_subnet,
}
