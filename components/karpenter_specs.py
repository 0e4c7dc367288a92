"""Karpenter's objects for the GPU nodes, as pure functions of the settings (no Pulumi).

- :func:`node_class_spec`: the ``EC2NodeClass`` (karpenter.k8s.aws/v1), the launch template of
  :mod:`.gpu_nodes` restated in Karpenter's terms, from the same functions: the EFA layout of the
  catalog (:func:`node_class_interfaces`), IMDSv2 with its hop limit, the encrypted gp3 volumes,
  the instance-store RAID0, the hugepages user data, the placement group and the reservation.
- :func:`node_pool_spec`: the ``NodePool`` (karpenter.sh/v1): the instance types in order, the
  capacity types, the GPU taint and labels of the managed group, ``limits`` from ``maxNodes`` and
  ``disruption`` that removes a node only when it is empty.
- :func:`controller_policy`, :func:`queue_policy`, :data:`INTERRUPTION_EVENTS`: the controller's
  IAM permissions and its interruption queue (Karpenter v1.14 getting-started CloudFormation).
- :func:`helm_values`: the chart's values (keys of its values.yaml, 1.14.1).

Field notes section 7 has the facts; tests check every object against the v1.14.1 CRDs (CEL rules
included) and the chart's values.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from . import catalog
from .config import GpuNodeSettings
from .gpu_nodes import IMDS_HOP_LIMIT, al2023_user_data, block_devices, placement_mode
from .scheduling import GPU_RESOURCE, GPU_TAINT, HUGEPAGES_2MI_RESOURCE, INSTANCE_TYPE_LABEL, KARPENTER_NODE_POOL, SYSTEM_NODE_LABELS, node_labels

CHART = "oci://public.ecr.aws/karpenter/karpenter"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
NODE_POOL = KARPENTER_NODE_POOL
NODE_CLASS = KARPENTER_NODE_POOL
API_GROUP_NODE_CLASS = "karpenter.k8s.aws"
NODE_CLASS_API_VERSION = f"{API_GROUP_NODE_CLASS}/v1"
NODE_POOL_API_VERSION = "karpenter.sh/v1"
NODE_OVERLAY_API_VERSION = "karpenter.sh/v1alpha1"

CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
ZONE_LABEL = "topology.kubernetes.io/zone"


# --- the EC2NodeClass ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeClassInterface:
    network_card_index: int
    device_index: int
    interface_type: str  # interface | efa-only

    def as_dict(self) -> dict[str, Any]:
        return {"networkCardIndex": self.network_card_index, "deviceIndex": self.device_index, "interfaceType": self.interface_type}


def node_class_interfaces(settings: GpuNodeSettings) -> list[NodeClassInterface]:
    """The launch template's EFA layout (:func:`catalog.efa_interfaces_for`) in Karpenter's terms.

    Karpenter v1.14 knows two interface types, ``interface`` (ENA) and ``efa-only``, not ``efa``
    (ENA plus EFA device): the primary interface at card 0 / device 0 must be an ``interface``, and
    a card holds at most one ``efa-only`` (CRD rules). So the template's ``efa`` interface on card
    0 becomes the ENA ``interface`` plus an ``efa-only`` at the next device index of that card, and
    every ``efa-only`` stays as it is: the node has as many EFA devices as with the template (32 on
    p5.48xlarge: 33 entries), and Karpenter advertises ``vpc.amazonaws.com/efa`` = the number of
    ``efa-only`` entries. Empty without EFA (Karpenter's default single interface)."""
    if not settings.efa:
        return []
    interfaces: list[NodeClassInterface] = []
    for nic in catalog.efa_interfaces_for(settings.instance):
        if nic.interface_type == "efa":
            interfaces.append(NodeClassInterface(nic.network_card_index, nic.device_index, "interface"))
            interfaces.append(NodeClassInterface(nic.network_card_index, nic.device_index + 1, "efa-only"))
        else:
            interfaces.append(NodeClassInterface(nic.network_card_index, nic.device_index, nic.interface_type))
    return interfaces


def efa_devices(settings: GpuNodeSettings) -> int:
    """EFA devices per node: the ``efa-only`` entries (Karpenter's count of vpc.amazonaws.com/efa)."""
    return sum(1 for nic in node_class_interfaces(settings) if nic.interface_type == "efa-only")


def node_class_user_data(settings: GpuNodeSettings) -> Optional[str]:
    """The AL2023 user data of the managed group without its NodeConfig part: Karpenter merges its
    own NodeConfig (cluster, kubelet) into the MIME document, and ``instanceStorePolicy: RAID0``
    asks it for the instance-store RAID0 the NodeConfig part would ask nodeadm for. What stays is
    the hugepages script (None without hugepages)."""
    text = al2023_user_data(settings.model_copy(update={"local_nvme_raid0": False}))
    return text or None


def node_class_spec(
    settings: GpuNodeSettings,
    *,
    role_name: str,
    subnet_id: str,
    security_group_ids: list[str],
    placement_group: Optional[str],
    tags: dict[str, str],
) -> dict[str, Any]:
    """The EC2NodeClass spec. ``placement_group`` is the group's name (None: none, as
    :func:`gpu_nodes.placement_mode` decides: not with a reservation)."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": settings.karpenter.ami_alias}],
        # by id: exactly the GPU subnet of the stack's AZ and the cluster and EFA groups
        "subnetSelectorTerms": [{"id": subnet_id}],
        "securityGroupSelectorTerms": [{"id": group} for group in security_group_ids],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
        },
        "blockDeviceMappings": [
            {
                "deviceName": device.device_name,
                "rootVolume": index == 0,
                "ebs": {
                    **({"volumeSize": f"{device.size_gib}Gi"} if device.size_gib else {}),
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
            for index, device in enumerate(block_devices(settings))
        ],
        # the pod count nodeadm gives a managed node of the type: Karpenter would derive its own from
        # the ENIs, and the kube-reserved memory (so the allocatable the training pod is sized to,
        # catalog.pod_shape_for) follows from it
        "kubelet": {"maxPods": catalog.max_pods(settings.instance)},
        "tags": dict(tags),
    }
    # the node IAM role's name (EC2NodeClass.spec.role): the field's name is the node label key's
    # spelling only by chance, so it is not written as a dict key (tests/test_scheduling.py)
    spec["role"] = role_name
    interfaces = node_class_interfaces(settings)
    if interfaces:
        spec["networkInterfaces"] = [nic.as_dict() for nic in interfaces]
    if placement_group is not None:
        spec["placementGroupSelector"] = {"name": placement_group}
    if settings.capacity_reservation_id:
        spec["capacityReservationSelectorTerms"] = [{"id": settings.capacity_reservation_id}]
    if settings.nvme_raid0:
        spec["instanceStorePolicy"] = "RAID0"
    user_data = node_class_user_data(settings)
    if user_data:
        spec["userData"] = user_data
    return spec


def wants_placement_group(settings: GpuNodeSettings) -> bool:
    """The managed group's rule (:func:`gpu_nodes.placement_mode`): none with a reservation."""
    return placement_mode(settings) != "none"


# --- the NodePool --------------------------------------------------------------------------------


def capacity_types(settings: GpuNodeSettings) -> list[str]:
    """Karpenter capacity types: a reservation (ODCR) first, then on demand; a Capacity Block only
    its reservation (on demand outside it is another price and another placement); spot; else on
    demand. Karpenter launches into ``reserved`` offerings first whenever both are allowed."""
    if settings.capacity_type == "CAPACITY_BLOCK":
        return ["reserved"]
    if settings.capacity_type == "SPOT":
        return ["spot"]
    return ["reserved", "on-demand"] if settings.capacity_reservation_id else ["on-demand"]


def gpu_limit(settings: GpuNodeSettings) -> int:
    """The NodePool's ``nvidia.com/gpu`` limit: maxNodes (else nodeCount) nodes' GPUs. Every allowed
    type has the same GPU count (config), so it caps the nodes at maxNodes whatever the type."""
    return settings.max_size * settings.instance.gpus


def pool_labels(settings: GpuNodeSettings) -> dict[str, str]:
    """The node labels, exactly the managed group's (without the Cluster Autoscaler's)."""
    return node_labels(settings, autoscaled=False)


def node_pool_spec(settings: GpuNodeSettings, *, zone: str, node_class: str = NODE_CLASS) -> dict[str, Any]:
    """The NodePool spec: one AZ, the allowed types in order, the capacity types, the GPU taint.

    ``disruption``: WhenEmpty: a node goes only once no pod but DaemonSets runs on it (after
    ``consolidateAfter``); the training pods also carry ``karpenter.sh/do-not-disrupt``, so no
    voluntary disruption stops a run. ``expireAfter: Never``: a node is never replaced for its age
    under a run."""
    return {
        "template": {
            "metadata": {"labels": pool_labels(settings)},
            "spec": {
                "nodeClassRef": {"group": API_GROUP_NODE_CLASS, "kind": "EC2NodeClass", "name": node_class},
                "taints": [GPU_TAINT.as_dict()],
                "requirements": [
                    {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": settings.karpenter_types},
                    {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": capacity_types(settings)},
                    {"key": ZONE_LABEL, "operator": "In", "values": [zone]},
                ],
                "expireAfter": "Never",
            },
        },
        "limits": {GPU_RESOURCE: str(gpu_limit(settings))},
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": f"{settings.karpenter.consolidate_after_minutes}m",
        },
    }


def node_overlay_spec(settings: GpuNodeSettings) -> Optional[dict[str, Any]]:
    """The NodeOverlay that tells Karpenter's scheduling simulation about the hugepages the user
    data reserves (None without hugepages). Karpenter derives a type's capacity from EC2's figures
    and knows nothing of ``vm.nr_hugepages``: without it no type would fit a training pod that asks
    for ``hugepages-2Mi`` and the run's pods would stay Pending. NodeOverlay is alpha in v1.14
    (feature gate ``nodeOverlay``, which :func:`helm_values` turns on)."""
    if not settings.hugepages_gib:
        return None
    return {
        "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [NODE_POOL]}],
        "capacity": {HUGEPAGES_2MI_RESOURCE: f"{settings.hugepages_gib}Gi"},
    }


# --- the controller: IAM, interruption queue, Helm values -----------------------------------------

INTERRUPTION_EVENTS: dict[str, dict[str, Any]] = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "reservation-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
}
"""The EventBridge rules that feed the interruption queue (Karpenter v1.14 getting-started
CloudFormation): AWS Health scheduled changes, Spot interruption warnings, rebalance
recommendations, instance state changes and capacity-reservation interruption warnings."""

QUEUE_RETENTION_SECONDS = 300


def queue_policy(queue_arn: str) -> dict[str, Any]:
    """Who may send to the interruption queue: EventBridge (and SQS itself), and nothing over
    plain HTTP."""
    return {
        "Version": "2012-10-17",
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Sid": "EventBridgeSends",
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


def controller_policy(*, cluster_name: str, partition: str, region: str, account_id: str, node_role_arn: str, queue_arn: str) -> dict[str, Any]:
    """The controller's permissions, scoped as Karpenter's own v1.14 policies are: launches and
    tags only with this cluster's ownership tag, deletes only of its own instances and templates,
    PassRole only of the node role to EC2, instance profiles only its own, the interruption queue,
    DescribeCluster of this cluster, regional reads."""
    ec2 = f"arn:{partition}:ec2:{region}"
    profile = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    owned = {f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned", "aws:RequestTag/eks:eks-cluster-name": cluster_name}
    resource_owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    launched = [f"{ec2}:{account_id}:{kind}/*" for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "LaunchFromSharedResources",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                *(f"{ec2}:{account_id}:{kind}/*" for kind in ("security-group", "subnet", "capacity-reservation", "placement-group")),
            ],
        },
        {
            "Sid": "LaunchFromOwnTemplates",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": f"{ec2}:{account_id}:launch-template/*",
            "Condition": {"StringEquals": resource_owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "CreateOwned",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": launched,
            "Condition": {"StringEquals": owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "TagOnCreate",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": launched,
            "Condition": {
                "StringEquals": {**owned, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "TagOwnInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:{account_id}:instance/*",
            "Condition": {
                "StringEquals": resource_owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
            },
        },
        {
            "Sid": "DeleteOwned",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{ec2}:{account_id}:instance/*", f"{ec2}:{account_id}:launch-template/*"],
            "Condition": {"StringEquals": resource_owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "PassNodeRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": node_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        },
        {
            "Sid": "CreateOwnInstanceProfiles",
            "Effect": "Allow",
            "Action": "iam:CreateInstanceProfile",
            "Resource": profile,
            "Condition": {
                "StringEquals": {**owned, "aws:RequestTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "TagOwnInstanceProfiles",
            "Effect": "Allow",
            "Action": "iam:TagInstanceProfile",
            "Resource": profile,
            "Condition": {
                "StringEquals": {
                    **resource_owned,
                    "aws:ResourceTag/topology.kubernetes.io/region": region,
                    **owned,
                    "aws:RequestTag/topology.kubernetes.io/region": region,
                },
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "ManageOwnInstanceProfiles",
            "Effect": "Allow",
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            "Resource": profile,
            "Condition": {
                "StringEquals": {**resource_owned, "aws:ResourceTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {"Sid": "ReadInstanceProfiles", "Effect": "Allow", "Action": "iam:GetInstanceProfile", "Resource": profile},
        {"Sid": "ListInstanceProfiles", "Effect": "Allow", "Action": "iam:ListInstanceProfiles", "Resource": "*"},
        {
            "Sid": "InterruptionQueue",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": queue_arn,
        },
        {
            "Sid": "DescribeOwnCluster",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
        },
        {
            "Sid": "RegionalReads",
            "Effect": "Allow",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {"Sid": "AmiParameters", "Effect": "Allow", "Action": "ssm:GetParameter", "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*"},
        {"Sid": "Prices", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def helm_values(
    *, cluster_name: str, queue_name: str, replicas: int = 2, node_overlay: bool = False, node_repair: bool = False
) -> dict[str, Any]:
    """Values of the karpenter chart (keys of its 1.14.1 values.yaml). Credentials come from the
    Pod Identity association of ``kube-system:karpenter`` (no role annotation); the controller runs
    on the system nodes (its chart's linux selector kept), never on a node it may remove;
    ``replicas`` at most the system nodes (the chart's anti-affinity puts one per node);
    ``node_overlay``: the alpha feature gate the hugepages overlay needs; ``node_repair``
    (``gpuNodes.autoRepair``): the alpha gate with which Karpenter replaces a node the
    eks-node-monitoring-agent marks unhealthy (AcceleratedHardwareReady False for 10 minutes: GPU
    XID errors, lost GPUs), as EKS node auto repair does for the managed group."""
    settings: dict[str, Any] = {"clusterName": cluster_name, "interruptionQueue": queue_name}
    gates = {name: True for name, on in (("nodeOverlay", node_overlay), ("nodeRepair", node_repair)) if on}
    if gates:
        settings["featureGates"] = gates
    return {
        "replicas": replicas,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "nodeSelector": {"kubernetes.io/os": "linux", **SYSTEM_NODE_LABELS},
        "settings": settings,
    }
