"""L5, admission: the run would be admitted now. Its gang (one pod per GPU node, each asking
``run.per_pod``) fits what the Ready GPU nodes have free (their allocatable less what the other
pods on them request), the ClusterQueue's nominal quota on the GPU flavor covers the whole run,
and its WorkloadPriorityClass exists.

A node's free capacity is ``status.allocatable`` less the requests of every pod bound to it
(``spec.nodeName``) that has not terminated (phase neither Succeeded nor Failed); the run's own
pods (in its namespace, with its labels) are not counted, since a new run replaces them. A pod's
request is the scheduler's: the larger of its containers' sum (with restartable init
containers, the sidecars) and each init container's (with the sidecars started before it), plus
its overhead.

Checks: ``admission.nodes``, ``admission.quota``, ``admission.priority-class``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Mapping

from .addons import find
from .expect import Expectation, in_base_units, quantities, show
from .model import CheckResult, Observed, failed, passed, skipped
from .nodes import foreign_taints, gpu_nodes, is_cordoned, is_ready, labels_of, node_name, plural

LEVEL = 5

TERMINATED = ("Succeeded", "Failed")


def _add(a: dict[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, Decimal(0)) + amount
    return out


def _max(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {name: max(a.get(name, Decimal(0)), b.get(name, Decimal(0))) for name in {*a, *b}}


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    return quantities(((container.get("resources") or {}).get("requests")) or {})


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the scheduler counts a pod as requesting, by resource, in base units."""
    spec = pod.get("spec") or {}
    containers: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        containers = _add(containers, _container_requests(c))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in spec.get("initContainers") or []:
        requests = _container_requests(c)
        if c.get("restartPolicy") == "Always":  # a sidecar: runs on beside what follows
            sidecars = _add(sidecars, requests)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(sidecars, requests))
    total = _max(_add(containers, sidecars), init_peak)
    return _add(total, quantities(spec.get("overhead") or {}))


def _is_own(expect: Expectation, pod: Mapping[str, Any]) -> bool:
    if expect.run is None:
        return False
    meta = pod.get("metadata") or {}
    labels = labels_of(pod)
    return meta.get("namespace") == expect.training_namespace and all(labels.get(k) == v for k, v in expect.run.pod_labels.items())


def node_usage(expect: Expectation, observed: Observed) -> tuple[dict[str, dict[str, Decimal]], int]:
    """Requests of the non-terminated pods bound to each node (the run's own pods left out), and
    how many of the run's own pods were left out."""
    used: dict[str, dict[str, Decimal]] = {}
    own = 0
    for pod in observed.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINATED:
            continue
        if _is_own(expect, pod):
            own += 1
            continue
        used[node] = _add(used.get(node, {}), pod_requests(pod))
    return used, own


def _fmt(amounts: Mapping[str, Decimal]) -> str:
    return ", ".join(f"{name} {show(name, amount)}" for name, amount in amounts.items())


def _nodes(expect: Expectation, observed: Observed) -> CheckResult:
    if expect.run is None:
        return skipped(LEVEL, "admission.nodes", "a platform stack has no run (its experiments bring theirs)")
    run, gpu = expect.run, expect.gpu
    ask = in_base_units(run.per_pod)
    nodes = gpu_nodes(expect, observed)
    used, own = node_usage(expect, observed)
    fitting: list[str] = []
    problems: list[str] = []
    too_small = busy = unusable = False
    for node in nodes:
        name = node_name(node)
        blocked = "not Ready" if not is_ready(node) else "cordoned" if is_cordoned(node) else ", ".join(foreign_taints(expect, node))
        if blocked:
            problems.append(f"{name}: {blocked if blocked in ('not Ready', 'cordoned') else 'tainted ' + blocked}")
            unusable = True
            continue
        allocatable = quantities((node.get("status") or {}).get("allocatable"))
        taken = used.get(name, {})
        short = []
        for resource, amount in ask.items():
            free = allocatable.get(resource, Decimal(0)) - taken.get(resource, Decimal(0))
            if free < amount:
                short.append(f"{resource} free {show(resource, max(free, Decimal(0)))} < {show(resource, amount)}")
                if allocatable.get(resource, Decimal(0)) < amount:
                    too_small = True
                else:
                    busy = True
        if short:
            problems.append(f"{name}: {', '.join(short)}")
        else:
            fitting.append(name)
    own_note = f"; the run's own {plural(own, 'pod')} not counted" if own else ""
    shape = f"({_fmt(ask)})"
    if len(fitting) >= run.pods:
        return passed(LEVEL, "admission.nodes", f"{len(fitting)}/{len(nodes)} GPU nodes have room for one pod each {shape}; the run needs {run.pods}{own_note}")
    room = gpu.max_count - len(nodes) if gpu.scale_from_zero else 0
    if gpu.scale_from_zero and len(fitting) + room >= run.pods:
        return passed(
            LEVEL, "admission.nodes",
            f"{plural(len(fitting), 'GPU node')} with room now; scale-from-zero may bring {room} more {gpu.instance_type} "
            f"(up to {gpu.max_count}), each holding one pod {shape} by the catalog's figures: the run's {plural(run.pods, 'pod')} fit when they come{own_note}",
        )  # fmt: skip
    remedies = []
    if len(nodes) + room < run.pods or unusable:
        remedies.append("bring every GPU node up, Ready and schedulable (L1)")
    if busy:
        remedies.append("other pods hold what the run needs: kubectl get pods -A --field-selector spec.nodeName=NODE, and stop them")
    if too_small:
        remedies.append(
            f"the pod asks more than a {gpu.instance_type} node offers: correct the catalog's figures with gpuNodes.instanceOverrides "
            "(vcpu, memoryGib) or lower gpuNodes.hugepagesGib"
        )
    return failed(
        LEVEL, "admission.nodes",
        f"{len(fitting)}/{len(nodes)} GPU nodes have room for one pod each {shape}, the run needs {run.pods}: " + "; ".join(problems) + own_note,
        "; ".join(remedies) or "see the nodes above",
    )  # fmt: skip


def flavor_quota(cluster_queue: Mapping[str, Any], flavor: str) -> dict[str, Decimal] | None:
    """The nominal quota of ``flavor`` in a ClusterQueue (summed over resource groups), or None when it has no such flavor."""
    found = None
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for item in group.get("flavors") or []:
            if item.get("name") != flavor:
                continue
            found = found or {}
            for resource in item.get("resources") or []:
                amount = quantities({resource.get("name"): resource.get("nominalQuota")})
                found = _add(found, amount)
    return found


def _quota(expect: Expectation, observed: Observed) -> CheckResult:
    if expect.queue is None:
        return skipped(LEVEL, "admission.quota", "queue.enabled false: no ClusterQueue admits the run")
    if expect.run is None:
        return skipped(LEVEL, "admission.quota", "a platform stack has no run (its experiments bring theirs)")
    q = expect.queue
    obj = find(observed.cluster_queues, q.cluster_queue)
    if obj is None:
        return failed(LEVEL, "admission.quota", f"ClusterQueue {q.cluster_queue} not found", f"{expect.up_cluster} (queue.enabled makes it)")
    held = flavor_quota(obj, q.gpu_flavor)
    expected = in_base_units(q.nominal_quota)
    restore = f"{expect.up_cluster} to restore the stack's quota ({q.pool_from}: {_fmt(expected)})"
    if held is None:
        return failed(LEVEL, "admission.quota", f"ClusterQueue {q.cluster_queue} has no flavor {q.gpu_flavor}", restore)
    ask = in_base_units(expect.run.total)
    short = [
        f"{name} asks {show(name, amount)}, holds {show(name, held[name]) if name in held else 'none (not covered)'}"
        for name, amount in ask.items()
        if held.get(name, Decimal(0)) < amount
    ]
    if short:
        return failed(LEVEL, "admission.quota", f"ClusterQueue {q.cluster_queue} ({q.gpu_flavor}) is short for the run's {plural(expect.run.pods, 'pod')}: " + "; ".join(short), restore)
    covered = ", ".join(f"{name} {show(name, amount)} of {show(name, held[name])}" for name, amount in ask.items())
    return passed(LEVEL, "admission.quota", f"ClusterQueue {q.cluster_queue} ({q.gpu_flavor}) covers the run's {plural(expect.run.pods, 'pod')}: {covered}")


def _priority_class(expect: Expectation, observed: Observed) -> CheckResult:
    if expect.queue is None:
        return skipped(LEVEL, "admission.priority-class", "queue.enabled false: the run has no priority class")
    wanted = [expect.run.priority_class] if expect.run is not None and expect.run.priority_class else list(expect.queue.priority_classes)
    present = {
        (obj.get("metadata") or {}).get("name")
        for obj in observed.priority_classes
        if obj.get("kind") in (None, "WorkloadPriorityClass") and str(obj.get("apiVersion") or "kueue.x-k8s.io").startswith("kueue.x-k8s.io")
    }
    missing = [name for name in wanted if name not in present]
    whose = "the run's" if expect.run is not None else "the platform's"
    if missing:
        return failed(
            LEVEL, "admission.priority-class", f"WorkloadPriorityClass {', '.join(missing)} ({whose}, kueue.x-k8s.io/priority-class) not found",
            f"{expect.up_cluster} (queue.priorityClasses makes them)",
        )  # fmt: skip
    return passed(LEVEL, "admission.priority-class", f"WorkloadPriorityClass {', '.join(wanted)} ({whose}) {'exist' if len(wanted) > 1 else 'exists'}")


def check_admission(expect: Expectation, observed: Observed) -> list[CheckResult]:
    """L5: the gang fits the live GPU nodes, the queue's quota and its priority class exists."""
    return [_nodes(expect, observed), _quota(expect, observed), _priority_class(expect, observed)]
