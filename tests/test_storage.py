"""Storage: a protected, retained, versioned, encrypted, private, TLS-only bucket; FSx for Lustre in
one subnet with the Lustre ports open to the VPC, linked to the bucket, exposed as a static PV/PVC."""

from __future__ import annotations

import json

from rlinf_eks.config import SharedFilesystemSettings
from rlinf_eks.storage import CheckpointStorage, SharedFilesystem
from tests.harness import has_inputs, one, run_component

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"


def _bucket(name=None):
    return run_component(lambda: CheckpointStorage("checkpoints", bucket_name=name, tags={"project": "rlinf-eks"}))


def _filesystem(settings, client_security_group_id=None):
    return SharedFilesystem(
        "shared-fs",
        settings=settings,
        namespace="rlinf",
        cluster_name="rlinf-test",
        vpc_id="vpc-0abc",
        vpc_cidr="10.0.0.0/16",
        subnet_id="subnet-gpu",
        bucket_name="ckpt-bucket",
        tags={"project": "rlinf-eks"},
        k8s_provider=None,
        client_security_group_id=client_security_group_id,
    )


def _shared(client_security_group_id=None, **fs):
    return run_component(lambda: _filesystem(SharedFilesystemSettings.model_validate(fs), client_security_group_id))


def test_given_checkpoint_storage_when_built_then_bucket_is_protected_and_retained_and_never_force_destroyed():
    resources = _bucket("my-ckpts")
    bucket = one(resources, "aws:s3/bucket:Bucket")
    assert bucket["options"]["protect"] and bucket["options"]["retainOnDelete"]
    assert has_inputs(bucket, {"bucket": "my-ckpts", "forceDestroy": False})


def test_given_checkpoint_storage_when_built_then_versioning_encryption_ownership_and_public_block_apply_to_it():
    resources = _bucket()
    bucket_id = one(resources, "aws:s3/bucket:Bucket")["id"]
    assert has_inputs(one(resources, "aws:s3/bucketVersioning:BucketVersioning"), {"bucket": bucket_id, "versioningConfiguration": {"status": "Enabled"}})
    assert has_inputs(
        one(resources, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"),
        {"bucket": bucket_id, "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
    )
    block = one(resources, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert has_inputs(block, {"bucket": bucket_id, "blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True, "restrictPublicBuckets": True})
    assert has_inputs(one(resources, "aws:s3/bucketOwnershipControls:BucketOwnershipControls"), {"bucket": bucket_id, "rule": {"objectOwnership": "BucketOwnerEnforced"}})


def test_given_checkpoint_storage_when_built_then_bucket_policy_denies_every_non_tls_request():
    resources = _bucket()
    bucket = one(resources, "aws:s3/bucket:Bucket")
    policy = one(resources, "aws:s3/bucketPolicy:BucketPolicy")
    document = json.loads(policy["inputs"]["policy"])
    (statement,) = document["Statement"]
    arn = f"arn:aws:s3:::{bucket['id']}"
    assert statement == {
        "Sid": "DenyInsecureTransport",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [arn, f"{arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def test_given_shared_filesystem_when_built_then_lustre_is_persistent_2_in_the_one_gpu_subnet_protected_and_retained():
    resources = _shared(storageCapacityGib=2400, throughputMbpsPerTib=500)
    fs = one(resources, FS)
    assert has_inputs(
        fs,
        {"deploymentType": "PERSISTENT_2", "subnetIds": "subnet-gpu", "storageCapacity": 2400, "perUnitStorageThroughput": 500, "skipFinalBackup": False},
    )
    assert fs["options"]["protect"] and fs["options"]["retainOnDelete"]
    group = one(resources, "aws:ec2/securityGroup:SecurityGroup")
    assert fs["inputs"]["securityGroupIds"] == [group["id"]]


def test_given_shared_filesystem_when_built_then_lustre_ports_are_open_from_the_vpc_and_the_group_itself():
    resources = _shared()
    group = one(resources, "aws:ec2/securityGroup:SecurityGroup")
    rules = resources.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    seen = {(r["inputs"]["fromPort"], r["inputs"]["toPort"], r["inputs"].get("cidrIpv4") or r["inputs"].get("referencedSecurityGroupId")) for r in rules}
    assert seen == {(988, 988, "10.0.0.0/16"), (988, 988, group["id"]), (1018, 1023, "10.0.0.0/16"), (1018, 1023, group["id"])}
    assert all(r["inputs"]["ipProtocol"] == "tcp" and r["inputs"]["securityGroupId"] == group["id"] for r in rules)


def test_given_shared_filesystem_when_built_then_it_is_linked_to_the_bucket_both_ways_but_a_deletion_on_fsx_stays_there():
    # the launcher removes older checkpoints from FSx (workload.checkpoints.keepLocal): exporting
    # that deletion would delete the bucket's copy too
    resources = _shared()
    link = one(resources, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert has_inputs(
        link,
        {
            "fileSystemId": one(resources, FS)["id"],
            "dataRepositoryPath": "s3://ckpt-bucket",
            "fileSystemPath": "/",
            "deleteDataInFilesystem": False,
            "s3": {"autoExportPolicy": {"events": ["NEW", "CHANGED"]}, "autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}},
        },
    )


def test_given_checkpoint_storage_when_built_then_noncurrent_versions_and_cut_off_uploads_expire_and_current_objects_stay():
    resources = _bucket()
    lifecycle = one(resources, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    (rule,) = lifecycle["inputs"]["rules"]
    assert lifecycle["inputs"]["bucket"] == one(resources, "aws:s3/bucket:Bucket")["id"]
    assert rule["status"] == "Enabled" and rule["filter"] == {"prefix": ""}
    assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": 30}
    assert rule["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 7}
    # current objects never expire; a delete marker (keepInBucket's deletions) goes once the versions
    # behind it expired, or every listing of the run's prefix (each sync, each restore) skips it forever
    assert rule["expiration"] == {"expiredObjectDeleteMarker": True}


def test_given_shared_filesystem_when_built_then_a_static_pv_and_rwx_claim_mount_it_through_the_fsx_csi_driver():
    resources = _shared()
    fs = one(resources, FS)
    pv = one(resources, "kubernetes:core/v1:PersistentVolume")
    assert has_inputs(
        pv,
        {
            "metadata": {"name": "rlinf-shared-fs"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "capacity": {"storage": "1200Gi"},
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "csi": {
                    "driver": "fsx.csi.aws.com",
                    "volumeHandle": fs["id"],
                    "volumeAttributes": {"dnsname": f"{fs['id']}.fsx.us-east-1.amazonaws.com", },
                },
            },
        },
    )
    # the mount name FSx generated, not a made-up one
    assert pv["inputs"]["spec"]["csi"]["volumeAttributes"]["mountname"] == _fs_outputs()["mountName"]
    claim = one(resources, "kubernetes:core/v1:PersistentVolumeClaim")
    assert has_inputs(
        claim,
        {
            "metadata": {"name": "shared-fs", "namespace": "rlinf"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "rlinf-shared-fs", "resources": {"requests": {"storage": "1200Gi"}}},
        },
    )
    driver = one(resources, "aws:eks/addon:Addon")
    assert has_inputs(driver, {"addonName": "aws-fsx-csi-driver", "clusterName": "rlinf-test"})
    assert driver["urn"] in pv["options"]["dependsOn"] and driver["urn"] in claim["options"]["dependsOn"]


def _fs_outputs():
    from rlinf_eks.config import PROJECT
    from rlinf_eks.offline.engine import engine

    def program():
        fs = _filesystem({})
        return {"id": fs.file_system_id, "claim": fs.claim_name, "mountName": fs.mount_name, "dns": fs.dns_name}

    return engine.run(program, project=PROJECT, stack="test", config={}).outputs


def test_given_shared_filesystem_when_built_then_outputs_name_the_filesystem_and_the_claim():
    out = _fs_outputs()
    assert out["id"].startswith("fs-") and out["claim"] == "shared-fs"
    assert out["dns"] == f"{out['id']}.fsx.us-east-1.amazonaws.com" and out["mountName"]


def test_given_shared_filesystem_when_built_then_pv_and_pvc_are_valid_kubernetes_objects():
    kubernetes_validate = __import__("pytest").importorskip("kubernetes_validate")
    resources = _shared()
    for type_ in ("kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim"):
        manifest = one(resources, type_)["inputs"]
        kubernetes_validate.validate(manifest, "1.33", strict=True)


def test_given_client_security_group_when_built_then_clients_admit_lustre_ports_from_the_file_servers():
    resources = _shared(client_security_group_id="sg-0clients")
    lustre_sg = one(resources, "aws:ec2/securityGroup:SecurityGroup", "shared-fs-lustre")["id"]
    to_clients = [
        r["inputs"]
        for r in resources.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r["inputs"]["securityGroupId"] == "sg-0clients"
    ]
    assert sorted((r["fromPort"], r["toPort"]) for r in to_clients) == [(988, 988), (1018, 1023)]
    assert all(r["referencedSecurityGroupId"] == lustre_sg and r["ipProtocol"] == "tcp" for r in to_clients)
