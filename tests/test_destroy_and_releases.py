"""Day 2 and the end: every Helm release installs and upgrades atomically (a failure purges or rolls
back, never leaves the release half-installed for the next `pulumi up`); `pulumi destroy` keeps the
checkpoint bucket and FSx (protect, retainOnDelete) and deletes the build contexts' bucket and the
image repositories with their contents (forceDestroy, forceDelete), so it completes; the plan says
which; the deployer may empty the contexts' bucket and never the checkpoints."""

from __future__ import annotations

import subprocess

import pytest

from rlinf_eks.helm_releases import TIMEOUT_SECONDS
from rlinf_eks.offline.outputs.destroy import destroy_lines
from rlinf_eks.offline.outputs.plan import deployer_policy_of_plan
from tests.harness import ALL_STACKS, ROOT, plan_stack
from tests.iam_eval import Request, authorized

RELEASE = "kubernetes:helm.sh/v3:Release"
# every stack, and the variants with the releases no stack file installs by default
RELEASE_CASES = [(s, ()) for s in ALL_STACKS] + [
    ("multi-node", ("gpuNodes.provisioner=karpenter",)),
    ("multi-node", ("observability.backend=prometheus",)),
    ("single-node", ("autoscaler.enabled=true", "gpuNodes.scaleToZero=true")),
]


@pytest.mark.parametrize("stack, sets", RELEASE_CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_every_helm_release_is_atomic_cleans_up_and_waits_with_a_timeout(stack, sets):
    releases = plan_stack(stack, *sets).of_type(RELEASE)
    for release in releases:
        inputs = release["inputs"]
        assert inputs.get("atomic") is True and inputs.get("cleanupOnFail") is True, release["name"]
        # atomic waits (pulumi-kubernetes turns skipAwait off with it): nothing may ask it not to
        assert not inputs.get("skipAwait") and inputs.get("timeout") == TIMEOUT_SECONDS, release["name"]


@pytest.mark.parametrize("stack, sets", RELEASE_CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_every_helm_release_waits_for_the_system_nodes_that_run_its_controllers(stack, sets):
    # An atomic release is purged when its pods are not ready within the timeout: the controllers
    # (KubeRay, Kueue, JobSet, kube-prometheus-stack, the autoscaler) run on the system nodes, so the
    # Kubernetes provider of a new cluster is created only once the system node group is ACTIVE,
    # never while the nodes are still being launched (the 600 s would count their start).
    plan = plan_stack(stack, *sets)
    groups = [r["urn"] for r in plan.of_type("aws:eks/nodeGroup:NodeGroup") if r["name"].endswith("-system")]
    providers = {r["urn"]: r for r in plan.of_type("pulumi:providers:kubernetes")}
    for release in plan.of_type(RELEASE):
        provider = providers[release["provider"]]
        assert set(groups) <= set(provider["options"]["dependsOn"]), (release["name"], provider["name"])
    assert groups or not plan.of_type(RELEASE) or plan.settings.cluster.existing


def test_the_cases_reach_every_chart():
    charts = {r["inputs"]["chart"].rsplit("/", 1)[-1] for s, sets in RELEASE_CASES for r in plan_stack(s, *sets).of_type(RELEASE)}
    assert {"karpenter", "kube-prometheus-stack", "cluster-autoscaler", "kueue", "jobset", "kuberay-operator"} <= charts, charts


@pytest.fixture(scope="module")
def platform():
    plan = plan_stack("platform")
    return plan, deployer_policy_of_plan(plan)


def test_destroy_keeps_the_data_stores_and_deletes_the_image_build_stores(platform):
    plan, _ = platform
    (checkpoints,) = [r for r in plan.of_type("aws:s3/bucket:Bucket") if r["name"] == "checkpoints-bucket"]
    (contexts,) = [r for r in plan.of_type("aws:s3/bucket:Bucket") if r["name"] != "checkpoints-bucket"]
    assert checkpoints["options"]["protect"] and checkpoints["options"]["retainOnDelete"] and checkpoints["inputs"]["forceDestroy"] is False
    for fs in plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        assert fs["options"]["protect"] and fs["options"]["retainOnDelete"]
    assert contexts["inputs"]["forceDestroy"] is True and not contexts["options"]["protect"]
    repositories = plan.of_type("aws:ecr/repository:Repository")
    assert repositories and all(r["inputs"]["forceDelete"] is True and not r["options"]["protect"] for r in repositories)


def test_the_plan_says_what_destroy_keeps_and_deletes(platform, tmp_path, cli_python):
    plan, _ = platform
    lines = destroy_lines(plan.resources)
    assert lines[0].startswith("Destroy")
    assert any(line.startswith("  keeps bucket checkpoints-bucket (protect and retainOnDelete)") for line in lines)
    assert any(line.startswith("  keeps file system shared-fs-lustre") for line in lines)
    assert any("deletes bucket training-image-contexts with every object version (forceDestroy)" in line for line in lines)
    assert sum("deletes image repository" in line for line in lines) == len(plan.of_type("aws:ecr/repository:Repository"))
    # from the user's side: the plan's tree ends with it
    done = subprocess.run([cli_python, "-m", "rlinf_eks", "plan", "platform", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Destroy (docs/deploying.md):\n  keeps bucket checkpoints-bucket" in done.stdout


def test_the_deployer_may_empty_the_contexts_bucket_and_never_the_checkpoints(platform):
    plan, policy = platform
    contexts = next(r for r in plan.of_type("aws:s3/bucket:Bucket") if r["name"] != "checkpoints-bucket")["name"]
    bucket = f"arn:aws:s3:::{contexts}-0a1b2c3"
    checkpoints = "arn:aws:s3:::checkpoints-bucket-0a1b2c3"
    assert authorized(policy, Request("s3:ListBucketVersions", bucket))
    assert authorized(policy, Request("s3:DeleteObjectVersion", bucket + "/contexts/rlinf-embodied.tar.gz"))
    assert authorized(policy, Request("s3:DeleteObject", bucket + "/contexts/rlinf-embodied.tar.gz"))
    assert not authorized(policy, Request("s3:DeleteObject", checkpoints + "/platform/global_step_10/model.pt"))
    assert not authorized(policy, Request("s3:DeleteObjectVersion", checkpoints + "/platform/global_step_10/model.pt"))
    assert not authorized(policy, Request("s3:ListBucketVersions", checkpoints))
    # a stack that builds no image gets no such statement at all
    single = deployer_policy_of_plan(plan_stack("single-node"))
    assert not any("Empties" in s["Sid"] for s in single["Statement"])


def test_the_destroy_section_is_empty_without_data_stores():
    assert destroy_lines([{"type": "aws:ec2/vpc:Vpc", "name": "vpc", "inputs": {}, "options": {}}]) == []
