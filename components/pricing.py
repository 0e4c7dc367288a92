"""On-demand prices of the catalog's GPU instance types: a dated table, one row per type and region.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

KARPENTER = "karpenter-2026-02-09"
SKYPILOT = "skypilot-catalog-pre-2025-06"
DSTACK = "dstack-pr-4110-2026-08-06"

SOURCES: Mapping[str, str] = {
    KARPENTER: "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go, generated 2026-02-09T13:43:35Z (AWS Price List API, us-east-1)",
    SKYPILOT: "skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @27f67dd4e1bc (undated; before the June 2025 P4/P5 price cut)",
    DSTACK: "dstackai/dstack PR #4110, `dstack offer` output of 2026-08-06",
}

_SOURCE_DATES: Mapping[str, str] = {
    KARPENTER: "2026-02-09",
    SKYPILOT: "before 2025-06",
    DSTACK: "2026-08-06",
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
)
# fmt: on

PRICES: Mapping[tuple[str, str], PriceRow] = {(row.instance_type, row.region): row for row in _ROWS}
REGIONS: tuple[str, ...] = tuple(dict.fromkeys(row.region for row in _ROWS))


def on_demand_price(instance_type: str, region: str) -> PriceRow:
    """The price row of ``instance_type`` in ``region``; a row with ``usd_per_hour=None`` and the
    reason when the table has no price for it."""
    row = PRICES.get((instance_type, region))
    if row is not None:
        return row
    if region not in REGIONS:
        reason = f"no prices sourced for region {region}; priced regions: {', '.join(REGIONS)}"
    else:
        reason = f"{instance_type} is not in the price table"
    return PriceRow(instance_type, region, None, None, reason)
