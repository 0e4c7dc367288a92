"""Where pods may run: the scheduling facts of the two node groups, stated once.

- GPU nodes: tainted ``nvidia.com/gpu=true:NoSchedule`` (:data:`GPU_TAINT`) and labelled
  ``role: gpu-training`` (:data:`GPU_NODE_LABELS`, the seed's nodeSelector), plus the EFA label
  when EFA is on and the Cluster Autoscaler's accelerator label when autoscaled
  (:func:`node_labels`). Training pods and device plugins select and tolerate exactly these.
- System nodes: untainted, labelled ``role: system`` (:data:`SYSTEM_NODE_LABELS`); operators,
  controllers, the RayJob submitter and the watchdog select it, so they never pull onto (or keep
  awake) a GPU node.
- The extended resources the device plugins advertise (:data:`GPU_RESOURCE`, :data:`EFA_RESOURCE`).

Plain data only (no Pulumi, no config import): the policies, the CrossGuard pack and the plan
reader use it as well as the components, and the config's GPU node rules build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

# --- extended resources -------------------------------------------------------------------------

GPU_RESOURCE = "nvidia.com/gpu"
"""Advertised by the NVIDIA device plugin; a training pod requests all of a node's GPUs."""

EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""Advertised by the EFA device plugin, one per EFA interface of the node."""

HUGEPAGES_2MI_RESOURCE = "hugepages-2Mi"
"""2 MiB hugepages the kubelet advertises once the node reserves them (libfabric's buffers)."""

# --- taints and tolerations ---------------------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    """A Kubernetes node taint, with the spelling the EKS API uses for its effect."""

    key: str
    value: str
    effect: str  # Kubernetes spelling: NoSchedule

    @property
    def eks_effect(self) -> str:
        """The EKS NodeGroup API spelling of the effect (NO_SCHEDULE)."""
        return {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}[self.effect]

    def toleration(self) -> dict[str, str]:
        """The pod toleration of exactly this taint (operator Equal, same value and effect)."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


GPU_TAINT = Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule")
"""``nvidia.com/gpu=true:NoSchedule``: only pods that tolerate it (training pods, device plugins)
land on the GPU nodes. The key happens to equal :data:`GPU_RESOURCE`; they are separate facts."""


def node_taints() -> list[dict[str, str]]:
    """The GPU node group's taints, Kubernetes spelling."""
    return [GPU_TAINT.as_dict()]


def gpu_toleration() -> dict[str, str]:
    """The toleration a pod needs to run on the GPU nodes."""
    return GPU_TAINT.toleration()


# --- node labels --------------------------------------------------------------------------------

GPU_NODE_LABELS: Mapping[str, str] = {"role": "gpu-training"}
"""Labels every GPU node carries; ``role: gpu-training`` is the seed's nodeSelector."""

SYSTEM_NODE_LABELS: Mapping[str, str] = {"role": "system"}
"""Labels of the system node group; everything that must not run on (or wake) a GPU node selects it."""

EFA_LABEL = "vpc.amazonaws.com/efa.present"
"""Set to "true" on nodes wired with EFA; the EFA device plugin selects on it."""

AUTOSCALER_GPU_LABEL = "k8s.amazonaws.com/accelerator"
"""The label the Cluster Autoscaler's AWS provider reads to know a node is a GPU node
(cluster-autoscaler/cloudprovider/aws ``GPULabel``)."""


def accelerator_label_value(gpu_model: str) -> str:
    """``nvidia-<gpu model>`` (nvidia-h100, nvidia-a10g): the autoscaler only tests the label's
    presence, the value names the GPU for people and selectors."""
    return f"nvidia-{gpu_model.lower()}"


# --- Karpenter (gpuNodes.provisioner: karpenter) -------------------------------------------------

KARPENTER_NODE_POOL = "rlinf-gpu"
"""The NodePool (and EC2NodeClass) of the GPU nodes when Karpenter launches them."""

NODE_POOL_LABEL = "karpenter.sh/nodepool"
"""Karpenter labels every node it launches with its NodePool's name; the Kueue flavors select it."""

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""The kubelet's (and Karpenter's) instance-type label: a Kueue flavor per allowed type selects it,
so all pods of one run get one type."""

DO_NOT_DISRUPT_ANNOTATION: Mapping[str, str] = {"karpenter.sh/do-not-disrupt": "true"}
"""Pod annotation: Karpenter never voluntarily disrupts (consolidation, drift, expiry) a node that
runs a pod carrying it; every training pod does when Karpenter launches the GPU nodes."""


class GpuNodeFacts(Protocol):
    """What the node labels depend on: plain values (config's GpuNodeSettings has them)."""

    @property
    def efa(self) -> bool: ...

    @property
    def gpu_model(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


def node_labels(settings: GpuNodeFacts, autoscaled: bool = False) -> dict[str, str]:
    """The GPU node group's labels: the GPU role, the EFA label (when EFA is on), the autoscaler's
    GPU label (when ``autoscaled``, default False), then ``labels`` from config.
    (``node.kubernetes.io/instance-type`` is set by the kubelet itself.)

    Why the GPU label: a new node has no ``nvidia.com/gpu`` until the device plugin registers.
    Without the label the autoscaler takes it for a ready node that cannot fit the pending pod
    and adds another GPU node; with it, the node counts as upcoming until its GPUs appear
    (Cluster Autoscaler FAQ, GPU node groups)."""
    labels = dict(GPU_NODE_LABELS)
    if settings.efa:
        labels[EFA_LABEL] = "true"
    if autoscaled:
        labels[AUTOSCALER_GPU_LABEL] = accelerator_label_value(settings.gpu_model)
    labels.update(settings.labels)
    return labels

