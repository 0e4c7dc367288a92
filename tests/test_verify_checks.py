"""The verify ladder's pure checks (L0 control plane, L1 GPU nodes, L2 add-ons, L5 admission) and
the Expectation they compare with, on API objects shaped as an EKS cluster returns them: p5.48xlarge
and p4d.24xlarge GPU nodes with their real labels, DaemonSet and Deployment statuses, a ClusterQueue
and the stack's other objects as the plan renders them (with the status the API server adds).

Every level: a healthy cluster passes; each way it can be broken fails with one line of detail and
one line of remedy."""

from __future__ import annotations

import copy
import functools
from decimal import Decimal
from typing import Any

import pytest
import yaml

from rlinf_eks import catalog
from rlinf_eks.quota import Resources
from rlinf_eks.verify.addons import check_addons
from rlinf_eks.verify.admission import check_admission, flavor_quota, pod_requests
from rlinf_eks.verify.control_plane import check_control_plane, server_minor
from rlinf_eks.verify.expect import Expectation, expectation_of, helm_fullname, in_base_units, parse_quantity, quantities, show
from rlinf_eks.verify.model import CheckResult, Observed
from rlinf_eks.verify.nodes import AGENT_CONDITIONS, check_nodes
from tests.harness import SHARED, manifests, plan_stack, require_shared, settings
from tests.reference import reference

GI = 2**30

# --- the stacks' expectations and the objects their plans render ----------------------------------


@functools.lru_cache(maxsize=None)
def expect(stack: str) -> Expectation:
    return expectation_of(plan_stack(stack).settings, stack)


def planned(stack: str) -> dict[str, dict[str, Any]]:
    """The stack's Kubernetes objects as planned, by kind/namespace/name; an experiment's cluster
    objects (ClusterQueue, priority classes) are its platform's."""
    objects: dict[str, dict[str, Any]] = {}
    sources = [stack] if plan_stack(stack).settings.platform.role != "experiment" else ["platform", stack]
    for source in sources:
        for manifest in manifests(plan_stack(source)).values():
            meta = manifest["metadata"]
            objects[f"{manifest['kind']}/{meta.get('namespace', '')}/{meta['name']}"] = copy.deepcopy(manifest)
    return objects


def by_kind(objects: dict[str, dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for key, obj in objects.items() if key.startswith(f"{kind}/")]


# --- API objects ----------------------------------------------------------------------------------

VERSION = {
    "major": "1", "minor": "35+", "gitVersion": "v1.35.2-eks-4e3f1a2", "gitCommit": "9d2f3c1e5b7a", "gitTreeState": "clean",
    "buildDate": "2026-10-14T08:12:44Z", "goVersion": "go1.24.9", "compiler": "gc", "platform": "linux/amd64",
}  # fmt: skip
IDENTITY = {
    "username": "arn:aws:sts::123456789012:assumed-role/Admin/alice",
    "uid": "aws-iam-authenticator:123456789012:AROAEXAMPLEID12345678",
    "groups": ["system:authenticated"],
    "extra": {"accessKeyId": ["ASIAEXAMPLE"], "arn": ["arn:aws:sts::123456789012:assumed-role/Admin/alice"], "principalId": ["AROAEXAMPLEID12345678"]},
}


def crd(name: str, established: bool = True) -> dict[str, Any]:
    plural, group = name.split(".", 1)
    conditions = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": "2026-11-02T10:01:12Z"},
        {"type": "Established", "status": "True" if established else "False", "reason": "InitialNamesAccepted" if established else "Installing",
         "message": "the initial names have been accepted" if established else "the CRD is being installed", "lastTransitionTime": "2026-11-02T10:01:12Z"},
    ]  # fmt: skip
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "uid": f"uid-{plural}", "resourceVersion": "4711"},
        "spec": {"group": group, "names": {"plural": plural, "kind": plural.rstrip("s").capitalize()}, "scope": "Namespaced"},
        "status": {"conditions": conditions, "acceptedNames": {"plural": plural}, "storedVersions": ["v1"]},
    }  # fmt: skip


def gpu_node(e: Expectation, index: int, **edits: Any) -> dict[str, Any]:
    """A GPU node of ``e``'s node group as EKS registers it: the kubelet's, the cloud provider's and
    EKS's labels, the node group's labels and taint, allocatable from the catalog (p5.48xlarge:
    cpu 191450m), the kubelet's conditions and the node monitoring agent's."""
    instance = catalog.CATALOG[e.gpu.instance_type]
    millicpu, memory_mib = catalog.allocatable(instance, parse_quantity(e.gpu.allocatable["hugepages-2Mi"]) // 2**20)
    name = f"ip-10-0-{16 + index}-{101 + index}.ec2.internal"
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": instance.name, "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND", "eks.amazonaws.com/nodegroup": "gpu-nodes-7c1e2f9",
        "eks.amazonaws.com/nodegroup-image": "ami-0a1b2c3d4e5f67890", "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0",
        "eks.amazonaws.com/sourceLaunchTemplateVersion": "1", "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": e.gpu.zone, "k8s.io/cloud-provider-aws": "a94967527effcefb5f5829f529c0a1b9",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance.name,
        "topology.k8s.aws/network-node-layer-1": "nn-1a2b3c4d5e6f70812", "topology.k8s.aws/network-node-layer-2": "nn-2b3c4d5e6f7081923",
        "topology.k8s.aws/network-node-layer-3": f"nn-3c4d5e6f708192a3{index}", "topology.k8s.aws/zone-id": "use1-az4",
        "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": e.gpu.zone,
        **e.gpu.labels,
    }  # fmt: skip
    allocatable = {
        "cpu": f"{millicpu}m", "ephemeral-storage": "189217377011", "hugepages-1Gi": "0", "memory": f"{memory_mib * 1024}Ki", "pods": "250",
        **e.gpu.allocatable,
    }  # fmt: skip
    capacity = {**allocatable, "cpu": str(instance.vcpu), "memory": f"{catalog.memory_capacity_mib(instance) * 1024}Ki"}
    beat = "2026-12-01T09:58:00Z"
    conditions = [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
        {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure"},
        {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
        {"type": "KernelReady", "status": "True", "reason": "KernelIsReady", "message": "Monitoring for the Kernel system is active"},
        {"type": "StorageReady", "status": "True", "reason": "DiskIsReady", "message": "Monitoring for the Disk system is active"},
        {"type": "ContainerRuntimeReady", "status": "True", "reason": "ContainerRuntimeIsReady", "message": "Monitoring for the ContainerRuntime system is active"},
        {"type": "NetworkingReady", "status": "True", "reason": "NetworkingIsReady", "message": "Monitoring for the Networking system is active"},
        {"type": "AcceleratedHardwareReady", "status": "True", "reason": "NvidiaGPUIsReady", "message": "Monitoring for the Nvidia GPU system is active"},
    ]  # fmt: skip
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"node-uid-{index}", "labels": labels,
                     "annotations": {"alpha.kubernetes.io/provided-node-ip": f"10.0.{16 + index}.{101 + index}", "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"providerID": f"aws:///{e.gpu.zone}/i-0{index}1234567890abcde", "taints": [dict(t) for t in e.gpu.taints]},
        "status": {
            "allocatable": allocatable, "capacity": capacity,
            "conditions": [{**c, "lastHeartbeatTime": beat, "lastTransitionTime": "2026-12-01T08:00:00Z"} for c in conditions],
            "nodeInfo": {"kubeletVersion": "v1.35.2-eks-4e3f1a2", "containerRuntimeVersion": "containerd://2.1.4", "osImage": "Amazon Linux 2023.9.20261110",
                         "architecture": "amd64", "operatingSystem": "linux"},
        },
    }  # fmt: skip
    for path, value in edits.items():
        _set(node, path, value)
    return node


def system_node(index: int = 0) -> dict[str, Any]:
    name = f"ip-10-0-{32 + index}-{11 + index}.ec2.internal"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"role": "system", "node.kubernetes.io/instance-type": "m6i.xlarge", "topology.kubernetes.io/zone": "us-east-1b",
                                              "eks.amazonaws.com/nodegroup": "rlinf-multi-node-system", "kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "3920m", "memory": "14462908Ki", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }  # fmt: skip


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` (None deletes it)."""
    *parents, last = path.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    if value is None:
        obj.pop(last, None)
    else:
        obj[last] = value


def set_condition(obj: dict[str, Any], kind: str, status: str, reason: str = "", message: str = "") -> None:
    conditions = [c for c in obj.setdefault("status", {}).setdefault("conditions", []) if c["type"] != kind]
    obj["status"]["conditions"] = conditions + [{"type": kind, "status": status, "reason": reason, "message": message}]


def daemonset(ns: str, name: str, nodes: int, ready: int | None = None) -> dict[str, Any]:
    ready = nodes if ready is None else ready
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns, "uid": f"ds-{name}", "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": name}},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": name}}},
        "status": {"currentNumberScheduled": nodes, "desiredNumberScheduled": nodes, "numberAvailable": ready, "numberMisscheduled": 0,
                   "numberReady": ready, "observedGeneration": 1, "updatedNumberScheduled": nodes},
    }  # fmt: skip


def pod(ns: str, name: str, node: str, *, owner: tuple[str, str] | None = None, labels: dict[str, str] | None = None,
        requests: dict[str, str] | None = None, phase: str = "Running", ready: bool = True, waiting: str | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": f"ds-{owner[1]}", "controller": True}]
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": "2026-12-01T08:03:00Z"}}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "example", "resources": {"requests": dict(requests or {})}}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 4 if waiting else 0, "state": state}]},
    }  # fmt: skip


# What else runs on every GPU node (EKS's own DaemonSets), with their requests.
NODE_DAEMONS = {
    ("kube-system", "aws-node"): {"cpu": "25m"},
    ("kube-system", "kube-proxy"): {"cpu": "100m"},
    ("kube-system", "eks-pod-identity-agent"): {"cpu": "25m", "memory": "64Mi"},
    ("kube-system", "eks-node-monitoring-agent"): {"cpu": "10m", "memory": "30Mi"},
    ("kube-system", "fsx-csi-node"): {"cpu": "10m", "memory": "40Mi"},
}


def deployment(ns: str, name: str, available: bool = True) -> dict[str, Any]:
    conditions = [
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": f'ReplicaSet "{name}-6f7d9c8b5" has successfully progressed.'},
        {"type": "Available", "status": "True" if available else "False", "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
         "message": "Deployment has minimum availability." if available else "Deployment does not have minimum availability."},
    ]  # fmt: skip
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": 1 if available else 0, "availableReplicas": 1 if available else 0,
                   "unavailableReplicas": 0 if available else 1, "conditions": conditions},
    }  # fmt: skip


def with_status(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(obj), "status": status}


ACTIVE = {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads", "lastTransitionTime": "2026-11-02T10:04:00Z"}


def cluster_state(stack: str, nodes: int | None = None) -> Observed:
    """A healthy cluster of ``stack``: ``nodes`` GPU nodes (default gpuNodes.nodeCount), every
    plugin's pod on each, the controllers Available, the planned queue objects Active, the
    namespace, service account and claim there."""
    e = expect(stack)
    n = e.gpu.count if nodes is None else nodes
    gpu = [gpu_node(e, i) for i in range(n)]
    objects = planned(stack)
    observed = Observed(
        server_version=dict(VERSION),
        identity=dict(IDENTITY),
        crds=[crd(c.name) for c in e.crds] + [crd("ingressclassparams.elbv2.k8s.aws"), crd("policyendpoints.networking.k8s.aws")],
        nodes=[*gpu, system_node(0), system_node(1)],
        deployments=[deployment(c.namespace, c.name) for c in e.controllers] + [deployment("kube-system", "coredns")],
        priority_classes=by_kind(objects, "WorkloadPriorityClass")
        + [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-node-critical"}, "value": 2000001000}],
    )
    for ds in e.daemonsets:
        observed.daemonsets.append(daemonset(ds.namespace, ds.name, n))
        for node in gpu:
            suffix = node["metadata"]["uid"][-1]
            observed.pods.append(pod(ds.namespace, f"{ds.name}-x{suffix}k2", node["metadata"]["name"], owner=("DaemonSet", ds.name),
                                     labels={"app.kubernetes.io/name": ds.name}, requests={"cpu": "10m", "memory": "20Mi"} if "efa" in ds.name else {}))  # fmt: skip
    for node in gpu:
        for (ns, name), requests in NODE_DAEMONS.items():
            observed.pods.append(pod(ns, f"{name}-{node['metadata']['uid'][-1]}q7", node["metadata"]["name"], owner=("DaemonSet", name), requests=requests))
    observed.cluster_queues = [
        with_status(cq, {"conditions": [ACTIVE], "admittedWorkloads": 0, "pendingWorkloads": 0, "reservingWorkloads": 0})
        for cq in by_kind(objects, "ClusterQueue")
    ]
    observed.local_queues = [with_status(lq, {"conditions": [ACTIVE], "admittedWorkloads": 0, "pendingWorkloads": 0}) for lq in by_kind(objects, "LocalQueue")]
    observed.namespaces = [with_status(ns, {"phase": "Active"}) for ns in by_kind(objects, "Namespace")] + [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}, "status": {"phase": "Active"}}
    ]
    observed.service_accounts = [copy.deepcopy(sa) for sa in by_kind(objects, "ServiceAccount")]
    for sa in observed.service_accounts:
        sa["metadata"].setdefault("annotations", {})["eks.amazonaws.com/role-arn"] = "arn:aws:iam::123456789012:role/rlinf-training-4b1c2d"
    observed.claims = [
        with_status(pvc, {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "2400Gi"}})
        for pvc in by_kind(objects, "PersistentVolumeClaim")
    ]
    for claim in observed.claims:
        claim["spec"]["volumeName"] = f"{claim['metadata']['namespace']}-shared-fs"
    return observed


def outcomes(results: list[CheckResult]) -> dict[str, str]:
    return {r.name: r.outcome for r in results}


def result(results: list[CheckResult], name: str) -> CheckResult:
    (found,) = [r for r in results if r.name == name]
    return found


def failed_one(results: list[CheckResult], name: str) -> CheckResult:
    """The one failing check, named ``name``; every failure has one line of detail and of remedy."""
    failing = [r for r in results if r.outcome == "fail"]
    assert [r.name for r in failing] == [name], [(r.name, r.detail) for r in failing]
    found = failing[0]
    assert found.detail and found.remedy and "\n" not in found.detail + found.remedy
    return found


def all_pass(results: list[CheckResult]) -> None:
    assert all(r.outcome == "pass" for r in results), [(r.name, r.outcome, r.detail) for r in results if r.outcome != "pass"]


# --- quantities -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("191450m", Decimal("191.45")), ("8", Decimal(8)), ("32", Decimal(32)), ("5Gi", Decimal(5 * GI)), ("2097152Ki", Decimal(2 * GI)),
        ("1883Gi", Decimal(1883 * GI)), ("512Mi", Decimal(512 * 2**20)), ("1Ti", Decimal(2**40)), ("0.5Gi", Decimal(GI // 2)),
        ("100M", Decimal(10**8)), ("1k", Decimal(1000)), ("3G", Decimal(3 * 10**9)), ("250u", Decimal("0.00025")), ("12n", Decimal("1.2E-8")),
        ("1e3", Decimal(1000)), ("1.5E-3", Decimal("0.0015")), ("1.5", Decimal("1.5")), (".5", Decimal("0.5")), ("+2", Decimal(2)),
        ("0", Decimal(0)), (3, Decimal(3)), (0.25, Decimal("0.25")),
    ],
)  # fmt: skip
def test_kubernetes_quantities_parse_to_exact_base_units(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "5 Gi", "5GB", "5gi", "1.2.3", "abc", "5Ki5", None, True, [1]])
def test_what_is_not_a_quantity_is_refused(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_quantities_are_shown_as_people_write_them_and_a_resource_list_skips_what_it_cannot_read():
    assert show("cpu", Decimal("191.45")) == "191450m" and show("cpu", Decimal(190)) == "190"
    assert show("memory", Decimal(1883 * GI)) == "1883Gi" and show("memory", Decimal(1500 * 2**20)) == "1500Mi"
    assert show("hugepages-2Mi", Decimal(0)) == "0" and show("nvidia.com/gpu", Decimal(8)) == "8"
    assert quantities({"cpu": "190", "memory": "bogus", "nvidia.com/gpu": 8}) == {"cpu": Decimal(190), "nvidia.com/gpu": Decimal(8)}
    assert in_base_units(Resources(gpus=8, efa=32, millicpu=190500, memory_mib=1024, hugepages_mib=5120)) == {
        "cpu": Decimal("190.5"), "memory": Decimal(GI), "nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32, "hugepages-2Mi": Decimal(5 * GI),
    }  # fmt: skip


# --- the expectation ---------------------------------------------------------------------------------


def test_the_multi_node_expectation_follows_from_its_settings():
    e = expect("multi-node")
    assert e.role == "both" and e.platform_stack is None and e.kubernetes_minor == "1.35"
    assert {c.name for c in e.crds} == {
        "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io", "topologies.kueue.x-k8s.io", "jobsets.jobset.x-k8s.io",
        "podmonitors.monitoring.coreos.com", "servicemonitors.monitoring.coreos.com", "prometheuses.monitoring.coreos.com",
    }  # fmt: skip
    g = e.gpu
    assert (g.instance_type, g.count, g.min_count, g.max_count, g.scale_from_zero) == ("p5.48xlarge", 2, 2, 2, False)
    assert dict(g.allocatable) == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5Gi"}
    assert dict(g.labels) == {"role": "gpu-training", "vpc.amazonaws.com/efa.present": "true"} and dict(g.selector) == {"role": "gpu-training"}
    assert [dict(t) for t in g.taints] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert g.topology_labels == (
        "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3", "topology.kubernetes.io/zone",
    )  # fmt: skip
    assert g.zone == "us-east-1a" and g.health_agent
    assert [d.key for d in e.daemonsets] == ["kube-system/nvidia-device-plugin", "kube-system/aws-efa-k8s-device-plugin"]
    assert [c.key for c in e.controllers] == ["kueue-system/kueue-controller-manager", "jobset-system/jobset-controller"]
    assert (e.training_namespace, e.service_account, e.shared_claim) == ("rlinf", "training-sa", ("rlinf", "shared-fs"))
    assert e.run is not None and e.run.pods == 2 and e.run.priority_class == "rlinf-normal"
    assert e.run.requests == {"cpu": "190", "memory": "1883Gi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5Gi"}
    assert e.up_cluster == e.up_own == "pulumi up the stack multi-node"


def test_the_run_asks_what_its_planned_pods_request_and_the_queue_holds_what_its_planned_cluster_queue_holds():
    e, objects = expect("multi-node"), planned("multi-node")
    (jobset,) = by_kind(objects, "JobSet")
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod_requests(template) == in_base_units(e.run.per_pod)
    assert all(template["metadata"]["labels"][k] == v for k, v in e.run.pod_labels.items())
    (cq,) = by_kind(objects, "ClusterQueue")
    assert e.queue is not None and flavor_quota(cq, e.queue.gpu_flavor) == in_base_units(e.queue.nominal_quota)
    assert {p["metadata"]["name"] for p in by_kind(objects, "WorkloadPriorityClass")} == set(e.queue.priority_classes)
    assert [(lq["metadata"]["namespace"], lq["metadata"]["name"], lq["spec"]["clusterQueue"]) for lq in by_kind(objects, "LocalQueue")] == [
        (e.queue.local_queue_namespace, e.queue.local_queue, e.queue.cluster_queue)
    ]
    assert [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in by_kind(objects, "PersistentVolumeClaim")] == [e.shared_claim]


def pod_templates(stack: str) -> list[dict[str, Any]]:
    """The GPU pods' templates of the stack's planned run: the Job's, the JobSet's, the RayJob's head and workers."""
    templates = []
    for obj in planned(stack).values():
        if obj["kind"] == "Job" and "watchdog" not in obj["metadata"]["name"]:
            templates.append(obj["spec"]["template"])
        elif obj["kind"] == "JobSet":
            templates += [job["template"]["spec"]["template"] for job in obj["spec"]["replicatedJobs"]]
        elif obj["kind"] == "RayJob":
            cluster = obj["spec"]["rayClusterSpec"]
            templates += [cluster["headGroupSpec"]["template"], *(group["template"] for group in cluster["workerGroupSpecs"])]
    return templates


@pytest.mark.parametrize("stack", ["single-node", "multi-node-kuberay"])
def test_every_planned_gpu_pod_requests_what_the_expectation_says_one_pod_asks(stack):
    e = expect(stack)
    templates = pod_templates(stack)
    assert templates and all(pod_requests(t) == in_base_units(e.run.per_pod) for t in templates)
    assert all(t["metadata"]["labels"][k] == v for t in templates for k, v in e.run.pod_labels.items())


def test_the_single_node_stack_has_no_claim_no_jobset_and_a_one_pod_run():
    e = expect("single-node")
    assert e.shared_claim is None and e.run.pods == 1 and e.gpu.count == 1
    assert not [c for c in e.crds if "jobset" in c.name] and [c.name for c in e.controllers] == ["kueue-controller-manager"]
    assert e.run.requests["cpu"] == "189"  # the cloudwatch backend's DaemonSets take more than prometheus'


def test_the_autoscaled_stack_may_hold_zero_p4d_nodes_and_runs_the_autoscaler():
    e = expect("autoscaled")
    g = e.gpu
    assert (g.instance_type, g.count, g.min_count, g.max_count, g.scale_from_zero) == ("p4d.24xlarge", 2, 0, 2, True)
    assert "scaleToZero" in g.zero_reason and g.labels["k8s.amazonaws.com/accelerator"] == "nvidia-a100"
    assert g.allocatable["vpc.amazonaws.com/efa"] == "4"
    assert "kube-system/cluster-autoscaler" in [c.key for c in e.controllers]
    # the autoscaled pool asks no topology (Kueue places by existing nodes): no Topology CRD needed
    assert "topologies.kueue.x-k8s.io" not in [c.name for c in e.crds]


def test_an_experiment_expects_its_platforms_nodes_and_controllers_and_its_own_namespace():
    e = expect("experiment-embodied")
    assert e.role == "experiment" and e.platform_stack == "organization/rlinf-eks/platform"
    assert e.gpu.instance_type == "p5.48xlarge" and e.gpu.count == 2 and "organization/rlinf-eks/platform" in e.gpu.node_group
    assert [c.name for c in e.controllers] == ["kueue-controller-manager", "jobset-controller", "kuberay-operator"]
    assert e.training_namespace == "exp-embodied" and e.shared_claim == ("exp-embodied", "shared-fs")
    assert e.queue.cluster_queue == "rlinf" and e.queue.local_queue_namespace == "exp-embodied"
    assert e.run.pods == 2 and e.run.requests["vpc.amazonaws.com/efa"] == "32"
    assert e.up_cluster == "pulumi up the platform stack organization/rlinf-eks/platform" and e.up_own == "pulumi up the stack experiment-embodied"


def test_a_platform_has_no_run_but_installs_jobset_for_its_experiments():
    e = expect("platform")
    assert e.run is None and e.role == "platform"
    assert "jobset-system/jobset-controller" in [c.key for c in e.controllers] and "jobsets.jobset.x-k8s.io" in [c.name for c in e.crds]
    assert {"rayjobs.ray.io", "rayclusters.ray.io"} <= {c.name for c in e.crds}


def test_bottlerocket_brings_its_own_nvidia_plugin_and_no_queue_means_no_kueue():
    e = expectation_of(settings(gpuNodes={"amiType": "BOTTLEROCKET_x86_64_NVIDIA", "rootVolumeGib": 400}, queue={"enabled": False}), "bare")
    assert [d.name for d in e.daemonsets] == ["aws-efa-k8s-device-plugin"]
    assert e.queue is None and e.run.priority_class is None and not e.crds and not e.controllers


def test_the_objects_are_named_as_the_pinned_charts_name_them():
    # Helm's fullname rule: the release name when it contains the chart's name
    assert helm_fullname("kueue", "kueue") == "kueue" and helm_fullname("rlinf", "kueue") == "rlinf-kueue"
    helm = require_shared(SHARED / "schemas" / "helm", "the pinned charts' values")
    charts = ("kuberay-operator-1.7.0", "kueue-0.19.2", "jobset-0.12.0", "nvidia-device-plugin-0.20.0", "aws-efa-k8s-device-plugin-v0.5.30")
    values = {chart: yaml.safe_load(reference(f"schemas/helm/{chart}/values.yaml").read_text()) for chart in charts}
    assert values["kuberay-operator-1.7.0"]["fullnameOverride"] == "kuberay-operator"  # the operator's Deployment name
    # the others leave the fullname to the rule
    assert not any(values[c].get("fullnameOverride") for c in values if not c.startswith("kuberay"))
    e = expect("platform")
    assert {c.name for c in e.controllers} == {"kueue-controller-manager", "jobset-controller", "kuberay-operator"}


# --- L0: the control plane ----------------------------------------------------------------------------


def test_a_healthy_control_plane_passes():
    results = check_control_plane(expect("multi-node"), cluster_state("multi-node"))
    all_pass(results)
    assert [r.name for r in results] == ["api.reachable", "api.version", "api.identity", "crds.kueue", "crds.jobset", "crds.kps"]
    assert "alice" in result(results, "api.identity").detail and "1.35" in result(results, "api.version").detail
    assert {r.level for r in results} == {0}


def test_an_unreachable_api_server_fails_and_skips_the_rest():
    observed = cluster_state("single-node")
    observed.server_version = None
    results = check_control_plane(expect("single-node"), observed)
    assert failed_one(results, "api.reachable").remedy.startswith("check the kubeconfig")
    assert {r.outcome for r in results[1:]} == {"skip"}


@pytest.mark.parametrize(
    ("version", "words"),
    [
        ({"major": "1", "minor": "34+", "gitVersion": "v1.34.6-eks-8f2e0b1"}, "to upgrade the control plane to 1.35"),
        ({"major": "1", "minor": "36", "gitVersion": "v1.36.0-eks-1a2b3c4"}, "EKS cannot downgrade"),
    ],
)
def test_a_cluster_of_another_minor_fails(version, words):
    observed = cluster_state("single-node")
    observed.server_version = version
    failure = failed_one(check_control_plane(expect("single-node"), observed), "api.version")
    assert "the stack says cluster.kubernetesVersion 1.35" in failure.detail and words in failure.remedy


def test_the_minor_comes_from_eks_plus_minors_or_the_git_version():
    assert server_minor({"major": "1", "minor": "35+"}) == "1.35"
    assert server_minor({"gitVersion": "v1.35.2-eks-4e3f1a2"}) == "1.35"
    assert server_minor({"major": "", "minor": ""}) is None


def test_an_unknown_identity_fails_and_a_whole_review_is_read():
    e, observed = expect("single-node"), cluster_state("single-node")
    observed.identity = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "status": {"userInfo": IDENTITY}}
    assert result(check_control_plane(e, observed), "api.identity").outcome == "pass"
    observed.identity = {}
    assert "access entry" in failed_one(check_control_plane(e, observed), "api.identity").remedy


def test_a_missing_crd_fails_naming_it_and_the_release():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.crds = [c for c in observed.crds if c["metadata"]["name"] != "topologies.kueue.x-k8s.io"]
    failure = failed_one(check_control_plane(e, observed), "crds.kueue")
    assert "missing: topologies.kueue.x-k8s.io" in failure.detail and "helm status kueue -n kueue-system" in failure.remedy


def test_a_crd_not_established_fails_and_a_crds_folder_chart_says_helm_installs_it_once():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.crds = [crd(c["metadata"]["name"], established=c["metadata"]["name"] != "jobsets.jobset.x-k8s.io") for c in observed.crds]
    failure = failed_one(check_control_plane(e, observed), "crds.jobset")
    assert "not Established: jobsets.jobset.x-k8s.io Established=False (Installing" in failure.detail
    assert "crds/ on the first install only" in failure.remedy and "pulumi up the stack multi-node" in failure.remedy


def test_an_experiments_control_plane_remedies_name_its_platform():
    e, observed = expect("experiment-embodied"), cluster_state("experiment-embodied")
    all_pass(check_control_plane(e, observed))
    observed.server_version = {"major": "1", "minor": "34+", "gitVersion": "v1.34.6-eks-8f2e0b1"}
    observed.crds = [c for c in observed.crds if not c["metadata"]["name"].endswith("ray.io")]
    results = check_control_plane(e, observed)
    assert outcomes(results)["api.version"] == outcomes(results)["crds.kuberay-operator"] == "fail"
    assert "pulumi up the platform stack organization/rlinf-eks/platform" in result(results, "api.version").remedy


# --- L1: the GPU nodes ----------------------------------------------------------------------------------


def test_healthy_p5_nodes_pass():
    results = check_nodes(expect("multi-node"), cluster_state("multi-node"))
    all_pass(results)
    assert len(results) == 8 and {r.level for r in results} == {1}
    assert "vpc.amazonaws.com/efa 32" in result(results, "gpu-nodes.allocatable").detail
    assert "node group gpu-nodes-7c1e2f9" in result(results, "gpu-nodes.count").detail


def test_fewer_nodes_than_the_node_count_fails_naming_the_node_group_and_a_node_that_lost_its_label():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    del observed.nodes[1]["metadata"]["labels"]["role"]
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.count")
    assert "1 GPU node (role=gpu-training)" in failure.detail and "wants 2" in failure.detail
    assert "1 p5.48xlarge node without role=gpu-training: ip-10-0-17-102.ec2.internal" in failure.detail
    assert "the GPU node group of stack multi-node" in failure.remedy


def test_a_fixed_group_without_nodes_fails_and_skips_the_per_node_checks():
    results = check_nodes(expect("single-node"), cluster_state("single-node", nodes=0))
    assert failed_one(results, "gpu-nodes.count").detail.startswith("0 GPU nodes")
    assert {r.outcome for r in results[1:]} == {"skip"}


def test_scale_from_zero_passes_with_no_node_and_says_the_fabric_levels_will_skip():
    results = check_nodes(expect("autoscaled"), cluster_state("autoscaled", nodes=0))
    count = result(results, "gpu-nodes.count")
    assert count.outcome == "pass" and count.detail.startswith("0 nodes: scale-from-zero, L3-L4 will skip")
    assert {r.outcome for r in results[1:]} == {"skip"}
    # one of up to two nodes up: fine too, and that node is checked
    partial = check_nodes(expect("autoscaled"), cluster_state("autoscaled", nodes=1))
    all_pass(partial)
    assert "1 of up to 2" in result(partial, "gpu-nodes.count").detail


def test_more_labelled_nodes_than_the_maximum_fails():
    e = expect("single-node")
    observed = cluster_state("single-node", nodes=2)
    assert "more than the group's maximum 1" in failed_one(check_nodes(e, observed), "gpu-nodes.count").detail


def test_a_node_without_efa_devices_fails_and_names_the_efa_plugin():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    del observed.nodes[0]["status"]["allocatable"]["vpc.amazonaws.com/efa"]
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.allocatable")
    assert failure.detail == "ip-10-0-16-101.ec2.internal: vpc.amazonaws.com/efa missing (expects 32)"
    assert "kube-system/aws-efa-k8s-device-plugin" in failure.remedy


def test_a_node_with_other_figures_than_the_catalogs_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.nodes[1]["status"]["allocatable"].update({"vpc.amazonaws.com/efa": "16", "hugepages-2Mi": "0", "nvidia.com/gpu": "0"})
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.allocatable")
    assert "nvidia.com/gpu 0 (expects 8)" in failure.detail and "vpc.amazonaws.com/efa 16 (expects 32)" in failure.detail
    assert "hugepages-2Mi 0 (expects 5Gi)" in failure.detail
    assert "nvidia-device-plugin" in failure.remedy and "gpuNodes.hugepagesGib" in failure.remedy and "instanceOverrides" in failure.remedy


def test_a_node_of_another_instance_type_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "p5e.48xlarge"
    assert "p5e.48xlarge" in failed_one(check_nodes(e, observed), "gpu-nodes.instance-type").detail


def test_a_not_ready_or_cordoned_node_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    set_condition(observed.nodes[0], "Ready", "False", "KubeletNotReady", "container runtime network not ready: NetworkReady=false")
    observed.nodes[1]["spec"]["unschedulable"] = True  # kubectl cordon: the field and its taint
    observed.nodes[1]["spec"]["taints"].append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-12-01T09:00:00Z"})
    failure = failed_one([r for r in check_nodes(e, observed) if r.name != "gpu-nodes.taints"], "gpu-nodes.ready")
    assert "Ready=False (KubeletNotReady" in failure.detail and "ip-10-0-17-102.ec2.internal: cordoned" in failure.detail


def test_a_gpu_fault_the_monitoring_agent_reports_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    set_condition(observed.nodes[1], "AcceleratedHardwareReady", "False", "NvidiaXID79Error", "NVRM: Xid (PCI:0000:97:00): 79, GPU has fallen off the bus")
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.health")
    assert "AcceleratedHardwareReady=False (NvidiaXID79Error" in failure.detail and "auto repair" in failure.remedy


def test_memory_pressure_and_a_missing_monitoring_agent_fail():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    set_condition(observed.nodes[0], "MemoryPressure", "True", "KubeletHasInsufficientMemory")
    node = observed.nodes[1]
    node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] not in AGENT_CONDITIONS]
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.health")
    assert "MemoryPressure=True" in failure.detail and "no eks-node-monitoring-agent condition" in failure.detail
    assert "aws eks describe-addon --addon-name eks-node-monitoring-agent" in failure.remedy


def test_a_missing_gpu_taint_or_a_foreign_taint_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.nodes[0]["spec"]["taints"] = []
    observed.nodes[1]["spec"]["taints"].append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.taints")
    assert "lacks nvidia.com/gpu=true:NoSchedule" in failure.detail and "also node.kubernetes.io/unschedulable:NoSchedule" in failure.detail


def test_a_node_without_the_efa_label_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    del observed.nodes[0]["metadata"]["labels"]["vpc.amazonaws.com/efa.present"]
    assert "lacks vpc.amazonaws.com/efa.present=true" in failed_one(check_nodes(e, observed), "gpu-nodes.labels").detail


def test_a_node_without_network_layers_or_in_another_zone_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    del observed.nodes[0]["metadata"]["labels"]["topology.k8s.aws/network-node-layer-3"]
    observed.nodes[1]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-east-1c"
    failure = failed_one(check_nodes(e, observed), "gpu-nodes.topology")
    assert "lacks topology.k8s.aws/network-node-layer-3" in failure.detail and "in us-east-1c (expects us-east-1a)" in failure.detail
    assert "Kueue" in failure.remedy and "availabilityZone us-east-1a" in failure.remedy


# --- L2: the add-ons -----------------------------------------------------------------------------------


def test_healthy_add_ons_pass():
    results = check_addons(expect("multi-node"), cluster_state("multi-node"))
    all_pass(results)
    assert [r.name for r in results] == [
        "daemonset.nvidia-device-plugin", "daemonset.aws-efa-k8s-device-plugin", "controller.kueue-controller-manager", "controller.jobset-controller",
        "queue.cluster-queue", "queue.local-queue", "training.namespace", "training.service-account", "shared-fs.claim",
    ]  # fmt: skip
    assert {r.level for r in results} == {2}


def test_a_device_plugin_missing_on_one_gpu_node_fails_naming_the_node():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.pods = [p for p in observed.pods if not (p["metadata"]["name"].startswith("aws-efa") and p["spec"]["nodeName"] == "ip-10-0-17-102.ec2.internal")]
    failure = failed_one(check_addons(e, observed), "daemonset.aws-efa-k8s-device-plugin")
    assert "no pod on ip-10-0-17-102.ec2.internal" in failure.detail and "nodeSelector and affinity" in failure.remedy


def test_a_crash_looping_plugin_pod_and_a_short_ready_count_fail():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    (crashing,) = [p for p in observed.pods if p["metadata"]["name"].startswith("nvidia-device-plugin") and p["spec"]["nodeName"].startswith("ip-10-0-16")]
    crashing.update(pod("kube-system", crashing["metadata"]["name"], crashing["spec"]["nodeName"], owner=("DaemonSet", "nvidia-device-plugin"), ready=False, waiting="CrashLoopBackOff"))
    observed.daemonsets[0]["status"]["numberReady"] = 1
    failure = failed_one(check_addons(e, observed), "daemonset.nvidia-device-plugin")
    assert failure.detail.startswith("the NVIDIA device plugin: numberReady 1 of desiredNumberScheduled 2")
    assert "Running, not Ready (CrashLoopBackOff)" in failure.detail and "kubectl -n kube-system" in failure.remedy


def test_plugin_pods_without_owner_references_are_matched_by_the_selector_and_a_missing_daemonset_fails():
    e, observed = expect("single-node"), cluster_state("single-node")
    for p in observed.pods:
        if p["metadata"]["name"].startswith("nvidia-device-plugin"):
            del p["metadata"]["ownerReferences"]
            p["metadata"]["labels"] = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvidia-device-plugin"}
    all_pass(check_addons(e, observed))
    observed.daemonsets = observed.daemonsets[1:]
    failure = failed_one(check_addons(e, observed), "daemonset.nvidia-device-plugin")
    assert "not found" in failure.detail and "helm status nvidia-device-plugin -n kube-system" in failure.remedy


def test_an_unavailable_or_missing_controller_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.deployments[0] = deployment("kueue-system", "kueue-controller-manager", available=False)
    failure = failed_one(check_addons(e, observed), "controller.kueue-controller-manager")
    assert "Available=False (MinimumReplicasUnavailable" in failure.detail and "0/1 available" in failure.detail
    observed.deployments = observed.deployments[2:]
    assert {r.name for r in check_addons(e, observed) if not r.ok} == {"controller.kueue-controller-manager", "controller.jobset-controller"}


def test_an_inactive_cluster_queue_fails_with_kueues_reason():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    cq = observed.cluster_queues[0]
    cq["status"]["conditions"] = [{"type": "Active", "status": "False", "reason": "FlavorNotFound", "message": "Can't admit new workloads: references missing ResourceFlavor(s): rlinf-gpu."}]
    failure = failed_one(check_addons(e, observed), "queue.cluster-queue")
    assert "Active=False (FlavorNotFound: Can't admit new workloads" in failure.detail and "ResourceFlavor rlinf-gpu" in failure.remedy


def test_a_local_queue_missing_or_sending_elsewhere_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.local_queues[0]["spec"]["clusterQueue"] = "other"
    assert "sends runs to ClusterQueue other" in failed_one(check_addons(e, observed), "queue.local-queue").detail
    observed.local_queues = []
    assert failed_one(check_addons(e, observed), "queue.local-queue").remedy == "pulumi up the stack multi-node"


def test_a_pending_claim_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.claims[0]["status"] = {"phase": "Pending"}
    failure = failed_one(check_addons(e, observed), "shared-fs.claim")
    assert "rlinf/shared-fs is Pending" in failure.detail and "aws-fsx-csi-driver" in failure.remedy


def test_a_missing_or_terminating_namespace_and_a_missing_service_account_fail():
    e, observed = expect("single-node"), cluster_state("single-node")
    observed.service_accounts = [sa for sa in observed.service_accounts if sa["metadata"]["name"] != "training-sa"]
    assert "rlinf/training-sa not found" in failed_one(check_addons(e, observed), "training.service-account").detail
    observed = cluster_state("single-node")
    observed.namespaces[0]["status"]["phase"] = "Terminating"
    assert "is Terminating" in failed_one(check_addons(e, observed), "training.namespace").detail


def test_scale_from_zero_add_ons_pass_with_no_gpu_node():
    observed = cluster_state("autoscaled", nodes=0)
    results = check_addons(expect("autoscaled"), observed)
    all_pass(results)
    assert "0/0 ready; no GPU node to run on yet" in result(results, "daemonset.nvidia-device-plugin").detail
    assert "controller.cluster-autoscaler" in outcomes(results)


def test_an_experiments_add_ons_name_its_platform_for_the_cluster_and_itself_for_its_own():
    e, observed = expect("experiment-embodied"), cluster_state("experiment-embodied")
    all_pass(check_addons(e, observed))
    observed.deployments = [d for d in observed.deployments if d["metadata"]["name"] != "kuberay-operator"]
    observed.claims = []
    results = check_addons(e, observed)
    assert "platform stack organization/rlinf-eks/platform" in result(results, "controller.kuberay-operator").remedy
    assert result(results, "shared-fs.claim").remedy == "pulumi up the stack experiment-embodied"
    assert "exp-embodied/shared-fs" in result(results, "shared-fs.claim").detail


# --- L5: admission ---------------------------------------------------------------------------------------


def test_the_gang_fits_healthy_nodes_the_quota_and_the_priority_class_exists():
    results = check_admission(expect("multi-node"), cluster_state("multi-node"))
    all_pass(results)
    assert "2/2 GPU nodes have room for one pod each (cpu 190, memory 1883Gi" in result(results, "admission.nodes").detail
    assert "covers the run's 2 pods: cpu 380 of 380, memory 3766Gi of 3766Gi, nvidia.com/gpu 16 of 16" in result(results, "admission.quota").detail
    assert {r.level for r in results} == {5}


def test_a_gang_that_does_not_fit_the_live_allocatable_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    # someone else's pod holds four GPUs of the second node
    observed.pods.append(pod("team-b", "notebook-0", "ip-10-0-17-102.ec2.internal", requests={"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"}))
    failure = failed_one(check_admission(e, observed), "admission.nodes")
    assert "1/2 GPU nodes have room" in failure.detail and "the run needs 2" in failure.detail
    assert "ip-10-0-17-102.ec2.internal: cpu free" in failure.detail and "nvidia.com/gpu free 4 < 8" in failure.detail
    assert "--field-selector spec.nodeName=NODE" in failure.remedy


def test_a_node_smaller_than_the_catalog_says_fails_with_the_override_remedy():
    e, observed = expect("single-node"), cluster_state("single-node")
    observed.nodes[0]["status"]["allocatable"]["memory"] = "1900000000Ki"  # about 1812Gi: below the pod's 1884Gi
    failure = failed_one(check_admission(e, observed), "admission.nodes")
    assert "memory free 1811.8Gi < 1884Gi" in failure.detail and "gpuNodes.instanceOverrides" in failure.remedy


def test_the_runs_own_pods_and_terminated_pods_are_not_counted():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    for i, node in enumerate(n["metadata"]["name"] for n in observed.nodes[:2]):
        observed.pods.append(pod("rlinf", f"training-training-0-{i}-x7k2p", node, labels=dict(e.run.pod_labels), requests=e.run.requests))
        observed.pods.append(pod("team-b", f"finished-{i}", node, requests={"nvidia.com/gpu": "8"}, phase="Succeeded", ready=False))
    nodes = result(check_admission(e, observed), "admission.nodes")
    assert nodes.outcome == "pass" and "the run's own 2 pods not counted" in nodes.detail


def test_a_not_ready_node_leaves_the_gang_short():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    set_condition(observed.nodes[0], "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    failure = failed_one(check_admission(e, observed), "admission.nodes")
    assert "ip-10-0-16-101.ec2.internal: not Ready" in failure.detail and "Ready and schedulable" in failure.remedy


def test_scale_from_zero_fits_when_the_nodes_may_come():
    results = check_admission(expect("autoscaled"), cluster_state("autoscaled", nodes=0))
    all_pass(results)
    assert "scale-from-zero may bring 2 more p4d.24xlarge" in result(results, "admission.nodes").detail


def test_a_quota_too_small_for_the_run_fails():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    for r in observed.cluster_queues[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            r["nominalQuota"] = "8"
    failure = failed_one(check_admission(e, observed), "admission.quota")
    assert "nvidia.com/gpu asks 16, holds 8" in failure.detail and "gpuNodes.nodeCount 2" in failure.remedy
    observed.cluster_queues[0]["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "default-flavor"
    assert "has no flavor rlinf-gpu" in failed_one(check_admission(e, observed), "admission.quota").detail


def test_a_resource_the_queue_does_not_cover_fails():
    e, observed = expect("single-node"), cluster_state("single-node")
    group = observed.cluster_queues[0]["spec"]["resourceGroups"][0]
    group["flavors"][0]["resources"] = [r for r in group["flavors"][0]["resources"] if r["name"] != "vpc.amazonaws.com/efa"]
    assert "vpc.amazonaws.com/efa asks 32, holds none (not covered)" in failed_one(check_admission(e, observed), "admission.quota").detail


def test_a_missing_priority_class_fails_and_a_core_priority_class_of_that_name_does_not_count():
    e, observed = expect("multi-node"), cluster_state("multi-node")
    observed.priority_classes = [p for p in observed.priority_classes if p["metadata"]["name"] != "rlinf-normal"]
    observed.priority_classes.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "rlinf-normal"}, "value": 100})
    failure = failed_one(check_admission(e, observed), "admission.priority-class")
    assert "WorkloadPriorityClass rlinf-normal (the run's" in failure.detail and "queue.priorityClasses" in failure.remedy


def test_a_platform_skips_the_runs_checks_but_wants_every_priority_class():
    e, observed = expect("platform"), cluster_state("platform")
    results = check_admission(e, observed)
    assert outcomes(results) == {"admission.nodes": "skip", "admission.quota": "skip", "admission.priority-class": "pass"}
    observed.priority_classes = [p for p in observed.priority_classes if p["metadata"]["name"] != "rlinf-low"]
    assert "rlinf-low (the platform's" in failed_one(check_admission(e, observed), "admission.priority-class").detail


def test_an_experiment_is_admitted_by_its_platforms_queue():
    e, observed = expect("experiment-embodied"), cluster_state("experiment-embodied")
    all_pass(check_admission(e, observed))


def test_a_pods_request_is_the_larger_of_its_containers_and_each_init_container_with_the_sidecars_before_it():
    spec = {
        "initContainers": [
            {"name": "setup", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}},
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "fabric-check", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "8"}}},
        ],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}, {"name": "b", "resources": {}}],
        "overhead": {"cpu": "100m"},
    }
    # init: setup 4/8Gi; proxy 0.5/1Gi; fabric-check with the proxy 2.5, 1Gi, 8 GPUs; containers with the proxy 1.5/3Gi
    assert pod_requests({"spec": spec}) == {"cpu": Decimal("4.1"), "memory": Decimal(8 * GI), "nvidia.com/gpu": Decimal(8)}
