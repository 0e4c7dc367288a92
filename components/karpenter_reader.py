"""Karpenter's GPU nodes as the plan holds them (``gpuNodes.provisioner: karpenter``), read the way
:mod:`.plan_reader` reads a managed node group, so that the efficiency report and the cost read
either: a ``NodePool`` is a node group of 0 nodes at rest (Karpenter launches them for pending
pods) and at most ``limits[nvidia.com/gpu]`` / GPUs per node; its ``EC2NodeClass`` is its launch
template (EFA devices = the ``efa-only`` interfaces, placement group, reservation, volumes).

Plain data only (no Pulumi, no config), as plan_reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from . import catalog
from .plan_reader import LaunchTemplate, NodeGroup, Resource, get, inputs_of, k8s_objects
from .scheduling import GPU_RESOURCE, INSTANCE_TYPE_LABEL

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"


def _spec(resource: Resource) -> Mapping[str, Any]:
    return inputs_of(resource).get("spec") or {}


@dataclass(frozen=True)
class NodeClassTemplate(LaunchTemplate):
    """An EC2NodeClass seen as the launch template of Karpenter's nodes."""

    @property
    def instance_type(self) -> Optional[str]:
        return None  # the NodePool's requirements choose it

    @property
    def efa_interfaces(self) -> list[Mapping[str, Any]]:
        """The EFA devices of every node: its ``efa-only`` interfaces (Karpenter's own count)."""
        return [i for i in _spec(self.resource).get("networkInterfaces") or [] if i.get("interfaceType") == "efa-only"]

    @property
    def placement_group(self) -> Optional[str]:
        return get(_spec(self.resource), "placementGroupSelector", "name")

    @property
    def capacity_reservation_id(self) -> Optional[str]:
        terms = _spec(self.resource).get("capacityReservationSelectorTerms") or []
        return terms[0].get("id") if terms else None

    @property
    def volume_gib(self) -> float:
        total = 0.0
        for mapping in _spec(self.resource).get("blockDeviceMappings") or []:
            size = str((mapping.get("ebs") or {}).get("volumeSize") or "0")
            match = re.fullmatch(r"(\d+)(Gi|G|Ti|T)?", size)
            if match:
                total += int(match.group(1)) * (1024 if match.group(2) in ("Ti", "T") else 1)
        return total


@dataclass(frozen=True)
class KarpenterPool(NodeGroup):
    """A NodePool seen as a node group: no node at rest, at most its GPU limit's worth."""

    @property
    def template_ref(self) -> list[Any]:
        ref = get(_spec(self.resource), "template", "spec", "nodeClassRef", "name")
        return [ref] if ref else []

    def _requirement(self, key: str) -> list[str]:
        for requirement in get(_spec(self.resource), "template", "spec", "requirements") or []:
            if requirement.get("key") == key and requirement.get("operator") == "In":
                return list(requirement.get("values") or [])
        return []

    @property
    def instance_types(self) -> list[str]:
        return self._requirement(INSTANCE_TYPE_LABEL)

    @property
    def instance_type(self) -> Optional[str]:
        types = self.instance_types
        return types[0] if types else None

    @property
    def min_size(self) -> int:
        return 0

    @property
    def desired_size(self) -> int:
        return 0

    @property
    def max_size(self) -> int:
        limit = get(_spec(self.resource), "limits", GPU_RESOURCE)
        name = self.instance_type
        if limit is None or name not in catalog.CATALOG:
            return 0
        return int(str(limit)) // catalog.CATALOG[name].gpus

    @property
    def subnet_ids(self) -> list[Any]:
        spec = _spec(self.template.resource) if self.template else {}
        return [term["id"] for term in spec.get("subnetSelectorTerms") or [] if "id" in term]

    @property
    def capacity_type(self) -> str:
        """The managed group's spelling: RESERVED (a reservation only: a Capacity Block), SPOT,
        else ON_DEMAND (an On-Demand Capacity Reservation is billed as on demand)."""
        types = self._requirement(CAPACITY_TYPE_LABEL)
        if types == ["reserved"]:
            return "RESERVED"
        if "spot" in types and "on-demand" not in types:
            return "SPOT"
        return "ON_DEMAND"


def karpenter_pools(resources: Sequence[Resource]) -> list[KarpenterPool]:
    """Every NodePool of the plan, each with its EC2NodeClass (by name) when the plan holds it."""
    classes = {obj.get("metadata", {}).get("name"): r for r, obj in k8s_objects(resources) if r.get("type") == NODE_CLASS}
    pools = []
    for resource, obj in k8s_objects(resources):
        if resource.get("type") != NODE_POOL:
            continue
        ref = get(obj, "spec", "template", "spec", "nodeClassRef", "name")
        template = NodeClassTemplate(classes[ref]) if ref in classes else None
        pools.append(KarpenterPool(resource, template))
    return pools
