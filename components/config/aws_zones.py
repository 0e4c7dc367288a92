"""The Availability Zone letters of each AWS commercial region, to refuse a zone that does not
exist (``us-east-1z``) before anything is created.

Sources (read 2026-12-05): the AWS "AWS Availability Zones" table of AZ IDs per region
(docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html) and its
"AZ IDs" page (az-ids.html: the regions that map zones to letters per account, for accounts
created before November 2025), cross-checked against one account's describe-availability-zones
output. A uniformly mapped region of N AZ IDs shows the letters a to the Nth; an independently
mapped one may show another subset, so the table holds every letter any account may see. Which
of them an account has is known only to its DescribeAvailabilityZones: offline, a letter here is
"may exist", and a region missing here is reported as not checked.
"""

from __future__ import annotations

from typing import Optional

SOURCE = (
    "AWS Availability Zones and AZ IDs pages (docs.aws.amazon.com/global-infrastructure/latest/regions/"
    "aws-availability-zones.html, az-ids.html), read 2026-12-05"
)
INDEPENDENTLY_MAPPED = frozenset(
    {"us-east-1", "us-west-1", "us-west-2", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "eu-west-1", "sa-east-1"}
)
"""Regions whose zone letters are mapped per account (accounts created before November 2025)."""

# Every zone letter any account may see in the Region (union over accounts).
AZ_LETTERS: dict[str, str] = {
    # North America
    "us-east-1": "abcdef",     # independently mapped, 6 IDs ; shows all six letters
    "us-east-2": "abc",
    "us-west-1": "abc",        # independently mapped, 3 IDs; an account sees two of a/b/c 
    "us-west-2": "abcd",       # independently mapped, 4 IDs; shows usw2-az4 -> d
    "ca-central-1": "abcd",    # uniform; cac1-az1/az2/az4 = a/b/d in one account's listing; "c" = cac1-az3, hidden,
                               # older accounts only (named in the EKS and VPC Lattice docs). New accounts see a, b, d (never c).
    "ca-west-1": "abc",
    "mx-central-1": "abc",
    # Africa
    "af-south-1": "abc",
    # Asia Pacific
    "ap-east-1": "abc",
    "ap-east-2": "abc",        #
    "ap-northeast-1": "abcd",  # independently mapped, 4 IDs (apne1-az3 constrained); a, c, d seen in one account
    "ap-northeast-2": "abcd",  # 4 IDs; shows apne2-az4 -> d
    "ap-northeast-3": "abc",
    "ap-south-1": "abc",
    "ap-south-2": "abc",
    "ap-southeast-1": "abc",   # independently mapped, 3 IDs
    "ap-southeast-2": "abcd",  # independently mapped, 3 IDs in "d" is the one extra letter
                               # allowed because apse2-az4 exists (Oracle Database@AWS docs; UNSURE which letter, if any,
                               # accounts see for it).
    "ap-southeast-3": "abc",
    "ap-southeast-4": "abc",
    "ap-southeast-5": "abc",
    "ap-southeast-6": "abc",   # shows apse6-az1..3 -> a, b, c
    "ap-southeast-7": "abc",
    # Europe
    "eu-central-1": "abc",
    "eu-central-2": "abc",
    "eu-north-1": "abc",
    "eu-south-1": "abc",
    "eu-south-2": "abc",
    "eu-west-1": "abcd",       # independently mapped, 3 IDs in "d" is the one extra letter allowed
                               # because euw1-az4 exists (VPC Lattice docs; UNSURE: hidden, older accounts only).
    "eu-west-2": "abcd",       # 4 IDs; eu-west-2d (euw2-az4) launched 2026-08-19
    "eu-west-3": "abc",
    # Middle East
    "il-central-1": "abc",
    "me-central-1": "abc",
    "me-south-1": "abc",
    # South America
    "sa-east-1": "abc",        # independently mapped, 3 IDs
}


def zone_problem(zone: str, region: str) -> Optional[str]:
    """Why ``zone`` (region and letter) is not a zone of ``region``, or None (also for a region
    this table lacks: see :func:`unchecked_zone`)."""
    letters = AZ_LETTERS.get(region)
    if letters is None or not zone.startswith(region) or len(zone) != len(region) + 1 or zone[-1] in letters:
        return None
    known = ", ".join(region + letter for letter in letters)
    return f"{region} has no zone {zone[-1]!r}: its zones are {known} (AWS's AZ table, read 2026-12-05)"


def unchecked_zone(zone: str, region: str) -> Optional[str]:
    """Why ``zone`` cannot be judged offline (its region is not in the table), or None."""
    if region in AZ_LETTERS:
        return None
    return f"{zone}: region {region} is not in the zone table this project carries (read 2026-12-05): the zone letter is not checked offline"
