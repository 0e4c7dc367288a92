"""The manual Job's pre-running deadline: a small watchdog Job on the system nodes.

A Kubernetes Job has ``activeDeadlineSeconds`` (the whole run) but nothing for pods that never
start: ``podFailurePolicy`` and ``backoffLimit`` see only pods that ran and failed, so a pod stuck
in ImagePullBackOff, Unschedulable (no GPU node came) or in an init container holds the GPU
nodes that did come for ever. The head's join timeout does not help when pod 0 itself never runs.
Kueue's ``waitForPodsReady`` would, but is a whole controller to install and operate.

The watchdog polls the Job and its pods with kubectl. It exits as soon as every pod is Running
(or the Job finished); if they are not all Running ``preRunningDeadlineSeconds`` after the Job's
``status.startTime`` (or after ``gpuNodes.capacityBlock.startTime``, when later: the Job is
created at ``pulumi up``, and no GPU node can exist before its Capacity Block starts), it records why on the Job (annotation) and lowers the Job's own
``activeDeadlineSeconds`` to 1 (a mutable field: the Job controller re-checks it on update), so the
Job controller itself fails the Job (reason DeadlineExceeded) and deletes its pods. The Job keeps
its Failed status for ``kubectl describe``; nothing is deleted behind Pulumi's back. Its role may
only read pods and read and patch this one Job.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..scheduling import SYSTEM_NODE_LABELS
from ..config import StackSettings
from .kube import APP_LABELS, core, guaranteed, meta
from .scripts import body, render

WATCHDOG_NAME = "training-watchdog"
WATCHDOG_SCRIPT = "watchdog.sh"
REASON_ANNOTATION = "rlinf-eks/failure"
TRAINING_JOB_ANNOTATION = "rlinf-eks/training-job-sha256"
POLL_SECONDS = 30
# The watchdog Job's own deadline beyond the training Job's: it never outlives its purpose.
OWN_DEADLINE_MARGIN_SECONDS = 1800
WATCHDOG_LABELS = {**APP_LABELS, "app.kubernetes.io/component": "watchdog"}
NONROOT_UID = 65532  # distroless' nonroot user: kubectl needs no root


def enabled(settings: StackSettings) -> bool:
    return settings.workload.launcher == "manual" and settings.workload.manual.pre_running_deadline_seconds is not None


def watchdog_image(settings: StackSettings) -> str:
    """kubectl at the cluster's minor (kubectl supports one minor of skew either way)."""
    return settings.workload.manual.watchdog_image or f"registry.k8s.io/kubectl:v{settings.cluster.kubernetes_version}.0"


WATCHDOG = body("watchdog.sh")


def watchdog_script(
    *, namespace: str, job_name: str, expected_pods: int, deadline_seconds: int, not_before: Optional[datetime] = None
) -> str:
    """watchdog.sh: fail ``job_name`` when its ``expected_pods`` are not all Running in time,
    counted from the Job's start or ``not_before`` (a Capacity Block's start), whichever is later."""
    return render(
        {
            "NAMESPACE": namespace,
            "JOB_NAME": job_name,
            "EXPECTED_PODS": expected_pods,
            "DEADLINE_SECONDS": deadline_seconds,
            "NOT_BEFORE": int(not_before.timestamp()) if not_before is not None else 0,
            "POLL_SECONDS": POLL_SECONDS,
            "REASON_ANNOTATION": REASON_ANNOTATION,
        },
        WATCHDOG,
    )


def role_rules(job_name: str) -> list[dict[str, Any]]:
    """Read pods (list cannot be narrowed by name), read and patch (annotate) this one Job."""
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": [job_name], "verbs": ["get", "patch"]},
    ]


def training_job_fingerprint(resolved_spec: Any) -> str:
    """A digest of the training Job's spec: in the watchdog's template, so that a new training Job
    (a Job's template is immutable: Pulumi replaces it) brings a new watchdog with it."""
    return hashlib.sha256(json.dumps(resolved_spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def watchdog_job_spec(
    settings: StackSettings, *, config_map: str, script_key: str, training_job_sha: pulumi.Input[str]
) -> k8s.batch.v1.JobSpecArgs:
    """The watchdog's Job spec (camelCase), on the system nodes, as an unprivileged user."""
    deadline = settings.workload.manual.pre_running_deadline_seconds
    assert deadline is not None
    pod = core.PodSpecArgs(
        service_account_name=WATCHDOG_NAME,
        restart_policy="Never",
        node_selector=dict(SYSTEM_NODE_LABELS),
        security_context=core.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=NONROOT_UID,
            run_as_group=NONROOT_UID,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        containers=[
            core.ContainerArgs(
                name="watchdog",
                image=watchdog_image(settings),
                image_pull_policy="Always",
                command=["/bin/bash", f"/etc/rlinf-watchdog/{script_key}"],
                # kubectl keeps its discovery cache under $HOME
                env=[core.EnvVarArgs(name="HOME", value="/tmp")],
                resources=guaranteed({"cpu": "100m", "memory": "128Mi"}),
                volume_mounts=[
                    core.VolumeMountArgs(name="script", mount_path="/etc/rlinf-watchdog", read_only=True),
                    core.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                ],
                security_context=core.SecurityContextArgs(
                    privileged=False,
                    allow_privilege_escalation=False,
                    read_only_root_filesystem=True,
                    capabilities=core.CapabilitiesArgs(drop=["ALL"]),
                ),
            )
        ],
        volumes=[
            core.VolumeArgs(
                name="script",
                config_map=core.ConfigMapVolumeSourceArgs(name=config_map, items=[core.KeyToPathArgs(key=script_key, path=script_key)]),
            ),
            core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit="64Mi")),
        ],
    )
    return k8s.batch.v1.JobSpecArgs(
        # a failed kubectl call is retried inside the script; a crashed pod a few times here
        backoff_limit=3,
        # A Job's deadline counts from its own start (pulumi up); a Capacity Block may start days
        # later, and the watchdog must still be there then.
        active_deadline_seconds=None if settings.gpu_nodes.scheduled_start is not None else deadline + OWN_DEADLINE_MARGIN_SECONDS,
        template=core.PodTemplateSpecArgs(
            metadata=meta.ObjectMetaArgs(labels=dict(WATCHDOG_LABELS), annotations={TRAINING_JOB_ANNOTATION: training_job_sha}),
            spec=pod,
        ),
    )
