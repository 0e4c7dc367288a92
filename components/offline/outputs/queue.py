"""The "Queue:" section of the printed plan: the run's queue, what it asks for against the quota,
whether it can ever fit, the network layer it asks for, its priority, and what preemption costs it
(:mod:`rlinf_eks.quota` holds the arithmetic)."""

from __future__ import annotations

from typing import Optional

from ...config import StackSettings
from ...quota import Resources, queue_plan
from ...workload import resolve_run


def _resources_line(resources: Resources) -> str:
    amounts = resources.by_name()
    return ", ".join(f"{name} {value}" for name, value in resources.quantities().items() if amounts[name])


def render(settings: Optional[StackSettings], stack: str = "stack") -> str:
    """The "Queue:" section of the printed plan: the run's queue, what it asks against the quota,
    whether it can ever fit, its topology request, priority and what preemption costs it."""
    if settings is None or not settings.workload.enabled:
        return ""
    q = settings.queue
    if not q.enabled:
        return "Queue:\n  off (queue.enabled: false): the run starts at once, and a second run on the pool could hold part of it forever"
    plan = queue_plan(settings)
    fits = "yes" if not plan.shortfalls else "never: " + "; ".join(plan.shortfalls)
    lines = [
        f"queue: LocalQueue {plan.name} (namespace {settings.workload.namespace}) -> ClusterQueue {plan.name}, Kueue {q.version}",
        f"quota: {plan.nodes} x node = {_resources_line(plan.quota)} (from {plan.nodes_from})",
        f"run asks: {plan.run_nodes} x node = {_resources_line(plan.ask)}, admitted all or nothing",
    ]
    if plan.submitter is not None:
        lines.append(f"  + the RayJob submitter on the system nodes: {_resources_line(plan.submitter)}")
    lines.append(f"can ever fit: {fits}")
    t = plan.topology
    if t.on:
        lines.append(f"topology: {t.mode} layer {t.layer} ({t.label}): all pods under one layer-{t.layer} network node{'' if t.mode == 'required' else ' when free nodes allow, else wider'}")
    else:
        lines.append(f"topology: none ({t.reason})")
    lines.append(f"priority: {plan.priority} ({plan.priority_value}); preemption within the queue: {plan.preemption}")
    if plan.preemption != "Never":
        launch = resolve_run(settings, stack).launch
        grace = settings.workload.termination_grace_period_seconds
        if launch.resume is not None:
            loses = "it resumes from its newest complete checkpoint when admitted again: it loses nothing past that checkpoint"
        else:
            loses = f"it starts over when admitted again ({launch.resume_note or 'the trainer does not resume'})"
        lines.append(
            f"  a preempted run is suspended: its pods get {grace}s (terminationGracePeriodSeconds) to finish a checkpoint write; {loses}"
        )
    return "\n".join(["Queue:", *(f"  {line}" for line in lines)])
