"""RlinfStack: a whole stack from one resource, for a program in another language that wants
everything (network, cluster, GPU nodes, plugins, operators, storage, queue, the run).

Its settings are StackSettings' sections, read by the loader itself (``rlinf_eks.loading.parse``:
the sections, the rule table, the trainers' rules), so a section added to StackSettings reaches it
through the generated args and nothing here. The resources are those ``python -m rlinf_eks plan``
plans for the same settings (``rlinf_eks.program.build``), each under this component.
"""

# No `from __future__ import annotations`: the analyzer reads the annotations at run time.
from typing import Any, Optional

import pulumi
from pulumi.runtime.settings import get_root_resource, set_root_resource

from .. import placeholders
from ..cluster import missing_kubeconfig_error
from ..config import ConfigError, StackSettings
from ..loading import parse
from ..program import Secrets, build
from .args import RlinfStackArgs
from .components import described
from .inputs import sections_data


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def stack_settings(args: RlinfStackArgs, stack: str) -> StackSettings:
    """The stack's settings from the component's args, exactly as the loader reads a stack file
    holding the same sections (the region, unless given: the program's ``aws:region``), or one
    ConfigError: every problem, a setting that is an Output among them."""
    data, problems = sections_data(StackSettings, list(StackSettings.model_fields), args)
    region = pulumi.Config("aws").get("region")
    if "region" not in data and region:
        data["region"] = region
    try:
        settings = parse(data, stack)
    except ConfigError as err:
        raise ConfigError(problems + err.problems) from None
    if problems:
        raise ConfigError(problems)
    if settings.platform.role == "experiment":
        raise ConfigError(
            ["platform.role='experiment': RlinfStack makes a cluster (both) or a platform; run an experiment on a platform "
             "with RlinfTraining (its kubeconfig and names from the platform's outputs)"]
        )  # fmt: skip
    if settings.cluster.existing and args.get("kubeconfig") is None:
        raise ConfigError(missing_kubeconfig_error(settings.cluster.name or f"rlinf-{stack}").problems)
    return placeholders.refused(settings)  # as the stack's own program: none under preview and up unless allowPlaceholders


def _secret(value: Optional[pulumi.Input[str]]) -> Optional[pulumi.Output[str]]:
    return None if value is None else pulumi.Output.secret(value)


@described
class RlinfStack(pulumi.ComponentResource):
    """Everything of one rlinf-eks stack from one resource: a VPC (or yours), an EKS cluster (or
    yours), the EFA GPU node group, the device plugins, the optional Cluster Autoscaler and KubeRay
    operator, the JobSet controller and Kueue queue, the checkpoint bucket and shared filesystem,
    the training identity and the RLinf training run. The inputs are the sections of a stack file.
    One per program: its children have the fixed names of a stack's resources."""

    cluster_name: pulumi.Output[str]
    "The EKS cluster's name."
    kubeconfig: pulumi.Output[str]
    "The kubeconfig of the cluster (a secret)."
    api_endpoint_access: pulumi.Output[str]
    "How the cluster's API endpoint is reached (public for some CIDRs, private, existing)."
    gpu_node_group: pulumi.Output[str]
    "The GPU node group's name."
    placement_group: pulumi.Output[Optional[str]]
    "The GPU nodes' placement group; none with a capacity reservation or Capacity Block."
    checkpoint_bucket: pulumi.Output[str]
    "The checkpoint bucket (protected, retained on delete)."
    shared_filesystem: Optional[pulumi.Output[str]]
    "The FSx for Lustre filesystem's id; none without the shared filesystem."
    training_entrypoint: Optional[pulumi.Output[str]]
    "The trainer's command line; none for a platform (platform.role: platform)."
    stack_outputs: pulumi.Output[dict[str, Any]]
    "Every output the same stack exports (a platform's for its experiments too), by name; the kubeconfig left out."

    def __init__(self, name: str, args: RlinfStackArgs, opts: Optional[pulumi.ResourceOptions] = None):
        stack = pulumi.get_stack()
        settings = stack_settings(args, stack)
        super().__init__("rlinf-eks:index:RlinfStack", name, None, opts)
        secrets = Secrets(
            hf_token=_secret(args.get("hf_token")),
            wandb_api_key=_secret(args.get("wandb_api_key")),
            kubeconfig=_secret(args.get("kubeconfig")),
        )
        # build() registers a stack's resources at the top; here they belong to this component: it
        # stands in for the stack's root while they are created (their registrations read it then)
        root = get_root_resource()
        set_root_resource(self)
        try:
            outputs = build(settings, secrets, stack)
        finally:
            set_root_resource(root)  # type: ignore[arg-type]
        for key, value in outputs.items():
            attribute = _snake(key)
            if attribute in type(self).__annotations__ and attribute != "stack_outputs":
                setattr(self, attribute, None if value is None else pulumi.Output.from_input(value))
        self.stack_outputs = pulumi.Output.from_input({k: v for k, v in outputs.items() if k != "kubeconfig"})
        self.register_outputs(outputs)
