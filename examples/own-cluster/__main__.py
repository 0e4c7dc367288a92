"""A Pulumi program of your own that uses the rlinf-eks components: on an EKS cluster you already
have, an EFA GPU node group with its device plugins, a checkpoint bucket, the training identity
and the RLinf training run. `pulumi up` runs this file; test_own_cluster.py plans it offline.

Config (Pulumi.dev.yaml): your cluster's name, security group, GPU subnet, OIDC provider and
kubeconfig (a secret), and rlinf-eks's own sections `gpuNodes` and `workload`, validated by the
library's models (docs/config-reference.md of rlinf-eks).
"""

import pulumi
import pulumi_kubernetes as k8s

from rlinf_eks import CheckpointStorage, DevicePlugins, EfaGpuNodeGroup, RlinfTraining, TrainingIdentity
from rlinf_eks.config import DevicePluginSettings, GpuNodeSettings
from rlinf_eks.workload import TrainingSettings

config = pulumi.Config()
cluster_name = config.require("clusterName")
tags = {"team": "robotics", "stack": pulumi.get_stack()}

gpu = GpuNodeSettings.model_validate(config.require_object("gpuNodes"))
claim = config.get("sharedFilesystemClaim")  # a ReadWriteMany claim in the workload's namespace, or none
training_settings = TrainingSettings(
    workload=config.require_object("workload"),
    gpu_nodes=gpu,
    # stated, never inferred: without a claim each node syncs its checkpoints to S3 (one node only)
    storage={"sharedFilesystem": {"enabled": claim is not None}},
)

provider = k8s.Provider(cluster_name, kubeconfig=config.require_secret("kubeconfig"))
in_cluster = pulumi.ResourceOptions(provider=provider)

plugins = DevicePlugins("device-plugins", settings=DevicePluginSettings(), gpu_nodes=gpu, opts=in_cluster)
storage = CheckpointStorage("checkpoints", tags=tags)
identity = TrainingIdentity(
    "training",
    namespace=training_settings.workload.namespace,
    cluster_name=cluster_name,
    oidc_provider_arn=config.require("oidcProviderArn"),
    oidc_issuer=config.require("oidcIssuer"),
    bucket_arn=storage.bucket_arn,
    tags=tags,
    k8s_provider=provider,
)
training = RlinfTraining(
    "rlinf",
    settings=training_settings,
    service_account_name=identity.service_account_name,
    bucket_name=storage.bucket_name,
    shared_volume_claim=claim,
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[identity]),
)
# the GPU nodes last: nothing that can still fail comes after they start billing
nodes = EfaGpuNodeGroup(
    "gpu",
    settings=gpu,
    cluster_name=cluster_name,
    cluster_security_group_id=config.require("clusterSecurityGroupId"),
    subnet_id=config.require("gpuSubnetId"),
    tags=tags,
    opts=pulumi.ResourceOptions(depends_on=[plugins, storage, identity, training]),
)

pulumi.export("gpuNodeGroup", nodes.node_group_name)
pulumi.export("checkpointBucket", storage.bucket_name)
pulumi.export("trainingEntrypoint", training.entrypoint)
