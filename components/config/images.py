"""The images section: the training images built in the stack's own AWS account.

``images.build: true`` makes the platform plan, per image family (``images/<family>/Dockerfile``),
an ECR repository, a CodeBuild project that builds the image from the family's folder, and the S3
bucket the build context is uploaded to (rlinf_eks.training_image); ``python -m rlinf_eks
build-image STACK`` runs the build. Families default to the one of the stack's trainer dialect
(resolved by the program: this package does not read the trainers' recipes)."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .types import Bool, Int, SettingsModel

ImageFamily = Literal["rlinf-embodied", "rlinf-reasoning", "simplevla-rl"]
IMAGE_FAMILIES: tuple[str, ...] = ("rlinf-embodied", "rlinf-reasoning", "simplevla-rl")
"""The folders of images/, one Dockerfile each (README, Training image)."""

ComputeType = Literal["BUILD_GENERAL1_LARGE", "BUILD_GENERAL1_XLARGE", "BUILD_GENERAL1_2XLARGE"]

# AWS ECR user guide, "Creating a pull through cache rule": the Secrets Manager secret holding the
# upstream registry's credentials "must use the ecr-pullthroughcache/ prefix". A secret ARN:
# arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 random characters>.
PULL_THROUGH_SECRET_PREFIX = "ecr-pullthroughcache/"
_SECRET_ARN = re.compile(r"arn:aws(-[a-z]+)*:secretsmanager:[a-z0-9-]+:\d{12}:secret:(?P<name>[A-Za-z0-9/_+=.@-]+)")


def secret_arn_problem(value: str) -> Optional[str]:
    """Why ``value`` cannot be the Docker Hub credentials of a pull-through cache rule, or None."""
    match = _SECRET_ARN.fullmatch(value)
    if match is None:
        return ("not a Secrets Manager secret ARN such as "
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf")  # fmt: skip
    if not match.group("name").startswith(PULL_THROUGH_SECRET_PREFIX):
        return (f"the secret's name {match.group('name')!r} must start with {PULL_THROUGH_SECRET_PREFIX} "
                "(an ECR rule for pull-through cache credentials): create the secret under that name")  # fmt: skip
    return None


class DockerHubCacheSettings(SettingsModel):
    credential_arn: Optional[str] = None
    """The Secrets Manager secret ARN of Docker Hub credentials (JSON ``{"username", "accessToken"}``;
    its name must start with ``ecr-pullthroughcache/``, an ECR rule). Set: an ECR pull-through cache
    rule for Docker Hub (registry-1.docker.io) under ``repositoryPrefix``, and the builds take their
    base image through it (no Docker Hub rate limit on the build host). Defaults to none (no rule;
    the base is pulled from Docker Hub directly)."""
    repository_prefix: str = "docker-hub"
    """The ECR repository prefix of the cache (``<registry>/<prefix>/rlinf/rlinf:tag``). Defaults to docker-hub."""

    @field_validator("credential_arn")
    @classmethod
    def _arn(cls, value: Optional[str]) -> Optional[str]:
        problem = secret_arn_problem(value) if value is not None else None
        if problem:
            raise PydanticCustomError("secret_arn", "{text}", {"text": problem})
        return value

    @field_validator("repository_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        # ECR CreatePullThroughCacheRule: ecrRepositoryPrefix 2-30 characters, (?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*
        if not (2 <= len(value) <= 30 and re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", value)) or value == "ecr":
            raise PydanticCustomError("prefix", "2-30 lowercase letters, digits and . _ - (not 'ecr'), such as docker-hub")
        return value


class ImageSettings(SettingsModel):
    build: Bool = False
    """Build the training images in this AWS account: an ECR repository, a CodeBuild project and a
    build-context bucket per family (python -m rlinf_eks build-image STACK). Defaults to false."""
    families: Optional[list[ImageFamily]] = None
    """The image families to build (rlinf-embodied, rlinf-reasoning, simplevla-rl). Defaults to the
    family of the stack's trainer dialect; a platform (no run) must name them."""
    compute_type: ComputeType = "BUILD_GENERAL1_2XLARGE"
    """CodeBuild compute type. Defaults to BUILD_GENERAL1_2XLARGE (72 vCPUs, 144 GiB, 824 GB SSD,
    Docker images up to 100 GB uncompressed): the images are 15-20 GB compressed on bases of that
    size; BUILD_GENERAL1_LARGE (8 vCPUs, 16 GiB) has less disk than a build of them needs."""
    timeout_minutes: Int = Field(120, ge=5, le=2160)
    """How long a build may run before CodeBuild stops it (5-2160). Defaults to 120."""
    keep_images: Int = Field(10, ge=1, le=1000)
    """Tagged images kept per repository; older ones expire (ECR lifecycle policy). Defaults to 10."""
    untagged_expire_days: Int = Field(7, ge=1, le=3650)
    """Untagged images (layers of an interrupted push) expire after this many days. Defaults to 7."""
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365] = 30
    """Retention of the builds' CloudWatch log group, days. Defaults to 30."""
    context_expire_days: Int = Field(30, ge=1, le=3650)
    """Uploaded build contexts (and their older versions) expire after this many days. Defaults to 30."""
    docker_hub_cache: DockerHubCacheSettings = Field(default_factory=DockerHubCacheSettings)
    """An ECR pull-through cache of Docker Hub for the images' bases (optional)."""

    @field_validator("families")
    @classmethod
    def _families(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        if value is not None and (not value or len(set(value)) != len(value)):
            raise PydanticCustomError("families", "a non-empty list of distinct families: rlinf-embodied, rlinf-reasoning, simplevla-rl")
        return value


# --- the names the platform gives and build-image finds (deterministic from the stack's name) ---

CONTEXT_PREFIX = "contexts"
"""The key prefix of the uploaded build contexts in the build bucket: ``contexts/<family>/<sha256>.zip``."""


def _slug(stack: str) -> str:
    """The stack's name as ECR and CodeBuild names take it: lowercase letters, digits and single
    '-' between them (Pulumi stack names also allow '_', '.' and capitals)."""
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]", "-", stack.lower())).strip("-") or "stack"


def repository_name(stack: str, family: str) -> str:
    """The ECR repository of one family: ``rlinf-eks/<stack>/<family>``."""
    return f"rlinf-eks/{_slug(stack)}/{family}"


def project_name(stack: str, family: str) -> str:
    """The CodeBuild project of one family: ``rlinf-eks-<stack>-<family>`` (at most 255 characters)."""
    return f"rlinf-eks-{_slug(stack)}-{family}"[:255]


def log_group_name(stack: str, family: str) -> str:
    """The CloudWatch log group of one family's builds: ``/aws/codebuild/<project>`` (CodeBuild's default place)."""
    return f"/aws/codebuild/{project_name(stack, family)}"
