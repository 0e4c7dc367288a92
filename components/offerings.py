"""Where a stack's GPU instance types are sold, as far as the plan knows it offline: the price
table (:mod:`rlinf_eks.pricing`) has a row for each catalog GPU type in each region its sources
cover, and a row without a price says the type is not sold On-Demand there per that source (or is
sold as Capacity Blocks only). ``plan --strict`` fails on such a type (``python -m rlinf_eks``);
without --strict each is one line on stderr.

Not judged here: a region or a type outside the table (its cost says no price was sourced), a
Capacity Block (the On-Demand sources do not say where blocks are sold), and the Availability
Zone: zone letters map to different zones per account, so whether ``availabilityZone`` offers the
type is a "Not checked offline" line (rlinf_eks.config.unchecked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import pricing

if TYPE_CHECKING:
    from .config import StackSettings


def _offerings_command(instance_type: str, region: str) -> str:
    return (f"aws ec2 describe-instance-type-offerings --region {region} "
            f"--filters Name=instance-type,Values={instance_type}")  # fmt: skip


def not_sold(settings: StackSettings) -> list[str]:
    """One line per GPU instance type of the stack (gpuNodes.instanceType, then Karpenter's
    fallbackInstanceTypes) that the price table says is not sold in its region for the stack's
    capacity type: the key path, the value, the source's word and where it is sold."""
    gpu = settings.gpu_nodes
    if settings.platform.role == "experiment" or gpu.capacity_type == "CAPACITY_BLOCK":
        return []  # an experiment's nodes are its platform's; a block's regions are not in the On-Demand table
    keyed = [("gpuNodes.instanceType", gpu.instance_type)]
    keyed += [(f"gpuNodes.fallbackInstanceTypes[{i}]", name) for i, name in enumerate(gpu.fallback_instance_types)]
    lines = []
    for key, name in keyed:
        row = pricing.on_demand_price(name, settings.region)
        if row.known or row.source is None:
            continue  # sold there, or outside the table: not judged
        why = (row.reason or "").removeprefix(f"{name}: ")
        if name == pricing.CAPACITY_BLOCKS_ONLY:
            fix = "set gpuNodes.capacityType: CAPACITY_BLOCK with a block of it, or choose another type"
        else:
            where = pricing.priced_regions(name)
            shown = ", ".join(where[:6]) + (f" and {len(where) - 6} more" if len(where) > 6 else "")
            fix = f"sold in {shown}: set aws:region to one of them or choose another type" if where else "choose another type"
        lines.append(f"{key}={name!r} in aws:region {settings.region}: {why}; {fix} (check: {_offerings_command(name, settings.region)})")
    return lines
