"""The KubeRay operator release and the KubeRay launcher's RayCluster / RayJob, validated against the
KubeRay v1.7.0 CRD schemas with unknown fields rejected."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from rlinf_eks.scheduling import SYSTEM_NODE_LABELS
from rlinf_eks.config import KubeRaySettings
from rlinf_eks.kuberay import KubeRayOperator
from rlinf_eks.workload import RlinfTraining
from tests.harness import has_inputs, of_type, one, run_component, settings
from tests.schemas import crd_errors, release_chart, release_values_errors

RELEASE = "kubernetes:helm.sh/v3:Release"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAY_JOB = "kubernetes:ray.io/v1:RayJob"


def kuberay_settings(nodes: int = 2, **rayjob: Any):
    return settings(
        gpuNodes={"nodeCount": nodes},
        kuberay={"enabled": True},
        workload={"image": "x/rlinf:v0.3", "launcher": "kuberay", "rayVersion": "2.49.2", "rayjob": rayjob},
    )


def render(s, *, shared: bool = True) -> list[dict[str, Any]]:
    def program() -> None:
        operator = KubeRayOperator("kuberay", settings=s.kuberay)
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="bkt",
            shared_volume_claim=pulumi.Output.from_input("fsx-claim") if shared else None,
            hf_token=pulumi.Output.secret("hf-secret-token"),
            operator=operator,
        )

    return run_component(program)


# --- operator -------------------------------------------------------------------------------------


def test_given_kuberay_settings_when_installed_then_the_chart_is_pinned_in_its_namespace_on_the_system_nodes():
    res = run_component(lambda: KubeRayOperator("kuberay", settings={"version": "1.7.0", "namespace": "ray-system"}))
    release = one(res, RELEASE)
    assert has_inputs(
        release,
        {
            "chart": "kuberay-operator",
            "version": "1.7.0",
            "namespace": "ray-system",
            "createNamespace": True,
            "repositoryOpts": {"repo": "https://ray-project.github.io/kuberay-helm/"},
            "values": {"nodeSelector": dict(SYSTEM_NODE_LABELS)},
        },
    )
    assert one(res, "rlinf-eks:index:KubeRayOperator")["name"] == "kuberay"


def test_given_the_operator_values_when_compared_with_the_chart_then_every_key_exists():
    operator = KubeRaySettings()
    release = one(run_component(lambda: KubeRayOperator("kuberay", settings=operator)), RELEASE)
    assert release_chart(release["inputs"]) == f"kuberay-operator-{operator.version}"
    assert release_values_errors(release["inputs"]) == []


# --- RayCluster / RayJob ----------------------------------------------------------------------------


@pytest.mark.parametrize("cluster", ["embedded", "selector"])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("preflight", [True, False])
def test_given_kuberay_when_rendered_then_every_custom_resource_validates_against_the_crd(cluster, shared, preflight):
    s = kuberay_settings(nodes=2 if shared else 1, cluster=cluster)
    if preflight:
        s = s.model_copy(update={"preflight": s.preflight.model_copy(update={"enabled": True})})
    res = render(s, shared=shared)
    resources = of_type(res, RAY_JOB) + of_type(res, RAY_CLUSTER)
    assert resources
    for resource in resources:
        assert crd_errors(resource["inputs"]) == [], resource["name"]


def test_given_embedded_when_rendered_then_the_rayjob_carries_its_cluster_and_releases_it():
    s = kuberay_settings(cluster="embedded", ttlSecondsAfterFinished=300, activeDeadlineSeconds=3600, backoffLimit=1)
    res = render(s)
    assert of_type(res, RAY_CLUSTER) == []
    job = one(res, RAY_JOB)
    spec = job["inputs"]["spec"]
    assert job["inputs"]["metadata"]["name"] == "rlinf-training"
    assert has_inputs(job, {"spec": {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 300, "activeDeadlineSeconds": 3600, "backoffLimit": 1}})
    assert "clusterSelector" not in spec
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == "2.49.2"
    group = cluster["workerGroupSpecs"][0]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 1
    release = one(res, RELEASE)
    assert release["urn"] in job["options"]["dependsOn"]


def test_given_selector_when_rendered_then_the_rayjob_targets_rlinf_cluster_without_backoff_or_shutdown():
    res = render(kuberay_settings(nodes=3, cluster="selector"))
    cluster = one(res, RAY_CLUSTER)
    spec = one(res, RAY_JOB)["inputs"]["spec"]
    assert cluster["inputs"]["metadata"]["name"] == "rlinf-cluster"
    assert spec["clusterSelector"] == {"ray.io/cluster": "rlinf-cluster"}
    for key in ("backoffLimit", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "rayClusterSpec", "suspend"):
        assert key not in spec
    assert cluster["inputs"]["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 2


@pytest.mark.parametrize(
    "version, rayjob, expected",
    [
        ("1.7.0", {}, 3600),  # the default: a job that never reaches Running fails within the hour
        ("1.7.0", {"preRunningDeadlineSeconds": 900}, 900),
        ("1.7.0", {"preRunningDeadlineSeconds": None}, None),
        ("1.5.1", {}, None),  # the field is new in KubeRay 1.6.0: an older CRD would prune it
    ],
)
def test_given_a_rayjob_stuck_before_running_then_the_pre_running_deadline_fails_it(version, rayjob, expected):
    s = settings(
        gpuNodes={"nodeCount": 2},
        kuberay={"enabled": True, "version": version},
        workload={"image": "x/rlinf:v0.3", "launcher": "kuberay", "rayjob": rayjob},
    )
    spec = one(render(s), RAY_JOB)["inputs"]["spec"]
    assert spec.get("preRunningDeadlineSeconds") == expected


def test_given_kuberay_when_rendered_then_names_fit_kuberay_limits():
    res = render(kuberay_settings(cluster="selector"))
    assert len(one(res, RAY_JOB)["inputs"]["metadata"]["name"]) <= 47
    assert len(one(res, RAY_CLUSTER)["inputs"]["metadata"]["name"]) <= 53


def test_given_kuberay_when_rendered_then_ray_start_params_are_strings_and_the_ray_container_is_first():
    spec = one(render(kuberay_settings(cluster="selector")), RAY_CLUSTER)["inputs"]["spec"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    for group in groups:
        assert all(isinstance(v, str) for v in group["rayStartParams"].values())
        container = group["template"]["spec"]["containers"][0]
        assert container["name"].startswith("ray-")
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert "command" not in container  # KubeRay generates `ray start`
    assert spec["headGroupSpec"]["rayStartParams"]["dashboard-host"] == "0.0.0.0"


def test_given_kuberay_when_rendered_then_the_runtime_env_carries_the_plain_env_and_never_a_secret():
    res = render(kuberay_settings())
    spec = one(res, RAY_JOB)["inputs"]["spec"]
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    env = runtime_env["env_vars"]
    assert env["NCCL_DEBUG"] == "WARN" and env["FI_PROVIDER"] == "efa" and env["FI_EFA_FORK_SAFE"] == "1"
    assert env["PYTHONPATH"].startswith("/workspace") and env["PYTHONPATH"].endswith("${PYTHONPATH}")
    assert "HF_TOKEN" not in env and "hf-secret-token" not in spec["runtimeEnvYAML"]
    assert spec["entrypoint"] == "bash /etc/rlinf/driver.sh"
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    head_env = {e["name"]: e for e in head["containers"][0]["env"]}
    assert head_env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "HF_TOKEN"


def test_given_kuberay_without_shared_filesystem_when_rendered_then_the_head_restores_and_syncs_checkpoints():
    spec = one(render(kuberay_settings(nodes=1), shared=False), RAY_JOB)["inputs"]["spec"]
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "workerGroupSpecs" not in spec["rayClusterSpec"]
    assert [c["name"] for c in head["containers"]] == ["ray-head"]
    # the sync is a native sidecar: after the restore, stopped only after the Ray container (the
    # EFA fabric check comes first on every pod)
    # the recipe's model is staged (verl-ppo, no workload.model.source) before the restore
    assert [c["name"] for c in head["initContainers"]] == ["image-check", "config-check", "fabric-check", "stage-model", "restore-checkpoints", "sync-checkpoints"]
    assert head["initContainers"][-1]["restartPolicy"] == "Always"


@pytest.mark.parametrize("cluster", ["embedded", "selector"])
def test_given_k8s_job_mode_when_rendered_then_the_submitter_runs_a_ray_image_on_the_system_nodes(cluster):
    # KubeRay's default submitter runs the head's (training) image with no nodeSelector: tens of GB
    # pulled onto a system node only to run `ray job submit`
    spec = one(render(kuberay_settings(cluster=cluster)), RAY_JOB)["inputs"]["spec"]
    submitter = spec["submitterPodTemplate"]["spec"]
    assert submitter["nodeSelector"] == SYSTEM_NODE_LABELS
    container = submitter["containers"][0]
    assert container["image"] == "rayproject/ray:2.49.2"
    assert "command" not in container  # KubeRay fills in `ray job submit ... -- <entrypoint>`
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_given_a_submitter_image_or_http_mode_when_rendered_then_the_submitter_follows():
    spec = one(render(kuberay_settings(submitterImage="ecr.example/ray:2.49.2")), RAY_JOB)["inputs"]["spec"]
    assert spec["submitterPodTemplate"]["spec"]["containers"][0]["image"] == "ecr.example/ray:2.49.2"
    spec = one(render(kuberay_settings(submissionMode="HTTPMode")), RAY_JOB)["inputs"]["spec"]
    assert "submitterPodTemplate" not in spec


def test_kuberay_settings_accept_a_plain_mapping():
    assert KubeRaySettings.model_validate({"version": "1.7.0"}).namespace == "ray-system"


def test_given_a_misspelt_field_when_validated_then_the_crd_check_rejects_it():
    job = one(render(kuberay_settings()), RAY_JOB)["inputs"]
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    head["template"]["spec"]["containers"][0]["resorces"] = {}
    job["spec"]["shutdownAfterJobFinished"] = True
    errors = crd_errors(job)
    assert any("resorces" in e for e in errors) and any("shutdownAfterJobFinished" in e for e in errors)
