"""Identity: training-sa in the workload namespace, an IRSA role trusted only by that service account,
allowed the checkpoint bucket and nothing else."""

from __future__ import annotations

import json

from rlinf_eks.config import PROJECT
from rlinf_eks.identity import TrainingIdentity, checkpoint_bucket_policy
from rlinf_eks.offline.engine import engine
from tests.harness import has_inputs, one, run_component

BUCKET_ARN = "arn:aws:s3:::ckpt-bucket"
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/ABC123"
PROVIDER_ARN = f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}"


def _identity(namespace="rlinf", issuer=ISSUER):
    return TrainingIdentity(
        "training",
        namespace=namespace,
        cluster_name="rlinf-test",
        oidc_provider_arn=PROVIDER_ARN,
        oidc_issuer=issuer,
        bucket_arn=BUCKET_ARN,
        tags={"project": "rlinf-eks"},
        k8s_provider=None,
    )


def test_given_identity_when_built_then_the_namespace_and_annotated_training_sa_exist():
    resources = run_component(lambda: _identity("team-a"))
    assert has_inputs(one(resources, "kubernetes:core/v1:Namespace"), {"metadata": {"name": "team-a"}})
    account = one(resources, "kubernetes:core/v1:ServiceAccount")
    role = one(resources, "aws:iam/role:Role")
    assert has_inputs(
        account,
        {"metadata": {"name": "training-sa", "namespace": "team-a", "annotations": {"eks.amazonaws.com/role-arn": f"arn:aws:iam::123456789012:role/{role['id']}"}}},
    )


def test_given_identity_when_built_then_only_that_service_accounts_sts_token_may_assume_the_role():
    resources = run_component(lambda: _identity("team-a", issuer="https://" + ISSUER))
    trust = json.loads(one(resources, "aws:iam/role:Role")["inputs"]["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Federated": PROVIDER_ARN}
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"] == {
        "StringEquals": {f"{ISSUER}:sub": "system:serviceaccount:team-a:training-sa", f"{ISSUER}:aud": "sts.amazonaws.com"}
    }


def test_given_identity_when_built_then_the_role_policy_covers_exactly_the_bucket_and_its_objects():
    resources = run_component(lambda: _identity())
    policy = json.loads(one(resources, "aws:iam/rolePolicy:RolePolicy")["inputs"]["policy"])
    resources_named = {r for s in policy["Statement"] for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])}
    assert resources_named == {BUCKET_ARN, f"{BUCKET_ARN}/*"}
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert all(a.startswith("s3:") and "*" not in a for a in actions)
    assert {"s3:GetObject", "s3:PutObject", "s3:ListBucket"} <= actions
    # bucket-level actions on the bucket ARN, object-level ones on its objects (IAM resource types)
    by_resource = {s["Resource"]: set(s["Action"]) for s in policy["Statement"]}
    assert by_resource[BUCKET_ARN] == {"s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"}
    assert by_resource[f"{BUCKET_ARN}/*"] == {
        "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts",
    }


def test_checkpoint_bucket_policy_follows_the_given_arn():
    policy = checkpoint_bucket_policy("arn:aws:s3:::other")
    assert {s["Resource"] for s in policy["Statement"]} == {"arn:aws:s3:::other", "arn:aws:s3:::other/*"}


def test_given_identity_when_built_then_outputs_name_namespace_service_account_and_role():
    out = engine.run(
        lambda: (lambda i: {"ns": i.namespace, "sa": i.service_account_name, "role": i.role_arn})(_identity()),
        project=PROJECT,
        stack="test",
        config={},
    ).outputs
    assert out["ns"] == "rlinf" and out["sa"] == "training-sa" and out["role"].startswith("arn:aws:iam::123456789012:role/")


def test_given_identity_when_built_then_namespace_and_service_account_are_valid_kubernetes_objects():
    kubernetes_validate = __import__("pytest").importorskip("kubernetes_validate")
    resources = run_component(lambda: _identity())
    for type_ in ("kubernetes:core/v1:Namespace", "kubernetes:core/v1:ServiceAccount"):
        kubernetes_validate.validate(one(resources, type_)["inputs"], "1.33", strict=True)
