"""The data a run's start sends through the NAT gateway, and what the S3 gateway endpoint saves:
every node pulls the training image, and the staged inputs are downloaded on every node (once, on
the shared filesystem). The NAT gateway charges per GB it processes (pricing.nat_gateway_per_gb);
the gateway endpoint a new VPC has (network.py) is free and carries S3's traffic: ECR's image layers
(ECR keeps them in S3) and inputs staged from s3://. Hugging Face downloads and images from other
registries cross the NAT gateway either way.

Sizes: the image's is the project's typical figure (offline/first_step.TYPICAL_IMAGE_GB, an
estimate), a staged model's the estimate of rlinf_eks.model_size; an input whose size is not known
offline is named as not counted.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ... import pricing
from ...config import StackSettings
from .first_step import TYPICAL_IMAGE_GB

GB_PER_GIB = 2**30 / 1e9
_ECR = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")


def nat_data_at_start(settings: StackSettings) -> Optional[dict[str, Any]]:
    """GB through the NAT gateway at a run's start without and with the S3 gateway endpoint, and
    their price; None for a stack that runs nothing (a platform)."""
    if not settings.workload.enabled:
        return None
    from ...model_size import staged_model
    from ...trainers import chosen_inputs

    nodes = settings.gpu_nodes.node_count
    low, high = TYPICAL_IMAGE_GB
    image_via_s3 = bool(_ECR.match(settings.workload.image))
    parts = [{"what": "image", "gb": [low * nodes, high * nodes], "viaS3": image_via_s3,
              "why": f"{nodes} node{'s' if nodes != 1 else ''} x the {low:g}-{high:g} GB image (estimate)"
                     + (", its layers from S3 (ECR)" if image_via_s3 else ", not in ECR")}]  # fmt: skip
    sized = staged_model(settings)
    not_counted = []
    copies = 1 if settings.shared_filesystem else nodes
    for item in chosen_inputs(settings):
        if item.source is None:
            continue
        if sized is not None and item.name == sized[0].name:
            gb = round(sized[1].gib * GB_PER_GIB * copies, 1)
            where = ("once, on the shared filesystem" if settings.shared_filesystem
                     else "on the node" if nodes == 1 else f"on each of {nodes} nodes")  # fmt: skip
            parts.append({"what": item.name, "gb": [gb, gb], "viaS3": item.source.kind == "s3",
                          "why": f"{item.value}, about {sized[1].gib * GB_PER_GIB:.0f} GB {where}"})  # fmt: skip
        else:
            not_counted.append(f"{item.name} {item.value} (size unknown offline)")
    rate = pricing.nat_gateway_per_gb(settings.region)

    def scenario(endpoint: bool) -> dict[str, Any]:
        crossing = [p for p in parts if not (endpoint and p["viaS3"])]
        gb = [round(sum(p["gb"][i] for p in crossing), 1) for i in (0, 1)]
        usd = [round(g * rate.usd_per_unit_hour, 2) for g in gb] if rate.usd_per_unit_hour is not None else None
        return {"gb": gb, "usd": usd}

    return {
        "parts": parts,
        "notCounted": not_counted,
        "usdPerGb": rate.usd_per_unit_hour,
        "price": rate.to_json(),
        "withoutEndpoint": scenario(False),
        "withEndpoint": scenario(True),
        "stackHasEndpoint": settings.network.create,
    }


def _range(values: list[float], unit: str) -> str:
    low, high = values
    if unit == "$":
        return f"${low:,.2f}" if low == high else f"${low:,.2f}-${high:,.2f}"
    return f"{low:g} GB" if low == high else f"{low:g}-{high:g} GB"


def render(data: Optional[dict[str, Any]]) -> list[str]:
    """One line for the cost section (two with what is not counted)."""
    if data is None:
        return []
    without, with_ = data["withoutEndpoint"], data["withEndpoint"]

    def priced(scenario: dict[str, Any]) -> str:
        return _range(scenario["gb"], "GB") + (f" ({_range(scenario['usd'], '$')})" if scenario["usd"] is not None else "")

    has = "this stack's new VPC has it" if data["stackHasEndpoint"] else "an existing VPC: add it to its private route tables"
    rate = f"at ${data['usdPerGb']:.3f}/GB" if data["usdPerGb"] is not None else data["price"]["reason"]
    lines = [
        f"  NAT data at a run's start: {priced(without)} without the S3 gateway endpoint, {priced(with_)} with it ({has}; "
        f"{rate}): {'; '.join(p['why'] for p in data['parts'])}"
    ]
    if data["notCounted"]:
        lines.append(f"    not counted: {', '.join(data['notCounted'])}")
    return lines
