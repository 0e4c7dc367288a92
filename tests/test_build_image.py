"""python -m rlinf_eks build-image: the build context, the stack-file edit, and the command against
botocore's Stubber (every request and response checked against the real service models): a build
that succeeds, one that fails, a missing repository, no credentials."""

from __future__ import annotations

import argparse
import io
import shutil
import zipfile
from contextlib import ExitStack
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import ANY, Stubber

from rlinf_eks.config.images import project_name, repository_name, secret_arn_problem
from rlinf_eks.image_build import build as build_mod
from rlinf_eks.image_build.cli import run
from rlinf_eks.image_build.context import cached_base, copied_sources, image_tag, package
from rlinf_eks.image_build.stack_file import StackFileError, with_image

from tests.harness import ALL_STACKS, ROOT
REGION = "us-east-1"
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
DIGEST = "sha256:" + "ab" * 32


# --- the build context ---------------------------------------------------------------------------


def test_the_context_is_the_same_bytes_every_time_and_follows_its_files(tmp_path):
    family = tmp_path / "images" / "demo"
    family.mkdir(parents=True)
    (family / "Dockerfile").write_text("ARG BASE_IMAGE=rlinf/rlinf:v1\nFROM ${BASE_IMAGE}\nCOPY entry.sh /entry.sh\n")
    (family / "entry.sh").write_text("echo hi\n")
    first, second = package(tmp_path / "images", "demo"), package(tmp_path / "images", "demo")
    assert first.archive == second.archive and first.files == ("Dockerfile", "entry.sh")
    assert first.base_image == "rlinf/rlinf:v1"
    with zipfile.ZipFile(io.BytesIO(first.archive)) as archive:
        assert {i.filename: i.date_time for i in archive.infolist()} == {"Dockerfile": (1980, 1, 1, 0, 0, 0), "entry.sh": (1980, 1, 1, 0, 0, 0)}
    (family / "entry.sh").write_text("echo bye\n")
    changed = package(tmp_path / "images", "demo")
    assert changed.sha256 != first.sha256
    assert image_tag(changed, "2.49.2") != image_tag(first, "2.49.2") != image_tag(first, "2.49.3")


def test_a_copy_of_a_missing_file_or_from_outside_the_context_is_refused(tmp_path):
    family = tmp_path / "images" / "demo"
    family.mkdir(parents=True)
    (family / "Dockerfile").write_text("FROM x\nCOPY missing.sh /m\n")
    with pytest.raises(ValueError, match="COPY/ADD missing.sh: no such file in images/demo/"):
        package(tmp_path / "images", "demo")
    (family / "Dockerfile").write_text("FROM x\nCOPY ../secret /s\n")
    with pytest.raises(ValueError, match="outside the build context"):
        package(tmp_path / "images", "demo")
    with pytest.raises(ValueError, match="image families here: demo"):
        package(tmp_path / "images", "other")


def test_copied_sources_reads_continuations_and_skips_stages_and_urls():
    text = "FROM a AS b\nCOPY --from=b /x /y\nCOPY --chown=1:1 a.sh \\\n  b.sh /dst/\nADD https://example.com/f /f\n# COPY c /c\n"
    assert copied_sources(text) == ["a.sh", "b.sh"]


@pytest.mark.parametrize("family", ["rlinf-embodied", "rlinf-reasoning", "simplevla-rl"])
def test_every_family_of_the_repository_packages_with_its_upstream_base(family):
    context = package(ROOT / "images", family)
    assert "Dockerfile" in context.files and context.base_image and "/" in context.base_image


def test_the_cached_base_goes_through_the_pull_through_prefix():
    assert cached_base("rlinf/rlinf:v0.3", REGISTRY, "docker-hub") == f"{REGISTRY}/docker-hub/rlinf/rlinf:v0.3"
    assert cached_base("ubuntu:22.04", REGISTRY, "docker-hub") == f"{REGISTRY}/docker-hub/library/ubuntu:22.04"
    assert cached_base("docker.io/verlai/verl:t", REGISTRY, "hub") == f"{REGISTRY}/hub/verlai/verl:t"


def test_the_pull_through_secret_must_be_named_under_ecr_pullthroughcache():
    ok = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
    assert secret_arn_problem(ok) is None
    assert "must start with ecr-pullthroughcache/" in secret_arn_problem(ok.replace("ecr-pullthroughcache/", "dockerhub/"))
    assert "not a Secrets Manager secret ARN" in secret_arn_problem("docker-hub")


# --- the stack file edit -------------------------------------------------------------------------

TRAINING_STACKS = [stack for stack in ALL_STACKS if "platform" not in stack]


@pytest.mark.parametrize("stack", TRAINING_STACKS)
def test_the_image_is_set_by_one_line_and_every_comment_stays(stack):
    text = (ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    image = f"{REGISTRY}/rlinf-eks/platform/x@{DIGEST}"
    new = with_image(text, image)
    old_lines, new_lines = text.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert len(changed) == 1 and changed[0][1].strip() == f"image: {image}"  # the PLACEHOLDER note goes with the old value
    assert yaml.safe_load(new)["config"]["rlinf-eks:workload"]["image"] == image


def test_an_image_line_is_added_where_none_was_and_a_comment_that_is_no_placeholder_stays():
    text = "config:\n  rlinf-eks:workload:  # the run\n    launcher: manual\n  rlinf-eks:gpuNodes:\n    nodeCount: 1\n"
    assert with_image(text, "r@sha256:1") == "config:\n  rlinf-eks:workload:  # the run\n    image: r@sha256:1\n    launcher: manual\n  rlinf-eks:gpuNodes:\n    nodeCount: 1\n"
    kept = with_image("config:\n  rlinf-eks:workload:\n    image: old  # pinned for the paper\n", "new@sha256:2")
    assert kept == "config:\n  rlinf-eks:workload:\n    image: new@sha256:2  # pinned for the paper\n"


def test_a_file_without_a_workload_block_or_with_an_inline_one_is_refused():
    with pytest.raises(StackFileError, match="no rlinf-eks:workload: block"):
        with_image((ROOT / "stacks" / "Pulumi.platform.yaml").read_text(), "r@sha256:1")
    with pytest.raises(StackFileError, match="written inline"):
        with_image("config:\n  rlinf-eks:workload: {image: a}\n", "r@sha256:1")


# --- the command against the stubbed AWS APIs ----------------------------------------------------

FAMILY = "rlinf-embodied"
PROJECT = project_name("platform", FAMILY)
REPOSITORY = repository_name("platform", FAMILY)
URI = f"{REGISTRY}/{REPOSITORY}"
BUCKET = "training-image-contexts-0a1b2c3"
BUILD_ID = f"{PROJECT}:0f0e0d0c-0b0a-0908-0706-050403020100"
LOGS = {"groupName": f"/aws/codebuild/{PROJECT}", "streamName": "0f0e0d0c-0b0a-0908-0706-050403020100"}


@pytest.fixture()
def project_copy(tmp_path: Path) -> Path:
    """The project's stack files and images, so that --update-stack writes a copy."""
    for name in ("Pulumi.yaml",):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "images", tmp_path / "images")
    return tmp_path


def _clients(session: boto3.session.Session) -> build_mod.Clients:
    return build_mod.Clients(*(session.client(name, region_name=REGION) for name in ("codebuild", "s3", "ecr", "logs")))


def _session() -> boto3.session.Session:
    return boto3.session.Session(aws_access_key_id="AKIAIOSFODNN7EXAMPLE", aws_secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region_name=REGION)


def _project() -> dict:
    return {
        "name": PROJECT,
        "source": {"type": "S3", "location": f"{BUCKET}/contexts/{FAMILY}/"},
        "environment": {
            "type": "LINUX_CONTAINER", "image": "aws/codebuild/amazonlinux-x86_64-standard:5.0", "computeType": "BUILD_GENERAL1_2XLARGE",
            "environmentVariables": [{"name": "REPOSITORY_URI", "value": URI, "type": "PLAINTEXT"}], "privilegedMode": True,
        },
    }  # fmt: skip


def _build(status: str, phase: str, phases: list | None = None) -> dict:
    return {"id": BUILD_ID, "buildStatus": status, "currentPhase": phase, "logs": LOGS, "phases": phases or []}


def _args(**overrides) -> argparse.Namespace:
    return argparse.Namespace(**{"stack": "platform", "family": FAMILY, "wait": True, "update_stack": None, "set": [], "platform": None, **overrides})


def _start(stubs: dict, context_key: str = ANY) -> None:
    stubs["codebuild"].add_response("batch_get_projects", {"projects": [_project()]}, {"names": [PROJECT]})
    stubs["ecr"].add_response("describe_repositories", {"repositories": [{"repositoryName": REPOSITORY, "repositoryUri": URI}]},
                              {"repositoryNames": [REPOSITORY]})  # fmt: skip
    stubs["ecr"].add_client_error("describe_images", "ImageNotFoundException", "not found", expected_params={"repositoryName": REPOSITORY, "imageIds": ANY})
    stubs["s3"].add_response("put_object", {"ETag": '"0"'}, {"Bucket": BUCKET, "Key": context_key, "Body": ANY, "ContentType": "application/zip"})
    stubs["codebuild"].add_response(
        "start_build", {"build": _build("IN_PROGRESS", "SUBMITTED")},
        {"projectName": PROJECT, "sourceLocationOverride": ANY, "environmentVariablesOverride": [
            {"name": "IMAGE_TAG", "value": ANY, "type": "PLAINTEXT"}, {"name": "RAY_VERSION", "value": "2.49.2", "type": "PLAINTEXT"}]},
    )  # fmt: skip


def _log_page(stubs: dict, messages: list[str], token: str, after: str | None = None) -> None:
    params = {"logGroupName": LOGS["groupName"], "logStreamName": LOGS["streamName"], "startFromHead": True}
    if after:
        params["nextToken"] = after
    events = [{"timestamp": 1, "message": m + "\n", "ingestionTime": 1} for m in messages]
    stubs["logs"].add_response("get_log_events", {"events": events, "nextForwardToken": token, "nextBackwardToken": "b"}, params)


def _stubbed(fill) -> tuple[build_mod.Clients, ExitStack, dict]:
    clients = _clients(_session())
    stubs = {name: Stubber(getattr(clients, name)) for name in ("codebuild", "s3", "ecr", "logs")}
    fill(stubs)
    stack = ExitStack()
    for stub in stubs.values():
        stack.enter_context(stub)
    return clients, stack, stubs


def test_a_build_that_succeeds_prints_the_digest_and_writes_the_experiments_image(project_copy, capsys):
    def fill(stubs):
        _start(stubs, context_key=f"contexts/{FAMILY}/{package(ROOT / 'images', FAMILY).sha256}.zip")
        stubs["codebuild"].add_response("batch_get_builds", {"builds": [_build("IN_PROGRESS", "BUILD")]}, {"ids": [BUILD_ID]})
        _log_page(stubs, ["Step 1/9 : FROM rlinf/rlinf", "Step 2/9 : ARG EFA_INSTALLER_VERSION"], "f/2")
        _log_page(stubs, [], "f/2", after="f/2")
        stubs["codebuild"].add_response("batch_get_builds", {"builds": [_build("SUCCEEDED", "COMPLETED")]}, {"ids": [BUILD_ID]})
        _log_page(stubs, ["pushed"], "f/3", after="f/2")
        _log_page(stubs, [], "f/3", after="f/3")
        stubs["ecr"].add_response("describe_images", {"imageDetails": [{"imageDigest": DIGEST, "imageSizeInBytes": 17_800_000_000}]},
                                  {"repositoryName": REPOSITORY, "imageIds": ANY})  # fmt: skip

    clients, stack, stubs = _stubbed(fill)
    sleeps: list[float] = []
    with stack:
        status = run(_args(update_stack="experiment-embodied"), clients_for=lambda region: clients, sleep=sleeps.append, root=project_copy)
    out = capsys.readouterr()
    assert status == 0, out.err
    for stub in stubs.values():
        stub.assert_no_pending_responses()
    assert sleeps == [15.0]
    assert "phase BUILD" in out.out and "  | Step 1/9 : FROM rlinf/rlinf" in out.out and "  | pushed" in out.out
    assert f"image: {URI}@{DIGEST}" in out.out and "17.8 GB compressed" in out.out
    written = yaml.safe_load((project_copy / "stacks" / "Pulumi.experiment-embodied.yaml").read_text())
    assert written["config"]["rlinf-eks:workload"]["image"] == f"{URI}@{DIGEST}"


def test_a_failed_build_names_its_phase_and_the_last_log_lines(project_copy, capsys):
    failed = [
        {"phaseType": "SUBMITTED", "phaseStatus": "SUCCEEDED"},
        {"phaseType": "BUILD", "phaseStatus": "FAILED",
         "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR", "message": "Error while executing command: docker build ... Reason: exit status 1"}]},
    ]  # fmt: skip

    def fill(stubs):
        _start(stubs)
        stubs["codebuild"].add_response("batch_get_builds", {"builds": [_build("FAILED", "COMPLETED", failed)]}, {"ids": [BUILD_ID]})
        _log_page(stubs, ["E: Unable to locate package libfabric", "The command '/bin/sh -c apt-get install' returned a non-zero code: 100"], "f/2")
        _log_page(stubs, [], "f/2", after="f/2")
        _log_page(stubs, ["E: Unable to locate package libfabric", "The command '/bin/sh -c apt-get install' returned a non-zero code: 100"], "f/2")
        _log_page(stubs, [], "f/2", after="f/2")

    clients, stack, stubs = _stubbed(fill)
    with stack:
        status = run(_args(), clients_for=lambda region: clients, sleep=lambda s: None, root=project_copy)
    err = capsys.readouterr().err
    assert status == 1
    assert f"error: build {BUILD_ID} FAILED: phase BUILD FAILED: Error while executing command: docker build" in err
    assert "last log lines:\n  | E: Unable to locate package libfabric" in err


def test_a_missing_repository_is_one_line_and_nothing_is_uploaded(project_copy, capsys):
    def fill(stubs):
        stubs["codebuild"].add_response("batch_get_projects", {"projects": [_project()]}, {"names": [PROJECT]})
        stubs["ecr"].add_client_error("describe_repositories", "RepositoryNotFoundException", "The repository does not exist")

    clients, stack, stubs = _stubbed(fill)
    with stack:
        status = run(_args(), clients_for=lambda region: clients, root=project_copy)
    err = capsys.readouterr().err
    assert status == 2
    assert err == (f"error: no ECR repository {REPOSITORY} in us-east-1 (the project {PROJECT} pushes there): "
                   "run pulumi up on stack platform to create it\n")  # fmt: skip
    for stub in stubs.values():
        stub.assert_no_pending_responses()


def test_a_missing_project_says_to_run_pulumi_up(project_copy, capsys):
    def fill(stubs):
        stubs["codebuild"].add_response("batch_get_projects", {"projects": [], "projectsNotFound": [PROJECT]}, {"names": [PROJECT]})

    clients, stack, _ = _stubbed(fill)
    with stack:
        status = run(_args(), clients_for=lambda region: clients, root=project_copy)
    assert status == 2
    assert f"error: no CodeBuild project {PROJECT} in us-east-1: set images.build: true" in capsys.readouterr().err


def test_no_credentials_is_one_line(project_copy, capsys, monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):  # fmt: skip
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(project_copy / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(project_copy / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # a session that finds no credentials; the endpoint is loopback, and signing fails before any request
    session = boto3.session.Session(region_name=REGION)
    clients = build_mod.Clients(*(session.client(n, endpoint_url="http://127.0.0.1:9") for n in ("codebuild", "s3", "ecr", "logs")))
    status = run(_args(), clients_for=lambda region: clients, root=project_copy)
    assert status == 2
    assert capsys.readouterr().err == ("error: no AWS credentials (botocore NoCredentialsError): set AWS_PROFILE, or run aws configure / "
                                       "aws sso login, for the account of stack platform\n")  # fmt: skip


@pytest.mark.parametrize(
    "args, message",
    [
        ({"stack": "single-node", "family": None}, "stack single-node: images.build is off"),
        ({"family": None}, "stack platform builds rlinf-embodied, rlinf-reasoning: choose one with --family"),
        ({"family": "simplevla-rl"}, "--family simplevla-rl: stack platform builds rlinf-embodied, rlinf-reasoning"),
        ({"stack": "experiment-embodied"}, "stack experiment-embodied is an experiment: its platform builds the images"),
        ({"update_stack": "experiment-reasoning"}, "--update-stack experiment-reasoning: it trains with the rlinf-reasoning image, not rlinf-embodied"),
        ({"update_stack": "", "wait": True}, "--update-stack platform: a platform runs no training"),
        ({"update_stack": "experiment-embodied", "wait": False}, "--update-stack needs --wait"),
        ({"stack": "nope"}, "unknown stack 'nope'"),
    ],
)
def test_bad_input_is_one_line_before_any_aws_call(args, message, project_copy, capsys):
    def no_clients(region):
        raise AssertionError("no AWS call for bad input")

    assert run(_args(**args), clients_for=no_clients, root=project_copy) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_an_interrupt_stops_following_with_one_line(project_copy, capsys):
    def interrupted(region):
        raise KeyboardInterrupt

    assert run(_args(), clients_for=interrupted, root=project_copy) == 130
    assert capsys.readouterr().err == ("error: interrupted: stopped following; a started build goes on in CodeBuild "
                                       "(run build-image again with --wait)\n")  # fmt: skip


def test_the_command_is_registered_on_the_cli(capsys):
    from rlinf_eks.__main__ import main

    assert main(["build-image", "single-node"]) == 2
    assert capsys.readouterr().err.startswith("error: stack single-node: images.build is off")
    with pytest.raises(SystemExit):
        main(["build-image", "--help"])
    assert "--update-stack" in capsys.readouterr().out


def test_with_the_docker_hub_cache_the_base_comes_through_it_and_without_wait_the_command_returns(project_copy, capsys):
    platform = project_copy / "stacks" / "Pulumi.platform.yaml"
    platform.write_text(platform.read_text().replace(
        "    families: [rlinf-embodied, rlinf-reasoning]\n",
        "    families: [rlinf-embodied, rlinf-reasoning]\n    dockerHubCache:\n"
        "      credentialArn: arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf\n",
    ))  # fmt: skip
    base = f"{REGISTRY}/docker-hub/{package(ROOT / 'images', FAMILY).base_image}"

    def fill(stubs):
        stubs["codebuild"].add_response("batch_get_projects", {"projects": [_project()]}, {"names": [PROJECT]})
        stubs["ecr"].add_response("describe_repositories", {"repositories": [{"repositoryName": REPOSITORY}]}, {"repositoryNames": [REPOSITORY]})
        stubs["ecr"].add_client_error("describe_images", "ImageNotFoundException", "not found")
        stubs["s3"].add_response("put_object", {"ETag": '"0"'}, {"Bucket": BUCKET, "Key": ANY, "Body": ANY, "ContentType": "application/zip"})
        variables = [{"name": "IMAGE_TAG", "value": ANY, "type": "PLAINTEXT"}, {"name": "RAY_VERSION", "value": "2.49.2", "type": "PLAINTEXT"},
                     {"name": "BASE_IMAGE", "value": base, "type": "PLAINTEXT"}]  # fmt: skip
        stubs["codebuild"].add_response("start_build", {"build": _build("IN_PROGRESS", "SUBMITTED")},
                                        {"projectName": PROJECT, "sourceLocationOverride": ANY, "environmentVariablesOverride": variables})  # fmt: skip

    clients, stack, stubs = _stubbed(fill)
    with stack:
        status = run(_args(wait=False), clients_for=lambda region: clients, root=project_copy)
    out = capsys.readouterr().out
    assert status == 0 and f"(base through the cache: {base})" in out and "not waiting (--wait follows it)" in out
    for stub in stubs.values():
        stub.assert_no_pending_responses()


def test_an_image_already_built_from_this_context_is_not_built_again(project_copy, capsys):
    def fill(stubs):
        stubs["codebuild"].add_response("batch_get_projects", {"projects": [_project()]}, {"names": [PROJECT]})
        stubs["ecr"].add_response("describe_repositories", {"repositories": [{"repositoryName": REPOSITORY}]}, {"repositoryNames": [REPOSITORY]})
        stubs["ecr"].add_response("describe_images", {"imageDetails": [{"imageDigest": DIGEST}]}, {"repositoryName": REPOSITORY, "imageIds": ANY})

    clients, stack, stubs = _stubbed(fill)
    with stack:
        status = run(_args(), clients_for=lambda region: clients, root=project_copy)
    out = capsys.readouterr().out
    assert status == 0 and "is already built from this context (tags are immutable): not rebuilt" in out and f"image: {URI}@{DIGEST}" in out
