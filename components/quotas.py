"""The EC2 Service Quotas a stack needs before ``pulumi up`` can launch its nodes.

EC2 counts running instances per quota in vCPUs, by instance family and purchase option. The codes
below are the Service Quotas codes of service ``ec2`` (each checked against AWS's documentation and
tools that read it; field notes, section 5); a family with no code here is named as such, never
guessed. The offline plan prints :func:`render`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from . import catalog

if TYPE_CHECKING:
    from .config import StackSettings

# (quota name, code) by family group and purchase option
QUOTAS: dict[tuple[str, str], tuple[str, str]] = {
    ("P", "on-demand"): ("Running On-Demand P instances", "L-417A185B"),
    ("P", "spot"): ("All P Spot Instance Requests", "L-7212CCBC"),
    ("G", "on-demand"): ("Running On-Demand G and VT instances", "L-DB2E81BA"),
    ("G", "spot"): ("All G and VT Spot Instance Requests", "L-3819A6DF"),
    ("Standard", "on-demand"): ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "L-1216C47A"),
}
_STANDARD = set("acdhimrtz")
# vCPUs of the standard families by size (two per core: 2 per "large")
_SIZE_VCPUS = {"medium": 1, "large": 2, "xlarge": 4}


def family_group(instance_type: str) -> Optional[str]:
    family = instance_type.split(".", 1)[0]
    if family.startswith("p"):
        return "P"
    if family.startswith(("g", "vt")):
        return "G"
    if family[0] in _STANDARD and not family.startswith(("inf", "trn")):
        return "Standard"
    return None


def standard_vcpus(instance_type: str) -> Optional[int]:
    size = instance_type.split(".", 1)[1]
    if size in _SIZE_VCPUS:
        return _SIZE_VCPUS[size]
    match = re.fullmatch(r"(\d+)xlarge", size)
    return 4 * int(match.group(1)) if match else None


@dataclass(frozen=True)
class QuotaNeed:
    what: str
    """The nodes that need it: ``2 x p5.48xlarge (GPU nodes)``."""
    name: Optional[str]
    code: Optional[str]
    vcpus: Optional[int]

    def __str__(self) -> str:
        quota = f"{self.name} ({self.code})" if self.code else "no Service Quotas code known here for this family: look it up in the console"
        amount = f"{self.vcpus} vCPUs" if self.vcpus is not None else "vCPUs unknown here"
        return f"{quota}: {amount} for {self.what}"


def _need(group: Optional[str], option: str, what: str, vcpus: Optional[int]) -> QuotaNeed:
    name, code = QUOTAS.get((group or "", option), (None, None))
    return QuotaNeed(what, name, code, vcpus)


def needed(settings: StackSettings) -> list[QuotaNeed]:
    """The GPU nodes at their most (maxNodes, else nodeCount) and, on a new cluster, the system
    nodes. Spot draws on the Spot quota; on-demand, a capacity reservation and a Capacity Block on
    the On-Demand one."""
    gpu = settings.gpu_nodes
    option = "spot" if gpu.capacity_type == "SPOT" else "on-demand"
    # Karpenter may launch any allowed type (maxNodes of them at most): per quota, the largest
    types = gpu.karpenter_types if gpu.provisioner == "karpenter" else [gpu.instance_type]
    by_group: dict[Optional[str], list[catalog.InstanceType]] = {}
    for name in types:
        by_group.setdefault(family_group(name), []).append(gpu.instance if name == gpu.instance_type else catalog.lookup(name))
    needs = []
    for group, instances in by_group.items():
        vcpu = max(i.vcpu for i in instances)
        names = " or ".join(i.name for i in instances)
        needs.append(_need(group, option, f"{gpu.max_size} x {names} (GPU nodes, {vcpu} vCPUs each)", gpu.max_size * vcpu))
    if not settings.cluster.existing:
        system = settings.cluster.system_nodes
        each = standard_vcpus(system.instance_type) if family_group(system.instance_type) == "Standard" else None
        needs.append(
            _need(
                family_group(system.instance_type), "on-demand", f"{system.count} x {system.instance_type} (system nodes)", None if each is None else each * system.count
            )
        )
    return needs


def render(settings: StackSettings) -> str:
    region = settings.region
    lines = [f"EC2 Service Quotas (region {region}; aws service-quotas get-service-quota --service-code ec2 --quota-code CODE):"]
    lines += [f"  {need}" for need in needed(settings)]
    if settings.gpu_nodes.instance.name.startswith("p5") and settings.gpu_nodes.capacity_type == "ON_DEMAND":
        lines.append(
            "  a quota is not capacity: on-demand p5/p5en are often unavailable (InsufficientInstanceCapacity); "
            "a Capacity Block (gpuNodes.capacityType: CAPACITY_BLOCK) or a capacity reservation (gpuNodes.capacityReservationId) holds them"
        )
    if settings.images.build:
        # the quota's code is not known here (no source read gives it): named by its service and compute type
        lines.append(
            f"  CodeBuild (service code codebuild): concurrently running builds of {settings.images.compute_type} on Linux: at least 1 "
            "(build-image runs one build per family at a time); a new account can have less: aws service-quotas "
            "list-service-quotas --service-code codebuild"
        )
    return "\n".join(lines)
