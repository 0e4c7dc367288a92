"""The IAM role of an EKS managed node group, built one way for every node group (the cluster's
system nodes and the GPU nodes): a role EC2 instances assume, plus one attachment per AWS managed
policy, each ARN in the stack's partition (GovCloud and China have their own).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

import pulumi
import pulumi_aws as aws

# What an EKS managed node's role needs to join, pull images and (until the VPC CNI has its own
# role) attach ENIs (EKS user guide, "Amazon EKS node IAM role").
WORKER_NODE_POLICIES: tuple[str, ...] = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonEKS_CNI_Policy")
# Systems Manager's managed-instance policy: its agent registers the node, so Session Manager opens
# a shell on it (nvidia-smi, EFA counters) without SSH keys or an open port. Not an EKS requirement.
SSM_POLICY = "AmazonSSMManagedInstanceCore"


def ec2_trust_policy() -> str:
    """Trust policy of a node role: EC2 instances assume it."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
        }
    )


@dataclass(frozen=True)
class NodeRole:
    role: aws.iam.Role
    attachments: list[pulumi.Resource]
    """The node group depends on these: nodes join only once the role carries the policies."""


def eks_node_role(
    role_name: str,
    *,
    attachment_prefix: str,
    policies: Sequence[str],
    parent: pulumi.Resource,
    tags: Mapping[str, str],
) -> NodeRole:
    """``aws.iam.Role`` ``role_name`` and one ``aws.iam.RolePolicyAttachment``
    ``<attachment_prefix>-<policy>`` per managed policy, all children of ``parent``.

    The names are the callers' (not derived here): they are part of the resources' URNs, and
    the cluster and the GPU node group have always named them differently."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(role_name, assume_role_policy=ec2_trust_policy(), tags=dict(tags), opts=child)
    partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent)).partition
    attachments: list[pulumi.Resource] = [
        aws.iam.RolePolicyAttachment(
            f"{attachment_prefix}-{policy}",
            role=role.name,
            policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy),
            opts=child,
        )
        for policy in policies
    ]
    return NodeRole(role=role, attachments=attachments)
