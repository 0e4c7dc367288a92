"""The network section: a new VPC (default) or an existing one given by id and subnets."""

from __future__ import annotations

import ipaddress
import math
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .errors import rule_error
from .types import Bool, SettingsModel, SubnetId, VpcId


class NetworkSettings(SettingsModel):
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
    interface_endpoints: Bool = False
    """A new VPC: interface endpoints (private DNS) for ECR's API and registry (ecr.api, ecr.dkr),
    STS and CloudWatch Logs in every private subnet, so image manifests, the training pods' IRSA
    credentials and the logs stay off the NAT gateway (the image's layers already come through the S3 gateway
    endpoint). Each is billed per AZ per hour, plus per GB processed (the plan prices them).
    Defaults to false."""

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
            if self.interface_endpoints:
                raise rule_error("interfaceEndpoints", True, "only a new VPC gets them (network.vpcId is set): add them to your VPC yourself")
            return self
        azs = max(len(set(self.availability_zones)), 2)
        private = ipaddress.ip_network(self.cidr).prefixlen + math.ceil(math.log2(azs + 1))
        public = max(private + math.ceil(math.log2(azs)), 24)
        if public > 28:
            raise rule_error("cidr", self.cidr, f"cannot hold a private and a public subnet in each of {azs} AZs (subnets are /28 or larger)")
        if len(self.availability_zones) != len(set(self.availability_zones)):
            raise rule_error("availabilityZones", self.availability_zones, "lists an AZ twice")
        return self

    @property
    def create(self) -> bool:
        return self.vpc_id is None
