"""What the training images cost (images.build): CodeBuild build-minutes and ECR storage, both
billed by use, priced per unit (rlinf_eks.pricing) with a worked example: a build of the public
sample's length and the repositories full at their lifecycle policy's count."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional

from ... import pricing
from ...plan_reader import CODEBUILD_PROJECT, ECR_REPOSITORY, inputs_of, of_type
from .first_step import TYPICAL_IMAGE_GB

# the public sample that trains RLinf on EKS builds its image with CodeBuild in about 15 minutes (issue 35)
EXAMPLE_BUILD_MINUTES = 15


def _kept(resources: list[Mapping[str, Any]], repository: str) -> Optional[int]:
    """The lifecycle policy's tagged-image count of ``repository`` (imageCountMoreThan)."""
    for policy in of_type(resources, "aws:ecr/lifecyclePolicy:LifecyclePolicy"):
        inputs = inputs_of(policy)
        if inputs.get("repository") == repository:
            rules = json.loads(inputs.get("policy") or "{}").get("rules", [])
            counts = [r["selection"]["countNumber"] for r in rules if r.get("selection", {}).get("countType") == "imageCountMoreThan"]
            return counts[0] if counts else None
    return None


def image_build_cost(resources: Iterable[Mapping[str, Any]], region: str) -> Optional[dict[str, Any]]:
    """Per family's project: the build-minute price and a build of EXAMPLE_BUILD_MINUTES; per
    repository: the storage price and the cost of keeping its lifecycle's count of images."""
    resources = list(resources)
    projects = of_type(resources, CODEBUILD_PROJECT)
    if not projects:
        return None
    builds = []
    for project in projects:
        compute = str((inputs_of(project).get("environment") or {}).get("computeType"))
        price = pricing.codebuild_per_minute(compute, region)
        builds.append({"project": inputs_of(project).get("name"), "computeType": compute, "price": price.to_json(),
                       "exampleBuildUsd": round(price.usd * EXAMPLE_BUILD_MINUTES, 2) if price.usd is not None else None})  # fmt: skip
    storage = pricing.ecr_storage_per_gb_month(region)
    repositories = []
    for repository in of_type(resources, ECR_REPOSITORY):
        name = inputs_of(repository).get("name")
        kept = _kept(resources, name)
        low, high = TYPICAL_IMAGE_GB
        repositories.append({"repository": name, "imagesKept": kept, "price": storage.to_json(),
                             "fullUsdPerMonth": {"low": round(kept * low * storage.usd, 2), "high": round(kept * high * storage.usd, 2)}
                             if kept and storage.usd is not None else None})  # fmt: skip
    return {"exampleBuildMinutes": EXAMPLE_BUILD_MINUTES, "builds": builds, "repositories": repositories,
            "note": "full repositories: imagesKept x 15-20 GB (an estimate of these images' size); images share base layers, "
                    "which ECR stores once, so this is an upper bound"}  # fmt: skip


def render(cost: Optional[Mapping[str, Any]]) -> list[str]:
    if not cost:
        return []
    lines = []
    for build in cost["builds"]:
        price = build["price"]
        each = (f"${price['usd']}/build-minute, about ${build['exampleBuildUsd']:.2f} for a {cost['exampleBuildMinutes']}-minute build"
                if price["usd"] is not None else f"unknown: {price['reason']}")  # fmt: skip
        lines.append(f"    image build {build['project']} ({build['computeType']}): {each}")
    for repo in cost["repositories"]:
        full = repo["fullUsdPerMonth"]
        kept = f"${full['low']:.2f}-{full['high']:.2f}/month full ({repo['imagesKept']} images kept)" if full else "unknown"
        lines.append(f"    image storage {repo['repository']}: ${repo['price']['usd']}/GB-month, {kept}")
    return lines
