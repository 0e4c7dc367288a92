"""Cluster: API auth with access entries, private endpoint by default, logging, KMS encryption, no
default node group, an on-demand system node group; existing-cluster mode creates no cluster."""

from __future__ import annotations

import pulumi
import pytest

from rlinf_eks.cluster import Cluster, access_entries_for
from rlinf_eks.config import PROJECT, ClusterSettings, ConfigError
from rlinf_eks.offline.engine import engine
from rlinf_eks.offline.engine.engine import SECRET
from tests.harness import has_inputs, one, run_component

EKS = "eks:index:Cluster"
ADMIN = "arn:aws:iam::123456789012:role/PlatformAdmin"


def _cluster(kubeconfig=None, **cluster):
    return Cluster(
        "rlinf",
        settings=ClusterSettings.model_validate(cluster),
        cluster_name="rlinf-test",
        vpc_id="vpc-0abc",
        subnet_ids=["subnet-a", "subnet-b"],
        existing_kubeconfig=kubeconfig,
        tags={"project": "rlinf-eks"},
    )


def _outputs(kubeconfig=None, **cluster):
    def program():
        c = _cluster(kubeconfig, **cluster)
        return {
            "name": c.cluster_name,
            "kubeconfig": c.kubeconfig,
            "sg": c.cluster_security_group_id,
            "oidcArn": c.oidc_provider_arn,
            "issuer": c.oidc_issuer,
        }

    return engine.run(program, project=PROJECT, stack="test", config={})


def test_given_defaults_when_cluster_built_then_eks_is_private_api_authenticated_logged_and_kms_encrypted():
    resources = run_component(lambda: _cluster())
    cluster = one(resources, EKS)
    assert has_inputs(
        cluster,
        {
            "name": "rlinf-test",
            "version": "1.35",
            "authenticationMode": "API",
            "createOidcProvider": True,
            "endpointPrivateAccess": True,
            "endpointPublicAccess": False,
            "enabledClusterLogTypes": ["api", "audit", "authenticator"],
            "skipDefaultNodeGroup": True,
            "skipDefaultSecurityGroups": True,
            "privateSubnetIds": ["subnet-a", "subnet-b"],
        },
    )
    assert "publicAccessCidrs" not in cluster["inputs"]
    key = one(resources, "aws:kms/key:Key")
    assert has_inputs(key, {"enableKeyRotation": True})
    assert cluster["inputs"]["encryptionConfigKeyArn"].startswith("arn:aws:kms:") and key["id"] in cluster["inputs"]["encryptionConfigKeyArn"]


def test_given_a_supported_cni_version_when_cluster_built_then_the_vpc_cni_addon_runs_it():
    resources = run_component(lambda: _cluster(vpcCniVersion="v1.19.2-eksbuild.1"))
    assert has_inputs(one(resources, EKS), {"vpcCniOptions": {"addonVersion": "v1.19.2-eksbuild.1"}})


def test_given_public_cidrs_when_cluster_built_then_only_those_reach_the_public_endpoint():
    resources = run_component(lambda: _cluster(endpointPublicAccessCidrs=["203.0.113.0/24"]))
    assert has_inputs(one(resources, EKS), {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]})


def test_given_admin_roles_when_cluster_built_then_each_gets_a_cluster_scoped_admin_access_entry():
    resources = run_component(lambda: _cluster(adminRoleArns=[ADMIN]))
    entries = one(resources, EKS)["inputs"]["accessEntries"]
    assert entries == {
        "admin-platformadmin": {
            "principalArn": ADMIN,
            "accessPolicies": {
                "cluster-admin": {
                    "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                    "accessScope": {"type": "cluster"},
                }
            },
        }
    }


def test_access_entries_follow_the_roles_partition():
    entry = access_entries_for(["arn:aws-us-gov:iam::123456789012:role/Ops"])["admin-ops"]
    assert entry.access_policies["cluster-admin"].policy_arn.startswith("arn:aws-us-gov:eks::aws:")


def test_given_system_nodes_when_cluster_built_then_an_on_demand_labelled_node_group_has_its_own_role():
    resources = run_component(lambda: _cluster(systemNodes={"instanceType": "m6i.large", "count": 3}))
    group = one(resources, "aws:eks/nodeGroup:NodeGroup")
    assert has_inputs(
        group,
        {
            "clusterName": "rlinf-test",
            "capacityType": "ON_DEMAND",
            "instanceTypes": ["m6i.large"],
            "labels": {"role": "system"},
            "scalingConfig": {"desiredSize": 3, "minSize": 3, "maxSize": 3},
            "subnetIds": ["subnet-a", "subnet-b"],
        },
    )
    role = one(resources, "aws:iam/role:Role")
    assert group["inputs"]["nodeRoleArn"].endswith(f":role/{role['id']}")
    attached = sorted(r["inputs"]["policyArn"] for r in resources.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"))
    assert attached == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    ]
    assert set(group["options"]["dependsOn"]) >= {r["urn"] for r in resources.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}


def test_given_new_cluster_when_built_then_pod_identity_agent_and_coredns_addons_come_after_the_system_nodes():
    resources = run_component(lambda: _cluster())
    group = one(resources, "aws:eks/nodeGroup:NodeGroup")
    for addon in ("eks-pod-identity-agent", "coredns"):
        found = one(resources, "aws:eks/addon:Addon", f"rlinf-{addon}")
        assert has_inputs(found, {"addonName": addon, "clusterName": "rlinf-test"})
        assert group["urn"] in found["options"]["dependsOn"]
    assert has_inputs(one(resources, EKS), {"corednsAddonOptions": {"enabled": False}})


def test_given_new_cluster_when_built_then_outputs_are_well_formed_and_kubeconfig_is_secret():
    run = _outputs()
    out = run.outputs
    assert out["name"] == "rlinf-test" and out["kubeconfig"] == SECRET
    assert out["sg"].startswith("sg-") and out["oidcArn"].startswith("arn:aws:iam::")
    assert out["issuer"].startswith("oidc.eks.us-east-1.amazonaws.com/id/")
    provider = next(r for r in run.registrations if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == SECRET


def test_given_existing_cluster_when_built_then_nothing_is_created_and_ids_come_from_lookups():
    run = _outputs(kubeconfig=pulumi.Output.secret("apiVersion: v1"), existing=True, name="shared")
    assert sorted(r.type for r in run.registrations) == ["pulumi:providers:kubernetes", "rlinf-eks:index:Cluster"]
    out = run.outputs
    assert out["name"] == "rlinf-test"
    assert out["sg"].startswith("sg-") and out["issuer"].startswith("oidc.eks.")
    assert out["oidcArn"] == f"arn:aws:iam::123456789012:oidc-provider/{out['issuer']}"


def test_given_existing_cluster_without_kubeconfig_when_built_then_a_config_error_names_the_secret_key():
    with pytest.raises(ConfigError, match="rlinf-eks:kubeconfig"):
        run_component(lambda: _cluster(existing=True, name="shared"))


def test_given_new_cluster_when_a_consumer_uses_its_name_then_it_waits_for_the_system_nodes():
    def program():
        c = _cluster()

        async def dependency_types():
            return sorted({r.pulumi_type for r in await c.cluster_name.resources()})

        return {"name": c.cluster_name, "deps": pulumi.Output.from_input(dependency_types())}

    out = engine.run(program, project=PROJECT, stack="test", config={}).outputs
    assert out["name"] == "rlinf-test"
    assert "aws:eks/nodeGroup:NodeGroup" in out["deps"]
