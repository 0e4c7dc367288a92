"""Policies this field needs, as pure functions over resources in plan.json shape.

A resource is a dict ``{"urn", "type", "name", "id"?, "inputs" (wire names), "options"
{"protect", "retainOnDelete", ...}, "propertyDependencies"? {input: [urn]}}``: what the offline
plan writes, and what :mod:`rlinf_eks.policies_crossguard` makes of a CrossGuard policy's
arguments (read through :mod:`rlinf_eks.plan_reader`). Every policy takes the list of resources (and :class:`PolicyOptions`) and returns
:class:`Violation` s; the offline plan (``plan --strict``) and the CrossGuard pack in ``policy/``
(``pulumi preview --policy-pack policy``) run the very same functions.

Cross-resource references (a node group's launch template, a launch template's security groups,
a bucket's versioning) are followed by id or name when known (offline plan, ``pulumi up``) and by
property dependencies when unknown (a first ``pulumi preview``). A value that cannot be known yet
is never reported as a violation: the check runs again at update time.

Sources: field notes section 1 (EFA: one AZ, cluster placement group unless a reservation,
self-referencing security group on every interface), AWS EC2 docs (IMDSv2 ``httpTokens:
required``), KubeRay docs (head ports 8265 dashboard, 6379 GCS, 10001 client), EKS best practices
(private API endpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Optional, Sequence

from .plan_reader import (
    AWS_EKS_CLUSTER,
    BUCKET_ENCRYPTION,
    BUCKET_PUBLIC_ACCESS_BLOCK,
    BUCKET_VERSIONING,
    BUCKETS,
    CHECKPOINT_STORAGE,
    EGRESS_RULE,
    EKS_CLUSTERS,
    INGRESS_RULE,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    LaunchTemplate,
    NodeGroup,
    SECRET,
    SECURITY_GROUP,
    SECURITY_GROUP_RULE,
    SUBNET,
    UNKNOWN,
    Resource,
    container_requests,
    get as _get,
    identities as _identities,
    inputs_of as _inputs,
    k8s_objects,
    known as _known,
    node_groups,
    of_type as _of_type,
    pod_templates,
    referenced as _referenced,
    truthy as _truthy,
)
from .scheduling import GPU_RESOURCE, GPU_TAINT

if TYPE_CHECKING:
    from .config import StackSettings

# the reader's names the policies' callers and tests use, beside this module's own
__all__ = [
    "SECRET", "UNKNOWN", "NODE_GROUP", "LAUNCH_TEMPLATE", "SUBNET", "SECURITY_GROUP", "EKS_CLUSTERS", "pod_templates",
    "SECURITY_GROUP_RULE", "INGRESS_RULE", "EGRESS_RULE", "BUCKETS", "BUCKET_VERSIONING", "BUCKET_ENCRYPTION",
    "BUCKET_PUBLIC_ACCESS_BLOCK", "CHECKPOINT_STORAGE",
    "Violation", "PolicyOptions", "Policy", "POLICIES", "evaluate", "options_from_settings",
    "check_efa_node_groups", "check_efa_node_classes", "check_imdsv2", "check_ebs_encrypted", "check_s3_encrypted", "check_checkpoint_bucket",
    "check_ray_ports_not_exposed", "check_no_privileged_containers", "check_gpu_pods_tolerate_gpu_taint",
    "check_eks_endpoint_private",
]

RAY_PORTS = {8265: "Ray dashboard", 6379: "Ray GCS", 10001: "Ray client"}
RAY_PORT_NAMES = {"dashboard": 8265, "gcs": 6379, "gcs-server": 6379, "client": 10001}
EXPOSED_SERVICE_TYPES = ("LoadBalancer", "NodePort")
PUBLIC_ENDPOINT_OPT_IN_TAG = "rlinf-eks/public-endpoint-from-anywhere"
"""A cluster tag (value ``"true"``) that carries the allowPublicEndpointFromAnywhere opt-in into
the resource itself, so the CrossGuard pack sees it without the stack config."""


@dataclass(frozen=True)
class Violation:
    policy: str
    urn: str
    name: str
    message: str

    def __str__(self) -> str:
        return f"[{self.policy}] {self.name}: {self.message}"


@dataclass(frozen=True)
class PolicyOptions:
    """What the stack opted into; the offline plan fills it from the stack settings, the
    CrossGuard pack from its policy config."""

    allow_public_endpoint_from_anywhere: bool = False
    """cluster.allowPublicEndpointFromAnywhere. Defaults to false."""
    gpu_taint_key: str = GPU_TAINT.key
    """The key of the GPU nodes' taint that GPU pods must tolerate. Defaults to nvidia.com/gpu."""


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    scope: Literal["resource", "stack"]
    """resource: looks at one resource at a time (CrossGuard ResourceValidationPolicy); stack:
    follows references between resources (StackValidationPolicy)."""
    check: Callable[[Sequence[Resource], PolicyOptions], list[Violation]]


# --- helpers -----------------------------------------------------------------------------------


def _violation(policy: str, resource: Resource, message: str) -> Violation:
    return Violation(policy, resource.get("urn", ""), resource.get("name", ""), message)


# --- EFA node groups ---------------------------------------------------------------------------


def _is_all_traffic(protocol: Any) -> bool:
    return str(protocol) in ("-1", "all")


def _self_rules(resources: Sequence[Resource], group: Resource) -> set[str]:
    """The directions ("ingress", "egress") in which ``group`` allows all traffic from/to itself."""
    directions: set[str] = set()
    ids = _identities(group)
    for direction in ("ingress", "egress"):
        for rule in _inputs(group).get(direction) or []:
            if _is_all_traffic(rule.get("protocol")) and (_truthy(rule.get("self")) or ids & set(rule.get("securityGroups") or [])):
                directions.add(direction)

    def targets_group(rule: Resource, prop: str) -> bool:
        value = _inputs(rule).get(prop)
        found, _ = _referenced(resources, rule, prop, [value], SECURITY_GROUP)
        return any(f["urn"] == group["urn"] for f in found)

    for rule in _of_type(resources, SECURITY_GROUP_RULE):
        inputs = _inputs(rule)
        if targets_group(rule, "securityGroupId") and _is_all_traffic(inputs.get("protocol")) and (
            _truthy(inputs.get("self")) or targets_group(rule, "sourceSecurityGroupId")
        ):
            directions.add(str(inputs.get("type")))
    for rule_type, direction in ((INGRESS_RULE, "ingress"), (EGRESS_RULE, "egress")):
        for rule in _of_type(resources, rule_type):
            if (
                targets_group(rule, "securityGroupId")
                and _is_all_traffic(_inputs(rule).get("ipProtocol"))
                and targets_group(rule, "referencedSecurityGroupId")
            ):
                directions.add(direction)
    return directions


def _efa_placement_violations(
    resources: Sequence[Resource], group: NodeGroup, template: LaunchTemplate, policy: str
) -> list[Violation]:
    violations = []
    subnets = group.subnet_ids
    if len(subnets) > 1:
        found, resolved = _referenced(resources, group.resource, "subnetIds", subnets, SUBNET)
        zones = {_get(s, "inputs", "availabilityZone") for s in found}
        if not resolved or len(zones) != 1 or not all(_known(z) for z in zones):
            violations.append(_violation(policy, group.resource, f"EFA nodes span {len(subnets)} subnets {subnets}: use one subnet in one AZ"))
    reserved = bool(template.capacity_reservation_id) or group.capacity_type == "CAPACITY_BLOCK"
    if not reserved and not template.placement_group:
        violations.append(_violation(
            policy, group.resource,
            f"launch template {template.name} has no placement group: EFA nodes need a cluster placement "
            "group unless a capacity reservation or Capacity Block places them",
        ))
    return violations


def _efa_security_group_violations(resources: Sequence[Resource], template: LaunchTemplate, policy: str) -> list[Violation]:
    violations = []
    for index, interface in enumerate(template.efa_interfaces):
        groups = interface.get("securityGroups") or []
        found, resolved = _referenced(resources, template.resource, "networkInterfaces", groups, SECURITY_GROUP)
        if not resolved and any(not _known(g) for g in groups):
            continue  # unknown until created: checked again at update
        if not any(_self_rules(resources, sg) >= {"ingress", "egress"} for sg in found):
            violations.append(_violation(
                policy, template.resource,
                f"EFA interface {index} (network card {interface.get('networkCardIndex')}) has no security group that "
                "allows all traffic from and to itself (ingress and egress, protocol -1, self): EFA traffic is dropped",
            ))
    return violations


def check_efa_node_groups(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """An EFA node group (its launch template has efa/efa-only interfaces) lives in one subnet (one
    AZ), in a cluster placement group unless a capacity reservation or Capacity Block places it,
    and every EFA interface carries a security group allowing all traffic to and from itself."""
    policy = "efa-node-group"
    violations: list[Violation] = []
    for group in node_groups(resources):
        if group.template is None or not group.efa_interfaces:
            continue
        violations += _efa_placement_violations(resources, group, group.template, policy)
        violations += _efa_security_group_violations(resources, group.template, policy)
    return violations


def _node_classes(resources: Sequence[Resource]) -> list[tuple[Resource, Mapping[str, Any]]]:
    """(resource, spec) of every Karpenter EC2NodeClass: the launch template of Karpenter's nodes."""
    return [(r, obj.get("spec") or {}) for r, obj in k8s_objects(resources) if obj.get("kind") == "EC2NodeClass"]


def check_efa_node_classes(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """A Karpenter EC2NodeClass with efa-only interfaces holds the EFA node group's rules: one
    subnet by id (one AZ), a placement group unless a capacity reservation places the nodes, and a
    security group that allows all traffic from and to itself among its security groups (Karpenter
    puts every selected group on every interface)."""
    policy = "efa-node-class"
    violations: list[Violation] = []
    for resource, spec in _node_classes(resources):
        if not any(n.get("interfaceType") == "efa-only" for n in spec.get("networkInterfaces") or []):
            continue
        subnets = spec.get("subnetSelectorTerms") or []
        if len(subnets) != 1 or "id" not in subnets[0]:
            violations.append(_violation(policy, resource, f"EFA nodes select subnets {subnets}: select exactly one subnet by id (one AZ)"))
        if not spec.get("placementGroupSelector") and not spec.get("capacityReservationSelectorTerms"):
            violations.append(_violation(
                policy, resource,
                "EC2NodeClass has no placementGroupSelector: EFA nodes need a cluster placement group unless a capacity "
                "reservation or Capacity Block places them",
            ))
        ids = [term.get("id") for term in spec.get("securityGroupSelectorTerms") or []]
        if any(not _known(i) for i in ids):
            continue  # unknown until created: checked again at update
        found, _ = _referenced(resources, resource, "spec", ids, SECURITY_GROUP)
        if not any(_self_rules(resources, sg) >= {"ingress", "egress"} for sg in found):
            violations.append(_violation(
                policy, resource,
                f"none of the security groups {ids} allows all traffic from and to itself (ingress and egress, protocol -1, "
                "self): EFA traffic is dropped",
            ))
    return violations


# --- launch templates --------------------------------------------------------------------------


def check_imdsv2(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """Launch templates and Karpenter EC2NodeClasses require IMDSv2 (``metadataOptions.httpTokens:
    required``): pods cannot steal node credentials through IMDSv1 request forgery."""
    templates = [(lt, _get(lt, "inputs", "metadataOptions", "httpTokens")) for lt in _of_type(resources, LAUNCH_TEMPLATE)]
    templates += [(r, _get(spec, "metadataOptions", "httpTokens")) for r, spec in _node_classes(resources)]
    return [
        _violation("imdsv2-required", lt, f"metadataOptions.httpTokens is {tokens!r}: set 'required' (IMDSv2)")
        for lt, tokens in templates
        if tokens not in ("required", UNKNOWN)
    ]


def check_ebs_encrypted(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """Every EBS volume of a launch template is encrypted."""
    violations = []
    for lt in _of_type(resources, LAUNCH_TEMPLATE):
        for mapping in _inputs(lt).get("blockDeviceMappings") or []:
            ebs = mapping.get("ebs")
            if ebs is not None and not (_truthy(ebs.get("encrypted")) or ebs.get("encrypted") == UNKNOWN or ebs.get("snapshotId")):
                violations.append(_violation("ebs-encrypted", lt, f"EBS volume {mapping.get('deviceName')} is not encrypted: set ebs.encrypted 'true'"))
    for resource, spec in _node_classes(resources):
        for mapping in spec.get("blockDeviceMappings") or []:
            ebs = mapping.get("ebs") or {}
            if ebs.get("encrypted") is not True and not ebs.get("snapshotID"):
                violations.append(_violation("ebs-encrypted", resource, f"EBS volume {mapping.get('deviceName')} is not encrypted: set ebs.encrypted true"))
    return violations


# --- S3 ----------------------------------------------------------------------------------------


def _bucket_companions(resources: Sequence[Resource], bucket: Resource, *types: str) -> list[Resource]:
    """Companion resources (versioning, encryption, public access block) whose ``bucket`` input is this bucket."""
    found = []
    for companion in _of_type(resources, *types):
        refs, _ = _referenced(resources, companion, "bucket", [_inputs(companion).get("bucket")], *BUCKETS)
        if any(r["urn"] == bucket["urn"] for r in refs):
            found.append(companion)
    return found


def check_s3_encrypted(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """Every bucket has a server-side encryption configuration (SSE-S3 or SSE-KMS), so the
    encryption of checkpoints is declared, not left to the account default."""
    violations = []
    for bucket in _of_type(resources, *BUCKETS):
        inline = _get(bucket, "inputs", "serverSideEncryptionConfiguration", "rule", "applyServerSideEncryptionByDefault", "sseAlgorithm")
        configs = _bucket_companions(resources, bucket, *BUCKET_ENCRYPTION)
        algorithms = [_get(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm") for c in configs for rule in _inputs(c).get("rules") or []]
        if not inline and not any(algorithms):
            violations.append(_violation("s3-encrypted", bucket, "no server-side encryption configuration (aws.s3.BucketServerSideEncryptionConfiguration)"))
    return violations


def _is_checkpoint_bucket(bucket: Resource) -> bool:
    return f"{CHECKPOINT_STORAGE}$" in bucket.get("urn", "")


def check_checkpoint_bucket(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """The checkpoint bucket (a bucket of a CheckpointStorage component) is versioned, blocks all
    public access and is protected (``protect`` or ``retainOnDelete``): nothing is ever lost."""
    policy = "checkpoint-bucket"
    violations = []
    for bucket in filter(_is_checkpoint_bucket, _of_type(resources, *BUCKETS)):
        versioning = [
            _get(v, "inputs", "versioningConfiguration", "status") for v in _bucket_companions(resources, bucket, *BUCKET_VERSIONING)
        ]
        inline = _get(bucket, "inputs", "versioning", "enabled")
        if "Enabled" not in versioning and not _truthy(inline):
            violations.append(_violation(policy, bucket, "not versioned: add aws.s3.BucketVersioning with status Enabled"))
        blocks = _bucket_companions(resources, bucket, BUCKET_PUBLIC_ACCESS_BLOCK)
        flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        if not any(all(_truthy(_get(b, "inputs", f)) for f in flags) for b in blocks):
            violations.append(_violation(policy, bucket, f"public access not fully blocked: add aws.s3.BucketPublicAccessBlock with {', '.join(flags)} true"))
        opts = bucket.get("options") or {}
        if not (opts.get("protect") or opts.get("retainOnDelete")):
            violations.append(_violation(policy, bucket, "neither protect nor retainOnDelete: a destroy would delete the checkpoints"))
    return violations


# --- Kubernetes objects ------------------------------------------------------------------------


def check_no_privileged_containers(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """No container runs privileged (EFA needs only the device plugin's devices and IPC_LOCK)."""
    violations = []
    for resource, obj in k8s_objects(resources):
        for pod in pod_templates(obj):
            for where, container in pod.containers():
                if _truthy(_get(container, "securityContext", "privileged")):
                    violations.append(_violation("no-privileged-containers", resource, f"{obj['kind']} {pod.path}.{where} is privileged"))
    return violations


def _requests_gpus(container: Mapping[str, Any]) -> bool:
    # values unknown during a preview are left out: checked again at update
    return container_requests(container, skip_unknown=True).get(GPU_RESOURCE, 0) > 0


def _tolerates(tolerations: Iterable[Mapping[str, Any]], key: str) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect not in (None, "", GPU_TAINT.effect):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", key):
            return True
        if toleration.get("key") == key:
            return True  # Equal: the node group's value is checked by the scheduler, not here
    return False


def check_gpu_pods_tolerate_gpu_taint(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """A pod that requests nvidia.com/gpu tolerates the GPU nodes' NoSchedule taint, else it
    stays Pending forever."""
    violations = []
    for resource, obj in k8s_objects(resources):
        for pod in pod_templates(obj):
            if any(_requests_gpus(c) for _, c in pod.containers()) and not _tolerates(pod.spec.get("tolerations") or [], options.gpu_taint_key):
                violations.append(_violation(
                    "gpu-pods-tolerate-gpu-taint", resource,
                    f"{obj['kind']} {pod.path} requests {GPU_RESOURCE} but does not tolerate the {options.gpu_taint_key}:{GPU_TAINT.effect} taint",
                ))
    return violations


def _ray_port(port: Mapping[str, Any]) -> int | None:
    for value in (port.get("port"), port.get("targetPort")):
        if isinstance(value, (int, float)) and int(value) in RAY_PORTS:
            return int(value)
        if isinstance(value, str) and value in RAY_PORT_NAMES:
            return RAY_PORT_NAMES[value]
    return RAY_PORT_NAMES.get(str(port.get("name")))


def check_ray_ports_not_exposed(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """The Ray dashboard (8265), GCS (6379) and client (10001) ports run jobs as whoever reaches
    them (no authentication): never through a LoadBalancer or NodePort Service, nor through a
    RayCluster head service of those types."""
    policy = "ray-ports-not-exposed"
    violations = []
    for resource, obj in k8s_objects(resources):
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind == "Service" and spec.get("type") in EXPOSED_SERVICE_TYPES:
            for port in spec.get("ports") or []:
                number = _ray_port(port)
                if number:
                    violations.append(_violation(policy, resource, f"Service type {spec['type']} exposes the {RAY_PORTS[number]} port {number}"))
        clusters = {"RayCluster": spec, "RayJob": spec.get("rayClusterSpec"), "RayService": spec.get("rayClusterConfig")}
        head = _get(clusters.get(kind), "headGroupSpec", default={}) if kind in clusters else {}
        for service_type in (head.get("serviceType"), _get(head, "headService", "spec", "type")):
            if service_type in EXPOSED_SERVICE_TYPES:
                violations.append(_violation(
                    policy, resource, f"{kind} head service type {service_type} exposes the Ray dashboard, GCS and client ports"
                ))
    return violations


# --- EKS endpoint ------------------------------------------------------------------------------


def check_eks_endpoint_private(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """The EKS API endpoint is not open to 0.0.0.0/0 unless the stack opted in
    (cluster.allowPublicEndpointFromAnywhere, or the cluster tag PUBLIC_ENDPOINT_OPT_IN_TAG).
    Both pulumi-eks and the AWS API default to a public endpoint open to 0.0.0.0/0."""
    violations = []
    for cluster in _of_type(resources, *EKS_CLUSTERS):
        inputs = _inputs(cluster)
        vpc = inputs.get("vpcConfig") if cluster["type"] == AWS_EKS_CLUSTER else inputs
        vpc = vpc or {}
        public = vpc.get("endpointPublicAccess", True)
        cidrs = vpc.get("publicAccessCidrs") or ["0.0.0.0/0"]
        tags = {**(inputs.get("tags") or {}), **(inputs.get("clusterTags") or {})}
        opted_in = options.allow_public_endpoint_from_anywhere or _truthy(tags.get(PUBLIC_ENDPOINT_OPT_IN_TAG))
        if _truthy(public) and ("0.0.0.0/0" in cidrs or "::/0" in cidrs) and not opted_in:
            violations.append(_violation(
                "eks-endpoint-not-public", cluster,
                f"the public API endpoint is open to {cidrs}: list endpointPublicAccessCidrs, or set "
                "cluster.allowPublicEndpointFromAnywhere: true to mean it",
            ))
    return violations


POLICIES: tuple[Policy, ...] = (
    Policy("efa-node-group", check_efa_node_groups.__doc__ or "", "stack", check_efa_node_groups),
    Policy("efa-node-class", check_efa_node_classes.__doc__ or "", "stack", check_efa_node_classes),
    Policy("imdsv2-required", check_imdsv2.__doc__ or "", "resource", check_imdsv2),
    Policy("ebs-encrypted", check_ebs_encrypted.__doc__ or "", "resource", check_ebs_encrypted),
    Policy("s3-encrypted", check_s3_encrypted.__doc__ or "", "stack", check_s3_encrypted),
    Policy("checkpoint-bucket", check_checkpoint_bucket.__doc__ or "", "stack", check_checkpoint_bucket),
    Policy("ray-ports-not-exposed", check_ray_ports_not_exposed.__doc__ or "", "resource", check_ray_ports_not_exposed),
    Policy("no-privileged-containers", check_no_privileged_containers.__doc__ or "", "resource", check_no_privileged_containers),
    Policy("gpu-pods-tolerate-gpu-taint", check_gpu_pods_tolerate_gpu_taint.__doc__ or "", "resource", check_gpu_pods_tolerate_gpu_taint),
    Policy("eks-endpoint-not-public", check_eks_endpoint_private.__doc__ or "", "resource", check_eks_endpoint_private),
)


def evaluate(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """Every policy over every resource (the offline plan's check)."""
    return [v for policy in POLICIES for v in policy.check(resources, options)]


def options_from_settings(settings: Optional[StackSettings]) -> PolicyOptions:
    """The opt-ins of a stack's StackSettings (None: the defaults)."""
    if settings is None:
        return PolicyOptions()
    return PolicyOptions(allow_public_endpoint_from_anywhere=settings.cluster.allow_public_endpoint_from_anywhere)
