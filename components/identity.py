"""Who the training pods are to AWS: the workload namespace, the service account ``training-sa``
(the seed's name) and its IRSA role, which may read and write the checkpoint bucket, read the
model's S3 prefix when the model comes from S3, and nothing else.

IRSA rather than Pod Identity: it also works on an existing cluster that lacks the Pod Identity
agent, and the trust is readable in one document (pinned to this namespace and account).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

SERVICE_ACCOUNT = "training-sa"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
# Object-level actions a checkpointing trainer needs (multipart upload for large shards).
OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]
BUCKET_ACTIONS = ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]


def service_account_subject(namespace: str, service_account: str = SERVICE_ACCOUNT) -> str:
    """The ``sub`` claim of the service account's projected token."""
    return f"system:serviceaccount:{namespace}:{service_account}"


POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def pod_identity_trust_policy() -> dict[str, Any]:
    """EKS Pod Identity assumes the role for the pods it serves: sts:AssumeRole and sts:TagSession
    (the session tags carry cluster, namespace and service account) from pods.eks.amazonaws.com
    (EKS user guide, "Create an IAM role for EKS Pod Identity"). The CloudWatch agent's role and
    Karpenter's controller role trust it."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }


def irsa_trust_policy(
    oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str = SERVICE_ACCOUNT
) -> dict[str, Any]:
    """Only the token of ``<namespace>/<service_account>`` (training-sa by default) issued for STS
    may assume the role (EKS user guide, "Assign IAM roles to Kubernetes service accounts")."""
    issuer = oidc_issuer.removeprefix("https://")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": oidc_provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{issuer}:sub": service_account_subject(namespace, service_account),
                        f"{issuer}:aud": "sts.amazonaws.com",
                    }
                },
            }
        ],
    }


def checkpoint_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Read, write and list the checkpoint bucket; no other bucket, no other service."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ListCheckpointBucket", "Effect": "Allow", "Action": BUCKET_ACTIONS, "Resource": bucket_arn},
            {"Sid": "ReadWriteCheckpoints", "Effect": "Allow", "Action": OBJECT_ACTIONS, "Resource": f"{bucket_arn}/*"},
        ],
    }


def partition_of(region: str) -> str:
    """The ARN partition of a region (China and GovCloud have their own)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def model_read_policy(bucket: str, prefix: str, partition: str = "aws", what: str = "Model", *, one_object: bool = False) -> dict[str, Any]:
    """Read-only access to an input's prefix (the model's, workload.model.source, or another
    input's, workload.inputs: s3://bucket/prefix): list below the prefix, get its objects; nothing
    else in that bucket. ``one_object``: the prefix is one object (a dataset file), which is what
    may be read. ``what`` names the statements (Model, Input)."""
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    objects = f"{bucket_arn}/{prefix}" if one_object else (f"{bucket_arn}/{prefix}/*" if prefix else f"{bucket_arn}/*")
    list_statement: dict[str, Any] = {"Sid": f"List{what}", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn}
    if prefix:
        # `aws s3 sync s3://bucket/prefix/` lists with the prefix "prefix/"
        list_statement["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            list_statement,
            # a separate statement: GetBucketLocation carries no s3:prefix, so the condition would deny it
            {"Sid": f"Locate{what}Bucket", "Effect": "Allow", "Action": "s3:GetBucketLocation", "Resource": bucket_arn},
            {"Sid": f"Read{what}", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects},
        ],
    }


class TrainingIdentity(pulumi.ComponentResource):
    """The workload namespace, ``training-sa`` and its IRSA role scoped to the checkpoint bucket
    and, with ``model_bucket`` (an s3:// model source), read-only to ``model_prefix`` in it.

    Args:
        namespace: the workload namespace to create.
        cluster_name: the EKS cluster (named in the role's description).
        oidc_provider_arn / oidc_issuer: the cluster's IAM OIDC provider and issuer (with or
            without ``https://``): the role trusts only ``<namespace>/training-sa`` tokens.
        bucket_arn: the checkpoint bucket the role may read and write.
        tags: AWS tags of the role.
        model_bucket: the bucket of an s3:// model source outside the checkpoint bucket; the
            role may read ``model_prefix`` in it. Defaults to None (no such grant).
        model_prefix: the model's prefix in ``model_bucket``. Defaults to "" (the whole bucket).
        input_reads: the other s3:// inputs outside the checkpoint bucket (a dataset, an adapter),
            as (input name, bucket, prefix, one object): the role may read each prefix (or that
            one object). Defaults to none.
        partition: the ARN partition of the model bucket (``partition_of(region)``). Defaults to aws.
        k8s_provider: the cluster's Kubernetes provider (Namespace, ServiceAccount); None: the
            default provider (the ambient kubeconfig).

    Outputs: ``namespace`` (resolves once the Namespace exists), ``service_account_name``,
    ``role_arn``.
    """

    namespace: pulumi.Output[str]
    service_account_name: pulumi.Output[str]
    role_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        namespace: str,
        cluster_name: pulumi.Input[str],
        oidc_provider_arn: pulumi.Input[str],
        oidc_issuer: pulumi.Input[str],
        bucket_arn: pulumi.Input[str],
        tags: Mapping[str, str],
        model_bucket: Optional[str] = None,
        model_prefix: str = "",
        input_reads: Sequence[tuple[str, str, str, bool]] = (),
        partition: str = "aws",
        k8s_provider: Optional[k8s.Provider],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:TrainingIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        in_cluster = pulumi.ResourceOptions(parent=self, provider=k8s_provider)

        ns = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace, labels={"app.kubernetes.io/part-of": "rlinf"}),
            opts=in_cluster,
        )
        role = aws.iam.Role(
            f"{name}-role",
            description=pulumi.Output.concat("IRSA role of ", namespace, "/", SERVICE_ACCOUNT, " in EKS cluster ", cluster_name),
            assume_role_policy=pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
                lambda v: json.dumps(irsa_trust_policy(v[0], v[1], namespace))
            ),
            tags=dict(tags),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-checkpoint-bucket",
            role=role.id,
            policy=pulumi.Output.from_input(bucket_arn).apply(lambda arn: json.dumps(checkpoint_bucket_policy(arn))),
            opts=child,
        )
        if model_bucket is not None:
            aws.iam.RolePolicy(
                f"{name}-model-read",
                role=role.id,
                policy=json.dumps(model_read_policy(model_bucket, model_prefix, partition)),
                opts=child,
            )
        for input_name, input_bucket, input_prefix, one_object in input_reads:
            aws.iam.RolePolicy(
                f"{name}-input-{input_name}-read",
                role=role.id,
                policy=json.dumps(model_read_policy(input_bucket, input_prefix, partition, "Input", one_object=one_object)),
                opts=child,
            )
        account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=SERVICE_ACCOUNT,
                namespace=ns.metadata.name,
                annotations={IRSA_ANNOTATION: role.arn},
            ),
            opts=in_cluster,
        )
        self.namespace = ns.metadata.name
        self.service_account_name = account.metadata.name
        self.role_arn = role.arn
        self.register_outputs(
            {"namespace": self.namespace, "serviceAccountName": self.service_account_name, "roleArn": self.role_arn}
        )
