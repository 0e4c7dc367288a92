"""The VPC of the cluster: private subnets in at least two AZs (the EKS control plane needs two),
public subnets that only hold the NAT gateways, or an existing VPC given in config.

A new VPC has an S3 gateway endpoint on its private route tables: image layers from ECR (stored
in S3), model downloads from S3 and the checkpoint sync reach S3 without crossing the NAT gateway,
whose data processing AWS charges per GB; the gateway endpoint itself is free. With
``network.interfaceEndpoints`` it also has interface endpoints (billed per AZ-hour) for ECR's API
and registry, STS and CloudWatch Logs in its private subnets.

The GPU nodes live in exactly one private subnet, the one in the GPU AZ (EFA traffic does not
cross AZs; field notes section 1).
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws

from .config import NetworkSettings


@dataclass(frozen=True)
class SubnetPlan:
    """The two subnets of one AZ: a large private one for nodes and pods, a small public one for NAT."""

    az: str
    private_cidr: str
    public_cidr: str


def default_availability_zones(gpu_az: str) -> list[str]:
    """The GPU AZ plus the AZ with the next letter (us-east-1a -> us-east-1b).

    No invoke: the AZ names are needed as plain values to name and count subnets. Regions whose
    next letter is not offered to an account (ap-northeast-1b, for example) set
    ``network.availabilityZones`` instead.
    """
    letter = gpu_az[-1]
    partner = chr(ord(letter) + 1) if letter < "z" else "a"
    return [gpu_az, gpu_az[:-1] + partner]


def subnet_plan(vpc_cidr: str, azs: list[str]) -> list[SubnetPlan]:
    """Carve the VPC CIDR: one large private block per AZ and one spare block of the same size
    split into the small public subnets.

    The VPC CNI gives every pod a VPC IP (and each EFA-enabled card takes one), so the private
    subnets get almost all of the space; the public subnets only carry NAT gateways.
    """
    vpc = ipaddress.ip_network(vpc_cidr)
    # one block per AZ plus one spare for the public subnets
    private_bits = math.ceil(math.log2(len(azs) + 1))
    blocks = list(vpc.subnets(prefixlen_diff=private_bits))
    spare = blocks[-1]
    # /24 public subnets are plenty for NAT gateways; smaller only when the spare block is too small
    public_prefix = max(spare.prefixlen + math.ceil(math.log2(len(azs))), 24)
    publics = list(spare.subnets(new_prefix=public_prefix))
    return [SubnetPlan(az, str(blocks[i]), str(publics[i])) for i, az in enumerate(azs)]


def region_of_zone(zone: str) -> str:
    """The region of an AZ or Local Zone name: us-east-1a -> us-east-1, us-west-2-lax-1a -> us-west-2."""
    match = re.match(r"[a-z]{2}(?:-[a-z]+)+-\d+", zone)
    if match is None:
        raise ValueError(f"{zone!r} is not an Availability Zone name such as us-east-1a")
    return match.group(0)


def s3_service_name(region: str) -> str:
    """The S3 endpoint service of a region (com.amazonaws.<region>.s3), gateway or interface."""
    return f"com.amazonaws.{region}.s3"


INTERFACE_SERVICES = ("ecr.api", "ecr.dkr", "sts", "logs")
"""The interface endpoints of ``network.interfaceEndpoints``: ECR's API (the image's authorization and
manifests) and registry (dkr), STS (the training pods' IRSA credentials: AssumeRoleWithWebIdentity;
EKS Pod Identity's agent calls the EKS Auth API instead, not added here) and CloudWatch Logs (the
observability agents)."""


def private_subnet_tags(cluster_name: str) -> dict[str, str]:
    """Tags the AWS Load Balancer Controller looks for to place internal load balancers."""
    return {"kubernetes.io/role/internal-elb": "1", f"kubernetes.io/cluster/{cluster_name}": "shared"}


def public_subnet_tags(cluster_name: str) -> dict[str, str]:
    """Tags the AWS Load Balancer Controller looks for to place internet-facing load balancers."""
    return {"kubernetes.io/role/elb": "1", f"kubernetes.io/cluster/{cluster_name}": "shared"}


class Network(pulumi.ComponentResource):
    """A new VPC (``network.vpcId`` unset) or the existing one from config.

    Args:
        settings: ``NetworkSettings`` (the stack's ``network``), or a mapping with its camelCase keys.
        gpu_az: the one AZ of the GPU nodes (``StackSettings.gpu_az``). A new VPC has a private
            subnet there (listed in ``network.availabilityZones`` or not) and its single NAT
            gateway; an existing VPC's ``gpuSubnetId`` must lie in it.
        cluster_name: the EKS cluster the subnets are tagged for (load balancer discovery) and
            the prefix of the resources' Name tags.
        tags: AWS tags of every resource.
        region: the stack's region (``aws:region``), whose S3 service the gateway endpoint of a new
            VPC names. Defaults to the region of ``gpu_az``.

    Outputs: ``vpc_id``, ``vpc_cidr``, ``private_subnet_ids`` (at least two AZs) and
    ``gpu_subnet_id`` (the one private subnet in the GPU AZ).
    """

    vpc_id: pulumi.Output[str]
    vpc_cidr: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    gpu_subnet_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        settings: NetworkSettings | Mapping[str, Any],
        gpu_az: str,
        cluster_name: str,
        tags: Mapping[str, str],
        region: Optional[str] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:Network", name, None, opts)
        if not isinstance(settings, NetworkSettings):
            settings = NetworkSettings.model_validate(settings)
        if settings.create:
            self._create(name, settings, gpu_az, region or region_of_zone(gpu_az), cluster_name, dict(tags))
        else:
            if not settings.gpu_subnet_id:
                raise ValueError(f"network.gpuSubnetId: an existing VPC needs the private subnet of the GPU nodes in {gpu_az}")
            self.vpc_id = pulumi.Output.from_input(settings.vpc_id)
            self.vpc_cidr = aws.ec2.get_vpc_output(id=settings.vpc_id, opts=pulumi.InvokeOptions(parent=self)).cidr_block
            self.private_subnet_ids = pulumi.Output.from_input(list(settings.private_subnet_ids))
            self.gpu_subnet_id = pulumi.Output.from_input(settings.gpu_subnet_id)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "vpcCidr": self.vpc_cidr,
                "privateSubnetIds": self.private_subnet_ids,
                "gpuSubnetId": self.gpu_subnet_id,
            }
        )

    def _create(self, name: str, net: NetworkSettings, gpu_az: str, region: str, cluster_name: str, tags: dict[str, str]) -> None:
        given = list(dict.fromkeys(net.availability_zones)) or default_availability_zones(gpu_az)
        # the GPU AZ first: a single NAT gateway goes there, so GPU nodes' egress never crosses AZs
        azs = [gpu_az, *(az for az in given if az != gpu_az)]
        child = pulumi.ResourceOptions(parent=self)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=net.cidr,
            # EKS requires DNS support and hostnames for nodes to register and for private endpoints
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags=_named(tags, f"{cluster_name}-vpc"),
            opts=child,
        )
        igw, public_routes = _internet_routes(name, vpc, cluster_name, tags, child)
        plans = subnet_plan(net.cidr, azs)
        nat_ids: dict[str, pulumi.Output[str]] = {}
        private_subnets: list[aws.ec2.Subnet] = []
        private_routes: list[aws.ec2.RouteTable] = []
        for plan in plans:
            public = _public_subnet(name, vpc, plan, public_routes, cluster_name, tags, child)
            if net.nat_gateways == "one-per-az" or not nat_ids:
                nat_ids[plan.az] = _nat_gateway(name, plan.az, public, igw, cluster_name, tags, child).id
            nat_id = nat_ids.get(plan.az, nat_ids[plans[0].az])
            subnet, routes = _private_subnet(name, vpc, plan, nat_id, cluster_name, tags, child)
            private_subnets.append(subnet)
            private_routes.append(routes)
        _s3_gateway_endpoint(name, vpc, region, private_routes, cluster_name, tags, child)
        if net.interface_endpoints:
            _interface_endpoints(name, vpc, net.cidr, region, private_subnets, cluster_name, tags, child)

        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        self.private_subnet_ids = pulumi.Output.all(*(subnet.id for subnet in private_subnets)).apply(list)
        self.gpu_subnet_id = private_subnets[0].id  # the GPU AZ comes first (azs above)


# --- the pieces of a new VPC, in the order Network registers them -------------------------------


def _named(tags: dict[str, str], name: str) -> dict[str, str]:
    """The tags plus the Name the EC2 console shows."""
    return {**tags, "Name": name}


def _internet_routes(
    name: str, vpc: aws.ec2.Vpc, cluster_name: str, tags: dict[str, str], child: pulumi.ResourceOptions
) -> tuple[aws.ec2.InternetGateway, aws.ec2.RouteTable]:
    """The internet gateway and the public subnets' route table, its default route through it."""
    igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=_named(tags, f"{cluster_name}-igw"), opts=child)
    public_routes = aws.ec2.RouteTable(
        f"{name}-public-rt", vpc_id=vpc.id, tags=_named(tags, f"{cluster_name}-public"), opts=child
    )
    aws.ec2.Route(
        f"{name}-public-default",
        route_table_id=public_routes.id,
        destination_cidr_block="0.0.0.0/0",
        gateway_id=igw.id,
        opts=child,
    )
    return igw, public_routes


def _public_subnet(
    name: str,
    vpc: aws.ec2.Vpc,
    plan: SubnetPlan,
    public_routes: aws.ec2.RouteTable,
    cluster_name: str,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> aws.ec2.Subnet:
    public = aws.ec2.Subnet(
        f"{name}-public-{plan.az}",
        vpc_id=vpc.id,
        cidr_block=plan.public_cidr,
        availability_zone=plan.az,
        map_public_ip_on_launch=False,
        tags=_named({**tags, **public_subnet_tags(cluster_name)}, f"{cluster_name}-public-{plan.az}"),
        opts=child,
    )
    aws.ec2.RouteTableAssociation(f"{name}-public-{plan.az}", subnet_id=public.id, route_table_id=public_routes.id, opts=child)
    return public


def _nat_gateway(
    name: str,
    az: str,
    public: aws.ec2.Subnet,
    igw: aws.ec2.InternetGateway,
    cluster_name: str,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> aws.ec2.NatGateway:
    eip = aws.ec2.Eip(f"{name}-nat-{az}", domain="vpc", tags=_named(tags, f"{cluster_name}-nat-{az}"), opts=child)
    return aws.ec2.NatGateway(
        f"{name}-nat-{az}",
        allocation_id=eip.id,
        subnet_id=public.id,
        connectivity_type="public",
        tags=_named(tags, f"{cluster_name}-nat-{az}"),
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[igw])),
    )


def _private_subnet(
    name: str,
    vpc: aws.ec2.Vpc,
    plan: SubnetPlan,
    nat_id: pulumi.Input[str],
    cluster_name: str,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> tuple[aws.ec2.Subnet, aws.ec2.RouteTable]:
    """A private subnet with its own route table, whose default route goes through ``nat_id``."""
    private = aws.ec2.Subnet(
        f"{name}-private-{plan.az}",
        vpc_id=vpc.id,
        cidr_block=plan.private_cidr,
        availability_zone=plan.az,
        tags=_named({**tags, **private_subnet_tags(cluster_name)}, f"{cluster_name}-private-{plan.az}"),
        opts=child,
    )
    private_routes = aws.ec2.RouteTable(
        f"{name}-private-rt-{plan.az}", vpc_id=vpc.id, tags=_named(tags, f"{cluster_name}-private-{plan.az}"), opts=child
    )
    aws.ec2.Route(
        f"{name}-private-default-{plan.az}",
        route_table_id=private_routes.id,
        destination_cidr_block="0.0.0.0/0",
        nat_gateway_id=nat_id,
        opts=child,
    )
    aws.ec2.RouteTableAssociation(f"{name}-private-{plan.az}", subnet_id=private.id, route_table_id=private_routes.id, opts=child)
    return private, private_routes


def _s3_gateway_endpoint(
    name: str,
    vpc: aws.ec2.Vpc,
    region: str,
    private_routes: list[aws.ec2.RouteTable],
    cluster_name: str,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> aws.ec2.VpcEndpoint:
    """S3's gateway endpoint on every private route table: S3 traffic (ECR's image layers, the
    staged model and data, checkpoint uploads) leaves by the endpoint's prefix-list route instead
    of the NAT gateway. No policy: the endpoint's default policy allows every S3 call, and the
    callers' own IAM policies still decide (VPC User Guide, "Gateway endpoints for Amazon S3")."""
    return aws.ec2.VpcEndpoint(
        f"{name}-s3",
        aws.ec2.VpcEndpointArgs(
            vpc_id=vpc.id,
            service_name=s3_service_name(region),
            vpc_endpoint_type="Gateway",
            route_table_ids=[routes.id for routes in private_routes],
            tags=_named(tags, f"{cluster_name}-s3"),
        ),
        opts=child,
    )


def _interface_endpoints(
    name: str,
    vpc: aws.ec2.Vpc,
    cidr: str,
    region: str,
    private_subnets: list[aws.ec2.Subnet],
    cluster_name: str,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> list[aws.ec2.VpcEndpoint]:
    """One interface endpoint per service of INTERFACE_SERVICES in every private subnet, with private
    DNS (the services' usual names resolve to the endpoints inside the VPC), behind a security group
    that admits HTTPS from the VPC (VPC User Guide, "Access an AWS service using an interface VPC
    endpoint": the endpoint's group must allow 443 from the clients)."""
    group = aws.ec2.SecurityGroup(
        f"{name}-endpoints",
        vpc_id=vpc.id,
        # EC2's description charset (CreateSecurityGroup): no apostrophes
        description="Interface endpoints: HTTPS from the VPC",
        tags=_named(tags, f"{cluster_name}-endpoints"),
        opts=child,
    )
    aws.vpc.SecurityGroupIngressRule(
        f"{name}-endpoints-https-from-vpc",
        security_group_id=group.id,
        ip_protocol="tcp",
        from_port=443,
        to_port=443,
        cidr_ipv4=cidr,
        description="HTTPS to the interface endpoints from the VPC",
        opts=child,
    )
    return [
        aws.ec2.VpcEndpoint(
            f"{name}-{service.replace('.', '-')}",
            aws.ec2.VpcEndpointArgs(
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[subnet.id for subnet in private_subnets],
                security_group_ids=[group.id],
                tags=_named(tags, f"{cluster_name}-{service.replace('.', '-')}"),
            ),
            opts=child,
        )
        for service in INTERFACE_SERVICES
    ]
