"""One image build through the stack's CodeBuild project, against boto3 clients (the command,
:mod:`.cli`, makes them; the tests stub them with botocore's Stubber).

The project is found by its name (``rlinf-eks-<stack>-<family>``, config.images.project_name); it
names the rest: the context bucket in its source location, the repository in its environment
(``REPOSITORY_URI``). The context is uploaded under ``contexts/<family>/<sha256>.zip``; the build
pushes ``<repository>:<tag>``, the tag a digest of the context, the Ray version and the base, so an
unchanged context is found already built (the repository's tags are immutable) and not rebuilt."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config.images import CONTEXT_PREFIX, project_name, repository_name
from .context import BuildContext, cached_base, image_tag

DONE = ("SUCCEEDED", "FAILED", "FAULT", "STOPPED", "TIMED_OUT")
LOG_TAIL = 20


class BuildInputError(ValueError):
    """Bad input (exit 2): a project or repository that is not there, a wrong family."""


class BuildFailed(RuntimeError):
    """The build ran and failed (exit 1): the message names the failed phase and the last log lines."""


@dataclass
class Clients:
    codebuild: Any
    s3: Any
    ecr: Any
    logs: Any


@dataclass(frozen=True)
class Request:
    stack: str
    family: str
    ray_version: str
    cache_prefix: Optional[str] = None
    """The Docker Hub pull-through cache's repository prefix (images.dockerHubCache), or None."""


@dataclass
class Result:
    repository_uri: str
    tag: str
    digest: str
    size_bytes: Optional[int]
    build_id: Optional[str] = None
    already_built: bool = False
    lines: list[str] = field(default_factory=list)

    @property
    def image(self) -> str:
        """What workload.image takes: the repository and the digest (pinned, whatever the tag)."""
        return f"{self.repository_uri}@{self.digest}"


@dataclass
class Project:
    name: str
    bucket: str
    repository_uri: str

    @property
    def repository(self) -> str:
        return self.repository_uri.split("/", 1)[1]

    @property
    def registry(self) -> str:
        return self.repository_uri.split("/", 1)[0]


def find_project(clients: Clients, request: Request, region: str) -> Project:
    """The family's project and what it names, or BuildInputError saying how to create it."""
    name = project_name(request.stack, request.family)
    found = clients.codebuild.batch_get_projects(names=[name])
    projects = found.get("projects") or []
    if not projects:
        raise BuildInputError(
            f"no CodeBuild project {name} in {region}: set images.build: true (and images.families to include "
            f"{request.family}) in stack {request.stack} and run pulumi up on it first"
        )
    project = projects[0]
    location = (project.get("source") or {}).get("location") or ""
    variables = {v["name"]: v.get("value", "") for v in (project.get("environment") or {}).get("environmentVariables") or []}
    uri = variables.get("REPOSITORY_URI", "")
    if not location or "/" not in uri:
        raise BuildInputError(f"CodeBuild project {name} has no S3 source location or REPOSITORY_URI: it was not made by this stack's pulumi up")
    return Project(name, location.split("/", 1)[0], uri)


def check_repository(clients: Clients, project: Project, request: Request, region: str) -> None:
    expected = repository_name(request.stack, request.family)
    try:
        clients.ecr.describe_repositories(repositoryNames=[project.repository])
    except clients.ecr.exceptions.RepositoryNotFoundException:
        raise BuildInputError(
            f"no ECR repository {project.repository} in {region} (the project {project.name} pushes there): "
            f"run pulumi up on stack {request.stack} to create it"
        ) from None
    if project.repository != expected:
        raise BuildInputError(f"project {project.name} pushes to {project.repository}, not {expected}: run pulumi up on stack {request.stack}")


def find_image(clients: Clients, repository: str, tag: str) -> Optional[dict[str, Any]]:
    try:
        details = clients.ecr.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}]).get("imageDetails") or []
    except clients.ecr.exceptions.ImageNotFoundException:
        return None
    return details[0] if details else None


def failed_phase(build: dict[str, Any]) -> str:
    """The first phase that did not succeed, with CodeBuild's own message."""
    for phase in build.get("phases") or []:
        status = phase.get("phaseStatus")
        if status not in (None, "SUCCEEDED"):
            message = "; ".join(c.get("message", "") for c in phase.get("contexts") or [] if c.get("message"))
            return f"{phase.get('phaseType')} {status}" + (f": {message}" if message else "")
    return f"{build.get('currentPhase', '?')} {build.get('buildStatus', '?')}"


class LogTail:
    """The build's CloudWatch log stream, read forward from where the last read stopped."""

    def __init__(self, logs: Any):
        self.logs = logs
        self.token: Optional[str] = None
        self.lines: list[str] = []

    def read(self, build: dict[str, Any]) -> list[str]:
        where = build.get("logs") or {}
        group, stream = where.get("groupName"), where.get("streamName")
        if not group or not stream:
            return []
        new: list[str] = []
        while True:
            kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
            if self.token:
                kwargs["nextToken"] = self.token
            try:
                page = self.logs.get_log_events(**kwargs)
            except self.logs.exceptions.ResourceNotFoundException:
                return new  # the stream appears once the build container starts
            new += [e["message"].rstrip("\n") for e in page.get("events") or []]
            token = page.get("nextForwardToken")
            if not page.get("events") or token == self.token:
                self.token = token
                break
            self.token = token
        self.lines += new
        return new


def run_build(
    clients: Clients,
    request: Request,
    context: BuildContext,
    region: str,
    *,
    wait: bool,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = 15.0,
) -> Result:
    """Upload the context, start the build and (``wait``) follow it to its end."""
    project = find_project(clients, request, region)
    check_repository(clients, project, request, region)
    base = ""
    if request.cache_prefix and context.base_image:
        base = cached_base(context.base_image, project.registry, request.cache_prefix)
    tag = image_tag(context, request.ray_version, base)
    existing = find_image(clients, project.repository, tag)
    if existing is not None:
        say(f"{project.repository_uri}:{tag} is already built from this context (tags are immutable): not rebuilt")
        return Result(project.repository_uri, tag, existing["imageDigest"], existing.get("imageSizeInBytes"), already_built=True)
    key = f"{CONTEXT_PREFIX}/{request.family}/{context.sha256}.zip"
    clients.s3.put_object(Bucket=project.bucket, Key=key, Body=context.archive, ContentType="application/zip")
    say(f"uploaded images/{request.family}/ ({len(context.files)} files, {len(context.archive)} bytes) to s3://{project.bucket}/{key}")
    variables = [
        {"name": "IMAGE_TAG", "value": tag, "type": "PLAINTEXT"},
        {"name": "RAY_VERSION", "value": request.ray_version, "type": "PLAINTEXT"},
    ]
    if base:  # the buildspec passes --build-arg BASE_IMAGE only when it is set
        variables.append({"name": "BASE_IMAGE", "value": base, "type": "PLAINTEXT"})
    started = clients.codebuild.start_build(
        projectName=project.name, sourceLocationOverride=f"{project.bucket}/{key}", environmentVariablesOverride=variables
    )["build"]
    build_id = started["id"]
    say(f"started build {build_id} of {project.repository_uri}:{tag}" + (f" (base through the cache: {base})" if base else ""))
    say(f"  console: https://{region}.console.aws.amazon.com/codesuite/codebuild/projects/{project.name}/build/{build_id}/?region={region}")
    if not wait:
        say(f"not waiting (--wait follows it): when it succeeds, workload.image is {project.repository_uri}:{tag} "
            f"(or, pinned, python -m rlinf_eks build-image {request.stack} --family {request.family} --wait prints the digest)")  # fmt: skip
        return Result(project.repository_uri, tag, "", None, build_id)
    build = _follow(clients, build_id, say, sleep, poll_seconds)
    if build["buildStatus"] != "SUCCEEDED":
        tail = LogTail(clients.logs)
        tail.read(build)
        last = "\n".join(f"  | {line}" for line in tail.lines[-LOG_TAIL:])
        raise BuildFailed(f"build {build_id} {build['buildStatus']}: phase {failed_phase(build)}" + (f"\nlast log lines:\n{last}" if last else ""))
    image = find_image(clients, project.repository, tag)
    if image is None:
        raise BuildFailed(f"build {build_id} SUCCEEDED but {project.repository}:{tag} is not in the repository")
    return Result(project.repository_uri, tag, image["imageDigest"], image.get("imageSizeInBytes"), build_id)


def _follow(clients: Clients, build_id: str, say: Callable[[str], None], sleep: Callable[[float], None], poll_seconds: float) -> dict[str, Any]:
    tail = LogTail(clients.logs)
    phase = None
    while True:
        build = clients.codebuild.batch_get_builds(ids=[build_id])["builds"][0]
        if build.get("currentPhase") != phase:
            phase = build.get("currentPhase")
            say(f"phase {phase}")
        for line in tail.read(build):
            say(f"  | {line}")
        if build.get("buildStatus") in DONE:
            return build
        sleep(poll_seconds)
