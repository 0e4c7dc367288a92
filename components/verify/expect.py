"""What a stack's validated settings say its cluster holds: the :class:`Expectation` every check of
the verify ladder compares the live cluster with, and the Kubernetes quantities both sides speak.

Nothing here is typed again: every name, label, taint and figure comes from the module that makes
it (``scheduling`` for the GPU nodes' labels and taint, ``catalog`` for GPUs, EFA interfaces and
hugepages, ``device_plugins``/``kueue``/``jobset``/``kuberay``/``autoscaler`` for the releases and
what their charts name their DaemonSets and Deployments, ``quota`` for the queue's arithmetic,
``workload.run`` for the run's pods, ``identity``/``storage`` for the service account and claim).

An experiment (``platform.role: experiment``) is expected on its platform's cluster: its settings
come merged with the platform's sections (``rlinf_eks.experiment.experiment_settings``, as the
plan makes them), so its nodes, plugins and controllers are the platform's, and a remedy for them
names the platform's stack. A platform (``platform.role: platform``) has no run: ``run`` is None.

Chart facts (the templates of the pinned charts; their values are in ../shared/schemas/helm):
Helm names an object ``<release>`` when the release name contains the chart's name, else
``<release>-<chart>`` (each chart's ``fullname`` helper), unless ``fullnameOverride`` is set:

- nvidia-device-plugin 0.20.0, release ``nvidia-device-plugin``: DaemonSet ``nvidia-device-plugin``;
- aws-efa-k8s-device-plugin v0.5.30, release ``aws-efa-k8s-device-plugin``: DaemonSet of that name;
- kueue 0.19.2 (``templates/manager/manager.yaml``): Deployment ``<fullname>-controller-manager``,
  ``kueue-controller-manager``; its CRDs are templates (``templates/crd``), applied on every upgrade;
- jobset 0.12.0 (``templates/controller/_helpers.tpl``: ``jobset.controller.deployment.name`` is
  ``<fullname>-controller``): Deployment ``jobset-controller``; CRD in ``crds/`` (first install only);
- kuberay-operator 1.7.0: ``fullnameOverride: kuberay-operator`` in its values, Deployment
  ``kuberay-operator``; CRDs in ``crds/`` (first install only);
- cluster-autoscaler 9.59.0, ``fullnameOverride: cluster-autoscaler`` (autoscaler.py): Deployment
  ``cluster-autoscaler``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Mapping, Optional

from .. import autoscaler, catalog, device_plugins, jobset, karpenter_specs, kuberay, kueue
from ..config import StackSettings
from ..identity import SERVICE_ACCOUNT
from ..observability import prometheus
from ..plan_reader import exact_quantity
from ..quota import NETWORK_LAYER_LABELS, NETWORK_TOPOLOGY_TYPES, Resources, node_share, queue_plan, quantity
from ..scheduling import EFA_RESOURCE, GPU_NODE_LABELS, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE, node_labels, node_taints
from ..storage import SHARED_CLAIM
from ..workload.kube import APP_LABELS
from ..workload.run import resolve_run

INSTANCE_TYPE_LABEL = device_plugins.INSTANCE_TYPE_LABEL
"""``node.kubernetes.io/instance-type``, set by the kubelet."""
ZONE_LABEL = "topology.kubernetes.io/zone"
"""The node's Availability Zone, set by the cloud provider."""
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
"""The managed node group a node belongs to (EKS sets it)."""

# --- what is installed, and where --------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """A Helm release the stack installs: its release name, chart, version and namespace."""

    name: str
    chart: str
    version: str
    namespace: str
    what: str
    """What it is, for people: "the NVIDIA device plugin"."""
    crds_first_install_only: bool = False
    """The chart ships its CRDs in ``crds/``, which Helm installs on the first install only."""

    def __str__(self) -> str:
        return f"Helm release {self.namespace}/{self.name} (chart {self.chart} {self.version})"


def helm_fullname(release: str, chart: str) -> str:
    """The name a chart's ``fullname`` helper gives its objects (no fullnameOverride): the release
    name when it contains the chart's name, else ``<release>-<chart>``."""
    return release if chart in release else f"{release}-{chart}"


@dataclass(frozen=True)
class CrdExpectation:
    """A CustomResourceDefinition the stack uses, by full name, and the release that installs it."""

    name: str
    release: Release


@dataclass(frozen=True)
class WorkloadExpectation:
    """A DaemonSet (device plugin) or Deployment (controller) a release makes."""

    namespace: str
    name: str
    release: Release
    advertises: Optional[str] = None
    """A device plugin's extended resource (nvidia.com/gpu, vpc.amazonaws.com/efa)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# --- the GPU nodes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeShape:
    """What a GPU node of one instance type shows: its allocatable GPUs, EFA devices and hugepages
    (exactly), and its memory capacity (at least the catalog's RAM less the VM overhead)."""

    instance_type: str
    allocatable: Mapping[str, str]
    memory_capacity: str
    """The least ``status.capacity.memory`` a node of the type reports (``1894Gi`` for 2048 GiB)."""


@dataclass(frozen=True)
class GpuNodeExpectation:
    """The GPU node group as its nodes should look to the API server."""

    instance_type: str
    node_group: str
    """How remedies name the node group (the stack output gpuNodeGroup of the stack that makes it)."""
    count: int
    """The nodes a run trains on (gpuNodes.nodeCount)."""
    min_count: int
    """The fewest nodes the group may hold now: 0 when it scales from zero or waits for its Capacity Block."""
    max_count: int
    zero_reason: str
    """Why zero nodes is allowed ("" when it is not)."""
    selector: Mapping[str, str]
    """The labels that make a node a GPU node of this stack (``role: gpu-training``, what the
    training pods select)."""
    labels: Mapping[str, str]
    """Every label the node group puts on its nodes (scheduling.node_labels)."""
    taints: tuple[Mapping[str, str], ...]
    topology_labels: tuple[str, ...]
    """Labels every GPU node must carry: the network-node layers (when the type has them) and the zone."""
    zone: str
    allocatable: Mapping[str, str]
    """Per-node allocatable of the extended resources and hugepages: {"nvidia.com/gpu": "8", ...}."""
    efa: bool
    health_agent: bool
    """The EKS node monitoring agent runs on the nodes (gpuNodes.autoRepair on a new cluster)."""
    shapes: tuple[NodeShape, ...] = ()
    """Each instance type a GPU node may be, in order of preference: instanceType, then (Karpenter)
    gpuNodes.fallbackInstanceTypes, each judged by its own catalog row."""

    @property
    def scale_from_zero(self) -> bool:
        return self.min_count == 0

    @property
    def instance_types(self) -> tuple[str, ...]:
        return tuple(shape.instance_type for shape in self.shapes) or (self.instance_type,)

    def shape(self, instance_type: object) -> Optional[NodeShape]:
        """The shape of a node of ``instance_type``, None when no GPU node may be of that type."""
        return next((shape for shape in self.shapes if shape.instance_type == instance_type), None)


# --- the queue and the run -------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueExpectation:
    """Kueue's objects: the ClusterQueue (and its GPU flavor's nominal quota), the LocalQueue."""

    cluster_queue: str
    local_queue: str
    local_queue_namespace: str
    gpu_flavor: str
    nominal_quota: Resources
    """What the stack sets on the GPU flavor: one node's pod x the nodes the pool holds."""
    pool_from: str
    """Where the pool's size comes from (``gpuNodes.nodeCount 2``)."""
    priority_classes: tuple[str, ...]
    """The WorkloadPriorityClasses (kueue.x-k8s.io, cluster-scoped) the stack creates."""


@dataclass(frozen=True)
class RunExpectation:
    """What the run asks for: ``pods`` pods, one per GPU node, each asking ``per_pod``."""

    launcher: str
    pods: int
    per_pod: Resources
    priority_class: Optional[str]
    """The run's Kueue WorkloadPriorityClass (None without the queue)."""
    pod_labels: Mapping[str, str]
    """Labels every pod of the run carries (its own pods are not counted against the nodes)."""

    @property
    def total(self) -> Resources:
        return self.per_pod.times(self.pods)

    @property
    def requests(self) -> dict[str, str]:
        """One pod's requests as Kubernetes quantities ({"cpu": "190", "memory": "1883Gi", ...})."""
        return self.per_pod.quantities()


# --- the whole expectation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """Everything the checks compare the cluster with (:func:`expectation_of`)."""

    stack: str
    role: str
    """both, platform or experiment."""
    platform_stack: Optional[str]
    """An experiment's platform (``<org>/<project>/<stack>``), else None."""
    kubernetes_minor: str
    """"1.35"."""
    crds: tuple[CrdExpectation, ...]
    gpu: GpuNodeExpectation
    daemonsets: tuple[WorkloadExpectation, ...]
    controllers: tuple[WorkloadExpectation, ...]
    queue: Optional[QueueExpectation]
    training_namespace: str
    service_account: str
    shared_claim: Optional[tuple[str, str]]
    """(namespace, name) of the shared filesystem's claim, None without the shared filesystem."""
    run: Optional[RunExpectation]
    """None on a platform stack (no run)."""

    @property
    def up_cluster(self) -> str:
        """The remedy for what the cluster's stack installs: its ``pulumi up`` (the platform's for an experiment)."""
        if self.platform_stack:
            return f"pulumi up the platform stack {self.platform_stack}"
        return f"pulumi up the stack {self.stack}"

    @property
    def up_own(self) -> str:
        """The remedy for what this stack itself creates (namespace, service account, claim, LocalQueue)."""
        return f"pulumi up the stack {self.stack}"


# --- deriving it --------------------------------------------------------------------------------------


def _releases(settings: StackSettings) -> dict[str, Release]:
    """Every Helm release the cluster's stack installs for what this stack uses, by role."""
    role = settings.platform.role
    gpu = settings.gpu_nodes
    dp = settings.device_plugins
    found: dict[str, Release] = {}
    if device_plugins.wants_nvidia_plugin(gpu):
        found["nvidia"] = Release(
            device_plugins.NVIDIA_CHART, device_plugins.NVIDIA_CHART, dp.nvidia_version, device_plugins.NAMESPACE, "the NVIDIA device plugin"
        )
    if gpu.efa:
        found["efa"] = Release(device_plugins.EFA_CHART, device_plugins.EFA_CHART, dp.efa_version, device_plugins.NAMESPACE, "the EFA device plugin")
    if settings.queue.enabled:
        q = settings.queue
        found["kueue"] = Release(kueue.RELEASE_NAME, kueue.CHART.rsplit("/", 1)[-1], q.version, q.namespace, "Kueue")
    # a platform installs the JobSet controller for its experiments; a run needs it to restart
    if settings.workload.uses_jobset or role == "platform":
        restart = settings.workload.restart
        found["jobset"] = Release(
            jobset.RELEASE_NAME, jobset.CHART.rsplit("/", 1)[-1], restart.jobset_version, restart.jobset_namespace, "the JobSet controller",
            crds_first_install_only=True,
        )
    if settings.kuberay.enabled:
        kr = settings.kuberay
        found["kuberay"] = Release(kuberay.RELEASE_NAME, kuberay.CHART, kr.version, kr.namespace, "the KubeRay operator", crds_first_install_only=True)
    if settings.autoscaler.enabled:
        found["autoscaler"] = Release(
            autoscaler.CHART, autoscaler.CHART, settings.autoscaler.version, autoscaler.NAMESPACE, "the Cluster Autoscaler"
        )
    if gpu.provisioner == "karpenter":
        found["karpenter"] = Release(
            "karpenter", "karpenter", settings.gpu_nodes.karpenter.version, karpenter_specs.NAMESPACE, "the Karpenter controller",
            crds_first_install_only=True,
        )
    if settings.observability_backend == "prometheus":
        prom = settings.observability.prometheus
        found["prometheus"] = Release(
            prometheus.STACK_RELEASE, prometheus.STACK_CHART, prom.stack_version, prom.namespace, "kube-prometheus-stack",
            crds_first_install_only=True,
        )
    return found


def _crds(settings: StackSettings, releases: Mapping[str, Release]) -> tuple[CrdExpectation, ...]:
    """The CRDs whose kinds the stack creates (or whose controllers it runs), by full name."""
    crds: list[CrdExpectation] = []
    if "kueue" in releases:
        kinds = ["clusterqueues", "localqueues", "resourceflavors", "workloadpriorityclasses", "workloads"]
        if queue_plan(settings).topology.on:
            kinds.append("topologies")
        crds += [CrdExpectation(f"{kind}.kueue.x-k8s.io", releases["kueue"]) for kind in kinds]
    if "jobset" in releases:
        crds.append(CrdExpectation("jobsets.jobset.x-k8s.io", releases["jobset"]))
    if "kuberay" in releases:
        crds += [CrdExpectation(f"{kind}.ray.io", releases["kuberay"]) for kind in ("rayclusters", "rayjobs")]
    if "karpenter" in releases:
        kinds = ["nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"]
        if karpenter_specs.node_overlay_spec(settings.gpu_nodes) is not None:
            kinds.append("nodeoverlays.karpenter.sh")
        crds += [CrdExpectation(kind, releases["karpenter"]) for kind in kinds]
    if "prometheus" in releases:
        # the stack's PodMonitors, dcgm-exporter's ServiceMonitor, and the Prometheus the chart runs
        crds += [CrdExpectation(f"{kind}.monitoring.coreos.com", releases["prometheus"]) for kind in ("podmonitors", "servicemonitors", "prometheuses")]
    return tuple(crds)


def _shape(settings: StackSettings, instance: catalog.InstanceType) -> NodeShape:
    gpu = settings.gpu_nodes
    efa_devices = catalog.efa_device_count(instance) if gpu.efa and instance.efa_capable else 0
    allocatable = {GPU_RESOURCE: str(instance.gpus)}
    if efa_devices:
        allocatable[EFA_RESOURCE] = str(efa_devices)
    allocatable[HUGEPAGES_2MI_RESOURCE] = quantity(HUGEPAGES_2MI_RESOURCE, gpu.hugepages_gib * catalog.GIB_MIB) if gpu.hugepages_gib else "0"
    return NodeShape(instance.name, allocatable, quantity("memory", catalog.memory_capacity_mib(instance)))


def _gpu_nodes(settings: StackSettings, stack: str) -> GpuNodeExpectation:
    gpu = settings.gpu_nodes
    karpenter = gpu.provisioner == "karpenter"
    # instanceType with its overrides (managed groups), then Karpenter's fallbacks: catalog rows
    shapes = (_shape(settings, gpu.instance), *(_shape(settings, catalog.lookup(name)) for name in (gpu.fallback_instance_types if karpenter else [])))
    allocatable = dict(shapes[0].allocatable)
    zero_reason = ""
    if karpenter:
        zero_reason = f"gpuNodes.provisioner karpenter: NodePool {karpenter_specs.NODE_POOL} launches nodes for an admitted run's pods and removes them once empty"
    elif gpu.scale_to_zero:
        zero_reason = "gpuNodes.scaleToZero: the Cluster Autoscaler brings nodes when training pods are pending"
    elif gpu.scheduled_start is not None:
        zero_reason = f"the Capacity Block's nodes come at {gpu.capacity_block.api_time(gpu.scheduled_start)}"  # type: ignore[union-attr]
    owner = settings.platform.stack if settings.platform.role == "experiment" else stack
    topology = (*NETWORK_LAYER_LABELS, ZONE_LABEL) if gpu.instance_type in NETWORK_TOPOLOGY_TYPES else (ZONE_LABEL,)
    return GpuNodeExpectation(
        instance_type=gpu.instance_type,
        node_group=(
            f"the GPU NodePool of stack {owner} (pulumi stack output gpuNodePool)"
            if karpenter
            else f"the GPU node group of stack {owner} (pulumi stack output gpuNodeGroup)"
        ),
        count=gpu.node_count,
        min_count=0 if zero_reason else gpu.node_count,
        max_count=gpu.max_size,
        zero_reason=zero_reason,
        selector=dict(GPU_NODE_LABELS),
        labels=node_labels(gpu, autoscaled=settings.autoscaler.enabled),
        taints=tuple(node_taints()),
        topology_labels=topology,
        zone=settings.gpu_az,
        allocatable=allocatable,
        efa=EFA_RESOURCE in allocatable,
        health_agent=gpu.auto_repair and not settings.cluster.existing,
        shapes=shapes,
    )


def _workloads(releases: Mapping[str, Release]) -> tuple[tuple[WorkloadExpectation, ...], tuple[WorkloadExpectation, ...]]:
    daemonsets = []
    for key, resource in (("nvidia", GPU_RESOURCE), ("efa", EFA_RESOURCE)):
        if key in releases:
            r = releases[key]
            daemonsets.append(WorkloadExpectation(r.namespace, helm_fullname(r.name, r.chart), r, resource))
    controllers = []
    names = {
        "kueue": lambda r: f"{helm_fullname(r.name, r.chart)}-controller-manager",
        "jobset": lambda r: f"{helm_fullname(r.name, r.chart)}-controller",
        "kuberay": lambda r: kuberay.RELEASE_NAME,  # the chart's fullnameOverride (values.yaml): kuberay-operator
        "autoscaler": lambda r: autoscaler.CHART,  # fullnameOverride set by autoscaler.py
        "karpenter": lambda r: helm_fullname(r.name, r.chart),  # the chart's Deployment: karpenter
    }
    for key, name in names.items():
        if key in releases:
            r = releases[key]
            controllers.append(WorkloadExpectation(r.namespace, name(r), r))
    return tuple(daemonsets), tuple(controllers)


def _queue(settings: StackSettings) -> Optional[QueueExpectation]:
    q = settings.queue
    if not q.enabled:
        return None
    plan = queue_plan(settings)
    return QueueExpectation(
        cluster_queue=q.name,
        local_queue=q.name,
        local_queue_namespace=settings.workload.namespace,
        gpu_flavor=kueue.GPU_FLAVOR,
        nominal_quota=plan.quota,
        pool_from=plan.nodes_from,
        priority_classes=tuple(c.name for c in q.priority_classes),
    )


def _run(settings: StackSettings, stack: str) -> Optional[RunExpectation]:
    wl = settings.workload
    if settings.platform.role == "platform" or not wl.enabled:
        return None
    run = resolve_run(settings, stack)
    return RunExpectation(
        launcher=wl.launcher,
        pods=run.nnodes,
        per_pod=node_share(run.shape.pod, run.shape.efa),
        priority_class=settings.queue.priority if settings.queue.enabled else None,
        pod_labels=dict(APP_LABELS),
    )


def expectation_of(settings: StackSettings, stack: str) -> Expectation:
    """What ``settings`` (validated; an experiment's merged with its platform's sections, as the
    plan makes them) say stack ``stack``'s cluster holds."""
    releases = _releases(settings)
    daemonsets, controllers = _workloads(releases)
    role = settings.platform.role
    return Expectation(
        stack=stack,
        role=role,
        platform_stack=settings.platform.stack if role == "experiment" else None,
        kubernetes_minor=settings.cluster.kubernetes_version,
        crds=_crds(settings, releases),
        gpu=_gpu_nodes(settings, stack),
        daemonsets=daemonsets,
        controllers=controllers,
        queue=_queue(settings),
        training_namespace=settings.workload.namespace,
        service_account=SERVICE_ACCOUNT,
        shared_claim=(settings.workload.namespace, SHARED_CLAIM) if settings.shared_filesystem else None,
        run=_run(settings, stack),
    )


# --- Kubernetes quantities ------------------------------------------------------------------------

# The one parser of Kubernetes quantities is the plan reader's (exact, in base units).
parse_quantity = exact_quantity


def quantities(resources: Mapping[str, object] | None) -> dict[str, Decimal]:
    """A resource list (``{"cpu": "190", "memory": "1883Gi"}``) in base units; unreadable entries
    are left out."""
    parsed: dict[str, Decimal] = {}
    for name, value in (resources or {}).items():
        try:
            parsed[name] = parse_quantity(value)
        except ValueError:
            continue
    return parsed


def in_base_units(resources: Resources) -> dict[str, Decimal]:
    """quota.Resources (millicores, MiB) as base units by resource name."""
    return quantities(resources.quantities())


def show(name: str, amount: Decimal) -> str:
    """``amount`` (base units) of resource ``name`` as people read it: cpu "190"/"188500m",
    memory and hugepages in Gi/Mi, devices as integers."""
    if name == "cpu":
        milli = amount * 1000
        return quantity("cpu", int(milli)) if milli == milli.to_integral_value() else f"{amount.normalize()}"
    if name == "memory" or name.startswith("hugepages-"):
        mib = amount / 2**20
        if mib == mib.to_integral_value():
            return quantity(name, int(mib)) if mib else "0"
        if mib >= 1024:  # rounded down, so that "free 1883.9Gi < 1884Gi" stays true as shown
            return f"{(mib / 1024).quantize(Decimal('0.1'), rounding=ROUND_FLOOR)}Gi"
        return f"{int(mib)}Mi"
    return f"{amount.normalize():f}" if amount != amount.to_integral_value() else str(int(amount))
