"""Prices of what a stack bills: On-Demand prices of the catalog's GPU instance types (a dated
table, one row per type and region), and below, the hourly prices of the rest (EKS control plane,
system nodes, NAT gateways, public IPv4, FSx for Lustre, gp3 volumes, KMS keys).

Linux, shared tenancy, USD per instance-hour. Every row names its source and the date that source
carries (the sources and their figures are in :mod:`rlinf_eks.pricing_table`); a price this
project could not source is ``None`` with a one-line reason, never an estimate.

AWS cut the On-Demand prices of P4d, P4de, P5 and P5en by up to 45% in June 2025; only sources
dated after the cut are used for those types. G-family and m6i prices did not change with it.

Where the table has rows: us-east-1 (Karpenter's price list), the commercial regions where
instances.vantage.sh prices at least one catalog GPU type (:data:`REGIONS`), and GovCloud
(Karpenter's GovCloud list). In those regions a GPU type the source does not price has a row
that says it is not sold On-Demand there, per that source; :func:`priced_regions` says where a
type is priced. A region outside the table says no price was sourced for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from .config.eks_versions import SOURCE as EKS_CALENDAR_SOURCE
from .config.eks_versions import STANDARD_SUPPORT_ENDS
from .pricing_table import (
    GPU_TYPES,
    KARPENTER,
    KARPENTER_GOV,
    KARPENTER_GOV_PRICES,
    KARPENTER_JULY,
    KARPENTER_JULY_US_EAST_1,
    KARPENTER_US_EAST_1,
    M6I_SIZES,
    SKYPILOT,
    SKYPILOT_M6I,
    SOURCE_DATES,
    SOURCE_NAMES,
    SOURCES,
    VANTAGE,
    VANTAGE_GPU_PRICES,
    VANTAGE_REGIONS,
)

__all__ = ["SOURCES", "KARPENTER", "KARPENTER_GOV", "VANTAGE", "SKYPILOT", "PriceRow", "PRICES", "REGIONS",
           "SYSTEM_PRICES", "ServicePrice", "on_demand_price", "priced_regions", "priced_types_by_region", "instance_hour"]


@dataclass(frozen=True)
class PriceRow:
    """The On-Demand Linux price of one instance type in one region, or why there is none."""

    instance_type: str
    region: str
    usd_per_hour: Optional[float]
    source: Optional[str]
    """A key of SOURCES: where the price (or the word that the type is not sold) comes from."""
    reason: Optional[str] = None
    """Why ``usd_per_hour`` is None: one short line."""

    @property
    def as_of(self) -> Optional[str]:
        """The date the source carries (an ISO date, or a bound such as "before 2025-06")."""
        return SOURCE_DATES.get(self.source) if self.source else None

    @property
    def known(self) -> bool:
        return self.usd_per_hour is not None

    def to_json(self) -> dict[str, object]:
        return {
            "instanceType": self.instance_type,
            "region": self.region,
            "usdPerHour": self.usd_per_hour,
            "source": SOURCES.get(self.source) if self.source else None,
            "asOf": self.as_of,
            "reason": self.reason,
            # where else the type has a price: the detail a short reason leaves out
            "pricedIn": None if self.known else list(priced_regions(self.instance_type)),
        }


CAPACITY_BLOCKS_ONLY = "p5e.48xlarge"
"""Sold as EC2 Capacity Blocks for ML only: no source lists an On-Demand price in any region."""


def _gpu_row(instance_type: str, region: str, price: Optional[float], source: str) -> PriceRow:
    if source == VANTAGE and instance_type not in VANTAGE_GPU_PRICES:
        return PriceRow(instance_type, region, None, source, f"{instance_type}: not in {SOURCE_NAMES[source]}, no price for {region}")
    if price is not None:
        return PriceRow(instance_type, region, price, source)
    if instance_type == CAPACITY_BLOCKS_ONLY:
        return PriceRow(instance_type, region, None, source, f"{instance_type}: sold as Capacity Blocks only, not On-Demand")
    return PriceRow(instance_type, region, None, source, f"{instance_type}: not sold On-Demand in {region} per {SOURCE_NAMES[source]}")


def _rows() -> tuple[PriceRow, ...]:
    rows = [
        _gpu_row(t, "us-east-1", KARPENTER_JULY_US_EAST_1[t], KARPENTER_JULY) if t in KARPENTER_JULY_US_EAST_1
        else _gpu_row(t, "us-east-1", KARPENTER_US_EAST_1.get(t), KARPENTER)
        for t in GPU_TYPES
    ]  # fmt: skip
    for region in VANTAGE_REGIONS:
        rows += [_gpu_row(t, region, VANTAGE_GPU_PRICES.get(t, {}).get(region), VANTAGE) for t in GPU_TYPES]
    for region, prices in KARPENTER_GOV_PRICES.items():
        rows += [_gpu_row(t, region, prices.get(t), KARPENTER_GOV) for t in GPU_TYPES]
    return tuple(rows)


_ROWS = _rows()
PRICES: Mapping[tuple[str, str], PriceRow] = {(row.instance_type, row.region): row for row in _ROWS}
REGIONS: tuple[str, ...] = tuple(dict.fromkeys(row.region for row in _ROWS))
"""The regions the GPU table has rows for (a row may say the type is not sold there)."""


def priced_regions(instance_type: str) -> tuple[str, ...]:
    """The regions where ``instance_type`` has a sourced price."""
    return tuple(row.region for row in _ROWS if row.instance_type == instance_type and row.known)


def priced_types_by_region() -> dict[str, list[str]]:
    """Per region of the table, the GPU types it prices, in the catalog's order: the table the
    README shows (regions pricing none are left out)."""
    table: dict[str, list[str]] = {}
    for row in _ROWS:
        if row.known:
            table.setdefault(row.region, []).append(row.instance_type)
    return table


def on_demand_price(instance_type: str, region: str) -> PriceRow:
    """The price row of ``instance_type`` in ``region``, or a row with ``usd_per_hour=None`` and a
    one-line reason: not sold there (per the region's source), Capacity Blocks only, a region
    outside the table, or a type outside it. ``to_json()["pricedIn"]`` lists where it is priced."""
    row = PRICES.get((instance_type, region))
    if row is not None:
        return row
    if instance_type not in GPU_TYPES:
        return PriceRow(instance_type, region, None, None, f"{instance_type}: not in the price table")
    return PriceRow(instance_type, region, None, None, f"{instance_type}: no price sourced for region {region}")


# --- everything else a stack bills --------------------------------------------------------------
#
# Hourly prices of the non-GPU resources a stack creates, USD. A month is 730 hours (the AWS
# Pricing Calculator's convention), so a per-month price is divided by 730.

HOURS_PER_MONTH = 730

AWS_EKS_PRICING = "aws-eks-pricing-2024-04"
AWS_EKS_CALENDAR = "aws-eks-calendar-2026-02"
AWS_VPC_PRICING = "aws-vpc-pricing-2026-02"
AWS_FSX_PRICING = "aws-fsx-lustre-pricing"
AWS_KMS_PRICING = "aws-kms-pricing"
AWS_EBS_PRICING = "aws-ebs-pricing"
AWS_CODEBUILD_PRICING = "aws-codebuild-pricing"
AWS_ECR_PRICING = "aws-ecr-pricing"
AWS_PRIVATELINK_PRICING = "aws-privatelink-pricing"

SERVICE_SOURCES: Mapping[str, str] = {
    AWS_EKS_PRICING: "AWS Containers blog 'Amazon EKS extended support for Kubernetes versions pricing' (2024): "
    "$0.10 per cluster-hour in standard support, $0.60 in extended support, from the April 2024 billing cycle; "
    "the same in every commercial region (aws.amazon.com/eks/pricing)",
    AWS_EKS_CALENDAR: EKS_CALENDAR_SOURCE,
    AWS_VPC_PRICING: "aws.amazon.com/vpc/pricing: NAT gateway $0.045 per gateway-hour (plus $0.045 per GB processed) in "
    "us-east-1 and us-west-2; public IPv4 address $0.005 per address-hour in every region since 2024-02-01",
    AWS_FSX_PRICING: "aws.amazon.com/fsx/lustre/pricing, US East (N. Virginia): Persistent-2 SSD per GB-month by "
    "throughput tier: 125 MB/s/TiB $0.145, 250 $0.210, 500 $0.340, 1000 $0.600",
    AWS_KMS_PRICING: "aws.amazon.com/kms/pricing: $1 per customer managed key per month, prorated hourly, every region",
    AWS_EBS_PRICING: "aws.amazon.com/ebs/pricing: gp3 $0.08 per GB-month (3000 IOPS and 125 MB/s included) in "
    "us-east-1 and us-west-2",
    AWS_CODEBUILD_PRICING: "aws.amazon.com/codebuild/pricing, on-demand Linux, as quoted on 2026-12-05 by kindatechnical.com "
    "'Understanding CodeBuild Pricing' and c3x.dev 'aws_codebuild_project cost estimation': general1.large $0.02 per "
    "build-minute (xlarge and 2xlarge: not found in any source read here)",
    AWS_ECR_PRICING: "aws.amazon.com/ecr/pricing: private repository storage $0.10 per GB-month (the price page's figure, "
    "not re-read on 2026-12-05)",
    AWS_PRIVATELINK_PRICING: "aws.amazon.com/privatelink/pricing (read 2026-12-06): an interface endpoint is billed per hour in "
    "each Availability Zone it is provisioned in, $0.01 per endpoint-AZ-hour in us-east-1 and us-west-2 (the rate as "
    "quoted by awsnegotiations.com 'AWS PrivateLink Cost Analysis', May 2026; the AWS page's table did not load), plus "
    "$0.01 per GB processed for the first PB a month; gateway endpoints (S3, DynamoDB) are free",
}

# End of standard support per EKS minor version (AWS_EKS_CALENDAR): the calendar lives with the
# settings (rlinf_eks.config.eks_versions), which refuse a version EKS no longer creates.
EKS_STANDARD_SUPPORT_ENDS: Mapping[str, str] = STANDARD_SUPPORT_ENDS
EKS_STANDARD_PER_HOUR = 0.10
EKS_EXTENDED_PER_HOUR = 0.60

_NAT_PER_HOUR: Mapping[str, float] = {"us-east-1": 0.045, "us-west-2": 0.045}
_NAT_PER_GB: Mapping[str, float] = {"us-east-1": 0.045, "us-west-2": 0.045}
_INTERFACE_ENDPOINT_PER_AZ_HOUR: Mapping[str, float] = {"us-east-1": 0.01, "us-west-2": 0.01}
PUBLIC_IPV4_PER_HOUR = 0.005
KMS_KEY_PER_MONTH = 1.0
_FSX_PERSISTENT2_SSD_PER_GB_MONTH: Mapping[str, Mapping[int, float]] = {
    "us-east-1": {125: 0.145, 250: 0.210, 500: 0.340, 1000: 0.600},
}
_GP3_PER_GB_MONTH: Mapping[str, float] = {"us-east-1": 0.08, "us-west-2": 0.08}

# System node instance types (m6i, general purpose: untouched by the June 2025 P4/P5 cut):
# us-east-1 from Karpenter, GovCloud from Karpenter's GovCloud list, the other regions from the
# SkyPilot catalog (pricing_table.SKYPILOT).
_SYSTEM_ROWS: tuple[PriceRow, ...] = (
    tuple(PriceRow(t, "us-east-1", KARPENTER_US_EAST_1[t], KARPENTER) for t in M6I_SIZES)
    + tuple(PriceRow(t, r, prices[t], KARPENTER_GOV) for r, prices in KARPENTER_GOV_PRICES.items() for t in M6I_SIZES)
    + tuple(PriceRow(t, r, price, SKYPILOT) for r, sizes in SKYPILOT_M6I.items() for t, price in zip(M6I_SIZES, sizes))
)
SYSTEM_PRICES: Mapping[tuple[str, str], PriceRow] = {(row.instance_type, row.region): row for row in _SYSTEM_ROWS}


@dataclass(frozen=True)
class ServicePrice:
    """An hourly price per unit (a cluster, a gateway, a GB of storage), or why there is none."""

    usd_per_unit_hour: Optional[float]
    source: Optional[str]
    """A key of SERVICE_SOURCES (or SOURCES for instance prices); None when nothing was sourced."""
    reason: Optional[str] = None
    detail: Optional[str] = None
    """What the price depends on (support tier, throughput tier), for the report."""

    def to_json(self) -> dict[str, object]:
        return {
            "usdPerUnitHour": self.usd_per_unit_hour,
            "source": (SERVICE_SOURCES.get(self.source) or SOURCES.get(self.source)) if self.source else None,
            "reason": self.reason,
            "detail": self.detail,
        }


def _unpriced(what: str, region: str, regions: Mapping[str, object]) -> ServicePrice:
    """One short line; a long list of priced regions would make it long, so past two it is a count."""
    where = ", ".join(regions) if len(regions) <= 2 else f"{len(regions)} regions"
    return ServicePrice(None, None, f"no {what} price sourced for {region} (priced: {where or 'none'})")


def eks_control_plane(version: str, on: str) -> ServicePrice:
    """Per cluster-hour of an EKS cluster of Kubernetes ``version`` on the ISO date ``on``."""
    ends = EKS_STANDARD_SUPPORT_ENDS.get(version)
    if ends is None:
        return ServicePrice(None, None, f"Kubernetes {version} is not in the EKS release calendar this table carries "
                            f"({', '.join(EKS_STANDARD_SUPPORT_ENDS)})")
    if on > ends:
        return ServicePrice(EKS_EXTENDED_PER_HOUR, AWS_EKS_PRICING, None,
                            f"extended support: standard support of {version} ended {ends}")
    return ServicePrice(EKS_STANDARD_PER_HOUR, AWS_EKS_PRICING, None, f"standard support until {ends}")


def nat_gateway(region: str) -> ServicePrice:
    price = _NAT_PER_HOUR.get(region)
    return ServicePrice(price, AWS_VPC_PRICING, None, "hourly charge only") if price is not None else _unpriced("NAT gateway", region, _NAT_PER_HOUR)


def nat_gateway_per_gb(region: str) -> ServicePrice:
    """Per GB the NAT gateway processes (the usage price beside its hourly one)."""
    price = _NAT_PER_GB.get(region)
    return ServicePrice(price, AWS_VPC_PRICING, None, "per GB processed") if price is not None else _unpriced("NAT data", region, _NAT_PER_GB)


def interface_endpoint(region: str) -> ServicePrice:
    """Per interface endpoint per Availability Zone per hour (AWS PrivateLink)."""
    price = _INTERFACE_ENDPOINT_PER_AZ_HOUR.get(region)
    if price is None:
        return _unpriced("interface endpoint", region, _INTERFACE_ENDPOINT_PER_AZ_HOUR)
    return ServicePrice(price, AWS_PRIVATELINK_PRICING, None, "per endpoint per AZ, plus $0.01/GB processed")


def public_ipv4(region: str) -> ServicePrice:
    return ServicePrice(PUBLIC_IPV4_PER_HOUR, AWS_VPC_PRICING)


def kms_key(region: str) -> ServicePrice:
    return ServicePrice(round(KMS_KEY_PER_MONTH / HOURS_PER_MONTH, 6), AWS_KMS_PRICING)


def fsx_lustre_per_gb(region: str, deployment_type: str, storage_type: str, throughput: int) -> ServicePrice:
    """Per GB-hour of FSx for Lustre storage."""
    if (deployment_type, storage_type) != ("PERSISTENT_2", "SSD"):
        return ServicePrice(None, None, f"only PERSISTENT_2 SSD is priced, not {deployment_type} {storage_type}")
    tiers = _FSX_PERSISTENT2_SSD_PER_GB_MONTH.get(region)
    if tiers is None:
        return _unpriced("FSx for Lustre", region, _FSX_PERSISTENT2_SSD_PER_GB_MONTH)
    if throughput not in tiers:
        return ServicePrice(None, None, f"no price for {throughput} MB/s/TiB; priced tiers: {', '.join(map(str, tiers))}")
    return ServicePrice(round(tiers[throughput] / HOURS_PER_MONTH, 8), AWS_FSX_PRICING, None,
                        f"${tiers[throughput]}/GB-month at {throughput} MB/s/TiB")


def gp3_per_gb(region: str) -> ServicePrice:
    price = _GP3_PER_GB_MONTH.get(region)
    if price is None:
        return _unpriced("EBS gp3", region, _GP3_PER_GB_MONTH)
    return ServicePrice(round(price / HOURS_PER_MONTH, 8), AWS_EBS_PRICING, None, f"${price}/GB-month")


def instance_hour(instance_type: str, region: str) -> ServicePrice:
    """Per instance-hour On-Demand, of a GPU type (the catalog's table) or a system node type."""
    row = SYSTEM_PRICES.get((instance_type, region))
    if row is None and instance_type not in GPU_TYPES:
        priced = sorted({r for t, r in SYSTEM_PRICES if t == instance_type})
        return _unpriced(f"On-Demand {instance_type}", region, dict.fromkeys(priced))
    row = row or on_demand_price(instance_type, region)
    return ServicePrice(row.usd_per_hour, row.source, row.reason, f"as of {row.as_of}" if row.known and row.as_of else None)


_CODEBUILD_PER_MINUTE: Mapping[str, float] = {"BUILD_GENERAL1_LARGE": 0.02}
ECR_PER_GB_MONTH = 0.10


@dataclass(frozen=True)
class UsagePrice:
    """A price per unit of use (a build-minute, a GB-month), or why there is none."""

    usd: Optional[float]
    unit: str
    source: Optional[str]
    reason: Optional[str] = None

    def to_json(self) -> dict[str, object]:
        return {"usd": self.usd, "unit": self.unit, "source": SERVICE_SOURCES.get(self.source) if self.source else None,
                "reason": self.reason}  # fmt: skip


def codebuild_per_minute(compute_type: str, region: str) -> UsagePrice:
    """Per build-minute of an on-demand Linux CodeBuild compute type (us-east-1 and us-west-2 in
    the sources; other regions not priced)."""
    if region not in ("us-east-1", "us-west-2"):
        return UsagePrice(None, "build-minute", None, f"no CodeBuild price sourced for {region}; priced regions: us-east-1, us-west-2")
    price = _CODEBUILD_PER_MINUTE.get(compute_type)
    if price is None:
        return UsagePrice(None, "build-minute", None, f"no price of {compute_type} sourced (priced: {', '.join(_CODEBUILD_PER_MINUTE)})")
    return UsagePrice(price, "build-minute", AWS_CODEBUILD_PRICING)


def ecr_storage_per_gb_month(region: str) -> UsagePrice:
    """Per GB-month of ECR private repository storage (the price page gives one figure)."""
    return UsagePrice(ECR_PER_GB_MONTH, "GB-month", AWS_ECR_PRICING)


# Billed by use, not by the hour: the report lists them, it cannot price them.
USAGE_BASED = (
    "S3: checkpoint storage ($/GB-month), requests and versions kept",
    "NAT gateway data processing ($0.045/GB in us-east-1), e.g. image and model pulls",
    "data transfer out of AWS and across AZs",
    "CloudWatch Logs ingestion and storage of the control-plane logs",
    "FSx for Lustre backups (incremental, $/GB-month)",
    "ECR storage of the training image",
)
