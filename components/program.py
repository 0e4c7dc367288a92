"""The whole stack: validated settings in, components wired together, stack outputs out.

``__main__.py`` (what ``pulumi up`` runs) and the offline plan both call :func:`run_program`, so
the offline plan exercises exactly the program that deploys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi

from .config import PROJECT, StackSettings
from .loading import from_pulumi_config

from .autoscaler import ClusterAutoscaler
from .cluster import Cluster
from .device_plugins import DevicePlugins
from .gpu_nodes import EfaGpuNodeGroup
from .identity import TrainingIdentity, partition_of
from .jobset import JobSetController
from .kuberay import KubeRayOperator
from .network import Network
from .observability import CloudWatchObservability, PrometheusObservability
from .storage import CheckpointStorage, SharedFilesystem
from .workload import RlinfTraining


@dataclass(frozen=True)
class Secrets:
    """Secret config values (``pulumi config set --secret``), kept as secret Outputs."""

    hf_token: pulumi.Output[str] | None = None
    wandb_api_key: pulumi.Output[str] | None = None
    kubeconfig: pulumi.Output[str] | None = None

    @classmethod
    def from_pulumi_config(cls) -> "Secrets":
        cfg = pulumi.Config(PROJECT)
        return cls(
            hf_token=cfg.get_secret("hfToken"),
            wandb_api_key=cfg.get_secret("wandbApiKey"),
            kubeconfig=cfg.get_secret("kubeconfig"),
        )


def build(settings: StackSettings, secrets: Secrets, stack: str) -> dict[str, Any]:
    """Create every resource of one stack; return its outputs.

    Everything that can fail comes before the GPU nodes and everything is removed after them:
    the GPU node group depends on all of it (``before_gpu``) and nothing depends on the node
    group. A Helm release waits for its DaemonSets and Deployments: a DaemonSet with zero
    matching nodes is ready at once, and the operators run on the system nodes. The training
    Job/RayJob is not awaited (pulumi.com/skipAwait): its pods stay Pending until the GPU nodes
    join."""
    tags = {"project": PROJECT, "stack": stack, **settings.tags}
    cluster_name = settings.cluster.name or f"rlinf-{stack}"

    network = Network("rlinf", settings=settings.network, gpu_az=settings.gpu_az, cluster_name=cluster_name, tags=tags)
    cluster = _cluster(settings, secrets, network, cluster_name, tags)
    k8s = pulumi.ResourceOptions(provider=cluster.provider)
    before_gpu: list[pulumi.Resource] = [network, cluster, *_node_add_ons(settings, cluster, tags, k8s)]
    before_gpu += _observability(settings, cluster, tags, k8s)
    storage = CheckpointStorage("checkpoints", bucket_name=settings.storage.bucket_name, tags=tags)
    identity = _identity(settings, cluster, storage, tags)
    before_gpu += [storage, identity]
    shared_fs = _shared_filesystem(settings, network, cluster, storage, identity, tags)
    operator = KubeRayOperator("kuberay", settings=settings.kuberay, opts=k8s) if settings.kuberay.enabled else None
    jobset = JobSetController("jobset", settings=settings.workload.restart, opts=k8s) if settings.workload.uses_jobset else None
    training = _training(settings, secrets, identity, storage, shared_fs, operator, jobset, k8s)
    # A dependsOn edge (no property dependency) does not make the node group follow a
    # replacement of the Job: only dependents whose inputs change are replaced with it.
    before_gpu += [r for r in (shared_fs, operator, jobset, training) if r is not None]
    gpu_nodes = _gpu_nodes(settings, network, cluster, tags, before_gpu)
    return _outputs(cluster, gpu_nodes, storage, shared_fs, training)


# --- the pieces of build, in the order it registers them -----------------------------------------


def _cluster(settings: StackSettings, secrets: Secrets, network: Network, cluster_name: str, tags: dict[str, str]) -> Cluster:
    return Cluster(
        "rlinf",
        settings=settings.cluster,
        cluster_name=cluster_name,
        vpc_id=network.vpc_id,
        subnet_ids=network.private_subnet_ids,
        existing_kubeconfig=secrets.kubeconfig,
        tags=tags,
        node_monitoring_agent=settings.gpu_nodes.auto_repair,
    )


def _node_add_ons(settings: StackSettings, cluster: Cluster, tags: dict[str, str], k8s: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """What makes GPU nodes usable: the device plugins, and the Cluster Autoscaler when enabled."""
    add_ons: list[pulumi.Resource] = [
        DevicePlugins("device-plugins", settings=settings.device_plugins, gpu_nodes=settings.gpu_nodes, opts=k8s)
    ]
    if settings.autoscaler.enabled:
        add_ons.append(
            ClusterAutoscaler(
                "autoscaler",
                settings=settings.autoscaler,
                cluster_name=cluster.cluster_name,
                region=settings.region,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_issuer=cluster.oidc_issuer,
                tags=tags,
                opts=k8s,
            )
        )
    return add_ons


def _observability(
    settings: StackSettings, cluster: Cluster, tags: dict[str, str], k8s: pulumi.ResourceOptions
) -> list[pulumi.Resource]:
    """The metrics backend (observability.backend): the CloudWatch add-on, the in-cluster
    Prometheus stack, or nothing."""
    if settings.observability_backend == "prometheus":
        return [
            PrometheusObservability(
                "observability",
                settings=settings.observability,
                gpu_nodes=settings.gpu_nodes,
                workload_namespace=settings.workload.namespace,
                launcher=settings.workload.launcher,
                opts=k8s,
            )
        ]
    if settings.observability_backend == "cloudwatch":
        return [
            CloudWatchObservability(
                "observability",
                cluster_name=cluster.cluster_name,
                addon_version=settings.observability.cloudwatch_addon_version,
                partition=partition_of(settings.region),
                tags=tags,
                opts=pulumi.ResourceOptions(depends_on=[cluster]),
            )
        ]
    return []


def model_bucket_grant(settings: StackSettings) -> tuple[Optional[str], str]:
    """The bucket and prefix of an s3:// model that the training role must be granted read of:
    (None, "") without a model, for another source, or for a model in the checkpoint bucket
    (already readable)."""
    model = settings.workload.model.parsed if settings.workload.enabled else None
    if model is None or model.kind != "s3" or model.bucket == settings.storage.bucket_name:
        return None, ""
    return model.bucket, model.prefix


def _identity(settings: StackSettings, cluster: Cluster, storage: CheckpointStorage, tags: dict[str, str]) -> TrainingIdentity:
    model_bucket, model_prefix = model_bucket_grant(settings)
    return TrainingIdentity(
        "training",
        namespace=settings.workload.namespace,
        cluster_name=cluster.cluster_name,
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        bucket_arn=storage.bucket_arn,
        tags=tags,
        model_bucket=model_bucket,
        model_prefix=model_prefix,
        partition=partition_of(settings.region),
        k8s_provider=cluster.provider,
    )


def _shared_filesystem(
    settings: StackSettings,
    network: Network,
    cluster: Cluster,
    storage: CheckpointStorage,
    identity: TrainingIdentity,
    tags: dict[str, str],
) -> Optional[SharedFilesystem]:
    if not settings.shared_filesystem:
        return None
    return SharedFilesystem(
        "shared-fs",
        settings=settings.storage.shared_filesystem,
        namespace=identity.namespace,  # the claim needs the namespace to exist
        cluster_name=cluster.cluster_name,
        vpc_id=network.vpc_id,
        vpc_cidr=network.vpc_cidr,
        subnet_id=network.gpu_subnet_id,
        bucket_name=storage.bucket_name,
        tags=tags,
        k8s_provider=cluster.provider,
        client_security_group_id=cluster.cluster_security_group_id,  # every GPU node carries it
    )


def _training(
    settings: StackSettings,
    secrets: Secrets,
    identity: TrainingIdentity,
    storage: CheckpointStorage,
    shared_fs: Optional[SharedFilesystem],
    operator: Optional[KubeRayOperator],
    jobset: Optional[JobSetController],
    k8s: pulumi.ResourceOptions,
) -> Optional[RlinfTraining]:
    training = None
    if settings.workload.enabled:
        training = RlinfTraining(
            "rlinf",
            settings=settings,
            service_account_name=identity.service_account_name,
            bucket_name=storage.bucket_name,
            shared_volume_claim=shared_fs.claim_name if shared_fs else None,
            hf_token=secrets.hf_token,
            wandb_api_key=secrets.wandb_api_key,
            operator=operator,
            jobset=jobset,
            opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[identity])),
        )
    return training


def _gpu_nodes(
    settings: StackSettings, network: Network, cluster: Cluster, tags: dict[str, str], before_gpu: list[pulumi.Resource]
) -> EfaGpuNodeGroup:
    return EfaGpuNodeGroup(
        "gpu",
        settings=settings.gpu_nodes,
        cluster_name=cluster.cluster_name,
        cluster_security_group_id=cluster.cluster_security_group_id,
        subnet_id=network.gpu_subnet_id,
        autoscaled=settings.autoscaler.enabled,
        tags=tags,
        # the network too: nodes join only once the private route through the NAT gateway exists
        opts=pulumi.ResourceOptions(depends_on=before_gpu),
    )


def _outputs(
    cluster: Cluster,
    gpu_nodes: EfaGpuNodeGroup,
    storage: CheckpointStorage,
    shared_fs: Optional[SharedFilesystem],
    training: Optional[RlinfTraining],
) -> dict[str, Any]:
    outputs: dict[str, Any] = {
        "clusterName": cluster.cluster_name,
        "kubeconfig": pulumi.Output.secret(cluster.kubeconfig),
        "apiEndpointAccess": cluster.endpoint_access,
        "gpuNodeGroup": gpu_nodes.node_group_name,
        "placementGroup": gpu_nodes.placement_group_name,
        "checkpointBucket": storage.bucket_name,
        "sharedFilesystem": shared_fs.file_system_id if shared_fs else None,
    }
    if training is not None:
        outputs["trainingEntrypoint"] = training.entrypoint
    return outputs


def run_program() -> dict[str, Any]:
    """Read the stack's config and build it. A bad config raises ConfigError before any resource
    is registered."""
    settings = from_pulumi_config()
    return build(settings, Secrets.from_pulumi_config(), pulumi.get_stack())
