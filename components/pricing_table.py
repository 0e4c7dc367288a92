"""The figures of the price table (``pricing``): which source says what, when, and the
On-Demand prices it gives per instance type and region. Linux, shared tenancy, USD per
instance-hour. Only figures are here; :mod:`rlinf_eks.pricing` turns them into rows.

Sources (as the ``source`` column of a row names them):

- ``karpenter-2026-02-09``: aws/karpenter-provider-aws
  ``pkg/providers/pricing/zz_generated.pricing_aws.go`` ("generated at 2026-02-09T13:43:35Z for
  us-east-1"), Karpenter's snapshot of the AWS Price List API. It lists us-east-1 only (so do all
  its versions up to 2026-07-20, commit 6fc13b5236fd, whose GPU and m6i figures are the same).
- ``karpenter-2026-07-20``: the same file at commit 6fc13b5236fd04fd16ff3f9dc7490d0813994099
  ("generated at 2026-07-20T13:44:30Z for us-east-1"), for the types the catalog took in later
  (p5.4xlarge, p6-b300.48xlarge, the g6e and g7e sizes).
- ``karpenter-us-gov-2026-07-20``: the same repository's ``zz_generated.pricing_aws_us_gov.go`` at
  commit 6fc13b5236fd04fd16ff3f9dc7490d0813994099 ("generated at 2026-07-20T13:44:38Z"), the AWS
  Price List API's GovCloud (US) regions.
- ``vantage-2026-01-21``: instances.vantage.sh (built from the AWS Price List API), as transcribed
  per region by tsaol/aws-gpu ``data/<family>_instances.js`` at commit
  7412fd256c5eda04a70a17742a68e8e44824b2cb ("Auto-generated from instances.vantage.sh data, Last
  updated: 2026-01-21"). After the June 2025 P4/P5 cut: its us-east-1 figures equal Karpenter's of
  2026-02-09, its us-gov-west-1 figures Karpenter's GovCloud list of 2026-07-20, and its
  p5en.48xlarge figures for us-east-2, us-west-1, us-west-2 and eu-north-1 the ``dstack offer``
  output of 2026-08-06 (dstackai/dstack PR #4110). A type it gives no price for in a region is
  taken as not sold On-Demand there; it missed p6-b200.48xlarge in GovCloud, which Karpenter's
  GovCloud list has, so GovCloud rows come from that list instead.
- ``skypilot-catalog-001367d``: skypilot-org/skypilot-catalog ``catalogs/v7/aws/vms.csv`` at
  commit 001367d22a0033fac286a8c71aeac7109e431bcb (the ``Price`` column). The file carries no
  date; its p4d.24xlarge at 32.7726 USD in us-east-1 is the price before the June 2025 cut, so
  it predates that cut and is used for the m6i system node types only (general purpose, not
  touched by the cut; its us-east-1 m6i figures equal Karpenter's of 2026-02-09).
"""

from __future__ import annotations

from typing import Mapping

KARPENTER = "karpenter-2026-02-09"
KARPENTER_JULY = "karpenter-2026-07-20"
KARPENTER_GOV = "karpenter-us-gov-2026-07-20"
VANTAGE = "vantage-2026-01-21"
SKYPILOT = "skypilot-catalog-001367d"

SOURCES: Mapping[str, str] = {
    KARPENTER: "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go, generated 2026-02-09T13:43:35Z "
    "(AWS Price List API, us-east-1)",
    KARPENTER_JULY: "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go @6fc13b5236fd, generated "
    "2026-07-20T13:44:30Z (AWS Price List API, us-east-1)",
    KARPENTER_GOV: "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws_us_gov.go @6fc13b5236fd, "
    "generated 2026-07-20T13:44:38Z (AWS Price List API, GovCloud)",
    VANTAGE: "instances.vantage.sh (AWS Price List API) as of 2026-01-21, via tsaol/aws-gpu data/*_instances.js @7412fd256c5e",
    SKYPILOT: "skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @001367d22a00 (undated; before the June 2025 P4/P5 price cut)",
}

SOURCE_DATES: Mapping[str, str] = {
    KARPENTER: "2026-02-09",
    KARPENTER_JULY: "2026-07-20",
    KARPENTER_GOV: "2026-07-20",
    VANTAGE: "2026-01-21",
    SKYPILOT: "before 2025-06",
}

SOURCE_NAMES: Mapping[str, str] = {
    KARPENTER: "Karpenter price list (2026-02-09)",
    KARPENTER_JULY: "Karpenter price list (2026-07-20)",
    KARPENTER_GOV: "Karpenter GovCloud list (2026-07-20)",
    VANTAGE: "instances.vantage.sh (2026-01-21)",
    SKYPILOT: "SkyPilot catalog (before 2025-06)",
}
"""What a short line calls each source."""

# The catalog's GPU types, in the catalog's order (tests check it is the catalog's list).
GPU_TYPES: tuple[str, ...] = (
    "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
    "g6e.48xlarge", "g5.48xlarge", "g6.48xlarge", "g5.8xlarge", "g6e.8xlarge", "g5.2xlarge",
    "p5.4xlarge", "p6-b300.48xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
)

KARPENTER_US_EAST_1: Mapping[str, float] = {
    "p4d.24xlarge": 21.957642, "p4de.24xlarge": 27.447050, "p5.48xlarge": 55.04, "p5en.48xlarge": 63.296,
    "p6-b200.48xlarge": 113.9328, "g6e.48xlarge": 30.13118, "g5.48xlarge": 16.288, "g6.48xlarge": 13.3504,
    "g5.8xlarge": 2.448, "g6e.8xlarge": 4.52856, "g5.2xlarge": 1.212,
    "m6i.large": 0.096, "m6i.xlarge": 0.192, "m6i.2xlarge": 0.384,
}
"""us-east-1 (KARPENTER). p5e.48xlarge is not in it: Capacity Blocks only."""

KARPENTER_JULY_US_EAST_1: Mapping[str, float] = {
    "p5.4xlarge": 6.88, "p6-b300.48xlarge": 142.416,
    "g6e.2xlarge": 2.24208, "g6e.4xlarge": 3.00424, "g6e.12xlarge": 10.49264, "g6e.16xlarge": 7.57719, "g6e.24xlarge": 15.06559,
    "g7e.2xlarge": 3.36312, "g7e.4xlarge": 3.99816, "g7e.8xlarge": 5.26824, "g7e.12xlarge": 8.28608, "g7e.24xlarge": 16.57216,
    "g7e.48xlarge": 33.14432,
}
"""us-east-1 (KARPENTER_JULY) of the types the catalog took in after KARPENTER's list was read."""

KARPENTER_GOV_PRICES: Mapping[str, Mapping[str, float]] = {
    "us-gov-west-1": {
        "p4d.24xlarge": 26.3511, "p5.48xlarge": 66.048, "p5.4xlarge": 8.256, "p5en.48xlarge": 75.9552, "p6-b200.48xlarge": 136.71936,
        "g6.48xlarge": 16.82734, "m6i.large": 0.121, "m6i.xlarge": 0.242, "m6i.2xlarge": 0.484,
    },
    "us-gov-east-1": {
        "p6-b200.48xlarge": 136.71936, "p6-b300.48xlarge": 170.9, "g6.48xlarge": 16.82734,
        "m6i.large": 0.121, "m6i.xlarge": 0.242, "m6i.2xlarge": 0.484,
    },
}
"""GovCloud (KARPENTER_GOV): every catalog GPU type it lists, and the m6i system node types."""

# fmt: off
VANTAGE_GPU_PRICES: Mapping[str, Mapping[str, float]] = {
    "p4d.24xlarge": {
        "ap-northeast-1": 30.09784, "ap-northeast-2": 30.41028, "ap-south-1": 26.3444,
        "ap-southeast-1": 26.34917, "ap-southeast-2": 28.54493, "ca-central-1": 25.25174,
        "eu-central-1": 27.43298, "eu-north-1": 23.71569, "eu-west-1": 23.71569, "eu-west-2": 28.54493,
        "sa-east-1": 35.5569, "us-east-2": 21.95764, "us-west-2": 21.95764,
    },
    "p4de.24xlarge": {
        "ap-northeast-1": 37.6223, "ap-southeast-1": 32.93646, "eu-central-1": 34.29122,
        "il-central-1": 35.57346, "us-west-2": 27.44705,
    },
    "p5.48xlarge": {
        "ap-northeast-1": 68.8, "ap-northeast-2": 75.9552, "ap-south-1": 66.048, "ap-southeast-2": 71.552,
        "ap-southeast-3": 75.9552, "ca-central-1": 63.296, "eu-north-1": 58.8928, "eu-west-2": 71.552,
        "sa-east-1": 92.4672, "us-east-2": 55.04, "us-west-1": 68.8, "us-west-2": 55.04,
    },
    "p5e.48xlarge": {},
    "p5en.48xlarge": {
        "ap-northeast-1": 79.12, "ap-northeast-2": 87.34848, "ap-south-1": 75.9552,
        "ap-southeast-3": 87.34848, "eu-north-1": 67.72672, "eu-south-2": 68.35968, "me-central-1": 75.9552,
        "us-east-2": 63.296, "us-west-1": 79.12, "us-west-2": 63.296,
    },
    "p6-b200.48xlarge": {
        "us-east-2": 113.9328, "us-west-2": 113.9328,
    },
    "g6e.48xlarge": {
        "ap-northeast-1": 43.69912, "ap-northeast-2": 37.04468, "eu-central-1": 37.67612,
        "eu-north-1": 31.96075, "eu-south-2": 31.75027, "us-east-2": 30.13118, "us-west-2": 30.13118,
    },
    "g5.48xlarge": {
        "ap-east-1": 25.0764, "ap-northeast-1": 23.62246, "ap-northeast-2": 20.02809, "ap-south-1": 19.55855,
        "ap-southeast-2": 21.17764, "ap-southeast-3": 22.79672, "ca-central-1": 18.08518,
        "eu-central-1": 20.3681, "eu-north-1": 17.27564, "eu-west-1": 18.18233, "eu-west-2": 20.67572,
        "il-central-1": 19.09145, "me-central-1": 19.97951, "sa-east-1": 27.68636, "us-east-2": 16.288,
        "us-west-2": 16.288,
    },
    "g6.48xlarge": {
        "ap-northeast-1": 19.36206, "ap-northeast-2": 16.41595, "ap-south-1": 16.0311, "ap-south-2": 16.0311,
        "ap-southeast-2": 17.35817, "ap-southeast-5": 16.81739, "ca-central-1": 14.82346,
        "eu-central-1": 16.69464, "eu-central-2": 17.99849, "eu-north-1": 14.15992, "eu-south-2": 14.06702,
        "eu-west-2": 16.94678, "eu-west-3": 16.94678, "me-central-1": 16.39339, "sa-east-1": 22.69303,
        "us-east-2": 13.3504, "us-west-2": 13.3504,
    },
    "g5.8xlarge": {
        "ap-east-1": 3.76885, "ap-northeast-1": 3.55033, "ap-northeast-2": 3.01012, "ap-south-1": 2.93955,
        "ap-southeast-2": 3.18289, "ap-southeast-3": 3.42623, "ca-central-1": 2.71811,
        "eu-central-1": 3.06122, "eu-north-1": 2.59644, "eu-west-1": 2.73271, "eu-west-2": 3.10745,
        "il-central-1": 2.86934, "me-central-1": 3.00282, "sa-east-1": 4.16111, "us-east-2": 2.448,
        "us-west-2": 2.448,
    },
    "g6e.8xlarge": {
        "ap-northeast-1": 6.56775, "ap-northeast-2": 5.56762, "eu-central-1": 5.66252, "eu-north-1": 4.80353,
        "eu-south-2": 4.7719, "us-east-2": 4.52856, "us-west-2": 4.52856,
    },
    "g5.2xlarge": {
        "ap-east-1": 1.86595, "ap-northeast-1": 1.75776, "ap-northeast-2": 1.4903, "ap-south-1": 1.45536,
        "ap-southeast-2": 1.57584, "ap-southeast-3": 1.69632, "ca-central-1": 1.34573, "eu-central-1": 1.5156,
        "eu-north-1": 1.28549, "eu-west-1": 1.35296, "eu-west-2": 1.53849, "il-central-1": 1.42061,
        "me-central-1": 1.48669, "sa-east-1": 2.06016, "us-east-2": 1.212, "us-west-2": 1.212,
    },
}
"""Per GPU type, the regions instances.vantage.sh prices it in, us-east-1 and GovCloud left out
(KARPENTER, KARPENTER_GOV); Local Zones (us-east-1-atl-1, us-west-2-lax-1) are not regions. The
types the catalog took in later are not in its transcription: their other regions are not priced."""

VANTAGE_REGIONS: tuple[str, ...] = tuple(sorted({r for prices in VANTAGE_GPU_PRICES.values() for r in prices}))
"""The commercial regions where instances.vantage.sh prices at least one catalog GPU type."""

# m6i.large, m6i.xlarge, m6i.2xlarge per region (SKYPILOT)
SKYPILOT_M6I: Mapping[str, tuple[float, float, float]] = {
    "af-south-1": (0.127, 0.254, 0.508),
    "ap-east-1": (0.132, 0.264, 0.528),
    "ap-northeast-1": (0.124, 0.248, 0.496),
    "ap-northeast-2": (0.118, 0.236, 0.472),
    "ap-northeast-3": (0.124, 0.248, 0.496),
    "ap-south-1": (0.101, 0.202, 0.404),
    "ap-southeast-1": (0.12, 0.24, 0.48),
    "ap-southeast-2": (0.12, 0.24, 0.48),
    "ap-southeast-3": (0.12, 0.24, 0.48),
    "ca-central-1": (0.107, 0.214, 0.428),
    "eu-central-1": (0.115, 0.23, 0.46),
    "eu-north-1": (0.102, 0.204, 0.408),
    "eu-south-1": (0.112, 0.224, 0.448),
    "eu-west-1": (0.107, 0.214, 0.428),
    "eu-west-2": (0.111, 0.222, 0.444),
    "eu-west-3": (0.112, 0.224, 0.448),
    "me-central-1": (0.1177, 0.2354, 0.4708),
    "me-south-1": (0.132, 0.264, 0.528),
    "us-east-2": (0.096, 0.192, 0.384),
    "us-west-1": (0.112, 0.224, 0.448),
    "us-west-2": (0.096, 0.192, 0.384),
}
# fmt: on
M6I_SIZES: tuple[str, ...] = ("m6i.large", "m6i.xlarge", "m6i.2xlarge")
