"""One typed reader of resources in plan.json shape, shared by the policies (``policies.py``,
the CrossGuard pack) and the efficiency report (``offline/outputs/efficiency.py``).

A resource is a dict ``{"urn", "type", "name", "id"?, "parent"?, "inputs" (wire names),
"options", "propertyDependencies"? {input: [urn]}}``: what the offline plan writes, and what
:mod:`rlinf_eks.policies_crossguard` makes of a CrossGuard policy's arguments.

Views: :class:`LaunchTemplate`, :class:`NodeGroup` (every managed node-group type), and
:class:`PodTemplate` (every pod spec in a Kubernetes object, with its replica count) with its
scheduler requests (:func:`pod_requests`). Cross-resource references are followed by id or name
when known (offline plan, ``pulumi up``) and by property dependencies when unknown (a first
``pulumi preview``), see :func:`referenced`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from .scheduling import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE

# The plan's masks: a secret value (engine, stack config, diff) and a value not known until the
# resource is created (a preview's computed output; pulumi-policy's unknown sentinels).
SECRET = "[secret]"
UNKNOWN = "[unknown]"

# --- resource types -----------------------------------------------------------------------------
# Every type token the library reads in a plan (policies, efficiency report, diff, manifests) or
# mocks (offline/engine/fake_cloud.py), spelt once.

ROOT_STACK = "pulumi:pulumi:Stack"
PROVIDER_PREFIX = "pulumi:providers:"
"""The type of every provider instance starts so (``pulumi:providers:kubernetes``)."""
KUBERNETES_PREFIX = "kubernetes:"
"""pulumi-kubernetes' types: Kubernetes objects (``kubernetes:batch/v1:Job``) and Helm releases."""
HELM_PREFIX = "kubernetes:helm.sh/"
"""Helm releases: pulumi-kubernetes resources that are not objects of the cluster's API."""

# EKS
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
# pulumi-eks's ManagedNodeGroup takes the aws.eks.NodeGroup inputs under the same wire names
# (scalingConfig, subnetIds, launchTemplate, instanceTypes, capacityType, diskSize).
NODE_GROUP_TYPES = (NODE_GROUP, MANAGED_NODE_GROUP)
EKS_CLUSTER = "eks:index:Cluster"
"""pulumi-eks's Cluster (a component): its inputs are flat (``endpointPublicAccess``, ``vpcId``)."""
AWS_EKS_CLUSTER = "aws:eks/cluster:Cluster"
"""A plain aws.eks.Cluster: its network inputs sit under ``vpcConfig``."""
EKS_CLUSTERS = (EKS_CLUSTER, AWS_EKS_CLUSTER)

# EC2 and VPC
VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
INTERNET_GATEWAY = "aws:ec2/internetGateway:InternetGateway"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
EIP = "aws:ec2/eip:Eip"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
ROUTE = "aws:ec2/route:Route"
ROUTE_TABLE_ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SQS_QUEUE = "aws:sqs/queue:Queue"
EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"

# IAM and KMS
IAM_ROLE = "aws:iam/role:Role"
IAM_POLICY = "aws:iam/policy:Policy"
OIDC_PROVIDER = "aws:iam/openIdConnectProvider:OpenIdConnectProvider"
KMS_KEY = "aws:kms/key:Key"

# S3 (the V2 types: older pulumi-aws programs)
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_V2 = "aws:s3/bucketV2:BucketV2"
BUCKETS = (BUCKET, BUCKET_V2)
BUCKET_VERSIONING = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
BUCKET_ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
BUCKET_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"

# FSx for Lustre
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
DATA_REPOSITORY_ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"

# Kubernetes objects
JOB = "kubernetes:batch/v1:Job"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RAY_JOB = "kubernetes:ray.io/v1:RayJob"

# this library's components
CHECKPOINT_STORAGE = "rlinf-eks:index:CheckpointStorage"
TRAINING_IMAGE = "rlinf-eks:index:TrainingImage"

# the training image build (training_image.py)
ECR_REPOSITORY = "aws:ecr/repository:Repository"
CODEBUILD_PROJECT = "aws:codebuild/project:Project"

# the extended resources pods request, as the device plugins advertise them (scheduling.py)
GPU = GPU_RESOURCE
EFA = EFA_RESOURCE
HUGEPAGES_2MI = HUGEPAGES_2MI_RESOURCE
EFA_INTERFACE_TYPES = ("efa", "efa-only")

Resource = Mapping[str, Any]


# --- generic access -----------------------------------------------------------------------------


def inputs_of(resource: Optional[Resource]) -> Mapping[str, Any]:
    return (resource or {}).get("inputs") or {}


def get(data: Any, *path: Any, default: Any = None) -> Any:
    """``data[path[0]][path[1]]...`` through mappings and lists, ``default`` where a step is missing."""
    for part in path:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and -len(data) <= part < len(data):
            data = data[part]
        else:
            return default
    return data


def known(value: Any) -> bool:
    return value is not None and value != UNKNOWN


def truthy(value: Any) -> bool:
    """Booleans as the providers take them: launch template ``encrypted`` is the string "true"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def of_type(resources: Iterable[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r.get("type") in types]


def by_id(resources: Iterable[Resource], *types: str) -> dict[str, Resource]:
    return {r["id"]: r for r in resources if r.get("type") in types and r.get("id")}


def identities(resource: Resource) -> set[str]:
    """What other resources may use to refer to this one: its id, name-like inputs."""
    found = {resource.get("id"), get(resource, "inputs", "id"), get(resource, "inputs", "name"),
             get(resource, "inputs", "bucket"), get(resource, "inputs", "arn")}
    return {v for v in found if isinstance(v, str) and known(v)}


def referenced(
    resources: Sequence[Resource], holder: Resource, prop: str, values: Iterable[Any], *types: str
) -> tuple[list[Resource], bool]:
    """Resources of ``types`` that ``holder`` refers to through its input ``prop`` holding
    ``values``: by identity when known, else through the property's dependencies. Returns the
    resources and whether every reference could be resolved."""
    candidates = of_type(resources, *types)
    found: dict[str, Resource] = {}
    resolved = True
    for value in values:
        if known(value):
            match = [c for c in candidates if value in identities(c)]
            if not match:
                resolved = False
            found.update((c["urn"], c) for c in match)
        else:
            resolved = False
    if not resolved:
        urns = set((holder.get("propertyDependencies") or {}).get(prop, ()))
        deps = [c for c in candidates if c["urn"] in urns]
        found.update((c["urn"], c) for c in deps)
        resolved = bool(deps)
    return list(found.values()), resolved


# --- launch templates and node groups -----------------------------------------------------------


@dataclass(frozen=True)
class _PlannedResource:
    """A view of one plan resource: its name and its inputs by wire name."""

    resource: Resource

    @property
    def name(self) -> str:
        return str(self.resource.get("name", "?"))

    @property
    def inputs(self) -> Mapping[str, Any]:
        return inputs_of(self.resource)


@dataclass(frozen=True)
class LaunchTemplate(_PlannedResource):
    @property
    def instance_type(self) -> Optional[str]:
        return self.inputs.get("instanceType")

    @property
    def efa_interfaces(self) -> list[Mapping[str, Any]]:
        """The ``efa`` and ``efa-only`` interfaces it attaches to every node."""
        return [i for i in self.inputs.get("networkInterfaces") or [] if i.get("interfaceType") in EFA_INTERFACE_TYPES]

    @property
    def placement_group(self) -> Optional[str]:
        return get(self.inputs, "placement", "groupName")

    @property
    def capacity_reservation_id(self) -> Optional[str]:
        return get(self.inputs, "capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId")

    @property
    def volume_gib(self) -> float:
        """The EBS volumes it gives every node, in GiB."""
        mappings = self.inputs.get("blockDeviceMappings") or []
        return float(sum(int((m.get("ebs") or {}).get("volumeSize") or 0) for m in mappings))


@dataclass(frozen=True)
class NodeGroup(_PlannedResource):
    template: Optional[LaunchTemplate]
    """Its launch template when the plan holds it (None: none given, or not in these resources)."""

    @property
    def template_ref(self) -> list[Any]:
        """The launch template's id and name as the node group gives them (either may be unknown)."""
        spec = self.inputs.get("launchTemplate") or {}
        return [v for v in (spec.get("id"), spec.get("name")) if v is not None]

    @property
    def instance_type(self) -> Optional[str]:
        # instanceTypes wins: EKS refuses a node group naming an instance type in both places.
        types = self.inputs.get("instanceTypes") or []
        return types[0] if types else (self.template.instance_type if self.template else None)

    def _size(self, key: str) -> int:
        return int((self.inputs.get("scalingConfig") or {}).get(key, 0) or 0)

    @property
    def min_size(self) -> int:
        return self._size("minSize")

    @property
    def desired_size(self) -> int:
        return self._size("desiredSize")

    @property
    def max_size(self) -> int:
        return self._size("maxSize")

    @property
    def subnet_ids(self) -> list[Any]:
        subnets = self.inputs.get("subnetIds") or []
        return list(subnets) if isinstance(subnets, list) else [subnets]

    @property
    def capacity_type(self) -> str:
        # EKS API CreateNodegroup: capacityType defaults to ON_DEMAND.
        return self.inputs.get("capacityType") or "ON_DEMAND"

    @property
    def efa_interfaces(self) -> list[Mapping[str, Any]]:
        return self.template.efa_interfaces if self.template else []


def launch_template_of(resources: Sequence[Resource], node_group: Resource) -> Optional[LaunchTemplate]:
    refs = NodeGroup(node_group, None).template_ref
    found, _ = referenced(resources, node_group, "launchTemplate", refs, LAUNCH_TEMPLATE)
    return LaunchTemplate(found[0]) if found else None


def node_groups(resources: Sequence[Resource]) -> list[NodeGroup]:
    """Every managed node group (:data:`NODE_GROUP_TYPES`), each with its launch template."""
    return [NodeGroup(r, launch_template_of(resources, r)) for r in of_type(resources, *NODE_GROUP_TYPES)]


# --- Kubernetes objects and their pods ----------------------------------------------------------


def k8s_objects(resources: Iterable[Resource]) -> Iterator[tuple[Resource, Mapping[str, Any]]]:
    """(resource, manifest) of every Kubernetes object in the resources."""
    for resource in resources:
        if str(resource.get("type", "")).startswith(KUBERNETES_PREFIX) and isinstance(inputs_of(resource).get("kind"), str):
            yield resource, inputs_of(resource)


@dataclass(frozen=True)
class PodTemplate:
    kind: str
    """The kind of the object that holds it."""
    path: str
    """Where its pod spec sits in the object (``spec.template.spec``)."""
    role: str
    """``pod``, ``job``, ``replicas``, ``daemon``, ``head``, a Ray worker group's name, ``submitter``."""
    replicas: Optional[int]
    """How many such pods the object asks for; None for a DaemonSet (one per matching node)."""
    spec: Mapping[str, Any]

    def containers(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        for field in ("initContainers", "containers", "ephemeralContainers"):
            for container in self.spec.get(field) or []:
                yield f"{field}[name={container.get('name')}]", container


def _count(value: Any, default: int = 1) -> int:
    return int(value if value is not None else default)


def _ray_cluster(kind: str, spec: Mapping[str, Any], where: str) -> Iterator[PodTemplate]:
    head = get(spec, "headGroupSpec", "template")
    if isinstance(head, Mapping):
        yield PodTemplate(kind, f"{where}.headGroupSpec.template.spec", "head", 1, head.get("spec") or {})
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        template = get(group, "template")
        if isinstance(template, Mapping):
            # With autoscaling off KubeRay keeps `replicas`, bounded by min/maxReplicas.
            replicas = _count(group.get("replicas", group.get("minReplicas", 1)))
            yield PodTemplate(kind, f"{where}.workerGroupSpecs[{index}].template.spec", group.get("groupName", "worker"),
                              replicas, template.get("spec") or {})


def _job(kind: str, spec: Mapping[str, Any], where: str) -> PodTemplate:
    # Job API: parallelism defaults to 1; a Job that sets only completions runs that many, one at a time.
    count = _count(spec.get("parallelism", spec.get("completions", 1)))
    return PodTemplate(kind, f"{where}.template.spec", "job", count, get(spec, "template", "spec") or {})


def pod_templates(obj: Mapping[str, Any]) -> Iterator[PodTemplate]:
    """Every pod spec in a Kubernetes object: Pods, workload controllers, KubeRay's RayCluster,
    RayJob and RayService, and JobSet."""
    kind, spec = str(obj.get("kind")), obj.get("spec") or {}
    if kind == "Pod":
        yield PodTemplate(kind, "spec", "pod", 1, spec)
    elif kind in ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"):
        yield PodTemplate(kind, "spec.template.spec", "replicas", _count(spec.get("replicas")), get(spec, "template", "spec") or {})
    elif kind == "DaemonSet":
        yield PodTemplate(kind, "spec.template.spec", "daemon", None, get(spec, "template", "spec") or {})
    elif kind == "Job":
        yield _job(kind, spec, "spec")
    elif kind == "CronJob":
        yield _job(kind, get(spec, "jobTemplate", "spec") or {}, "spec.jobTemplate.spec")
    elif kind == "RayCluster":
        yield from _ray_cluster(kind, spec, "spec")
    elif kind == "RayJob":
        # A RayJob with clusterSelector (no rayClusterSpec) submits to an existing RayCluster.
        yield from _ray_cluster(kind, spec.get("rayClusterSpec") or {}, "spec.rayClusterSpec")
        if isinstance(spec.get("submitterPodTemplate"), Mapping):
            yield PodTemplate(kind, "spec.submitterPodTemplate.spec", "submitter", 1, get(spec, "submitterPodTemplate", "spec") or {})
    elif kind == "RayService":
        yield from _ray_cluster(kind, spec.get("rayClusterConfig") or {}, "spec.rayClusterConfig")
    elif kind == "JobSet":
        # JobSet API: each replicatedJob makes `replicas` Jobs (default 1) from its Job template
        for i, rjob in enumerate(spec.get("replicatedJobs") or []):
            job = _job(kind, get(rjob, "template", "spec") or {}, f"spec.replicatedJobs[{i}].template.spec")
            jobs = _count(rjob.get("replicas", 1))
            count = None if job.replicas is None or jobs is None else job.replicas * jobs
            yield PodTemplate(kind, job.path, str(rjob.get("name") or "job"), count, job.spec)


# --- requests -----------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
}  # fmt: skip
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)")


def exact_quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity (``"191450m"``, ``"5Gi"``, ``"2097152Ki"``, ``"1e3"``, ``"8"``,
    or a JSON number) as an exact Decimal in base units (cores, bytes, devices); ValueError
    otherwise. The one parser of quantities: :func:`quantity` is its float view."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if not isinstance(value, str):
        return Decimal(str(value))
    match = _QUANTITY.fullmatch(value.strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, exponent, suffix = match.groups()
    amount = Decimal(number)
    if exponent:
        return amount.scaleb(int(exponent[1:]))
    suffix = suffix or ""
    return amount * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def quantity(value: Any) -> float:
    """A Kubernetes resource quantity (``"190"``, ``"500m"``, ``"1900Gi"``, 8) as a plain number."""
    return float(exact_quantity(value))


def container_requests(container: Mapping[str, Any], *, skip_unknown: bool = False) -> dict[str, float]:
    """What one container requests. ``skip_unknown``: leave out values that are not quantities
    (unknown during a preview) instead of refusing them."""
    # A request left out defaults to the limit (Kubernetes API defaulting); extended resources
    # (GPU, EFA, hugepages) are often given as limits only, as KubeRay reads GPUs from limits.
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    found: dict[str, float] = {}
    for key, value in merged.items():
        try:
            found[key] = quantity(value)
        except ValueError:
            if not skip_unknown:
                raise
    return found


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, float]:
    """What the scheduler reserves for one pod: per resource, the larger of the sum over its
    containers and the largest init container (init containers run one at a time, before)."""
    total: dict[str, float] = {}
    for container in pod_spec.get("containers") or []:
        for key, value in container_requests(container).items():
            total[key] = total.get(key, 0.0) + value
    for container in pod_spec.get("initContainers") or []:
        for key, value in container_requests(container).items():
            total[key] = max(total.get(key, 0.0), value)
    return total
