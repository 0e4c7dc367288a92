"""What happens on each fault, as the plan prints it (``python -m rlinf_eks plan``, section
"Faults:"). One function per topic, each returning plain lines; :func:`render` joins them.

Topics: :func:`checkpoint_lines` (which checkpoints count, where resume comes from) and
:func:`restart_lines` (who restarts a failed run, how often, with what backoff). The fabric, hang
and reservation-end topics are added beside these.
"""

from __future__ import annotations

from typing import Optional

from ..config import StackSettings
from ..trainers import TrainerLaunch, launch_for
from ..workload import manual, scripts
from ..workload.pod import pod_shape, run_paths


def _launch(settings: StackSettings, stack: str) -> Optional[TrainerLaunch]:
    if not settings.workload.enabled:
        return None
    paths = run_paths(settings, stack, shared=settings.shared_filesystem)
    return launch_for(
        settings,
        nnodes=settings.gpu_nodes.node_count,
        gpus_per_node=pod_shape(settings, sync=not paths.shared).pod.gpus,
        log_dir=paths.log_dir,
        checkpoint_dir=paths.checkpoint_dir,
    )


def checkpoint_lines(settings: StackSettings, stack: str) -> list[str]:
    launch = _launch(settings, stack)
    if launch is None:
        return []
    paths = run_paths(settings, stack, shared=settings.shared_filesystem)
    where = (
        f"on FSx under {paths.root} (exported to s3://<bucket>/{paths.s3_prefix}/)"
        if paths.shared
        else f"in {paths.root} on each node, uploaded to s3://<bucket>/{paths.s3_prefix}/ every "
        f"{settings.workload.checkpoint_sync_interval_seconds}s and when the pod ends"
    )
    # FSx's data repository association exports every file it sees, a partial step's too; only
    # the marker, which a partial step never gets, tells them apart there.
    never = "resumed from (the S3 export holds it unmarked)" if paths.shared else "uploaded, restored or resumed from"
    lines = [
        f"checkpoints: {where}; a global_step_N counts once the launcher marks it complete "
        f"({scripts.COMPLETE_MARKER}: a newer step exists, veRL's latest_checkpointed_iteration.txt names it, "
        f"or the trainer exited 0); a save cut off by a fault is never {never}",
    ]
    if launch.resume is not None:
        lines.append(f"resume: the newest complete checkpoint, passed as {launch.resume.key}")
    elif launch.resume_note:
        lines.append(f"resume: none: {launch.resume_note}")
    else:
        lines.append("resume: off (workload.trainer.overrides sets the resume directory)")
    return lines


def restart_lines(settings: StackSettings) -> list[str]:
    wl = settings.workload
    if not wl.enabled:
        return []
    if wl.launcher == "manual":
        deadline = (
            f"; the whole run fails after activeDeadlineSeconds={wl.manual.active_deadline_seconds}s"
            if wl.manual.active_deadline_seconds
            else ""
        )
        repeated = (
            f"repeated failure: the head exits {scripts.REPEATED_FAILURE} when the trainer fails twice from the same "
            "complete checkpoint (recorded in <run dir>/.rlinf-eks/last-failure)"
        )
        if not wl.uses_jobset:
            return [
                "restart (manual launcher): none automatic (workload.restart.maxRestarts is 0): any failed pod (trainer "
                "error, lost node, NCCL) fails the Indexed Job (backoffLimit 0) and the controller stops the other pods; "
                "deleting the Job and running pulumi up starts a new run that resumes as above" + deadline,
                repeated,
            ]
        restart = wl.restart
        step = restart.backoff_seconds
        return [
            f"restart (manual launcher): JobSet {manual.JOBSET_NAME} (controller {restart.jobset_version}) recreates every pod "
            f"and resumes as above, up to maxRestarts={restart.max_restarts} times, when a pod fails (trainer error, "
            "NCCL, OOM: the Indexed Job's backoffLimit 0 fails it); old pods are gone before new ones start (BlockingRecreate)",
            "host faults: a pod of a lost, drained or preempted node (DisruptionTarget) restarts the gang without counting "
            "against maxRestarts (RestartJobSetAndIgnoreMaxRestarts)",
            f"backoff: restart attempt N waits N x {step}s (at most {step * manual.MAX_BACKOFF_FACTOR}s) in an init "
            "container: JobSet itself restarts at once",
            repeated + f": the Job's podFailurePolicy fails it on exit {scripts.REPEATED_FAILURE} and the JobSet gives up (FailJobSet)",
            "deadlines: a Job that fails with DeadlineExceeded (pre-running watchdog, activeDeadlineSeconds) fails the JobSet, "
            "no restart" + deadline,
        ]
    rayjob = wl.rayjob
    if rayjob.cluster == "embedded":
        limit = wl.rayjob_backoff_limit
        retries = (
            f"KubeRay retries a failed RayJob up to backoffLimit={limit} times, each with a new cluster (every pod "
            "recreated: a gang restart), resuming as above"
            if limit
            else "none: the RayJob's backoffLimit is 0, so a failed RayJob stays failed (set workload.restart.maxRestarts to retry)"
        )
    else:
        retries = "none: a RayJob submitted by clusterSelector is not retried (backoffLimit needs the embedded cluster)"
    lines = [
        f"restart (kuberay launcher): {retries}; the RayJob has no backoff setting and counts every failure, host faults "
        "included; a trainer that fails again at the same step is retried until the limit too (KubeRay has no "
        "per-exit-code rule)"
    ]
    if rayjob.active_deadline_seconds:
        lines.append(f"deadline: the RayJob fails after activeDeadlineSeconds={rayjob.active_deadline_seconds}s")
    return lines


def fault_lines(settings: StackSettings, stack: str) -> list[str]:
    return [*checkpoint_lines(settings, stack), *restart_lines(settings)]


def render(settings: Optional[StackSettings], stack: str) -> str:
    """The "Faults:" section of the printed plan, empty without settings or a workload."""
    if settings is None:
        return ""
    lines = fault_lines(settings, stack)
    return "\n".join(["Faults:", *(f"  {line}" for line in lines)]) if lines else ""
