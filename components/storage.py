"""Where training output lives: the checkpoint bucket, and the FSx for Lustre filesystem every
training pod mounts (multi-node FSDP writes one checkpoint shard per rank under the log path, so
the ranks need one POSIX namespace; field notes section 3).

Both are data stores: nothing here is ever deleted by ``pulumi destroy``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from .config import SharedFilesystemSettings
from .plan_reader import CHECKPOINT_STORAGE

# FSx for Lustre: LNet on TCP 988, and 1018-1023 (FSx for Lustre user guide, "File system access
# control with Amazon VPC").
LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
FSX_CSI_DRIVER = "fsx.csi.aws.com"
SHARED_CLAIM = "shared-fs"
# S3 events the data repository association mirrors: a file written on FSx (a checkpoint shard)
# reaches the bucket, an object put in (or deleted from) the bucket appears on (leaves) FSx. A
# deletion on FSx is not exported: the launcher removes older checkpoints from FSx
# (workload.checkpoints.keepLocal) and the bucket keeps them.
DRA_IMPORT_EVENTS = ["NEW", "CHANGED", "DELETED"]
DRA_EXPORT_EVENTS = ["NEW", "CHANGED"]
NONCURRENT_VERSION_DAYS = 30
"""The checkpoint bucket's lifecycle: an overwritten or deleted object's older version stays this
many days, then expires. The sync sidecar overwrites the run's logs on every upload (a version each
time, for days), keepInBucket deletes old checkpoints (tens of GB each); 30 days is the window to
recover one by hand."""
MULTIPART_ABORT_DAYS = 7
"""An upload cut off midway (a killed sync) leaves its parts, billed, until this many days pass."""

# Data stores are both protected and retained, for two different failure modes:
# - protect: `pulumi destroy` (or a diff that would replace the resource) fails instead of
#   deleting checkpoints; the operator must `pulumi state unprotect` deliberately.
# - retain_on_delete: even after unprotecting (or a stack removal with --force), the engine only
#   forgets the resource; the bucket / filesystem and its data stay in the account.
_DATA_STORE = pulumi.ResourceOptions(protect=True, retain_on_delete=True)


def tls_only_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Deny every request to the bucket and its objects that is not over TLS (AWS S3 user guide,
    "Enforce encryption in transit")."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }

def private_bucket(prefix: str, bucket: aws.s3.Bucket, *, parent: pulumi.Resource) -> None:
    """The controls every bucket of the project gets, as children of ``parent`` named
    ``<prefix>-<control>``: versioning (an overwritten or deleted object stays recoverable),
    SSE-S3, public access blocked, the bucket owner owning every object, and TLS-only access."""
    child = pulumi.ResourceOptions(parent=parent)
    aws.s3.BucketVersioning(
        f"{prefix}-versioning",
        bucket=bucket.id,
        # an overwritten or deleted checkpoint (also through the FSx export) stays recoverable
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
        opts=child,
    )
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{prefix}-encryption",
        bucket=bucket.id,
        rules=[
            aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                # SSE-S3 (AES256), not SSE-KMS: the training role's policy then stays "this
                # bucket and nothing else" (SSE-KMS would also need kms:GenerateDataKey/Decrypt
                # on a key), and the FSx data repository association needs no key policy.
                apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="AES256"
                )
            )
        ],
        opts=child,
    )
    access_block = aws.s3.BucketPublicAccessBlock(
        f"{prefix}-public-access",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=child,
    )
    aws.s3.BucketOwnershipControls(
        f"{prefix}-ownership",
        bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=child,
    )
    aws.s3.BucketPolicy(
        f"{prefix}-tls-only",
        bucket=bucket.id,
        policy=bucket.arn.apply(lambda arn: json.dumps(tls_only_bucket_policy(arn))),
        # S3 rejects policy writes that race the public access block on a new bucket
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[access_block]),
    )


def checkpoint_lifecycle(prefix: str, bucket: aws.s3.Bucket, *, parent: pulumi.Resource) -> aws.s3.BucketLifecycleConfiguration:
    """The checkpoint bucket's lifecycle rule ``<prefix>-lifecycle``: noncurrent versions expire
    after NONCURRENT_VERSION_DAYS, incomplete multipart uploads are aborted after
    MULTIPART_ABORT_DAYS, and a delete marker left alone goes; current objects never expire (the
    run's checkpoints stay until workload.checkpoints.keepInBucket or a person deletes them)."""
    return aws.s3.BucketLifecycleConfiguration(
        f"{prefix}-lifecycle",
        bucket=bucket.id,
        rules=[
            aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="expire-noncurrent-versions",
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                # a delete marker with no version left behind it (keepInBucket's deletions, 30 days on)
                expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(expired_object_delete_marker=True),
                noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                    noncurrent_days=NONCURRENT_VERSION_DAYS
                ),
                abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                    days_after_initiation=MULTIPART_ABORT_DAYS
                ),
            )
        ],
        opts=pulumi.ResourceOptions(parent=parent),
    )


class CheckpointStorage(pulumi.ComponentResource):
    """The S3 bucket for checkpoints and logs: versioned (noncurrent versions expire after
    NONCURRENT_VERSION_DAYS), SSE-S3 encrypted, public access blocked, bucket-owner-enforced, TLS
    only, protected and retained.

    Args:
        bucket_name: a fixed name. Defaults to None (a generated unique name).
        tags: AWS tags of the bucket.

    Outputs: ``bucket_name``, ``bucket_arn``.
    """

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        bucket_name: Optional[str] = None,
        tags: Mapping[str, str],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__(CHECKPOINT_STORAGE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=bucket_name,
            # never empty the bucket to delete it
            force_destroy=False,
            tags=dict(tags),
            opts=pulumi.ResourceOptions.merge(child, _DATA_STORE),
        )
        private_bucket(name, bucket, parent=self)
        checkpoint_lifecycle(name, bucket, parent=self)
        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        self.register_outputs({"bucketName": self.bucket_name, "bucketArn": self.bucket_arn})


def lustre_ingress_rules() -> list[tuple[int, int, str]]:
    """(from port, to port, source) of the filesystem security group's ingress: the Lustre ports
    from the VPC (the nodes) and from the group itself (FSx file servers talk to each other)."""
    return [(low, high, source) for low, high in LUSTRE_PORTS for source in ("vpc", "self")]


def persistent_volume_spec(
    file_system_id: pulumi.Input[str], dns_name: pulumi.Input[str], mount_name: pulumi.Input[str], capacity_gib: int
) -> k8s.core.v1.PersistentVolumeSpecArgs:
    """A static PersistentVolume of an existing FSx for Lustre filesystem (aws-fsx-csi-driver
    ``examples/kubernetes/static_provisioning``)."""
    return k8s.core.v1.PersistentVolumeSpecArgs(
        capacity={"storage": f"{capacity_gib}Gi"},
        volume_mode="Filesystem",
        access_modes=["ReadWriteMany"],
        # deleting the claim must never delete the filesystem's data
        persistent_volume_reclaim_policy="Retain",
        storage_class_name="",
        # flock lets several ranks lock files (checkpoint writers, HF caches) across nodes
        mount_options=["flock"],
        csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
            driver=FSX_CSI_DRIVER,
            volume_handle=file_system_id,
            volume_attributes={"dnsname": dns_name, "mountname": mount_name},
        ),
    )


class SharedFilesystem(pulumi.ComponentResource):
    """FSx for Lustre (PERSISTENT_2) in the GPU subnet, linked to the checkpoint bucket, mounted by
    pods through the FSx CSI driver as the claim ``shared-fs`` in the workload namespace.

    Args:
        settings: ``SharedFilesystemSettings`` (or a mapping with its camelCase keys).
        namespace: the workload namespace of the claim (pass the Namespace's output, so the
            claim waits for it).
        cluster_name: the EKS cluster that gets the FSx CSI driver add-on.
        vpc_id: the VPC of the filesystem's security group.
        vpc_cidr: the VPC's CIDR, allowed in on the Lustre ports.
        subnet_id: the one subnet of the filesystem (the GPU subnet).
        bucket_name: the checkpoint bucket the whole filesystem mirrors.
        tags: AWS tags of every AWS resource.
        k8s_provider: the cluster's Kubernetes provider (PersistentVolume, claim); None: the
            default provider (the ambient kubeconfig).
        client_security_group_id: the security group the client nodes carry (the cluster security
            group); it is given ingress on the Lustre ports from the file servers. Defaults to
            None (no rule: the caller opens the clients itself).

    Outputs: ``file_system_id``, ``claim_name``, ``mount_name``, ``dns_name``.
    """

    file_system_id: pulumi.Output[str]
    claim_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    dns_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        settings: SharedFilesystemSettings | Mapping[str, Any],
        namespace: pulumi.Input[str],
        cluster_name: pulumi.Input[str],
        vpc_id: pulumi.Input[str],
        vpc_cidr: pulumi.Input[str],
        subnet_id: pulumi.Input[str],
        bucket_name: pulumi.Input[str],
        tags: Mapping[str, str],
        k8s_provider: Optional[k8s.Provider],
        client_security_group_id: Optional[pulumi.Input[str]] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:SharedFilesystem", name, None, opts)
        if not isinstance(settings, SharedFilesystemSettings):
            settings = SharedFilesystemSettings.model_validate(settings)
        tags = dict(tags)
        child = pulumi.ResourceOptions(parent=self)

        group = _lustre_security_group(name, vpc_id, vpc_cidr, tags, child)
        if client_security_group_id is not None:
            _admit_file_servers(name, client_security_group_id, group, child)
        filesystem = _lustre_filesystem(name, settings, subnet_id, group, tags, child)
        _link_bucket(name, filesystem, bucket_name, tags, child)
        driver = _csi_driver(name, cluster_name, tags, child)
        in_cluster = pulumi.ResourceOptions(parent=self, provider=k8s_provider, depends_on=[driver])
        claim = _volume_claim(name, namespace, filesystem, settings.storage_capacity_gib, in_cluster)

        self.file_system_id = filesystem.id
        self.claim_name = claim.metadata.name
        self.mount_name = filesystem.mount_name
        self.dns_name = filesystem.dns_name
        self.register_outputs(
            {
                "fileSystemId": self.file_system_id,
                "claimName": self.claim_name,
                "mountName": self.mount_name,
                "dnsName": self.dns_name,
            }
        )


# --- the pieces of SharedFilesystem, in the order it registers them -----------------------------


def _lustre_security_group(
    name: str, vpc_id: pulumi.Input[str], vpc_cidr: pulumi.Input[str], tags: dict[str, str], child: pulumi.ResourceOptions
) -> aws.ec2.SecurityGroup:
    """The file servers' group: the Lustre ports from the VPC and from itself, all egress to the VPC."""
    group = aws.ec2.SecurityGroup(
        f"{name}-lustre",
        vpc_id=vpc_id,
        # EC2 accepts only a-zA-Z0-9, spaces and ._-:/()#,@[]+=&;{}!$* in a group's
        # description (CreateSecurityGroup reference): no apostrophes
        description="FSx for Lustre: LNet from the cluster VPC and between file servers",
        tags={**tags, "Name": f"{name}-lustre"},
        opts=child,
    )
    cidr = pulumi.Output.from_input(vpc_cidr)
    for low, high, source in lustre_ingress_rules():
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-lustre-{low}-{high}-from-{source}",
            security_group_id=group.id,
            ip_protocol="tcp",
            from_port=low,
            to_port=high,
            cidr_ipv4=cidr if source == "vpc" else None,
            referenced_security_group_id=group.id if source == "self" else None,
            opts=child,
        )
    # the AWS provider strips a new group's default allow-all egress; file servers answer
    # clients and replicate among themselves inside the VPC
    aws.vpc.SecurityGroupEgressRule(
        f"{name}-lustre-to-vpc", security_group_id=group.id, ip_protocol="-1", cidr_ipv4=cidr, opts=child
    )
    return group


def _admit_file_servers(
    name: str, client_security_group_id: pulumi.Input[str], group: aws.ec2.SecurityGroup, child: pulumi.ResourceOptions
) -> None:
    """The clients' group admits the Lustre ports from the file servers.

    Lustre servers also open connections to clients (LNet is bidirectional: lock callbacks,
    reconnects), so the clients' group must admit the Lustre ports from the file servers (FSx for
    Lustre user guide, "Lustre client VPC security group rules"); without it clients get evicted
    and I/O on /fsx hangs."""
    for low, high in LUSTRE_PORTS:
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-lustre-{low}-{high}-to-clients",
            security_group_id=client_security_group_id,
            ip_protocol="tcp",
            from_port=low,
            to_port=high,
            referenced_security_group_id=group.id,
            description="FSx for Lustre: LNet from the file servers",
            opts=child,
        )


def _lustre_filesystem(
    name: str,
    settings: SharedFilesystemSettings,
    subnet_id: pulumi.Input[str],
    group: aws.ec2.SecurityGroup,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> aws.fsx.LustreFileSystem:
    return aws.fsx.LustreFileSystem(
        f"{name}-lustre",
        deployment_type="PERSISTENT_2",
        storage_type="SSD",
        storage_capacity=settings.storage_capacity_gib,
        per_unit_storage_throughput=settings.throughput_mbps_per_tib,
        # one subnet: PERSISTENT_2 lives in one AZ, the GPU AZ, next to the nodes (pulumi-aws
        # flattens the one-item list to a string)
        subnet_ids=subnet_id,
        security_group_ids=[group.id],
        file_system_type_version="2.15",
        data_compression_type="LZ4",
        # should the filesystem ever be deleted outside Pulumi's protection, keep a backup
        skip_final_backup=False,
        copy_tags_to_backups=True,
        tags={**tags, "Name": name},
        opts=pulumi.ResourceOptions.merge(child, _DATA_STORE),
    )


def _link_bucket(
    name: str, filesystem: aws.fsx.LustreFileSystem, bucket_name: pulumi.Input[str], tags: dict[str, str], child: pulumi.ResourceOptions
) -> None:
    """The data repository association: the whole filesystem mirrors the whole bucket, both ways,
    except that a deletion on the filesystem stays there (DRA_EXPORT_EVENTS)."""
    aws.fsx.DataRepositoryAssociation(
        f"{name}-bucket-link",
        file_system_id=filesystem.id,
        # a path on /fsx is the same key in S3
        file_system_path="/",
        data_repository_path=pulumi.Output.concat("s3://", bucket_name),
        batch_import_meta_data_on_create=True,
        # unlinking never deletes files from the filesystem
        delete_data_in_filesystem=False,
        s3=aws.fsx.DataRepositoryAssociationS3Args(
            auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=list(DRA_EXPORT_EVENTS)),
            auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=list(DRA_IMPORT_EVENTS)),
        ),
        tags=tags,
        opts=child,
    )


def _csi_driver(name: str, cluster_name: pulumi.Input[str], tags: dict[str, str], child: pulumi.ResourceOptions) -> aws.eks.Addon:
    """The FSx CSI driver add-on.

    The node plugin tolerates every taint by default (chart value node.tolerateAllTaints: true),
    so it also runs on the tainted GPU nodes. Static volumes need no IAM for the driver: only
    dynamic provisioning calls the FSx API."""
    return aws.eks.Addon(
        f"{name}-csi-driver",
        cluster_name=cluster_name,
        addon_name="aws-fsx-csi-driver",
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        tags=tags,
        opts=child,
    )


PV_REPLACE_ON_CHANGES = ("spec.volumeMode", "spec.nodeAffinity")
"""What a PersistentVolume cannot change in place beyond its source (pulumi-kubernetes' own force-new paths)."""
PVC_REPLACE_ON_CHANGES = ("spec.volumeMode", "spec.dataSource", "spec.dataSourceRef", "spec.resources")
"""What the static claim cannot change in place beyond pulumi-kubernetes' own force-new paths."""


def _volume_claim(
    name: str, namespace: pulumi.Input[str], filesystem: aws.fsx.LustreFileSystem, capacity_gib: int, in_cluster: pulumi.ResourceOptions
) -> k8s.core.v1.PersistentVolumeClaim:
    """The static PersistentVolume of the filesystem and the claim ``shared-fs`` bound to it."""
    volume = k8s.core.v1.PersistentVolume(
        f"{name}-pv",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            # PersistentVolumes are cluster-scoped: the namespace keeps two stacks' volumes apart
            name=pulumi.Output.concat(namespace, "-", SHARED_CLAIM),
            labels={"app.kubernetes.io/part-of": "rlinf"},
        ),
        spec=persistent_volume_spec(filesystem.id, filesystem.dns_name, filesystem.mount_name, capacity_gib),
        # the API server refuses to change a volume's source (pulumi-kubernetes replaces on it),
        # volumeMode or nodeAffinity (Kubernetes ValidatePersistentVolumeUpdate); fixed name: delete first
        opts=pulumi.ResourceOptions.merge(
            in_cluster, pulumi.ResourceOptions(replace_on_changes=list(PV_REPLACE_ON_CHANGES), delete_before_replace=True)
        ),
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-pvc",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=SHARED_CLAIM, namespace=namespace),
        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteMany"],
            # "" (not unset): no default StorageClass may provision a different volume
            storage_class_name="",
            volume_name=volume.metadata.name,
            resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{capacity_gib}Gi"}),
        ),
        # a bound claim's spec is immutable but for its storage request (ValidatePersistentVolumeClaimUpdate),
        # and that request may only grow through a StorageClass that allows expansion, which this
        # static claim has none of (admission plugin PersistentVolumeClaimResize): replace, delete first
        opts=pulumi.ResourceOptions.merge(
            in_cluster, pulumi.ResourceOptions(replace_on_changes=list(PVC_REPLACE_ON_CHANGES), delete_before_replace=True)
        ),
    )
