"""A Capacity Block's cost as it is paid: the whole block, up front at reservation, whether its
nodes run or not (EC2 "Capacity Blocks for ML" pricing: a reservation fee charged up front when the
block is scheduled, at the rate of the time of purchase, plus an operating system fee while
instances run, which for Linux is billed per second and not counted here).

The block's nodes are ``gpuNodes.nodeCount`` and its hours run from ``capacityBlock.startTime`` to
``endTime``; its rate is ``capacityBlock.usdPerInstanceHour`` (the offering's effective instance
hourly rate), else the On-Demand price stands in and the report says so. The efficiency report
(:mod:`.efficiency`) then bills the GPU nodes at the block's rate in every scenario, idle too, and
the plan prints the block's whole price in place of a 30-minute run's.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ... import pricing
from ...config import StackSettings

RATE_KEY = "gpuNodes.capacityBlock.usdPerInstanceHour"
PAID = "paid up front at reservation, in full whether its nodes run or not"
NOT_INCLUDED = "the operating system fee while instances run (Linux: per second), the volumes and the rest of the stack"


def capacity_block_cost(settings: StackSettings) -> Optional[dict[str, Any]]:
    """The block's instances, hours, rate (and where it comes from) and whole price; None unless
    the GPU nodes are a Capacity Block's. A figure not known is None, with ``unknown`` saying why."""
    gpu = settings.gpu_nodes
    if gpu.capacity_type != "CAPACITY_BLOCK":
        return None
    block = gpu.capacity_block
    given = block.usd_per_instance_hour if block else None
    on_demand = pricing.on_demand_price(gpu.instance_type, settings.region)
    rate = given if given is not None else on_demand.usd_per_hour
    if given is not None:
        rate_from = RATE_KEY
    elif rate is not None:
        rate_from = f"the On-Demand price of {on_demand.as_of} standing in for the block's"
    else:
        rate_from = f"unknown: {on_demand.reason}"
    hours = None
    if block is not None and block.start_time is not None and block.end_time is not None:
        hours = round((block.end_time - block.start_time).total_seconds() / 3600, 2)
    unknown = []
    if hours is None:
        unknown.append("its hours: capacityBlock.startTime and endTime give them")
    if rate is None:
        unknown.append("its rate")
    instances = gpu.node_count
    return {
        "instances": instances,
        "hours": hours,
        "usdPerInstanceHour": rate,
        "rateFrom": rate_from,
        "perHour": round(instances * rate, 4) if rate is not None else None,
        "totalUsd": round(instances * rate * hours, 2) if rate is not None and hours is not None else None,
        "paid": PAID,
        "notIncluded": NOT_INCLUDED,
        "unknown": unknown,
    }


def apply_to_cost(cost: Mapping[str, Any], block: Mapping[str, Any]) -> dict[str, Any]:
    """``cost`` (the efficiency report's) with its GPU nodes billed at the block's rate in every
    scenario, idle included, the totals summed again, and the block itself under ``capacityBlock``."""
    per_hour = block["perHour"]
    scenarios = ("WhileTraining", "Idle", "AtMax")
    items = []
    for item in cost.get("items", []):
        if item["item"] == "gpuNodes":
            price = {**item["price"], "usdPerUnitHour": block["usdPerInstanceHour"],
                     "detail": f"Capacity Block, {PAID}"}  # fmt: skip
            item = {**item, "price": price, **{f"perHour{s}": per_hour for s in scenarios}}
        items.append(item)
    out = {**cost, "items": items, "capacityBlock": dict(block), **{f"perHour{s}": per_hour for s in scenarios}}
    if items and all(i["price"]["usdPerUnitHour"] is not None for i in items):
        out.update({f"totalPerHour{s}": round(sum(i[f"perHour{s}"] for i in items), 4) for s in scenarios})
    return out


def rate_warning(block: Mapping[str, Any]) -> Optional[str]:
    """The warning for a block whose rate the stack does not give."""
    if block["rateFrom"] == RATE_KEY:
        return None
    return f"Capacity Block rate not given ({block['rateFrom']}): set {RATE_KEY} to the rate its offering quoted"


def render(block: Optional[Mapping[str, Any]]) -> list[str]:
    """The block's line in place of a 30-minute run's."""
    if block is None:
        return []
    if block["totalUsd"] is None:
        return [f"  the Capacity Block: {PAID}; its whole price is not known offline ({'; '.join(block['unknown'])})"]
    rate = block["usdPerInstanceHour"]
    return [
        f"  the Capacity Block: ${block['totalUsd']:,.2f}, {PAID} ({block['instances']} instances x {block['hours']:g} h x "
        f"${rate:,.2f} per instance-hour: {block['rateFrom']}); not included: {block['notIncluded']}"
    ]
