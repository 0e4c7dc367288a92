"""What the GPU pool holds and what a run asks of it: the Kueue quota arithmetic, as pure functions.

- :func:`node_share`: one node's training pod (the catalog's pod shape: all GPUs and EFA devices,
  the CPU and memory the node can spare, its hugepages): exactly what one Ray pod requests.
- :func:`pool_nodes`: how many nodes the pool can hold: ``nodeCount``, or ``maxNodes`` when the
  Cluster Autoscaler may add nodes (a Capacity Block pool holds its ``nodeCount`` reserved nodes).
- the ClusterQueue's nominal quota is ``node_share x pool_nodes``; a run asks ``node_share x its
  nodes``; :func:`shortfalls` names every resource it asks more of than the pool holds.
- :func:`topology_request`: which network layer the run asks for, or why none.

:data:`QUEUE_RULES` rejects, before anything is created, a run that could never fit the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import catalog
from .config import StackRule, StackSettings
from .config.errors import problem_line
from .scheduling import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE

NETWORK_LAYER_LABELS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3))
"""EKS labels a node with its network position, widest (1) to closest (3) (EKS user guide,
"network topology labels"; EC2 instance topology)."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""Kueue's topology-aware scheduling wants the node itself as the lowest level (it assigns pods
to nodes), and its Topology CRD allows it only there."""

NETWORK_TOPOLOGY_TYPES: frozenset[str] = frozenset({
    "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
})
"""Catalog types that EC2 describes with an instance topology (DescribeInstanceTopology's
supported types), so their nodes carry the network-node-layer labels. Other types (g5, g6, g6e)
get no topology request: Kueue would find no labelled node and never admit the run."""

SUBMITTER_MILLICPU = 1000
SUBMITTER_MEMORY_MIB = 1024
"""The RayJob submitter pod's requests (workload/rayjob.py: KubeRay's default 1 CPU / 1Gi), which
Kueue counts as the RayJob's ``submitter`` pod set on the system nodes."""


@dataclass(frozen=True)
class Resources:
    """Quantities in base units: GPUs, EFA devices, millicores, MiB of memory and of 2 MiB hugepages."""

    gpus: int = 0
    efa: int = 0
    millicpu: int = 0
    memory_mib: int = 0
    hugepages_mib: int = 0

    def times(self, n: int) -> "Resources":
        return Resources(self.gpus * n, self.efa * n, self.millicpu * n, self.memory_mib * n, self.hugepages_mib * n)

    def by_name(self) -> dict[str, int]:
        """Kubernetes resource name -> amount in base units (cpu in millicores, memory in MiB);
        GPUs, CPU and memory always, EFA and hugepages when asked for."""
        named = {"cpu": self.millicpu, "memory": self.memory_mib, GPU_RESOURCE: self.gpus}
        if self.efa:
            named[EFA_RESOURCE] = self.efa
        if self.hugepages_mib:
            named[HUGEPAGES_2MI_RESOURCE] = self.hugepages_mib
        return named

    def quantities(self) -> dict[str, str]:
        """The same as Kubernetes quantities (cpu "190" or "1500m", memory "1753Gi"/"1000Mi")."""
        return {name: quantity(name, amount) for name, amount in self.by_name().items()}


def quantity(name: str, amount: int) -> str:
    if name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if name == "memory" or name.startswith("hugepages-"):
        return f"{amount // catalog.GIB_MIB}Gi" if amount % catalog.GIB_MIB == 0 else f"{amount}Mi"
    return str(amount)


def node_share(shape: catalog.PodShape, efa: int) -> Resources:
    """One node's training pod: ``shape`` (catalog.pod_shape_for) with ``efa`` devices (0 without EFA)."""
    return Resources(shape.gpus, efa, shape.millicpu, shape.memory_mib, shape.hugepages_2mi_mib)


def pool_nodes(node_count: int, max_nodes: Optional[int], autoscaled: bool) -> int:
    """The nodes the pool can hold: ``max_nodes`` (else ``node_count``) when the autoscaler may add
    them, else ``node_count``."""
    return (max_nodes or node_count) if autoscaled else node_count


def shortfalls(ask: Resources, held: Resources) -> list[str]:
    """'<resource>: asks A, the pool holds H' for every resource asked beyond what is held."""
    asked, holds = ask.by_name(), held.by_name()
    return [
        f"{name}: asks {quantity(name, amount)}, the pool holds {quantity(name, holds.get(name, 0))}"
        for name, amount in asked.items()
        if amount > holds.get(name, 0)
    ]


@dataclass(frozen=True)
class TopologyRequest:
    """How the run asks for nearby nodes: ``mode`` required/preferred at ``label``, or "off" with ``reason``."""

    mode: str
    layer: int
    reason: str = ""

    @property
    def label(self) -> str:
        return NETWORK_LAYER_LABELS[self.layer - 1]

    @property
    def on(self) -> bool:
        return self.mode != "off"

    @property
    def annotation(self) -> str:
        return f"kueue.x-k8s.io/podset-{self.mode}-topology"


def topology_request(mode: str, layer: int, *, instance_type: str, autoscaled: bool, by: str = "the Cluster Autoscaler") -> TopologyRequest:
    """``queue.topology`` as it can be honoured: off when asked, on an autoscaled pool (Kueue's
    topology-aware scheduling counts the nodes that exist; the autoscaler adds nodes only for
    pending pods, which a queued run never has: it would wait forever), or on a type whose nodes
    carry no network-node-layer labels."""
    if mode == "off":
        return TopologyRequest("off", layer, "queue.topology: off")
    if autoscaled:
        return TopologyRequest("off", layer, f"{by} adds nodes only for pending pods, and Kueue places a run by the nodes that exist")
    if instance_type not in NETWORK_TOPOLOGY_TYPES:
        return TopologyRequest("off", layer, f"{instance_type} nodes carry no topology.k8s.aws/network-node-layer labels")
    return TopologyRequest(mode, layer)


# --- the stack's queue ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueuePlan:
    """The stack's queue, derived from its settings: what a node holds, what the pool holds, what
    the run asks for, and how it is placed."""

    name: str
    per_node: Resources
    nodes: int
    nodes_from: str
    run_nodes: int
    submitter: Optional[Resources]
    topology: TopologyRequest
    priority: str
    priority_value: int
    preemption: str

    @property
    def quota(self) -> Resources:
        return self.per_node.times(self.nodes)

    @property
    def ask(self) -> Resources:
        return self.per_node.times(self.run_nodes)

    @property
    def shortfalls(self) -> list[str]:
        return shortfalls(self.ask, self.quota)


def efa_devices(settings: StackSettings) -> int:
    """The EFA devices of one node's pod (workload.run.efa_enabled: EFA on an EFA-capable type)."""
    gpu = settings.gpu_nodes
    return catalog.efa_device_count(gpu.instance) if gpu.efa and gpu.instance.efa_capable else 0


def has_submitter_pod(settings: StackSettings) -> bool:
    """A RayJob in K8sJobMode has a submitter pod, which Kueue admits with the run (on the system nodes)."""
    wl = settings.workload
    return wl.enabled and wl.launcher == "kuberay" and wl.rayjob.cluster == "embedded" and wl.rayjob.submission_mode == "K8sJobMode"


def grows_for_pods(settings: StackSettings) -> tuple[bool, str]:
    """Whether nodes are added for pending pods (the Cluster Autoscaler or Karpenter), and by whom."""
    by = "Karpenter" if settings.gpu_nodes.provisioner == "karpenter" else "the Cluster Autoscaler"
    return settings.gpu_nodes_grow, by


def queue_plan(settings: StackSettings, run_nodes: Optional[int] = None) -> QueuePlan:
    """The queue of ``settings``; ``run_nodes`` (default ``gpuNodes.nodeCount``) is the run's size."""
    gpu = settings.gpu_nodes
    shape = catalog.pod_shape_for(
        gpu.instance, gpu.hugepages_gib * catalog.GIB_MIB, settings.workload.shm_fraction, settings.observability_backend
    )
    autoscaled, by = grows_for_pods(settings)
    nodes = pool_nodes(gpu.node_count, gpu.max_nodes, autoscaled)
    if gpu.provisioner == "karpenter":
        nodes_from = f"gpuNodes.{'maxNodes' if gpu.max_nodes else 'nodeCount'} {nodes} (the NodePool's limits: Karpenter launches them)"
    elif autoscaled:
        nodes_from = f"gpuNodes.maxNodes {nodes} (the autoscaler may add them)" if gpu.max_nodes else f"gpuNodes.nodeCount {nodes}"
    elif gpu.capacity_type == "CAPACITY_BLOCK":
        nodes_from = f"gpuNodes.nodeCount {nodes} (the Capacity Block's nodes)"
    else:
        nodes_from = f"gpuNodes.nodeCount {nodes}"
    q = settings.queue
    classes = {c.name: c.value for c in q.priority_classes}
    return QueuePlan(
        name=q.name,
        per_node=node_share(shape, efa_devices(settings)),
        nodes=nodes,
        nodes_from=nodes_from,
        run_nodes=gpu.node_count if run_nodes is None else run_nodes,
        submitter=Resources(millicpu=SUBMITTER_MILLICPU, memory_mib=SUBMITTER_MEMORY_MIB) if has_submitter_pod(settings) else None,
        topology=topology_request(q.topology, q.topology_layer, instance_type=gpu.instance_type, autoscaled=autoscaled, by=by),
        priority=q.priority,
        priority_value=classes.get(q.priority, 0),
        preemption=q.preemption,
    )


def fit_problems(plan: QueuePlan) -> list[str]:
    """A run larger than the whole pool can never be admitted: say so, with the numbers."""
    missing = plan.shortfalls
    if not missing:
        return []
    return [
        problem_line(
            "gpuNodes.nodeCount",
            plan.run_nodes,
            f"the run asks for {plan.run_nodes} nodes' worth but the pool holds {plan.nodes} ({plan.nodes_from}): "
            + "; ".join(missing)
            + "; Kueue would never admit it",
        )
    ]


def _fits(settings: StackSettings, stack: Optional[str]) -> list[str]:
    if not settings.queue.enabled or not settings.workload.enabled:
        return []
    return fit_problems(queue_plan(settings))


def _required_topology(settings: StackSettings, stack: Optional[str]) -> list[str]:
    q = settings.queue
    if not q.enabled or q.topology != "required":
        return []
    autoscaled, by = grows_for_pods(settings)
    request = topology_request(q.topology, q.topology_layer, instance_type=settings.gpu_nodes.instance_type, autoscaled=autoscaled, by=by)
    if request.on:
        return []
    return [problem_line("queue.topology", q.topology, f"cannot be required: {request.reason}; use preferred or off")]


QUEUE_RULES: tuple[StackRule, ...] = (
    StackRule(("queue", "gpuNodes", "autoscaler", "workload"), _fits),
    StackRule(("queue", "gpuNodes", "autoscaler"), _required_topology),
)
