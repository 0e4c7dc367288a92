"""What pulumi-eks creates inside an ``eks:index:Cluster`` that the offline plan cannot see.

``eks:index:Cluster`` is a component whose children (the EKS cluster itself, its IAM role, the
kube-proxy and vpc-cni add-ons, the OIDC provider, access entries, ...) are registered by
pulumi-eks's own provider process, not by this program: under the mocks the plan records the
component and nothing below it. So plan.json lists them apart (``notPlanned``), with what the
stack sets on each (derived from the Cluster's inputs), and the printed tree shows them as
"created by pulumi-eks (not planned here)": the resource count and the policy checks do not
include them.

Derived from pulumi/pulumi-eks at 7bf0c1b179932ce51cb02dfc4f9bd0d7550cb0cd (v4.3.0 and 9
commits, 2026-08-12): ``nodejs/eks/cluster/cluster.ts`` (``createCore``, ``createCluster``),
``servicerole.ts``, ``addons/cni-addon.ts``, ``cluster/authenticationMode.ts``. Only the branches
the Cluster's inputs take are followed; what pulumi-eks looks up at deploy time (the kube-proxy
version, the issuer's thumbprint) is said, not guessed.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...plan_reader import EKS_CLUSTER

CREATED_BY = "pulumi-eks (not planned here)"
SOURCE = "pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts @7bf0c1b1 (v4.3.0+9)"
_AT_DEPLOY = "(looked up by pulumi-eks at deploy time)"


def _sha1(text: str) -> str:
    """pulumi-eks servicerole.ts ``sha1hash``: the first 8 hex digits of SHA-1."""
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _child(parent: str, type_: str, name: str, sets: dict[str, Any]) -> dict[str, Any]:
    return {"parent": parent, "type": type_, "name": name, "createdBy": CREATED_BY, "sets": sets}


def _service_role(urn: str, name: str, service: str, policies: list[str], tags: Any) -> list[dict[str, Any]]:
    role = f"{name}-role"
    out = [
        _child(urn, "eks:index:ServiceRole", name, {"service": service, "managedPolicies": policies}),
        _child(urn, "aws:iam/role:Role", role, {"assumeRolePolicy": f"{service}: sts:AssumeRole, sts:TagSession", "tags": tags}),
    ]
    for policy in policies:
        policy_id = f"arn:aws:iam::aws:policy/{policy}"
        # the attachment's inputs policyArn and role (an IAM role's name, not the node label scheduling.py owns)
        inputs = dict(policyArn=f"arn:<partition>:iam::aws:policy/{policy}", role=role)
        out.append(_child(urn, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"{name}-{_sha1(policy_id)}", inputs))
    return out


def cluster_children(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    """The children pulumi-eks creates for one ``eks:index:Cluster`` (plan.json shape)."""
    urn, name, i = cluster["urn"], cluster["name"], cluster.get("inputs") or {}
    tags = i.get("tags") or {}
    out: list[dict[str, Any]] = []
    if not i.get("serviceRole"):
        out += _service_role(urn, f"{name}-eksRole", "eks.amazonaws.com", ["AmazonEKSClusterPolicy"], tags)
    if not i.get("skipDefaultSecurityGroups") and not i.get("clusterSecurityGroup"):
        out.append(_child(urn, "aws:ec2/securityGroup:SecurityGroup", f"{name}-eksClusterSecurityGroup", {"vpcId": i.get("vpcId")}))
        out.append(_child(urn, "aws:ec2/securityGroupRule:SecurityGroupRule", f"{name}-eksClusterInternetEgressRule",
                          {"type": "egress", "protocol": "-1", "cidrBlocks": ["0.0.0.0/0"]}))
    subnets = i.get("subnetIds") or [*(i.get("publicSubnetIds") or []), *(i.get("privateSubnetIds") or [])]
    vpc_config = {key: i[key] for key in ("endpointPrivateAccess", "endpointPublicAccess", "publicAccessCidrs") if key in i}
    cluster_sets: dict[str, Any] = {
        "name": i.get("name"),
        "version": i.get("version"),
        "roleArn": f"the ARN of {name}-eksRole-role" if not i.get("serviceRole") else i.get("serviceRole"),
        "vpcConfig": {"subnetIds": subnets, **vpc_config,
                      "clusterSecurityGroupId": "created by EKS itself (the managed node groups carry it)"},
        "enabledClusterLogTypes": i.get("enabledClusterLogTypes"),
        "bootstrapSelfManagedAddons": i.get("bootstrapSelfManagedAddons", True),
        "tags": {"Name": f"{name}-eksCluster", **tags},
    }
    if i.get("encryptionConfigKeyArn"):
        cluster_sets["encryptionConfig"] = {"provider": {"keyArn": i["encryptionConfigKeyArn"]}, "resources": ["secrets"]}
    if i.get("authenticationMode"):
        cluster_sets["accessConfig"] = {"authenticationMode": i["authenticationMode"], "bootstrapClusterCreatorAdminPermissions": True}
    out.append(_child(urn, "aws:eks/cluster:Cluster", f"{name}-eksCluster", cluster_sets))
    proxy = i.get("kubeProxyAddonOptions") or {}
    if proxy.get("enabled", True):
        out.append(_child(urn, "aws:eks/addon:Addon", f"{name}-kube-proxy", {
            "addonName": "kube-proxy", "addonVersion": proxy.get("version") or f"the newest for the cluster's version {_AT_DEPLOY}",
            "preserve": True, "tags": tags,
        }))
    out.append(_child(urn, "pulumi:providers:kubernetes", f"{name}-eks-k8s", {"kubeconfig": "the cluster's (secret)"}))
    if i.get("createInstanceRole") or (not i.get("skipDefaultNodeGroup") and i.get("createInstanceRole") is None):
        out += _service_role(urn, f"{name}-instanceRole", "ec2.amazonaws.com",
                             ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"], tags)
    mode = i.get("authenticationMode")
    if mode in (None, "CONFIG_MAP", "API_AND_CONFIG_MAP"):
        aws_auth = {"metadata": {"name": "aws-auth", "namespace": "kube-system"}}
        out.append(_child(urn, "kubernetes:core/v1:ConfigMap", f"{name}-nodeAccess", aws_auth))
    if mode in ("API", "API_AND_CONFIG_MAP"):
        for key, entry in sorted((i.get("accessEntries") or {}).items()):
            out.append(_child(urn, "aws:eks/accessEntry:AccessEntry", f"{name}-{key}", {"principalArn": entry.get("principalArn")}))
            for assoc, policy in sorted((entry.get("accessPolicies") or {}).items()):
                out.append(_child(urn, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", f"{name}-{key}-{assoc}",
                                  {"policyArn": policy.get("policyArn"), "accessScope": policy.get("accessScope")}))
    if not i.get("useDefaultVpcCni"):
        cni = i.get("vpcCniOptions") or {}
        policy = {"env": "pulumi-eks's CNI environment from vpcCniOptions (addons/cni-addon.ts)"}
        if "enableNetworkPolicy" in cni:
            policy["enableNetworkPolicy"] = str(cni["enableNetworkPolicy"]).lower()
        out.append(_child(urn, "eks:index:VpcCniAddon", f"{name}-vpc-cni", {k: v for k, v in sorted(cni.items())}))
        out.append(_child(urn, "aws:eks/addon:Addon", f"{name}-vpc-cni", {
            "addonName": "vpc-cni", "addonVersion": cni.get("addonVersion") or f"the default {_AT_DEPLOY}",
            "configurationValues": policy,
            "preserve": True,
        }))
    coredns = i.get("corednsAddonOptions") or {}
    if coredns.get("enabled") is True or (not i.get("skipDefaultNodeGroup") and coredns.get("enabled", True)):
        out.append(_child(urn, "aws:eks/addon:Addon", f"{name}-coredns", {"addonName": "coredns"}))
    if i.get("createOidcProvider"):
        out.append(_child(urn, "aws:iam/openIdConnectProvider:OpenIdConnectProvider", f"{name}-oidcProvider", {
            "clientIdLists": ["sts.amazonaws.com"], "url": "the cluster's OIDC issuer",
            "thumbprintLists": [f"the issuer's CA thumbprint {_AT_DEPLOY}"],
        }))
    if not i.get("skipDefaultSecurityGroups"):  # nodes/securitygroup.ts
        out.append(_child(urn, "aws:ec2/securityGroup:SecurityGroup", f"{name}-nodeSecurityGroup", {"vpcId": i.get("vpcId")}))
        for rule in ("eksNodeIngressRule", "eksNodeClusterIngressRule", "eksExtApiServerClusterIngressRule",
                     "eksNodeInternetEgressRule", "eksClusterIngressRule"):
            out.append(_child(urn, "aws:ec2/securityGroupRule:SecurityGroupRule", f"{name}-{rule}", {}))
    if not i.get("skipDefaultNodeGroup"):
        out.append(_child(urn, "eks:index:NodeGroupV2", name, {"note": "pulumi-eks's default node group"}))
    return out


def not_planned(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pulumi-eks child of every ``eks:index:Cluster`` in the plan, in plan order."""
    return [child for resource in resources if resource["type"] == EKS_CLUSTER for child in cluster_children(resource)]
