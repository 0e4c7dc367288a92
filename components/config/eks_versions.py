"""The Amazon EKS release calendar: which Kubernetes minor versions EKS creates clusters of, and
until when each is in standard and in extended support.

Source (``SOURCE``): the Amazon EKS Kubernetes release calendar
(docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, as mirrored by
endoflife.date/amazon-eks in February 2026): 14 months of standard support from a version's EKS
release, then 12 months of extended support, after which EKS upgrades the cluster and creates no
new one of that version. 1.36 (EKS release 2026-06-02) is not in any copy of the calendar read here:
its end of standard support is that release date plus the documented 14 months (``DERIVED``), to be
replaced by the calendar's own date when it is read. A version newer than the table's newest may
exist by the time of a plan: it is reported as not checked, not refused.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Mapping, Optional

from .errors import problem_line

SOURCE = (
    "Amazon EKS Kubernetes release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, "
    "as mirrored by endoflife.date/amazon-eks in February 2026): 14 months of standard support, then 12 of extended; "
    "1.36 by that rule from its EKS release on 2026-06-02"
)
CALENDAR_READ = "2026-02"

STANDARD_SUPPORT_ENDS: Mapping[str, str] = {
    "1.28": "2024-11-26",
    "1.29": "2025-03-23",
    "1.30": "2025-07-23",
    "1.31": "2025-11-26",
    "1.32": "2026-03-23",
    "1.33": "2026-07-29",
    "1.34": "2026-12-02",
    "1.35": "2027-03-27",
    "1.36": "2027-08-02",
}
"""End of standard support per EKS minor version; after it a cluster bills the extended-support rate."""

EKS_RELEASED: Mapping[str, str] = {"1.36": "2026-06-02"}
"""EKS release dates of the versions whose end of standard support is derived (``DERIVED``)."""
DERIVED = frozenset(EKS_RELEASED)
"""Versions whose dates follow the documented rule (14 months of standard support from the EKS
release) instead of the calendar's table. 1.36's EKS release, 2026-06-02, is the one issue 53
reports; the first amazon-eks-ami release with 1.36 images is v20260610 (data/eks-ami-releases.json)."""


def extended_support_ends(version: str) -> Optional[str]:
    """The day extended support of ``version`` ends (12 months after standard support), or None."""
    ends = STANDARD_SUPPORT_ENDS.get(version)
    if ends is None:
        return None
    day = date.fromisoformat(ends)
    return day.replace(year=day.year + 1).isoformat()


def creatable(on: str) -> list[str]:
    """The versions EKS still creates clusters of on the ISO date ``on``, oldest first."""
    return [version for version in STANDARD_SUPPORT_ENDS if (extended_support_ends(version) or "") > on]


def version_problems(version: str, creates_cluster: bool, now: datetime) -> list[str]:
    """A new cluster of a version whose extended support has ended at ``now``: EKS refuses to
    create it (an existing cluster is upgraded by EKS itself, so only a new one is refused)."""
    ends = extended_support_ends(version)
    on = now.date().isoformat()
    offered = creatable(on)
    # past every version's support the table itself is out of date: not judged (unchecked says so)
    if not creates_cluster or ends is None or ends > on or not offered:
        return []
    newest = offered[-1]
    return [
        problem_line(
            "cluster.kubernetesVersion", version,
            f"EKS no longer creates {version} clusters: its extended support ended {ends}; use {newest} "
            f"(EKS creates {', '.join(offered)} on {on}; calendar read {CALENDAR_READ})",
        )
    ]  # fmt: skip


def unchecked(version: str, now: datetime) -> Optional[str]:
    """Why ``version`` cannot be judged offline (newer than the calendar, or the calendar outlived
    at ``now``), or None."""
    if version in STANDARD_SUPPORT_ENDS and creatable(now.date().isoformat()):
        return None
    return (
        f"cluster.kubernetesVersion={version!r}: not in the EKS release calendar this project carries "
        f"({', '.join(STANDARD_SUPPORT_ENDS)}, read {CALENDAR_READ}): not checked offline whether EKS offers it, "
        "nor priced by its support tier"
    )
