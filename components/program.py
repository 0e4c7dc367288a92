"""The whole stack: validated settings in, components wired together, stack outputs out.

``__main__.py`` (what ``pulumi up`` runs) and the offline plan both call :func:`run_program`, so
the offline plan exercises exactly the program that deploys. By the stack's role (``platform.role``)
:func:`build` makes the cluster with its run (both), or the cluster without a run (platform, which
exports what experiments read); :func:`build_experiment` makes one run on a platform it reads
through a StackReference (rlinf_eks.experiment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.sync_await import _sync_await

from . import experiment, placeholders
from .config import PROJECT, StackSettings, pulumi_config
from .experiment import Platform
from .loading import RULES, settings_from_config, warn_plain_secrets

from .autoscaler import ClusterAutoscaler
from .cluster import Cluster
from .device_plugins import DevicePlugins
from .gpu_nodes import EfaGpuNodeGroup
from .identity import TrainingIdentity, partition_of
from .jobset import JobSetController
from .karpenter import KarpenterGpuNodes
from .kuberay import KubeRayOperator
from .kueue import KueueQueue, local_queue
from .network import Network
from .observability import CloudWatchObservability, PrometheusObservability
from .storage import SHARED_CLAIM, CheckpointStorage, SharedFilesystem, persistent_volume_spec
from .trainers import chosen_inputs, recipe_of
from .training_image import TrainingImage, family_of_dockerfile
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
    if settings.platform.role == "experiment":
        raise ValueError("an experiment stack runs on a platform: build_experiment(settings, secrets, stack, platform)")
    role = settings.platform.role
    tags = {"project": PROJECT, "stack": stack, **settings.tags}
    cluster_name = settings.cluster.name or f"rlinf-{stack}"

    network = Network("rlinf", settings=settings.network, gpu_az=settings.gpu_az, region=settings.region, cluster_name=cluster_name, tags=tags)
    cluster = _cluster(settings, secrets, network, cluster_name, tags)
    k8s = pulumi.ResourceOptions(provider=cluster.provider)
    before_gpu: list[pulumi.Resource] = [network, cluster, *_node_add_ons(settings, cluster, tags, k8s)]
    before_gpu += _observability(settings, cluster, tags, k8s)
    storage = CheckpointStorage("checkpoints", bucket_name=settings.storage.bucket_name, tags=tags)
    identity = _identity(settings, cluster, storage, tags)
    before_gpu += [storage, identity]
    shared_fs = _shared_filesystem(settings, network, cluster, storage, identity, tags)
    operator = KubeRayOperator("kuberay", settings=settings.kuberay, opts=k8s) if settings.kuberay.enabled else None
    # a platform installs the JobSet controller for its experiments' restarts, and the queue
    wants_jobset = settings.workload.uses_jobset or role == "platform"
    jobset = JobSetController("jobset", settings=settings.workload.restart, opts=k8s) if wants_jobset else None
    queue = _queue(settings, identity, operator, jobset, k8s)
    training = _training(settings, secrets, identity, storage, shared_fs, operator, jobset, k8s, queue) if role == "both" else None
    # A dependsOn edge (no property dependency) does not make the node group follow a
    # replacement of the Job: only dependents whose inputs change are replaced with it.
    before_gpu += [r for r in (shared_fs, operator, jobset, queue, training) if r is not None]
    gpu_nodes = _gpu_nodes(settings, network, cluster, tags, before_gpu)
    images = _training_images(settings, stack, tags)
    outputs = _outputs(cluster, gpu_nodes, storage, shared_fs, training)
    if images is not None:
        outputs["trainingImages"] = {f: {"repositoryUrl": images.repository_urls[f], "buildProject": images.project_names[f]}
                                     for f in images.repository_urls}  # fmt: skip
    if role == "platform":
        outputs.update(_platform_outputs(settings, cluster, identity, shared_fs))
    return outputs


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


def s3_input_grants(settings: StackSettings) -> list[tuple[str, str, str, bool]]:
    """The s3:// inputs the training role must be granted read of, as (input, bucket, prefix, one
    object): none without a workload, and none for an input in the checkpoint bucket (already
    readable)."""
    if not settings.workload.enabled:
        return []
    grants = []
    for item in chosen_inputs(settings):
        source = item.source
        if source is not None and source.kind == "s3" and source.bucket != settings.storage.bucket_name:
            grants.append((item.name, source.bucket, source.prefix, item.spec.file))
    return grants


def model_bucket_grant(settings: StackSettings) -> tuple[Optional[str], str]:
    """The bucket and prefix of an s3:// model that the training role must be granted read of:
    (None, "") without a model, for another source, or for a model in the checkpoint bucket
    (already readable)."""
    model = next(((bucket, prefix) for name, bucket, prefix, _ in s3_input_grants(settings) if name == "model"), None)
    return model if model is not None else (None, "")


def other_input_grants(settings: StackSettings) -> list[tuple[str, str, str, bool]]:
    """The s3:// inputs other than the model that the training role must be granted read of."""
    return [grant for grant in s3_input_grants(settings) if grant[0] != "model"]


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
        input_reads=other_input_grants(settings),
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


def _queue(
    settings: StackSettings,
    identity: TrainingIdentity,
    operator: Optional[KubeRayOperator],
    jobset: Optional[JobSetController],
    k8s: pulumi.ResourceOptions,
) -> Optional[KueueQueue]:
    """Kueue and the stack's queue (queue.enabled): the release after the controllers whose
    integrations it turns on, the LocalQueue in the workload namespace."""
    if not settings.queue.enabled:
        return None
    controllers: list[pulumi.Resource] = [c.release for c in (operator, jobset) if c is not None]
    return KueueQueue("kueue", settings=settings, namespace=identity.namespace, depends_on=controllers, opts=k8s)


def _training(
    settings: StackSettings,
    secrets: Secrets,
    identity: TrainingIdentity,
    storage: CheckpointStorage,
    shared_fs: Optional[SharedFilesystem],
    operator: Optional[KubeRayOperator],
    jobset: Optional[JobSetController],
    k8s: pulumi.ResourceOptions,
    queue: Optional[KueueQueue] = None,
) -> Optional[RlinfTraining]:
    training = None
    if settings.workload.enabled:
        training = RlinfTraining(
            "rlinf",
            settings=settings,
            service_account_name=identity.service_account_name,
            bucket_name=storage.bucket_name,
            shared_volume_claim=shared_fs.claim_name if shared_fs else None, shared_volume_exported=True,  # its DRA exports
            hf_token=secrets.hf_token,
            wandb_api_key=secrets.wandb_api_key,
            operator=operator,
            jobset=jobset,
            # the run after its queue: created before Kueue's webhook it would start unqueued
            opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[identity, *(queue.objects if queue else [])])),
        )
    return training


def _gpu_nodes(
    settings: StackSettings, network: Network, cluster: Cluster, tags: dict[str, str], before_gpu: list[pulumi.Resource]
) -> EfaGpuNodeGroup | KarpenterGpuNodes:
    common = dict(
        settings=settings.gpu_nodes,
        cluster_name=cluster.cluster_name,
        cluster_security_group_id=cluster.cluster_security_group_id,
        subnet_id=network.gpu_subnet_id,
        tags=tags,
    )
    if settings.gpu_nodes.provisioner == "karpenter":
        return KarpenterGpuNodes(
            "gpu",
            **common,
            zone=settings.gpu_az,
            region=settings.region,
            system_nodes=settings.cluster.system_nodes.count,
            # the NodePool last: nothing launches before the queue, the plugins and the network exist
            opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=before_gpu),
        )
    return EfaGpuNodeGroup(
        "gpu",
        **common,
        autoscaled=settings.autoscaler.enabled,
        # the network too: nodes join only once the private route through the NAT gateway exists
        opts=pulumi.ResourceOptions(depends_on=before_gpu),
    )


def image_families(settings: StackSettings) -> list[str]:
    """The families images.build makes: images.families, or the family of the stack's trainer
    dialect (a platform, which has none, names them: config's rule)."""
    if settings.images.families is not None:
        return list(settings.images.families)
    return [family_of_dockerfile(recipe_of(settings.workload.trainer.dialect).dockerfile)]


def _training_images(settings: StackSettings, stack: str, tags: dict[str, str]) -> Optional[TrainingImage]:
    """ECR repositories and CodeBuild projects of the training images (images.build). Nothing of
    the cluster depends on them: the nodes pull by the image's name, set in workload.image."""
    if not settings.images.build:
        return None
    return TrainingImage(
        "training-image",
        settings=settings.images,
        families=image_families(settings),
        stack=stack,
        ray_version=settings.workload.ray_version,
        tags=tags,
    )


def _outputs(
    cluster: Cluster,
    gpu_nodes: EfaGpuNodeGroup | KarpenterGpuNodes,
    storage: CheckpointStorage,
    shared_fs: Optional[SharedFilesystem],
    training: Optional[RlinfTraining],
) -> dict[str, Any]:
    outputs: dict[str, Any] = {
        "clusterName": cluster.cluster_name,
        "kubeconfig": pulumi.Output.secret(cluster.kubeconfig),
        "apiEndpointAccess": cluster.endpoint_access,
        # with Karpenter no node group: its NodePool instead
        "gpuNodeGroup": gpu_nodes.node_group_name if isinstance(gpu_nodes, EfaGpuNodeGroup) else None,
        "placementGroup": gpu_nodes.placement_group_name,
        "checkpointBucket": storage.bucket_name,
        "sharedFilesystem": shared_fs.file_system_id if shared_fs else None,
    }
    if isinstance(gpu_nodes, KarpenterGpuNodes):
        outputs["gpuNodePool"] = gpu_nodes.node_pool_name
    if training is not None:
        outputs["trainingEntrypoint"] = training.entrypoint
    return outputs


def _platform_outputs(
    settings: StackSettings, cluster: Cluster, identity: TrainingIdentity, shared_fs: Optional[SharedFilesystem]
) -> dict[str, Any]:
    """What a platform adds to the outputs for its experiments (experiment.PLATFORM_OUTPUTS)."""
    outputs: dict[str, Any] = {
        "oidcProviderArn": cluster.oidc_provider_arn,
        "oidcIssuer": cluster.oidc_issuer,
        "namespace": identity.namespace,
        "sharedFilesystemClaim": shared_fs.claim_name if shared_fs else None,
        "sharedFilesystemDnsName": shared_fs.dns_name if shared_fs else None,
        "sharedFilesystemMountName": shared_fs.mount_name if shared_fs else None,
        **experiment.node_shape(settings),
        "kubernetesVersion": settings.cluster.kubernetes_version,
        "rayVersion": settings.workload.ray_version,
        "kuberayVersion": settings.kuberay.version if settings.kuberay.enabled else None,
        "jobsetVersion": settings.workload.restart.jobset_version,
        experiment.PLATFORM_CONFIG: experiment.platform_config(settings),
    }
    assert set(outputs) | {"clusterName", "kubeconfig", "checkpointBucket", "sharedFilesystem"} == set(experiment.PLATFORM_OUTPUTS)
    if settings.queue.enabled:  # an experiment's LocalQueue sends its runs here
        outputs[experiment.QUEUE_NAME] = settings.queue.name
    return outputs


# --- an experiment: one run on a platform ---------------------------------------------------------


def build_experiment(settings: StackSettings, secrets: Secrets, stack: str, platform: Platform) -> dict[str, Any]:
    """One run on ``platform``: its namespace, service account and IRSA role, its claim of the
    platform's shared filesystem, and the training objects, through a Kubernetes provider made from
    the platform's kubeconfig. No network, cluster, node group, plugin or operator: those are the
    platform's, and stay untouched by this stack's ``pulumi up`` and ``pulumi destroy``."""
    tags = {"project": PROJECT, "stack": stack, **settings.tags}
    provider = k8s.Provider("platform-cluster", kubeconfig=pulumi.Output.secret(platform.kubeconfig_text))
    bucket = platform["checkpointBucket"]
    model_bucket, model_prefix = model_bucket_grant(settings)
    partition = partition_of(settings.region)
    identity = TrainingIdentity(
        "training",
        namespace=settings.workload.namespace,
        cluster_name=platform["clusterName"],
        oidc_provider_arn=platform["oidcProviderArn"],
        oidc_issuer=platform["oidcIssuer"],
        bucket_arn=f"arn:{partition}:s3:::{bucket}",
        tags=tags,
        model_bucket=model_bucket,
        model_prefix=model_prefix,
        input_reads=other_input_grants(settings),
        partition=partition,
        k8s_provider=provider,
    )
    claim = _experiment_claim(settings, platform, identity, provider) if settings.shared_filesystem else None
    # the run is admitted by the platform's ClusterQueue through a LocalQueue of its own namespace
    # (experiment_settings checked that the platform has that queue)
    queued = [
        local_queue("local-queue", settings.queue.name, namespace=identity.namespace, cluster_queue=platform.queue_name,
                    opts=pulumi.ResourceOptions(provider=provider))
    ] if settings.queue.enabled else []  # fmt: skip
    training = RlinfTraining(
        "rlinf",
        settings=settings,
        service_account_name=identity.service_account_name,
        bucket_name=bucket,
        shared_volume_claim=claim.metadata.name if claim is not None else None, shared_volume_exported=True,  # the platform's FSx
        hf_token=secrets.hf_token,
        wandb_api_key=secrets.wandb_api_key,
        controllers_installed=True,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[identity, *queued]),
    )
    outputs: dict[str, Any] = {
        "platformStack": platform.stack,
        "clusterName": platform["clusterName"],
        "namespace": identity.namespace,
        "checkpointBucket": bucket,
        "sharedFilesystem": platform["sharedFilesystem"] if claim is not None else None,
        "trainingEntrypoint": training.entrypoint,
    }
    if platform.queue_name is not None:
        outputs[experiment.QUEUE_NAME] = platform.queue_name
    return outputs


def _experiment_claim(
    settings: StackSettings, platform: Platform, identity: TrainingIdentity, provider: k8s.Provider
) -> k8s.core.v1.PersistentVolumeClaim:
    """The experiment's claim ``shared-fs`` of the platform's filesystem: a static PersistentVolume
    named after the experiment's namespace (cluster-scoped: one per experiment) and its claim."""
    capacity = settings.storage.shared_filesystem.storage_capacity_gib
    opts = pulumi.ResourceOptions(provider=provider)
    volume = k8s.core.v1.PersistentVolume(
        "shared-fs-pv",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=f"{settings.workload.namespace}-{SHARED_CLAIM}", labels={"app.kubernetes.io/part-of": "rlinf"}
        ),
        spec=persistent_volume_spec(
            platform["sharedFilesystem"], platform["sharedFilesystemDnsName"], platform["sharedFilesystemMountName"], capacity
        ),
        opts=opts,
    )
    return k8s.core.v1.PersistentVolumeClaim(
        "shared-fs-pvc",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=SHARED_CLAIM, namespace=identity.namespace),
        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteMany"],
            storage_class_name="",
            volume_name=volume.metadata.name,
            resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{capacity}Gi"}),
        ),
        opts=opts,
    )


def read_platform(values: dict[str, Any]) -> Platform:
    """The experiment's platform, read through a StackReference before any resource is created.

    The StackReference is a read (nothing is created); its outputs are read synchronously here
    (the SDK's own way of running a coroutine to its end inside the program, as its synchronous
    invokes do), so the experiment is validated against the platform's real node shape before
    the first resource is registered, under ``pulumi up`` and ``preview`` (which read the
    platform's outputs too) as under the offline plan's mocks."""
    name = experiment.platform_stack(values)
    reference = pulumi.StackReference("platform", stack_name=name)

    def get(key: str) -> tuple[Any, Any]:
        details = _sync_await(reference.get_output_details(key))
        return details.value, details.secret_value

    return experiment.read_platform(name, get)


def run_program() -> dict[str, Any]:
    """Read the stack's config and build it. A bad config or a placeholder (placeholders.refused) raises
    ConfigError before any resource is registered; an experiment's, before any but its StackReference."""
    values, stack = pulumi_config.running_stack_config()
    warn_plain_secrets(values)
    if experiment.role_of(values) == "experiment":
        platform = read_platform(values)
        settings = placeholders.refused(experiment.experiment_settings(values, stack, platform, RULES))
        return build_experiment(settings, Secrets.from_pulumi_config(), stack, platform)
    return build(placeholders.refused(settings_from_config(values, stack)), Secrets.from_pulumi_config(), stack)

