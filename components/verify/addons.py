"""L2, the add-ons: every device plugin has a Running, Ready pod on every GPU node; the controllers
(Kueue, JobSet, KubeRay, the Cluster Autoscaler) are Available; the ClusterQueue is Active and the
run's LocalQueue points at it; the training namespace, its service account and the shared
filesystem's claim (Bound) exist.

A DaemonSet's pods are matched to it by their ownerReferences (kind DaemonSet, its name), or by
its ``spec.selector.matchLabels`` for a pod without them, and to nodes by ``spec.nodeName``.

Checks: ``daemonset.<name>`` per device plugin, ``controller.<name>`` per Deployment,
``queue.cluster-queue``, ``queue.local-queue``, ``training.namespace``,
``training.service-account``, ``shared-fs.claim``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .control_plane import condition, condition_true, why_not
from .expect import Expectation, WorkloadExpectation
from .model import CheckResult, Observed, failed, passed
from .nodes import gpu_nodes, labels_of, node_name, plural

LEVEL = 2


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def find(objects: list[dict[str, Any]], name: str, namespace: Optional[str] = None) -> Optional[Mapping[str, Any]]:
    """The object named ``name`` (in ``namespace`` when given) among ``objects``, or None."""
    for obj in objects:
        meta = _meta(obj)
        if meta.get("name") == name and (namespace is None or meta.get("namespace") == namespace):
            return obj
    return None


def owned_by(pod: Mapping[str, Any], daemonset: Mapping[str, Any]) -> bool:
    """``pod`` belongs to ``daemonset``: same namespace, and an ownerReference to it (or, without
    ownerReferences, labels matching its selector)."""
    meta, ds_meta = _meta(pod), _meta(daemonset)
    if meta.get("namespace") != ds_meta.get("namespace"):
        return False
    owners = meta.get("ownerReferences") or []
    if owners:
        return any(o.get("kind") == "DaemonSet" and o.get("name") == ds_meta.get("name") for o in owners)
    selector = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    labels = labels_of(pod)
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_running_ready(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and condition_true(pod, "Ready")


def pod_state(pod: Mapping[str, Any]) -> str:
    """Why a pod is not Running and Ready, in a few words: its phase and a waiting container's reason."""
    status = pod.get("status") or {}
    reasons = [
        str(((c.get("state") or {}).get("waiting") or {}).get("reason"))
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
        if ((c.get("state") or {}).get("waiting") or {}).get("reason")
    ]
    phase = status.get("phase") or "no phase"
    state = phase if phase != "Running" else "Running, not Ready"
    return f"{state}" + (f" ({', '.join(dict.fromkeys(reasons))})" if reasons else "")


def _daemonset(expect: Expectation, observed: Observed, ds: WorkloadExpectation) -> CheckResult:
    check = f"daemonset.{ds.name}"
    obj = find(observed.daemonsets, ds.name, ds.namespace)
    if obj is None:
        return failed(LEVEL, check, f"DaemonSet {ds.key} ({ds.release.what}) not found", f"{expect.up_cluster}; helm status {ds.release.name} -n {ds.namespace}")
    status = obj.get("status") or {}
    desired, ready = int(status.get("desiredNumberScheduled") or 0), int(status.get("numberReady") or 0)
    nodes = gpu_nodes(expect, observed)
    pods = [p for p in observed.pods if owned_by(p, obj)]
    problems: list[str] = []
    unselected = not_ready = False
    for node in nodes:
        name = node_name(node)
        on_node = [p for p in pods if (p.get("spec") or {}).get("nodeName") == name]
        if not on_node:
            problems.append(f"no pod on {name}")
            unselected = True
        elif not any(pod_running_ready(p) for p in on_node):
            problems.append(f"{_meta(on_node[0]).get('name')} on {name} {pod_state(on_node[0])}")
            not_ready = True
    if ready < desired:
        problems.insert(0, f"numberReady {ready} of desiredNumberScheduled {desired}")
        not_ready = True
    if not problems:
        if not nodes:
            return passed(LEVEL, check, f"{ready}/{desired} ready; no GPU node to run on yet ({ds.advertises})")
        return passed(LEVEL, check, f"{ready}/{desired} ready; a Running, Ready pod on each of the {plural(len(nodes), 'GPU node')} ({ds.advertises})")
    remedies = []
    if unselected:
        remedies.append("it does not run on those GPU nodes: compare its nodeSelector and affinity with their labels and instance type (gpu-nodes.labels)")
    if not_ready:
        remedies.append(f"kubectl -n {ds.namespace} describe pod / logs of its pods (image pull, device plugin registration)")
    return failed(LEVEL, check, f"{ds.release.what}: " + "; ".join(problems), "; ".join(remedies))


def _controller(expect: Expectation, observed: Observed, ctl: WorkloadExpectation) -> CheckResult:
    check = f"controller.{ctl.name}"
    obj = find(observed.deployments, ctl.name, ctl.namespace)
    if obj is None:
        return failed(LEVEL, check, f"Deployment {ctl.key} ({ctl.release.what}) not found", f"{expect.up_cluster}; helm status {ctl.release.name} -n {ctl.namespace}")
    status = obj.get("status") or {}
    replicas = f"{status.get('availableReplicas') or 0}/{(obj.get('spec') or {}).get('replicas', status.get('replicas') or 0)} available"
    if condition_true(obj, "Available"):
        return passed(LEVEL, check, f"{ctl.release.what} Available ({replicas})")
    return failed(
        LEVEL, check, f"{ctl.release.what} not Available: {why_not(obj, 'Available')}, {replicas}",
        f"kubectl -n {ctl.namespace} describe deployment {ctl.name} (image pull, room on the system nodes), and its pods' logs",
    )  # fmt: skip


def _cluster_queue(expect: Expectation, observed: Observed) -> CheckResult:
    assert expect.queue is not None
    name = expect.queue.cluster_queue
    obj = find(observed.cluster_queues, name)
    if obj is None:
        return failed(LEVEL, "queue.cluster-queue", f"ClusterQueue {name} not found", f"{expect.up_cluster} (queue.enabled makes it)")
    if condition_true(obj, "Active"):
        pending = (obj.get("status") or {}).get("pendingWorkloads")
        admitted = (obj.get("status") or {}).get("admittedWorkloads")
        counts = f" ({admitted or 0} admitted, {pending or 0} pending)" if pending is not None or admitted is not None else ""
        return passed(LEVEL, "queue.cluster-queue", f"ClusterQueue {name} Active{counts}")
    return failed(
        LEVEL, "queue.cluster-queue", f"ClusterQueue {name} not Active: {why_not(obj, 'Active')}",
        f"kubectl describe clusterqueue {name} (a missing ResourceFlavor {expect.queue.gpu_flavor} or Topology, or Kueue's controller down)",
    )  # fmt: skip


def _local_queue(expect: Expectation, observed: Observed) -> CheckResult:
    assert expect.queue is not None
    q = expect.queue
    obj = find(observed.local_queues, q.local_queue, q.local_queue_namespace)
    where = f"LocalQueue {q.local_queue_namespace}/{q.local_queue}"
    if obj is None:
        return failed(LEVEL, "queue.local-queue", f"{where} not found: a run labelled for it waits suspended for ever", expect.up_own)
    target = (obj.get("spec") or {}).get("clusterQueue")
    if target != q.cluster_queue:
        return failed(LEVEL, "queue.local-queue", f"{where} sends runs to ClusterQueue {target}, not {q.cluster_queue}", expect.up_own)
    if condition(obj, "Active") is not None and not condition_true(obj, "Active"):
        return failed(LEVEL, "queue.local-queue", f"{where} not Active: {why_not(obj, 'Active')}", f"kubectl -n {q.local_queue_namespace} describe localqueue {q.local_queue}")
    return passed(LEVEL, "queue.local-queue", f"{where} -> ClusterQueue {q.cluster_queue}")


def _namespace(expect: Expectation, observed: Observed) -> CheckResult:
    ns = expect.training_namespace
    obj = find(observed.namespaces, ns)
    if obj is None:
        return failed(LEVEL, "training.namespace", f"namespace {ns} not found", expect.up_own)
    phase = (obj.get("status") or {}).get("phase")
    if phase not in (None, "Active"):
        return failed(LEVEL, "training.namespace", f"namespace {ns} is {phase}", f"wait for it to go, then {expect.up_own}")
    return passed(LEVEL, "training.namespace", f"namespace {ns} Active")


def _service_account(expect: Expectation, observed: Observed) -> CheckResult:
    ns, name = expect.training_namespace, expect.service_account
    obj = find(observed.service_accounts, name, ns)
    if obj is None:
        return failed(LEVEL, "training.service-account", f"service account {ns}/{name} not found", expect.up_own)
    role = (_meta(obj).get("annotations") or {}).get("eks.amazonaws.com/role-arn")
    return passed(LEVEL, "training.service-account", f"service account {ns}/{name}" + (f" (IRSA {role})" if role else ""))


def _claim(expect: Expectation, observed: Observed) -> CheckResult:
    assert expect.shared_claim is not None
    ns, name = expect.shared_claim
    obj = find(observed.claims, name, ns)
    if obj is None:
        return failed(LEVEL, "shared-fs.claim", f"PersistentVolumeClaim {ns}/{name} not found", expect.up_own)
    phase = (obj.get("status") or {}).get("phase")
    volume = (obj.get("spec") or {}).get("volumeName")
    if phase != "Bound":
        return failed(
            LEVEL, "shared-fs.claim", f"PersistentVolumeClaim {ns}/{name} is {phase or 'without a phase'}" + (f" (volume {volume})" if volume else ""),
            f"kubectl -n {ns} describe pvc {name}: its PersistentVolume (the FSx filesystem) must exist and match; check the aws-fsx-csi-driver add-on",
        )  # fmt: skip
    return passed(LEVEL, "shared-fs.claim", f"PersistentVolumeClaim {ns}/{name} Bound" + (f" to {volume}" if volume else ""))


def check_addons(expect: Expectation, observed: Observed) -> list[CheckResult]:
    """L2: device plugins on every GPU node, controllers Available, the queue Active, the run's
    namespace, service account and shared claim."""
    results = [_daemonset(expect, observed, ds) for ds in expect.daemonsets]
    results += [_controller(expect, observed, ctl) for ctl in expect.controllers]
    if expect.queue is not None:
        results += [_cluster_queue(expect, observed), _local_queue(expect, observed)]
    results += [_namespace(expect, observed), _service_account(expect, observed)]
    if expect.shared_claim is not None:
        results.append(_claim(expect, observed))
    return results
