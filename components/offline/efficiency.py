"""The efficiency report of an offline plan: what the GPU nodes cost and how much of them the
training pods use, read from the registered resources (not re-derived from settings), so it shows
what will actually be deployed.

Inputs, all plan.json-shaped dicts (``type``, ``name``, ``id``, ``parent``, ``inputs`` by wire name):

- the GPU node group (``aws:eks/nodeGroup:NodeGroup``): ``scalingConfig``, ``subnetIds``,
  ``capacityType``, ``launchTemplate.id``;
- its launch template (``aws:ec2/launchTemplate:LaunchTemplate``): ``instanceType``,
  ``networkInterfaces`` (EFA attached), ``placement.groupName``;
- subnets (``aws:ec2/subnet:Subnet``) for the AZ; placement groups for the strategy;
- the training pods in the rendered Job / RayCluster / RayJob manifests: pods that request
  ``nvidia.com/gpu``, times their replicas.

Capacity comes from the catalog (``catalog.allocatable``), prices from ``pricing``.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any, Iterable, Mapping, Optional

from .. import catalog, pricing

NODE_GROUP_TYPES = ("aws:eks/nodeGroup:NodeGroup", "eks:index:ManagedNodeGroup")
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
JOB = "kubernetes:batch/v1:Job"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAY_JOB = "kubernetes:ray.io/v1:RayJob"

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
HUGEPAGES_2MI = "hugepages-2Mi"
EFA_INTERFACE_TYPES = ("efa", "efa-only")

MIB = 1024 * 1024
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


# --- Kubernetes quantities and pod requests -----------------------------------------------------


def quantity(value: Any) -> float:
    """A Kubernetes resource quantity (``"190"``, ``"500m"``, ``"1900Gi"``, 8) as a plain number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _container_requests(container: Mapping[str, Any]) -> dict[str, float]:
    # A request left out defaults to the limit (Kubernetes API defaulting); extended resources
    # (GPU, EFA, hugepages) are often given as limits only, as KubeRay reads GPUs from limits.
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {key: quantity(value) for key, value in merged.items()}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, float]:
    """What the scheduler reserves for one pod: per resource, the larger of the sum over its
    containers and the largest init container (init containers run one at a time, before)."""
    total: dict[str, float] = {}
    for container in pod_spec.get("containers") or []:
        for key, value in _container_requests(container).items():
            total[key] = total.get(key, 0.0) + value
    for container in pod_spec.get("initContainers") or []:
        for key, value in _container_requests(container).items():
            total[key] = max(total.get(key, 0.0), value)
    return total


def _replicas(group: Mapping[str, Any]) -> int:
    # With autoscaling off KubeRay keeps `replicas`, bounded by min/maxReplicas.
    replicas = group.get("replicas", group.get("minReplicas", 1))
    return int(replicas if replicas is not None else 1)


def _ray_cluster_pods(spec: Mapping[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    pods = [("head", 1, ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {})]
    for group in spec.get("workerGroupSpecs") or []:
        pods.append((group.get("groupName", "worker"), _replicas(group), (group.get("template") or {}).get("spec") or {}))
    return pods


def workload_pods(obj: Mapping[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(role, pod count, pod spec) of a Job, RayCluster or RayJob manifest."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Job":
        count = spec.get("parallelism", spec.get("completions", 1))
        return [("job", int(count if count is not None else 1), (spec.get("template") or {}).get("spec") or {})]
    if kind == "RayCluster":
        return _ray_cluster_pods(spec)
    if kind == "RayJob" and spec.get("rayClusterSpec"):
        # A RayJob with clusterSelector submits to an existing RayCluster, counted on its own.
        return _ray_cluster_pods(spec["rayClusterSpec"])
    return []


def _is_preflight(resource: Mapping[str, Any]) -> bool:
    # The preflight runs before training on the same nodes, not beside it: it is not a tenant.
    meta = (resource.get("inputs") or {}).get("metadata") or {}
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
    for resource in resources:
        if resource.get("type") not in (JOB, RAY_CLUSTER, RAY_JOB) or _is_preflight(resource):
            continue
        for role, count, spec in workload_pods(resource.get("inputs") or {}):
            requests = pod_requests(spec)
            if requests.get(GPU, 0) <= 0 or count <= 0:
                continue
            pods += count
            totals["gpus"] += count * requests.get(GPU, 0)
            totals["efa"] += count * requests.get(EFA, 0)
            totals["millicpu"] += count * requests.get("cpu", 0) * 1000
            totals["memoryMiB"] += count * requests.get("memory", 0) / MIB
            totals["hugepages2MiMiB"] += count * requests.get(HUGEPAGES_2MI, 0) / MIB
            max_hugepages = max(max_hugepages, requests.get(HUGEPAGES_2MI, 0) / MIB)
            sources.append(f"{(resource.get('inputs') or {}).get('kind')}/{resource.get('name')}:{role} x{count}")
    return {"pods": pods, **{k: round(v, 3) for k, v in totals.items()}, "maxHugepages2MiMiB": max_hugepages, "sources": sources}


# --- the GPU node group -------------------------------------------------------------------------


def _by_id(resources: Iterable[Mapping[str, Any]], type_: str) -> dict[str, Mapping[str, Any]]:
    return {r["id"]: r for r in resources if r.get("type") == type_ and r.get("id")}


def _instance_type_of(group: Mapping[str, Any], template: Optional[Mapping[str, Any]]) -> Optional[str]:
    types = (group.get("inputs") or {}).get("instanceTypes") or []
    if types:
        return types[0]
    return ((template or {}).get("inputs") or {}).get("instanceType")


def gpu_node_groups(
    resources: list[Mapping[str, Any]], gpu_instance_type: Optional[str] = None
) -> list[dict[str, Any]]:
    """Node groups whose instance type is ``gpu_instance_type`` (or any catalog GPU type), each
    with its launch template, as ``{"group", "template", "instanceType"}``."""
    templates = _by_id(resources, LAUNCH_TEMPLATE)
    found = []
    for group in resources:
        if group.get("type") not in NODE_GROUP_TYPES:
            continue
        template_id = ((group.get("inputs") or {}).get("launchTemplate") or {}).get("id")
        template = templates.get(template_id) if template_id else None
        instance_type = _instance_type_of(group, template)
        wanted = instance_type == gpu_instance_type if gpu_instance_type else instance_type in catalog.CATALOG
        if wanted:
            found.append({"group": group, "template": template, "instanceType": instance_type})
    return found


def attached_efa_interfaces(template: Optional[Mapping[str, Any]]) -> int:
    """EFA interfaces (``efa`` and ``efa-only``) the launch template attaches to every node."""
    interfaces = ((template or {}).get("inputs") or {}).get("networkInterfaces") or []
    return sum(1 for nic in interfaces if nic.get("interfaceType") in EFA_INTERFACE_TYPES)


def _placement_group_name(template: Optional[Mapping[str, Any]]) -> Optional[str]:
    return (((template or {}).get("inputs") or {}).get("placement") or {}).get("groupName")


def _fraction(part: float, whole: float) -> Optional[float]:
    return round(part / whole, 4) if whole > 0 else None


# --- what the whole stack bills -----------------------------------------------------------------

EKS_CLUSTERS = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
EIP = "aws:ec2/eip:Eip"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
KMS_KEY = "aws:kms/key:Key"
# A managed node group without a launch template gets a 20 GiB gp2/gp3 root volume (EKS API
# reference, CreateNodegroup diskSize: "defaults to 20 GiB").
DEFAULT_NODE_DISK_GIB = 20
_SCENARIOS = ("whileTraining", "idle", "atMax")


def _item(item: str, names: list[str], unit: str, price: Any, quantities: Mapping[str, float]) -> dict[str, Any]:
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
        **{f"perHour{k[0].upper()}{k[1:]}": hourly(quantities[k]) for k in _SCENARIOS},
    }


def _constant(count: float) -> dict[str, float]:
    return {k: count for k in _SCENARIOS}


def _template_gib(template: Optional[Mapping[str, Any]]) -> float:
    mappings = ((template or {}).get("inputs") or {}).get("blockDeviceMappings") or []
    return float(sum(int((m.get("ebs") or {}).get("volumeSize") or 0) for m in mappings))


def stack_cost_of(
    resources: list[Mapping[str, Any]],
    *,
    region: str,
    gpu_groups: list[dict[str, Any]],
    gpu_price: Any,
    gpu_nodes: Mapping[str, int],
    on_date: str,
) -> dict[str, Any]:
    """Every hourly charge of the registered resources, one item per kind, and the totals.

    One rule for what has no price: the item's ``perHour*`` are null and ``price.reason`` says
    why; a total is null when any item is, and ``totalUnknownReason`` names those items."""
    of = lambda type_: [r for r in resources if r.get("type") in ((type_,) if isinstance(type_, str) else type_)]  # noqa: E731
    gpu_ids = {id(entry["group"]) for entry in gpu_groups}
    items = [
        _item("gpuNodes", [e["group"].get("name", "?") for e in gpu_groups], "instance-hour", gpu_price, dict(gpu_nodes)),
    ]
    gpu_gib = max((_template_gib(e["template"]) for e in gpu_groups), default=0.0)
    if gpu_gib:
        items.append(_item("gpuNodeVolumes", [e["group"].get("name", "?") for e in gpu_groups], "GB-hour (gp3)",
                           pricing.gp3_per_gb(region), {k: v * gpu_gib for k, v in gpu_nodes.items()}))
    for cluster in of(EKS_CLUSTERS):
        version = str((cluster.get("inputs") or {}).get("version") or "")
        items.append(_item("controlPlane", [cluster.get("name", "?")], "cluster-hour",
                           pricing.eks_control_plane(version, on_date), _constant(1)))
    templates = _by_id(resources, LAUNCH_TEMPLATE)
    for group in of(NODE_GROUP_TYPES):
        if id(group) in gpu_ids:
            continue
        inputs = group.get("inputs") or {}
        template = templates.get((inputs.get("launchTemplate") or {}).get("id") or "")
        instance_type = _instance_type_of(group, template) or "?"
        count = int((inputs.get("scalingConfig") or {}).get("desiredSize") or 0)
        items.append(_item("systemNodes", [group.get("name", "?")], f"{instance_type} instance-hour",
                           pricing.instance_hour(instance_type, region), _constant(count)))
        gib = _template_gib(template) or float(inputs.get("diskSize") or DEFAULT_NODE_DISK_GIB)
        items.append(_item("systemNodeVolumes", [group.get("name", "?")], "GB-hour (gp3)",
                           pricing.gp3_per_gb(region), _constant(count * gib)))
    nats = of(NAT_GATEWAY)
    if nats:
        items.append(_item("natGateways", [r.get("name", "?") for r in nats], "gateway-hour", pricing.nat_gateway(region), _constant(len(nats))))
    eips = of(EIP)
    if eips:
        items.append(_item("publicIpv4", [r.get("name", "?") for r in eips], "address-hour", pricing.public_ipv4(region), _constant(len(eips))))
    for fs in of(LUSTRE):
        inputs = fs.get("inputs") or {}
        price = pricing.fsx_lustre_per_gb(region, str(inputs.get("deploymentType")), str(inputs.get("storageType") or "SSD"),
                                          int(inputs.get("perUnitStorageThroughput") or 0))
        items.append(_item("sharedFilesystem", [fs.get("name", "?")], "GB-hour", price, _constant(float(inputs.get("storageCapacity") or 0))))
    keys = of(KMS_KEY)
    if keys:
        items.append(_item("kmsKeys", [r.get("name", "?") for r in keys], "key-hour", pricing.kms_key(region), _constant(len(keys))))

    notes = []
    if not of(EKS_CLUSTERS):
        notes.append("existing cluster: its control plane and system nodes are billed with it, not by this stack")
    unknown = [i for i in items if i["price"]["usdPerUnitHour"] is None]
    totals = {
        f"totalPerHour{k[0].upper()}{k[1:]}": (
            None if unknown else round(sum(i[f"perHour{k[0].upper()}{k[1:]}"] for i in items), 4)
        )
        for k in _SCENARIOS
    }
    return {
        "items": items,
        **totals,
        "totalUnknownReason": "; ".join(f"{i['item']}: {i['price']['reason']}" for i in unknown) or None,
        "supportTierDate": on_date,
        "notes": notes,
        "usageBased": list(pricing.USAGE_BASED),
    }


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
    warnings: list[str] = []
    groups = gpu_node_groups(resources, instance.name)
    pods = training_pods(resources)
    subnets = _by_id(resources, SUBNET)
    # A placement group's id is its name (EC2), which the launch template refers to.
    placement_groups: dict[str, Mapping[str, Any]] = {}
    for r in resources:
        if r.get("type") == PLACEMENT_GROUP:
            for key in (r.get("id"), (r.get("inputs") or {}).get("name")):
                if key:
                    placement_groups[key] = r

    min_size = desired = max_size = 0
    attached_per_node: list[int] = []
    subnet_ids: list[str] = []
    group_names: list[str] = []
    pg_names: list[Optional[str]] = []
    capacity_types: set[str] = set()
    for entry in groups:
        group, template = entry["group"], entry["template"]
        inputs = group.get("inputs") or {}
        scaling = inputs.get("scalingConfig") or {}
        min_size += int(scaling.get("minSize", 0) or 0)
        desired += int(scaling.get("desiredSize", 0) or 0)
        max_size += int(scaling.get("maxSize", 0) or 0)
        attached_per_node.append(attached_efa_interfaces(template))
        subnet_ids.extend(inputs.get("subnetIds") or [])
        group_names.append(group.get("name", "?"))
        pg_names.append(_placement_group_name(template))
        capacity_types.add(inputs.get("capacityType") or "ON_DEMAND")
        if template is None and (inputs.get("launchTemplate") or {}).get("id"):
            warnings.append(f"node group {group.get('name')}: its launch template is not in the plan")
    if not groups:
        warnings.append(f"no node group of {instance.name} in the plan")

    # Nodes while training: the group's desired size; a group that idles at zero is brought up by
    # the cluster autoscaler for the pending training pods, at most maxSize nodes.
    if desired > 0:
        training_nodes, basis = desired, "scalingConfig.desiredSize"
    else:
        needed = math.ceil(pods["gpus"] / instance.gpus) if instance.gpus else 0
        training_nodes, basis = min(max_size, needed), "scale-from-zero: nodes the pending training pods bring up (<= maxSize)"

    hugepages = int(pods["maxHugepages2MiMiB"])
    alloc_millicpu, alloc_memory_mib = catalog.allocatable(instance, hugepages)
    efa_per_node = min(attached_per_node) if attached_per_node else 0
    if len(set(attached_per_node)) > 1:
        warnings.append(f"GPU node groups attach different EFA counts: {attached_per_node}")

    azs: list[Optional[str]] = []
    for subnet_id in dict.fromkeys(subnet_ids):
        subnet = subnets.get(subnet_id)
        azs.append(((subnet or {}).get("inputs") or {}).get("availabilityZone") if subnet else known_az)
    distinct_azs = sorted({az for az in azs if az})
    one_az = bool(azs) and None not in azs and len(distinct_azs) == 1
    distinct_pgs = sorted({pg for pg in pg_names if pg})
    one_pg = bool(pg_names) and None not in pg_names and len(distinct_pgs) == 1
    strategies = sorted(
        {str(((placement_groups.get(pg) or {}).get("inputs") or {}).get("strategy") or "existing") for pg in distinct_pgs}
    )

    price = pricing.on_demand_price(instance.name, region)
    per_node = price.usd_per_hour

    def cost(nodes: int) -> Optional[float]:
        return round(nodes * per_node, 4) if per_node is not None else None

    stack_cost = stack_cost_of(
        resources,
        region=region,
        gpu_groups=groups,
        gpu_price=pricing.instance_hour(instance.name, region),
        gpu_nodes={"whileTraining": training_nodes, "idle": min_size, "atMax": max_size},
        on_date=on_date or datetime.date.today().isoformat(),
    )

    for item in stack_cost["items"]:
        if item["item"] == "controlPlane" and (item["price"]["detail"] or "").startswith("extended support"):
            warnings.append(f"control plane at ${item['perHourIdle']:.2f}/h instead of ${pricing.EKS_STANDARD_PER_HOUR:.2f}/h, "
                            f"{item['price']['detail']}: raise cluster.kubernetesVersion to pay the standard rate")

    non_on_demand = sorted(capacity_types - {"ON_DEMAND"})
    if non_on_demand:
        warnings.append(f"capacity type {', '.join(non_on_demand)}: billed otherwise; the on-demand price is a reference")

    return {
        "instanceType": instance.name,
        "region": region,
        "nodeGroups": group_names,
        "nodes": {"min": min_size, "desired": desired, "max": max_size, "whileTraining": training_nodes, "basis": basis},
        "trainingPods": {"count": pods["pods"], "sources": pods["sources"]},
        "gpus": {
            "requested": pods["gpus"],
            "onNodes": training_nodes * instance.gpus,
            "fraction": _fraction(pods["gpus"], training_nodes * instance.gpus),
        },
        "efaInterfaces": {
            "requested": pods["efa"],
            "attached": training_nodes * efa_per_node,
            "perNode": efa_per_node,
            "fraction": _fraction(pods["efa"], training_nodes * efa_per_node),
        },
        "cpu": {
            "requestedMillicpu": pods["millicpu"],
            "allocatableMillicpu": training_nodes * alloc_millicpu,
            "fraction": _fraction(pods["millicpu"], training_nodes * alloc_millicpu),
        },
        "memory": {
            "requestedMiB": pods["memoryMiB"],
            "allocatableMiB": training_nodes * alloc_memory_mib,
            "hugepages2MiMiBPerNode": hugepages,
            "fraction": _fraction(pods["memoryMiB"], training_nodes * alloc_memory_mib),
        },
        "placement": {
            "subnets": list(dict.fromkeys(subnet_ids)),
            "availabilityZones": distinct_azs,
            "oneAvailabilityZone": one_az,
            "placementGroups": distinct_pgs,
            "placementGroupStrategies": strategies,
            "onePlacementGroup": one_pg,
        },
        "cost": {
            "currency": "USD",
            "capacityTypes": sorted(capacity_types),
            "onDemandPerNodeHour": per_node,
            "price": price.to_json(),
            "perHourWhileTraining": cost(training_nodes),
            "perHourIdle": cost(min_size),
            "perHourAtMax": cost(max_size),
            # the keys above are the GPU nodes'; what the whole stack bills:
            **stack_cost,
        },
        "warnings": warnings,
    }


def efficiency_report(plan: Any, settings: Any, on_date: Optional[str] = None) -> dict[str, Any]:
    """The efficiency report of an offline ``plan`` (``offline.plan.Plan``) of a stack with
    ``settings`` (``StackSettings``): the instance figures (with stack overrides), region and, for
    a subnet given by id, its AZ come from the settings; everything else from the plan."""
    known_az = settings.gpu_az if not settings.network.create else None
    report = efficiency_of(
        plan.resources, instance=settings.gpu_nodes.instance, region=settings.region, known_az=known_az, on_date=on_date
    )
    return {"project": plan.project, "stack": plan.stack, **report}


# --- text ---------------------------------------------------------------------------------------


def _pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _usd(value: Optional[float]) -> str:
    return "unknown" if value is None else f"${value:,.2f}/h"


def _names(items: list[Any]) -> str:
    return ", ".join(str(i) for i in items) or "none"


def render_efficiency(report: Mapping[str, Any]) -> str:
    """The report as a few lines for the terminal."""
    nodes, gpus, efa = report["nodes"], report["gpus"], report["efaInterfaces"]
    cpu, mem, place, cost = report["cpu"], report["memory"], report["placement"], report["cost"]
    price = cost["price"]
    lines = [
        f"Efficiency ({report['instanceType']} in {report['region']}):",
        f"  nodes        {nodes['whileTraining']} while training (min {nodes['min']}, desired {nodes['desired']}, max {nodes['max']})",
        f"  GPUs         {gpus['requested']:g} of {gpus['onNodes']} requested by {report['trainingPods']['count']} training pod{'' if report['trainingPods']['count'] == 1 else 's'} ({_pct(gpus['fraction'])})",
        f"  EFA          {efa['requested']:g} of {efa['attached']} interfaces requested ({_pct(efa['fraction'])})",
        f"  CPU          {cpu['requestedMillicpu'] / 1000:g} of {cpu['allocatableMillicpu'] / 1000:g} allocatable cores ({_pct(cpu['fraction'])})",
        f"  memory       {mem['requestedMiB'] / 1024:g} of {mem['allocatableMiB'] / 1024:.1f} allocatable GiB ({_pct(mem['fraction'])})",
        f"  placement    one AZ: {'yes' if place['oneAvailabilityZone'] else 'no'} ({_names(place['availabilityZones'])}); "
        f"one placement group: {'yes' if place['onePlacementGroup'] else 'no'} ({_names(place['placementGroups'])})",
    ]
    if cost["onDemandPerNodeHour"] is None:
        lines.append(f"  cost         unknown: {price['reason']}")
    else:
        lines.append(
            f"  cost         {_usd(cost['perHourWhileTraining'])} while training, {_usd(cost['perHourIdle'])} idle, "
            f"{_usd(cost['perHourAtMax'])} at max ({_usd(cost['onDemandPerNodeHour'])} per node on-demand, as of {price['asOf']})"
        )
    if "items" in cost:
        lines.extend(_render_stack_cost(cost))
    lines.extend(f"  warning: {w}" for w in report.get("warnings", []))
    return "\n".join(lines)


def _usd_fine(value: Optional[float]) -> str:
    # cents hide the small items (a KMS key is $0.0014/h)
    return _usd(value) if value is None or value == 0 or value >= 0.01 else f"${value:.4f}/h"


def _render_stack_cost(cost: Mapping[str, Any]) -> list[str]:
    if cost["totalPerHourWhileTraining"] is None:
        lines = [f"  stack cost   unknown: {cost['totalUnknownReason']}"]
    else:
        lines = [
            f"  stack cost   {_usd(cost['totalPerHourWhileTraining'])} while training, {_usd(cost['totalPerHourIdle'])} idle, "
            f"{_usd(cost['totalPerHourAtMax'])} at max, everything the stack bills by the hour:"
        ]
    for item in cost["items"]:
        detail = item["price"]["detail"] or item["price"]["reason"] or ""
        lines.append(
            f"    {item['item']:<18} {_usd_fine(item['perHourWhileTraining']):>13} while training, {_usd_fine(item['perHourIdle'])} idle"
            f"{'  (' + detail + ')' if detail else ''}"
        )
    lines.extend(f"    note: {note}" for note in cost.get("notes", []))
    lines.append("    plus usage-based: " + "; ".join(cost["usageBased"]))
    return lines


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"
