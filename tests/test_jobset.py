"""Gang restart (workload.restart): the JobSet around the manual launcher's Indexed Job, the JobSet
controller's Helm release, the restart backoff run for real, and the RayJob's backoffLimit."""

from __future__ import annotations

import copy
import re
import os
import signal
import subprocess
import time
from typing import Any

import pulumi
import pytest

from rlinf_eks.scheduling import SYSTEM_NODE_LABELS
from rlinf_eks.config import ConfigError, RestartSettings
from rlinf_eks.offline.outputs import resilience
from rlinf_eks.jobset import CHART, JobSetController, controller_values
from rlinf_eks.plan_reader import pod_templates
from rlinf_eks.workload import RlinfTraining, exit_codes, manual, scripts
from rlinf_eks.workload.network_policy import training_network_policy_spec
from tests.harness import has_inputs, of_type, one, plan_stack, run_component, settings, with_shared_filesystem
from tests import schemas
from tests.schemas import builtin_errors

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
JOB = "kubernetes:batch/v1:Job"
SERVICE = "kubernetes:core/v1:Service"


def restart_settings(nodes: int = 2, max_restarts: int = 3, **restart: Any):
    return settings(
        gpuNodes={"nodeCount": nodes},
        workload={"image": "x/rlinf:v0.3", "launcher": "manual", "restart": {"maxRestarts": max_restarts, **restart}},
    )


def render(s) -> list[dict[str, Any]]:
    s = with_shared_filesystem(s, True)  # the claim below

    def program() -> None:
        controller = JobSetController("jobset", settings=s.workload.restart) if s.workload.uses_jobset else None
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="bkt",
            shared_volume_claim=pulumi.Output.from_input("fsx-claim"),
            jobset=controller,
        )

    return run_component(program)


def jobset_errors(obj: dict[str, Any]) -> list[str]:
    return schemas.jobset_errors(obj, restart_settings().cluster.kubernetes_version)


def child_job(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]


# --- the JobSet controller ----------------------------------------------------------------------------


def test_given_restart_settings_when_the_controller_is_installed_then_the_oci_chart_is_pinned_on_the_system_nodes():
    res = run_component(lambda: JobSetController("jobset", settings=RestartSettings(maxRestarts=2)))
    release = one(res, RELEASE)
    assert has_inputs(release, {"chart": "oci://registry.k8s.io/jobset/charts/jobset", "version": "0.12.0",
                                "namespace": "jobset-system", "createNamespace": True})
    assert "repositoryOpts" not in release["inputs"]  # an OCI reference has no repository
    assert release["inputs"]["values"]["controller"]["nodeSelector"] == dict(SYSTEM_NODE_LABELS)


def test_given_the_controller_values_when_compared_with_the_chart_then_every_key_exists():
    restart = RestartSettings(maxRestarts=2)
    release = one(run_component(lambda: JobSetController("jobset", settings=restart)), RELEASE)
    assert schemas.release_chart(release["inputs"]) == f"jobset-{restart.jobset_version}"
    assert schemas.release_values_errors(release["inputs"]) == []
    values = controller_values()
    assert release["inputs"]["values"] == values
    assert CHART.startswith("oci://")
    # a ServiceMonitor would fail the install on a cluster without the Prometheus Operator
    assert values["prometheus"] == {"enable": False}


@pytest.mark.parametrize("version", ["0.10.0", "0.9.1", "0.8.1"])
def test_given_a_jobset_chart_older_than_0_10_1_when_parsed_then_it_is_refused_by_name(version):
    # 0.10.0 has the field in its API, but its chart's CRD does not: the patterns would be pruned
    with pytest.raises(ConfigError, match=r"workload\.restart\.jobsetVersion.*0\.10\.1 or newer"):
        restart_settings(jobsetVersion=version)


@pytest.mark.parametrize("version", ["0.10.1", "0.11.1", "0.12.0"])
def test_given_a_jobset_chart_with_the_message_patterns_in_its_crd_when_parsed_then_it_is_accepted(version):
    assert restart_settings(jobsetVersion=version).workload.restart.jobset_version == version


# --- the rendered JobSet -----------------------------------------------------------------------------


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_given_restarts_when_rendered_then_the_jobset_and_its_job_validate_against_the_real_schemas(nodes):
    s = restart_settings(nodes=nodes)
    res = render(s)
    jobset = one(res, JOBSET)
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", **jobset["inputs"]}
    assert jobset_errors(obj) == []
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": manual.pod_names(True).job, "namespace": "rlinf"},
           "spec": child_job(jobset)}
    assert builtin_errors(job, s.cluster.kubernetes_version) == []
    spec = child_job(jobset)
    assert spec["completions"] == spec["parallelism"] == nodes and spec["completionMode"] == "Indexed"
    assert spec["backoffLimit"] == 0
    assert [t.replicas for t in pod_templates(obj)] == [nodes]


def test_given_a_misspelt_failure_policy_field_when_validated_then_the_schema_rejects_it():
    res = render(restart_settings())
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", **copy.deepcopy(one(res, JOBSET)["inputs"])}
    obj["spec"]["failurePolicy"]["maxRestart"] = obj["spec"]["failurePolicy"].pop("maxRestarts")
    obj["spec"]["failurePolicy"]["rules"][0]["action"] = "RestartJob"
    errors = jobset_errors(obj)
    assert any("maxRestart" in e for e in errors) and any("RestartJob" in e for e in errors)


def test_given_restarts_when_rendered_then_each_jobset_rule_matches_the_pod_failure_rule_it_is_meant_for():
    res = render(restart_settings(max_restarts=5))
    jobset = one(res, JOBSET)
    policy = jobset["inputs"]["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 5 and policy["restartStrategy"] == "BlockingRecreate"
    pod_rules = child_job(jobset)["podFailurePolicy"]["rules"]
    rules = {rule["name"]: rule for rule in policy["rules"]}

    def pod_rule_index(rule: dict[str, Any]) -> int:
        (pattern,) = rule["onJobFailureMessagePatterns"]
        return int(re.fullmatch(r"matching FailJob rule at index (\d+)\$", pattern).group(1))

    node = pod_rules[pod_rule_index(rules["NodeFault"])]
    assert node["action"] == "FailJob" and node["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    assert rules["NodeFault"]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
    repeated = pod_rules[pod_rule_index(rules["RepeatedFailure"])]
    assert repeated["action"] == "FailJob" and repeated["onExitCodes"] == {"containerName": "ray", "operator": "In",
                                                                          "values": [scripts.REPEATED_FAILURE, exit_codes.RUN_MISMATCH]}
    assert rules["RepeatedFailure"]["action"] == "FailJobSet"
    # the Job controller's message for a FailJob match (pkg/controller/job, pod_failure_policy.go)
    message = f"Container ray for pod rlinf/training-training-0-0 failed with exit code {scripts.REPEATED_FAILURE} matching FailJob rule at index 1"
    assert re.search(rules["RepeatedFailure"]["onJobFailureMessagePatterns"][0], message)
    assert not re.search(rules["NodeFault"]["onJobFailureMessagePatterns"][0], message)
    assert rules["Deadline"] == {"name": "Deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}


def test_given_restarts_when_rendered_then_names_labels_and_the_watchdog_follow_the_jobset():
    res = render(restart_settings())
    assert of_type(res, JOB) and [j["inputs"]["metadata"]["name"] for j in of_type(res, JOB)] == ["training-watchdog"]
    assert [s["inputs"]["metadata"]["name"] for s in of_type(res, SERVICE)] == []  # JobSet makes the headless Service
    jobset = one(res, JOBSET)
    assert jobset["inputs"]["metadata"]["name"] == "training"
    assert one(res, RELEASE)["urn"] in jobset["options"]["dependsOn"]
    pod = child_job(jobset)["template"]
    selector = training_network_policy_spec(manual.LAUNCHER_LABELS).pod_selector.match_labels
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert "subdomain" not in pod["spec"]
    assert pod["spec"]["initContainers"][0]["name"] == manual.BACKOFF_CONTAINER
    config = one(res, "kubernetes:core/v1:ConfigMap")["inputs"]["data"]
    assert "HEAD_HOST=training-training-0-0.training\n" in config["launch.sh"]
    assert "JOB_NAME=training-training-0\n" in config["watchdog.sh"]
    role = one(res, "kubernetes:rbac.authorization.k8s.io/v1:Role")
    assert role["inputs"]["rules"][1]["resourceNames"] == ["training-training-0"]


def test_given_no_restarts_when_rendered_then_the_indexed_job_and_its_service_stay_as_before():
    res = render(restart_settings(max_restarts=0))
    assert of_type(res, JOBSET) == []
    job = one(res, JOB, "rlinf-job")
    assert "podFailurePolicy" not in job["inputs"]["spec"]
    assert job["inputs"]["spec"]["template"]["spec"]["subdomain"] == "training-svc"
    assert one(res, SERVICE)["inputs"]["metadata"]["name"] == "training-svc"
    assert manual.head_host() == "training-0.training-svc"


# --- the restart backoff, run ----------------------------------------------------------------------


def backoff_script(step: int) -> str:
    container = manual.backoff_container(restart_settings(backoffSeconds=step))
    assert container.command[:2] == ["/bin/bash", "-c"]
    return container.command[2]


@pytest.mark.parametrize("attempt, waits", [("", 0), ("0", 0), ("2", 2), ("x1", 0), ("50", 10)])
def test_given_a_restart_attempt_when_the_backoff_runs_then_it_waits_attempt_times_the_step_capped(attempt, waits):
    result = subprocess.run(["bash", "-c", backoff_script(0), "backoff"], env={"RESTART_ATTEMPT": attempt, "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "waiting 0s" in result.stderr  # step 0: no wait at all
    script = backoff_script(1)
    if waits > 3:
        assert f"MAX_BACKOFF_SECONDS={manual.MAX_BACKOFF_FACTOR}" in script
        return
    start = time.monotonic()
    result = subprocess.run(["bash", "-c", script, "backoff"], env={"RESTART_ATTEMPT": attempt, "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert f"waiting {waits}s" in result.stderr
    assert waits <= elapsed < waits + 1.5


def test_given_a_capped_backoff_when_computed_then_attempt_50_waits_ten_steps(tmp_path):
    # the cap, without sleeping: the step is 60 s, so report the computed delay and stop at once
    script = backoff_script(60).replace('sleep "${delay}" &', 'exit 0 &')
    result = subprocess.run(["bash", "-c", script, "backoff"], env={"RESTART_ATTEMPT": "50", "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=30)
    assert "waiting 600s" in result.stderr


def test_given_a_waiting_backoff_when_the_pod_is_stopped_then_it_exits_143_at_once():
    # a process group of its own: the script's `sleep 180` outlives it (in a pod, PID 1's exit ends it)
    proc = subprocess.Popen(["bash", "-c", backoff_script(60), "backoff"], env={"RESTART_ATTEMPT": "3", "PATH": "/usr/bin:/bin"},
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
        assert time.monotonic() - start < 5
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stderr.close()


# --- config and KubeRay ------------------------------------------------------------------------------


def test_given_kuberay_with_restarts_when_parsed_then_the_rayjob_backoff_limit_is_max_restarts():
    s = settings(kuberay={"enabled": True}, workload={"image": "x/rlinf:v0.3", "launcher": "kuberay", "restart": {"maxRestarts": 2}})
    assert s.workload.rayjob_backoff_limit == 2 and not s.workload.uses_jobset
    from rlinf_eks.workload.rayjob import ray_job_spec

    spec = ray_job_spec(s, entrypoint="bash driver.sh", runtime_env="", cluster_spec={})
    assert spec["backoffLimit"] == 2


@pytest.mark.parametrize(
    "rayjob, message",
    [
        ({"cluster": "selector"}, r"workload\.restart\.maxRestarts.*2.*rayjob\.cluster: embedded"),
        ({"backoffLimit": 1}, r"workload\.rayjob\.backoffLimit.*1.*restart\.maxRestarts \(2\)"),
    ],
)
def test_given_kuberay_restarts_that_cannot_apply_when_parsed_then_the_error_names_the_key(rayjob, message):
    with pytest.raises(ConfigError, match=message):
        settings(kuberay={"enabled": True},
                 workload={"image": "x/rlinf:v0.3", "launcher": "kuberay", "restart": {"maxRestarts": 2}, "rayjob": rayjob})


# --- the plan ------------------------------------------------------------------------------------------


def test_given_the_multi_node_stack_when_planned_then_it_restarts_with_a_jobset_installed_before_the_gpu_nodes():
    plan = plan_stack("multi-node")
    jobset = one(plan, JOBSET)
    assert jobset["inputs"]["spec"]["failurePolicy"]["maxRestarts"] == 3
    release = one(plan, RELEASE, "jobset-controller")
    assert release["urn"] in jobset["options"]["dependsOn"]
    gpu = one(plan, "rlinf-eks:index:EfaGpuNodeGroup")
    # the GPU node group depends on everything else (program.build): on the JobSet controller too
    assert release["urn"] in gpu["options"]["dependsOn"]
    text = resilience.render(plan.settings, "multi-node")
    assert "up to maxRestarts=3 times" in text and "without counting against maxRestarts" in text
    assert "waits N x 60s" in text and "the JobSet gives up" in text


def test_given_a_single_node_stack_when_planned_then_no_jobset_and_the_plan_says_no_automatic_restart():
    plan = plan_stack("single-node")
    assert of_type(plan, JOBSET) == [] and of_type(plan, "rlinf-eks:index:JobSetController") == []
    assert "none automatic (workload.restart.maxRestarts is 0)" in resilience.render(plan.settings, "single-node")
