"""The ``queue`` section: Kueue, the queue that admits a run only when all of it fits.

What the queue holds is never typed here: the ResourceFlavor, the ClusterQueue's quota and the
topology follow from ``gpuNodes`` (:mod:`rlinf_eks.quota`, :mod:`rlinf_eks.kueue`). This section
says only whether there is a queue, which chart, how the run asks for nearby nodes, and the
priorities."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .. import pins
from .types import Bool, ChartVersion, Int, Namespace, SettingsModel

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _object_name(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise PydanticCustomError("name", "a Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253)")
    return value


class PriorityClassSettings(SettingsModel):
    """One Kueue WorkloadPriorityClass."""

    name: str
    """The class's name (a Kubernetes object name); a run names it in ``queue.priority``."""
    value: Int = Field(ge=-2147483648, le=1000000000)
    """Higher goes first, and may preempt lower (``queue.preemption``)."""
    description: str = ""
    """What the class is for (shown by kubectl)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _object_name(value)


def _default_priority_classes() -> list[PriorityClassSettings]:
    return [
        PriorityClassSettings(name="rlinf-urgent", value=1000, description="an experiment that goes first and may preempt lower ones"),
        PriorityClassSettings(name="rlinf-normal", value=100, description="the default for runs of this project"),
        PriorityClassSettings(name="rlinf-low", value=10, description="background runs: admitted when nothing else waits, preempted first"),
    ]


class QueueSettings(SettingsModel):
    enabled: Bool = True
    """Queue every run through Kueue (a LocalQueue in the workload namespace): the run is
    created suspended and admitted all or nothing once the pool holds all of it. Defaults to true."""
    version: ChartVersion = pins.version("kueue")
    """Kueue chart version (oci://registry.k8s.io/kueue/charts/kueue). Defaults to the pin in
    components/pins.yaml (the CRDs this project validates against)."""
    namespace: Namespace = "kueue-system"
    """Namespace of the Kueue release. Defaults to kueue-system."""
    name: str = "rlinf"
    """Name of the ClusterQueue and of the LocalQueue in the workload namespace. Defaults to rlinf."""
    topology: Literal["preferred", "required", "off"] = "preferred"
    """How a run asks for its pods under one network layer (Kueue topology-aware scheduling over
    topology.k8s.aws/network-node-layer-N): preferred (as close as the free nodes allow), required
    (wait until all pods fit under one layer-N node), off. Defaults to preferred. Off by itself
    when the Cluster Autoscaler may add nodes (Kueue places by the nodes that exist) or the
    instance type carries no network topology labels."""
    topology_layer: Int = Field(3, ge=1, le=3)
    """The layer a run asks for: 3 is the closest (the nodes under one layer-3 network node), 1 the
    widest. Defaults to 3."""
    priority_classes: list[PriorityClassSettings] = Field(default_factory=_default_priority_classes)
    """The WorkloadPriorityClasses. Defaults to rlinf-urgent (1000), rlinf-normal (100), rlinf-low (10)."""
    priority: str = "rlinf-normal"
    """The run's priority class (one of priorityClasses). Defaults to rlinf-normal."""
    preemption: Literal["LowerPriority", "LowerOrNewerEqualPriority", "Never"] = "LowerPriority"
    """ClusterQueue ``preemption.withinClusterQueue``: whether a waiting run may stop an admitted
    one of lower priority (LowerPriority), also an equal one admitted later
    (LowerOrNewerEqualPriority), or never. Defaults to LowerPriority. A stopped run loses nothing
    past its newest complete checkpoint: it is suspended, its pods get the grace period to finish a
    checkpoint write, and it resumes from there when admitted again (verl-ppo cannot resume: it
    starts over)."""

    @field_validator("name")
    @classmethod
    def _queue_name(cls, value: str) -> str:
        if len(value) > 63:
            raise PydanticCustomError("name", "at most 63 characters (it is a label value: kueue.x-k8s.io/queue-name)")
        return _object_name(value)

    @model_validator(mode="after")
    def _priority_known(self) -> "QueueSettings":
        names = [c.name for c in self.priority_classes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise PydanticCustomError("priority", "{text}", {"text": f"priorityClasses: duplicate names {duplicates}"})
        if self.priority not in names:
            raise PydanticCustomError(
                "priority", "{text}", {"text": f"priority {self.priority!r} is not one of priorityClasses ({', '.join(names) or 'none'})"}
            )
        return self
