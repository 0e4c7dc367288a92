"""The GPU instance types this library knows, and everything that follows from one.

One row per type. Every figure that depends on the instance type (EFA interfaces, pod CPU and
memory, NCCL settings, price) is derived from this table, never typed again elsewhere.

Sources (as the ``source`` column names them):
- ``vpc-cni``: aws/amazon-vpc-cni-k8s ``pkg/vpc/vpc_ip_resource_limit.go`` (network cards, ENIs);
- ``ec2``: the EC2 accelerated-computing instance pages (GPUs, GPU memory, vCPU, memory,
  bandwidth, GPUDirect RDMA, which network card has no EFA);
- ``karpenter``: aws/karpenter-provider-aws ``website/content/en/docs/reference/instance-types.md``,
  generated from DescribeInstanceTypes (GPUs, GPU name and memory, vCPU, memory, bandwidth, EFA).
tests/test_catalog_sources.py checks every row against the two generated files' figures
(tests/data/catalog-sources.json, with their commits). Figures marked uncertain in the project's
field notes can be overridden per stack with ``gpuNodes.instanceOverrides``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

GIB_MIB = 1024
GIB = 2**30
"""Bytes in a GiB."""


@dataclass(frozen=True)
class InstanceType:
    """Figures of one EC2 GPU instance type."""

    name: str
    gpus: int
    gpu_model: str
    gpu_memory_gib: int
    vcpu: int
    memory_gib: int
    network_cards: int
    max_efa: int
    bandwidth_gbps: int
    gpudirect_rdma: bool
    source: str
    ena_only_card0: bool = False
    """Network card 0 has no EFA (p6-b300: 17 cards, EFA on cards 1 to 16): the primary interface is
    ENA only, and the EFA devices are on the other cards."""

    @property
    def efa_capable(self) -> bool:
        return self.max_efa > 0

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


# fmt: off
_ROWS: tuple[InstanceType, ...] = (
    #            name              gpus model   gpuGiB vcpu  memGiB cards efa  Gbps  rdma
    InstanceType("p4d.24xlarge",     8, "A100",   40,   96, 1152,    4,   4,  400, True,  "vpc-cni; ec2"),
    InstanceType("p4de.24xlarge",    8, "A100",   80,   96, 1152,    4,   4,  400, True,  "vpc-cni; ec2"),
    InstanceType("p5.48xlarge",      8, "H100",   80,  192, 2048,   32,  32, 3200, True,  "vpc-cni; ec2"),
    InstanceType("p5e.48xlarge",     8, "H200",  141,  192, 2048,   32,  32, 3200, True,  "vpc-cni; ec2"),
    InstanceType("p5en.48xlarge",    8, "H200",  141,  192, 2048,   16,  16, 3200, True,  "vpc-cni; ec2"),
    # GPU memory and RAM of p6-b200 are uncertain in the field notes: override per stack if needed.
    InstanceType("p6-b200.48xlarge", 8, "B200",  179,  192, 2048,    8,   8, 3200, True,  "vpc-cni; ec2 (memory uncertain)"),
    # GPUDirect RDMA on g6e is uncertain: the field notes mark it "no (?)".
    InstanceType("g6e.48xlarge",     8, "L40S",   48,  192, 1536,    4,   4,  400, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g5.48xlarge",      8, "A10G",   24,  192,  768,    1,   1,  100, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g6.48xlarge",      8, "L4",     24,  192,  768,    1,   1,  100, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g5.8xlarge",       1, "A10G",   24,   32,  128,    1,   1,   25, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g6e.8xlarge",      1, "L40S",   48,   32,  256,    1,   1,   25, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g5.2xlarge",       1, "A10G",   24,    8,   32,    1,   0,    5, False, "vpc-cni; ec2; karpenter"),
    # one H100 with one EFA (100 Gbps), sold as Capacity Blocks
    InstanceType("p5.4xlarge",       1, "H100",   80,   16,  256,    1,   1,  100, True,  "vpc-cni; ec2; karpenter"),
    # 17 network cards, card 0 ENA only (EC2 User Guide, P6-B300 network cards), 16 EFA, 6400 Gbps;
    # B300: 275040 MiB per GPU as the driver reports it (karpenter), 2144 GB for eight (ec2)
    InstanceType("p6-b300.48xlarge", 8, "B300",  268,  192, 4096,   17,  16, 6400, True,  "vpc-cni; ec2; karpenter",
                 ena_only_card0=True),
    # g6e (L40S) sizes with room for a training pod (g6e.xlarge's 4 vCPU and 2.5 Gbps are left out);
    # EFA from 8xlarge up; GPUDirect RDMA uncertain as for the other g6e rows
    InstanceType("g6e.2xlarge",      1, "L40S",   48,    8,   64,    1,   0,    5, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g6e.4xlarge",      1, "L40S",   48,   16,  128,    1,   0,   20, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g6e.12xlarge",     4, "L40S",   48,   48,  384,    1,   1,  100, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g6e.16xlarge",     1, "L40S",   48,   64,  512,    1,   1,   35, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g6e.24xlarge",     4, "L40S",   48,   96,  768,    2,   2,  200, False, "vpc-cni; ec2; karpenter"),
    # g7e: NVIDIA RTX PRO 6000 Blackwell Server Edition (96 GiB); GPUDirect RDMA not confirmed in a
    # source read here, so off (NCCL then stages through host memory)
    InstanceType("g7e.2xlarge",      1, "RTXPRO6000", 96,  8,   64,    1,   0,   50, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g7e.4xlarge",      1, "RTXPRO6000", 96, 16,  128,    1,   0,   50, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g7e.8xlarge",      1, "RTXPRO6000", 96, 32,  256,    1,   1,  100, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g7e.12xlarge",     2, "RTXPRO6000", 96, 48,  512,    1,   1,  400, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g7e.24xlarge",     4, "RTXPRO6000", 96, 96, 1024,    2,   2,  800, False, "vpc-cni; ec2; karpenter"),
    InstanceType("g7e.48xlarge",     8, "RTXPRO6000", 96, 192, 2048,   4,   4, 1600, False, "vpc-cni; ec2; karpenter"),
)
# fmt: on

CATALOG: Mapping[str, InstanceType] = {row.name: row for row in _ROWS}

_GRACE_BLACKWELL = (
    "an NVIDIA Grace Blackwell UltraServer node ({gpu}): Arm (Grace) CPUs, which this library's x86_64 AMI "
    "(AL2023_x86_64_NVIDIA) and training images do not run; its GPUs share memory across nodes through IMEX "
    "channels, which need the IMEX daemon and NVIDIA's DRA driver (ComputeDomain, Kubernetes DRA), not installed here; "
    "not supported until those are"
)
REFUSED: Mapping[str, str] = {
    "p6e-gb200.36xlarge": _GRACE_BLACKWELL.format(gpu="GB200 NVL72"),
    "p6e-gb300.36xlarge": _GRACE_BLACKWELL.format(gpu="GB300 NVL72"),
}
"""GPU types EC2 sells that this library refuses, even with every figure given, and why."""


@dataclass(frozen=True)
class InstanceStore:
    """The instance-store NVMe disks of a type: ``disks`` x ``disk_gb`` (decimal GB, as EC2 gives
    them). nodeadm's ``localStorage: RAID0`` (and Karpenter's ``instanceStorePolicy: RAID0``)
    stripes them into one array that holds the kubelet's and containerd's directories."""

    disks: int
    disk_gb: int

    @property
    def total_gb(self) -> int:
        return self.disks * self.disk_gb

    @property
    def total_gib(self) -> float:
        return self.total_gb * 1e9 / 2**30


# fmt: off
INSTANCE_STORE: Mapping[str, InstanceStore] = {
    # DescribeInstanceTypes InstanceStorageInfo (disks x size, TotalSizeInGB), as
    # aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md lists it
    # (karpenter.k8s.aws/instance-local-nvme, GB); the EC2 pages round p5's 3800 GB disks to 3.84 TB
    "p4d.24xlarge":     InstanceStore(8, 1000),
    "p4de.24xlarge":    InstanceStore(8, 1000),
    "p5.48xlarge":      InstanceStore(8, 3800),
    "p5e.48xlarge":     InstanceStore(8, 3800),
    "p5en.48xlarge":    InstanceStore(8, 3800),
    "p6-b200.48xlarge": InstanceStore(8, 3800),
    "g6e.48xlarge":     InstanceStore(4, 1900),
    "g5.48xlarge":      InstanceStore(2, 3800),
    "g6.48xlarge":      InstanceStore(8, 940),
    "g5.8xlarge":       InstanceStore(1, 900),
    "g6e.8xlarge":      InstanceStore(1, 900),
    "g5.2xlarge":       InstanceStore(1, 450),
    # the types added for issue 53: totals as Karpenter lists them (tests/test_catalog_sources.py checks
    # them); the disk counts from the EC2 instance-store table (1900 GB disks on g6e and g7e)
    "p5.4xlarge":       InstanceStore(1, 3800),
    "p6-b300.48xlarge": InstanceStore(8, 3800),
    "g6e.2xlarge":      InstanceStore(1, 450),
    "g6e.4xlarge":      InstanceStore(1, 600),
    "g6e.12xlarge":     InstanceStore(2, 1900),
    "g6e.16xlarge":     InstanceStore(1, 1900),
    "g6e.24xlarge":     InstanceStore(2, 1900),
    "g7e.2xlarge":      InstanceStore(1, 1900),
    "g7e.4xlarge":      InstanceStore(1, 1900),
    "g7e.8xlarge":      InstanceStore(1, 1900),
    "g7e.12xlarge":     InstanceStore(2, 1900),
    "g7e.24xlarge":     InstanceStore(4, 1900),
    "g7e.48xlarge":     InstanceStore(8, 1900),
}
# fmt: on
"""Instance-store NVMe per catalog type; a type missing here (one given by instanceOverrides) is
taken to have none."""


def instance_store(name: str) -> InstanceStore | None:
    """The instance-store disks of ``name``, or None when it has none (or the catalog does not know)."""
    return INSTANCE_STORE.get(name)

# The instance types sold as Capacity Blocks for ML: p4d, p5, p5e, p5en, trn1 and trn2 from the
# EC2 User Guide ("Capacity Blocks for ML"); p4de, p5.4xlarge, p6-b200 and the p6e-gb200
# UltraServer from SageMaker's ReservedCapacityInstanceType (the same reservations); P6-B300 from
# AWS PCS "Using Capacity Blocks". The p6e UltraServer types are in REFUSED (Arm, IMEX, DRA): listed
# here so that the block is not what refuses them. Generous on purpose: a type missing here would be refused, a
# CAPACITY_BLOCK node group of a type absent from all of them waits for a reservation that
# cannot exist.
CAPACITY_BLOCK_TYPES: frozenset[str] = frozenset({
    "p4d.24xlarge", "p4de.24xlarge",
    "p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6-b200.48xlarge", "p6-b300.48xlarge", "p6e-gb200.36xlarge",
    "trn1.32xlarge", "trn2.48xlarge",
})


class UnknownInstanceType(KeyError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        if self.name in REFUSED:
            return f"refused instance type {self.name!r}; {REFUSED[self.name]}"
        return (
            f"unknown instance type {self.name!r}; known types: {', '.join(sorted(CATALOG))} "
            "(or give its figures under gpuNodes.instanceOverrides)"
        )


def lookup(name: str, overrides: Mapping[str, object] | None = None) -> InstanceType:
    """The catalog row for ``name``, with per-stack ``overrides`` applied.

    An unknown type needs every figure in ``overrides``; a known one may override any subset.
    """
    overrides = dict(overrides or {})
    if name in REFUSED:
        raise UnknownInstanceType(name)
    base = CATALOG.get(name)
    if base is None:
        if not overrides:
            raise UnknownInstanceType(name)
        return InstanceType(name=name, source="stack config", **overrides)  # type: ignore[arg-type]
    if overrides:
        return replace(base, source=f"{base.source}; stack overrides", **overrides)  # type: ignore[arg-type]
    return base


# --- EFA network interfaces -------------------------------------------------------------------


@dataclass(frozen=True)
class EfaInterface:
    network_card_index: int
    device_index: int
    interface_type: str  # "efa", "efa-only", or "interface" (ENA only: card 0 of a type without EFA there)


EFA_INTERFACE_TYPES = ("efa", "efa-only")


def efa_interfaces_for(instance: InstanceType) -> list[EfaInterface]:
    """The launch-template interfaces of an EFA node.

    Card 0 / device 0 is a full ``efa`` interface (it carries the node's IP); every other network
    card gets one ``efa-only`` interface at device index 1, which uses no VPC IP (terraform-aws-eks
    v21 default; needs VPC CNI >= 1.18.5). The older layout, ``efa`` on every card, costs one VPC
    IP per card: 32 per p5 node. Where card 0 has no EFA (``ena_only_card0``: p6-b300), card 0 /
    device 0 is the ENA ``interface`` and cards 1 to ``max_efa`` get the ``efa-only`` interfaces.
    """
    if not instance.efa_capable:
        return []
    if instance.ena_only_card0:
        cards = min(instance.network_cards, instance.max_efa + 1)
        return [EfaInterface(0, 0, "interface")] + [EfaInterface(card, 1, "efa-only") for card in range(1, cards)]
    cards = min(instance.network_cards, instance.max_efa)
    return [EfaInterface(0, 0, "efa")] + [EfaInterface(card, 1, "efa-only") for card in range(1, cards)]


def efa_device_count(instance: InstanceType) -> int:
    """EFA devices of a node with the launch template's EFA layout (the ENA interface has none)."""
    return sum(1 for nic in efa_interfaces_for(instance) if nic.interface_type in EFA_INTERFACE_TYPES)


# --- Node allocatable capacity -----------------------------------------------------------------


def max_pods(instance: InstanceType) -> int:
    """Pods per node as nodeadm (AL2023) sets it for large instances: 250 above 30 vCPU, else 110."""
    return 250 if instance.vcpu > 30 else 110


def kube_reserved_millicpu(vcpu: int) -> int:
    """EKS AMI kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next two,
    0.25% of every core above four (amazon-eks-ami ``get_cpu_millicores_to_reserve``)."""
    millicores = 0.0
    for core in range(vcpu):
        millicores += 60 if core == 0 else 10 if core == 1 else 5 if core < 4 else 2.5
    return int(millicores)


def kube_reserved_memory_mib(instance: InstanceType) -> int:
    """EKS AMI kube-reserved memory: 255 MiB + 11 MiB per pod the node may run."""
    return 255 + 11 * max_pods(instance)


# Firmware, the hypervisor and the kernel's own page structures take a share of the advertised RAM
# that grows with the machine, so the kubelet's memory capacity (MemTotal) is below it. Karpenter
# assumes 7.5% until a node has reported (aws/karpenter-provider-aws VM_MEMORY_OVERHEAD_PERCENT,
# default 0.075). A pod sized to the advertised RAM is Pending forever on a real node.
VM_MEMORY_OVERHEAD_FRACTION = 0.075


def memory_capacity_mib(instance: InstanceType) -> int:
    """The memory a node reports to the kubelet: the advertised RAM less the VM overhead."""
    return int(instance.memory_gib * GIB_MIB * (1 - VM_MEMORY_OVERHEAD_FRACTION))


EVICTION_HARD_MIB = 100  # kubelet evictionHard memory.available on EKS AMIs

# What the node's own DaemonSets request on a GPU node (aws-node, kube-proxy, eks-pod-identity-agent,
# the NVIDIA and EFA device plugins, FSx CSI node, the node monitoring agent): rounded up so the
# training pod always fits. The metrics backend's DaemonSets come on top (OBSERVABILITY_DAEMONSETS).
DAEMONSET_MILLICPU = 1000
DAEMONSET_MEMORY_MIB = 2 * GIB_MIB

OBSERVABILITY_DAEMONSETS: dict[str, dict[str, tuple[int, int]]] = {
    # amazon-cloudwatch-observability 6.4.0 values.yaml requests (millicpu, MiB) of what runs on a
    # GPU node: the agent, Fluent Bit, the DCGM exporter, and node exporter (OpenTelemetry
    # Container Insights); tests/test_observability.py reads them from the chart's values
    "cloudwatch": {"cloudwatch-agent": (250, 128), "fluent-bit": (50, 25), "dcgm-exporter": (250, 128), "node-exporter": (50, 30)},
    # the requests observability/prometheus.py sets; tests/test_observability.py reads them from the plan
    "prometheus": {"node-exporter": (50, 64), "dcgm-exporter": (100, 512), "efa-exporter": (10, 16)},
    "none": {},
}
"""The DaemonSets each ``observability.backend`` adds to every GPU node, by name: their requests."""


def daemonset_budget(backend: str = "none") -> tuple[int, int]:
    """(millicpu, MiB) the GPU node's DaemonSets request: the node's own allowance plus the
    metrics backend's DaemonSets, computed from their requests."""
    added = OBSERVABILITY_DAEMONSETS[backend].values()
    return DAEMONSET_MILLICPU + sum(cpu for cpu, _ in added), DAEMONSET_MEMORY_MIB + sum(mib for _, mib in added)


@dataclass(frozen=True)
class PodShape:
    """What one training pod asks for so that it fills exactly one node."""

    gpus: int
    efa: int
    millicpu: int
    memory_mib: int
    hugepages_2mi_mib: int
    shm_mib: int

    @property
    def cpu(self) -> str:
        return f"{self.millicpu}m" if self.millicpu % 1000 else str(self.millicpu // 1000)

    @property
    def memory(self) -> str:
        return f"{self.memory_mib // GIB_MIB}Gi" if self.memory_mib % GIB_MIB == 0 else f"{self.memory_mib}Mi"


def allocatable(instance: InstanceType, hugepages_2mi_mib: int = 0) -> tuple[int, int]:
    """(millicpu, memory MiB) that the kubelet offers to pods on one node.

    The kubelet's memory capacity is the guest's MemTotal, below the advertised RAM
    (:func:`memory_capacity_mib`). Memory set aside as 2 MiB hugepages is not offered as ordinary
    memory.
    """
    millicpu = instance.vcpu * 1000 - kube_reserved_millicpu(instance.vcpu)
    memory = (
        memory_capacity_mib(instance)
        - kube_reserved_memory_mib(instance)
        - EVICTION_HARD_MIB
        - hugepages_2mi_mib
    )
    return millicpu, memory


# The kubelet's ephemeral-storage allocatable: its filesystem's capacity less kube-reserved
# ephemeral-storage (1Gi, the EKS AMIs' and Karpenter's default: karpenter-provider-aws
# pkg/providers/instancetype/types.go kubeReservedResources) and the hard eviction threshold
# nodefs.available 10% (the kubelet's default; the same file's evictionThreshold).
KUBE_RESERVED_EPHEMERAL_GIB = 1.0
NODEFS_EVICTION_FRACTION = 0.10


def ephemeral_allocatable_gib(capacity_gib: float) -> float:
    """What pods may request of a node filesystem of ``capacity_gib`` (``ephemeral-storage``)."""
    return capacity_gib - KUBE_RESERVED_EPHEMERAL_GIB - capacity_gib * NODEFS_EVICTION_FRACTION


def pod_shape_for(instance: InstanceType, hugepages_2mi_mib: int, shm_fraction: float, backend: str = "none") -> PodShape:
    """The training pod of one node: all its GPUs and EFA devices, and the CPU and memory the
    node can spare after the kubelet and its DaemonSets, rounded down to whole CPUs and GiB.

    ``shm_fraction`` of the pod's memory backs ``/dev/shm`` (Ray's object store lives there;
    RLinf's images are run with ``--shm-size 100g``). ``backend``: the stack's
    ``observability.backend``, whose DaemonSets the node also runs (:func:`daemonset_budget`).
    """
    alloc_cpu, alloc_mem = allocatable(instance, hugepages_2mi_mib)
    daemonset_cpu, daemonset_mib = daemonset_budget(backend)
    millicpu = (alloc_cpu - daemonset_cpu) // 1000 * 1000
    memory_mib = (alloc_mem - daemonset_mib) // GIB_MIB * GIB_MIB
    shm_mib = int(memory_mib * shm_fraction) // GIB_MIB * GIB_MIB
    return PodShape(
        gpus=instance.gpus,
        efa=instance.max_efa,
        millicpu=millicpu,
        memory_mib=memory_mib,
        hugepages_2mi_mib=hugepages_2mi_mib,
        shm_mib=shm_mib,
    )
