"""Prices where the hardware is sold (issue 34): the GPU types are priced in every region whose
source sells them, from sources dated after AWS's June 2025 P4/P5 cut; a type a region's source
does not sell says so in one short line; a region outside the table says no price was sourced;
and an unknown price is one short line in the plan, its detail in efficiency.json."""

from __future__ import annotations

import re

import pytest

from rlinf_eks import catalog, pricing, pricing_table
from rlinf_eks.offline.outputs.efficiency import efficiency_of, efficiency_report, render_efficiency, unknown_summary
from tests.harness import ROOT, plan_stack

SHORT = 120  # characters of one terminal line the plan prints about a price


# --- the table --------------------------------------------------------------------------------


def test_the_table_prices_exactly_the_catalog_gpu_types():
    assert pricing_table.GPU_TYPES == tuple(catalog.CATALOG)
    assert set(pricing_table.VANTAGE_GPU_PRICES) <= set(catalog.CATALOG)
    # a type the later Karpenter list prices, and the rows of the regions no source prices it in
    assert pricing.on_demand_price("p6-b300.48xlarge", "us-east-1").usd_per_hour == 142.416
    assert pricing.on_demand_price("g6e.12xlarge", "us-west-2").reason == (
        "g6e.12xlarge: not in instances.vantage.sh (2026-01-21), no price for us-west-2"
    )


@pytest.mark.parametrize(
    "instance_type, region, price",
    [
        ("p5.48xlarge", "eu-north-1", 58.8928),
        ("p5.48xlarge", "ap-northeast-1", 68.8),
        ("p5.48xlarge", "eu-west-2", 71.552),
        ("p5.48xlarge", "us-west-2", 55.04),
        ("p5en.48xlarge", "eu-north-1", 67.72672),
        ("p4d.24xlarge", "eu-west-1", 23.71569),
        ("p6-b200.48xlarge", "us-east-2", 113.9328),
        ("g6e.48xlarge", "eu-central-1", 37.67612),
    ],
)
def test_a_type_is_priced_where_it_is_sold_from_a_dated_source(instance_type, region, price):
    row = pricing.on_demand_price(instance_type, region)
    assert row.usd_per_hour == price and row.source == pricing.VANTAGE and row.as_of == "2026-01-21"
    assert "instances.vantage.sh" in row.to_json()["source"] and row.to_json()["pricedIn"] is None


def test_p4d_p5_and_p5en_are_priced_in_govcloud_west_from_a_dated_source():
    for instance_type, price in (("p4d.24xlarge", 26.3511), ("p5.48xlarge", 66.048), ("p5en.48xlarge", 75.9552)):
        row = pricing.on_demand_price(instance_type, "us-gov-west-1")
        assert row.usd_per_hour == price and row.as_of == "2026-07-20"
        assert "zz_generated.pricing_aws_us_gov.go" in row.to_json()["source"]


def test_a_type_not_sold_in_a_table_region_says_so_in_one_short_line():
    row = pricing.on_demand_price("p5en.48xlarge", "eu-west-1")
    assert row.usd_per_hour is None and row.source == pricing.VANTAGE
    assert row.reason == "p5en.48xlarge: not sold On-Demand in eu-west-1 per instances.vantage.sh (2026-01-21)"
    # where it is sold is in the JSON, not in the line
    assert {"us-east-1", "eu-north-1", "us-gov-west-1"} <= set(row.to_json()["pricedIn"])
    gov = pricing.on_demand_price("p4de.24xlarge", "us-gov-east-1")
    assert gov.reason == "p4de.24xlarge: not sold On-Demand in us-gov-east-1 per Karpenter GovCloud list (2026-07-20)"


def test_p5e_is_capacity_blocks_only_in_every_region():
    for region in pricing.REGIONS:
        row = pricing.PRICES[("p5e.48xlarge", region)]
        assert not row.known and row.reason == "p5e.48xlarge: sold as Capacity Blocks only, not On-Demand"
    assert pricing.priced_regions("p5e.48xlarge") == ()


def test_a_region_outside_the_table_and_a_type_outside_it_say_so_briefly():
    assert pricing.on_demand_price("p5.48xlarge", "af-south-1").reason == "p5.48xlarge: no price sourced for region af-south-1"
    assert pricing.on_demand_price("g6.12xlarge", "us-east-1").reason == "g6.12xlarge: not in the price table"


def test_every_reason_in_the_table_is_one_short_line():
    for row in pricing.PRICES.values():
        assert row.known or (row.reason and "\n" not in row.reason and len(row.reason) <= 100), row


def test_every_row_names_an_existing_dated_source():
    rows = [*pricing.PRICES.values(), *pricing.SYSTEM_PRICES.values()]
    assert len(rows) > 300
    for row in rows:
        assert row.source in pricing.SOURCES and row.source in pricing_table.SOURCE_NAMES, row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}|before \d{4}-\d{2}", row.as_of), row
        assert row.as_of in pricing.SOURCES[row.source] or row.as_of.startswith("before"), row
    assert set(pricing.SOURCES) == set(pricing_table.SOURCE_DATES) == {row.source for row in rows}


def test_the_regions_are_aws_regions_and_the_priced_ones_span_the_continents():
    from rlinf_eks import aws_names

    assert set(pricing.REGIONS) <= aws_names.REGIONS
    p5 = set(pricing.priced_regions("p5.48xlarge"))
    assert {"us-east-1", "us-east-2", "us-west-2", "eu-north-1", "eu-west-2", "ap-northeast-1", "ap-south-1", "sa-east-1"} <= p5
    assert "eu-west-1" not in p5 and "eu-central-1" not in p5


def test_system_node_types_are_priced_per_region_and_agree_with_karpenter_in_us_east_1():
    for size, price in zip(pricing_table.M6I_SIZES, pricing_table.SKYPILOT_M6I["us-east-2"]):
        assert pricing.instance_hour(size, "us-east-2").usd_per_unit_hour == price
        assert pricing_table.KARPENTER_US_EAST_1[size] == price  # us-east-1 and us-east-2 share a price
    assert pricing.instance_hour("m6i.xlarge", "eu-west-1").usd_per_unit_hour == 0.214
    assert pricing.instance_hour("m6i.xlarge", "us-gov-east-1").usd_per_unit_hour == 0.242
    unknown = pricing.instance_hour("m6i.xlarge", "sa-east-1")
    assert unknown.usd_per_unit_hour is None and len(unknown.reason) < 100 and "sa-east-1" in unknown.reason


# --- the short line ---------------------------------------------------------------------------


def test_the_unknown_summary_names_the_items_and_counts_the_rest_within_its_width():
    assert unknown_summary([]) is None
    assert unknown_summary(["gpuNodes", "natGateways"]) == "no price for gpuNodes, natGateways"
    many = [f"item{n:02d}WithALongName" for n in range(12)]
    text = unknown_summary(many)
    assert len(text) <= 80 and text.startswith("no price for item00WithALongName") and text.endswith(" more")
    shown = text.removeprefix("no price for ").split(" and ")[0].split(", ")
    assert text.endswith(f" and {12 - len(shown)} more")


def _stack_text(region: str) -> tuple[str, dict]:
    plan = plan_stack("single-node", f"aws:region={region}", f"availabilityZone={region}a")
    report = efficiency_report(plan, plan.settings, on_date="2026-11-30")
    return render_efficiency(report), report


@pytest.mark.parametrize("region, price", [("eu-north-1", 58.8928), ("ap-northeast-1", 68.8), ("eu-west-2", 71.552)])
def test_a_p5_stack_where_p5_is_sold_has_a_sourced_gpu_and_system_node_price(region, price):
    text, report = _stack_text(region)
    cost = report["cost"]
    assert cost["onDemandPerNodeHour"] == price and cost["price"]["asOf"] == "2026-01-21"
    items = {i["item"]: i for i in cost["items"]}
    assert items["gpuNodes"]["perHourWhileTraining"] == price
    assert items["systemNodes"]["perHourWhileTraining"] is not None
    assert f"${price:,.2f}/h per node on-demand, as of 2026-01-21" in text


def test_a_p5_stack_where_p5_is_not_sold_says_so_in_short_lines_and_keeps_the_detail_in_the_report():
    text, report = _stack_text("eu-west-1")
    cost = report["cost"]
    assert cost["onDemandPerNodeHour"] is None and "eu-north-1" in cost["price"]["pricedIn"]
    assert "  cost         unknown: p5.48xlarge: not sold On-Demand in eu-west-1 per instances.vantage.sh (2026-01-21)" in text
    stack_line = next(line for line in text.splitlines() if line.startswith("  stack cost"))
    assert stack_line == f"  stack cost   unknown: {cost['totalUnknownSummary']} (why: below)"
    # the joined reasons are in efficiency.json, not on the terminal
    assert cost["totalUnknownReason"] not in text and "gpuNodes: p5.48xlarge: not sold" in cost["totalUnknownReason"]
    assert all(len(line) < SHORT for line in text.splitlines() if "unknown" in line), text


def test_a_region_with_no_price_at_all_stays_within_a_short_line_per_item():
    plan = plan_stack("single-node", "aws:region=af-south-1", "availabilityZone=af-south-1a")
    text = render_efficiency(efficiency_report(plan, plan.settings, on_date="2026-11-30"))
    unknown = [line for line in text.splitlines() if "unknown" in line]
    assert len(unknown) >= 4 and all(len(line) < SHORT for line in unknown), text


def test_a_hand_built_plan_in_an_unsold_region_has_no_cost_but_a_short_reason():
    from tests.test_efficiency import P5, hand_built_plan

    report = efficiency_of(hand_built_plan(), instance=P5, region="eu-central-1")
    assert report["cost"]["perHourWhileTraining"] is None
    assert report["cost"]["price"]["reason"] == "p5.48xlarge: not sold On-Demand in eu-central-1 per instances.vantage.sh (2026-01-21)"


def test_the_diff_says_an_unknown_total_in_its_short_phrase():
    from rlinf_eks.offline.diff.diff import cost_change

    base = {"cost": {"totalPerHourWhileTraining": 55.9, "totalPerHourIdle": 55.9}}
    _, report = _stack_text("eu-west-1")
    lines = cost_change(base, report)
    assert lines == [f"unknown {when}: {report['cost']['totalUnknownSummary']}" for when in ("while training", "idle")]
    assert all(len(line) < SHORT for line in lines)
    # a report written before the summary existed still gets a short line
    old = {"cost": {"totalPerHourWhileTraining": None, "totalPerHourIdle": None, "totalUnknownReason": "x" * 600}}
    assert cost_change(base, old) == ["unknown while training: no sourced price", "unknown idle: no sourced price"]


def test_the_per_region_table_for_the_readme_is_the_price_table():
    table = pricing.priced_types_by_region()
    assert table["us-east-1"][:3] == ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"]
    assert "p5e.48xlarge" not in {t for types in table.values() for t in types}
    assert {(t, r) for r, types in table.items() for t in types} == {key for key, row in pricing.PRICES.items() if row.known}


def test_the_observability_guide_lists_exactly_the_priced_types_per_region():
    text = (ROOT / "docs" / "observability.md").read_text()
    rows = dict(re.findall(r"^\| ([a-z]{2}(?:-gov)?-[a-z]+-\d) \| ([^|]+?) \|$", text, flags=re.M))
    assert {region: types.split(", ") for region, types in rows.items()} == pricing.priced_types_by_region()
