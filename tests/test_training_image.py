"""The training images built in the account (images.build): the settings, the TrainingImage
component under mocks (ECR repository, lifecycle, CodeBuild project, build role, context bucket,
the Docker Hub cache), the stacks that plan it, and the first step's wait on paper."""

from __future__ import annotations

import json

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.config.images import log_group_name, project_name, repository_name
from rlinf_eks.offline.outputs.first_step import first_step, fsx_throughput_mb_per_s, render
from rlinf_eks.training_image import TrainingImage, build_role_policy, lifecycle_policy
from tests import aws_models
from tests.harness import ALL_STACKS, has_inputs, one, plan_stack, run_component, settings

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"


def _component(families=("rlinf-embodied",), **images):
    return run_component(
        lambda: TrainingImage("training-image", settings={"build": True, **images}, families=list(families), stack="platform",
                              ray_version="2.49.2", tags={"project": "rlinf-eks"})  # fmt: skip
    )


# --- pure ----------------------------------------------------------------------------------------


def test_the_names_follow_the_stack_in_the_forms_ecr_and_codebuild_take():
    assert repository_name("multi-node", "rlinf-embodied") == "rlinf-eks/multi-node/rlinf-embodied"
    assert repository_name("My_Stack.v2", "simplevla-rl") == "rlinf-eks/my-stack-v2/simplevla-rl"
    assert project_name("My_Stack.v2", "simplevla-rl") == "rlinf-eks-my-stack-v2-simplevla-rl"
    assert log_group_name("platform", "rlinf-reasoning") == "/aws/codebuild/rlinf-eks-platform-rlinf-reasoning"


def test_the_lifecycle_expires_untagged_images_first_and_keeps_the_newest_tagged():
    rules = lifecycle_policy(keep_images=5, untagged_days=3)["rules"]
    assert [r["rulePriority"] for r in rules] == [1, 2]
    assert rules[0]["selection"] == {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days", "countNumber": 3}
    assert rules[1]["selection"] == {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 5}


def test_the_build_role_may_do_nothing_on_star_but_the_registry_login():
    repo = "arn:aws:ecr:us-east-1:123456789012:repository/rlinf-eks/platform/rlinf-embodied"
    policy = build_role_policy([repo], "arn:aws:s3:::ctx", ["arn:aws:logs:us-east-1:123456789012:log-group:/aws/codebuild/p"])
    assert aws_models.policy_problems(policy) == []
    starred = [s for s in policy["Statement"] if s["Resource"] == "*"]
    assert starred == [{"Sid": "RegistryLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"}]
    push = next(s for s in policy["Statement"] if s["Sid"] == "PushPull")
    assert push["Resource"] == [repo] and "ecr:PutImage" in push["Action"] and not any(a.endswith("*") for a in push["Action"])
    assert next(s for s in policy["Statement"] if s["Sid"] == "ReadContexts")["Resource"] == "arn:aws:s3:::ctx/contexts/*"
    cached = build_role_policy([repo], "arn:aws:s3:::ctx", [], "arn:aws:ecr:us-east-1:123456789012:repository/docker-hub/*")
    assert aws_models.policy_problems(cached) == []
    assert next(s for s in cached["Statement"] if s["Sid"] == "PullThroughCache")["Resource"].endswith(":repository/docker-hub/*")


# --- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "images, expected",
    [
        ({"dockerHubCache": {"credentialArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:dockerhub-AbCdEf"}},
         "images.dockerHubCache.credentialArn='arn:aws:secretsmanager:us-east-1:123456789012:secret:dockerhub-AbCdEf': "
         "the secret's name 'dockerhub-AbCdEf' must start with ecr-pullthroughcache/"),
        ({"dockerHubCache": {"credentialArn": "docker-hub"}}, "not a Secrets Manager secret ARN"),
        ({"families": ["rlinf-embodied", "rlinf-embodied"]}, "a non-empty list of distinct families"),
        ({"families": ["pytorch"]}, "images.families[0]='pytorch'"),
        ({"computeType": "BUILD_GENERAL1_SMALL"}, "images.computeType='BUILD_GENERAL1_SMALL'"),
        ({"dockerHubCache": {"repositoryPrefix": "Docker_Hub"}}, "images.dockerHubCache.repositoryPrefix='Docker_Hub'"),
    ],
)  # fmt: skip
def test_bad_image_settings_are_one_line_naming_the_key(images, expected):
    with pytest.raises(ConfigError) as err:
        settings(images={"build": True, **images})
    assert any(expected in line for line in err.value.problems), err.value.problems


def test_a_platform_that_builds_must_name_its_families():
    from rlinf_eks.loading import parse

    with pytest.raises(ConfigError) as err:  # a platform has no workload section (it would be refused)
        parse({"platform": {"role": "platform"}, "images": {"build": True}, "cluster": {"deployFromVpc": True}})
    assert err.value.problems == [
        "images.families=null: a platform runs no trainer, so it has no image family of its own: name the families its "
        "experiments use, such as [rlinf-embodied, rlinf-reasoning]"
    ]


# --- the component under mocks -------------------------------------------------------------------


def test_each_family_gets_a_scanned_immutable_kms_repository_that_destroy_deletes_with_its_images():
    resources = _component(("rlinf-embodied", "rlinf-reasoning"), keepImages=4, untaggedExpireDays=2)
    repos = [r for r in resources if r["type"] == "aws:ecr/repository:Repository"]
    assert sorted(r["inputs"]["name"] for r in repos) == ["rlinf-eks/platform/rlinf-embodied", "rlinf-eks/platform/rlinf-reasoning"]
    for repo in repos:
        assert has_inputs(repo, {"imageTagMutability": "IMMUTABLE", "imageScanningConfiguration": {"scanOnPush": True},
                                 "encryptionConfigurations": [{"encryptionType": "KMS"}], "forceDelete": True})  # fmt: skip
    policy = one(resources, "aws:ecr/lifecyclePolicy:LifecyclePolicy", "training-image-rlinf-embodied-lifecycle")
    assert json.loads(policy["inputs"]["policy"]) == lifecycle_policy(4, 2)


def test_the_project_builds_privileged_on_the_x86_image_and_logs_to_its_own_group():
    resources = _component(timeoutMinutes=90, logRetentionDays=14)
    project = one(resources, "aws:codebuild/project:Project")
    assert has_inputs(project, {
        "name": "rlinf-eks-platform-rlinf-embodied", "buildTimeout": 90,
        "environment": {"computeType": "BUILD_GENERAL1_2XLARGE", "image": "aws/codebuild/amazonlinux-x86_64-standard:5.0",
                        "type": "LINUX_CONTAINER", "privilegedMode": True},
        "logsConfig": {"cloudwatchLogs": {"status": "ENABLED", "groupName": "/aws/codebuild/rlinf-eks-platform-rlinf-embodied"}},
        "source": {"type": "S3"},
    })  # fmt: skip
    variables = {v["name"]: v["value"] for v in project["inputs"]["environment"]["environmentVariables"]}
    assert variables["REPOSITORY_URI"].endswith(".dkr.ecr.us-east-1.amazonaws.com/rlinf-eks/platform/rlinf-embodied")
    assert variables["RAY_VERSION"] == "2.49.2"
    assert has_inputs(one(resources, "aws:cloudwatch/logGroup:LogGroup"), {"retentionInDays": 14})
    assert "docker push" in project["inputs"]["source"]["buildspec"]


def test_the_context_bucket_is_versioned_encrypted_private_tls_only_and_expires_old_contexts():
    resources = _component(contextExpireDays=9)
    bucket = one(resources, "aws:s3/bucket:Bucket")
    assert has_inputs(bucket, {"forceDestroy": True})  # destroy empties it (tests/test_destroy_and_releases.py)
    bucket_id = bucket["id"]
    assert has_inputs(one(resources, "aws:s3/bucketVersioning:BucketVersioning"), {"bucket": bucket_id, "versioningConfiguration": {"status": "Enabled"}})
    assert has_inputs(one(resources, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"), {"restrictPublicBuckets": True})
    tls = json.loads(one(resources, "aws:s3/bucketPolicy:BucketPolicy")["inputs"]["policy"])
    assert tls["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rule = one(resources, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")["inputs"]["rules"][0]
    assert rule["expiration"] == {"days": 9} and rule["noncurrentVersionExpiration"] == {"noncurrentDays": 9}
    assert rule["filter"] == {"prefix": "contexts/"}


def test_the_docker_hub_cache_rule_exists_only_with_a_credential_secret():
    assert not [r for r in _component() if r["type"] == "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"]
    resources = _component(dockerHubCache={"credentialArn": SECRET})
    assert has_inputs(one(resources, "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"),
                      {"ecrRepositoryPrefix": "docker-hub", "upstreamRegistryUrl": "registry-1.docker.io", "credentialArn": SECRET})  # fmt: skip
    policy = json.loads(one(resources, "aws:iam/rolePolicy:RolePolicy")["inputs"]["policy"])
    assert any(s["Sid"] == "PullThroughCache" for s in policy["Statement"])


# --- stacks ---------------------------------------------------------------------------------------


def test_the_platform_stack_plans_a_repository_and_a_project_per_family_and_exports_them():
    plan = plan_stack("platform")
    projects = sorted(r["inputs"]["name"] for r in plan.resources if r["type"] == "aws:codebuild/project:Project")
    assert projects == ["rlinf-eks-platform-rlinf-embodied", "rlinf-eks-platform-rlinf-reasoning"]
    assert set(plan.outputs["trainingImages"]) == {"rlinf-embodied", "rlinf-reasoning"}
    assert aws_models.plan_problems([r for r in plan.resources if "training-image" in r["name"]]) == []


def test_a_training_stack_builds_its_own_family_by_default():
    plan = plan_stack("single-node", "images.build=true")
    assert one(plan.resources, "aws:ecr/repository:Repository")["inputs"]["name"] == "rlinf-eks/single-node/simplevla-rl"
    from rlinf_eks.offline.outputs.plan import efficiency_of_plan

    cost = efficiency_of_plan(plan)["cost"]["imageBuild"]
    assert [b["project"] for b in cost["builds"]] == ["rlinf-eks-single-node-simplevla-rl"]
    assert cost["builds"][0]["price"]["usd"] is None and "BUILD_GENERAL1_2XLARGE" in cost["builds"][0]["price"]["reason"]
    assert cost["repositories"][0]["fullUsdPerMonth"] == {"low": 15.0, "high": 20.0}  # 10 images x 15-20 GB x $0.10


def test_an_experiment_cannot_build_images():
    with pytest.raises(Exception, match="images: an experiment reads it from its platform"):
        plan_stack("experiment-embodied", "images.build=true")


# --- the first step's wait ------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_stack_that_trains_has_a_first_step_estimate_and_the_others_none(stack):
    plan = plan_stack(stack)
    estimate = plan.to_json().get("firstStep")
    assert (estimate is not None) == plan.settings.workload.enabled
    if estimate is not None:
        text = render(estimate)
        assert text.startswith("First step") and "image pull" in text and "Ray join" in text and "trainer start" in text
        assert estimate["imagePull"]["sizeGb"]["source"].startswith("estimate")


def test_the_pull_is_size_over_throughput_and_fsx_throughput_follows_the_storage_settings():
    s = settings(storage={"sharedFilesystem": {"enabled": True, "storageCapacityGib": 4800, "throughputMbpsPerTib": 500}},
                 gpuNodes={"nodeCount": 2})  # fmt: skip
    assert fsx_throughput_mb_per_s(s) == 2400
    estimate = first_step(s, "test")
    pull = estimate["imagePull"]
    assert pull["seconds"] == {"low": round(15_000 / 45), "high": round(20_000 / 45)}
    assert estimate["totalSeconds"]["low"] == pull["seconds"]["low"] + 10 + 60
    staging = estimate["inputStaging"]
    assert staging["inputs"] and staging["targetMBps"] == 2400 and staging["secondsPer10Gb"] == round(10_000 / 2400)


def test_the_nvme_raid_moves_containerds_root_and_drops_that_advice():
    # p5.48xlarge has instance-store NVMe: the RAID0 is its default (the storage budget needs a larger root volume without it)
    plain = first_step(settings(gpuNodes={"localNvmeRaid0": False, "rootVolumeGib": 400}), "test")
    raid = first_step(settings(), "test")
    assert "gp3 root volume" in plain["imagePull"]["containerdRoot"] and any("localNvmeRaid0" in c for c in plain["cuts"])
    assert "NVMe RAID0" in raid["imagePull"]["containerdRoot"] and not any("localNvmeRaid0" in c for c in raid["cuts"])


def test_the_quotas_name_codebuilds_concurrent_builds_only_when_images_are_built():
    from rlinf_eks.quotas import render as render_quotas

    assert "CodeBuild" not in render_quotas(settings())
    line = next(l for l in render_quotas(settings(images={"build": True, "computeType": "BUILD_GENERAL1_LARGE"})).splitlines() if "CodeBuild" in l)
    assert "concurrently running builds of BUILD_GENERAL1_LARGE on Linux: at least 1" in line


def test_the_aws_model_checks_of_the_new_types_can_fail():
    def problems(type_, inputs):
        resource = {"type": type_, "name": "x", "id": "x-id", "inputs": inputs}
        return [p for call in aws_models.calls_for(resource) for p in aws_models.validate(call)]

    assert any("repositoryName='Bad Name'" in p for p in problems("aws:ecr/repository:Repository", {"name": "Bad Name"}))
    project = one(_component(), "aws:codebuild/project:Project")["inputs"]
    bad = {**project, "environment": {**project["environment"], "computeType": "BUILD_GENERAL1_HUGE"}}
    assert any("computeType='BUILD_GENERAL1_HUGE': not one of the API's values" in p for p in problems("aws:codebuild/project:Project", bad))
    assert any("retentionInDays=4: one of 1, 3, 5" in p
               for p in problems("aws:cloudwatch/logGroup:LogGroup", {"name": "/aws/codebuild/p", "retentionInDays": 4}))  # fmt: skip
    with pytest.raises(aws_models.Untranslated, match="unread|reach no translated request"):
        aws_models.calls_for({"type": "aws:ecr/lifecyclePolicy:LifecyclePolicy", "name": "x", "id": "x",
                              "inputs": {"repository": "r", "policy": "{}", "extra": 1}})  # fmt: skip


def test_the_buildspec_is_yaml_whose_commands_pass_shellcheck(tmp_path):
    import subprocess

    import yaml

    from rlinf_eks.training_image import BUILDSPEC
    from tests.test_shellcheck import shellcheck_binary

    spec = yaml.safe_load(BUILDSPEC)
    assert spec["version"] == 0.2 and set(spec["phases"]) == {"pre_build", "build", "post_build"}
    commands = [c for phase in spec["phases"].values() for c in phase["commands"]]
    # the variables CodeBuild sets (the project's environment, build-image's overrides, CodeBuild's own)
    script = "#!/bin/sh\n" + "".join(f': "${{{v}:?}}"\n' for v in ("AWS_REGION", "REPOSITORY_URI", "RAY_VERSION", "IMAGE_TAG",
                                                                     "CODEBUILD_BUILD_SUCCEEDING")) + "\n".join(commands) + "\n"  # fmt: skip
    (tmp_path / "buildspec.sh").write_text(script)
    # SC2086 off: ${BASE_IMAGE:+...} is split on purpose (no argument without the cache, two with it)
    done = subprocess.run([shellcheck_binary(), "--norc", "-s", "sh", "-e", "SC2086", str(tmp_path / "buildspec.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_on_bottlerocket_the_layers_go_to_the_data_volume_and_no_al2023_advice_is_given():
    estimate = first_step(settings(gpuNodes={"amiType": "BOTTLEROCKET_x86_64_NVIDIA", "rootVolumeGib": 400}), "test")
    assert "gp3 data volume" in estimate["imagePull"]["containerdRoot"] and estimate["cuts"] == []
