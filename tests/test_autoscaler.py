"""Cluster Autoscaler: IRSA trust pinned to its service account, least-privilege IAM scoped to
this cluster, pinned chart and image on the system nodes, the flags GPU scale-down needs."""

from __future__ import annotations

import json

import pulumi
import pytest

from rlinf_eks.autoscaler import ClusterAutoscaler, autoscaler_policy, irsa_trust_policy
from rlinf_eks.config import ConfigError
from tests.harness import one, run_component, settings

RELEASE = "kubernetes:helm.sh/v3:Release"
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/ABCDEF0123456789"
PROVIDER_ARN = f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}"


def run_autoscaler(issuer: str = ISSUER, **autoscaler):
    s = settings(autoscaler={"enabled": True, **autoscaler})

    def build():
        provider = pulumi.ProviderResource("kubernetes", "k8s", {})
        ClusterAutoscaler(
            "autoscaler",
            settings=s.autoscaler,
            cluster_name="rlinf-test",
            region="us-west-2",
            oidc_provider_arn=PROVIDER_ARN,
            oidc_issuer=issuer,
            tags={"project": "rlinf-eks"},
            opts=pulumi.ResourceOptions(provider=provider),
        )

    return s, run_component(build)


@pytest.mark.parametrize("issuer", [ISSUER, "https://" + ISSUER])
def test_given_issuer_when_built_then_role_trusts_only_the_autoscaler_service_account(issuer):
    _, run = run_autoscaler(issuer=issuer)
    trust = json.loads(one(run, "aws:iam/role:Role")["inputs"]["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Federated": PROVIDER_ARN}
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"] == {
        "StringEquals": {
            f"{ISSUER}:sub": "system:serviceaccount:kube-system:cluster-autoscaler",
            f"{ISSUER}:aud": "sts.amazonaws.com",
        }
    }


def test_given_policy_when_built_then_writes_are_conditioned_on_the_cluster_tag_and_nodegroups_scoped():
    _, run = run_autoscaler()
    policy = json.loads(one(run, "aws:iam/rolePolicy:RolePolicy")["inputs"]["policy"])
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    scale = by_sid["ScaleOwnGroups"]
    assert sorted(scale["Action"]) == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert scale["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/rlinf-test": "owned"}}
    assert by_sid["DescribeOwnNodegroups"]["Resource"] == "arn:aws:eks:us-west-2:123456789012:nodegroup/rlinf-test/*/*"
    # every unconditioned "*" statement is read-only
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if statement["Resource"] == "*" and "Condition" not in statement:
            assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in actions), actions
    assert not any("*" in a for s in policy["Statement"] for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))


def test_policy_function_names_the_cluster_it_is_given():
    policy = autoscaler_policy("other", "aws-cn", "cn-north-1", "111122223333")
    text = json.dumps(policy)
    assert "k8s.io/cluster-autoscaler/other" in text and "arn:aws-cn:eks:cn-north-1:111122223333:nodegroup/other/*/*" in text
    assert "rlinf-test" not in text
    assert irsa_trust_policy("arn", "https://x")["Statement"][0]["Condition"]["StringEquals"]["x:aud"] == "sts.amazonaws.com"


def test_given_release_when_built_then_pinned_chart_discovery_region_and_irsa_annotation():
    s, run = run_autoscaler()
    release = one(run, RELEASE)["inputs"]
    role = one(run, "aws:iam/role:Role")
    assert (release["chart"], release["version"], release["repositoryOpts"]["repo"], release["namespace"]) == (
        "cluster-autoscaler", s.autoscaler.version, "https://kubernetes.github.io/autoscaler", "kube-system"
    )
    values = release["values"]
    assert values["autoDiscovery"] == {"clusterName": "rlinf-test"}
    assert values["awsRegion"] == "us-west-2"
    assert values["image"] == {"tag": s.autoscaler.image_tag}
    sa = values["rbac"]["serviceAccount"]
    assert sa["name"] == "cluster-autoscaler"
    assert sa["annotations"]["eks.amazonaws.com/role-arn"].endswith(f":role/{role['id']}")
    assert values["nodeSelector"] == {"role": "system"}


def test_given_settings_when_built_then_scale_down_flags_follow_config():
    _, run = run_autoscaler(scaleDownUnneededMinutes=7, expander="most-pods")
    args = one(run, RELEASE)["inputs"]["values"]["extraArgs"]
    assert args == {
        "scale-down-unneeded-time": "7m",
        "balance-similar-node-groups": True,
        "skip-nodes-with-local-storage": False,
        "expander": "most-pods",
    }


def test_given_release_when_built_then_it_uses_the_k8s_provider_and_waits_for_the_role_policy():
    _, run = run_autoscaler()
    release = one(run, RELEASE)
    assert release["provider"].endswith("::k8s")
    policy = one(run, "aws:iam/rolePolicy:RolePolicy")
    assert policy["urn"] in release["options"]["dependsOn"]
    assert one(run, "aws:iam/role:Role")["provider"] is None


def test_given_image_of_another_kubernetes_minor_then_config_is_rejected():
    with pytest.raises(ConfigError, match=r"autoscaler\.imageTag='v1\.33\.1'.*v1\.35\.x"):
        settings(autoscaler={"enabled": True, "imageTag": "v1.33.1"})
    assert settings(autoscaler={"enabled": True, "imageTag": "v1.33.1"}, cluster={"kubernetesVersion": "1.33"})


def test_default_pins_match_the_default_cluster_minor():
    s = settings(autoscaler={"enabled": True})
    assert s.autoscaler.kubernetes_minor == s.cluster.kubernetes_version
