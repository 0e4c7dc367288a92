"""The GPU nodes section: the EKS managed node group of EFA GPU nodes, how they are bought
(on demand, spot, a capacity reservation or a Capacity Block), placed and labelled.

GpuNodeSettings' rules are small named checks (``_efa_problems``, ``_capacity_problems``, ...),
each returning its problems; the model validator reports them all at once."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from .. import catalog, pins
from ..scheduling import AUTOSCALER_GPU_LABEL, EFA_LABEL, node_labels
from .aws_rules import label_problem
from .errors import key_path, problem_line, raise_all, rule_error
from .types import Bool, ChartVersion, Ec2InstanceType, Int, PositiveFloat, SettingsModel


class InstanceOverrides(SettingsModel):
    """Figures of an instance type, for a type the catalog lacks or to correct a figure."""

    gpus: Optional[Int] = Field(None, ge=1)
    """GPUs per instance."""
    gpu_model: Optional[str] = None
    """GPU model, such as H100 (the GPU nodes' k8s.amazonaws.com/accelerator label is nvidia-<model>)."""
    gpu_memory_gib: Optional[Int] = Field(None, ge=1)
    """Memory of one GPU in GiB."""
    vcpu: Optional[Int] = Field(None, ge=1)
    """vCPUs per instance (the node's allocatable CPU, and so the training pod's request, follow from it)."""
    memory_gib: Optional[Int] = Field(None, ge=1)
    """Instance memory in GiB (the node's allocatable memory, and so the training pod's request, follow from it)."""
    network_cards: Optional[Int] = Field(None, ge=1)
    """Network cards: one EFA interface on card 0 and one efa-only interface on every other card."""
    max_efa: Optional[Int] = Field(None, ge=0)
    """EFA interfaces the instance supports (0: no EFA); the pod asks for this many vpc.amazonaws.com/efa."""
    bandwidth_gbps: Optional[Int] = Field(None, ge=1)
    """Network line rate in Gbit/s (the preflight's bandwidth target is a fraction of it)."""
    gpudirect_rdma: Optional[Bool] = None
    """Whether EFA reads and writes GPU memory directly (GPUDirect RDMA: the pods get FI_EFA_USE_DEVICE_RDMA=1)."""

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class PlacementGroupSettings(SettingsModel):
    """The cluster placement group of the GPU nodes."""

    strategy: Literal["auto", "create", "existing", "none"] = "auto"
    """auto (the default): create one unless a capacity reservation or Capacity Block is used (a
    forced placement group then fails with InsufficientInstanceCapacity, terraform-aws-eks #3730)."""
    name: Optional[str] = None
    """With strategy existing: the placement group's name."""


# EC2 User Guide, "Find and purchase Capacity Blocks": every Capacity Block ends at 11:30 UTC,
# lasts at most 182 days and holds at most 64 instances.
CAPACITY_BLOCK_END_UTC = (11, 30)
CAPACITY_BLOCK_MAX_DAYS = 182
CAPACITY_BLOCK_MAX_INSTANCES = 64


class CapacityBlockSettings(SettingsModel):
    """When the Capacity Block runs (ISO-8601 with a UTC offset, e.g. 2027-01-11T11:30:00Z)."""

    start_time: Optional[datetime] = None
    """The block's start. When set, the node group is created at zero nodes and an Auto Scaling
    scheduled action brings it to nodeCount at this time (EKS guide "Create a managed node group
    with Capacity Blocks for ML"). Leave unset once the block is active: a start already past is
    refused (Auto Scaling refuses a scheduled action in the past). Defaults to None."""
    end_time: Optional[datetime] = None
    """The block's end (11:30 UTC). EKS itself scales the group to zero 40 minutes before it;
    used to check startTime; an end already past is refused. Defaults to None."""
    usd_per_instance_hour: Optional[PositiveFloat] = None
    """The block's reservation fee per instance-hour, as its offering quoted it (the effective
    instance hourly rate: UpfrontFee / (instances x hours) of aws ec2 describe-capacity-block-offerings),
    for the plan's cost: the whole block is paid up front at reservation, whether its nodes run or
    not. Defaults to None: the On-Demand price stands in (the block's rate is set by supply and
    demand at purchase)."""

    @field_validator("start_time", "end_time", mode="before")
    @classmethod
    def _iso_8601(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                # Python 3.10's fromisoformat does not read a trailing Z
                value = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
            except ValueError:
                raise PydanticCustomError("time", "an ISO-8601 time with a UTC offset, such as 2027-01-11T11:30:00Z") from None
        elif value is not None and not isinstance(value, datetime):
            raise PydanticCustomError("time", "an ISO-8601 time with a UTC offset, such as 2027-01-11T11:30:00Z")
        if isinstance(value, datetime) and value.tzinfo is None:
            raise PydanticCustomError("time", "needs a UTC offset (Z or +hh:mm), such as 2027-01-11T11:30:00Z")
        return value

    @staticmethod
    def api_time(value: datetime) -> str:
        """The provider's (and Auto Scaling's) spelling: UTC, YYYY-MM-DDThh:mm:ssZ."""
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    @model_validator(mode="after")
    def _rules(self) -> "CapacityBlockSettings":
        errors: list[PydanticCustomError] = []
        start, end = self.start_time, self.end_time
        if end is not None:
            utc = end.astimezone(timezone.utc)
            if (utc.hour, utc.minute, utc.second) != (*CAPACITY_BLOCK_END_UTC, 0):
                errors.append(rule_error("endTime", self.api_time(end), "every Capacity Block ends at 11:30:00 UTC"))
        if start is not None and end is not None:
            if end <= start:
                errors.append(rule_error("endTime", self.api_time(end), f"must be after startTime {self.api_time(start)}"))
            elif end - start > timedelta(days=CAPACITY_BLOCK_MAX_DAYS):
                errors.append(rule_error("endTime", self.api_time(end), f"a Capacity Block lasts at most {CAPACITY_BLOCK_MAX_DAYS} days"))
        raise_all(errors)
        return self


def capacity_block_time_problems(gpu: "GpuNodeSettings", now: datetime) -> list[str]:
    """A Capacity Block whose start or end is already past at ``now`` (the time of the plan or of
    ``pulumi up``): Auto Scaling refuses a scheduled action in the past, and an ended block has no
    capacity. Problem lines (key path from the stack's top), not plan fields: the plan stays
    deterministic."""
    block = gpu.capacity_block
    if gpu.capacity_type != "CAPACITY_BLOCK" or block is None:
        return []
    at = CapacityBlockSettings.api_time(now)
    if block.end_time is not None and block.end_time <= now:
        return [
            problem_line(
                "gpuNodes.capacityBlock.endTime",
                CapacityBlockSettings.api_time(block.end_time),
                f"is past (now {at}): the Capacity Block has ended; buy a new block and give its reservation id and times",
            )
        ]
    if block.start_time is not None and block.start_time <= now:
        return [
            problem_line(
                "gpuNodes.capacityBlock.startTime",
                CapacityBlockSettings.api_time(block.start_time),
                f"is past (now {at}), and Auto Scaling refuses a scheduled action in the past; the block has started: "
                "leave startTime out (the nodes start at once)",
            )
        ]
    return []


class KarpenterSettings(SettingsModel):
    """The Karpenter controller and its node class (with ``gpuNodes.provisioner: karpenter``)."""

    version: ChartVersion = pins.version("karpenter")
    """Karpenter chart version (oci://public.ecr.aws/karpenter/karpenter), pinned; its CRDs are the ones
    the NodePool and EC2NodeClass are checked against. Defaults to the pin in components/pins.yaml."""
    ami_alias: str = f"al2023@{pins.version('eks-ami-al2023')}"
    """The EKS AL2023 AMI release the nodes boot (EC2NodeClass amiSelectorTerms alias, al2023@vYYYYMMDD; the
    NVIDIA variant is chosen by instance type). Pinned, never @latest: a new AMI would replace idle nodes
    under a run. The release must ship the cluster's Kubernetes version (amazon-eks-ami's CHANGELOG, checked
    by the plan). Defaults to the pin in components/pins.yaml: al2023@v20260714, the newest release in the
    data, with Kubernetes 1.30 to 1.36 (every version EKS creates clusters of since 2026-03-23)."""
    consolidate_after_minutes: Int = Field(5, ge=0, le=1440)
    """How long an empty GPU node stays before Karpenter removes it (disruption.consolidateAfter). Defaults to 5."""

    @field_validator("ami_alias")
    @classmethod
    def _alias(cls, value: str) -> str:
        if not re.fullmatch(r"al2023@v\d{8}", value):
            raise PydanticCustomError("alias", "a pinned AL2023 AMI release such as al2023@v20260318 (not @latest)")
        return value


class GpuNodeSettings(SettingsModel):
    """The EFA GPU nodes: an EKS managed node group, or Karpenter's NodePool (provisioner karpenter)."""

    instance_type: Ec2InstanceType = "p5.48xlarge"
    """Defaults to p5.48xlarge."""
    instance_overrides: Optional[InstanceOverrides] = None
    """Figures of the instance type: every figure for a type the catalog lacks, or single figures to correct the catalog's."""
    node_count: Int = Field(1, ge=1, le=512)
    """Nodes the training run uses (desired size). Defaults to 1."""
    max_nodes: Optional[Int] = Field(None, ge=1, le=512)
    """Upper bound of the node group. Defaults to nodeCount."""
    scale_to_zero: Bool = False
    """Let the node group idle at zero nodes (needs the cluster autoscaler). Defaults to false."""
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = "ON_DEMAND"
    """How the nodes are bought: ON_DEMAND (the default, optionally in a capacity reservation), SPOT, or
    CAPACITY_BLOCK (a purchased Capacity Block for ML, with capacityReservationId)."""
    capacity_reservation_id: Optional[str] = None
    """An On-Demand Capacity Reservation (with ON_DEMAND) or the Capacity Block (with CAPACITY_BLOCK)."""
    capacity_block: Optional[CapacityBlockSettings] = None
    """With CAPACITY_BLOCK: the block's startTime and endTime."""
    placement_group: PlacementGroupSettings = Field(default_factory=PlacementGroupSettings)
    """The cluster placement group that keeps the nodes close on the network."""
    efa: Bool = True
    """Wire every network card with EFA. Defaults to true."""
    allow_tcp_fabric: Bool = False
    """With efa: false on a type that has EFA and more than one node: run NCCL between the nodes over
    TCP on purpose (a fraction of the EFA bandwidth, at the same price per hour). Refused without it.
    Defaults to false."""
    auto_repair: Bool = True
    """EKS node auto repair for the GPU node group (nodeRepairConfig) plus, on a new cluster, the
    eks-node-monitoring-agent add-on whose node conditions (AcceleratedHardwareReady: GPU XID
    errors, lost GPUs; NetworkingReady) it acts on: an unhealthy node is replaced. Defaults to true."""
    ami_type: Literal["AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA"] = "AL2023_x86_64_NVIDIA"
    """The EKS-optimized accelerated AMI: AL2023_x86_64_NVIDIA (the default) or
    BOTTLEROCKET_x86_64_NVIDIA (ships its own NVIDIA device plugin, so the chart is not installed)."""
    root_volume_gib: Int = Field(200, ge=100, le=16384)
    """Encrypted gp3 root volume. Defaults to 200 GiB."""
    local_nvme_raid0: Optional[Bool] = None
    """Stripe the instance-store NVMe disks as RAID0 for kubelet and containerd (AL2023 only): the
    run directory, the staged inputs and the images then live on the array, not the root volume.
    Defaults to true where the instance type has instance-store NVMe (p4d, p5, p5en, g5, ...) and the
    AMI is AL2023, else false; false keeps them on the root volume."""
    hugepages_gib: Int = Field(5, ge=0, le=64)
    """2 MiB hugepages per node for libfabric (EFA). Defaults to 5 GiB (awsome-distributed-training)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra node labels."""
    provisioner: Literal["managed", "karpenter"] = "managed"
    """Who launches the GPU nodes: managed (the default: an EKS managed node group of nodeCount nodes) or
    karpenter (a Karpenter NodePool and EC2NodeClass: nodes launched for admitted runs' pending pods, up to
    maxNodes, and removed once empty; no GPU node while idle)."""
    fallback_instance_types: list[Ec2InstanceType] = Field(default_factory=list)
    """With provisioner karpenter: further instance types, in order of preference after instanceType, with the
    same GPU count and EFA layout. Each is a Kueue flavor of its own, so one run never mixes types (needs the
    queue). Defaults to none."""
    karpenter: KarpenterSettings = Field(default_factory=KarpenterSettings)
    """With provisioner karpenter: the controller's chart version, the AMI release and how long empty nodes stay."""

    @field_validator("node_count", mode="before")
    @classmethod
    def _at_least_one(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise PydanticCustomError(
                "node_count",
                "at least 1: nodeCount is the nodes a run trains on. To keep no GPU node while idle, set "
                "gpuNodes.scaleToZero: true with autoscaler.enabled: true (nodes come when training pods are pending and "
                "go after the run), and gpuNodes.maxNodes for the most nodes",
            )
        return value

    @field_validator("capacity_reservation_id")
    @classmethod
    def _reservation(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.fullmatch(r"cr-[0-9a-f]{8,17}", value):
            raise PydanticCustomError("id", "a capacity reservation id such as cr-0123456789abcdef0")
        return value

    @property
    def instance(self) -> catalog.InstanceType:
        overrides = self.instance_overrides.given() if self.instance_overrides else None
        return catalog.lookup(self.instance_type, overrides)

    @property
    def nvme_raid0(self) -> bool:
        """Whether the nodes stripe their instance-store NVMe as RAID0: ``localNvmeRaid0`` as
        given, else on where the type has instance storage (catalog.INSTANCE_STORE) and the AMI is AL2023."""
        if self.local_nvme_raid0 is not None:
            return self.local_nvme_raid0
        return self.ami_type == "AL2023_x86_64_NVIDIA" and catalog.instance_store(self.instance_type) is not None

    @property
    def gpu_model(self) -> str:
        """The instance's GPU model, such as H100 (scheduling.node_labels reads it)."""
        return self.instance.gpu_model

    @property
    def reserved_capacity(self) -> bool:
        return self.capacity_reservation_id is not None

    @property
    def wants_placement_group(self) -> bool:
        strategy = self.placement_group.strategy
        return strategy in ("create", "existing") or (strategy == "auto" and not self.reserved_capacity)

    @property
    def scheduled_start(self) -> Optional[datetime]:
        """The Capacity Block's start when the nodes wait for it at zero, else None."""
        block = self.capacity_block
        return block.start_time if self.capacity_type == "CAPACITY_BLOCK" and block is not None else None

    @property
    def min_size(self) -> int:
        return 0 if self.scale_to_zero else self.node_count

    @property
    def max_size(self) -> int:
        return self.max_nodes or self.node_count

    @model_validator(mode="after")
    def _rules(self) -> "GpuNodeSettings":
        instance = self._known_instance()
        raise_all(
            [
                *self._efa_problems(instance),
                *self._capacity_problems(),
                *self._placement_problems(),
                *self._size_problems(),
                *self._label_problems(),
                *self._provisioner_problems(instance),
            ]
        )
        return self

    def _known_instance(self) -> catalog.InstanceType:
        """The instance type's figures; an unknown type (or missing figures) fails at once."""
        try:
            return self.instance
        except catalog.UnknownInstanceType as err:
            raise rule_error("instanceType", self.instance_type, str(err).split("; ", 1)[1]) from None
        except TypeError:
            given = self.instance_overrides.given() if self.instance_overrides else {}
            missing = [to_camel(f) for f in InstanceOverrides.model_fields if f not in given]
            raise rule_error(
                "instanceOverrides",
                {to_camel(k): v for k, v in given.items()},
                f"{self.instance_type!r} is not in the catalog, so every figure is needed; missing: " + ", ".join(missing),
            ) from None

    def _efa_problems(self, instance: catalog.InstanceType) -> list[PydanticCustomError]:
        if self.efa and not instance.efa_capable:
            efa_types = sorted(name for name, row in catalog.CATALOG.items() if row.efa_capable)
            return [rule_error("efa", True, f"{self.instance_type} has no EFA; set efa: false or use one of {', '.join(efa_types)}")]
        if not self.efa and instance.efa_capable and self.node_count > 1 and not self.allow_tcp_fabric:
            return [rule_error(
                "efa", False,
                f"{self.instance_type} has EFA and the stack runs {self.node_count} nodes: without it NCCL between them goes "
                f"over TCP at the same hourly price; set efa: true, or allowTcpFabric: true to run over TCP on purpose",
            )]  # fmt: skip
        return []

    def _capacity_problems(self) -> list[PydanticCustomError]:
        """Capacity Blocks (types, reservation id, block times, size) and reservations."""
        errors: list[PydanticCustomError] = []
        block = self.capacity_type == "CAPACITY_BLOCK"
        if block and self.instance_type not in catalog.CAPACITY_BLOCK_TYPES:
            errors.append(
                rule_error(
                    "capacityType",
                    "CAPACITY_BLOCK",
                    f"EC2 sells no Capacity Blocks of {self.instance_type}; they exist for "
                    + ", ".join(sorted(catalog.CAPACITY_BLOCK_TYPES)),
                )
            )
        if block and not self.capacity_reservation_id:
            errors.append(rule_error("capacityReservationId", None, "capacityType CAPACITY_BLOCK needs the Capacity Block's reservation id"))
        if self.capacity_block is not None and not block:
            errors.append(rule_error("capacityBlock", self.capacity_block.model_dump(by_alias=True, mode="json", exclude_none=True), "only with capacityType CAPACITY_BLOCK"))
        if block and self.max_size > CAPACITY_BLOCK_MAX_INSTANCES:
            errors.append(
                rule_error(
                    "maxNodes" if self.max_nodes else "nodeCount",
                    self.max_size,
                    f"a Capacity Block holds at most {CAPACITY_BLOCK_MAX_INSTANCES} instances (and the launch template targets one block)",
                )
            )
        if self.capacity_type == "SPOT" and self.capacity_reservation_id:
            errors.append(rule_error("capacityReservationId", self.capacity_reservation_id, "a reservation cannot back SPOT capacity; use ON_DEMAND or CAPACITY_BLOCK"))
        return errors

    def _placement_problems(self) -> list[PydanticCustomError]:
        errors: list[PydanticCustomError] = []
        strategy, name = self.placement_group.strategy, self.placement_group.name
        if self.reserved_capacity and strategy in ("create", "existing"):
            errors.append(
                rule_error(
                    "placementGroup.strategy",
                    strategy,
                    "a capacity reservation already fixes placement; forcing a placement group fails with "
                    "InsufficientInstanceCapacity (use auto or none)",
                )
            )
        if strategy == "existing" and not name:
            errors.append(rule_error("placementGroup.name", None, "strategy existing needs the placement group's name"))
        if strategy != "existing" and name:
            errors.append(rule_error("placementGroup.name", name, "a name is only used with strategy existing"))
        return errors

    def _size_problems(self) -> list[PydanticCustomError]:
        """The node group's bounds and the AMI's disk setup."""
        errors: list[PydanticCustomError] = []
        if self.max_nodes is not None and self.max_nodes < self.node_count:
            errors.append(rule_error("maxNodes", self.max_nodes, f"must be at least nodeCount ({self.node_count})"))
        if self.local_nvme_raid0 and self.ami_type != "AL2023_x86_64_NVIDIA":
            errors.append(rule_error("localNvmeRaid0", True, "the NVMe RAID0 is set up by nodeadm, on AL2023 AMIs only"))
        return errors

    @property
    def karpenter_types(self) -> list[str]:
        """The NodePool's instance types, in order of preference: instanceType, then the fallbacks."""
        return [self.instance_type, *self.fallback_instance_types]

    def _provisioner_problems(self, instance: catalog.InstanceType) -> list[PydanticCustomError]:
        """Karpenter's own limits, and fallback types that a run could not use like instanceType."""
        errors: list[PydanticCustomError] = []
        if self.provisioner == "managed":
            if self.fallback_instance_types:
                errors.append(rule_error("fallbackInstanceTypes", self.fallback_instance_types, "only with provisioner karpenter (a managed node group has one instance type)"))
            return errors
        if self.ami_type != "AL2023_x86_64_NVIDIA":
            errors.append(rule_error("amiType", self.ami_type, "provisioner karpenter boots the AL2023 NVIDIA AMI (karpenter.amiAlias); use AL2023_x86_64_NVIDIA"))
        if self.instance_overrides is not None:
            errors.append(rule_error("instanceOverrides", self.instance_overrides.given(), "Karpenter reads the instance figures from EC2 itself; with provisioner karpenter use catalog types only"))
        layout = catalog.efa_interfaces_for(instance) if self.efa else []
        seen = {self.instance_type}
        for index, name in enumerate(self.fallback_instance_types):
            key = f"fallbackInstanceTypes[{index}]"
            if name in seen:
                errors.append(rule_error(key, name, "listed twice (instanceType and the fallbacks are one ordered list)"))
                continue
            seen.add(name)
            if name not in catalog.CATALOG:
                errors.append(rule_error(key, name, "not in the catalog; fallback types are catalog types: " + ", ".join(sorted(catalog.CATALOG))))
                continue
            other = catalog.lookup(name)
            other_layout = catalog.efa_interfaces_for(other) if self.efa else []
            if other.gpus != instance.gpus or other_layout != layout:
                same = sorted(
                    n for n, row in catalog.CATALOG.items()
                    if n != self.instance_type and row.gpus == instance.gpus and (catalog.efa_interfaces_for(row) if self.efa else []) == layout
                )
                errors.append(
                    rule_error(
                        key,
                        name,
                        f"has {other.gpus} GPUs and {len(other_layout)} EFA interfaces, {self.instance_type} {instance.gpus} and {len(layout)}: "
                        "a run's pods ask for one shape; same shape: " + (", ".join(same) or "none in the catalog"),
                    )
                )
            elif other.vcpu < instance.vcpu or other.memory_gib < instance.memory_gib:
                errors.append(
                    rule_error(
                        key,
                        name,
                        f"has {other.vcpu} vCPU and {other.memory_gib} GiB, less than {self.instance_type} ({instance.vcpu} vCPU, "
                        f"{instance.memory_gib} GiB): the training pod sized for {self.instance_type} would not fit",
                    )
                )
            elif self.capacity_type == "CAPACITY_BLOCK":
                errors.append(rule_error(key, name, "a Capacity Block holds one instance type; no fallback with capacityType CAPACITY_BLOCK"))
        return errors

    def _label_problems(self) -> list[PydanticCustomError]:
        errors = []
        for key, value in self.labels.items():
            problem = label_problem(key, value)
            if problem:
                errors.append(rule_error(key_path("labels", key), value, problem))
        if self.labels:
            # The training pods select role: gpu-training and the EFA device plugin selects the EFA
            # label; a label of the same key with another value leaves them Pending.
            built_in = node_labels(self.model_copy(update={"labels": {}}), autoscaled=True)
            for key, value in self.labels.items():
                if key in built_in and value != built_in[key] and key != AUTOSCALER_GPU_LABEL:
                    errors.append(
                        rule_error(
                            key_path("labels", key),
                            value,
                            f"overrides the built-in node label {key}={built_in[key]} that "
                            + ("the EFA device plugin selects" if key == EFA_LABEL else "the training pods select")
                            + "; they would never schedule. Use another key",
                        )
                    )
        return errors
