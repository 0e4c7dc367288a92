"""The hosted components: each a subclass of the Python component it exposes (the same type token,
name and children), taking one ``args`` TypedDict (rlinf_eks.hosted.args) instead of settings
models and resource objects, and declaring its outputs as annotations, which is what the Pulumi
SDK's analyzer reads.

Each validates everything it was given before it registers anything: the settings sections by the
loader's models and rules (one ConfigError, one line per problem, each naming the property's path),
then builds the Python component from them. References to other resources are plain ids and names;
a Kubernetes provider comes from the resource options or from ``kubeconfig``.
"""

# No `from __future__ import annotations`: the analyzer reads the annotations at run time. Every
# annotation of the Python component is declared again here with a real type (theirs are strings).
import inspect
from typing import Any, Mapping, Optional, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from .. import device_plugins, gpu_nodes, kuberay, workload
from ..config import ConfigError
from ..workload.standalone import TrainingSettings
from .args import DevicePluginsArgs, EfaGpuNodeGroupArgs, KubeRayOperatorArgs, RlinfTrainingArgs
from .inputs import section_settings, sections_data, tag_problems, validated


C = TypeVar("C", bound=type)


def described(cls: C) -> C:
    """The class's docstring without its indentation: the analyzer takes ``__doc__`` as the
    component's description, and Python before 3.13 keeps the indentation in it."""
    cls.__doc__ = inspect.cleandoc(cls.__doc__ or "")
    return cls


def kubernetes_options(name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions]) -> Optional[pulumi.ResourceOptions]:
    """``opts``, with a Kubernetes provider made from ``args["kubeconfig"]`` when given (registered
    beside the component, under the same parent: the component does not exist yet)."""
    kubeconfig = args.get("kubeconfig")
    if kubeconfig is None:
        return opts
    parent = opts.parent if opts is not None else None
    provider = k8s.Provider(f"{name}-kubernetes", kubeconfig=pulumi.Output.secret(kubeconfig), opts=pulumi.ResourceOptions(parent=parent))
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(provider=provider))


@described
class EfaGpuNodeGroup(gpu_nodes.EfaGpuNodeGroup):
    """EKS GPU nodes wired with EFA, joining an existing cluster: a launch template with one EFA
    interface per network card, a self-referencing EFA security group, a cluster placement group,
    IMDSv2 and encrypted gp3, and a managed node group in one subnet, tainted nvidia.com/gpu and
    labelled role: gpu-training."""

    node_group_name: pulumi.Output[str]
    "The managed node group's name."
    placement_group_name: pulumi.Output[Optional[str]]
    "The cluster placement group of the nodes (none with a capacity reservation or Capacity Block)."
    efa_security_group_id: pulumi.Output[Optional[str]]
    "The EFA security group (all traffic from and to itself); none without EFA."
    launch_template_id: pulumi.Output[str]
    "The launch template of the nodes."
    labels: dict[str, str]
    "The Kubernetes labels of the nodes."
    taints: list[dict[str, str]]
    "The Kubernetes taints of the nodes (key, value, effect)."

    def __init__(self, name: str, args: EfaGpuNodeGroupArgs, opts: Optional[pulumi.ResourceOptions] = None):
        settings = section_settings(["gpu_nodes"], args, tag_problems(args.get("tags")))
        super().__init__(
            name,
            settings=settings["gpu_nodes"],
            cluster_name=args["cluster_name"],
            cluster_security_group_id=args["cluster_security_group_id"],
            subnet_id=args["subnet_id"],
            autoscaled=bool(args.get("autoscaled", False)),
            tags=args.get("tags"),
            opts=opts,
        )


@described
class DevicePlugins(device_plugins.DevicePlugins):
    """The NVIDIA and EFA device plugins (pinned Helm releases in kube-system) for the GPU nodes:
    they tolerate exactly the GPU taint and run only on the GPU nodes."""

    nvidia_release_name: Optional[pulumi.Output[str]]
    "The NVIDIA device plugin's Helm release; none on Bottlerocket, which ships its own."
    efa_release_name: Optional[pulumi.Output[str]]
    "The EFA device plugin's Helm release; none without EFA."

    def __init__(self, name: str, args: DevicePluginsArgs, opts: Optional[pulumi.ResourceOptions] = None):
        settings = section_settings(["device_plugins", "gpu_nodes"], args)
        super().__init__(
            name, settings=settings["device_plugins"], gpu_nodes=settings["gpu_nodes"], opts=kubernetes_options(name, args, opts)
        )
        self.nvidia_release_name = self.nvidia_release.name if self.nvidia_release else None
        self.efa_release_name = self.efa_release.name if self.efa_release else None


@described
class KubeRayOperator(kuberay.KubeRayOperator):
    """The KubeRay operator (Helm kuberay-operator) on the system nodes: the RayCluster and RayJob
    of the training run depend on it (dependsOn this component)."""

    release_name: pulumi.Output[str]
    "The operator's Helm release."
    namespace: pulumi.Output[str]
    "The operator's namespace."

    def __init__(self, name: str, args: KubeRayOperatorArgs, opts: Optional[pulumi.ResourceOptions] = None):
        settings = section_settings(["kuberay"], args)
        super().__init__(name, settings=settings["kuberay"], opts=kubernetes_options(name, args, opts))
        self.release_name = self.release.name


@described
class RlinfTraining(workload.RlinfTraining):
    """The RLinf training run on GPU nodes you have: one Ray pod per node holding every GPU and EFA
    interface, launched by an Indexed Job (or a JobSet with restarts) or a KubeRay RayJob, with
    checkpoints on the shared filesystem or synced to S3. The operators it needs (JobSet
    controller, KubeRay) are yours: depend on them (dependsOn)."""

    entrypoint: pulumi.Output[str]
    "The trainer's command line."

    def __init__(self, name: str, args: RlinfTrainingArgs, opts: Optional[pulumi.ResourceOptions] = None):
        data, problems = sections_data(TrainingSettings, list(TrainingSettings.model_fields), args)
        settings = validated(TrainingSettings, data, problems).stack_settings(pulumi.get_stack())
        claim = args.get("shared_volume_claim")
        try:
            workload._check_shared_filesystem(settings, claim)
        except ValueError as err:
            raise ConfigError([f"sharedVolumeClaim: {str(err).removeprefix('RlinfTraining: ')}"]) from None
        super().__init__(
            name,
            settings=settings,
            service_account_name=args["service_account_name"],
            bucket_name=args["bucket_name"],
            shared_volume_claim=claim,
            shared_volume_exported=bool(args.get("shared_volume_exported", False)),
            hf_token=args.get("hf_token"),
            wandb_api_key=args.get("wandb_api_key"),
            controllers_installed=True,
            opts=kubernetes_options(name, args, opts),
        )
