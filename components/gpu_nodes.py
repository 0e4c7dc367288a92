"""The EKS managed node group of EFA GPU nodes, built from explicit resources.

Not ``pulumi_eks.ManagedNodeGroup(enable_efa_support=True)``: that option cannot be combined with
a custom launch template, so it allows no capacity reservation, no extra security group and always
forces a placement group (field notes, section 1). Here every piece is its own resource:

- a node IAM role;
- an EFA security group that allows all traffic from and to itself;
- a cluster placement group (optional, or an existing one by name);
- a launch template: one interface per network card (``catalog.efa_interfaces_for``), IMDSv2,
  encrypted gp3 volumes, capacity options, and user data for AL2023 (nodeadm) or Bottlerocket;
- the managed node group in exactly one subnet, tainted for GPUs and labelled for the trainer;
- for a Capacity Block that has not started (``capacityBlock.startTime``): the group at zero
  nodes and an Auto Scaling scheduled action on its Auto Scaling group that brings it up then.

The pure functions below take plain settings and return plain specs; the component only wires them.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional

import pulumi
import pulumi_aws as aws

from . import catalog
from .config import CapacityBlockSettings, GpuNodeSettings
from .node_role import SSM_POLICY, WORKER_NODE_POLICIES, eks_node_role
from .scheduling import EFA_RESOURCE, GPU_RESOURCE, GPU_TAINT, HUGEPAGES_2MI_RESOURCE, node_labels, node_taints

# --- launch template pieces ---------------------------------------------------------------------


def network_interfaces(settings: GpuNodeSettings) -> list[catalog.EfaInterface]:
    """Launch-template interfaces: the catalog's EFA layout, or none without EFA (the instance
    then gets EKS's default single interface and the template's security groups)."""
    return catalog.efa_interfaces_for(settings.instance) if settings.efa else []


PlacementMode = Literal["create", "existing", "none"]


def placement_mode(settings: GpuNodeSettings) -> PlacementMode:
    """create a cluster placement group, use an ``existing`` one by name, or ``none``.

    ``auto`` creates one unless a capacity reservation or Capacity Block is used: those already fix
    placement, and a forced placement group then fails with InsufficientInstanceCapacity
    (terraform-aws-eks #3730)."""
    if not settings.wants_placement_group:
        return "none"
    return "existing" if settings.placement_group.strategy == "existing" else "create"


@dataclass(frozen=True)
class CapacityOptions:
    """How instances are bought: the node group's capacity type and the launch template's options."""

    node_group_capacity_type: str
    market_type: Optional[str]
    reservation_id: Optional[str]


def capacity_options(settings: GpuNodeSettings) -> CapacityOptions:
    """ON_DEMAND / SPOT as is; an On-Demand Capacity Reservation targets its id; a Capacity Block
    needs market type ``capacity-block`` plus the reservation id in the launch template and
    capacity type CAPACITY_BLOCK on the node group (EKS "Capacity Blocks for ML" guide)."""
    if settings.capacity_type == "CAPACITY_BLOCK":
        return CapacityOptions("CAPACITY_BLOCK", "capacity-block", settings.capacity_reservation_id)
    if settings.capacity_type == "ON_DEMAND" and settings.capacity_reservation_id:
        return CapacityOptions("ON_DEMAND", None, settings.capacity_reservation_id)
    return CapacityOptions(settings.capacity_type, None, None)


@dataclass(frozen=True)
class ScalingSizes:
    """The node group's scaling config at creation."""

    min_size: int
    desired_size: int
    max_size: int


def scaling_sizes(settings: GpuNodeSettings) -> ScalingSizes:
    """minSize/desiredSize/maxSize; zero/zero/max while a Capacity Block has not started.

    EKS guide "Create a managed node group with Capacity Blocks for ML": a group created before
    its reservation is active cannot launch instances (its Auto Scaling group logs launch errors
    until then), so create it at desired size 0 and scale it up with a scheduled action at the
    block's start time (``capacity_block_start``)."""
    if settings.scheduled_start is not None:
        return ScalingSizes(0, 0, settings.max_size)
    return ScalingSizes(settings.min_size, settings.node_count, settings.max_size)


CAPACITY_BLOCK_START_ACTION = "rlinf-capacity-block-start"
"""The scheduled action that brings the node group up when its Capacity Block starts."""


@dataclass(frozen=True)
class ScheduledScaling:
    """One Auto Scaling scheduled action, with every size spelled out: the provider sends 0 for a
    size left unset (aws_autoscaling_schedule: "Set to -1 if you don't want to change ...
    Defaults to 0"), which would shrink maxSize to 0."""

    action_name: str
    start_time: str  # UTC, YYYY-MM-DDThh:mm:ssZ (the provider's format)
    min_size: int
    desired_capacity: int
    max_size: int


def capacity_block_start(settings: GpuNodeSettings) -> Optional[ScheduledScaling]:
    """The scale-up at the Capacity Block's start (None unless ``capacityBlock.startTime``).

    Sizes other than the desired one stay those of the node group, so Pulumi sees no drift once
    it has run. The scale-down is EKS's own: it schedules "Amazon EKS Node Group Capacity
    Scaledown Before Reservation End" 40 minutes before the block ends (same guide)."""
    start = settings.scheduled_start
    if start is None:
        return None
    sizes = scaling_sizes(settings)
    return ScheduledScaling(
        action_name=CAPACITY_BLOCK_START_ACTION,
        start_time=CapacityBlockSettings.api_time(start),
        min_size=sizes.min_size,
        desired_capacity=settings.node_count,
        max_size=sizes.max_size,
    )


def is_bottlerocket(settings: GpuNodeSettings) -> bool:
    """A Bottlerocket AMI: TOML user data, a separate data volume, its own NVIDIA device plugin."""
    return settings.ami_type.startswith("BOTTLEROCKET")


@dataclass(frozen=True)
class BlockDevice:
    device_name: str
    size_gib: Optional[int]  # None: the AMI snapshot's size


def block_devices(settings: GpuNodeSettings) -> list[BlockDevice]:
    """The volumes to override, all encrypted gp3.

    AL2023: one root volume /dev/xvda of ``rootVolumeGib``. Bottlerocket: /dev/xvda is the small
    OS volume (kept at the AMI's size) and /dev/xvdb the data volume that holds images and pod
    storage, so the configured size goes there."""
    if is_bottlerocket(settings):
        return [BlockDevice("/dev/xvda", None), BlockDevice("/dev/xvdb", settings.root_volume_gib)]
    return [BlockDevice("/dev/xvda", settings.root_volume_gib)]


HUGEPAGE_MIB = 2


def hugepages_count(settings: GpuNodeSettings) -> int:
    """Number of 2 MiB hugepages: ``hugepagesGib`` * 512."""
    return settings.hugepages_gib * 1024 // HUGEPAGE_MIB


_BOUNDARY = "==RLINF-EKS=="


def al2023_user_data(settings: GpuNodeSettings) -> str:
    """MIME multipart user data for AL2023 managed nodes; EKS merges its own NodeConfig
    (cluster endpoint, CA, DNS) into it, so only our additions appear here.

    - NodeConfig ``instance.localStorage.strategy: RAID0`` stripes the instance-store NVMe disks
      for kubelet and containerd when ``localNvmeRaid0``.
    - A shell part reserves the 2 MiB hugepages libfabric uses. cloud-init runs it before the
      kubelet starts (nodeadm-run.service is ordered After=cloud-final.service), so the kubelet
      advertises ``hugepages-2Mi`` from its first status.
    """
    parts: list[tuple[str, str]] = []
    if settings.nvme_raid0:
        node_config = {
            "apiVersion": "node.eks.aws/v1alpha1",
            "kind": "NodeConfig",
            "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}},
        }
        parts.append(("application/node.eks.aws", "---\n" + json.dumps(node_config, indent=2) + "\n"))
    pages = hugepages_count(settings)
    if pages:
        script = (
            "#!/bin/bash\n"
            "set -euo pipefail\n"
            f"echo 'vm.nr_hugepages = {pages}' > /etc/sysctl.d/90-hugepages.conf\n"
            "sysctl -p /etc/sysctl.d/90-hugepages.conf\n"
        )
        parts.append(('text/x-shellscript; charset="us-ascii"', script))
    if not parts:
        return ""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{_BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{_BOUNDARY}", f"Content-Type: {content_type}", "", body]
    lines += [f"--{_BOUNDARY}--", ""]
    return "\n".join(lines)


def bottlerocket_user_data(settings: GpuNodeSettings) -> str:
    """Bottlerocket settings TOML; EKS adds the cluster settings. Sysctls apply at boot, before
    the kubelet starts, so ``hugepages-2Mi`` is advertised."""
    pages = hugepages_count(settings)
    if not pages:
        return ""
    return f'[settings.kernel.sysctl]\n"vm.nr_hugepages" = "{pages}"\n'


def user_data(settings: GpuNodeSettings) -> str:
    """The launch template's user data (plain text; base64-encoded by the component)."""
    if is_bottlerocket(settings):
        return bottlerocket_user_data(settings)
    return al2023_user_data(settings)


# IMDSv2 only (no token-less IMDSv1). Hop limit 2, the EKS managed node group default: a pod
# outside the host network namespace is one hop further away, and with limit 1 the token
# response never reaches it, so AWS SDKs and aws-ofi-nccl in the trainer that read the region or
# instance type from IMDS would fail.
IMDS_HOP_LIMIT = 2


def scale_from_zero_tags(settings: GpuNodeSettings) -> dict[str, str]:
    """Node group tags that tell the Cluster Autoscaler what a node of this group offers while
    the group is at zero.

    For a managed node group the autoscaler (>= 1.28, kubernetes/autoscaler #5596) reads
    ``node-template/resources/*`` tags of the *node group* through eks:DescribeNodegroup, and
    takes labels and taints straight from the node group's own labels and taints, so no
    ``node-template/label|taint`` tags are needed. EKS itself puts the discovery tags
    ``k8s.io/cluster-autoscaler/enabled`` and ``k8s.io/cluster-autoscaler/<cluster>`` on the
    node group's Auto Scaling group."""
    instance = settings.instance
    prefix = "k8s.io/cluster-autoscaler/node-template/resources/"
    tags = {prefix + GPU_RESOURCE: str(instance.gpus)}
    if settings.efa:
        tags[prefix + EFA_RESOURCE] = str(catalog.efa_device_count(instance))
    if settings.hugepages_gib:
        tags[prefix + HUGEPAGES_2MI_RESOURCE] = f"{settings.hugepages_gib}Gi"
    return tags


# --- the component ------------------------------------------------------------------------------


def efa_security_group(name: str, *, subnet_id: pulumi.Input[str], tags: Mapping[str, str], parent: pulumi.Resource) -> aws.ec2.SecurityGroup:
    """The EFA security group ``<name>-efa`` in the subnet's VPC, with its self rules (the node
    group's launch template and Karpenter's EC2NodeClass put it on every interface)."""
    child = pulumi.ResourceOptions(parent=parent)
    vpc_id = aws.ec2.get_subnet_output(id=subnet_id, opts=pulumi.InvokeOutputOptions(parent=parent)).vpc_id
    group = aws.ec2.SecurityGroup(
        f"{name}-efa",
        vpc_id=vpc_id,
        description="EFA: all traffic between the GPU nodes",
        tags={**tags, "Name": f"{name}-efa"},
        opts=child,
    )
    # EFA needs all traffic allowed from AND to the group itself; without the self rules the
    # OS-bypass traffic is silently dropped and NCCL falls back to TCP sockets (AWS EFA guide).
    for rule, direction, way in (
        (aws.vpc.SecurityGroupIngressRule, "ingress", "from"),
        (aws.vpc.SecurityGroupEgressRule, "egress", "to"),
    ):
        rule(
            f"{name}-efa-{direction}-self",
            security_group_id=group.id,
            ip_protocol="-1",
            referenced_security_group_id=group.id,
            description=f"EFA: all traffic {way} the EFA group",
            opts=child,
        )
    return group


# the worker policies every EKS node needs, and Session Manager for a shell on a GPU node
_NODE_POLICIES = (*WORKER_NODE_POLICIES, SSM_POLICY)


class EfaGpuNodeGroup(pulumi.ComponentResource):
    """The EFA GPU node group. See the module docstring for what it creates.

    Args:
        settings: ``GpuNodeSettings`` (or a mapping with its camelCase keys).
        cluster_name: the EKS cluster.
        cluster_security_group_id: the cluster security group; every interface carries it.
        subnet_id: the one private subnet (in the GPU AZ) of every node.
        autoscaled: the Cluster Autoscaler owns the desired size (Pulumi then ignores drift on it)
            and the scale-from-zero tags are set. Defaults to False.
        tags: AWS tags of every resource.

    Outputs: ``node_group_name``, ``placement_group_name`` (None without one),
    ``efa_security_group_id`` (None without EFA), ``launch_template_id``, and the plain
    ``labels`` and ``taints`` of the nodes.
    """

    node_group_name: pulumi.Output[str]
    placement_group_name: pulumi.Output[Optional[str]]
    efa_security_group_id: pulumi.Output[Optional[str]]
    launch_template_id: pulumi.Output[str]
    labels: dict[str, str]
    taints: list[dict[str, str]]

    def __init__(
        self,
        name: str,
        *,
        settings: GpuNodeSettings | Mapping[str, Any],
        cluster_name: pulumi.Input[str],
        cluster_security_group_id: pulumi.Input[str],
        subnet_id: pulumi.Input[str],
        autoscaled: bool = False,
        tags: Optional[Mapping[str, str]] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:EfaGpuNodeGroup", name, None, opts)
        if not isinstance(settings, GpuNodeSettings):
            settings = GpuNodeSettings.model_validate(settings)
        tags = dict(tags or {})
        child = pulumi.ResourceOptions(parent=self)
        self.labels = node_labels(settings, autoscaled=autoscaled)
        self.taints = node_taints()

        node_role = eks_node_role(f"{name}-node-role", attachment_prefix=name, policies=_NODE_POLICIES, parent=self, tags=tags)
        role, role_policies = node_role.role, node_role.attachments

        security_groups: list[pulumi.Input[str]] = [cluster_security_group_id]
        self.efa_security_group_id = pulumi.Output.from_input(None)
        if settings.efa:
            efa_sg = efa_security_group(name, subnet_id=subnet_id, tags=tags, parent=self)
            self.efa_security_group_id = efa_sg.id
            security_groups.append(efa_sg.id)

        mode = placement_mode(settings)
        self.placement_group_name = pulumi.Output.from_input(None)
        if mode == "create":
            group = aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", tags=tags, opts=child)
            self.placement_group_name = group.name
        elif mode == "existing":
            self.placement_group_name = pulumi.Output.from_input(settings.placement_group.name)

        template = self._launch_template(name, settings, security_groups, mode, tags, child)
        self.launch_template_id = template.id

        capacity = capacity_options(settings)
        sizes = scaling_sizes(settings)
        scheduled = capacity_block_start(settings)
        node_group = aws.eks.NodeGroup(
            f"{name}-nodes",
            cluster_name=cluster_name,
            node_role_arn=role.arn,
            # One subnet, one AZ: EFA and the placement group only work within an AZ.
            subnet_ids=[subnet_id],
            ami_type=settings.ami_type,
            capacity_type=capacity.node_group_capacity_type,
            # The instance type lives in the launch template only: Capacity Blocks require it
            # there, and a managed node group rejects it in both places.
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=sizes.min_size, desired_size=sizes.desired_size, max_size=sizes.max_size
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            # EKS replaces (or reboots) a node the monitoring agent marks unhealthy: GPU XID errors,
            # lost GPUs or network interfaces; the training Job then fails and restarts elsewhere
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True) if settings.auto_repair else None,
            labels=self.labels,
            taints=[aws.eks.NodeGroupTaintArgs(key=GPU_TAINT.key, value=GPU_TAINT.value, effect=GPU_TAINT.eks_effect)],
            tags={**tags, **(scale_from_zero_tags(settings) if autoscaled else {})},
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes join the cluster only once the role carries the worker policies.
                depends_on=role_policies,
                # The autoscaler (or the Capacity Block's scheduled action) moves the desired
                # size; without this every `pulumi up` would reset it.
                ignore_changes=["scalingConfig.desiredSize"] if autoscaled or scheduled else None,
            ),
        )
        if scheduled is not None:
            aws.autoscaling.Schedule(
                f"{name}-capacity-block-start",
                # EKS creates the group's Auto Scaling group; the action goes on it
                autoscaling_group_name=node_group.resources.apply(lambda rs: rs[0].autoscaling_groups[0].name),
                scheduled_action_name=scheduled.action_name,
                start_time=scheduled.start_time,
                min_size=scheduled.min_size,
                desired_capacity=scheduled.desired_capacity,
                max_size=scheduled.max_size,
                opts=child,
            )
        self.node_group_name = node_group.node_group_name
        self.register_outputs(
            {
                "nodeGroupName": self.node_group_name,
                "placementGroupName": self.placement_group_name,
                "efaSecurityGroupId": self.efa_security_group_id,
                "launchTemplateId": self.launch_template_id,
                "labels": self.labels,
                "taints": self.taints,
            }
        )

    def _launch_template(
        self,
        name: str,
        settings: GpuNodeSettings,
        security_groups: list[pulumi.Input[str]],
        mode: PlacementMode,
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> aws.ec2.LaunchTemplate:
        interfaces = network_interfaces(settings)
        capacity = capacity_options(settings)
        placement = None
        if mode != "none":
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=self.placement_group_name)
        text = user_data(settings)
        return aws.ec2.LaunchTemplate(
            f"{name}-template",
            instance_type=settings.instance_type,
            update_default_version=True,
            # No subnet in any interface: the node group places instances in its subnet.
            network_interfaces=[
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=nic.network_card_index,
                    device_index=nic.device_index,
                    interface_type=nic.interface_type,
                    security_groups=security_groups,
                    delete_on_termination="true",
                )
                for nic in interfaces
            ]
            or None,
            # Without interfaces in the template, its security groups go on the default interface.
            vpc_security_group_ids=None if interfaces else security_groups,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=device.device_name,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=device.size_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
                for device in block_devices(settings)
            ],
            placement=placement,
            instance_market_options=(
                aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type=capacity.market_type)
                if capacity.market_type
                else None
            ),
            capacity_reservation_specification=(
                aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                    capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                        capacity_reservation_id=capacity.reservation_id
                    )
                )
                if capacity.reservation_id
                else None
            ),
            user_data=base64.b64encode(text.encode()).decode() if text else None,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in ("instance", "volume", "network-interface")
            ]
            if tags
            else None,
            tags=tags,
            opts=child,
        )
