"""Prices of what a stack bills: On-Demand prices of the catalog's GPU instance types (a dated
table, one row per type and region), and below, the hourly prices of the rest (EKS control plane,
system nodes, NAT gateways, public IPv4, FSx for Lustre, gp3 volumes, KMS keys).

Linux, shared tenancy, USD per instance-hour. Every row names its source and the date that source
carries; a price this project could not source is ``None`` with the reason, never an estimate.

AWS cut the On-Demand prices of P4d, P4de, P5 and P5en by up to 45% in June 2025; only sources
dated after the cut are used for those types. G-family prices did not change with that cut.

Sources (as the ``source`` column names them):

- ``karpenter-2026-02-09``: aws/karpenter-provider-aws
  ``pkg/providers/pricing/zz_generated.pricing_aws.go`` ("generated at 2026-02-09T13:43:35Z for
  us-east-1"), Karpenter's snapshot of the AWS Price List API. us-east-1 only.
- ``skypilot-catalog-pre-2025-06``: skypilot-org/skypilot-catalog ``catalogs/v7/aws/vms.csv``,
  commit 27f67dd4e1bc0d35fa0ec075180ad54b230882c4 (the ``Price`` column, per region). The file
  carries no date; it still lists p5.48xlarge at 98.32 USD, so it predates the June 2025 cut and
  is used for G-family rows only (where it agrees with the 2026-02-09 us-east-1 figures).
- ``dstack-pr-4110-2026-08-06``: dstackai/dstack pull request #4110 ("Add AWS p5en.48xlarge"),
  ``dstack offer`` output pasted on 2026-08-06 listing p5en.48xlarge On-Demand per region.
- ``karpenter-us-gov-2026-07-20``: aws/karpenter-provider-aws
  ``pkg/providers/pricing/zz_generated.pricing_aws_us_gov.go`` at commit
  6fc13b5236fd04fd16ff3f9dc7490d0813994099 ("generated at 2026-07-20T13:44:38Z"), the AWS Price
  List API's GovCloud (US) regions: p4d, p5 and p5en are listed in us-gov-west-1 only.

Other regions where EC2 sells P4d, P5 or P5en (us-east-2, us-west-2, eu-*, ap-*, ...) have no row:
no price dated after the June 2025 cut could be sourced for them, so the plan says "unknown" and
why, and :func:`priced_regions` says where each type is priced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

KARPENTER = "karpenter-2026-02-09"
SKYPILOT = "skypilot-catalog-pre-2025-06"
DSTACK = "dstack-pr-4110-2026-08-06"
KARPENTER_GOV = "karpenter-us-gov-2026-07-20"

SOURCES: Mapping[str, str] = {
    KARPENTER: "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go, generated 2026-02-09T13:43:35Z (AWS Price List API, us-east-1)",
    SKYPILOT: "skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @27f67dd4e1bc (undated; before the June 2025 P4/P5 price cut)",
    DSTACK: "dstackai/dstack PR #4110, `dstack offer` output of 2026-08-06",
    KARPENTER_GOV: "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws_us_gov.go @6fc13b5236fd, "
    "generated 2026-07-20T13:44:38Z (AWS Price List API, GovCloud)",
}

_SOURCE_DATES: Mapping[str, str] = {
    KARPENTER: "2026-02-09",
    SKYPILOT: "before 2025-06",
    DSTACK: "2026-08-06",
    KARPENTER_GOV: "2026-07-20",
}


@dataclass(frozen=True)
class PriceRow:
    """The On-Demand Linux price of one instance type in one region, or why there is none."""

    instance_type: str
    region: str
    usd_per_hour: Optional[float]
    source: Optional[str]
    """A key of SOURCES; None when nothing could be sourced."""
    reason: Optional[str] = None
    """Why ``usd_per_hour`` is None."""

    @property
    def as_of(self) -> Optional[str]:
        """The date the source carries (an ISO date, or a bound such as "before 2025-06")."""
        return _SOURCE_DATES.get(self.source) if self.source else None

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
        }


_NO_CUT_PRICE_WEST = (
    "no us-west-2 price dated after the June 2025 P4/P5 cut could be sourced "
    "(the only us-west-2 figure found predates the cut)"
)
_CAPACITY_BLOCKS_ONLY = (
    "not sold On-Demand: the 2026-02-09 us-east-1 price list has no p5e.48xlarge, and the catalog "
    "lists it with no On-Demand price in any region (EC2 Capacity Blocks for ML only)"
)
_NOT_IN_SNAPSHOT = "no us-west-2 price could be sourced (absent from the regional snapshot used)"
_NOT_IN_GOV_LIST = "not in the us-gov-west-1 price list of 2026-07-20 (not sold On-Demand there at that date)"

# fmt: off
_ROWS: tuple[PriceRow, ...] = (
    # us-east-1
    PriceRow("p4d.24xlarge",     "us-east-1", 21.957642, KARPENTER),
    PriceRow("p4de.24xlarge",    "us-east-1", 27.447050, KARPENTER),
    PriceRow("p5.48xlarge",      "us-east-1", 55.04,     KARPENTER),
    PriceRow("p5e.48xlarge",     "us-east-1", None,      None, _CAPACITY_BLOCKS_ONLY),
    PriceRow("p5en.48xlarge",    "us-east-1", 63.296,    KARPENTER),
    PriceRow("p6-b200.48xlarge", "us-east-1", 113.9328,  KARPENTER),
    PriceRow("g6e.48xlarge",     "us-east-1", 30.13118,  KARPENTER),
    PriceRow("g5.48xlarge",      "us-east-1", 16.288,    KARPENTER),
    PriceRow("g6.48xlarge",      "us-east-1", 13.3504,   KARPENTER),
    PriceRow("g5.8xlarge",       "us-east-1", 2.448,     KARPENTER),
    PriceRow("g6e.8xlarge",      "us-east-1", 4.52856,   KARPENTER),
    PriceRow("g5.2xlarge",       "us-east-1", 1.212,     KARPENTER),
    # us-west-2
    PriceRow("p4d.24xlarge",     "us-west-2", None,      None, _NO_CUT_PRICE_WEST),
    PriceRow("p4de.24xlarge",    "us-west-2", None,      None, _NO_CUT_PRICE_WEST),
    PriceRow("p5.48xlarge",      "us-west-2", None,      None, _NO_CUT_PRICE_WEST),
    PriceRow("p5e.48xlarge",     "us-west-2", None,      None, _CAPACITY_BLOCKS_ONLY),
    PriceRow("p5en.48xlarge",    "us-west-2", 63.296,    DSTACK),
    PriceRow("p6-b200.48xlarge", "us-west-2", None,      None, _NOT_IN_SNAPSHOT),
    PriceRow("g6e.48xlarge",     "us-west-2", 30.13118,  SKYPILOT),
    PriceRow("g5.48xlarge",      "us-west-2", 16.288,    SKYPILOT),
    PriceRow("g6.48xlarge",      "us-west-2", 13.3504,   SKYPILOT),
    PriceRow("g5.8xlarge",       "us-west-2", 2.448,     SKYPILOT),
    PriceRow("g6e.8xlarge",      "us-west-2", 4.52856,   SKYPILOT),
    PriceRow("g5.2xlarge",       "us-west-2", 1.212,     SKYPILOT),
    # us-gov-west-1 (AWS GovCloud (US-West))
    PriceRow("p4d.24xlarge",     "us-gov-west-1", 26.3511,   KARPENTER_GOV),
    PriceRow("p4de.24xlarge",    "us-gov-west-1", None,      None, _NOT_IN_GOV_LIST),
    PriceRow("p5.48xlarge",      "us-gov-west-1", 66.048,    KARPENTER_GOV),
    PriceRow("p5e.48xlarge",     "us-gov-west-1", None,      None, _CAPACITY_BLOCKS_ONLY),
    PriceRow("p5en.48xlarge",    "us-gov-west-1", 75.9552,   KARPENTER_GOV),
    PriceRow("p6-b200.48xlarge", "us-gov-west-1", 136.71936, KARPENTER_GOV),
    PriceRow("g6e.48xlarge",     "us-gov-west-1", None,      None, _NOT_IN_GOV_LIST),
    PriceRow("g5.48xlarge",      "us-gov-west-1", None,      None, _NOT_IN_GOV_LIST),
    PriceRow("g6.48xlarge",      "us-gov-west-1", 16.82734,  KARPENTER_GOV),
    PriceRow("g5.8xlarge",       "us-gov-west-1", None,      None, _NOT_IN_GOV_LIST),
    PriceRow("g6e.8xlarge",      "us-gov-west-1", None,      None, _NOT_IN_GOV_LIST),
    PriceRow("g5.2xlarge",       "us-gov-west-1", None,      None, _NOT_IN_GOV_LIST),
)
# fmt: on

PRICES: Mapping[tuple[str, str], PriceRow] = {(row.instance_type, row.region): row for row in _ROWS}
REGIONS: tuple[str, ...] = tuple(dict.fromkeys(row.region for row in _ROWS))


def priced_regions(instance_type: str) -> tuple[str, ...]:
    """The regions where ``instance_type`` has a sourced price (a region's row may say unknown)."""
    return tuple(row.region for row in _ROWS if row.instance_type == instance_type and row.known)


def _where_priced(instance_type: str) -> str:
    regions = priced_regions(instance_type)
    return f"{instance_type} is priced in {', '.join(regions)} only" if regions else f"{instance_type} is priced in no region"


def on_demand_price(instance_type: str, region: str) -> PriceRow:
    """The price row of ``instance_type`` in ``region``; a row with ``usd_per_hour=None`` and the
    reason (with the regions where the type is priced) when the table has no price for it."""
    row = PRICES.get((instance_type, region))
    if row is not None and row.known:
        return row
    if row is not None:
        reason = f"{row.reason}; {_where_priced(instance_type)}"
    elif not any(r.instance_type == instance_type for r in _ROWS):
        reason = f"{instance_type} is not in the price table"
    else:
        reason = f"no prices sourced for region {region}; {_where_priced(instance_type)}"
    return PriceRow(instance_type, region, None, None, reason)


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

SERVICE_SOURCES: Mapping[str, str] = {
    AWS_EKS_PRICING: "AWS Containers blog 'Amazon EKS extended support for Kubernetes versions pricing' (2024): "
    "$0.10 per cluster-hour in standard support, $0.60 in extended support, from the April 2024 billing cycle; "
    "the same in every commercial region (aws.amazon.com/eks/pricing)",
    AWS_EKS_CALENDAR: "Amazon EKS Kubernetes release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, "
    "as mirrored by endoflife.date/amazon-eks in February 2026): 14 months of standard support, then 12 of extended",
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
}

# End of standard support per EKS minor version (AWS_EKS_CALENDAR). After it a cluster is billed
# at the extended-support rate until upgraded.
EKS_STANDARD_SUPPORT_ENDS: Mapping[str, str] = {
    "1.28": "2024-11-26",
    "1.29": "2025-03-23",
    "1.30": "2025-07-23",
    "1.31": "2025-11-26",
    "1.32": "2026-03-23",
    "1.33": "2026-07-29",
    "1.34": "2026-12-02",
    "1.35": "2027-03-27",
}
EKS_STANDARD_PER_HOUR = 0.10
EKS_EXTENDED_PER_HOUR = 0.60

_NAT_PER_HOUR: Mapping[str, float] = {"us-east-1": 0.045, "us-west-2": 0.045}
PUBLIC_IPV4_PER_HOUR = 0.005
KMS_KEY_PER_MONTH = 1.0
_FSX_PERSISTENT2_SSD_PER_GB_MONTH: Mapping[str, Mapping[int, float]] = {
    "us-east-1": {125: 0.145, 250: 0.210, 500: 0.340, 1000: 0.600},
}
_GP3_PER_GB_MONTH: Mapping[str, float] = {"us-east-1": 0.08, "us-west-2": 0.08}

# System node instance types (standard families, untouched by the June 2025 P4/P5 cut), from the
# us-east-1 snapshot only: no regional figure for them was checked.
_SYSTEM_ROWS: tuple[PriceRow, ...] = (
    PriceRow("m6i.large", "us-east-1", 0.096, KARPENTER),
    PriceRow("m6i.xlarge", "us-east-1", 0.192, KARPENTER),
    PriceRow("m6i.2xlarge", "us-east-1", 0.384, KARPENTER),
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
            "source": SERVICE_SOURCES.get(self.source) or SOURCES.get(self.source) if self.source else None,
            "reason": self.reason,
            "detail": self.detail,
        }


def _unpriced(what: str, region: str, regions: Mapping[str, object]) -> ServicePrice:
    return ServicePrice(None, None, f"no {what} price sourced for {region}; priced regions: {', '.join(regions) or 'none'}")


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
    if row is None and instance_type not in {t for t, _ in PRICES}:
        priced = ", ".join(f"{t} in {r}" for t, r in SYSTEM_PRICES)
        return ServicePrice(None, None, f"no On-Demand price of {instance_type} sourced for {region}; priced: {priced}")
    row = row or on_demand_price(instance_type, region)
    return ServicePrice(row.usd_per_hour, row.source, row.reason, f"as of {row.as_of}" if row.as_of else None)


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
