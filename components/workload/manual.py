"""The manual launcher (the seed's default): a headless Service and an Indexed Job.

Pod ``i`` of the Indexed Job gets the hostname ``training-<i>`` (Job controller) and, with
``subdomain: training-svc`` and the headless Service of that name, the DNS name
``training-<i>.training-svc``: pod 0 is the Ray head at ``training-0.training-svc:6379``.
"""

from __future__ import annotations

from typing import Optional

import pulumi_kubernetes as k8s

from .pod import APP_LABELS, core

JOB_NAME = "training"
SERVICE_NAME = "training-svc"
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265
RAY_CLIENT_PORT = 10001
LAUNCHER_LABELS = {**APP_LABELS, "app.kubernetes.io/component": "manual-ray"}


def head_host() -> str:
    return f"{JOB_NAME}-0.{SERVICE_NAME}"


def headless_service_spec() -> core.ServiceSpecArgs:
    """Headless, and publishing not-ready pods: the workers must resolve the head as soon as its
    pod has an IP (no readiness probe gates Ray's start). NCCL and Gloo use ephemeral ports; a
    headless Service does not filter ports, the ones listed only name Ray's."""
    return core.ServiceSpecArgs(
        cluster_ip="None",
        publish_not_ready_addresses=True,
        selector=dict(LAUNCHER_LABELS),
        ports=[
            core.ServicePortArgs(name="gcs", port=RAY_GCS_PORT, target_port=RAY_GCS_PORT),
            core.ServicePortArgs(name="dashboard", port=RAY_DASHBOARD_PORT, target_port=RAY_DASHBOARD_PORT),
            core.ServicePortArgs(name="client", port=RAY_CLIENT_PORT, target_port=RAY_CLIENT_PORT),
        ],
    )


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def job_spec(
    *, nnodes: int, template: core.PodTemplateSpecArgs, kubernetes_version: str, active_deadline_seconds: Optional[int] = None
) -> k8s.batch.v1.JobSpecArgs:
    """One pod per node, all at once.

    - ``successPolicy`` (beta and on by default from Kubernetes 1.31, GA in 1.33; KEP-3998): the
      Job succeeds as soon as index 0 (the head, whose exit status is the trainer's) succeeds, and
      the controller removes the lingering workers. Older clusters: the workers exit 0 once the
      head is gone (launch.sh), so the Job completes when every index has.
    - ``backoffLimit: 0``: any failed pod fails the Job and the controller terminates the rest. A
      retried single index could not rejoin a Ray cluster whose head restarted; a new run resumes
      from the latest checkpoint instead.
    - ``activeDeadlineSeconds`` (``workload.manual.activeDeadlineSeconds``): the whole run's limit;
      the Job controller then fails the Job (DeadlineExceeded) and deletes its pods. Pods that never
      start are the watchdog's (:mod:`.watchdog`): a Job has no pre-running deadline of its own.
    - no ``ttlSecondsAfterFinished``: Pulumi owns the Job; a Job deleted by TTL would be created
      again (and train again) on the next ``pulumi up``.
    """
    success_policy = None
    if _minor(kubernetes_version) >= (1, 31):
        success_policy = k8s.batch.v1.SuccessPolicyArgs(rules=[k8s.batch.v1.SuccessPolicyRuleArgs(succeeded_indexes="0")])
    return k8s.batch.v1.JobSpecArgs(
        completions=nnodes,
        parallelism=nnodes,
        completion_mode="Indexed",
        backoff_limit=0,
        active_deadline_seconds=active_deadline_seconds,
        success_policy=success_policy,
        template=template,
    )
