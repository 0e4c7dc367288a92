"""The plan says what it does not show (issue 18): the children pulumi-eks creates inside
``eks:index:Cluster`` are listed in plan.json ``notPlanned`` and in the printed tree as "created by
pulumi-eks (not planned here)", with what the stack sets on each, and are kept out of the count."""

from __future__ import annotations

import json

from rlinf_eks.__main__ import main
from rlinf_eks.offline.engine.eks_children import CREATED_BY
from tests.harness import ROOT, plan_stack

EKS_CLUSTER = "eks:index:Cluster"


def _by_name(children):
    return {(c["type"], c["name"]): c for c in children}


def test_the_default_stack_lists_the_eks_cluster_role_addons_and_oidc_provider_with_what_it_sets():
    plan = json.loads(plan_stack("single-node").dumps())
    (component,) = [r for r in plan["resources"] if r["type"] == EKS_CLUSTER]
    children = plan["notPlanned"]
    assert {c["parent"] for c in children} == {component["urn"]} and {c["createdBy"] for c in children} == {CREATED_BY}
    named = _by_name(children)
    assert set(named) == {
        ("eks:index:ServiceRole", "rlinf-eks-eksRole"),
        ("aws:iam/role:Role", "rlinf-eks-eksRole-role"),
        ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "rlinf-eks-eksRole-4b490823"),  # sha1 of the policy id, as pulumi-eks names it
        ("aws:eks/cluster:Cluster", "rlinf-eks-eksCluster"),
        ("aws:eks/addon:Addon", "rlinf-eks-kube-proxy"),
        ("pulumi:providers:kubernetes", "rlinf-eks-eks-k8s"),
        ("eks:index:VpcCniAddon", "rlinf-eks-vpc-cni"),
        ("aws:eks/addon:Addon", "rlinf-eks-vpc-cni"),
        ("aws:iam/openIdConnectProvider:OpenIdConnectProvider", "rlinf-eks-oidcProvider"),
    }  # no security groups (skipDefaultSecurityGroups), no instance role or node group, no CoreDNS (added after the system nodes)
    inputs = component["inputs"]
    cluster = named[("aws:eks/cluster:Cluster", "rlinf-eks-eksCluster")]["sets"]
    assert cluster["name"] == "rlinf-single-node" and cluster["version"] == inputs["version"]
    assert cluster["encryptionConfig"] == {"provider": {"keyArn": inputs["encryptionConfigKeyArn"]}, "resources": ["secrets"]}
    assert cluster["vpcConfig"]["subnetIds"] == inputs["privateSubnetIds"]
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["203.0.113.0/24"] and cluster["vpcConfig"]["endpointPrivateAccess"] is True
    assert cluster["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}
    assert cluster["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]
    cni = named[("aws:eks/addon:Addon", "rlinf-eks-vpc-cni")]["sets"]
    assert cni["addonVersion"] == inputs["vpcCniOptions"]["addonVersion"] and cni["configurationValues"]["enableNetworkPolicy"] == "true"
    urns = {r["urn"] for r in plan["resources"]}
    assert not any(f"::{c['name']}" in urn and c["type"] in urn for c in children for urn in urns)


def test_admin_roles_appear_as_access_entries_created_by_pulumi_eks():
    plan = plan_stack("single-node", "cluster.adminRoleArns[0]=arn:aws:iam::123456789012:role/Admin")
    named = _by_name(plan.not_planned)
    entry = named[("aws:eks/accessEntry:AccessEntry", "rlinf-eks-admin-admin")]
    assert entry["sets"]["principalArn"] == "arn:aws:iam::123456789012:role/Admin"
    association = named[("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "rlinf-eks-admin-admin-cluster-admin")]
    assert association["sets"]["policyArn"].endswith(":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")


def test_the_tree_shows_them_under_the_component_and_the_count_says_they_are_not_in_it(tmp_path, capsys):
    assert main(["plan", "single-node", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    component = next(line for line in printed.splitlines() if f"+ {EKS_CLUSTER}  rlinf-eks" in line)
    after = printed.split(component, 1)[1].splitlines()[1]
    assert after.strip().startswith(". eks:index:ServiceRole  rlinf-eks-eksRole") and after.endswith("created by pulumi-eks (not planned here)")
    assert ". aws:eks/cluster:Cluster  rlinf-eks-eksCluster  created by pulumi-eks (not planned here)" in printed
    written = json.loads((tmp_path / "plan.json").read_text())
    assert f"Resources: {len(written['resources'])} to create" in printed
    assert f"plus {len(written['notPlanned'])} created by pulumi-eks inside eks:index:Cluster" in printed


def test_the_plan_guide_names_the_new_field():
    assert '"notPlanned"' in (ROOT / "docs" / "configuration.md").read_text()
