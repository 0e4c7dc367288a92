"""Karpenter for the GPU nodes (``gpuNodes.provisioner: karpenter``): nodes launched for a run's
pending pods, taken from a reservation or Capacity Block first, removed once empty.

Beside :mod:`.autoscaler` (which grows a managed node group), this replaces the managed node group
of :mod:`.gpu_nodes` by:

- the node IAM role (the managed group's policies) with an EKS access entry of type EC2_LINUX, so
  the nodes Karpenter launches may join;
- the EFA security group with its self rules and the cluster placement group, made as the managed
  group makes them (:func:`gpu_nodes.efa_security_group`, :func:`gpu_nodes.placement_mode`);
- the controller: its interruption queue (SQS, SSE) fed by EventBridge rules, an IAM role trusted
  by EKS Pod Identity and associated with ``kube-system:karpenter``, and the pinned Helm release
  (oci://public.ecr.aws/karpenter/karpenter) on the system nodes;
- the ``EC2NodeClass`` and the ``NodePool`` (:mod:`.karpenter_specs`), once the chart's CRDs exist,
  and a ``NodeOverlay`` that declares the nodes' hugepages to Karpenter's scheduling.

With no run, no GPU node exists: Kueue admits a run whole, only then do its pods exist, and
Karpenter launches nodes for them (``limits``: at most maxNodes).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from . import karpenter_specs as specs
from .config import GpuNodeSettings
from .gpu_nodes import efa_security_group, placement_mode
from .helm_releases import RELEASE_OPTIONS
from .identity import pod_identity_trust_policy
from .node_role import SSM_POLICY, WORKER_NODE_POLICIES, eks_node_role
from .scheduling import node_taints

_NODE_POLICIES = (*WORKER_NODE_POLICIES, SSM_POLICY)
# Karpenter's controller runs two replicas, one per node (required anti-affinity in its chart)
CONTROLLER_REPLICAS = 2


class KarpenterGpuNodes(pulumi.ComponentResource):
    """The GPU nodes through Karpenter. See the module docstring for what it creates.

    Args:
        settings: ``GpuNodeSettings`` (or a mapping with its camelCase keys), provisioner karpenter.
        cluster_name: the EKS cluster (its nodes join by access entry; Pod Identity agent running).
        cluster_security_group_id: the cluster security group; every interface carries it.
        subnet_id: the one private subnet (in the GPU AZ) of every node.
        zone: the GPU AZ (the NodePool's zone requirement).
        region: the AWS region.
        system_nodes: system nodes that can run the controller (its replicas, one per node, at most 2).
        tags: AWS tags of every resource (and of the instances Karpenter launches).
        opts: must carry the cluster's Kubernetes provider.

    Outputs: ``node_pool_name``, ``node_class_name``, ``placement_group_name`` (None without one),
    ``efa_security_group_id`` (None without EFA), ``interruption_queue_name``, ``node_role_arn``,
    and the plain ``labels`` and ``taints`` of the nodes.
    """

    node_pool_name: pulumi.Output[str]
    node_class_name: pulumi.Output[str]
    placement_group_name: pulumi.Output[Optional[str]]
    efa_security_group_id: pulumi.Output[Optional[str]]
    interruption_queue_name: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    labels: dict[str, str]
    taints: list[dict[str, str]]

    def __init__(
        self,
        name: str,
        *,
        settings: GpuNodeSettings | Mapping[str, Any],
        cluster_name: pulumi.Input[str],
        cluster_security_group_id: pulumi.Input[str],
        subnet_id: pulumi.Input[str],
        zone: str,
        region: str,
        system_nodes: int = CONTROLLER_REPLICAS,
        tags: Optional[Mapping[str, str]] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:KarpenterGpuNodes", name, None, opts)
        if not isinstance(settings, GpuNodeSettings):
            settings = GpuNodeSettings.model_validate(settings)
        if settings.provisioner != "karpenter":
            raise ValueError("KarpenterGpuNodes needs gpuNodes.provisioner: karpenter")
        tags = dict(tags or {})
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        self.labels = specs.pool_labels(settings)
        self.taints = node_taints()

        node_role = eks_node_role(f"{name}-node-role", attachment_prefix=name, policies=_NODE_POLICIES, parent=self, tags=tags)
        access = aws.eks.AccessEntry(
            f"{name}-node-access",
            cluster_name=cluster_name,
            principal_arn=node_role.role.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=child,
        )

        groups: list[pulumi.Input[str]] = [cluster_security_group_id]
        self.efa_security_group_id = pulumi.Output.from_input(None)
        if settings.efa:
            efa_sg = efa_security_group(name, subnet_id=subnet_id, tags=tags, parent=self)
            self.efa_security_group_id = efa_sg.id
            groups.append(efa_sg.id)
        mode = placement_mode(settings)
        self.placement_group_name = pulumi.Output.from_input(None)
        if mode == "create":
            self.placement_group_name = aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", tags=tags, opts=child).name
        elif mode == "existing":
            self.placement_group_name = pulumi.Output.from_input(settings.placement_group.name)

        queue = self._interruption_queue(name, tags, child)
        overlay = specs.node_overlay_spec(settings)
        partition = aws.get_partition_output(opts=invoke).partition
        account = aws.get_caller_identity_output(opts=invoke).account_id
        controller_role = aws.iam.Role(
            f"{name}-controller",
            assume_role_policy=json.dumps(pod_identity_trust_policy()),
            description="The Karpenter controller (EKS Pod Identity, kube-system:karpenter)",
            tags=tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-controller",
            role=controller_role.id,
            policy=pulumi.Output.all(cluster_name, partition, account, node_role.role.arn, queue.arn).apply(
                lambda a: json.dumps(
                    specs.controller_policy(cluster_name=a[0], partition=a[1], region=region, account_id=a[2], node_role_arn=a[3], queue_arn=a[4])
                )
            ),
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-controller",
            cluster_name=cluster_name,
            namespace=specs.NAMESPACE,
            service_account=specs.SERVICE_ACCOUNT,
            role_arn=controller_role.arn,
            tags=tags,
            opts=child,
        )
        release = k8s.helm.v3.Release(
            f"{name}-controller",
            k8s.helm.v3.ReleaseArgs(
                name="karpenter",
                chart=specs.CHART,
                version=settings.karpenter.version,
                namespace=specs.NAMESPACE,
                values=pulumi.Output.all(cluster_name, queue.name).apply(
                    lambda a: specs.helm_values(
                        cluster_name=a[0], queue_name=a[1], replicas=min(CONTROLLER_REPLICAS, system_nodes), node_overlay=overlay is not None,
                        node_repair=settings.auto_repair,
                    )
                ),
                **RELEASE_OPTIONS,
            ),
            # the controller starts with its credentials, and its nodes can join
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, association, access, *node_role.attachments]),
        )
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[release])
        node_class = k8s.apiextensions.CustomResource(
            f"{name}-node-class",
            api_version=specs.NODE_CLASS_API_VERSION,
            kind="EC2NodeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=specs.NODE_CLASS),
            spec=pulumi.Output.all(node_role.role.name, subnet_id, pulumi.Output.all(*groups), self.placement_group_name).apply(
                lambda a: specs.node_class_spec(
                    settings, role_name=a[0], subnet_id=a[1], security_group_ids=list(a[2]), placement_group=a[3], tags=tags
                )
            ),
            opts=after_release,
        )
        node_pool = k8s.apiextensions.CustomResource(
            f"{name}-node-pool",
            api_version=specs.NODE_POOL_API_VERSION,
            kind="NodePool",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=specs.NODE_POOL),
            spec=specs.node_pool_spec(settings, zone=zone),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release, node_class]),
        )
        if overlay is not None:
            k8s.apiextensions.CustomResource(
                f"{name}-hugepages",
                api_version=specs.NODE_OVERLAY_API_VERSION,
                kind="NodeOverlay",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{specs.NODE_POOL}-hugepages"),
                spec=overlay,
                opts=after_release,
            )
        self.node_pool_name = node_pool.metadata.apply(lambda m: m["name"])
        self.node_class_name = node_class.metadata.apply(lambda m: m["name"])
        self.interruption_queue_name = queue.name
        self.node_role_arn = node_role.role.arn
        self.register_outputs(
            {
                "nodePoolName": self.node_pool_name,
                "nodeClassName": self.node_class_name,
                "placementGroupName": self.placement_group_name,
                "efaSecurityGroupId": self.efa_security_group_id,
                "interruptionQueueName": self.interruption_queue_name,
                "nodeRoleArn": self.node_role_arn,
                "labels": self.labels,
                "taints": self.taints,
            }
        )

    def _interruption_queue(self, name: str, tags: dict[str, str], child: pulumi.ResourceOptions) -> aws.sqs.Queue:
        """The SQS queue Karpenter reads interruption events from (SSE with SQS-managed keys), its
        policy, and one EventBridge rule and target per event kind."""
        queue = aws.sqs.Queue(
            f"{name}-interruption",
            message_retention_seconds=specs.QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruption",
            queue_url=queue.id,
            policy=queue.arn.apply(lambda arn: json.dumps(specs.queue_policy(arn))),
            opts=child,
        )
        for kind, pattern in specs.INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{kind}",
                description=f"Karpenter interruption queue: {pattern['detail-type'][0]}",
                event_pattern=json.dumps(pattern),
                tags=tags,
                opts=child,
            )
            aws.cloudwatch.EventTarget(f"{name}-{kind}", rule=rule.name, arn=queue.arn, target_id="KarpenterInterruptionQueueTarget", opts=child)
        return queue
