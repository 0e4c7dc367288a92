"""RlinfTraining: the manual launcher, every Ray pod (resources, scheduling, env, secrets, volumes),
checkpoints with and without the shared filesystem."""

from __future__ import annotations

import json
from typing import Any, Optional

import pulumi
import pytest

from rlinf_eks import catalog, loading, scheduling
from rlinf_eks.config import StackSettings
from rlinf_eks.offline.engine.engine import SECRET
from rlinf_eks.workload import RlinfTraining
from tests.harness import BEFORE_1_28_ENDED, has_inputs, of_type, one, run_component, settings, with_shared_filesystem
from tests.schemas import builtin_errors

JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET_TYPE = "kubernetes:core/v1:Secret"
HF_TOKEN = "hf_live_token_value"
WANDB_KEY = "wandb-live-key-value"


def render(
    s: StackSettings,
    *,
    shared: Optional[bool] = None,
    secrets: bool = True,
    stack: str = "test",
) -> list[dict[str, Any]]:
    shared = s.shared_filesystem if shared is None else shared
    s = with_shared_filesystem(s, shared)

    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name=pulumi.Output.from_input("training-sa"),
            bucket_name=pulumi.Output.from_input("rlinf-ckpt-bucket"),
            shared_volume_claim=pulumi.Output.from_input("fsx-claim") if shared else None,
            hf_token=pulumi.Output.secret(HF_TOKEN) if secrets else None,
            wandb_api_key=pulumi.Output.secret(WANDB_KEY) if secrets else None,
            operator=None,
        )

    return run_component(program, stack=stack)


def multi_node(**extra: Any) -> StackSettings:
    return settings(gpuNodes={"instanceType": "p5.48xlarge", "nodeCount": 2}, **extra)


def pod_spec(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return one(resources, JOB, "rlinf-job")["inputs"]["spec"]["template"]["spec"]


def ray_container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def manifests(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["inputs"] for r in resources if r["type"].startswith("kubernetes:") and "apiextensions" not in r["type"]]


# --- schema -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        dict(gpuNodes={"nodeCount": 2}),
        dict(gpuNodes={"nodeCount": 2}, preflight={"enabled": True}),
        dict(gpuNodes={"nodeCount": 1, "instanceType": "g6e.48xlarge"}),
        dict(gpuNodes={"nodeCount": 1}, cluster={"kubernetesVersion": "1.33"}),
        dict(gpuNodes={"nodeCount": 1, "instanceType": "g5.2xlarge", "efa": False}, workload={"image": "x/y:1", "mlflowTrackingUri": "http://mlflow:5000"}),
    ],
)
def test_given_a_stack_when_rendered_then_every_builtin_object_validates_strictly_for_the_cluster_version(case):
    s = settings(**case)
    objects = manifests(render(s))
    assert {o["kind"] for o in objects} >= {"Job", "Service", "ConfigMap"}
    for obj in objects:
        if obj["kind"] == "Secret":  # the masked whole-map secret, as the API server would receive it
            obj = {**obj, "stringData": {"HF_TOKEN": "redacted"}}
        assert builtin_errors(obj, s.cluster.kubernetes_version) == [], obj["kind"]


# --- the manual launcher -------------------------------------------------------------------------


def test_given_n_nodes_when_manual_then_an_indexed_job_of_n_pods_succeeds_with_index_0_and_fails_on_any_failure():
    res = render(multi_node())
    job = one(res, JOB, "rlinf-job")
    assert has_inputs(
        job,
        {
            "metadata": {"name": "training", "annotations": {"pulumi.com/skipAwait": "true"}},
            "spec": {
                "completions": 2,
                "parallelism": 2,
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
                "template": {"spec": {"subdomain": "training-svc", "restartPolicy": "Never"}},
            },
        },
    )
    assert "ttlSecondsAfterFinished" not in job["inputs"]["spec"]
    assert job["options"]["deleteBeforeReplace"]


def test_given_kubernetes_1_30_when_manual_then_no_success_policy_is_sent(monkeypatch):
    monkeypatch.setattr(loading, "clock", lambda: BEFORE_1_28_ENDED)
    job = one(render(settings(cluster={"kubernetesVersion": "1.30"})), JOB, "rlinf-job")
    assert "successPolicy" not in job["inputs"]["spec"]


def test_given_manual_when_rendered_then_the_headless_service_selects_the_job_pods_before_they_are_ready():
    res = render(multi_node())
    service = one(res, SERVICE)
    assert has_inputs(service, {"metadata": {"name": "training-svc"}, "spec": {"clusterIP": "None", "publishNotReadyAddresses": True}})
    labels = one(res, JOB, "rlinf-job")["inputs"]["spec"]["template"]["metadata"]["labels"]
    assert service["inputs"]["spec"]["selector"].items() <= labels.items()
    assert {p["port"] for p in service["inputs"]["spec"]["ports"]} >= {6379}


def test_given_manual_when_rendered_then_the_pod_runs_the_mounted_launch_script():
    res = render(multi_node())
    spec = pod_spec(res)
    config_map = one(res, CONFIG_MAP)
    assert ray_container(spec)["command"] == ["/bin/bash", "/etc/rlinf/launch.sh"]
    volume = next(v for v in spec["volumes"] if v["name"] == "launch")
    assert volume["configMap"]["name"] == config_map["inputs"]["metadata"]["name"]
    assert {"launch.sh", "trainer.sh"} <= set(config_map["inputs"]["data"])


def test_given_a_changed_script_when_rendered_then_the_job_template_changes():
    before = one(render(multi_node()), JOB, "rlinf-job")["inputs"]["spec"]["template"]["metadata"]["annotations"]
    after = one(render(multi_node(workload={"image": "x/y:1", "joinTimeoutSeconds": 600})), JOB, "rlinf-job")["inputs"]["spec"]["template"]["metadata"]["annotations"]
    assert before["rlinf-eks/launch-sha256"] != after["rlinf-eks/launch-sha256"]


# --- every Ray pod: resources and scheduling ------------------------------------------------------


def _quantity_mib(value: str) -> int:
    units = {"Gi": 1024, "Mi": 1}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return int(value[: -len(suffix)]) * factor
    raise AssertionError(f"unexpected memory quantity {value!r}")


def _millicpu(value: str) -> int:
    return int(value[:-1]) if value.endswith("m") else int(value) * 1000


def pod_requests(spec: dict[str, Any]) -> tuple[int, int]:
    """(millicpu, MiB) the scheduler reserves: max(init containers, sum of app containers and
    sidecars); a sidecar (init container with restartPolicy Always) runs beside the app containers."""
    sidecars = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    app_cpu = sum(_millicpu(c["resources"]["requests"]["cpu"]) for c in spec["containers"] + sidecars)
    app_mem = sum(_quantity_mib(c["resources"]["requests"]["memory"]) for c in spec["containers"] + sidecars)
    init = [c for c in spec.get("initContainers", []) if c not in sidecars]
    init_cpu = max([_millicpu(c["resources"]["requests"]["cpu"]) for c in init], default=0)
    init_mem = max([_quantity_mib(c["resources"]["requests"]["memory"]) for c in init], default=0)
    return max(app_cpu, init_cpu), max(app_mem, init_mem)


EFA_TYPES = [name for name, row in catalog.CATALOG.items() if row.efa_capable]


@pytest.mark.parametrize("instance_type", EFA_TYPES)
@pytest.mark.parametrize("shared", [True, False])
def test_given_an_instance_type_when_rendered_then_one_pod_takes_every_gpu_and_efa_device_and_fits_the_node(instance_type, shared):
    s = settings(gpuNodes={"instanceType": instance_type, "nodeCount": 1}, preflight={"enabled": True})
    spec = pod_spec(render(s, shared=shared))
    instance = catalog.CATALOG[instance_type]
    limits = ray_container(spec)["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == str(instance.gpus)
    assert limits["vpc.amazonaws.com/efa"] == str(catalog.efa_device_count(instance)) == str(instance.max_efa)
    assert limits["hugepages-2Mi"] == f"{s.gpu_nodes.hugepages_gib}Gi"
    for container in spec["containers"] + spec.get("initContainers", []):
        assert container["resources"]["requests"] == container["resources"]["limits"], container["name"]
    alloc_cpu, alloc_mem = catalog.allocatable(instance, s.gpu_nodes.hugepages_gib * 1024)
    cpu, mem = pod_requests(spec)
    assert cpu <= alloc_cpu - catalog.DAEMONSET_MILLICPU
    assert mem <= alloc_mem - catalog.DAEMONSET_MEMORY_MIB


def test_given_efa_off_when_rendered_then_no_efa_is_requested_nor_configured():
    s = settings(gpuNodes={"instanceType": "g5.48xlarge", "efa": False})
    container = ray_container(pod_spec(render(s)))
    assert "vpc.amazonaws.com/efa" not in container["resources"]["limits"]
    assert "FI_PROVIDER" not in env_of(container)


def test_given_the_gpu_node_group_when_rendered_then_the_pods_tolerate_its_taints_and_select_its_labels():
    s = multi_node()
    spec = pod_spec(render(s))
    for taint in scheduling.node_taints():
        assert any(
            t["key"] == taint["key"] and t["effect"] == taint["effect"] and (t["operator"] == "Exists" or t.get("value") == taint["value"])
            for t in spec["tolerations"]
        ), taint
    assert spec["nodeSelector"] and spec["nodeSelector"].items() <= scheduling.node_labels(s.gpu_nodes).items()
    assert spec["serviceAccountName"] == "training-sa"


def test_given_a_pod_when_rendered_then_dev_shm_is_memory_backed_and_sized_from_the_shape():
    s = multi_node()
    spec = pod_spec(render(s))
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")["emptyDir"]
    shape = catalog.pod_shape_for(s.gpu_nodes.instance, s.gpu_nodes.hugepages_gib * 1024, s.workload.shm_fraction)
    assert shm["medium"] == "Memory"
    assert _quantity_mib(shm["sizeLimit"]) == shape.shm_mib
    assert {"name": "dshm", "mountPath": "/dev/shm"} in ray_container(spec)["volumeMounts"]


def test_given_a_pod_when_rendered_then_it_is_not_privileged_and_only_adds_ipc_lock():
    spec = pod_spec(render(multi_node(preflight={"enabled": True})))
    for container in spec["containers"] + spec.get("initContainers", []):
        ctx = container.get("securityContext", {})
        assert not ctx.get("privileged"), container["name"]
        assert set(ctx.get("capabilities", {}).get("add", [])) <= {"IPC_LOCK"}


def test_given_every_resource_quantity_when_rendered_then_it_is_a_string():
    spec = pod_spec(render(multi_node(preflight={"enabled": True}), shared=False))
    for container in spec["containers"] + spec.get("initContainers", []):
        for section in ("requests", "limits"):
            assert all(isinstance(v, str) for v in container["resources"][section].values()), container["name"]


# --- env and secrets ----------------------------------------------------------------------------


def test_given_p5_when_rendered_then_the_seed_env_efa_rdma_and_socket_interface_are_set():
    env = env_of(ray_container(pod_spec(render(multi_node()))))
    assert env["NCCL_DEBUG"] == "WARN"
    assert env["TORCH_NCCL_AVOID_RECORD_STREAMS"] == "1"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"  # verl-ppo: its run script's
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_FORK_SAFE"] == "1"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == env["RLINF_COMM_NET_DEVICES"] == "eth0"
    assert "MLFLOW_TRACKING_URI" not in env


@pytest.mark.parametrize("dialect", ["rlinf-embodied", "rlinf-reasoning", "verl-ppo"])
def test_given_any_dialect_when_rendered_then_python_is_unbuffered_and_the_allocator_is_upstreams(dialect):
    """Buffered output reads as silence to the progress supervisor (workload.progressTimeoutSeconds):
    PYTHONUNBUFFERED covers the trainer, the Ray workers it starts and upstream's lost `python -u`."""
    backend = "vllm" if dialect == "rlinf-reasoning" else "hf"
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": dialect}, "rollout": {"backend": backend, "tensorParallelSize": 1}})
    spec = pod_spec(render(s))
    env = env_of(ray_container(spec))
    assert env["PYTHONUNBUFFERED"] == "1"
    # the allocator setting only where upstream's run script sets it: SimpleVLA-RL's does, RLinf's
    # do not (and RLinf's same-GPU CUDA IPC with expandable segments needs CAP_SYS_PTRACE)
    assert ("PYTORCH_CUDA_ALLOC_CONF" in env) == (dialect == "verl-ppo")
    checks = [c for c in spec.get("initContainers", []) if c["name"].endswith("-check")]
    assert checks
    for container in checks:  # the checks run the trainer's imports with the pod's environment
        assert env_of(container)["PYTHONUNBUFFERED"] == "1", container["name"]


def test_given_a_type_without_gpudirect_rdma_when_rendered_then_device_rdma_is_not_set():
    env = env_of(ray_container(pod_spec(render(settings(gpuNodes={"instanceType": "g6e.48xlarge"})))))
    assert env["FI_PROVIDER"] == "efa"
    assert "FI_EFA_USE_DEVICE_RDMA" not in env


def test_given_mlflow_and_user_env_when_rendered_then_both_reach_the_pod_and_the_user_wins():
    s = settings(workload={"image": "x/y:1", "mlflowTrackingUri": "http://mlflow.rlinf:5000", "env": {"NCCL_DEBUG": "INFO", "EXTRA": "1"}})
    env = env_of(ray_container(pod_spec(render(s))))
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow.rlinf:5000"
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["EXTRA"] == "1"


def test_given_secrets_when_rendered_then_they_live_only_in_a_secret_and_pods_reference_them():
    res = render(multi_node())
    secret = one(res, SECRET_TYPE)
    assert secret["inputs"]["stringData"] == SECRET
    env = env_of(ray_container(pod_spec(res)))
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": secret["inputs"]["metadata"]["name"], "key": "HF_TOKEN"}}
    assert env["WANDB_API_KEY"]["secretKeyRef"]["key"] == "WANDB_API_KEY"
    dumped = json.dumps(res)
    assert HF_TOKEN not in dumped and WANDB_KEY not in dumped


def test_given_no_secrets_when_rendered_then_no_secret_and_no_reference():
    res = render(multi_node(), secrets=False)
    assert of_type(res, SECRET_TYPE) == []
    env = env_of(ray_container(pod_spec(res)))
    assert "HF_TOKEN" not in env and "WANDB_API_KEY" not in env


# --- checkpoints ----------------------------------------------------------------------------------


def test_given_the_shared_filesystem_when_rendered_then_it_is_mounted_and_holds_the_run():
    s = multi_node()
    res = render(s, shared=True, stack="multi-node")
    spec = pod_spec(res)
    mount_path = s.storage.shared_filesystem.mount_path
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "fsx-claim"}} in spec["volumes"]
    assert {"name": "shared", "mountPath": mount_path} in ray_container(spec)["volumeMounts"]
    assert env_of(ray_container(spec))["RLINF_RUN_DIR"] == f"{mount_path}/multi-node"
    assert [c["name"] for c in spec["containers"]] == ["ray"]


def test_given_no_shared_filesystem_when_rendered_then_the_run_is_restored_from_and_synced_to_s3():
    res = render(settings(), shared=False, stack="single-node")
    spec = pod_spec(res)
    restore = next(c for c in spec["initContainers"] if c["name"] == "restore-checkpoints")
    sync = next(c for c in spec["initContainers"] if c["name"] == "sync-checkpoints")
    for container in (restore, sync):
        assert env_of(container)["S3_URI"] == "s3://rlinf-ckpt-bucket/single-node"
        assert container["image"].startswith("public.ecr.aws/aws-cli/aws-cli:2.")
    assert ":latest" not in sync["image"]
    assert spec["containers"][0]["name"] == "ray"
    data = one(res, CONFIG_MAP)["inputs"]["data"]
    assert 'aws s3 sync "${S3_URI}/" "${RUN_DIR}/"' in data["restore.sh"]
    assert 'aws s3 sync "${RUN_DIR}/" "${S3_URI}/"' in data["sync.sh"]
    assert "--delete" not in data["sync.sh"]


@pytest.mark.parametrize(
    "s, claim, message",
    [
        # two nodes: the settings use the shared filesystem, and no claim came with them
        (multi_node(), None, r"the settings use the shared filesystem .* but no shared_volume_claim was given"),
        # one node, storage.sharedFilesystem.enabled unset: no shared filesystem, yet a claim came
        (settings(), "fsx-claim", r"a shared_volume_claim was given but the settings do not use the shared filesystem"),
        (settings(storage={"sharedFilesystem": {"enabled": False}}), "fsx-claim", r"a shared_volume_claim was given but"),
    ],
)
def test_given_a_claim_the_settings_disagree_with_when_built_then_the_mismatch_is_named(s, claim, message):
    # the settings decide whether the run has the shared filesystem: a missing or unwanted claim is
    # an error, never a silent fallback to node-local checkpoints (or an FSx volume nothing uses)
    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="rlinf-ckpt-bucket",
            shared_volume_claim=pulumi.Output.from_input(claim) if claim else None,
        )

    with pytest.raises(ValueError, match=message):
        run_component(program)


def test_given_a_claim_the_settings_agree_with_when_built_then_the_run_is_the_one_resolve_run_gives():
    from rlinf_eks.workload import resolve_run

    s = settings(storage={"sharedFilesystem": {"enabled": True}})
    spec = pod_spec(render(s, stack="single-node"))
    run = resolve_run(s, "single-node")
    assert run.shared and run.paths.root == f"{s.storage.shared_filesystem.mount_path.rstrip('/')}/single-node"
    assert env_of(ray_container(spec))["RLINF_RUN_DIR"] == run.paths.root
    assert "restore-checkpoints" not in [c["name"] for c in spec.get("initContainers", [])]


def test_given_a_grace_period_when_rendered_then_the_pod_gets_it():
    spec = pod_spec(render(settings(workload={"image": "x/y:1", "terminationGracePeriodSeconds": 1800})))
    assert spec["terminationGracePeriodSeconds"] == 1800


@pytest.mark.parametrize("version, native", [("1.34", True), ("1.29", True), ("1.28", False)])
def test_given_no_shared_filesystem_when_rendered_then_the_sync_is_a_native_sidecar_where_the_cluster_has_them(version, native, monkeypatch):
    monkeypatch.setattr(loading, "clock", lambda: BEFORE_1_28_ENDED)
    # a regular sync container is stopped together with the trainer: on SIGTERM it uploads while
    # the checkpoint is still being written, and it keeps the Job pod Running when the trainer's
    # container dies without writing its exit code. A native sidecar is stopped after the trainer.
    spec = pod_spec(render(settings(cluster={"kubernetesVersion": version}), shared=False))
    init = [c["name"] for c in spec.get("initContainers", [])]
    app = [c["name"] for c in spec["containers"]]
    if native:
        assert "sync-checkpoints" not in app
        assert init.index("sync-checkpoints") > init.index("restore-checkpoints")
        assert next(c for c in spec["initContainers"] if c["name"] == "sync-checkpoints")["restartPolicy"] == "Always"
    else:
        assert app == ["ray", "sync-checkpoints"] and "sync-checkpoints" not in init


def test_settings_given_as_a_mapping_pass_every_rule_of_the_loading_step():
    # A library user may hand RlinfTraining the stack file's mapping; it is loaded like a stack
    # (cross-section and trainer rules included), not merely parsed section by section.
    from rlinf_eks.config import ConfigError

    data = {"workload": {"image": "example.com/rlinf:test", "launcher": "kuberay"}, "cluster": {"deployFromVpc": True}}
    with pytest.raises(ConfigError, match="workload.launcher='kuberay': needs the KubeRay operator"):
        run_component(lambda: RlinfTraining("rlinf", settings=data, service_account_name="training-sa", bucket_name="b"))


# --- retention on a claim the program brings ----------------------------------------------------


def _retention_of(launch: str) -> str:
    return next(line for line in launch.splitlines() if line.startswith("KEEP_LOCAL="))


@pytest.mark.parametrize("exported, kept", [(False, "KEEP_LOCAL=0"), (True, "KEEP_LOCAL=2")])
def test_the_launcher_removes_checkpoints_from_a_shared_claim_only_where_it_is_exported_to_the_bucket(exported, kept):
    # A program's own ReadWriteMany claim (EFS, NFS, an FSx without a data repository association)
    # exports nothing: removing older checkpoints from it 15 minutes after their marker lost them.
    # Only the stack's own SharedFilesystem (whose association exports new files) says it is.
    s = with_shared_filesystem(multi_node(), True)

    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="rlinf-ckpt-bucket",
            shared_volume_claim="own-claim",
            shared_volume_exported=exported,
        )

    launch = one(run_component(program), CONFIG_MAP, "rlinf-launch")["inputs"]["data"]["launch.sh"]
    assert _retention_of(launch) == kept


def test_the_stacks_own_shared_filesystem_is_exported_so_the_launcher_retains():
    from tests.harness import plan_stack

    plan = plan_stack("multi-node")
    (config_map,) = [r for r in plan.of_type(CONFIG_MAP) if r["name"] == "rlinf-launch"]
    assert _retention_of(config_map["inputs"]["data"]["launch.sh"]) == "KEEP_LOCAL=2"
