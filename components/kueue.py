"""Kueue (kubernetes-sigs/kueue): the queue that admits a run only when all of it fits the pool.

One Helm release on the system nodes and the objects it reads, all derived from the GPU node
group (:mod:`.scheduling`, :mod:`.quota`), never typed:

- ``Topology`` ``rlinf-network`` (when the run asks for one): the EKS network layers
  ``topology.k8s.aws/network-node-layer-1..3``, then the node itself;
- ``ResourceFlavor`` ``rlinf-gpu``: the GPU nodes' labels and taint (and the topology); with a
  RayJob submitter pod, ``rlinf-system`` for the system nodes it runs on;
- ``ClusterQueue`` (``queue.name``): nominal quota = one node's training pod x the nodes the pool
  can hold (GPUs, EFA devices, CPU, memory, hugepages), the preemption policy;
- ``LocalQueue`` (``queue.name``) in the workload namespace; ``WorkloadPriorityClass`` per class.

A run joins with the label ``kueue.x-k8s.io/queue-name`` (:func:`run_labels`): Kueue's mutating
webhook creates it suspended (``spec.suspend: true``; the manifests do not set it, so Pulumi never
fights Kueue over it), and Kueue unsuspends the whole Job, JobSet or RayJob once its quota and
placement are reserved: all pods or none.

Chart facts (values.yaml of 0.19.2): the manager's configuration is one YAML string
(``managerConfig.controllerManagerConfigYaml``), so the whole file is given, with only the
integrations this project uses enabled (the chart's default also enables pod, deployment,
statefulset, ... whose webhooks would intercept every pod of the cluster); the git values name a
staging image (``release-0.19``, pullPolicy Always), so the release image is set.

Order: the release waits for the JobSet controller and the KubeRay operator (so each integration
finds its CRD at start), the queue objects wait for the release (its CRDs and webhooks), and the
run waits for the queue objects: a run created before Kueue's webhook would start unqueued.
The JobSet controller's own webhooks coexist with Kueue's (each mutates its own fields; JobSet
allows Kueue's pod-template changes while the JobSet is suspended).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml

from .config import AutoscalerSettings, GpuNodeSettings, KubeRaySettings, QueueSettings, SettingsModel, StackSettings, WorkloadSettings
from .helm_releases import RELEASE_OPTIONS
from .quota import HOSTNAME_LABEL, NETWORK_LAYER_LABELS, QueuePlan, Resources, queue_plan
from .scheduling import INSTANCE_TYPE_LABEL, KARPENTER_NODE_POOL, NODE_POOL_LABEL, SYSTEM_NODE_LABELS, node_labels, node_taints

CHART = "oci://registry.k8s.io/kueue/charts/kueue"
RELEASE_NAME = "kueue"
IMAGE = "registry.k8s.io/kueue/kueue"
API_VERSION = "kueue.x-k8s.io/v1beta2"

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
TOPOLOGY_NAME = "rlinf-network"
GPU_FLAVOR = "rlinf-gpu"
SYSTEM_FLAVOR = "rlinf-system"

PART_OF = {"app.kubernetes.io/part-of": "rlinf-eks"}

FRAMEWORK_JOB = "batch/job"
FRAMEWORK_JOBSET = "jobset.x-k8s.io/jobset"
FRAMEWORK_RAYJOB = "ray.io/rayjob"
FRAMEWORK_RAYCLUSTER = "ray.io/raycluster"


# --- what the run carries ------------------------------------------------------------------------


def run_labels(settings: StackSettings) -> dict[str, str]:
    """The labels that queue a run (the Job, JobSet, RayJob or long-lived RayCluster): its
    LocalQueue and priority class. Empty without the queue."""
    q = settings.queue
    if not q.enabled:
        return {}
    return {QUEUE_NAME_LABEL: q.name, PRIORITY_CLASS_LABEL: q.priority}


def pod_annotations(settings: StackSettings) -> dict[str, str]:
    """The pod-template annotation that asks Kueue to place the run's pods under one network
    layer (``kueue.x-k8s.io/podset-preferred-topology`` or ``-required-``). Empty without one."""
    if not settings.queue.enabled:
        return {}
    request = queue_plan(settings).topology
    return {request.annotation: request.label} if request.on else {}


# --- Helm values ---------------------------------------------------------------------------------


def frameworks(settings: StackSettings) -> list[str]:
    """The integrations the stack's runs use: batch Jobs (the manual launcher), JobSets (with
    restarts), RayJobs and RayClusters (KubeRay: a RayJob's own cluster, or the long-lived one)."""
    enabled = [FRAMEWORK_JOB]
    if settings.workload.uses_jobset:
        enabled.append(FRAMEWORK_JOBSET)
    if settings.kuberay.enabled:
        enabled += [FRAMEWORK_RAYJOB, FRAMEWORK_RAYCLUSTER]
    return enabled


def manager_config(settings: StackSettings) -> dict[str, Any]:
    """The chart's default controller_manager_config.yaml (0.19.2), with ``integrations.frameworks``
    narrowed to :func:`frameworks`. ``manageJobsWithoutQueueName`` stays false: the watchdog Job
    and everything else without the label are left alone."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": frameworks(settings)},
    }


def chart_values(settings: StackSettings) -> dict[str, Any]:
    """Helm values of the kueue chart (keys from its values.yaml, 0.19.2)."""
    return {
        "controllerManager": {
            # the GPU nodes are tainted and may scale to zero: the controller stays on the system nodes
            "nodeSelector": dict(SYSTEM_NODE_LABELS),
            "manager": {"image": {"repository": IMAGE, "tag": f"v{settings.queue.version}", "pullPolicy": "IfNotPresent"}},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(settings), sort_keys=False)},
    }


# --- the queue objects (camelCase: custom resources) ---------------------------------------------


def topology_spec() -> dict[str, Any]:
    return {"levels": [{"nodeLabel": label} for label in (*NETWORK_LAYER_LABELS, HOSTNAME_LABEL)]}


def gpu_flavor_spec(settings: StackSettings, plan: QueuePlan, instance_type: Optional[str] = None) -> dict[str, Any]:
    """The GPU nodes as Kueue sees them: their labels (Kueue adds them to an admitted run's pods)
    and their taint (a pod set must tolerate it to be given this flavor). With Karpenter, the
    NodePool's label too, and with fallback types the flavor's ``instance_type``: every pod of a
    pod set admitted on it then selects that one type."""
    gpu = settings.gpu_nodes
    labels = node_labels(gpu, autoscaled=settings.autoscaler.enabled)
    if gpu.provisioner == "karpenter":
        labels[NODE_POOL_LABEL] = KARPENTER_NODE_POOL
        if gpu.fallback_instance_types:
            labels[INSTANCE_TYPE_LABEL] = instance_type or gpu.instance_type
    spec: dict[str, Any] = {"nodeLabels": labels, "nodeTaints": node_taints()}
    if plan.topology.on:
        spec["topologyName"] = TOPOLOGY_NAME
    return spec


def gpu_flavor_names(settings: StackSettings) -> list[tuple[str, str]]:
    """(flavor, instance type) in the order Kueue tries them: ``rlinf-gpu`` for gpuNodes.instanceType,
    then ``rlinf-gpu-<type>`` per fallback type (Karpenter only)."""
    gpu = settings.gpu_nodes
    types = gpu.karpenter_types if gpu.provisioner == "karpenter" else [gpu.instance_type]
    return [(GPU_FLAVOR if i == 0 else f"{GPU_FLAVOR}-{t.replace('.', '-')}", t) for i, t in enumerate(types)]


def system_flavor_spec() -> dict[str, Any]:
    return {"nodeLabels": dict(SYSTEM_NODE_LABELS)}


def _flavor_quota(name: str, covered: list[str], quota: Resources) -> dict[str, Any]:
    quantities = quota.quantities()
    zero = {"cpu": "0", "memory": "0"}
    return {"name": name, "resources": [{"name": r, "nominalQuota": quantities.get(r, zero.get(r, "0"))} for r in covered]}


def cluster_queue_spec(plan: QueuePlan, settings: QueueSettings, gpu_flavors: Optional[list[str]] = None) -> dict[str, Any]:
    """One resource group over every resource the run's pods request: the GPU flavor holds the
    pool; the system flavor (a RayJob's submitter) holds one submitter pod's CPU and memory and
    none of the rest. No cohort: nothing to borrow or lend. ``gpu_flavors`` (default
    ``[rlinf-gpu]``): Karpenter's flavor per allowed type, tried in order, each holding the pool."""
    covered = list(plan.quota.by_name())
    flavors = [_flavor_quota(flavor, covered, plan.quota) for flavor in (gpu_flavors or [GPU_FLAVOR])]
    if plan.submitter is not None:
        flavors.append(_flavor_quota(SYSTEM_FLAVOR, covered, plan.submitter))
    return {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        "preemption": {"withinClusterQueue": settings.preemption, "reclaimWithinCohort": "Never"},
    }


class _ObjectWithoutSpec(pulumi.CustomResource):
    """A custom resource whose fields sit beside ``metadata`` (a WorkloadPriorityClass has
    ``value`` and ``description``, no ``spec``), which ``apiextensions.CustomResource`` cannot
    express: registered the way it registers one (type ``kubernetes:<apiVersion>:<kind>``)."""

    def __init__(self, name: str, *, api_version: str, kind: str, metadata: dict[str, Any], fields: dict[str, Any], opts: pulumi.ResourceOptions):
        version = pulumi.ResourceOptions(version=k8s._utilities.get_version())
        props = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}
        super().__init__(f"kubernetes:{api_version}:{kind}", name, props, pulumi.ResourceOptions.merge(opts, version))


# Fields the API server refuses to change in place, from the v0.19.2 CRDs' CEL rules: Topology
# spec.levels and LocalQueue spec.clusterQueue (`self == oldSelf`); a ResourceFlavor with a
# topologyName keeps its nodeLabels, tolerations and topologyName. A change replaces the object.
REPLACE_ON_CHANGES: dict[str, tuple[str, ...]] = {
    "Topology": ("spec.levels",),
    "ResourceFlavor": ("spec.nodeLabels", "spec.tolerations", "spec.topologyName"),
    "LocalQueue": ("spec.clusterQueue",),
}


def local_queue(
    resource_name: str, name: str, *, namespace: pulumi.Input[str], cluster_queue: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """The LocalQueue ``name`` in ``namespace`` that sends its runs to ``cluster_queue``: a stack's own,
    or an experiment's in its namespace on its platform's ClusterQueue."""
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=API_VERSION,
        kind="LocalQueue",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace, labels=dict(PART_OF)),
        spec={"clusterQueue": cluster_queue},
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(replace_on_changes=list(REPLACE_ON_CHANGES["LocalQueue"]), delete_before_replace=True)
        ),
    )


def _stack_field(name: str) -> Any:
    """StackSettings' own field (type, default, description): nothing written twice."""
    return copy.copy(StackSettings.model_fields[name])


class KueueSettings(SettingsModel):
    """What :class:`KueueQueue` reads, and nothing else: the stack's sections of the same names, for
    a program that brings its own cluster and node group."""

    queue: QueueSettings = _stack_field("queue")
    gpu_nodes: GpuNodeSettings
    """The GPU node group the queue admits onto, as it is (required): its shape and count are the quota."""
    autoscaler: AutoscalerSettings = _stack_field("autoscaler")
    """Whether the cluster autoscaler may add nodes up to ``gpuNodes.maxNodes`` (the quota then counts them)."""
    workload: WorkloadSettings = _stack_field("workload")
    kuberay: KubeRaySettings = _stack_field("kuberay")

    def stack_settings(self) -> StackSettings:
        """These sections as the StackSettings the queue is derived from (the others at their defaults, never read)."""
        return StackSettings.model_construct(**{name: getattr(self, name) for name in type(self).model_fields})


class KueueQueue(pulumi.ComponentResource):
    """The kueue Helm release and the stack's queue.

    Args:
        settings: the stack's settings, or :class:`KueueSettings` (only the sections read: ``queue``;
            the GPU node group, autoscaler and workload the quota and flavors follow from).
        namespace: the workload namespace (an Output of the namespace, so the LocalQueue waits for it).
        depends_on: what the release waits for (the JobSet controller, the KubeRay operator).
        opts: must carry the cluster's Kubernetes provider.

    Outputs: ``release``; ``objects`` (every queue object: the run ``depends_on`` them); ``plan``
    (the :class:`QueuePlan`, plain).
    """

    def __init__(
        self,
        name: str,
        *,
        settings: StackSettings | KueueSettings,
        namespace: pulumi.Input[str],
        depends_on: Optional[list[pulumi.Resource]] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:KueueQueue", name, None, opts)
        if isinstance(settings, KueueSettings):
            settings = settings.stack_settings()
        q = settings.queue
        self.plan = plan = queue_plan(settings)
        self.release = k8s.helm.v3.Release(
            f"{name}-controller",
            name=RELEASE_NAME,
            chart=CHART,
            version=q.version,
            namespace=q.namespace,
            create_namespace=True,
            values=chart_values(settings),
            **RELEASE_OPTIONS,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on or [])),
        )
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        objects: list[pulumi.Resource] = []

        def custom(suffix: str, kind: str, obj_name: str, namespace_: Optional[pulumi.Input[str]] = None, **body: Any) -> pulumi.Resource:
            meta = k8s.meta.v1.ObjectMetaArgs(name=obj_name, namespace=namespace_, labels=dict(PART_OF))
            opts = after_release
            if kind in REPLACE_ON_CHANGES:  # fixed names: the old object goes first
                opts = pulumi.ResourceOptions.merge(
                    opts, pulumi.ResourceOptions(replace_on_changes=list(REPLACE_ON_CHANGES[kind]), delete_before_replace=True)
                )
            resource = k8s.apiextensions.CustomResource(f"{name}-{suffix}", api_version=API_VERSION, kind=kind, metadata=meta, opts=opts, **body)
            objects.append(resource)
            return resource

        for cls in q.priority_classes:
            fields: dict[str, Any] = {"value": cls.value, **({"description": cls.description} if cls.description else {})}
            objects.append(
                _ObjectWithoutSpec(
                    f"{name}-priority-{cls.name}",
                    api_version=API_VERSION,
                    kind="WorkloadPriorityClass",
                    metadata={"name": cls.name, "labels": dict(PART_OF)},
                    fields=fields,
                    opts=after_release,
                )
            )
        if plan.topology.on:
            custom("topology", "Topology", TOPOLOGY_NAME, spec=topology_spec())
        gpu_flavors = gpu_flavor_names(settings)
        for flavor, instance_type in gpu_flavors:
            suffix = "gpu-flavor" if flavor == GPU_FLAVOR else f"flavor-{flavor}"
            custom(suffix, "ResourceFlavor", flavor, spec=gpu_flavor_spec(settings, plan, instance_type))
        if plan.submitter is not None:
            custom("system-flavor", "ResourceFlavor", SYSTEM_FLAVOR, spec=system_flavor_spec())
        custom("cluster-queue", "ClusterQueue", q.name, spec=cluster_queue_spec(plan, q, [flavor for flavor, _ in gpu_flavors]))
        objects.append(local_queue(f"{name}-local-queue", q.name, namespace=namespace, cluster_queue=q.name, opts=after_release))
        self.objects = objects
        self.register_outputs({"release": self.release.id})
