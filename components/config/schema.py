"""The settings schema: one frozen pydantic model tree and its field types.

Every key lives in the project namespace (``rlinf-eks:``) except the region (``aws:region``).
Stack files use camelCase (``gpuNodes.instanceType``); Python uses snake_case. Unknown keys are
rejected, and every violated rule is reported at once, each naming its key path, the value and
what would be valid, before any resource is created.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Literal, Mapping, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from .. import aws_names, catalog
# scheduling imports config only for type checking: no cycle
from ..scheduling import AUTOSCALER_GPU_LABEL, EFA_LABEL, node_labels
from . import rules
from .errors import ConfigError, _raise_all, _rule, describe
from .rules import _EXTRA_RULES, _FAILED_SECTIONS, _STACK, MAX_USER_TAGS, StackRule, bucket_problem, cluster_name_problem, label_problem, tag_problem

PROJECT = "rlinf-eks"

# Ray releases KubeRay and RLinf must not run (field notes, section 2).
_BAD_RAY = ((2, 11, 0), (2, 37, 0))
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# registry/repository[:tag][@digest]: no blanks or quotes (the OCI distribution spec's characters)
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")



# Pydantic's lax mode reads `nodeCount: true` as 1 and `efa: "yes"` as true; a YAML slip must
# fail instead. YAML integers stay valid for floats (gpuMemoryUtilization: 1).
def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "must be a number, not a boolean")
    return value


Int = Annotated[int, Strict()]
Bool = StrictBool
Float = Annotated[float, BeforeValidator(_no_bool)]


def _close(value: str, valid: Any) -> str:
    """' (did you mean X?)' for a near miss among ``valid``, else ''."""
    match = difflib.get_close_matches(value, sorted(valid), n=1, cutoff=0.8)
    return f" (did you mean {match[0]}?)" if match else ""


def _aws_id(kind: str, what: str, hint: str = "") -> Any:
    """An EC2 resource id of one kind: ``<kind>-`` and 8 or 17 hex digits (the EC2 API's id forms)."""

    def check(value: str) -> str:
        if not re.fullmatch(rf"{kind}-([0-9a-f]{{8}}|[0-9a-f]{{17}})", value):
            raise PydanticCustomError("id", "{text}", {"text": f"not {what} id such as {kind}-0123456789abcdef0{hint}"})
        return value

    return AfterValidator(check)


VpcId = Annotated[str, _aws_id("vpc", "a VPC", "; leave vpcId out to create a new VPC")]
SubnetId = Annotated[str, _aws_id("subnet", "a subnet")]


def _ec2_type(value: str) -> str:
    if value not in aws_names.EC2_INSTANCE_TYPES:
        raise PydanticCustomError(
            "instance_type",
            "{text}",
            {"text": f"not an EC2 instance type{_close(value, aws_names.EC2_INSTANCE_TYPES)} (botocore {aws_names.BOTOCORE_VERSION}'s list)"},
        )
    return value


Ec2InstanceType = Annotated[str, AfterValidator(_ec2_type)]

# A chart version is SemVer 2 (Helm requires it: helm.sh/docs/topics/charts "Charts and Versioning").
_SEMVER = r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?"


def _chart_version(prefix: str = "") -> Any:
    def check(value: str) -> str:
        if not re.fullmatch(re.escape(prefix) + _SEMVER, value):
            raise PydanticCustomError("version", "{text}", {"text": f"not a chart version: {prefix}MAJOR.MINOR.PATCH, such as {prefix}1.7.0"})
        return value

    return AfterValidator(check)


ChartVersion = Annotated[str, _chart_version()]


def _absolute_path(value: str) -> str:
    # Kubernetes rejects a relative volumeMount.mountPath and one with ':' (ValidateVolumeMounts);
    # '..' would leave the mount, and '/' would hide the image's root.
    if not value.startswith("/") or ".." in value.split("/") or ":" in value or value.rstrip("/") == "":
        raise PydanticCustomError("path", "an absolute path inside the pod below /, without '..' or ':', such as /fsx")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
        use_attribute_docstrings=True,
    )


# --- network ------------------------------------------------------------------------------------


class NetworkSettings(_Model):
    """The VPC: a new one (default) or an existing one given by id and subnets."""

    vpc_id: Optional[VpcId] = None
    """An existing VPC. Defaults to None: a new VPC is created."""
    cidr: str = "10.0.0.0/16"
    """CIDR of a new VPC. Defaults to 10.0.0.0/16."""
    availability_zones: list[str] = Field(default_factory=list)
    """AZs of a new VPC's subnets (at least two: the EKS control plane needs two). Defaults to the
    GPU AZ and the next AZ of the region."""
    nat_gateways: Literal["single", "one-per-az"] = "single"
    """One NAT gateway for the VPC (cheaper) or one per AZ (survives an AZ outage). Defaults to single."""
    private_subnet_ids: list[SubnetId] = Field(default_factory=list)
    """With vpcId: the cluster's private subnets (at least two AZs)."""
    gpu_subnet_id: Optional[SubnetId] = None
    """With vpcId: the private subnet of the GPU nodes, in the GPU AZ."""

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.ip_network(value)
        except ValueError:
            try:
                host = ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise PydanticCustomError("cidr", "not a CIDR block such as 10.0.0.0/16") from None
            raise PydanticCustomError("cidr", "{text}", {"text": f"has host bits set: the network is {host}"}) from None
        if net.version != 4:
            raise PydanticCustomError("cidr", "a VPC's primary CIDR block is IPv4, such as 10.0.0.0/16")
        # AWS: a VPC's IPv4 block is /16 to /28 (VPC User Guide, "VPC CIDR blocks").
        if not 16 <= net.prefixlen <= 28:
            raise PydanticCustomError("cidr", "AWS allows VPC CIDR blocks from /16 (65,536 addresses) to /28")
        if net.prefixlen > 20:
            raise PydanticCustomError("cidr", "too small: a VPC for GPU nodes needs /20 or larger (every pod and EFA card takes a VPC IP)")
        return value

    @model_validator(mode="after")
    def _subnets_fit(self) -> "NetworkSettings":
        # network.subnet_plan: one private block per AZ plus a spare one carved into the public
        # subnets; AWS's smallest subnet is /28.
        if not self.create:
            return self
        azs = max(len(set(self.availability_zones)), 2)
        private = ipaddress.ip_network(self.cidr).prefixlen + math.ceil(math.log2(azs + 1))
        public = max(private + math.ceil(math.log2(azs)), 24)
        if public > 28:
            raise _rule("cidr", self.cidr, f"cannot hold a private and a public subnet in each of {azs} AZs (subnets are /28 or larger)")
        if len(self.availability_zones) != len(set(self.availability_zones)):
            raise _rule("availabilityZones", self.availability_zones, "lists an AZ twice")
        return self

    @property
    def create(self) -> bool:
        return self.vpc_id is None


# --- cluster ------------------------------------------------------------------------------------


class SystemNodeSettings(_Model):
    """The small on-demand node group for operators and device plugins."""

    instance_type: Ec2InstanceType = "m6i.xlarge"
    """Defaults to m6i.xlarge."""
    count: Int = Field(2, ge=1, le=10)
    """Defaults to 2."""


class ClusterSettings(_Model):
    """The EKS cluster: a new one (default) or an existing one given by name."""

    existing: Bool = False
    """Attach to an existing cluster (by ``name``) instead of creating one. Its kubeconfig comes from
    the secret key ``rlinf-eks:kubeconfig``. Defaults to false."""
    name: Optional[str] = None
    """Cluster name. Defaults to rlinf-<stack> for a new cluster; required when existing."""
    kubernetes_version: str = "1.35"
    """Kubernetes minor version. Defaults to 1.35 (in EKS standard support until 2027-03-27; 1.34's
    ended 2026-12-02, after which a cluster bills the extended-support rate, six times the standard)."""
    endpoint_public_access_cidrs: list[str] = Field(default_factory=list)
    """CIDRs allowed to reach the public API endpoint. Empty (the default): private endpoint only."""
    allow_public_endpoint_from_anywhere: Bool = False
    """Explicit opt-in needed for 0.0.0.0/0 in endpointPublicAccessCidrs. Defaults to false."""
    deploy_from_vpc: Bool = False
    """Acknowledges that ``pulumi up`` runs inside the cluster's VPC (VPN, bastion, CodeBuild in the
    VPC), so a private-only endpoint is reachable. A new cluster needs this or
    endpointPublicAccessCidrs. Defaults to false."""
    admin_role_arns: list[str] = Field(default_factory=list)
    """IAM roles given cluster-admin access entries."""
    log_types: list[Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]] = Field(
        default_factory=lambda: ["api", "audit", "authenticator"]
    )
    """Control-plane log types. Defaults to api, audit, authenticator."""
    system_nodes: SystemNodeSettings = Field(default_factory=SystemNodeSettings)
    """The on-demand node group of the operators, device plugins and the watchdog (a new cluster only)."""
    vpc_cni_version: str = "v1.20.4-eksbuild.1"
    """VPC CNI add-on version; efa-only interfaces need >= 1.18.5."""

    @field_validator("kubernetes_version")
    @classmethod
    def _k8s_version(cls, value: str) -> str:
        if not re.fullmatch(r"1\.(2[89]|3[0-9])", value):
            raise PydanticCustomError("version", "a Kubernetes minor version from 1.28 to 1.39, such as 1.35 (quoted in YAML: '1.30' is not 1.3)")
        return value

    @field_validator("endpoint_public_access_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr)
            except ValueError:
                raise PydanticCustomError("cidr", "{text}", {"text": f"{cidr!r} is not a CIDR block such as 203.0.113.0/24"}) from None
        return value

    @field_validator("admin_role_arns")
    @classmethod
    def _admin_roles(cls, value: list[str]) -> list[str]:
        for arn in value:
            if not re.fullmatch(r"arn:aws(-cn|-us-gov)?:iam::\d{12}:role/[\w+=,.@/-]+", arn):
                raise PydanticCustomError(
                    "arn", "{text}", {"text": f"{arn!r} is not an IAM role ARN such as arn:aws:iam::123456789012:role/Admin"}
                )
        return value

    @field_validator("vpc_cni_version")
    @classmethod
    def _cni(cls, value: str) -> str:
        match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+", value)
        if not match:
            raise PydanticCustomError("cni", "an EKS add-on version such as v1.20.4-eksbuild.1")
        if tuple(map(int, match.groups())) < (1, 18, 5):
            raise PydanticCustomError("cni", "efa-only interfaces need VPC CNI v1.18.5 or newer")
        return value

    @model_validator(mode="after")
    def _rules(self) -> "ClusterSettings":
        if "0.0.0.0/0" in self.endpoint_public_access_cidrs and not self.allow_public_endpoint_from_anywhere:
            raise _rule(
                "endpointPublicAccessCidrs",
                self.endpoint_public_access_cidrs,
                "0.0.0.0/0 opens the API endpoint to the internet; set allowPublicEndpointFromAnywhere: true to mean it",
            )
        if self.existing and not self.name:
            raise _rule("name", self.name, "an existing cluster must be named")
        if self.name is not None:
            problem = cluster_name_problem(self.name, creates_node_group=not self.existing)
            if problem:
                raise _rule("name", self.name, problem)
        return self


# --- GPU nodes ----------------------------------------------------------------------------------


class InstanceOverrides(_Model):
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


class PlacementGroupSettings(_Model):
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


class CapacityBlockSettings(_Model):
    """When the Capacity Block runs (ISO-8601 with a UTC offset, e.g. 2027-01-11T11:30:00Z)."""

    start_time: Optional[datetime] = None
    """The block's start. When set, the node group is created at zero nodes and an Auto Scaling
    scheduled action brings it to nodeCount at this time (EKS guide "Create a managed node group
    with Capacity Blocks for ML"). Leave unset once the block is active. Defaults to None."""
    end_time: Optional[datetime] = None
    """The block's end (11:30 UTC). EKS itself scales the group to zero 40 minutes before it;
    used to check startTime. Defaults to None."""

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
                errors.append(_rule("endTime", self.api_time(end), "every Capacity Block ends at 11:30:00 UTC"))
        if start is not None and end is not None:
            if end <= start:
                errors.append(_rule("endTime", self.api_time(end), f"must be after startTime {self.api_time(start)}"))
            elif end - start > timedelta(days=CAPACITY_BLOCK_MAX_DAYS):
                errors.append(_rule("endTime", self.api_time(end), f"a Capacity Block lasts at most {CAPACITY_BLOCK_MAX_DAYS} days"))
        _raise_all(errors)
        return self


class GpuNodeSettings(_Model):
    """The EKS managed node group of EFA GPU nodes."""

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
    auto_repair: Bool = True
    """EKS node auto repair for the GPU node group (nodeRepairConfig) plus, on a new cluster, the
    eks-node-monitoring-agent add-on whose node conditions (AcceleratedHardwareReady: GPU XID
    errors, lost GPUs; NetworkingReady) it acts on: an unhealthy node is replaced. Defaults to true."""
    ami_type: Literal["AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA"] = "AL2023_x86_64_NVIDIA"
    """The EKS-optimized accelerated AMI: AL2023_x86_64_NVIDIA (the default) or
    BOTTLEROCKET_x86_64_NVIDIA (ships its own NVIDIA device plugin, so the chart is not installed)."""
    root_volume_gib: Int = Field(200, ge=100, le=16384)
    """Encrypted gp3 root volume. Defaults to 200 GiB."""
    local_nvme_raid0: Bool = False
    """Stripe the instance-store NVMe disks as RAID0 for kubelet and containerd (AL2023 only)."""
    hugepages_gib: Int = Field(5, ge=0, le=64)
    """2 MiB hugepages per node for libfabric (EFA). Defaults to 5 GiB (awsome-distributed-training)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra node labels."""

    @field_validator("capacity_reservation_id")
    @classmethod
    def _reservation(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.fullmatch(r"cr-[0-9a-f]{8,17}", value):
            raise PydanticCustomError("id", "a capacity reservation id such as cr-0123456789abcdef0")
        return value

    def _label_rules(self) -> list[PydanticCustomError]:
        errors = []
        for key, value in self.labels.items():
            problem = label_problem(key, value)
            if problem:
                errors.append(_rule(f"labels[{key!r}]", value, problem))
        if self.labels:
            # The training pods select role: gpu-training and the EFA device plugin selects the EFA
            # label; a label of the same key with another value leaves them Pending.
            built_in = node_labels(self.model_copy(update={"labels": {}}), autoscaled=True)
            for key, value in self.labels.items():
                if key in built_in and value != built_in[key] and key != AUTOSCALER_GPU_LABEL:
                    errors.append(
                        _rule(
                            f"labels[{key!r}]",
                            value,
                            f"overrides the built-in node label {key}={built_in[key]} that "
                            + ("the EFA device plugin selects" if key == EFA_LABEL else "the training pods select")
                            + "; they would never schedule. Use another key",
                        )
                    )
        return errors

    @property
    def instance(self) -> catalog.InstanceType:
        overrides = self.instance_overrides.given() if self.instance_overrides else None
        return catalog.lookup(self.instance_type, overrides)

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
        errors: list[PydanticCustomError] = []
        try:
            instance = self.instance
        except catalog.UnknownInstanceType as err:
            raise _rule("instanceType", self.instance_type, str(err).split("; ", 1)[1]) from None
        except TypeError:
            raise _rule(
                "instanceOverrides",
                self.instance_overrides.given() if self.instance_overrides else None,
                f"{self.instance_type!r} is not in the catalog, so every figure is needed: "
                + ", ".join(to_camel(f) for f in InstanceOverrides.model_fields),
            ) from None
        if self.efa and not instance.efa_capable:
            efa_types = sorted(name for name, row in catalog.CATALOG.items() if row.efa_capable)
            errors.append(_rule("efa", True, f"{self.instance_type} has no EFA; set efa: false or use one of {', '.join(efa_types)}"))
        if self.capacity_type == "CAPACITY_BLOCK" and self.instance_type not in catalog.CAPACITY_BLOCK_TYPES:
            errors.append(
                _rule(
                    "capacityType",
                    "CAPACITY_BLOCK",
                    f"EC2 sells no Capacity Blocks of {self.instance_type}; they exist for "
                    + ", ".join(sorted(catalog.CAPACITY_BLOCK_TYPES)),
                )
            )
        if self.capacity_type == "CAPACITY_BLOCK" and not self.capacity_reservation_id:
            errors.append(_rule("capacityReservationId", None, "capacityType CAPACITY_BLOCK needs the Capacity Block's reservation id"))
        if self.capacity_block is not None and self.capacity_type != "CAPACITY_BLOCK":
            errors.append(_rule("capacityBlock", self.capacity_block.model_dump(by_alias=True, mode="json", exclude_none=True), "only with capacityType CAPACITY_BLOCK"))
        if self.capacity_type == "CAPACITY_BLOCK" and self.max_size > CAPACITY_BLOCK_MAX_INSTANCES:
            errors.append(
                _rule(
                    "maxNodes" if self.max_nodes else "nodeCount",
                    self.max_size,
                    f"a Capacity Block holds at most {CAPACITY_BLOCK_MAX_INSTANCES} instances (and the launch template targets one block)",
                )
            )
        if self.capacity_type == "SPOT" and self.capacity_reservation_id:
            errors.append(_rule("capacityReservationId", self.capacity_reservation_id, "a reservation cannot back SPOT capacity; use ON_DEMAND or CAPACITY_BLOCK"))
        if self.reserved_capacity and self.placement_group.strategy in ("create", "existing"):
            errors.append(
                _rule(
                    "placementGroup.strategy",
                    self.placement_group.strategy,
                    "a capacity reservation already fixes placement; forcing a placement group fails with "
                    "InsufficientInstanceCapacity (use auto or none)",
                )
            )
        if self.placement_group.strategy == "existing" and not self.placement_group.name:
            errors.append(_rule("placementGroup.name", None, "strategy existing needs the placement group's name"))
        if self.placement_group.strategy != "existing" and self.placement_group.name:
            errors.append(_rule("placementGroup.name", self.placement_group.name, "a name is only used with strategy existing"))
        if self.max_nodes is not None and self.max_nodes < self.node_count:
            errors.append(_rule("maxNodes", self.max_nodes, f"must be at least nodeCount ({self.node_count})"))
        if self.local_nvme_raid0 and self.ami_type != "AL2023_x86_64_NVIDIA":
            errors.append(_rule("localNvmeRaid0", True, "the NVMe RAID0 is set up by nodeadm, on AL2023 AMIs only"))
        errors.extend(self._label_rules())
        _raise_all(errors)
        return self


# --- operators ----------------------------------------------------------------------------------


class KubeRaySettings(_Model):
    enabled: Bool = False
    """Install the KubeRay operator. Defaults to false."""
    version: ChartVersion = "1.7.0"
    """kuberay-operator chart version. Defaults to 1.7.0 (the CRDs this project validates against)."""
    namespace: str = "ray-system"
    """Namespace of the KubeRay operator release. Defaults to ray-system."""

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_1035.match(value) or len(value) > 63:
            raise PydanticCustomError("dns", "a Kubernetes namespace: lowercase letters, digits and '-', at most 63")
        return value


class DevicePluginSettings(_Model):
    nvidia_version: ChartVersion = "0.18.0"
    """nvidia-device-plugin chart version (not installed on Bottlerocket, which ships its own).
    Defaults to 0.18.0 (0.18.1 was released but not published to the chart repository,
    NVIDIA/k8s-device-plugin #1588)."""
    efa_version: Annotated[str, _chart_version("v")] = "v0.5.20"
    """aws-efa-k8s-device-plugin chart version; this chart's versions carry a leading v.
    Defaults to v0.5.20 (plugin image v0.5.13)."""


class AutoscalerSettings(_Model):
    enabled: Bool = False
    """Install the Cluster Autoscaler so GPU nodes exist only while a job needs them."""
    version: ChartVersion = "9.53.0"
    """cluster-autoscaler chart version. Defaults to 9.53.0 (app 1.34.2)."""
    image_tag: str = "v1.35.1"
    """Cluster Autoscaler image tag; its minor must equal the cluster's Kubernetes minor
    (the autoscaler embeds that release's scheduler). Defaults to v1.35.1, for the default
    cluster.kubernetesVersion (the chart's own default image is v1.34.2)."""
    scale_down_unneeded_minutes: Int = Field(10, ge=1, le=1440)
    """How long a node must be unneeded before it is removed. Defaults to 10."""
    expander: Literal["least-waste", "random", "most-pods", "priority"] = "least-waste"
    """Which node group to grow when several fit. Defaults to least-waste. (The price expander
    is not implemented by the autoscaler's AWS provider.)"""

    @field_validator("image_tag")
    @classmethod
    def _image_tag(cls, value: str) -> str:
        if not re.fullmatch(r"v1\.\d+\.\d+", value):
            raise PydanticCustomError("tag", "a Cluster Autoscaler release tag such as v1.34.2")
        return value

    @property
    def kubernetes_minor(self) -> str:
        """The Kubernetes minor the image is built for (v1.34.2 -> 1.34)."""
        return ".".join(self.image_tag.lstrip("v").split(".")[:2])


# --- workload -----------------------------------------------------------------------------------

Dialect = Literal["verl-ppo", "rlinf-embodied", "rlinf-reasoning"]
RolloutBackend = Literal["hf", "vllm", "sglang"]

class RolloutSettings(_Model):
    backend: RolloutBackend = "hf"
    """hf (HuggingFace, the default and the one VLA models support), vllm or sglang."""
    tensor_parallel_size: Int = Field(1, ge=1)
    """Tensor parallel size of the rollout engine; must divide the GPUs per node. Defaults to 1."""
    gpu_memory_utilization: Float = Field(0.5, gt=0, le=1)
    """vllm and sglang: the fraction of GPU memory the rollout engine may take. Defaults to 0.5."""
    max_num_batched_tokens: Int = Field(8192, ge=1)
    """vllm: the most tokens in one batch (max_num_batched_tokens). Defaults to 8192."""
    enforce_eager: Bool = True
    """vllm and sglang: run without CUDA graphs (less memory, slower). Defaults to true."""


class TrainerSettings(_Model):
    dialect: Dialect = "verl-ppo"
    """verl-ppo (the seed's main_ppo.py layout, SimpleVLA-RL), rlinf-embodied or rlinf-reasoning (RLinf v0.3)."""
    config_name: Optional[str] = None
    """Hydra config name. Defaults per dialect: ppo_trainer, maniskill_ppo_openvlaoft, qwen2.5-1.5b-grpo-fsdp."""
    workdir: AbsolutePath = "/workspace"
    """The trainer's checkout inside the image; first on PYTHONPATH."""
    model_path: Optional[str] = None
    """Model (SFT checkpoint) path inside the pod, for a model baked into the image. Mutually
    exclusive with workload.model.source (which stages the model and derives this path)."""
    experiment_name: str = "rlinf"
    """The trainer's experiment name (run directory and logger name). Defaults to rlinf."""
    overrides: list[str] = Field(default_factory=list)
    """Extra Hydra overrides, appended after the generated ones."""
    batch: dict[str, Int] = Field(default_factory=dict)
    """Batch and environment sizes (trainer keys to integers) checked against world-size rules."""

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: list[str]) -> list[str]:
        for item in value:
            if "=" not in item.lstrip("~") and not item.startswith("~"):
                raise PydanticCustomError("override", "{text}", {"text": f"{item!r} is not a Hydra override key=value (or ~key)"})
        return value


class RayJobSettings(_Model):
    """KubeRay RayJob options (launcher kuberay)."""

    cluster: Literal["selector", "embedded"] = "embedded"
    """selector: submit to the long-lived RayCluster rlinf-cluster (the seed's form); embedded (the
    default): the RayJob carries its own cluster and shuts it down when it ends, releasing the GPUs."""
    ttl_seconds_after_finished: Int = Field(600, ge=0)
    """Embedded cluster: seconds after the job ends before KubeRay deletes its RayCluster
    (shutdownAfterJobFinishes), which keeps the cluster's logs reachable meanwhile. Defaults to 600."""
    active_deadline_seconds: Optional[Int] = Field(None, ge=1)
    """Fail the RayJob once it has run this long (the RayJob's activeDeadlineSeconds). Defaults to None: no limit."""
    pre_running_deadline_seconds: Optional[Int] = Field(3600, ge=1)
    """Fail the RayJob (and, embedded, delete its cluster, releasing the GPUs) when it is not
    Running this long after it starts: nodes that never come, a failing preflight init container
    retried in CrashLoopBackOff, an image that cannot be pulled. Defaults to one hour (scale-up from
    zero plus a tens-of-GB image pull); null disables it. Needs KubeRay 1.6.0 or newer."""
    backoff_limit: Int = Field(0, ge=0)
    """Retries of a failed RayJob (embedded cluster). Prefer workload.restart.maxRestarts, which sets it. Defaults to 0."""
    submission_mode: Literal["K8sJobMode", "HTTPMode", "SidecarMode"] = "K8sJobMode"
    """How KubeRay submits the job: K8sJobMode (the default: a submitter pod runs ``ray job submit``),
    HTTPMode (the operator calls the dashboard) or SidecarMode (a container in the head pod)."""
    submitter_image: Optional[str] = None
    """K8sJobMode: the image of the submitter pod, which only runs ``ray job submit`` from the
    system nodes. Defaults to ``rayproject/ray:<rayVersion>`` (KubeRay's own default is the
    training image, tens of GB pulled onto a system node)."""



# Where a model may come from (workload.model.source). Hugging Face repo ids: "Org/Name", letters,
# digits, "-", "_", "." (huggingface_hub validate_repo_id: no "--" or "..", at most 96 characters).
_HF_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_HF_SOURCE = re.compile(rf"hf://(?P<repo>{_HF_PART}/{_HF_PART})(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9._/-]*))?")
# S3 general purpose bucket names (S3 user guide, "Bucket naming rules"): 3-63 characters of
# lowercase letters, digits, "." and "-", starting and ending with a letter or digit.
_S3_SOURCE = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<prefix>.*))?")
MODEL_SOURCE_FORMS = "hf://Org/Name, hf://Org/Name@revision (a branch, tag or commit) or s3://bucket/prefix"


@dataclass(frozen=True)
class ModelSource:
    """A parsed ``workload.model.source``: a Hugging Face repository (``repo``, ``revision``) or
    an S3 prefix (``bucket``, ``prefix``)."""

    uri: str
    kind: Literal["hf", "s3"]
    repo: str = ""
    revision: Optional[str] = None
    bucket: str = ""
    prefix: str = ""

    @property
    def relative_dir(self) -> str:
        """Where below the models folder it is staged: one folder per source, so a changed source
        is never mistaken for an already staged one."""
        if self.kind == "hf":
            pinned = f"@{self.revision.replace('/', '_')}" if self.revision else ""
            return f"hf/{self.repo}{pinned}"
        return f"s3/{self.bucket}/{self.prefix}" if self.prefix else f"s3/{self.bucket}"


def parse_model_source(uri: str) -> ModelSource:
    """``hf://Org/Name[@revision]`` or ``s3://bucket/prefix``; ValueError says what is wrong."""
    hf = _HF_SOURCE.fullmatch(uri)
    if hf:
        repo = hf.group("repo")
        if "--" in repo or ".." in repo or len(repo.split("/")[1]) > 96:
            raise ValueError(f"{repo!r} is not a Hugging Face repo id (no '--' or '..', names of at most 96 characters)")
        revision = hf.group("revision")
        if revision is not None and (".." in revision or revision.endswith("/")):
            raise ValueError(f"{revision!r} is not a branch, tag or commit")
        return ModelSource(uri, "hf", repo=repo, revision=revision)
    s3 = _S3_SOURCE.fullmatch(uri)
    if s3:
        bucket, prefix = s3.group("bucket"), (s3.group("prefix") or "").strip("/")
        if ".." in bucket or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket):
            raise ValueError(f"{bucket!r} is not an S3 bucket name")
        parts = prefix.split("/") if prefix else []
        if any(part in ("", ".", "..") for part in parts) or not all(re.fullmatch(r"[\w!.*'()+=@,-]+", p) for p in parts):
            raise ValueError(f"{prefix!r} is not a plain S3 prefix (folders of letters, digits and -_.!*'()+=@, separated by single '/')")
        return ModelSource(uri, "s3", bucket=bucket, prefix=prefix)
    hint = ""
    match = re.fullmatch(r"https://huggingface\.co/([^/]+/[^/?#]+)/?", uri)
    if match:
        hint = f" (did you mean hf://{match.group(1)}?)"
    elif re.fullmatch(_HF_PART + "/" + _HF_PART, uri):
        hint = f" (did you mean hf://{uri}?)"
    elif uri.startswith("s3://"):
        hint = " (an S3 bucket name is 3 to 63 lowercase letters, digits, '.' and '-')"
    elif uri.startswith("/"):
        hint = " (a path inside the image is workload.trainer.modelPath)"
    raise ValueError(f"not a model source{hint}")


class ModelSettings(_Model):
    """Where the trainer's model comes from, staged into the pods before the trainer starts."""

    source: Optional[str] = None
    """hf://Org/Name[@revision] (Hugging Face, with the hfToken secret for gated or private
    repos) or s3://bucket/prefix (read with the training role). Staged once by an init container
    into <sharedFilesystem.mountPath>/models/... (shared by every pod and every run), else into a
    node-local emptyDir; the trainer's model path is derived from it. Defaults to None: the
    trainer config's own path, or workload.trainer.modelPath for a model baked into the image."""
    size_gib: Int = Field(64, ge=1, le=4096)
    """Without the shared filesystem: the size limit of the node-local emptyDir the model is staged
    into (on the root volume, or on the NVMe RAID0 with gpuNodes.localNvmeRaid0). Defaults to 64 GiB
    (a 7B model in bf16 is about 15 GiB)."""

    @field_validator("source")
    @classmethod
    def _source(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            try:
                parse_model_source(value)
            except ValueError as err:
                raise PydanticCustomError("model", "{text}; valid forms: {forms}", {"text": str(err), "forms": MODEL_SOURCE_FORMS}) from None
        return value

    @property
    def parsed(self) -> Optional[ModelSource]:
        return parse_model_source(self.source) if self.source else None


class ManualJobSettings(_Model):
    """Deadlines of the manual launcher's Indexed Job (the RayJob's are in workload.rayjob)."""

    active_deadline_seconds: Optional[Int] = Field(None, ge=1)
    """Fail the Job, stopping every pod, once it has run this long (the Job's activeDeadlineSeconds).
    Defaults to None: no limit."""
    pre_running_deadline_seconds: Optional[Int] = Field(3600, ge=60)
    """Fail the Job when its pods are not all Running this long after it starts: nodes that never
    come, an image that cannot be pulled, a pod that cannot be scheduled, a staging or preflight
    init container that does not finish. Kubernetes Jobs have no such deadline, so a watchdog Job on
    the system nodes enforces it. Defaults to one hour, like rayjob.preRunningDeadlineSeconds;
    null disables it (and the watchdog)."""
    watchdog_image: Optional[str] = None
    """The watchdog's image: bash and kubectl. Defaults to registry.k8s.io/kubectl at the cluster's
    Kubernetes minor (that image carries bash since Kubernetes 1.28, kubernetes/kubernetes#119592)."""

    @field_validator("watchdog_image")
    @classmethod
    def _watchdog_image(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not _IMAGE.fullmatch(value):
            raise PydanticCustomError("image", "a container image reference such as registry.k8s.io/kubectl:v1.34.0")
        return value

    @model_validator(mode="after")
    def _deadlines(self) -> "ManualJobSettings":
        ads, pre = self.active_deadline_seconds, self.pre_running_deadline_seconds
        if ads is not None and pre is not None and pre >= ads:
            raise _rule("preRunningDeadlineSeconds", pre, f"must be shorter than activeDeadlineSeconds ({ads}), which would end the Job first")
        return self


class RestartSettings(_Model):
    """Automatic gang restart of a failed run (both launchers)."""

    max_restarts: Int = Field(0, ge=0, le=100)
    """Restart the whole gang (every pod recreated, resuming from the newest complete checkpoint)
    up to this many times after a failure: a pod, a node, NCCL. 0 (the default): a failed run stays
    failed. Manual launcher: the run becomes a JobSet (the JobSet controller is installed); kuberay:
    the RayJob's backoffLimit. A trainer that fails again from the same checkpoint is not retried;
    node faults do not count (manual launcher only)."""
    backoff_seconds: Int = Field(60, ge=0, le=3600)
    """Manual launcher: restart attempt N waits N x this long before it starts (JobSet restarts at
    once: its failurePolicy has no backoff). Defaults to 60 s."""
    jobset_version: ChartVersion = "0.11.1"
    """Manual launcher with restarts: the JobSet chart version (oci://registry.k8s.io/jobset/charts/jobset).
    0.10.1 or newer: the failure rules match Job failure messages (onJobFailureMessagePatterns, new
    in 0.10.0, whose chart's CRD lacked it until 0.10.1: the API server would prune the patterns, and
    a repeated failure would then match the node-fault rule and restart for ever)."""
    jobset_namespace: str = "jobset-system"
    """Namespace of the JobSet controller release. Defaults to jobset-system."""

    @field_validator("jobset_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_1035.match(value) or len(value) > 63:
            raise PydanticCustomError("dns", "a Kubernetes namespace: lowercase letters, digits and '-', at most 63")
        return value

    @field_validator("jobset_version")
    @classmethod
    def _jobset_version(cls, value: str) -> str:
        parts = tuple(int(p) for p in re.findall(r"\d+", value)[:3])
        # jobset CHANGELOG-0.10: v0.10.1 "Generate JobSet CRD for Helm chart for 0.10" (#1048)
        if parts < (0, 10, 1):
            raise PydanticCustomError(
                "jobset",
                "JobSet chart 0.10.1 or newer (onJobFailureMessagePatterns, which tells a node fault from a trainer bug;"
                " the 0.10.0 chart's CRD drops it)",
            )
        return value


class WorkloadSettings(_Model):
    enabled: Bool = True
    """Create the training workload. Defaults to true."""
    namespace: str = "rlinf"
    """Namespace of the training pods, their service account and secrets. Defaults to rlinf."""
    launcher: Literal["manual", "kuberay"] = "manual"
    """manual (the seed's default): a headless Service and an Indexed Job; kuberay: RayCluster + RayJob."""
    image: str = Field(min_length=1)
    """The training image (RLinf or SimpleVLA-RL, with libfabric and aws-ofi-nccl)."""
    ray_version: str = "2.49.2"
    """The Ray version inside the image (KubeRay's rayVersion)."""
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    """What the trainer runs: dialect, Hydra config, model path, overrides and batch sizes."""
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    """The rollout engine and its settings."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables of every Ray pod."""
    mlflow_tracking_uri: Optional[str] = None
    """Set as MLFLOW_TRACKING_URI in every Ray pod. Defaults to None: not set."""
    shm_fraction: Float = Field(0.4, gt=0, lt=1)
    """Share of the pod's memory backing /dev/shm (Ray's object store). Defaults to 0.4."""
    join_timeout_seconds: Int = Field(1200, ge=60)
    """How long pod 0 waits for every node to join Ray before failing. Defaults to 20 minutes."""
    termination_grace_period_seconds: Int = Field(900, ge=30)
    """Time to flush a checkpoint on eviction. Defaults to 15 minutes."""
    progress_timeout_seconds: Optional[Int] = Field(1800, ge=60)
    """Stop the trainer (the pod then fails with exit status 91, releasing its GPUs) when it has
    printed nothing and written no new global_step_N checkpoint directory for this long: a hang.
    Longer than the slowest step plus a checkpoint save, or that step is taken for a hang.
    Defaults to 30 minutes; null disables the watchdog."""
    nccl_heartbeat_timeout_seconds: Int = Field(600, ge=60)
    """TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: torch's monitoring thread aborts a process whose NCCL
    watchdog thread is stuck (in a CUDA or NCCL call that hangs) this long. Defaults to 10 minutes."""
    rayjob: RayJobSettings = Field(default_factory=RayJobSettings)
    """KubeRay RayJob options (launcher kuberay)."""
    manual: ManualJobSettings = Field(default_factory=ManualJobSettings)
    """Deadlines of the manual launcher's Job."""
    restart: RestartSettings = Field(default_factory=RestartSettings)
    """Automatic gang restart of a failed run."""
    model: ModelSettings = Field(default_factory=ModelSettings)
    """Where the model comes from and how it is staged."""
    checkpoint_sync_image: str = "public.ecr.aws/aws-cli/aws-cli:2.32.9"
    """Without the shared filesystem: the image (with the AWS CLI) that restores the run directory
    from s3://<bucket>/<stack>/ at start and syncs it back. Defaults to aws-cli 2.32.9."""
    checkpoint_sync_interval_seconds: Int = Field(300, ge=30)
    """Without the shared filesystem: seconds between uploads of the run directory to S3 (plus one
    final upload when the trainer ends or the pod is stopped). Defaults to 5 minutes."""

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        # Quotes or blanks come from shell quoting slips (--set 'workload.image=""'); the kubelet
        # would only fail at pull time (InvalidImageName), after the GPU nodes are paid for.
        if not _IMAGE.fullmatch(value):
            raise PydanticCustomError(
                "image", "a container image reference such as 123456789012.dkr.ecr.us-east-1.amazonaws.com/rlinf:v0.3"
            )
        return value

    @field_validator("ray_version")
    @classmethod
    def _ray_version(cls, value: str) -> str:
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", value)
        if not match:
            raise PydanticCustomError("ray", "a Ray release such as 2.49.2")
        version = tuple(map(int, match.groups()))
        if _BAD_RAY[0] <= version <= _BAD_RAY[1]:
            raise PydanticCustomError("ray", "Ray 2.11.0 to 2.37.0 are not supported by KubeRay 1.7; use 2.38.0 or newer")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_1035.match(value) or len(value) > 63:
            raise PydanticCustomError("dns", "a DNS-1035 label: lowercase letters, digits and '-', at most 63")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        # The API server rejects the pod otherwise (apimachinery IsEnvVarName), after the nodes are up.
        bad = [name for name in value if not re.fullmatch(r"[-._a-zA-Z][-._a-zA-Z0-9]*", name)]
        if bad:
            raise PydanticCustomError(
                "env", "{text}", {"text": f"{', '.join(map(repr, bad))}: environment variable names are letters, digits, '_', '-' or '.', not starting with a digit"}
            )
        return value

    @model_validator(mode="after")
    def _model_source(self) -> "WorkloadSettings":
        if self.model.source and self.trainer.model_path:
            raise _rule(
                "model.source",
                self.model.source,
                f"the model path is derived from it, so trainer.modelPath ({self.trainer.model_path!r}) must not be given too: "
                "keep model.source to stage the model, or trainer.modelPath for a model already inside the image",
            )
        return self

    @model_validator(mode="after")
    def _restarts(self) -> "WorkloadSettings":
        restarts, rayjob = self.restart.max_restarts, self.rayjob
        if self.launcher != "kuberay" or not restarts:
            return self
        if rayjob.cluster == "selector":
            raise _rule(
                "restart.maxRestarts", restarts,
                "KubeRay retries only a RayJob with its own cluster: set rayjob.cluster: embedded, or maxRestarts: 0",
            )
        if rayjob.backoff_limit not in (0, restarts):
            raise _rule(
                "rayjob.backoffLimit", rayjob.backoff_limit,
                f"is the RayJob's retry count, which restart.maxRestarts ({restarts}) already sets: drop rayjob.backoffLimit",
            )
        return self

    @property
    def rayjob_backoff_limit(self) -> int:
        """The RayJob's backoffLimit: restart.maxRestarts, else the older rayjob.backoffLimit."""
        return self.restart.max_restarts or self.rayjob.backoff_limit

    @property
    def uses_jobset(self) -> bool:
        """The manual launcher renders a JobSet (and needs its controller) when it restarts."""
        return self.enabled and self.launcher == "manual" and self.restart.max_restarts > 0


# --- storage ------------------------------------------------------------------------------------


class SharedFilesystemSettings(_Model):
    enabled: Optional[Bool] = None
    """FSx for Lustre shared by all training pods. Defaults to on when nodeCount > 1 (multi-node FSDP
    writes a checkpoint shard per rank under the log path)."""
    storage_capacity_gib: Int = Field(1200, ge=1200)
    """Defaults to 1200 GiB (the smallest PERSISTENT_2 size)."""
    throughput_mbps_per_tib: Literal[125, 250, 500, 1000] = 250
    """FSx for Lustre PERSISTENT_2 throughput per TiB of storage, MB/s (125, 250, 500 or 1000). Defaults to 250."""
    mount_path: AbsolutePath = "/fsx"
    """Where pods mount it; checkpoints, logs and models live below. Defaults to /fsx."""

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, value: int) -> int:
        if value % 2400 and value != 1200:
            raise PydanticCustomError("fsx", "1200 GiB or a multiple of 2400 GiB (FSx for Lustre PERSISTENT_2)")
        return value


class StorageSettings(_Model):
    bucket_name: Optional[str] = None
    """Checkpoint bucket name. Defaults to a generated unique name."""
    shared_filesystem: SharedFilesystemSettings = Field(default_factory=SharedFilesystemSettings)
    """FSx for Lustre shared by every training pod (checkpoints, logs, models)."""

    @field_validator("bucket_name")
    @classmethod
    def _bucket(cls, value: Optional[str]) -> Optional[str]:
        problem = bucket_problem(value) if value is not None else None
        if problem:
            raise PydanticCustomError("bucket", "{text}", {"text": problem})
        return value


class PreflightSettings(_Model):
    enabled: Bool = False
    """Check GPUs, EFA devices and all-reduce bandwidth on every node before training starts."""
    image: str = "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.42.0-ofiv1.16.0-ncclv2.27.5-1-testsv2.16.4"
    """An nccl-tests image with libfabric, aws-ofi-nccl and Open MPI (awsome-distributed-training's
    build, pinned: its tag names CUDA, EFA installer, aws-ofi-nccl, NCCL and nccl-tests versions)."""
    min_bus_bandwidth_fraction: Float = Field(0.5, gt=0, le=1)
    """Fail unless all_reduce_perf bus bandwidth reaches this fraction of the network line rate."""


# --- the whole stack ----------------------------------------------------------------------------


class StackSettings(_Model):
    """Everything a stack configures."""

    region: str = "us-east-1"
    """The AWS region; read from ``aws:region``, outside the project namespace. Defaults to us-east-1."""
    availability_zone: Optional[str] = None
    """The one AZ of the GPU nodes (and of the shared filesystem). Defaults to <region>a."""
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    """The VPC: a new one or an existing one."""
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    """The EKS cluster: a new one or an existing one."""
    gpu_nodes: GpuNodeSettings = Field(default_factory=GpuNodeSettings)
    """The EFA GPU node group."""
    device_plugins: DevicePluginSettings = Field(default_factory=DevicePluginSettings)
    """Chart versions of the NVIDIA and EFA device plugins."""
    kuberay: KubeRaySettings = Field(default_factory=KubeRaySettings)
    """The KubeRay operator (optional)."""
    autoscaler: AutoscalerSettings = Field(default_factory=AutoscalerSettings)
    """The Cluster Autoscaler (optional)."""
    workload: WorkloadSettings
    """The RLinf training workload. Required: at least its image."""
    storage: StorageSettings = Field(default_factory=StorageSettings)
    """The checkpoint bucket and the shared filesystem."""
    preflight: PreflightSettings = Field(default_factory=PreflightSettings)
    """The GPU, EFA and all-reduce check before training (optional)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Extra AWS tags on every resource (besides project and stack)."""

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if value in aws_names.REGIONS:
            return value
        if value[:-1] in aws_names.REGIONS:
            raise PydanticCustomError("region", "{text}", {"text": f"an Availability Zone, not a region: use {value[:-1]}"})
        raise PydanticCustomError(
            "region", "{text}", {"text": f"not an AWS region{_close(value, aws_names.REGIONS)}, such as us-east-1 (botocore {aws_names.BOTOCORE_VERSION}'s list)"}
        )

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        problems = [f"{key!r}: {problem}" for key, item in value.items() if (problem := tag_problem(key, item))]
        if len(value) > MAX_USER_TAGS:
            problems.append(f"{len(value)} tags: at most {MAX_USER_TAGS} (AWS allows 50 per resource; the stack adds up to 5)")
        if problems:
            raise PydanticCustomError("tags", "{text}", {"text": "; ".join(problems)})
        return value

    @property
    def gpu_az(self) -> str:
        return self.availability_zone or f"{self.region}a"

    @property
    def shared_filesystem(self) -> bool:
        enabled = self.storage.shared_filesystem.enabled
        return self.gpu_nodes.node_count > 1 if enabled is None else enabled

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> "StackSettings":
        _raise_all(rules.stack_rules(self, info.context or {}))
        return self


def validate(data: Mapping[str, Any], stack: Optional[str] = None, extra_rules: tuple[StackRule, ...] = ()) -> StackSettings:
    """Validate a plain mapping (camelCase keys) into StackSettings, or raise ConfigError.

    ``stack`` (the Pulumi stack name) lets the names derived from it be checked too;
    ``extra_rules`` are the rules of the layers above (rlinf_eks.loading passes the trainers'),
    run among the workload rules so that every problem is reported in one ConfigError."""
    context = {_STACK: stack, _EXTRA_RULES: extra_rules}
    try:
        return StackSettings.model_validate(dict(data), context=context)
    except ValidationError as err:
        raise ConfigError(describe(err, data, StackSettings) + _rules_of_valid_sections(err, data, context)) from None


# Stands in for a workload section that failed, so the other sections' rules can still run.
_WORKLOAD_STAND_IN = {"image": "stand-in"}


def _rules_of_valid_sections(err: ValidationError, data: Mapping[str, Any], context: dict[str, Any]) -> list[str]:
    """The cross-section rules that only read sections which validated.

    Pydantic runs StackSettings' rules only once every field is valid, so a typo in one section
    would hide a rule broken between two others until the next run. Here the failed sections
    are left at their defaults and every rule that reads one of them is skipped.
    """
    failed = frozenset(str(item["loc"][0]) for item in err.errors() if item["loc"])
    if not failed:
        return []  # the rules themselves failed: already reported
    rest = {key: value for key, value in data.items() if key not in failed}
    if "workload" in failed:
        rest["workload"] = _WORKLOAD_STAND_IN
    try:
        StackSettings.model_validate(rest, context={**context, _FAILED_SECTIONS: failed})
    except ValidationError as again:
        return [line for line in describe(again, rest, StackSettings) if not line.startswith(tuple(failed))]
    return []
