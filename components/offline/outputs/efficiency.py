"""The efficiency report of an offline plan: what the GPU nodes cost and how much of them the
training pods use, read from the registered resources (not re-derived from settings), so it shows
what will actually be deployed.

Inputs, all plan.json-shaped dicts (``type``, ``name``, ``id``, ``parent``, ``inputs`` by wire name):

- the GPU node groups (``aws:eks/nodeGroup:NodeGroup``, ``eks:index:ManagedNodeGroup``): ``scalingConfig``, ``subnetIds``,
  ``capacityType``, ``launchTemplate.id``;
- its launch template (``aws:ec2/launchTemplate:LaunchTemplate``): ``instanceType``,
  ``networkInterfaces`` (EFA attached), ``placement.groupName``;
- subnets (``aws:ec2/subnet:Subnet``) for the AZ; placement groups for the strategy;
- the training pods in the rendered Job / RayCluster / RayJob manifests: pods that request
  ``nvidia.com/gpu``, times their replicas.

All of it is read through :mod:`rlinf_eks.plan_reader`, as the policies read it.
Capacity comes from the catalog (``catalog.allocatable``), prices from ``pricing``.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Protocol

from ... import catalog, pricing
from ...karpenter_reader import karpenter_pools
from .efficiency_render import render_efficiency  # noqa: F401 (the report's text, re-exported)
from .capacity_block import apply_to_cost, capacity_block_cost, rate_warning
from .image_cost import image_build_cost
from .nat_data import nat_data_at_start
from ...plan_reader import (
    EFA,
    EIP,
    EKS_CLUSTERS,
    GPU,
    HUGEPAGES_2MI,
    KMS_KEY,
    LUSTRE,
    NAT_GATEWAY,
    NODE_GROUP_TYPES,
    PLACEMENT_GROUP,
    SUBNET,
    VPC_ENDPOINT,
    NodeGroup,
    by_id,
    inputs_of,
    k8s_objects,
    node_groups,
    of_type,
    pod_requests,
    pod_templates,
    quantity,
)

if TYPE_CHECKING:
    from ...config import StackSettings

__all__ = ["efficiency_of", "efficiency_report", "render_efficiency", "dumps", "pod_requests", "quantity", "training_pods",
           "gpu_node_groups", "stack_cost_of", "unknown_summary", "NODE_GROUP_TYPES", "EKS_CLUSTERS"]

MIB = 1024 * 1024
# The kinds whose GPU pods are the training run; a Deployment or DaemonSet that requests GPUs is
# another tenant of the nodes, not counted as training.
TRAINING_KINDS = ("Job", "JobSet", "RayCluster", "RayJob")


# --- pod facts ----------------------------------------------------------------------------------


def _is_preflight(resource: Mapping[str, Any]) -> bool:
    # The preflight runs before training on the same nodes, not beside it: it is not a tenant.
    meta = inputs_of(resource).get("metadata") or {}
    labels = meta.get("labels") or {}
    return "preflight" in str(resource.get("name", "")) or "preflight" in str(meta.get("name", "")) or labels.get(
        "app.kubernetes.io/component"
    ) == "preflight"


def training_pods(resources: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The pods that request GPUs in the plan's Job/RayCluster/RayJob manifests, with their total
    requests (GPU, EFA, millicpu, memory MiB, hugepages MiB)."""
    pods = 0
    totals = {"gpus": 0.0, "efa": 0.0, "millicpu": 0.0, "memoryMiB": 0.0, "hugepages2MiMiB": 0.0}
    max_hugepages = 0.0
    sources: list[str] = []
    for resource, obj in k8s_objects(resources):
        if obj["kind"] not in TRAINING_KINDS or _is_preflight(resource):
            continue
        for template in pod_templates(obj):
            count = template.replicas or 0
            requests = pod_requests(template.spec)
            if requests.get(GPU, 0) <= 0 or count <= 0:
                continue
            pods += count
            totals["gpus"] += count * requests.get(GPU, 0)
            totals["efa"] += count * requests.get(EFA, 0)
            totals["millicpu"] += count * requests.get("cpu", 0) * 1000
            totals["memoryMiB"] += count * requests.get("memory", 0) / MIB
            totals["hugepages2MiMiB"] += count * requests.get(HUGEPAGES_2MI, 0) / MIB
            max_hugepages = max(max_hugepages, requests.get(HUGEPAGES_2MI, 0) / MIB)
            sources.append(f"{obj['kind']}/{resource.get('name')}:{template.role} x{count}")
    return {"pods": pods, **{k: round(v, 3) for k, v in totals.items()}, "maxHugepages2MiMiB": max_hugepages, "sources": sources}


# --- the GPU node group -------------------------------------------------------------------------


def gpu_node_groups(resources: list[Mapping[str, Any]], gpu_instance_type: Optional[str] = None) -> list[NodeGroup]:
    """Node groups whose instance type is ``gpu_instance_type`` (or any catalog GPU type), each
    with its launch template; Karpenter's NodePools among them (0 nodes at rest, with their
    EC2NodeClass as the template: karpenter_reader)."""
    wanted = (lambda t: t == gpu_instance_type) if gpu_instance_type else (lambda t: t in catalog.CATALOG)
    return [group for group in [*node_groups(resources), *karpenter_pools(resources)] if wanted(group.instance_type)]


def _fraction(part: float, whole: float) -> Optional[float]:
    return round(part / whole, 4) if whole > 0 else None


# --- what the whole stack bills -----------------------------------------------------------------

# A managed node group without a launch template gets a 20 GiB gp2/gp3 root volume (EKS API
# reference, CreateNodegroup diskSize: "defaults to 20 GiB").
DEFAULT_NODE_DISK_GIB = 20
_SCENARIOS = ("whileTraining", "idle", "atMax")


def _scenario_key(prefix: str, scenario: str) -> str:
    return f"{prefix}{scenario[0].upper()}{scenario[1:]}"


def _item(item: str, names: list[str], unit: str, price: pricing.ServicePrice, quantities: Mapping[str, float]) -> dict[str, Any]:
    """One cost line: ``quantities`` of ``unit`` per scenario, each at ``price`` (a ServicePrice)."""
    per_unit = price.usd_per_unit_hour

    def hourly(quantity: float) -> Optional[float]:
        return round(quantity * per_unit, 4) if per_unit is not None else None

    return {
        "item": item,
        "resources": names,
        "unit": unit,
        "quantity": {k: quantities[k] for k in _SCENARIOS},
        "price": price.to_json(),
        **{_scenario_key("perHour", k): hourly(quantities[k]) for k in _SCENARIOS},
    }


def _constant(count: float) -> dict[str, float]:
    return {k: count for k in _SCENARIOS}


def _gpu_node_items(region: str, gpu_groups: list[NodeGroup], gpu_price: pricing.ServicePrice, gpu_nodes: Mapping[str, int]) -> list[dict[str, Any]]:
    names = [g.name for g in gpu_groups]
    items = [_item("gpuNodes", names, "instance-hour", gpu_price, dict(gpu_nodes))]
    gpu_gib = max((g.template.volume_gib if g.template else 0.0 for g in gpu_groups), default=0.0)
    if gpu_gib:
        items.append(_item("gpuNodeVolumes", names, "GB-hour (gp3)", pricing.gp3_per_gb(region),
                           {k: v * gpu_gib for k, v in gpu_nodes.items()}))
    return items


def _system_node_items(resources: list[Mapping[str, Any]], region: str, gpu_groups: list[NodeGroup]) -> list[dict[str, Any]]:
    gpu_urns = {g.resource.get("urn") for g in gpu_groups}
    items = []
    for group in node_groups(resources):
        if group.resource.get("urn") in gpu_urns:
            continue
        instance_type = group.instance_type or "?"
        count = group.desired_size
        items.append(_item("systemNodes", [group.name], f"{instance_type} instance-hour",
                           pricing.instance_hour(instance_type, region), _constant(count)))
        gib = (group.template.volume_gib if group.template else 0.0) or float(group.inputs.get("diskSize") or DEFAULT_NODE_DISK_GIB)
        items.append(_item("systemNodeVolumes", [group.name], "GB-hour (gp3)", pricing.gp3_per_gb(region), _constant(count * gib)))
    return items


def _shared_items(resources: list[Mapping[str, Any]], region: str) -> list[dict[str, Any]]:
    """NAT gateways, public IPv4 addresses, FSx for Lustre, interface endpoints, KMS keys."""
    items = []
    for item, type_, unit, price in (("natGateways", NAT_GATEWAY, "gateway-hour", pricing.nat_gateway),
                                     ("publicIpv4", EIP, "address-hour", pricing.public_ipv4)):
        found = of_type(resources, type_)
        if found:
            items.append(_item(item, [r.get("name", "?") for r in found], unit, price(region), _constant(len(found))))
    for fs in of_type(resources, LUSTRE):
        inputs = inputs_of(fs)
        price = pricing.fsx_lustre_per_gb(region, str(inputs.get("deploymentType")), str(inputs.get("storageType") or "SSD"),
                                          int(inputs.get("perUnitStorageThroughput") or 0))
        items.append(_item("sharedFilesystem", [fs.get("name", "?")], "GB-hour", price, _constant(float(inputs.get("storageCapacity") or 0))))
    # interface endpoints are billed per endpoint in each AZ, that is per subnet (a gateway endpoint is free)
    interface = [r for r in of_type(resources, VPC_ENDPOINT) if inputs_of(r).get("vpcEndpointType") == "Interface"]
    if interface:
        count = sum(len(inputs_of(r).get("subnetIds") or ()) for r in interface)
        items.append(_item("interfaceEndpoints", [r.get("name", "?") for r in interface], "endpoint-AZ-hour",
                           pricing.interface_endpoint(region), _constant(count)))
    keys = of_type(resources, KMS_KEY)
    if keys:
        items.append(_item("kmsKeys", [r.get("name", "?") for r in keys], "key-hour", pricing.kms_key(region), _constant(len(keys))))
    return items


def stack_cost_of(
    resources: list[Mapping[str, Any]],
    *,
    region: str,
    gpu_groups: list[NodeGroup],
    gpu_price: pricing.ServicePrice,
    gpu_nodes: Mapping[str, int],
    on_date: str,
) -> dict[str, Any]:
    """Every hourly charge of the registered resources, one item per kind, and the totals.

    One rule for what has no price: the item's ``perHour*`` are null and ``price.reason`` says
    why in one short line; a total is null when any item is, ``totalUnknownReason`` joins those
    items' reasons and ``totalUnknownSummary`` names them in a phrase short enough for the
    terminal (:func:`unknown_summary`)."""
    items = _gpu_node_items(region, gpu_groups, gpu_price, gpu_nodes)
    clusters = of_type(resources, *EKS_CLUSTERS)
    for cluster in clusters:
        version = str(inputs_of(cluster).get("version") or "")
        items.append(_item("controlPlane", [cluster.get("name", "?")], "cluster-hour",
                           pricing.eks_control_plane(version, on_date), _constant(1)))
    items += _system_node_items(resources, region, gpu_groups)
    items += _shared_items(resources, region)

    notes = []
    if not clusters:
        notes.append("existing cluster: its control plane and system nodes are billed with it, not by this stack")
    unknown = [i for i in items if i["price"]["usdPerUnitHour"] is None]
    totals = {
        _scenario_key("totalPerHour", k): None if unknown else round(sum(i[_scenario_key("perHour", k)] for i in items), 4)
        for k in _SCENARIOS
    }
    return {
        "items": items,
        **totals,
        "totalUnknownReason": "; ".join(f"{i['item']}: {i['price']['reason']}" for i in unknown) or None,
        "totalUnknownSummary": unknown_summary([i["item"] for i in unknown]),
        "supportTierDate": on_date,
        "notes": notes,
        "usageBased": list(pricing.USAGE_BASED),
        # images.build: build-minutes and image storage, billed by use (offline/outputs/image_cost.py)
        **({"imageBuild": images} if (images := image_build_cost(resources, region)) else {}),
    }


SUMMARY_WIDTH = 80


def unknown_summary(items: list[str]) -> Optional[str]:
    """The items without a price in one short phrase (at most ``SUMMARY_WIDTH`` characters):
    ``no price for gpuNodes, natGateways``; past the width the rest are counted. The reasons are
    in each item's ``price.reason`` and, joined, in ``totalUnknownReason``."""
    if not items:
        return None
    shown: list[str] = []
    for index, name in enumerate(items):
        rest = len(items) - index - 1
        candidate = ", ".join([*shown, name]) + (f" and {rest} more" if rest else "")
        if shown and len("no price for " + candidate) > SUMMARY_WIDTH:
            break
        shown.append(name)
    hidden = len(items) - len(shown)
    return "no price for " + ", ".join(shown) + (f" and {hidden} more" if hidden else "")


# --- node facts, placement, GPU cost ------------------------------------------------------------


def _node_facts(groups: list[NodeGroup], instance: catalog.InstanceType, requested_gpus: float) -> dict[str, Any]:
    """Sizes summed over the GPU node groups, and the nodes up while training."""
    min_size = sum(g.min_size for g in groups)
    desired = sum(g.desired_size for g in groups)
    max_size = sum(g.max_size for g in groups)
    # Nodes while training: the group's desired size; a group that idles at zero is brought up by
    # the cluster autoscaler (or Karpenter) for the pending training pods, at most maxSize nodes.
    if desired > 0:
        training_nodes, basis = desired, "scalingConfig.desiredSize"
    else:
        needed = math.ceil(requested_gpus / instance.gpus) if instance.gpus else 0
        training_nodes, basis = min(max_size, needed), "scale-from-zero: nodes the pending training pods bring up (<= maxSize)"
    return {"min": min_size, "desired": desired, "max": max_size, "whileTraining": training_nodes, "basis": basis}


def _node_warnings(groups: list[NodeGroup], instance: catalog.InstanceType) -> list[str]:
    warnings = [f"node group {g.name}: its launch template is not in the plan" for g in groups if g.template is None and g.template_ref]
    if not groups:
        warnings.append(f"no node group of {instance.name} in the plan")
    attached = [len(g.efa_interfaces) for g in groups]
    if len(set(attached)) > 1:
        warnings.append(f"GPU node groups attach different EFA counts: {attached}")
    return warnings


def _efa_per_node(groups: list[NodeGroup]) -> int:
    return min((len(g.efa_interfaces) for g in groups), default=0)


def _zones(resources: list[Mapping[str, Any]], subnet_ids: list[Any], known_az: Optional[str]) -> list[Optional[str]]:
    """The AZ of each subnet: a registered subnet's, else ``known_az`` (a subnet given by id)."""
    subnets = by_id(resources, SUBNET)
    return [inputs_of(subnets[s]).get("availabilityZone") if s in subnets else known_az for s in subnet_ids]


def _strategies(resources: list[Mapping[str, Any]], names: list[str]) -> list[str]:
    """The strategy of each named placement group, ``existing`` for one the plan does not create."""
    # A placement group's id is its name (EC2), which the launch template refers to.
    registered: dict[str, Mapping[str, Any]] = {}
    for r in of_type(resources, PLACEMENT_GROUP):
        registered.update((key, r) for key in (r.get("id"), inputs_of(r).get("name")) if key)
    return sorted({str(inputs_of(registered.get(name)).get("strategy") or "existing") for name in names})


def _placement(resources: list[Mapping[str, Any]], groups: list[NodeGroup], known_az: Optional[str]) -> dict[str, Any]:
    """Where the GPU nodes land: their subnets' AZs and their launch templates' placement groups."""
    subnet_ids = list(dict.fromkeys(s for g in groups for s in g.subnet_ids))
    azs = _zones(resources, subnet_ids, known_az)
    distinct_azs = sorted({az for az in azs if az})
    pg_names = [g.template.placement_group if g.template else None for g in groups]
    distinct_pgs = sorted({pg for pg in pg_names if pg})
    return {
        "subnets": subnet_ids,
        "availabilityZones": distinct_azs,
        "oneAvailabilityZone": bool(azs) and None not in azs and len(distinct_azs) == 1,
        "placementGroups": distinct_pgs,
        "placementGroupStrategies": _strategies(resources, distinct_pgs),
        "onePlacementGroup": bool(pg_names) and None not in pg_names and len(distinct_pgs) == 1,
    }


def _gpu_cost(instance: catalog.InstanceType, region: str, nodes: Mapping[str, Any], capacity_types: list[str]) -> dict[str, Any]:
    """The GPU nodes' on-demand cost (the report's first cost keys)."""
    price = pricing.on_demand_price(instance.name, region)
    per_node = price.usd_per_hour

    def cost(count: int) -> Optional[float]:
        return round(count * per_node, 4) if per_node is not None else None

    return {
        "currency": "USD",
        "capacityTypes": capacity_types,
        "onDemandPerNodeHour": per_node,
        "price": price.to_json(),
        "perHourWhileTraining": cost(nodes["whileTraining"]),
        "perHourIdle": cost(nodes["min"]),
        "perHourAtMax": cost(nodes["max"]),
    }


def _cost_warnings(stack_cost: Mapping[str, Any], capacity_types: list[str]) -> list[str]:
    warnings = []
    for item in stack_cost["items"]:
        if item["item"] == "controlPlane" and (item["price"]["detail"] or "").startswith("extended support"):
            warnings.append(f"control plane at ${item['perHourIdle']:.2f}/h instead of ${pricing.EKS_STANDARD_PER_HOUR:.2f}/h, "
                            f"{item['price']['detail']}: raise cluster.kubernetesVersion to pay the standard rate")
    non_on_demand = [c for c in capacity_types if c != "ON_DEMAND"]
    if non_on_demand:
        warnings.append(f"capacity type {', '.join(non_on_demand)}: billed otherwise; the on-demand price is a reference")
    return warnings


def _share(requested: float, per_node: float, nodes: int) -> tuple[float, float, Optional[float]]:
    return requested, nodes * per_node, _fraction(requested, nodes * per_node)


# --- the report ---------------------------------------------------------------------------------


def efficiency_of(
    resources: list[Mapping[str, Any]],
    *,
    instance: catalog.InstanceType,
    region: str,
    known_az: Optional[str] = None,
    on_date: Optional[str] = None,
) -> dict[str, Any]:
    """The efficiency report of registered ``resources`` (plan.json dicts) whose GPU nodes are of
    ``instance``. ``known_az`` is the AZ of a subnet given by id (existing VPC), which the plan
    does not register. ``on_date`` (ISO date, default today) decides the EKS support tier. JSON-ready."""
    groups = gpu_node_groups(resources, instance.name)
    pods = training_pods(resources)
    nodes = _node_facts(groups, instance, pods["gpus"])
    training_nodes = nodes["whileTraining"]
    hugepages = int(pods["maxHugepages2MiMiB"])
    alloc_millicpu, alloc_memory_mib = catalog.allocatable(instance, hugepages)
    efa_per_node = _efa_per_node(groups)
    capacity_types = sorted({g.capacity_type for g in groups})
    stack_cost = stack_cost_of(
        resources,
        region=region,
        gpu_groups=groups,
        gpu_price=pricing.instance_hour(instance.name, region),
        gpu_nodes={"whileTraining": training_nodes, "idle": nodes["min"], "atMax": nodes["max"]},
        on_date=on_date or datetime.date.today().isoformat(),
    )
    gpus = _share(pods["gpus"], instance.gpus, training_nodes)
    efa = _share(pods["efa"], efa_per_node, training_nodes)
    cpu = _share(pods["millicpu"], alloc_millicpu, training_nodes)
    memory = _share(pods["memoryMiB"], alloc_memory_mib, training_nodes)
    return {
        "instanceType": instance.name,
        "region": region,
        "nodeGroups": [g.name for g in groups],
        "nodes": nodes,
        "trainingPods": {"count": pods["pods"], "sources": pods["sources"]},
        "gpus": {"requested": gpus[0], "onNodes": gpus[1], "fraction": gpus[2]},
        "efaInterfaces": {"requested": efa[0], "attached": efa[1], "perNode": efa_per_node, "fraction": efa[2]},
        "cpu": {"requestedMillicpu": cpu[0], "allocatableMillicpu": cpu[1], "fraction": cpu[2]},
        "memory": {"requestedMiB": memory[0], "allocatableMiB": memory[1], "hugepages2MiMiBPerNode": hugepages, "fraction": memory[2]},
        "placement": _placement(resources, groups, known_az),
        # the first keys are the GPU nodes'; stack_cost's are what the whole stack bills
        "cost": {**_gpu_cost(instance, region, nodes, capacity_types), **stack_cost},
        "warnings": _node_warnings(groups, instance) + _cost_warnings(stack_cost, capacity_types),
    }


class PlanLike(Protocol):
    """What the report reads of an offline plan (``offline.plan.Plan``, which imports this module)."""

    project: str
    stack: str
    resources: list[dict[str, Any]]


def efficiency_report(plan: PlanLike, settings: StackSettings, on_date: Optional[str] = None) -> dict[str, Any]:
    """The efficiency report of an offline ``plan`` (``offline.plan.Plan``) of a stack with
    ``settings`` (``StackSettings``): the instance figures (with stack overrides), region and, for
    a subnet given by id, its AZ come from the settings; everything else from the plan."""
    known_az = settings.gpu_az if not settings.network.create else None
    report = efficiency_of(
        plan.resources, instance=settings.gpu_nodes.instance, region=settings.region, known_az=known_az, on_date=on_date
    )
    nat = nat_data_at_start(settings)
    if nat is not None:
        report["cost"]["natDataAtStart"] = nat
    block = capacity_block_cost(settings)
    if block is not None:
        # paid in full whether the nodes run or not: billed in every scenario, the warning says what stands in
        report["cost"] = apply_to_cost(report["cost"], block)
        report["warnings"] = [w for w in report["warnings"] if not w.startswith("capacity type ")]
        report["warnings"] += [w for w in (rate_warning(block),) if w]
    return {"project": plan.project, "stack": plan.stack, **report}


# --- text ---------------------------------------------------------------------------------------


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"
