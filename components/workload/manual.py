"""The manual launcher (the seed's default): a headless Service and an Indexed Job, or, with
``workload.restart.maxRestarts`` > 0, a JobSet around the same Indexed Job.

Pod ``i`` of the Indexed Job gets the hostname ``training-<i>`` (Job controller) and, with
``subdomain: training-svc`` and the headless Service of that name, the DNS name
``training-<i>.training-svc``: pod 0 is the Ray head at ``training-0.training-svc:6379``.

In a JobSet ``training`` with one replicatedJob ``training``, the child Job is
``training-training-0``, its pod ``i`` is ``training-training-0-<i>`` and the JobSet controller
creates the headless Service ``training`` (the default subdomain, the JobSet's name): the head is
``training-training-0-0.training`` (JobSet API, ``network.enableDNSHostnames``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi_kubernetes as k8s

from ..config import StackSettings
from . import exit_codes
from .kube import APP_LABELS, CONFIG_CHECK_CONTAINER, IMAGE_CHECK_CONTAINER, RAY_CONTAINER, core, guaranteed
from .scripts import REPEATED_FAILURE, body, render

JOB_NAME = "training"
SERVICE_NAME = "training-svc"
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265
RAY_CLIENT_PORT = 10001
LAUNCHER_LABELS = {**APP_LABELS, "app.kubernetes.io/component": "manual-ray"}


JOBSET_NAME = "training"
EVAL_JOB_NAME = "evaluation"
"""workload.mode eval: the run's own Job (JobSet) and Service, beside a training run's names."""

# What the API server refuses to change in place, beyond pulumi-kubernetes' own force-new paths (a
# Job's selector, template, completions, parallelism; offline/diff/replacement.py): Pulumi replaces the
# object instead (replaceOnChanges; the run's objects have fixed names, so delete first).
JOB_REPLACE_ON_CHANGES = (
    "spec.completionMode", "spec.podFailurePolicy", "spec.backoffLimitPerIndex", "spec.managedBy", "spec.successPolicy",
)
"""Kubernetes ValidateJobSpecUpdate: immutable Job fields the provider does not replace on."""
JOBSET_REPLACE_ON_CHANGES = (
    "spec.replicatedJobs", "spec.managedBy", "spec.failurePolicy", "spec.successPolicy", "spec.startupPolicy",
    "spec.network", "spec.volumeClaimPolicies",
)
"""JobSet v0.11.1 and v0.12.0: ``replicatedJobs`` and ``managedBy`` by its webhook (ValidateUpdate; not in the
CRD), the others by the CRD's CEL rules (``self == oldSelf``). A new node count changes the
replicated Job's parallelism and completions: a new JobSet."""
REPLICATED_JOB = "training"
# JobSet labels every child Job and pod with the restart attempt (0, 1, ...).
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
BACKOFF_CONTAINER = "restart-backoff"


@dataclass(frozen=True)
class PodNames:
    """How the manual launcher's pods are named and found: pod ``i`` is ``<host_prefix>-<i>.<service>``."""

    job: str
    host_prefix: str
    service: str
    owner: str = JOB_NAME
    """The object the launcher creates: the Job, or the JobSet around it."""

    def head_host(self) -> str:
        return f"{self.host_prefix}-0.{self.service}"


def pod_names(jobset: bool, evaluation: bool = False) -> PodNames:
    """The one place that knows the names (the launcher, preflight and watchdog use them);
    ``evaluation``: workload.mode eval, whose objects are named evaluation instead of training."""
    base = EVAL_JOB_NAME if evaluation else JOBSET_NAME
    if jobset:
        child_job = f"{base}-{REPLICATED_JOB}-0"
        return PodNames(job=child_job, host_prefix=child_job, service=base, owner=base)
    job = EVAL_JOB_NAME if evaluation else JOB_NAME
    return PodNames(job=job, host_prefix=job, service=f"{job}-svc" if evaluation else SERVICE_NAME, owner=job)


def head_host(jobset: bool = False) -> str:
    return pod_names(jobset).head_host()


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
    *,
    nnodes: int,
    template: core.PodTemplateSpecArgs,
    kubernetes_version: str,
    active_deadline_seconds: Optional[int] = None,
    restarts: bool = False,
) -> k8s.batch.v1.JobSpecArgs:
    """One pod per node, all at once.

    - ``successPolicy`` (beta and on by default from Kubernetes 1.31, GA in 1.33; KEP-3998): the
      Job succeeds as soon as index 0 (the head, whose exit status is the trainer's) succeeds, and
      the controller removes the lingering workers. Older clusters: the workers exit 0 once the
      head is gone (launch.sh), so the Job completes when every index has.
    - ``backoffLimit: 0``: any failed pod fails the Job and the controller terminates the rest. A
      retried single index could not rejoin a Ray cluster whose head restarted; a new run resumes
      from the latest checkpoint instead: with ``restarts`` (the Job inside a JobSet) the JobSet
      recreates the whole gang, and :func:`pod_failure_policy` tells it why the Job failed.
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
        pod_failure_policy=pod_failure_policy() if restarts else None,
        template=template,
    )


def pod_failure_policy() -> k8s.batch.v1.PodFailurePolicyArgs:
    """The child Job's rules, in order (the first match wins; Kubernetes Jobs, "Pod failure policy"):

    0. a pod of a node that went away (DisruptionTarget: drain, taint eviction, preemption,
       node shutdown): FailJob, so the JobSet restarts the gang (rule ``NodeFault``);
    1. the launcher's exit ``REPEATED_FAILURE`` (the trainer failed again from the same complete
       checkpoint) or ``exit_codes.RUN_MISMATCH`` (the run directory holds another run's
       checkpoints): FailJob, and the JobSet gives up (rule ``RepeatedFailure``): a restart would
       fail the same way;
    2. the image check's exit ``exit_codes.IMAGE_BROKEN`` (the training image lacks what the image
       contract names): FailJob, and the JobSet gives up (rule ``ImageBroken``): a restart pulls
       the same image;
    3. the config check's exit ``exit_codes.CONFIG_INVALID`` (the trainer would refuse its config):
       FailJob, and the JobSet gives up (rule ``ConfigInvalid``): a restart renders the same command.

    Each fails the Job with reason ``PodFailurePolicy``; the Job controller's message ends with
    "matching FailJob rule at index N", which the JobSet rules match. Anything else fails the Job
    through ``backoffLimit: 0`` (reason BackoffLimitExceeded) and counts as a restart.
    """
    return k8s.batch.v1.PodFailurePolicyArgs(
        rules=[
            k8s.batch.v1.PodFailurePolicyRuleArgs(
                action="FailJob",
                on_pod_conditions=[k8s.batch.v1.PodFailurePolicyOnPodConditionsPatternArgs(type="DisruptionTarget", status="True")],
            ),
            k8s.batch.v1.PodFailurePolicyRuleArgs(
                action="FailJob",
                on_exit_codes=k8s.batch.v1.PodFailurePolicyOnExitCodesRequirementArgs(
                    container_name=RAY_CONTAINER, operator="In", values=[REPEATED_FAILURE, exit_codes.RUN_MISMATCH]
                ),
            ),
            k8s.batch.v1.PodFailurePolicyRuleArgs(
                action="FailJob",
                on_exit_codes=k8s.batch.v1.PodFailurePolicyOnExitCodesRequirementArgs(
                    container_name=IMAGE_CHECK_CONTAINER, operator="In", values=[exit_codes.IMAGE_BROKEN]
                ),
            ),
            k8s.batch.v1.PodFailurePolicyRuleArgs(
                action="FailJob",
                on_exit_codes=k8s.batch.v1.PodFailurePolicyOnExitCodesRequirementArgs(
                    container_name=CONFIG_CHECK_CONTAINER, operator="In", values=[exit_codes.CONFIG_INVALID]
                ),
            ),
        ]
    )


def failure_policy(max_restarts: int) -> dict[str, Any]:
    """The JobSet's ``failurePolicy`` (camelCase: a custom resource). The rules, in order:

    - ``NodeFault``: RestartJobSetAndIgnoreMaxRestarts: a lost node is not the run's fault;
    - ``RepeatedFailure``: FailJobSet: a restart would fail at the same step again (or find the
      other run's checkpoints again);
    - ``ImageBroken``: FailJobSet: the image check failed, and a restart pulls the same image;
    - ``ConfigInvalid``: FailJobSet: the config check failed, and a restart renders the same command;
    - ``Deadline``: FailJobSet on DeadlineExceeded: the whole-run deadline, or the watchdog's
      pre-running deadline (nodes that never came: a restart would wait for them again);
    - anything else (a pod error, NCCL, an OOM): the default RestartJobSet, counted.

    ``restartStrategy: BlockingRecreate``: the old pods are gone before the new ones start, so no
    lingering worker joins the new head or holds a GPU the new pod needs (JobSet API).
    """
    return {
        "maxRestarts": max_restarts,
        "restartStrategy": "BlockingRecreate",
        "rules": [
            {
                "name": "NodeFault",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": ["matching FailJob rule at index 0$"],
            },
            {
                "name": "RepeatedFailure",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": ["matching FailJob rule at index 1$"],
            },
            {
                "name": "ImageBroken",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": ["matching FailJob rule at index 2$"],
            },
            {
                "name": "ConfigInvalid",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": ["matching FailJob rule at index 3$"],
            },
            {"name": "Deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
        ],
    }


def jobset_spec(*, job: Any, max_restarts: int) -> dict[str, Any]:
    """The JobSet's spec around ``job`` (the child Job's spec, camelCase, from :func:`job_spec`).

    - ``network``: JobSet creates the headless Service ``training`` and sets each pod's subdomain;
      ``publishNotReadyAddresses`` as in :func:`headless_service_spec` (no readiness gates Ray).
    - ``successPolicy``: the set succeeds when its one Job does (the Job's own successPolicy: index 0).
    - no ``ttlSecondsAfterFinished``: Pulumi owns the JobSet (see :func:`job_spec`).
    """
    return {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [REPLICATED_JOB]},
        "failurePolicy": failure_policy(max_restarts),
        "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1, "template": {"spec": job}}],
    }


BACKOFF = body("backoff.sh")
MAX_BACKOFF_FACTOR = 10


def backoff_container(settings: StackSettings) -> core.ContainerArgs:
    """Restart attempt N waits ``N x backoffSeconds`` (at most 10x) before the pod's other init
    containers and Ray start: JobSet recreates the gang at once, which would hit a failing
    dependency (S3, the Hugging Face hub, a flapping node) in a tight loop. Runs in the training
    image (on the node anyway), with the attempt from JobSet's pod label."""
    step = settings.workload.restart.backoff_seconds
    script = render({"BACKOFF_SECONDS": step, "MAX_BACKOFF_SECONDS": step * MAX_BACKOFF_FACTOR}, BACKOFF)
    return core.ContainerArgs(
        name=BACKOFF_CONTAINER,
        image=settings.workload.image,
        command=["/bin/bash", "-c", script],
        env=[
            core.EnvVarArgs(
                name="RESTART_ATTEMPT",
                value_from=core.EnvVarSourceArgs(
                    field_ref=core.ObjectFieldSelectorArgs(field_path=f"metadata.labels['{RESTART_ATTEMPT_LABEL}']")
                ),
            )
        ],
        resources=guaranteed({"cpu": "10m", "memory": "16Mi"}),
        security_context=core.SecurityContextArgs(
            privileged=False,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=core.CapabilitiesArgs(drop=["ALL"]),
        ),
    )
