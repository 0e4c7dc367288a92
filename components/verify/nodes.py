"""L1, the GPU nodes: as many as the node group should hold, of the right type, advertising the
catalog's GPUs, EFA devices and hugepages, tainted and labelled as the stack sets them (the network
topology and zone labels too), Ready, and with no fault the EKS node monitoring agent reports.

A GPU node is a node carrying every label of :attr:`GpuNodeExpectation.selector`
(``role: gpu-training``, :data:`rlinf_eks.scheduling.GPU_NODE_LABELS`): the label the training
pods and device plugins select, so exactly the nodes a run can land on.

With Karpenter's fallback types (``gpuNodes.fallbackInstanceTypes``) a GPU node may be of any type
the NodePool allows, and is judged by that type's :class:`~.expect.NodeShape` (its catalog row).

Checks: ``gpu-nodes.count``, ``gpu-nodes.instance-type``, ``gpu-nodes.allocatable``,
``gpu-nodes.taints``, ``gpu-nodes.labels``, ``gpu-nodes.topology``, ``gpu-nodes.ready``,
``gpu-nodes.health``.

The node monitoring agent's conditions (aws/eks-node-monitoring-agent ``pkg/conditions/conditions.go``;
EKS user guide "Detect node health issues and enable automatic node repair", node-health page):
AcceleratedHardwareReady, ContainerRuntimeReady, KernelReady, NetworkingReady and StorageReady,
each True while healthy; the agent sets every condition of its enabled monitors to True when it
starts (``pkg/manager/node_exporter.go``), so a node where the agent runs always carries some.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..cluster import NODE_MONITORING_AGENT
from ..scheduling import GPU_TAINT
from .control_plane import condition, condition_true, why_not
from .expect import INSTANCE_TYPE_LABEL, NODEGROUP_LABEL, ZONE_LABEL, Expectation, parse_quantity, quantities, show
from .model import CheckResult, Observed, failed, passed, skipped

LEVEL = 1

AGENT_CONDITIONS = ("AcceleratedHardwareReady", "ContainerRuntimeReady", "KernelReady", "NetworkingReady", "StorageReady")
"""NodeConditions of the EKS node monitoring agent: True while healthy, False on a fault."""
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
"""The kubelet's own conditions: True is the fault."""


def node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "?")


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def is_gpu_node(expect: Expectation, node: Mapping[str, Any]) -> bool:
    labels = labels_of(node)
    return all(labels.get(key) == value for key, value in expect.gpu.selector.items())


def gpu_nodes(expect: Expectation, observed: Observed) -> list[Mapping[str, Any]]:
    """The stack's GPU nodes: those carrying every selector label (``role: gpu-training``)."""
    return [node for node in observed.nodes if is_gpu_node(expect, node)]


def is_ready(node: Mapping[str, Any]) -> bool:
    return condition_true(node, "Ready")


def is_cordoned(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def taints_of(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, Mapping)]


def _taint(t: Mapping[str, Any]) -> str:
    value = t.get("value")
    return f"{t.get('key')}{'=' + str(value) if value not in (None, '') else ''}:{t.get('effect')}"


def foreign_taints(expect: Expectation, node: Mapping[str, Any]) -> list[str]:
    """The node's NoSchedule/NoExecute taints the training pods do not tolerate (every taint but the GPU one)."""
    expected = {(t["key"], t.get("value", ""), t["effect"]) for t in expect.gpu.taints}
    return [
        _taint(t)
        for t in taints_of(node)
        if t.get("effect") in (GPU_TAINT.effect, "NoExecute") and (t.get("key"), t.get("value") or "", t.get("effect")) not in expected
    ]


def plural(count: int, word: str) -> str:
    """``1 GPU node``, ``2 GPU nodes``."""
    return f"{count} {word}" + ("" if count == 1 else "s")


def _per_node(problems: dict[str, list[str]]) -> str:
    """``node: a, b; node2: c`` for the nodes with problems."""
    return "; ".join(f"{name}: {', '.join(items)}" for name, items in problems.items() if items)


def _count(expect: Expectation, observed: Observed, nodes: list[Mapping[str, Any]]) -> CheckResult:
    gpu = expect.gpu
    n = len(nodes)
    selector = ",".join(f"{k}={v}" for k, v in gpu.selector.items())
    groups = sorted({labels_of(node).get(NODEGROUP_LABEL, "") for node in nodes} - {""})
    where = f" in node group {', '.join(groups)}" if groups else ""
    if n > gpu.max_count:
        return failed(
            LEVEL, "gpu-nodes.count", f"{plural(n, 'node')} labelled {selector}{where}, more than the group's maximum {gpu.max_count}",
            f"another node group carries {selector}: remove the label there (training pods would land on its nodes)",
        )  # fmt: skip
    if n >= gpu.count:
        return passed(LEVEL, "gpu-nodes.count", f"{plural(n, 'GPU node')} ({selector}){where}, gpuNodes.nodeCount {gpu.count}")
    if gpu.scale_from_zero:
        if n == 0:
            return passed(LEVEL, "gpu-nodes.count", f"0 nodes: scale-from-zero, L3-L4 will skip ({gpu.zero_reason})")
        return passed(LEVEL, "gpu-nodes.count", f"{n} of up to {gpu.max_count} GPU nodes{where} (scale-from-zero: {gpu.zero_reason})")
    strays = [
        node_name(node)
        for node in observed.nodes
        if not is_gpu_node(expect, node) and labels_of(node).get(INSTANCE_TYPE_LABEL) in gpu.instance_types
    ]
    hint = f"; {plural(len(strays), ' or '.join(gpu.instance_types) + ' node')} without {selector}: {', '.join(strays)}" if strays else ""
    return failed(
        LEVEL, "gpu-nodes.count", f"{plural(n, 'GPU node')} ({selector}){where}, gpuNodes.nodeCount wants {gpu.count}{hint}",
        f"check {gpu.node_group}: aws eks describe-nodegroup (health issues, InsufficientInstanceCapacity) and its Auto Scaling group's activity",
    )  # fmt: skip


def _types(expect: Expectation) -> str:
    """How the remedies name the types a GPU node may be."""
    types = expect.gpu.instance_types
    if len(types) == 1:
        return f"gpuNodes.instanceType says {types[0]}"
    return f"the NodePool allows {', '.join(types)} (gpuNodes.instanceType, then fallbackInstanceTypes)"


def _instance_type(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    allowed = expect.gpu.instance_types
    found = [str(labels_of(n).get(INSTANCE_TYPE_LABEL) or "no instance-type label") for n in nodes]
    wrong = {node_name(n): [kind] for n, kind in zip(nodes, found) if kind not in allowed}
    if wrong:
        return failed(
            LEVEL, "gpu-nodes.instance-type", f"{plural(len(wrong), 'GPU node')} not {' or '.join(allowed)}: {_per_node(wrong)}",
            f"{_types(expect)}: {expect.up_cluster} to roll the node group, or remove the GPU label from other node groups",
        )  # fmt: skip
    if len(allowed) == 1:
        return passed(LEVEL, "gpu-nodes.instance-type", f"every GPU node is {allowed[0]}")
    counts = ", ".join(f"{found.count(kind)} {kind}" + (" (fallback)" if kind != allowed[0] else "") for kind in allowed if kind in found)
    return passed(LEVEL, "gpu-nodes.instance-type", f"every GPU node of a type the NodePool allows: {counts}")


def _allocatable(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    """Each node judged by its own type's shape (a Karpenter fallback type by its catalog row; a
    node of a type not allowed, which gpu-nodes.instance-type reports, by instanceType's)."""
    preferred = expect.gpu.shapes[0] if expect.gpu.shapes else None
    problems: dict[str, list[str]] = {}
    missing: set[str] = set()
    differs: set[str] = set()
    differ_types: set[str] = set()
    short_memory: set[str] = set()
    for node in nodes:
        kind = labels_of(node).get(INSTANCE_TYPE_LABEL)
        shape = expect.gpu.shape(kind) or preferred
        wanted = quantities(shape.allocatable if shape else expect.gpu.allocatable)
        have = quantities((node.get("status") or {}).get("allocatable"))
        items = []
        for name, amount in wanted.items():
            got = have.get(name)
            if got is None and amount == 0:
                continue
            if got is None or (got == 0 and amount > 0):
                items.append(f"{name} {'missing' if got is None else '0'} (expects {show(name, amount)})")
                missing.add(name)
            elif got != amount:
                items.append(f"{name} {show(name, got)} (expects {show(name, amount)})")
                differs.add(name)
                differ_types.add(shape.instance_type if shape else expect.gpu.instance_type)
        if shape is not None:
            memory = quantities((node.get("status") or {}).get("capacity")).get("memory")
            least = parse_quantity(shape.memory_capacity)
            if memory is not None and memory < least:
                items.append(f"memory capacity {show('memory', memory)} (a {shape.instance_type} has at least {show('memory', least)})")
                short_memory.add(shape.instance_type)
        problems[node_name(node)] = items
    if not any(problems.values()):
        if len(expect.gpu.instance_types) == 1:
            shown = ", ".join(f"{name} {expect.gpu.allocatable[name]}" for name in expect.gpu.allocatable)
            return passed(LEVEL, "gpu-nodes.allocatable", f"every GPU node advertises {shown}")
        return passed(LEVEL, "gpu-nodes.allocatable", "every GPU node advertises its type's GPUs, EFA devices, hugepages and memory")
    remedies = []
    plugins = {ds.advertises: ds for ds in expect.daemonsets}
    for name in sorted(missing):
        if name in plugins:
            remedies.append(f"{name}: check {plugins[name].key}'s pod on those nodes (L2)")
        elif name.startswith("hugepages-"):
            remedies.append(f"{name}: the nodes reserve hugepages at boot (gpuNodes.hugepagesGib): replace them from the current launch template")
        else:
            remedies.append(f"{name}: no device plugin of the stack advertises it: check the node group's AMI")
    if differs:
        remedies.append(
            f"{', '.join(sorted(differs))}: the nodes differ from the catalog's {', '.join(sorted(differ_types))}: check the launch template, "
            "or correct the figures with gpuNodes.instanceOverrides"
        )
    if short_memory:
        remedies.append(
            f"less memory than a {' or '.join(sorted(short_memory))} has (a failed DIMM, or another instance behind the label): "
            "kubectl drain the node and terminate its instance"
        )
    return failed(LEVEL, "gpu-nodes.allocatable", _per_node(problems), "; ".join(remedies))


def _taints(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    problems: dict[str, list[str]] = {}
    lacking = foreign = False
    for node in nodes:
        have = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in taints_of(node)}
        items = [f"lacks {_taint(t)}" for t in expect.gpu.taints if (t["key"], t.get("value", ""), t["effect"]) not in have]
        extra = [f"also {t}" for t in foreign_taints(expect, node)]
        lacking |= bool(items)
        foreign |= bool(extra)
        problems[node_name(node)] = items + extra
    if not any(problems.values()):
        return passed(LEVEL, "gpu-nodes.taints", f"every GPU node tainted {', '.join(_taint(t) for t in expect.gpu.taints)} only")
    remedies = []
    if lacking:
        remedies.append(f"{expect.up_cluster} (the node group sets the GPU taint; without it any pod may take a GPU node)")
    if foreign:
        remedies.append("training pods tolerate no other taint: kubectl uncordon a cordoned node, or find what set the taint (kubectl taint nodes NODE KEY-)")
    return failed(LEVEL, "gpu-nodes.taints", _per_node(problems), "; ".join(remedies))


def _labels(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    problems: dict[str, list[str]] = {}
    for node in nodes:
        have = labels_of(node)
        problems[node_name(node)] = [
            f"{key}={have[key]} (expects {value})" if key in have else f"lacks {key}={value}" for key, value in expect.gpu.labels.items() if have.get(key) != value
        ]
    if not any(problems.values()):
        return passed(LEVEL, "gpu-nodes.labels", "every GPU node labelled " + ", ".join(f"{k}={v}" for k, v in expect.gpu.labels.items()))
    return failed(
        LEVEL, "gpu-nodes.labels", _per_node(problems),
        f"{expect.up_cluster} (the node group sets them; the device plugins and the queue's flavor select them), or kubectl label nodes NODE KEY=VALUE",
    )  # fmt: skip


def _topology(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    problems: dict[str, list[str]] = {}
    wrong_zone = absent_layers = False
    for node in nodes:
        have = labels_of(node)
        items = [f"lacks {label}" for label in expect.gpu.topology_labels if not have.get(label)]
        absent_layers |= any(label != ZONE_LABEL for label in expect.gpu.topology_labels if not have.get(label))
        if have.get(ZONE_LABEL) and have.get(ZONE_LABEL) != expect.gpu.zone:
            items.append(f"in {have[ZONE_LABEL]} (expects {expect.gpu.zone})")
            wrong_zone = True
        problems[node_name(node)] = items
    if not any(problems.values()):
        layers = [label.rsplit("/", 1)[-1] for label in expect.gpu.topology_labels if label != ZONE_LABEL]
        return passed(LEVEL, "gpu-nodes.topology", f"every GPU node in {expect.gpu.zone}" + (f", labelled {', '.join(layers)}" if layers else ""))
    remedies = []
    if absent_layers:
        remedies.append(
            f"EKS labels {expect.gpu.instance_type} nodes with their network-node layers: without them Kueue cannot place the run "
            "by topology (queue.topology: off to do without)"
        )
    if wrong_zone:
        remedies.append(f"the GPU nodes belong in availabilityZone {expect.gpu.zone} (EFA and the placement group need one AZ): check network.gpuSubnetId")
    if not remedies:
        remedies.append("the cloud provider sets topology.kubernetes.io/zone: check the node's kubelet registration")
    return failed(LEVEL, "gpu-nodes.topology", _per_node(problems), "; ".join(remedies))


def _ready(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    problems: dict[str, list[str]] = {}
    for node in nodes:
        items = [] if is_ready(node) else [why_not(node, "Ready")]
        if is_cordoned(node):
            items.append("cordoned")
        problems[node_name(node)] = items
    if not any(problems.values()):
        return passed(LEVEL, "gpu-nodes.ready", f"{plural(len(nodes), 'GPU node')} Ready and schedulable")
    return failed(
        LEVEL, "gpu-nodes.ready", _per_node(problems),
        "kubectl describe node NODE (kubelet, VPC CNI); kubectl uncordon a cordoned node; auto repair replaces a node NotReady too long (gpuNodes.autoRepair)",
    )  # fmt: skip


def _health(expect: Expectation, nodes: list[Mapping[str, Any]]) -> CheckResult:
    problems: dict[str, list[str]] = {}
    no_agent = faults = False
    for node in nodes:
        items = [why_not(node, kind) for kind in AGENT_CONDITIONS if (c := condition(node, kind)) is not None and str(c.get("status")) == "False"]
        items += [f"{kind}=True" for kind in PRESSURE_CONDITIONS if condition_true(node, kind)]
        faults |= bool(items)
        if expect.gpu.health_agent and not any(condition(node, kind) for kind in AGENT_CONDITIONS):
            items.append(f"no {NODE_MONITORING_AGENT} condition")
            no_agent = True
        problems[node_name(node)] = items
    if not any(problems.values()):
        seen = sorted({kind for node in nodes for kind in AGENT_CONDITIONS if condition(node, kind)})
        return passed(LEVEL, "gpu-nodes.health", f"no fault reported ({', '.join(seen) if seen else 'no node monitoring agent conditions'}, no pressure)")
    remedies = []
    if faults:
        remedies.append(
            "a node reports a fault (AcceleratedHardwareReady: GPU XID errors or lost GPUs; NetworkingReady: interfaces, IPAMD): "
            "let auto repair replace it (gpuNodes.autoRepair), or kubectl drain it and terminate its instance"
        )
    if no_agent:
        remedies.append(f"the {NODE_MONITORING_AGENT} add-on does not run there: aws eks describe-addon --addon-name {NODE_MONITORING_AGENT}")
    return failed(LEVEL, "gpu-nodes.health", _per_node(problems), "; ".join(remedies))


PER_NODE = ("gpu-nodes.instance-type", "gpu-nodes.allocatable", "gpu-nodes.taints", "gpu-nodes.labels", "gpu-nodes.topology", "gpu-nodes.ready", "gpu-nodes.health")


def check_nodes(expect: Expectation, observed: Observed) -> list[CheckResult]:
    """L1: the GPU nodes' count, type, allocatable, taints, labels, topology, readiness and health."""
    nodes = gpu_nodes(expect, observed)
    count = _count(expect, observed, nodes)
    if not nodes:
        why = "no GPU node yet (scale-from-zero)" if count.ok else "no GPU node to check"
        return [count, *(skipped(LEVEL, name, why) for name in PER_NODE)]
    return [
        count,
        _instance_type(expect, nodes),
        _allocatable(expect, nodes),
        _taints(expect, nodes),
        _labels(expect, nodes),
        _topology(expect, nodes),
        _ready(expect, nodes),
        _health(expect, nodes),
    ]
