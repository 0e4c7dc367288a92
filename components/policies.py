"""Policies this field needs, as pure functions over resources in plan.json shape.

A resource is a dict ``{"urn", "type", "name", "id"?, "inputs" (wire names), "options"
{"protect", "retainOnDelete", ...}, "propertyDependencies"? {input: [urn]}}``: what the offline
plan writes, and what :func:`resources_from_policy_args` makes of a CrossGuard policy's
arguments. Every policy takes the list of resources (and :class:`PolicyOptions`) and returns
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
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

UNKNOWN = "[unknown]"
SECRET = "[secret]"

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
BUCKET_VERSIONING = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
BUCKET_ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
BUCKET_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
EKS_CLUSTERS = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
CHECKPOINT_STORAGE = "rlinf-eks:index:CheckpointStorage"

EFA_INTERFACE_TYPES = ("efa", "efa-only")
RAY_PORTS = {8265: "Ray dashboard", 6379: "Ray GCS", 10001: "Ray client"}
RAY_PORT_NAMES = {"dashboard": 8265, "gcs": 6379, "gcs-server": 6379, "client": 10001}
EXPOSED_SERVICE_TYPES = ("LoadBalancer", "NodePort")
GPU_RESOURCE = "nvidia.com/gpu"
PUBLIC_ENDPOINT_OPT_IN_TAG = "rlinf-eks/public-endpoint-from-anywhere"
"""A cluster tag (value ``"true"``) that carries the allowPublicEndpointFromAnywhere opt-in into
the resource itself, so the CrossGuard pack sees it without the stack config."""

Resource = Mapping[str, Any]


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
    gpu_taint_key: str = GPU_RESOURCE
    """The taint of the GPU nodes that GPU pods must tolerate. Defaults to nvidia.com/gpu."""


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    scope: Literal["resource", "stack"]
    """resource: looks at one resource at a time (CrossGuard ResourceValidationPolicy); stack:
    follows references between resources (StackValidationPolicy)."""
    check: Callable[[Sequence[Resource], PolicyOptions], list[Violation]]


# --- helpers -----------------------------------------------------------------------------------


def _inputs(resource: Resource) -> Mapping[str, Any]:
    return resource.get("inputs") or {}


def _get(data: Any, *path: Any, default: Any = None) -> Any:
    for part in path:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and -len(data) <= part < len(data):
            data = data[part]
        else:
            return default
    return data


def _known(value: Any) -> bool:
    return value is not None and value != UNKNOWN


def _truthy(value: Any) -> bool:
    """Booleans as the providers take them: launch template ``encrypted`` is the string "true"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _of_type(resources: Iterable[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r.get("type") in types]


def _identities(resource: Resource) -> set[str]:
    """What other resources may use to refer to this one: its id, name-like inputs."""
    found = {resource.get("id"), _get(resource, "inputs", "id"), _get(resource, "inputs", "name"),
             _get(resource, "inputs", "bucket"), _get(resource, "inputs", "arn")}
    return {v for v in found if isinstance(v, str) and _known(v)}


def _referenced(
    resources: Sequence[Resource], holder: Resource, prop: str, values: Iterable[Any], *types: str
) -> tuple[list[Resource], bool]:
    """Resources of ``types`` that ``holder`` refers to through its input ``prop`` holding
    ``values``: by identity when known, else through the property's dependencies. Returns the
    resources and whether every reference could be resolved."""
    candidates = _of_type(resources, *types)
    found: dict[str, Resource] = {}
    resolved = True
    for value in values:
        if _known(value):
            match = [c for c in candidates if value in _identities(c)]
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


def _violation(policy: str, resource: Resource, message: str) -> Violation:
    return Violation(policy, resource.get("urn", ""), resource.get("name", ""), message)


# --- EFA node groups ---------------------------------------------------------------------------


def _launch_template_of(resources: Sequence[Resource], node_group: Resource) -> Resource | None:
    spec = _inputs(node_group).get("launchTemplate") or {}
    refs = [spec.get("id"), spec.get("name")]
    found, _ = _referenced(resources, node_group, "launchTemplate", [r for r in refs if r is not None], LAUNCH_TEMPLATE)
    return found[0] if found else None


def _efa_interfaces(launch_template: Resource) -> list[Mapping[str, Any]]:
    return [i for i in _inputs(launch_template).get("networkInterfaces") or [] if i.get("interfaceType") in EFA_INTERFACE_TYPES]


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


def check_efa_node_groups(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """An EFA node group (its launch template has efa/efa-only interfaces) lives in one subnet (one
    AZ), in a cluster placement group unless a capacity reservation or Capacity Block places it,
    and every EFA interface carries a security group allowing all traffic to and from itself."""
    policy = "efa-node-group"
    violations: list[Violation] = []
    for group in _of_type(resources, NODE_GROUP):
        template = _launch_template_of(resources, group)
        if template is None or not _efa_interfaces(template):
            continue
        inputs, lt = _inputs(group), _inputs(template)
        subnets = inputs.get("subnetIds") or []
        if isinstance(subnets, list) and len(subnets) > 1:
            found, resolved = _referenced(resources, group, "subnetIds", subnets, SUBNET)
            zones = {_get(s, "inputs", "availabilityZone") for s in found}
            if not resolved or len(zones) != 1 or not all(_known(z) for z in zones):
                violations.append(_violation(policy, group, f"EFA nodes span {len(subnets)} subnets {subnets}: use one subnet in one AZ"))
        reservation = _get(lt, "capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId")
        reserved = bool(reservation) or inputs.get("capacityType") == "CAPACITY_BLOCK"
        if not reserved and not _get(lt, "placement", "groupName"):
            violations.append(_violation(
                policy, group,
                f"launch template {template['name']} has no placement group: EFA nodes need a cluster placement "
                "group unless a capacity reservation or Capacity Block places them",
            ))
        for index, interface in enumerate(_efa_interfaces(template)):
            groups = interface.get("securityGroups") or []
            found, resolved = _referenced(resources, template, "networkInterfaces", groups, SECURITY_GROUP)
            if not resolved and any(not _known(g) for g in groups):
                continue  # unknown until created: checked again at update
            if not any(_self_rules(resources, sg) >= {"ingress", "egress"} for sg in found):
                violations.append(_violation(
                    policy, template,
                    f"EFA interface {index} (network card {interface.get('networkCardIndex')}) has no security group that "
                    "allows all traffic from and to itself (ingress and egress, protocol -1, self): EFA traffic is dropped",
                ))
    return violations


# --- launch templates --------------------------------------------------------------------------


def check_imdsv2(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """Launch templates require IMDSv2 (``metadataOptions.httpTokens: required``): pods cannot
    steal node credentials through IMDSv1 request forgery."""
    return [
        _violation("imdsv2-required", lt, f"metadataOptions.httpTokens is {_get(lt, 'inputs', 'metadataOptions', 'httpTokens')!r}: set 'required' (IMDSv2)")
        for lt in _of_type(resources, LAUNCH_TEMPLATE)
        if _get(lt, "inputs", "metadataOptions", "httpTokens") not in ("required", UNKNOWN)
    ]


def check_ebs_encrypted(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """Every EBS volume of a launch template is encrypted."""
    violations = []
    for lt in _of_type(resources, LAUNCH_TEMPLATE):
        for mapping in _inputs(lt).get("blockDeviceMappings") or []:
            ebs = mapping.get("ebs")
            if ebs is not None and not (_truthy(ebs.get("encrypted")) or ebs.get("encrypted") == UNKNOWN or ebs.get("snapshotId")):
                violations.append(_violation("ebs-encrypted", lt, f"EBS volume {mapping.get('deviceName')} is not encrypted: set ebs.encrypted 'true'"))
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


def _k8s_objects(resources: Iterable[Resource]) -> Iterator[tuple[Resource, Mapping[str, Any]]]:
    for resource in resources:
        if str(resource.get("type", "")).startswith("kubernetes:") and isinstance(_inputs(resource).get("kind"), str):
            yield resource, _inputs(resource)


def _ray_cluster_pod_templates(spec: Mapping[str, Any], where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    head = _get(spec, "headGroupSpec", "template")
    if isinstance(head, Mapping):
        yield f"{where}.headGroupSpec.template", head
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        template = _get(group, "template")
        if isinstance(template, Mapping):
            yield f"{where}.workerGroupSpecs[{index}].template", template


def pod_templates(obj: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every pod spec in a Kubernetes object, with its path: Pods, workload controllers and
    KubeRay's RayCluster, RayJob and RayService."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Pod":
        yield "spec", spec
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"):
        yield "spec.template.spec", _get(spec, "template", "spec", default={})
    elif kind == "CronJob":
        yield "spec.jobTemplate.spec.template.spec", _get(spec, "jobTemplate", "spec", "template", "spec", default={})
    elif kind == "RayCluster":
        for path, template in _ray_cluster_pod_templates(spec, "spec"):
            yield f"{path}.spec", template.get("spec") or {}
    elif kind == "RayJob":
        for path, template in _ray_cluster_pod_templates(spec.get("rayClusterSpec") or {}, "spec.rayClusterSpec"):
            yield f"{path}.spec", template.get("spec") or {}
        if isinstance(spec.get("submitterPodTemplate"), Mapping):
            yield "spec.submitterPodTemplate.spec", _get(spec, "submitterPodTemplate", "spec", default={})
    elif kind == "RayService":
        for path, template in _ray_cluster_pod_templates(spec.get("rayClusterConfig") or {}, "spec.rayClusterConfig"):
            yield f"{path}.spec", template.get("spec") or {}


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in pod.get(field) or []:
            yield f"{field}[name={container.get('name')}]", container


def check_no_privileged_containers(resources: Sequence[Resource], options: PolicyOptions = PolicyOptions()) -> list[Violation]:
    """No container runs privileged (EFA needs only the device plugin's devices and IPC_LOCK)."""
    violations = []
    for resource, obj in _k8s_objects(resources):
        for path, pod in pod_templates(obj):
            for where, container in _containers(pod):
                if _truthy(_get(container, "securityContext", "privileged")):
                    violations.append(_violation("no-privileged-containers", resource, f"{obj['kind']} {path}.{where} is privileged"))
    return violations


def _gpu_count(container: Mapping[str, Any]) -> int:
    resources = container.get("resources") or {}
    values = [_get(resources, "limits", GPU_RESOURCE), _get(resources, "requests", GPU_RESOURCE)]
    counts = [int(v) for v in values if isinstance(v, (int, float)) or (isinstance(v, str) and v.isdigit())]
    return max(counts, default=0)


def _tolerates(tolerations: Iterable[Mapping[str, Any]], key: str) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect not in (None, "", "NoSchedule"):
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
    for resource, obj in _k8s_objects(resources):
        for path, pod in pod_templates(obj):
            if any(_gpu_count(c) for _, c in _containers(pod)) and not _tolerates(pod.get("tolerations") or [], options.gpu_taint_key):
                violations.append(_violation(
                    "gpu-pods-tolerate-gpu-taint", resource,
                    f"{obj['kind']} {path} requests {GPU_RESOURCE} but does not tolerate the {options.gpu_taint_key}:NoSchedule taint",
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
    for resource, obj in _k8s_objects(resources):
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
        vpc = inputs.get("vpcConfig") if cluster["type"] == "aws:eks/cluster:Cluster" else inputs
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


# --- CrossGuard adapter ------------------------------------------------------------------------

# pulumi-policy marks values unknown during preview with these sentinels (pulumi_policy.proxy).
_UNKNOWN_SENTINELS = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421", "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2", "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
})


def plain(value: Any) -> Any:
    """pulumi-policy's props (proxies that raise on unknown values) as plain JSON-like data,
    unknowns as ``"[unknown]"``; whole floats as integers, as in plan.json."""
    if isinstance(value, Mapping):
        try:
            target = value["__target"]  # the proxy's own dict, read without the unknown check
        except (KeyError, TypeError):
            target = value
        return {str(k): plain(target[k]) for k in target}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, (str, bytes))):
        try:
            items = value["__target"]
        except (KeyError, TypeError, IndexError):
            items = value
        return [plain(v) for v in items]
    if isinstance(value, str) and value in _UNKNOWN_SENTINELS:
        return UNKNOWN
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "value") and type(value).__name__ == "Secret":
        return SECRET
    return value


def resource_from_policy_args(args: Any) -> dict[str, Any]:
    """One resource in plan.json shape from pulumi_policy's ResourceValidationArgs or PolicyResource."""
    opts = getattr(args, "opts", None)
    parent = getattr(args, "parent", None)
    property_dependencies = getattr(args, "property_dependencies", None) or {}
    return {
        "urn": args.urn,
        "type": args.resource_type,
        "name": args.name,
        "parent": getattr(parent, "urn", None) or getattr(opts, "parent", None),
        "inputs": plain(args.props),
        "options": {
            "protect": bool(getattr(opts, "protect", False)),
            # CrossGuard does not see retainOnDelete; protect is what the pack can check.
            "retainOnDelete": False,
            "ignoreChanges": list(getattr(opts, "ignore_changes", None) or []),
            "deleteBeforeReplace": bool(getattr(opts, "delete_before_replace", False)),
            "dependsOn": sorted(d.urn for d in getattr(args, "dependencies", None) or []),
        },
        "propertyDependencies": {k: sorted(d.urn for d in v) for k, v in property_dependencies.items()},
    }


def resources_from_policy_args(args: Any) -> list[dict[str, Any]]:
    """The plan.json-shaped resources of a CrossGuard call: StackValidationArgs (all resources)
    or ResourceValidationArgs (one)."""
    if hasattr(args, "resources"):
        return [resource_from_policy_args(r) for r in args.resources]
    return [resource_from_policy_args(args)]


def options_from_settings(settings: Any) -> PolicyOptions:
    """The opt-ins of a stack's StackSettings (None: the defaults)."""
    if settings is None:
        return PolicyOptions()
    return PolicyOptions(allow_public_endpoint_from_anywhere=settings.cluster.allow_public_endpoint_from_anywhere)


def options_from_policy_config(config: Mapping[str, Any] | None) -> PolicyOptions:
    config = config or {}
    return PolicyOptions(
        allow_public_endpoint_from_anywhere=bool(config.get("allowPublicEndpointFromAnywhere", False)),
        gpu_taint_key=str(config.get("gpuTaintKey", GPU_RESOURCE)),
    )


def validate_with(policy: Policy) -> Callable[[Any, Callable[..., None]], None]:
    """A CrossGuard ``validate(args, report_violation)`` that runs ``policy`` on the plan.json
    shape of its arguments."""

    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        getter = getattr(args, "get_config", None)
        options = options_from_policy_config(getter() if getter else None)
        for violation in policy.check(resources_from_policy_args(args), options):
            report_violation(violation.message, violation.urn or None)

    return validate
