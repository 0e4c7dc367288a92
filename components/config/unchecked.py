"""What a plan cannot judge offline: values only the account, the registry or the network can
answer. The plan prints them under "Not checked offline" and writes them to plan.json
(``unchecked``), so that a reviewer knows what `pulumi up` is the first to test.

Pure functions of the validated settings and the time of the plan; one line per value, naming its
key path, the value and what was not checked.
"""

from __future__ import annotations

from datetime import datetime

from . import ami_releases
from .aws_zones import unchecked_zone
from .eks_versions import unchecked as unchecked_version
from .stack import StackSettings


def unchecked(settings: StackSettings, now: datetime) -> list[str]:
    """The stack's values that cannot be judged offline, each with what was not checked."""
    lines: list[str] = []
    creates_cluster = settings.platform.role != "experiment" and not settings.cluster.existing
    if creates_cluster:
        version = unchecked_version(settings.cluster.kubernetes_version, now)
        if version:
            lines.append(version)
        for key, zone in [("availabilityZone", settings.gpu_az), *(
            (f"network.availabilityZones[{i}]", z) for i, z in enumerate(settings.network.availability_zones)
        )]:  # fmt: skip
            note = unchecked_zone(zone, settings.region)
            if note:
                lines.append(f"{key}={note}")
        if settings.cluster.endpoint_public_access_cidrs:
            lines.append(
                f"cluster.endpointPublicAccessCidrs={settings.cluster.endpoint_public_access_cidrs!r}: whether `pulumi up` and "
                "kubectl reach the endpoint from one of these addresses (curl -s https://checkip.amazonaws.com tells yours)"
            )
    if settings.cluster.existing:
        lines.append(
            f"cluster.name={settings.cluster.name!r}: that the cluster exists in {settings.region}, its version and its "
            "VPC, subnets and add-ons (verify level 0 checks them on the cluster)"
        )
    gpu = settings.gpu_nodes
    if settings.platform.role != "experiment":  # an experiment's nodes are its platform's
        lines.append(
            f"gpuNodes.instanceType={gpu.instance_type!r}: that {settings.gpu_az} offers it (the region is checked against the "
            "price table, rlinf_eks.offerings; zone letters map to different zones per account: aws ec2 "
            f"describe-instance-type-offerings --location-type availability-zone --filters Name=instance-type,Values="
            f"{gpu.instance_type} --region {settings.region})"
        )
    if gpu.provisioner == "karpenter" and settings.platform.role != "experiment" and gpu.karpenter.ami_alias.partition("@")[2] > ami_releases.newest():
        # releases up to the data's newest are checked (config/stack_rules.py _karpenter_ami)
        lines.append(
            f"gpuNodes.karpenter.amiAlias={gpu.karpenter.ami_alias!r}: that this AL2023 release exists and ships Kubernetes "
            f"{settings.cluster.kubernetes_version} (newer than the release data, {ami_releases.source()}; Karpenter resolves "
            f"the alias to an AMI in {settings.region} when it launches a node)"
        )
    if gpu.capacity_reservation_id:
        lines.append(
            f"gpuNodes.capacityReservationId={gpu.capacity_reservation_id!r}: that the reservation exists, is active, "
            f"is in {settings.gpu_az} and holds {gpu.instance_type} (aws ec2 describe-capacity-reservations)"
        )
    if settings.workload.enabled and settings.platform.role != "platform":
        lines.append(
            f"workload.image={settings.workload.image!r}: that the image exists, is x86-64 and the nodes may pull it "
            "(python -m rlinf_eks image-contract prints what it must hold)"
        )
    return lines
