"""Rules of values (labels, tags, names, AZs) and the cross-section rules of a whole stack.

StackSettings' model validator calls ``stack_rules``; the models are only read here (no import of
schema at run time, which imports this module). Rules owned by other layers (the trainers'
world-size rules) are passed in through the validation context by the loading step
(rlinf_eks.loading), so this package never imports them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Optional

from pydantic_core import PydanticCustomError

from .. import aws_names, catalog
from .errors import _rule

if TYPE_CHECKING:
    from .schema import GpuNodeSettings, StackSettings, WorkloadSettings

_FAILED_SECTIONS = "failedSections"  # validation context: top-level keys whose own validation failed
_STACK = "stack"  # validation context: the Pulumi stack name, for the names derived from it
_EXTRA_RULES = "extraRules"  # validation context: StackRule callables of the layers above (trainers)

StackRule = Callable[["StackSettings", int, int], list[str]]
"""A rule of another layer: (settings, nodes, GPUs per node) -> problem lines, each naming its key path."""

# Kubernetes label syntax (apimachinery validation IsQualifiedName / IsValidLabelValue): an
# optional DNS-subdomain prefix (<= 253) and a name of <= 63 alphanumerics, '-', '_', '.', starting
# and ending alphanumeric; values likewise (<= 63, may be empty).
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# The kubelet refuses to start with --node-labels in the kubernetes.io or k8s.io namespaces other
# than the kubelet.kubernetes.io/ and node.kubernetes.io/ prefixes (and the few labels it sets
# itself), and the NodeRestriction admission plugin rejects them (sig-auth enhancement "Bounding
# Self-Labeling Kubelets"); EKS hands node group labels to the kubelet that way.
_RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_ALLOWED_LABEL_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")
# EKS's CreateNodegroup labels: key and value 1-63 characters (botocore eks labelKey, labelValue).
_EKS_LABEL_MAX = 63


def label_problem(key: str, value: str) -> str | None:
    """Why ``key: value`` cannot be a label of an EKS managed node group, or None."""
    prefix, slash, name = key.rpartition("/")
    if not key or len(name) > 63 or not _LABEL_NAME.fullmatch(name) or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))):
        return (
            "not a Kubernetes label key: [prefix/]name, the prefix a lowercase DNS subdomain, the name at most "
            "63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    if len(key) > _EKS_LABEL_MAX:
        return f"EKS node group label keys are at most {_EKS_LABEL_MAX} characters ({len(key)})"
    domain = prefix.lower()
    if any(domain == d or domain.endswith("." + d) for d in _RESERVED_LABEL_DOMAINS) and domain not in _ALLOWED_LABEL_PREFIXES:
        return (
            "kubernetes.io and k8s.io labels are reserved: the kubelet will not set them on its own node "
            "(only the kubelet.kubernetes.io/ and node.kubernetes.io/ prefixes); use your own prefix, such as example.com/"
        )
    if not value or len(value) > _EKS_LABEL_MAX or not _LABEL_NAME.fullmatch(value):
        return (
            f"not an EKS node label value: 1 to {_EKS_LABEL_MAX} letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit"
        )
    return None


# AWS tags (botocore TagKey 1-128, TagValue 0-256; the aws: prefix is reserved for AWS's own tags,
# "Tag naming limits and requirements" in the Tagging AWS Resources guide). The stack's tags reach
# EKS, IAM and FSx too, whose models allow only letters, numbers, spaces and _.:/=+-@
# (pattern [\p{L}\p{Z}\p{N}_.:/=+\-@]*), and at most 50 tags per resource, of which the stack
# adds up to 5 (project, stack, Name and the two Kubernetes subnet tags).
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
MAX_USER_TAGS = 45


def _tag_text_problem(text: str) -> str | None:
    import unicodedata

    bad = sorted({c for c in text if c not in _TAG_PUNCTUATION and unicodedata.category(c)[0] not in "LZN"})
    return f"EKS, IAM and FSx allow only letters, numbers, spaces and _.:/=+-@ in tags, not {''.join(bad)!r}" if bad else None


def tag_problem(key: str, value: str) -> str | None:
    if not 1 <= len(key) <= 128:
        return f"a tag key is 1 to 128 characters ({len(key)})"
    if key.lower().startswith("aws:"):
        return "tag keys starting with aws: are reserved for AWS"
    if len(value) > 256:
        return f"a tag value is at most 256 characters ({len(value)})"
    return _tag_text_problem(key) or _tag_text_problem(value)


# EKS CreateCluster name (botocore eks ClusterName: 1-100, ^[0-9A-Za-z][A-Za-z0-9\-_]*); node group
# names follow the same characters, at most 63 (EKS CreateNodegroup).
_EKS_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]*")
EKS_CLUSTER_NAME_MAX = 100
EKS_NODEGROUP_NAME_MAX = 63
SYSTEM_NODEGROUP_SUFFIX = "-system"
"""The system node group is named <cluster>-system (cluster.py)."""


def cluster_name_problem(name: str, creates_node_group: bool) -> str | None:
    if not _EKS_NAME.fullmatch(name) or len(name) > EKS_CLUSTER_NAME_MAX:
        return f"an EKS cluster name is 1 to {EKS_CLUSTER_NAME_MAX} letters, digits, '-' or '_', starting with a letter or digit"
    if creates_node_group and len(name + SYSTEM_NODEGROUP_SUFFIX) > EKS_NODEGROUP_NAME_MAX:
        return (
            f"the system node group {name + SYSTEM_NODEGROUP_SUFFIX!r} would be {len(name + SYSTEM_NODEGROUP_SUFFIX)} characters; EKS allows "
            f"{EKS_NODEGROUP_NAME_MAX}, so a new cluster's name is at most {EKS_NODEGROUP_NAME_MAX - len(SYSTEM_NODEGROUP_SUFFIX)}"
        )
    return None


# S3 User Guide, "General purpose bucket naming rules".
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_problem(name: str) -> str | None:
    """Why S3 would refuse ``name`` for a general purpose bucket, or None."""
    if not _BUCKET.fullmatch(name):
        return "an S3 bucket name is 3 to 63 lowercase letters, digits, '.' or '-', starting and ending with a letter or digit"
    if ".." in name:
        return "an S3 bucket name has no two adjacent periods"
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", name):
        return "an S3 bucket name must not look like an IP address"
    for prefix in _BUCKET_PREFIXES:
        if name.startswith(prefix):
            return f"S3 reserves bucket names starting with {prefix}"
    for suffix in _BUCKET_SUFFIXES:
        if name.endswith(suffix):
            return f"S3 reserves bucket names ending with {suffix} (access point, Multi-Region, directory and table buckets)"
    return None


def _az_problem(zone: str, region: str) -> str | None:
    """An AZ is its region and a letter (us-east-1a); a Local Zone is <region>-<zone>-<n><letter>."""
    if re.fullmatch(re.escape(region) + r"[a-z]", zone) or re.fullmatch(re.escape(region) + r"-[a-z]+-\d+[a-z]", zone):
        return None
    if zone in aws_names.REGIONS:
        return f"{zone} is a region, not an Availability Zone: use {zone}a (and aws:region {zone})"
    return f"not an Availability Zone of region {region}: use {region} and a letter, such as {region}a"


# Root volume space kept for the container images (training images are tens of GB) and the run
# directory when a node-local model is staged beside them.
ROOT_VOLUME_RESERVE_GIB = 100


def stack_rules(s: "StackSettings", context: dict[str, Any]) -> list[PydanticCustomError]:
    """Every cross-section rule of ``s``, one error each (none when it deploys)."""
    errors: list[PydanticCustomError] = []
    # Sections that failed their own validation (see parse): rules reading them are skipped.
    failed: frozenset[str] = context.get(_FAILED_SECTIONS, frozenset())

    def valid(*sections: str) -> bool:
        return not failed.intersection(sections)

    gpu = s.gpu_nodes
    try:
        instance = gpu.instance
    except (catalog.UnknownInstanceType, TypeError):  # reported by GpuNodeSettings
        return []
    wl = s.workload
    if not valid("gpuNodes"):
        # the default stands in for gpuNodes here, so every rule that reads it is skipped
        gpu = instance = None  # type: ignore[assignment]
    if not valid("workload"):
        wl = None  # type: ignore[assignment]
    if valid("region", "availabilityZone") and s.availability_zone:
        problem = _az_problem(s.availability_zone, s.region)
        if problem:
            errors.append(_rule("availabilityZone", s.availability_zone, problem))
    errors.extend(_name_rules(s, context.get(_STACK), valid))
    if not valid("network", "region", "availabilityZone"):
        pass
    elif s.network.create:
        azs = s.network.availability_zones
        for index, zone in enumerate(azs):
            problem = _az_problem(zone, s.region)
            if problem:
                errors.append(_rule(f"network.availabilityZones[{index}]", zone, problem))
        if azs and len(set(azs)) < 2:
            errors.append(_rule("network.availabilityZones", azs, "the EKS control plane needs subnets in at least two AZs"))
        if azs and s.gpu_az not in azs:
            errors.append(_rule("network.availabilityZones", azs, f"must include the GPU AZ {s.gpu_az}"))
        if s.network.private_subnet_ids or s.network.gpu_subnet_id:
            errors.append(_rule("network.privateSubnetIds", s.network.private_subnet_ids, "subnets are only given with network.vpcId"))
    else:
        if len(s.network.private_subnet_ids) < 2:
            errors.append(_rule("network.privateSubnetIds", s.network.private_subnet_ids, "an existing VPC needs at least two private subnets (two AZs)"))
        if not s.network.gpu_subnet_id:
            errors.append(_rule("network.gpuSubnetId", None, f"an existing VPC needs the private subnet of the GPU nodes in {s.gpu_az}"))
    if valid("cluster") and not s.cluster.existing and not s.cluster.endpoint_public_access_cidrs and not s.cluster.deploy_from_vpc:
        # The same `pulumi up` that creates the cluster creates the Kubernetes objects through
        # its API endpoint: a private-only endpoint fails there (after the nodes bill) unless
        # the deployer is inside the VPC.
        errors.append(
            _rule(
                "cluster.endpointPublicAccessCidrs",
                [],
                "a new cluster's API endpoint must be reachable by `pulumi up`: list the deployer's public CIDRs "
                "(e.g. [198.51.100.7/32]), or set cluster.deployFromVpc: true if pulumi up runs inside the VPC "
                "(VPN, bastion, CodeBuild)",
            )
        )
    if valid("cluster", "network") and s.cluster.existing and s.network.create:
        errors.append(_rule("network.vpcId", None, "an existing cluster needs its VPC: set network.vpcId, privateSubnetIds and gpuSubnetId"))
    if valid("autoscaler", "cluster") and s.autoscaler.enabled and s.autoscaler.kubernetes_minor != s.cluster.kubernetes_version:
        errors.append(
            _rule(
                "autoscaler.imageTag",
                s.autoscaler.image_tag,
                f"must be a v{s.cluster.kubernetes_version}.x release to match cluster.kubernetesVersion {s.cluster.kubernetes_version}",
            )
        )
    if wl is not None:
        errors.extend(_workload_rules(s, wl, gpu, instance, valid, context.get(_EXTRA_RULES, ())))
    if gpu is not None:
        errors.extend(_node_rules(s, gpu, wl, valid))
    if gpu is not None and wl is not None and valid("storage"):
        errors.extend(_model_rules(s, gpu, wl))
    return errors

def _name_rules(s: "StackSettings", stack: Optional[str], valid: Any) -> list[PydanticCustomError]:
    """Names derived from the stack name (program.build): the cluster rlinf-<stack>, its system
    node group rlinf-<stack>-system, and the stack tag; unknown (None) outside a stack."""
    errors: list[PydanticCustomError] = []
    if stack is None or not valid("cluster"):
        return errors
    if s.cluster.name is None:
        derived = f"rlinf-{stack}"
        problem = cluster_name_problem(derived, creates_node_group=not s.cluster.existing)
        if problem:
            errors.append(_rule("cluster.name", None, f"defaults to {derived!r} from the stack name {stack!r}, but {problem}; set cluster.name"))
    problem = tag_problem("stack", stack)
    if problem:
        errors.append(_rule("tags", {"stack": stack}, f"every resource is tagged with the stack name, but {problem}"))
    return errors

def _workload_rules(
    s: "StackSettings", wl: "WorkloadSettings", gpu: Any, instance: Any, valid: Any, extra: tuple[StackRule, ...]
) -> list[PydanticCustomError]:
    """Rules of the workload section with KubeRay and, when ``gpu`` is given, the GPU nodes."""
    errors: list[PydanticCustomError] = []
    if valid("kuberay") and wl.launcher == "kuberay" and not s.kuberay.enabled:
        errors.append(_rule("workload.launcher", "kuberay", "needs the KubeRay operator: set kuberay.enabled: true, or use launcher manual"))
    rollout, dialect = wl.rollout, wl.trainer.dialect
    if instance is not None and (rollout.tensor_parallel_size > instance.gpus or instance.gpus % rollout.tensor_parallel_size):
        errors.append(
            _rule(
                "workload.rollout.tensorParallelSize",
                rollout.tensor_parallel_size,
                f"must divide the GPUs per node ({instance.gpus} on {instance.name}): one of "
                + ", ".join(str(d) for d in range(1, instance.gpus + 1) if instance.gpus % d == 0),
            )
        )
    if dialect == "rlinf-embodied" and rollout.backend != "hf":
        errors.append(_rule("workload.rollout.backend", rollout.backend, "RLinf embodied training rolls out with HuggingFace only: use hf"))
    if dialect == "verl-ppo" and rollout.backend == "sglang":
        errors.append(_rule("workload.rollout.backend", "sglang", "the verl-ppo dialect supports hf or vllm"))
    if dialect == "rlinf-reasoning" and rollout.backend == "hf":
        errors.append(_rule("workload.rollout.backend", "hf", "RLinf reasoning rolls out with vllm or sglang"))
    if wl.enabled and gpu is not None:
        for extra_rule in extra:
            for line in extra_rule(s, gpu.node_count, instance.gpus):
                errors.append(PydanticCustomError("rule", "{text}", {"text": line}))
    return errors

def _node_rules(s: "StackSettings", gpu: GpuNodeSettings, wl: Optional["WorkloadSettings"], valid: Any) -> list[PydanticCustomError]:
    """Rules of the GPU nodes with the preflight, autoscaler and storage sections."""
    errors: list[PydanticCustomError] = []
    if valid("preflight") and s.preflight.enabled and not gpu.efa:
        errors.append(_rule("preflight.enabled", True, "the preflight measures EFA bandwidth; it needs gpuNodes.efa: true"))
    if valid("autoscaler") and gpu.scale_to_zero and not s.autoscaler.enabled:
        errors.append(_rule("gpuNodes.scaleToZero", True, "nodes come back from zero only with the cluster autoscaler: set autoscaler.enabled: true"))
    if valid("storage") and wl is not None and s.storage.shared_filesystem.enabled is False and gpu.node_count > 1 and wl.enabled:
        errors.append(
            _rule(
                "storage.sharedFilesystem.enabled",
                False,
                f"{gpu.node_count} nodes write one FSDP checkpoint shard per rank under the log path: a multi-node run needs the shared filesystem",
            )
        )
    return errors

def _model_rules(s: "StackSettings", gpu: GpuNodeSettings, wl: "WorkloadSettings") -> list[PydanticCustomError]:
    """A node-local model must fit beside the images on the root volume (without the NVMe RAID0,
    emptyDirs live in the kubelet's directory on the root volume)."""
    model = wl.model
    if not model.source or s.shared_filesystem or gpu.local_nvme_raid0:
        return []
    room = gpu.root_volume_gib - ROOT_VOLUME_RESERVE_GIB
    if model.size_gib <= room:
        return []
    return [
        _rule(
            "workload.model.sizeGib",
            model.size_gib,
            f"the node-local model lives on the {gpu.root_volume_gib} GiB root volume, which keeps {ROOT_VOLUME_RESERVE_GIB} GiB "
            f"for images and the run directory: at most {room}, or raise gpuNodes.rootVolumeGib, set gpuNodes.localNvmeRaid0: true, "
            "or use the shared filesystem",
        )
    ]
