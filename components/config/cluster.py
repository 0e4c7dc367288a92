"""The cluster section: a new EKS cluster (default) or an existing one given by name, and the
system node group of a new one."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .. import pins
from .aws_rules import cluster_name_problem
from .errors import rule_error
from .types import Bool, Ec2InstanceType, Int, SettingsModel


class SystemNodeSettings(SettingsModel):
    """The small on-demand node group for operators and device plugins."""

    instance_type: Ec2InstanceType = "m6i.xlarge"
    """Defaults to m6i.xlarge."""
    count: Int = Field(2, ge=1, le=10)
    """Defaults to 2."""


class ClusterSettings(SettingsModel):
    """The EKS cluster: a new one (default) or an existing one given by name."""

    existing: Bool = False
    """Attach to an existing cluster (by ``name``) instead of creating one. Its kubeconfig comes from
    the secret key ``rlinf-eks:kubeconfig``. Defaults to false."""
    name: Optional[str] = None
    """Cluster name. Defaults to rlinf-<stack> for a new cluster; required when existing."""
    kubernetes_version: str = pins.version("kubernetes")
    """Kubernetes minor version. Defaults to 1.35 (components/pins.yaml), in EKS standard support until
    2027-03-27 (1.34's ended 2026-12-02, after which a cluster bills the extended-support rate, six
    times the standard). Not 1.36, though EKS offers it since 2026-06-02: the real API server tier
    checks this project's objects on v1.35.3, the Cluster Autoscaler image (autoscaler.imageTag, whose
    minor must be the cluster's) is pinned at v1.35, and the pinned VPC CNI and CloudWatch add-on
    versions are not known here to be offered for 1.36. A 1.36 cluster plans, is priced and, with
    Karpenter, boots the default amiAlias, which ships 1.36."""
    endpoint_public_access_cidrs: list[str] = Field(default_factory=list)
    """CIDRs allowed to reach the public API endpoint. Empty (the default): private endpoint only.
    Not with deployFromVpc (private endpoint only)."""
    allow_public_endpoint_from_anywhere: Bool = False
    """Explicit opt-in needed for 0.0.0.0/0 in endpointPublicAccessCidrs. Defaults to false."""
    deploy_from_vpc: Bool = False
    """Acknowledges that ``pulumi up`` runs inside the cluster's VPC (VPN, bastion, CodeBuild in the
    VPC), so a private-only endpoint is reachable. A new cluster needs this or
    endpointPublicAccessCidrs, not both. Defaults to false."""
    admin_role_arns: list[str] = Field(default_factory=list)
    """IAM roles given cluster-admin access entries."""
    log_types: list[Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]] = Field(
        default_factory=lambda: ["api", "audit", "authenticator"]
    )
    """Control-plane log types. Defaults to api, audit, authenticator."""
    system_nodes: SystemNodeSettings = Field(default_factory=SystemNodeSettings)
    """The on-demand node group of the operators, device plugins and the watchdog (a new cluster only)."""
    vpc_cni_version: str = pins.version("vpc-cni")
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
        problems = [f"[{index}]={cidr!r}: {problem}" for index, cidr in enumerate(value) if (problem := public_cidr_problem(cidr))]
        if problems:
            raise PydanticCustomError("rules", "{text}", {"text": "\n".join(problems)})
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
        wide = [cidr for cidr in self.endpoint_public_access_cidrs if _prefix(cidr) < _WIDE_PREFIX]
        if wide and not self.allow_public_endpoint_from_anywhere:
            raise rule_error(
                "endpointPublicAccessCidrs",
                self.endpoint_public_access_cidrs,
                f"{', '.join(wide)} opens the API endpoint to the internet (a block wider than /{_WIDE_PREFIX}); "
                "set allowPublicEndpointFromAnywhere: true to mean it",
            )
        if self.deploy_from_vpc and self.endpoint_public_access_cidrs:
            raise rule_error(
                "deployFromVpc",
                True,
                f"means a private endpoint only, but cluster.endpointPublicAccessCidrs={self.endpoint_public_access_cidrs!r} "
                "opens a public one: keep one of them (remove endpointPublicAccessCidrs for a private endpoint, or "
                "deployFromVpc for a public endpoint to those CIDRs)",
            )
        if self.existing and not self.name:
            raise rule_error("name", self.name, "an existing cluster must be named")
        if self.name is not None:
            problem = cluster_name_problem(self.name, creates_node_group=not self.existing)
            if problem:
                raise rule_error("name", self.name, problem)
        return self


# Ranges no address on the internet has: the public endpoint sees the public address a request
# leaves from (after NAT), so a CIDR inside one of them never matches (RFC 1918, shared address
# space RFC 6598, loopback, link-local, "this network", multicast, reserved).
_NEVER_PUBLIC = tuple(
    ipaddress.ip_network(block)
    for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                  "0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4")
)  # fmt: skip
def _prefix(cidr: str) -> int:
    return ipaddress.ip_network(cidr, strict=False).prefixlen


# A public endpoint open to this many addresses or more is open to the internet (0.0.0.0/1 and
# 128.0.0.0/1 together are 0.0.0.0/0): it needs allowPublicEndpointFromAnywhere like 0.0.0.0/0.
_WIDE_PREFIX = 8


def public_cidr_problem(cidr: str) -> Optional[str]:
    """Why ``cidr`` cannot work as a public-endpoint source (EKS publicAccessCidrs), or None.

    EKS reads IPv4 CIDR blocks here: its API reference (VpcConfigRequest.publicAccessCidrs) says
    IPv6 blocks cannot be added to an IPv4 cluster, and this project's clusters are IPv4."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return "not a CIDR block such as 203.0.113.0/24 (your address as /32: curl -s https://checkip.amazonaws.com)"
    if network.version == 6:
        return "an IPv6 block: EKS takes IPv4 public-access CIDRs for an IPv4 cluster (EKS API, VpcConfigRequest.publicAccessCidrs)"
    if "/" not in cidr:
        return f"an address, not a CIDR block: write {network}"
    if str(network) != cidr:
        return f"has host bits set: the block is {network}, or {cidr.split('/')[0]}/32 for that one address"
    never = next((block for block in _NEVER_PUBLIC if network.subnet_of(block)), None)
    if never is not None:
        return (
            f"inside {never}, which no internet address has: the public endpoint sees the public address your traffic "
            "leaves from (after NAT), so this never matches; from inside the VPC or over VPN/Direct Connect use "
            "cluster.deployFromVpc: true (the private endpoint)"
        )
    return None
