"""The offline engine: registrations recorded as the engine would see them, secrets masked."""

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from rlinf_eks.offline.engine import engine
from tests.harness import one, run_component


def _program():
    provider = k8s.Provider("k8s", kubeconfig=pulumi.Output.secret("kubeconfig-text"))
    namespace = k8s.core.v1.Namespace(
        "ns",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="rlinf"),
        opts=pulumi.ResourceOptions(provider=provider),
    )
    bucket = aws.s3.Bucket("ckpt", opts=pulumi.ResourceOptions(protect=True, retain_on_delete=True, depends_on=[namespace]))
    aws.s3.BucketVersioning(
        "ckpt-versioning",
        bucket=bucket.id,
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
        opts=pulumi.ResourceOptions(parent=bucket, ignore_changes=["bucket"], delete_before_replace=True),
    )


def test_inputs_use_wire_names_and_options_are_recorded():
    resources = run_component(_program)
    versioning = one(resources, "aws:s3/bucketVersioning:BucketVersioning")
    assert versioning["inputs"]["versioningConfiguration"] == {"status": "Enabled"}
    bucket = one(resources, "aws:s3/bucket:Bucket")
    assert versioning["parent"] == bucket["urn"]
    assert versioning["options"]["ignoreChanges"] == ["bucket"]
    assert versioning["options"]["deleteBeforeReplace"] is True
    assert bucket["options"]["protect"] is True and bucket["options"]["retainOnDelete"] is True
    namespace = one(resources, "kubernetes:core/v1:Namespace")
    assert bucket["options"]["dependsOn"] == [namespace["urn"]]
    assert namespace["provider"] == one(resources, "pulumi:providers:kubernetes")["urn"]


def test_urns_follow_the_engine_not_the_mock_monitor():
    resources = run_component(_program, stack="dev")
    bucket = one(resources, "aws:s3/bucket:Bucket")
    assert bucket["urn"] == "urn:pulumi:dev::rlinf-eks::aws:s3/bucket:Bucket::ckpt"
    versioning = one(resources, "aws:s3/bucketVersioning:BucketVersioning")
    assert versioning["urn"] == "urn:pulumi:dev::rlinf-eks::aws:s3/bucket:Bucket$aws:s3/bucketVersioning:BucketVersioning::ckpt-versioning"


def test_secrets_are_masked_in_inputs_and_outputs():
    resources = run_component(_program)
    assert one(resources, "pulumi:providers:kubernetes")["inputs"]["kubeconfig"] == "[secret]"
    run = engine.run(lambda: {"token": pulumi.Output.secret("s3cr3t"), "plain": "x"}, project="p", stack="s", config={})
    assert run.outputs == {"token": "[secret]", "plain": "x"}


def test_wire_values_are_plain_json():
    assert engine.wire_value({"a": [1.0, 2.5, {"b": 3.0}]}) == {"a": [1, 2.5, {"b": 3}]}


def test_ids_are_deterministic_between_runs():
    first = [r["id"] for r in run_component(_program)]
    assert first == [r["id"] for r in run_component(_program)]
