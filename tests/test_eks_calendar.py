"""Kubernetes 1.36 is in the EKS release calendar: a 1.36 stack is priced by its support tier and
checked as EKS creates it, and the default cluster version stays 1.35 for the reasons its
docstring gives."""

from __future__ import annotations

from datetime import date, datetime

from rlinf_eks import pricing
from rlinf_eks.config import ClusterSettings, eks_versions
from rlinf_eks.offline.outputs.efficiency import efficiency_report
from tests.harness import plan_stack


def _months_later(day: str, months: int) -> str:
    d = date.fromisoformat(day)
    year, month = divmod(d.month - 1 + months, 12)
    return d.replace(year=d.year + year, month=month + 1).isoformat()


def test_a_1_36_stack_has_a_control_plane_price():
    plan = plan_stack("quickstart", "cluster.kubernetesVersion=1.36")
    cost = efficiency_report(plan, plan.settings, on_date="2026-12-06")["cost"]
    plane = next(item for item in cost["items"] if item["item"] == "controlPlane")
    assert plane["perHourIdle"] == pricing.EKS_STANDARD_PER_HOUR
    assert plane["price"]["detail"] == "standard support until 2027-08-02"
    assert cost["totalPerHourIdle"] is not None


def test_1_36_bills_extended_support_after_fourteen_months():
    assert pricing.eks_control_plane("1.36", "2027-08-03").usd_per_unit_hour == pricing.EKS_EXTENDED_PER_HOUR
    assert eks_versions.extended_support_ends("1.36") == "2028-08-02"
    assert eks_versions.unchecked("1.36", datetime(2026, 12, 6)) is None


def test_a_derived_date_follows_the_documented_rule():
    for version, released in eks_versions.EKS_RELEASED.items():
        assert eks_versions.STANDARD_SUPPORT_ENDS[version] == _months_later(released, 14), version
    # the rule gives the calendar's own rows too (1.34: EKS release October 2, 2025, the calendar's table)
    assert _months_later("2025-10-02", 14) == eks_versions.STANDARD_SUPPORT_ENDS["1.34"]


def test_the_default_version_is_1_35_not_the_newest():
    # the real API server tier runs v1.35.3 binaries, and the pinned add-ons and the Cluster
    # Autoscaler image are the ones checked on 1.35 (ClusterSettings.kubernetes_version's docstring)
    assert ClusterSettings().kubernetes_version == "1.35" and list(eks_versions.STANDARD_SUPPORT_ENDS)[-1] == "1.36"
    assert "1.36" in (ClusterSettings.model_fields["kubernetes_version"].description or "")
