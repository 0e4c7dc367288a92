"""The whole stack: validated settings in, components wired together, stack outputs out.

``__main__.py`` (what ``pulumi up`` runs) and the offline plan both call :func:`run_program`, so
the offline plan exercises exactly the program that deploys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from .config import PROJECT, StackSettings, from_pulumi_config


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
    """Create every resource of one stack; return its outputs."""
    from .cluster import Cluster
    from .device_plugins import DevicePlugins
    from .gpu_nodes import EfaGpuNodeGroup
    from .identity import TrainingIdentity, partition_of
    from .kuberay import KubeRayOperator
    from .network import Network
    from .storage import CheckpointStorage, SharedFilesystem
    from .workload import RlinfTraining

    tags = {"project": PROJECT, "stack": stack, **settings.tags}
    cluster_name = settings.cluster.name or f"rlinf-{stack}"

    network = Network("rlinf", settings=settings.network, gpu_az=settings.gpu_az, cluster_name=cluster_name, tags=tags)
    cluster = Cluster(
        "rlinf",
        settings=settings.cluster,
        cluster_name=cluster_name,
        vpc_id=network.vpc_id,
        subnet_ids=network.private_subnet_ids,
        existing_kubeconfig=secrets.kubeconfig,
        tags=tags,
        node_monitoring_agent=settings.gpu_nodes.auto_repair,
    )
    k8s = pulumi.ResourceOptions(provider=cluster.provider)
    # Everything that can fail comes before the GPU nodes and everything is removed after them:
    # the GPU node group depends on all of it (below) and nothing depends on the node group. A
    # Helm release waits for its DaemonSets and Deployments: a DaemonSet with zero matching nodes
    # is ready at once, and the operators run on the system nodes. The training Job/RayJob is not
    # awaited (pulumi.com/skipAwait): its pods stay Pending until the GPU nodes join.
    before_gpu: list[pulumi.Resource] = [network, cluster]
    before_gpu.append(
        DevicePlugins("device-plugins", settings=settings.device_plugins, gpu_nodes=settings.gpu_nodes, opts=k8s)
    )
    if settings.autoscaler.enabled:
        from .autoscaler import ClusterAutoscaler

        before_gpu.append(
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
    storage = CheckpointStorage("checkpoints", bucket_name=settings.storage.bucket_name, tags=tags)
    model = settings.workload.model.parsed if settings.workload.enabled else None
    # a model in the checkpoint bucket is already readable; another bucket needs its own grant
    model_bucket = model.bucket if model is not None and model.kind == "s3" and model.bucket != settings.storage.bucket_name else None
    identity = TrainingIdentity(
        "training",
        namespace=settings.workload.namespace,
        cluster_name=cluster.cluster_name,
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        bucket_arn=storage.bucket_arn,
        tags=tags,
        model_bucket=model_bucket,
        model_prefix=model.prefix if model_bucket else "",
        partition=partition_of(settings.region),
        k8s_opts=k8s,
    )
    before_gpu += [storage, identity]
    shared_fs = None
    if settings.shared_filesystem:
        shared_fs = SharedFilesystem(
            "shared-fs",
            settings=settings.storage.shared_filesystem,
            namespace=identity.namespace,  # the claim needs the namespace to exist
            cluster_name=cluster.cluster_name,
            vpc_id=network.vpc_id,
            vpc_cidr=network.vpc_cidr,
            subnet_id=network.gpu_subnet_id,
            bucket_name=storage.bucket_name,
            tags=tags,
            k8s_opts=k8s,
            client_security_group_id=cluster.cluster_security_group_id,  # every GPU node carries it
        )
        before_gpu.append(shared_fs)
    operator = None
    if settings.kuberay.enabled:
        operator = KubeRayOperator("kuberay", settings=settings.kuberay, opts=k8s)
        before_gpu.append(operator)

    jobset = None
    if settings.workload.uses_jobset:
        from .jobset import JobSetController

        jobset = JobSetController("jobset", settings=settings.workload.restart, opts=k8s)
        before_gpu.append(jobset)

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
        # A dependsOn edge (no property dependency) does not make the node group follow a
        # replacement of the Job: only dependents whose inputs change are replaced with it.
        before_gpu.append(training)

    gpu_nodes = EfaGpuNodeGroup(
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
