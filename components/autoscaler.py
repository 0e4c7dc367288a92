"""The Kubernetes Cluster Autoscaler: GPU nodes exist only while a job needs them.

A pinned Helm release (https://kubernetes.github.io/autoscaler, chart ``cluster-autoscaler``) on
the system nodes, with an IRSA role whose trust is pinned to ``kube-system:cluster-autoscaler``.
It discovers the managed node groups' Auto Scaling groups by the tags EKS puts on them
(``k8s.io/cluster-autoscaler/enabled`` and ``k8s.io/cluster-autoscaler/<cluster>``) and learns a
group's labels, taints and extended resources at zero nodes from eks:DescribeNodegroup (see
``gpu_nodes.scale_from_zero_tags``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from . import identity
from .helm_releases import RELEASE_OPTIONS
from .scheduling import SYSTEM_NODE_LABELS
from .config import AutoscalerSettings

CHART = "cluster-autoscaler"
REPO = "https://kubernetes.github.io/autoscaler"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"

# Read-only calls: these APIs support no resource-level permissions, so they take "*"
# (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "IAM Policy", plus
# DescribeTags and DescribeLaunchTemplateVersions for auto-discovery of launch-template ASGs).
DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
# The only writes: only on Auto Scaling groups that carry this cluster's ownership tag.
SCALE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str) -> dict[str, Any]:
    """Trust of the autoscaler's role: only the ``kube-system:cluster-autoscaler`` service account
    of this cluster's OIDC issuer, for the STS audience."""
    return identity.irsa_trust_policy(oidc_provider_arn, oidc_issuer, NAMESPACE, SERVICE_ACCOUNT)


def autoscaler_policy(cluster_name: str, partition: str, region: str, account_id: str) -> dict[str, Any]:
    """Least-privilege permissions: describe calls, DescribeNodegroup on this cluster's node
    groups only, and scaling only of Auto Scaling groups tagged as owned by this cluster."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "Describe", "Effect": "Allow", "Action": list(DESCRIBE_ACTIONS), "Resource": "*"},
            {
                "Sid": "DescribeOwnNodegroups",
                "Effect": "Allow",
                "Action": "eks:DescribeNodegroup",
                "Resource": f"arn:{partition}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*/*",
            },
            {
                "Sid": "ScaleOwnGroups",
                "Effect": "Allow",
                "Action": list(SCALE_ACTIONS),
                "Resource": "*",
                "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}},
            },
        ],
    }


def helm_values(settings: AutoscalerSettings, cluster_name: str, region: str, role_arn: str) -> dict[str, Any]:
    """Values of the cluster-autoscaler chart."""
    return {
        "fullnameOverride": CHART,
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"tag": settings.image_tag},
        "rbac": {
            "serviceAccount": {
                "create": True,
                "name": SERVICE_ACCOUNT,
                "annotations": {"eks.amazonaws.com/role-arn": role_arn},
            }
        },
        "extraArgs": {
            "scale-down-unneeded-time": f"{settings.scale_down_unneeded_minutes}m",
            "balance-similar-node-groups": True,
            # Training pods mount a memory-backed /dev/shm (an emptyDir): with the default (true)
            # a GPU node that ran one could never be scaled down.
            "skip-nodes-with-local-storage": False,
            "expander": settings.expander,
        },
        # On the on-demand system nodes, never on a GPU node it might remove.
        "nodeSelector": dict(SYSTEM_NODE_LABELS),
    }


class ClusterAutoscaler(pulumi.ComponentResource):
    """The Cluster Autoscaler and its IRSA role.

    Args:
        settings: ``AutoscalerSettings`` (or a mapping with its camelCase keys).
        cluster_name: the EKS cluster; the autoscaler discovers and may scale only its groups.
        region: the AWS region.
        oidc_provider_arn / oidc_issuer: the cluster's IAM OIDC provider and issuer (with or
            without ``https://``).
        tags: AWS tags of the role.
        opts: must carry the cluster's Kubernetes provider.

    Outputs: ``role_arn``, ``release_name``.
    """

    role_arn: pulumi.Output[str]
    release_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        settings: AutoscalerSettings | Mapping[str, Any],
        cluster_name: pulumi.Input[str],
        region: pulumi.Input[str],
        oidc_provider_arn: pulumi.Input[str],
        oidc_issuer: pulumi.Input[str],
        tags: Optional[Mapping[str, str]] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:ClusterAutoscaler", name, None, opts)
        if not isinstance(settings, AutoscalerSettings):
            settings = AutoscalerSettings.model_validate(settings)
        tags = dict(tags or {})
        aws_child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOutputOptions(parent=self)

        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
                lambda args: json.dumps(irsa_trust_policy(args[0], args[1]))
            ),
            tags=tags,
            opts=aws_child,
        )
        partition = aws.get_partition_output(opts=invoke).partition
        account = aws.get_caller_identity_output(opts=invoke).account_id
        policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.id,
            policy=pulumi.Output.all(cluster_name, partition, region, account).apply(
                lambda args: json.dumps(autoscaler_policy(*args))
            ),
            opts=aws_child,
        )
        release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=CHART,
                chart=CHART,
                version=settings.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=REPO),
                namespace=NAMESPACE,
                values=pulumi.Output.all(cluster_name, region, role.arn).apply(
                    lambda args: helm_values(settings, args[0], args[1], args[2])
                ),
                **RELEASE_OPTIONS,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, policy]),
        )
        self.role_arn = role.arn
        self.release_name = release.name
        self.register_outputs({"roleArn": self.role_arn, "releaseName": self.release_name})
