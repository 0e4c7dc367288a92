"""Which Kubernetes versions each EKS AL2023 AMI release ships, and whether a Karpenter alias has an
image for the cluster's version.

Karpenter resolves ``al2023@vYYYYMMDD`` per cluster version, to the AMI
``amazon-eks-node-al2023-x86_64-nvidia-<version>-vYYYYMMDD`` on an NVIDIA instance type. A release
without the cluster's version resolves to nothing: the EC2NodeClass never becomes ready and no GPU
node launches, though the API server accepts every object. ``data/eks-ami-releases.json`` lists
each release's versions, read from amazon-eks-ami's CHANGELOG at a pinned commit (its
``provenance``; ``tests/ami_release_data.py`` regenerates it). A release newer than the data's
newest is not judged (the plan lists it among what it cannot check offline).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Optional

DATA = Path(__file__).with_name("data") / "eks-ami-releases.json"
VARIANT = "al2023_x86_64_nvidia"
"""The GPU nodes' image: Karpenter picks the NVIDIA variant of the alias for a GPU instance type."""


@functools.lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def source() -> str:
    prov = data()["provenance"]
    return f"{prov['source']} at {prov['commit'][:7]}"


def newest() -> str:
    return max(data()["releases"])


def versions(release: str) -> Optional[tuple[str, ...]]:
    """The Kubernetes versions ``release`` (vYYYYMMDD) ships the NVIDIA AL2023 image of; None for a
    release the data does not list; () for one abandoned or recalled."""
    entry = data()["releases"].get(release)
    if entry is None:
        return None
    return tuple(entry.get(VARIANT, ()))


def releases_with(version: str) -> list[str]:
    """The releases that ship ``version``, oldest first."""
    return sorted(r for r in data()["releases"] if version in (versions(r) or ()))


def alias_problem(alias: str, kubernetes_version: str) -> Optional[str]:
    """What is wrong with ``alias`` (al2023@vYYYYMMDD) on a cluster of ``kubernetes_version``, or None."""
    release = alias.partition("@")[2]
    if release > newest():
        return None  # newer than the data: not judged here
    shipped = versions(release)
    having = releases_with(kubernetes_version)
    where = (
        f"releases with {kubernetes_version}: {having[0]} to {having[-1]}, such as al2023@{having[-1]}"
        if having else f"no release in the data ships {kubernetes_version}"
    )  # fmt: skip
    if shipped is None:
        return f"is no amazon-eks-ami release ({source()}); {where}"
    if kubernetes_version not in shipped:
        shipped_text = f"ships {shipped[0]} to {shipped[-1]}" if shipped else "published no AMIs (abandoned or recalled)"
        return (
            f"has no Kubernetes {kubernetes_version} image for cluster.kubernetesVersion={kubernetes_version!r}: "
            f"release {release} {shipped_text} ({source()}), and Karpenter would launch no GPU node; {where}"
        )
    return None
