"""The cross-section rules of a stack: a table of small functions, each declaring the top-level
sections it reads, so that a rule is skipped when one of them failed its own validation (its
problem is then already reported, and the rule would read a stand-in default).

:mod:`rlinf_eks.loading` runs ``STACK_RULES``, the trainers' rules (which the layers above
declare the same way) and ``NODE_RULES``, in that order; :func:`validate` runs config's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from .ami_releases import alias_problem
from .aws_rules import az_problem, cluster_name_problem, tag_problem
from .errors import ConfigError, problem_line
from .no_effect import no_effect_problems
from .stack import Sections, StackSettings, validate_sections

Check = Callable[[StackSettings, Optional[str]], list[str]]
"""(settings, the Pulumi stack name or None outside a stack) -> problem lines, each naming its
key path, the value and what is valid."""


@dataclass(frozen=True)
class StackRule:
    """A cross-section rule: ``check`` reads only ``sections`` (top-level keys, camelCase)."""

    sections: tuple[str, ...]
    check: Check


def broken_rules(rules: tuple[StackRule, ...], sections: Sections, stack: Optional[str] = None) -> list[str]:
    """The problems of every rule whose sections all validated (the others are skipped)."""
    return [line for rule in rules if not sections.failed.intersection(rule.sections) for line in rule.check(sections.settings, stack)]


def validate(data: Mapping[str, Any], stack: Optional[str] = None) -> StackSettings:
    """Validate a plain mapping (camelCase keys) with config's own rules, or raise ConfigError.
    (rlinf_eks.loading.parse adds the trainers' rules: use that to load a stack.)"""
    sections = validate_sections(data)
    problems = sections.problems + broken_rules((*STACK_RULES, *NODE_RULES), sections, stack)
    if problems:
        raise ConfigError(problems)
    return sections.settings


# --- names and places ---------------------------------------------------------------------------


def _gpu_az(s: StackSettings, stack: Optional[str]) -> list[str]:
    problem = az_problem(s.availability_zone, s.region) if s.availability_zone else None
    return [problem_line("availabilityZone", s.availability_zone, problem)] if problem else []


def _derived_cluster_name(s: StackSettings, stack: Optional[str]) -> list[str]:
    """The cluster's default name rlinf-<stack> (program.build) and its system node group's."""
    if stack is None or s.cluster.name is not None:
        return []
    derived = f"rlinf-{stack}"
    problem = cluster_name_problem(derived, creates_node_group=not s.cluster.existing)
    if problem:
        return [problem_line("cluster.name", None, f"defaults to {derived!r} from the stack name {stack!r}, but {problem}; set cluster.name")]
    return []


def _stack_tag(s: StackSettings, stack: Optional[str]) -> list[str]:
    """Every resource is tagged with the stack name."""
    problem = tag_problem("stack", stack) if stack is not None else None
    return [problem_line("tags", {"stack": stack}, f"every resource is tagged with the stack name, but {problem}")] if problem else []


def _network(s: StackSettings, stack: Optional[str]) -> list[str]:
    """A new VPC's AZs (two at least, the GPU AZ among them); an existing VPC's subnets."""
    problems: list[str] = []
    net = s.network
    if not net.create:
        if len(net.private_subnet_ids) < 2:
            problems.append(problem_line("network.privateSubnetIds", net.private_subnet_ids, "an existing VPC needs at least two private subnets (two AZs)"))
        if not net.gpu_subnet_id:
            problems.append(problem_line("network.gpuSubnetId", None, f"an existing VPC needs the private subnet of the GPU nodes in {s.gpu_az}"))
        return problems
    azs = net.availability_zones
    for index, zone in enumerate(azs):
        problem = az_problem(zone, s.region)
        if problem:
            problems.append(problem_line(f"network.availabilityZones[{index}]", zone, problem))
    if azs and len(set(azs)) < 2:
        problems.append(problem_line("network.availabilityZones", azs, "the EKS control plane needs subnets in at least two AZs"))
    if azs and s.gpu_az not in azs:
        problems.append(problem_line("network.availabilityZones", azs, f"must include the GPU AZ {s.gpu_az}"))
    if net.private_subnet_ids or net.gpu_subnet_id:
        problems.append(problem_line("network.privateSubnetIds", net.private_subnet_ids, "subnets are only given with network.vpcId"))
    return problems


# --- the cluster and its operators --------------------------------------------------------------


def _reachable_endpoint(s: StackSettings, stack: Optional[str]) -> list[str]:
    # The same `pulumi up` that creates the cluster creates the Kubernetes objects through its API
    # endpoint: a private-only endpoint fails there (after the nodes bill) unless the deployer is
    # inside the VPC.
    cluster = s.cluster
    if cluster.existing or cluster.endpoint_public_access_cidrs or cluster.deploy_from_vpc:
        return []
    return [
        problem_line(
            "cluster.endpointPublicAccessCidrs",
            [],
            "a new cluster's API endpoint must be reachable by `pulumi up`: list the deployer's public CIDRs "
            "(e.g. [198.51.100.7/32]), or set cluster.deployFromVpc: true if pulumi up runs inside the VPC "
            "(VPN, bastion, CodeBuild)",
        )
    ]


def _existing_cluster_vpc(s: StackSettings, stack: Optional[str]) -> list[str]:
    if s.cluster.existing and s.network.create:
        return [problem_line("network.vpcId", None, "an existing cluster needs its VPC: set network.vpcId, privateSubnetIds and gpuSubnetId")]
    return []


def _autoscaler_version(s: StackSettings, stack: Optional[str]) -> list[str]:
    autoscaler, version = s.autoscaler, s.cluster.kubernetes_version
    if autoscaler.enabled and autoscaler.kubernetes_minor != version:
        return [problem_line("autoscaler.imageTag", autoscaler.image_tag, f"must be a v{version}.x release to match cluster.kubernetesVersion {version}")]
    return []


# --- the workload on the GPU nodes --------------------------------------------------------------


def _kuberay_launcher(s: StackSettings, stack: Optional[str]) -> list[str]:
    if s.workload.launcher == "kuberay" and not s.kuberay.enabled:
        return [problem_line("workload.launcher", "kuberay", "needs the KubeRay operator: set kuberay.enabled: true, or use launcher manual")]
    return []


def _tensor_parallel(s: StackSettings, stack: Optional[str]) -> list[str]:
    size, gpus, name = s.workload.rollout.tensor_parallel_size, s.gpu_nodes.instance.gpus, s.gpu_nodes.instance.name
    if size <= gpus and gpus % size == 0:
        return []
    divisors = ", ".join(str(d) for d in range(1, gpus + 1) if gpus % d == 0)
    return [problem_line("workload.rollout.tensorParallelSize", size, f"must divide the GPUs per node ({gpus} on {name}): one of {divisors}")]


def _preflight_efa(s: StackSettings, stack: Optional[str]) -> list[str]:
    if s.preflight.enabled and not s.gpu_nodes.efa:
        return [problem_line("preflight.enabled", True, "the preflight measures EFA bandwidth; it needs gpuNodes.efa: true")]
    return []


def _scale_to_zero(s: StackSettings, stack: Optional[str]) -> list[str]:
    if s.gpu_nodes.scale_to_zero and not s.autoscaler.enabled and s.gpu_nodes.provisioner == "managed":
        return [problem_line("gpuNodes.scaleToZero", True, "nodes come back from zero only with the cluster autoscaler: set autoscaler.enabled: true")]
    return []


def _karpenter(s: StackSettings, stack: Optional[str]) -> list[str]:
    """Karpenter is the only provisioner of the GPU nodes, and fallback types need the queue that
    gives each run one of them, as one pod set."""
    gpu = s.gpu_nodes
    if gpu.provisioner != "karpenter":
        return []
    problems: list[str] = []
    if s.autoscaler.enabled:
        problems.append(
            problem_line(
                "autoscaler.enabled",
                True,
                "gpuNodes.provisioner karpenter launches and removes the GPU nodes itself; two autoscalers would fight over "
                "them: set autoscaler.enabled: false (or provisioner managed)",
            )
        )
    if gpu.fallback_instance_types and s.workload.enabled and s.workload.launcher == "kuberay":
        problems.append(
            problem_line(
                "gpuNodes.fallbackInstanceTypes",
                gpu.fallback_instance_types,
                "a RayJob's head and workers are separate Kueue pod sets, each given its flavor (its instance type) on its "
                "own, so one run could span two types: use workload.launcher manual (one pod set), or list no fallback types",
            )
        )
    if gpu.fallback_instance_types and not s.queue.enabled:
        problems.append(
            problem_line(
                "gpuNodes.fallbackInstanceTypes",
                gpu.fallback_instance_types,
                "each type is a Kueue flavor, so that a run's pods all get one type: set queue.enabled: true, "
                "or list no fallback types",
            )
        )
    return problems


def _karpenter_cluster(s: StackSettings, stack: Optional[str]) -> list[str]:
    """Karpenter needs a cluster this stack creates (a rule of the platform, skipped for experiments)."""
    if s.gpu_nodes.provisioner != "karpenter" or not s.cluster.existing:
        return []
    return [
        problem_line(
            "gpuNodes.provisioner",
            "karpenter",
            "needs a cluster this stack creates (its nodes join through an EKS access entry and the controller's "
            "credentials come from the eks-pod-identity-agent add-on, neither known on an existing cluster): "
            "use provisioner managed with cluster.existing",
        )
    ]


def _karpenter_ami(s: StackSettings, stack: Optional[str]) -> list[str]:
    """The AMI release Karpenter's alias names ships the cluster's Kubernetes version
    (config/ami_releases.py: amazon-eks-ami's CHANGELOG); else no GPU node ever launches."""
    gpu = s.gpu_nodes
    if gpu.provisioner != "karpenter" or s.platform.role == "experiment":
        return []
    problem = alias_problem(gpu.karpenter.ami_alias, s.cluster.kubernetes_version)
    return [problem_line("gpuNodes.karpenter.amiAlias", gpu.karpenter.ami_alias, problem)] if problem else []


def _multi_node_checkpoints(s: StackSettings, stack: Optional[str]) -> list[str]:
    nodes = s.gpu_nodes.node_count
    if s.storage.shared_filesystem.enabled is False and nodes > 1 and s.workload.enabled:
        return [
            problem_line(
                "storage.sharedFilesystem.enabled",
                False,
                f"{nodes} nodes write one FSDP checkpoint shard per rank under the log path: a multi-node run needs the shared filesystem",
            )
        ]
    return []


def _image_families(s: StackSettings, stack: Optional[str]) -> list[str]:
    """A platform runs no trainer, so it has no family of its own to build by default."""
    if s.images.build and s.images.families is None and s.platform.role == "platform":
        return [problem_line("images.families", None, "a platform runs no trainer, so it has no image family of its own: "
                             "name the families its experiments use, such as [rlinf-embodied, rlinf-reasoning]")]  # fmt: skip
    return []


STACK_RULES: tuple[StackRule, ...] = (
    StackRule(("region", "availabilityZone"), _gpu_az),
    StackRule(("cluster",), _derived_cluster_name),
    StackRule(("cluster", "tags"), _stack_tag),
    StackRule(("network", "region", "availabilityZone"), _network),
    StackRule(("cluster",), _reachable_endpoint),
    StackRule(("cluster", "network"), _existing_cluster_vpc),
    StackRule(("autoscaler", "cluster"), _autoscaler_version),
    StackRule(("workload", "kuberay"), _kuberay_launcher),
    StackRule(("workload", "gpuNodes"), _tensor_parallel),
    StackRule(("images", "platform"), _image_families),
)
"""Config's rules up to the workload's; the trainers' rules follow them (rlinf_eks.loading)."""

NODE_RULES: tuple[StackRule, ...] = (
    StackRule(("gpuNodes", "preflight"), _preflight_efa),
    StackRule(("gpuNodes", "autoscaler"), _scale_to_zero),
    StackRule(("gpuNodes", "autoscaler", "queue", "workload"), _karpenter),
    StackRule(("gpuNodes", "cluster"), _karpenter_cluster),
    StackRule(("gpuNodes", "cluster", "platform"), _karpenter_ami),
    StackRule(("gpuNodes", "storage", "workload"), _multi_node_checkpoints),
    StackRule(("platform", "workload", "gpuNodes", "autoscaler", "kuberay", "preflight", "queue", "observability", "cluster"), no_effect_problems),
)
"""Config's rules of the GPU nodes with the other sections, after the trainers' rules."""
