"""The manual Job's deadlines: activeDeadlineSeconds on the Job, and the watchdog (its RBAC, its
Job on the system nodes) that fails a Job whose pods never start; the watchdog script run for
real against a fake ``kubectl``."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.workload import watchdog
from rlinf_eks.workload import RlinfTraining
from tests.harness import of_type, one, plan_stack, run_component, settings
from tests.schemas import builtin_errors

BASH = shutil.which("bash")
JOB = "kubernetes:batch/v1:Job"


def test_given_an_active_deadline_when_planned_then_the_training_job_carries_it():
    # the Indexed Job on its own (multi-node restarts: its JobSet is tests/test_jobset.py's)
    plan = plan_stack("multi-node", "workload.restart.maxRestarts=0", "workload.manual.activeDeadlineSeconds=172800")
    assert one(plan, JOB, "rlinf-job")["inputs"]["spec"]["activeDeadlineSeconds"] == 172800
    assert "activeDeadlineSeconds" not in one(plan_stack("multi-node", "workload.restart.maxRestarts=0"), JOB, "rlinf-job")["inputs"]["spec"]


def test_given_the_manual_launcher_when_planned_then_a_watchdog_with_a_narrow_role_runs_on_the_system_nodes():
    plan = plan_stack("multi-node", "workload.restart.maxRestarts=0")
    role = one(plan, "kubernetes:rbac.authorization.k8s.io/v1:Role")["inputs"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": ["training"], "verbs": ["get", "patch"]},
    ]
    binding = one(plan, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")["inputs"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "training-watchdog", "namespace": "rlinf"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "training-watchdog"}
    job = one(plan, JOB, "rlinf-watchdog")
    spec = job["inputs"]["spec"]
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"role": "system"} and pod["serviceAccountName"] == "training-watchdog"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["image"] == "registry.k8s.io/kubectl:v1.35.0"
    assert spec["activeDeadlineSeconds"] == 3600 + watchdog.OWN_DEADLINE_MARGIN_SECONDS
    assert any(d.endswith("rlinf-job") for d in job["options"]["dependsOn"])
    files = one(plan, "kubernetes:core/v1:ConfigMap", "rlinf-launch")["inputs"]["data"]
    assert "DEADLINE_SECONDS=3600" in files["watchdog.sh"] and "EXPECTED_PODS=2" in files["watchdog.sh"]
    for obj in (role, binding, job["inputs"]):
        assert builtin_errors(obj, "1.34") == []


def test_given_a_changed_training_job_when_planned_then_the_watchdog_template_changes_with_it():
    sha = lambda plan: one(plan, JOB, "rlinf-watchdog")["inputs"]["spec"]["template"]["metadata"]["annotations"][watchdog.TRAINING_JOB_ANNOTATION]  # noqa: E731
    assert sha(plan_stack("multi-node")) == sha(plan_stack("multi-node"))
    assert sha(plan_stack("multi-node")) != sha(plan_stack("multi-node", "workload.image=x/other:2"))


def test_given_no_pre_running_deadline_or_kuberay_when_planned_then_there_is_no_watchdog():
    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=settings(workload={"image": "x/y:1", "manual": {"preRunningDeadlineSeconds": None}}),
            service_account_name="training-sa",
            bucket_name="ckpt",
        )

    for resources in (run_component(program), plan_stack("multi-node-kuberay").resources):
        assert [r["name"] for r in of_type(resources, JOB) if "watchdog" in r["name"]] == []
        assert of_type(resources, "kubernetes:rbac.authorization.k8s.io/v1:Role") == []


def test_given_deadlines_in_the_wrong_order_when_validated_then_the_error_says_so():
    with pytest.raises(ConfigError, match=r"workload\.manual\.preRunningDeadlineSeconds=7200: must be shorter than activeDeadlineSeconds \(3600\)"):
        settings(workload={"image": "x/y:1", "manual": {"activeDeadlineSeconds": 3600, "preRunningDeadlineSeconds": 7200}})


# --- the watchdog script, run --------------------------------------------------------------------

FAKE_KUBECTL = """#!/bin/bash
echo "$*" >> "$FAKE_KUBECTL_LOG"
args=" $* "
case "$args" in
  *" get job "*"conditions"*) printf '%b' "${FAKE_CONDITIONS:-}" ;;
  *" get job "*"startTime"*) echo "${FAKE_START:-}" ;;
  *" get pods "*) printf '%b' "${FAKE_PODS:-}" ;;
  *" annotate job "*|*" patch job "*) exit "${FAKE_WRITE_STATUS:-0}" ;;
esac
"""


@pytest.fixture
def run_watchdog(tmp_path: Path):
    if BASH is None:
        pytest.skip("bash is needed to run the watchdog")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(FAKE_KUBECTL)
    (bin_dir / "kubectl").chmod(0o755)
    script = tmp_path / "watchdog.sh"
    log = tmp_path / "kubectl.log"

    def run(
        *, started_ago: int, pods: str, conditions: str = "", block_started_ago: int | None = None, timeout: float = 30
    ) -> tuple[subprocess.CompletedProcess, list[str]]:
        now = dt.datetime.now(dt.timezone.utc)
        not_before = None if block_started_ago is None else now - dt.timedelta(seconds=block_started_ago)
        text = watchdog.watchdog_script(namespace="rlinf", job_name="training", expected_pods=2, deadline_seconds=600, not_before=not_before)
        script.write_text(text.replace("\nPOLL_SECONDS=30", "\nPOLL_SECONDS=0"))
        start = (now - dt.timedelta(seconds=started_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_KUBECTL_LOG": str(log), "FAKE_START": start, "FAKE_PODS": pods, "FAKE_CONDITIONS": conditions}
        try:
            result = subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as still_waiting:
            result = subprocess.CompletedProcess(still_waiting.cmd, None, "", str(still_waiting.stderr or ""))
        return result, log.read_text().splitlines() if log.exists() else []

    return run


RUNNING = "training-0-abc\\tRunning\\t \\tTrue\\ntraining-1-def\\tRunning\\t \\tTrue\\n"
STUCK = "training-0-abc\\tRunning\\t \\tTrue\\ntraining-1-def\\tPending\\tImagePullBackOff \\tTrue\\n"
UNSCHEDULABLE = "training-0-abc\\tPending\\t \\tUnschedulable\\ntraining-1-def\\tPending\\t \\tUnschedulable\\n"


def test_given_every_pod_running_when_watched_then_the_watchdog_leaves_the_job_alone(run_watchdog):
    result, calls = run_watchdog(started_ago=5000, pods=RUNNING)
    assert result.returncode == 0 and "all 2 pods of training are running" in result.stderr
    assert not any(c.startswith(("patch", "annotate")) or " patch " in c or " annotate " in c for c in calls)


def test_given_a_pod_stuck_pulling_past_the_deadline_when_watched_then_the_job_is_failed_with_the_reason(run_watchdog):
    result, calls = run_watchdog(started_ago=700, pods=STUCK)
    assert result.returncode == 0, result.stderr
    annotate = next(c for c in calls if " annotate job training " in f" {c} ")
    assert "rlinf-eks/failure=pre-running deadline exceeded: 1 of 2 pods running" in annotate
    assert "training-1-def Pending (ImagePullBackOff)" in annotate
    assert "--namespace rlinf patch job training --type=merge -p {\"spec\":{\"activeDeadlineSeconds\":1}}" in calls


def test_given_unschedulable_pods_past_the_deadline_when_watched_then_the_reason_names_it(run_watchdog):
    _, calls = run_watchdog(started_ago=601, pods=UNSCHEDULABLE)
    annotate = next(c for c in calls if " annotate job " in f" {c} ")
    assert "0 of 2 pods running" in annotate and "training-0-abc Pending Unschedulable" in annotate


def test_given_a_finished_job_when_watched_then_the_watchdog_exits_without_touching_it(run_watchdog):
    result, calls = run_watchdog(started_ago=5000, pods=UNSCHEDULABLE, conditions="SuccessCriteriaMet=True\\nComplete=True\\n")
    assert result.returncode == 0 and "has finished" in result.stderr
    assert not any(" patch " in f" {c} " for c in calls)


def test_given_a_capacity_block_that_started_late_when_watched_then_the_deadline_counts_from_the_block(run_watchdog):
    # the Job was created at pulumi up, long before the block; no GPU node could exist until it began
    result, calls = run_watchdog(started_ago=50000, block_started_ago=100, pods=UNSCHEDULABLE, timeout=2)
    assert result.returncode is None, "the watchdog should still be waiting"
    assert not any(" patch " in f" {c} " or " annotate " in f" {c} " for c in calls)
    _, calls = run_watchdog(started_ago=50000, block_started_ago=700, pods=UNSCHEDULABLE)
    annotate = next(c for c in calls if " annotate job " in f" {c} ")
    assert "0 of 2 pods running 700s after the Capacity Block started" in annotate or "0 of 2 pods running 701s after the Capacity Block started" in annotate


def test_given_a_capacity_block_stack_when_planned_then_the_watchdog_waits_for_the_block():
    plan = plan_stack("capacity-block")
    files = one(plan, "kubernetes:core/v1:ConfigMap", "rlinf-launch")["inputs"]["data"]
    start = dt.datetime(2031, 1, 13, 11, 30, tzinfo=dt.timezone.utc)  # capacityBlock.startTime of the stack
    assert f"NOT_BEFORE={int(start.timestamp())}" in files["watchdog.sh"]
    # a Job's own deadline counts from pulumi up, days before the block: the watchdog has none
    assert "activeDeadlineSeconds" not in one(plan, JOB, "rlinf-watchdog")["inputs"]["spec"]
    assert "NOT_BEFORE=0" in one(plan_stack("multi-node"), "kubernetes:core/v1:ConfigMap", "rlinf-launch")["inputs"]["data"]["watchdog.sh"]
