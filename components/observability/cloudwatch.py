"""The cloudwatch backend: the ``amazon-cloudwatch-observability`` EKS add-on (Container Insights
with OpenTelemetry metrics: NVIDIA DCGM GPU metrics and EFA metrics attributed to pods), its
CloudWatch agent authorised through EKS Pod Identity.

Pod Identity rather than IRSA: the add-on supports it from 3.1.0 (CloudWatch user guide, "Quick
start with the Amazon CloudWatch Observability EKS add-on"), the trust names no OIDC issuer, and a
new cluster of this project runs the ``eks-pod-identity-agent`` add-on that serves the
credentials (cluster.py). An existing cluster needs that agent too (its ``observability.backend``
defaults to none)."""

from __future__ import annotations

import json
from typing import Any, Mapping

import pulumi
import pulumi_aws as aws

from ..identity import POD_IDENTITY_PRINCIPAL, pod_identity_trust_policy  # noqa: F401 (POD_IDENTITY_PRINCIPAL re-exported)
from ..scheduling import GPU_NODE_LABELS, gpu_toleration

ADDON = "amazon-cloudwatch-observability"
# The add-on installs into this namespace and runs its agent as this service account (chart
# amazon-cloudwatch-observability: namespace amazon-cloudwatch, agent service account cloudwatch-agent).
NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
# The least-privilege managed policy the CloudWatch user guide names for the agent.
AGENT_POLICY = "CloudWatchAgentServerPolicy"


def configuration_values() -> dict[str, Any]:
    """The add-on's configurationValues: keys of the chart amazon-cloudwatch-observability 6.4.0's
    values.yaml (tests check them against it).

    - ``tolerations``: exactly the GPU taint (the chart's default tolerates every taint; the stack's
      nodes carry only this one), so the agent, Fluent Bit, node exporter and the DCGM exporter
      run on the GPU nodes as well as the system nodes.
    - ``dcgmExporter.affinity``: the chart selects its DCGM exporter by a list of instance types;
      the GPU label selects every GPU node of this stack, whatever its type.
    - ``otelContainerInsights``: the OpenTelemetry metrics (DCGM and EFA per pod, PromQL in
      CloudWatch Query Studio); off by default in the chart.
    """
    return {
        "tolerations": [gpu_toleration()],
        "dcgmExporter": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in GPU_NODE_LABELS.items()]}
                        ]
                    }
                }
            }
        },
        "otelContainerInsights": {"enabled": True},
    }


class CloudWatchObservability(pulumi.ComponentResource):
    """The amazon-cloudwatch-observability add-on and its agent's Pod Identity.

    Args:
        cluster_name: the EKS cluster (an Output that resolves once its nodes exist: the add-on
            runs Deployments and turns DEGRADED without a node to run them).
        addon_version: the pinned add-on version (``observability.cloudwatchAddonVersion``).
        partition: the ARN partition of the region (aws, aws-cn, aws-us-gov).
        tags: AWS tags of every resource.
    """

    def __init__(
        self,
        name: str,
        *,
        cluster_name: pulumi.Input[str],
        addon_version: str,
        partition: str,
        tags: Mapping[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("rlinf-eks:index:CloudWatchObservability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-agent",
            assume_role_policy=json.dumps(pod_identity_trust_policy()),
            description="The CloudWatch agent of the amazon-cloudwatch-observability add-on (EKS Pod Identity)",
            tags=dict(tags),
            opts=child,
        )
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-agent-policy",
            role=role.name,
            policy_arn=f"arn:{partition}:iam::aws:policy/{AGENT_POLICY}",
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-agent",
            cluster_name=cluster_name,
            namespace=NAMESPACE,
            service_account=AGENT_SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=dict(tags),
            opts=child,
        )
        # the agent starts with its credentials: the association and its policy exist first
        self.addon = aws.eks.Addon(
            f"{name}-addon",
            cluster_name=cluster_name,
            addon_name=ADDON,
            addon_version=addon_version,
            configuration_values=json.dumps(configuration_values(), sort_keys=True),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=dict(tags),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment, association]),
        )
        self.role_arn = role.arn
        self.register_outputs({"roleArn": role.arn})
