"""The price table says exactly what is priced (issue 18): per instance type and region, and an
unknown price names where the type is priced; the efficiency table of docs/observability.md is the price table's."""

from __future__ import annotations

import re

from rlinf_eks import pricing
from tests.harness import ROOT


def test_an_unpriced_type_in_a_table_region_says_where_it_is_priced():
    row = pricing.on_demand_price("p5.48xlarge", "us-west-2")
    assert row.usd_per_hour is None
    assert "June 2025" in row.reason and row.reason.endswith("p5.48xlarge is priced in us-east-1, us-gov-west-1 only")


def test_a_region_without_prices_says_where_the_type_is_priced_not_a_list_of_regions():
    row = pricing.on_demand_price("p4d.24xlarge", "eu-west-1")
    assert row.reason == "no prices sourced for region eu-west-1; p4d.24xlarge is priced in us-east-1, us-gov-west-1 only"
    assert pricing.on_demand_price("p5e.48xlarge", "eu-west-1").reason.endswith("p5e.48xlarge is priced in no region")


def test_p4d_p5_and_p5en_are_priced_in_govcloud_west_from_a_dated_source():
    for instance_type, price in (("p4d.24xlarge", 26.3511), ("p5.48xlarge", 66.048), ("p5en.48xlarge", 75.9552)):
        row = pricing.on_demand_price(instance_type, "us-gov-west-1")
        assert row.usd_per_hour == price and row.as_of == "2026-07-20"
        assert "zz_generated.pricing_aws_us_gov.go" in row.to_json()["source"]


def test_the_efficiency_guide_lists_exactly_the_priced_types_per_region():
    text = (ROOT / "docs" / "observability.md").read_text()
    rows = dict(re.findall(r"^\| (us-[a-z0-9-]+) \| ([^|(]+?)(?: \(.*\))? \|$", text, flags=re.M))
    priced = {region: [r.instance_type for r in pricing.PRICES.values() if r.region == region and r.known] for region in pricing.REGIONS}
    assert {region: types.split(", ") for region, types in rows.items()} == priced
