"""What happens on each fault, as the plan prints it (``python -m rlinf_eks plan``, section
"Faults:"). One function per topic, each returning plain lines; :func:`render` joins them.

Topics: :func:`checkpoint_lines` (which checkpoints count, where resume comes from),
:func:`restart_lines` (who restarts a failed run, how often), :func:`deadline_lines` (runs that never start or never end), :func:`image_lines` (a broken training image), :func:`config_lines` (a config the trainer would refuse), :func:`fabric_lines` (no fallback to
sockets), :func:`render_lines` (a simulator that cannot render), :func:`hang_lines` (the progress
watchdog), :func:`reservation_lines` (a Capacity Block's end), :func:`spot_lines` (a Spot
interruption) and :func:`node_health_lines` (node auto repair). Printed only, never in plan.json: the time
left before a Capacity Block ends depends on the day the plan runs, and plan.json is
byte-for-byte deterministic.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from ...config import CapacityBlockSettings, StackSettings
from ...trainers.base import COMPLETE_MARKER
from ...workload import exit_codes, fabric, manual, progress, render_check, scripts
from ...workload.env import NCCL_NET
from ...workload.run import efa_enabled, resolve_run


def checkpoint_lines(settings: StackSettings, stack: str) -> list[str]:
    if not settings.workload.enabled:
        return []
    # the run RlinfTraining builds, resolved by the same function (W&B logging aside: it needs the
    # secret, and has no bearing on checkpoints or resume)
    run = resolve_run(settings, stack)
    paths, launch = run.paths, run.launch
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
        f"({COMPLETE_MARKER}: a newer step exists, veRL's latest_checkpointed_iteration.txt names it, "
        f"or the trainer exited 0); a save cut off by a fault is never {never}",
    ]
    evaluation = settings.workload.eval
    if settings.workload.mode == "eval":
        which = f"checkpoint {evaluation.checkpoint}" if evaluation.checkpoint else "the newest complete checkpoint (chosen when the pod starts)"
        lines.append(
            f"evaluation (workload.mode eval): the dialect's upstream evaluation of {which}, read only, into "
            f"{paths.eval_dir}/step-<N>/ (metrics, videos, eval.json); the launcher marks no checkpoint and writes nothing "
            f"into the training run's checkpoints; no complete checkpoint: exit {exit_codes.NO_CHECKPOINT}"
        )
        required = sorted({name for _, name, needed in getattr(launch, "model_files", ()) if needed})
        if required:
            lines.append(
                f"evaluation: {', '.join(required)}, which the evaluation loads from the checkpoint, is copied from the model the run "
                f"trained from when the checkpoint has none; when neither has it, the pod stops before the trainer starts (exit "
                f"{exit_codes.MODEL_FILE_MISSING}, one line naming it)"
            )
    elif launch.resume is not None:
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
            f"restart (manual launcher): JobSet {manual.pod_names(True, settings.workload.mode == 'eval').owner} (controller {restart.jobset_version}) recreates every pod "
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


def deadline_lines(settings: StackSettings) -> list[str]:
    """When a run that never starts, or never ends, gives its GPUs back."""
    wl = settings.workload
    if not wl.enabled:
        return []
    if wl.launcher == "manual":
        pre, whole = wl.manual.pre_running_deadline_seconds, wl.manual.active_deadline_seconds
        block = settings.gpu_nodes.capacity_block
        since = "the Capacity Block's start (or the Job's, if later)" if block is not None and block.start_time else "the Job's start"
        starting = (
            f"deadline: pods not all Running {_duration(pre)} after {since} (image pull, unschedulable, a stuck init "
            "container) make the watchdog Job fail the training Job (DeadlineExceeded) and its pods go"
            if pre
            else "deadline: no pre-running deadline (workload.manual.preRunningDeadlineSeconds: null): pods that never start hold the GPU nodes"
        )
    else:
        pre, whole = wl.rayjob.pre_running_deadline_seconds, wl.rayjob.active_deadline_seconds
        starting = (
            f"deadline: a RayJob not Running {_duration(pre)} after submission fails (preRunningDeadlineSeconds) and releases its GPUs"
            if pre
            else "deadline: no pre-running deadline (workload.rayjob.preRunningDeadlineSeconds: null)"
        )
    running = f"deadline: the whole run fails after {_duration(whole)}" if whole else "deadline: no limit on the whole run (activeDeadlineSeconds unset)"
    return [starting, running]


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(abs(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    text = (f"{days}d " if days else "") + f"{hours}h {rest // 60:02d}m"
    return text if seconds >= 0 else f"-{text}"


def image_lines(settings: StackSettings) -> list[str]:
    """A training image that lacks what the image contract names (workload/image_contract.py)."""
    if not settings.workload.enabled:
        return []
    check = (
        f"image: an image-check init container fails every Ray pod within seconds, before any GPU work, when "
        f"{settings.workload.image} lacks a tool, Ray {settings.workload.ray_version}, the trainer's entry script or "
        f"config dir{', libfabric or aws-ofi-nccl' if efa_enabled(settings) else ''} (exit {exit_codes.IMAGE_BROKEN}, "
        f"one line naming it; python -m rlinf_eks image-contract)"
    )
    return [check, _init_check_retry(settings, "image", "ImageBroken", "pull the same image")]


def config_lines(settings: StackSettings) -> list[str]:
    """A config the trainer would refuse (workload/config_check.py)."""
    if not settings.workload.enabled:
        return []
    check = (
        f"config: a config-check init container composes the trainer's Hydra config in {settings.workload.image} with the "
        f"rendered overrides and runs the trainer's own validation as far as it goes without Ray, before anything is staged "
        f"or Ray starts; a config it would refuse fails every Ray pod within seconds (exit {exit_codes.CONFIG_INVALID}, "
        f"one line, also the container's termination message)"
    )
    return [check, _init_check_retry(settings, "config", "ConfigInvalid", "render the same command")]


def _init_check_retry(settings: StackSettings, topic: str, rule: str, same: str) -> str:
    """What the launcher does when an init check fails a pod: KubeRay retries it (no per-exit-code
    rule), a JobSet gives up at once by its ``rule`` (a restart would ``same``), a Job at once."""
    if settings.workload.launcher == "kuberay":
        return (
            f"{topic}: KubeRay has no per-exit-code rule: the failed init container restarts until the RayJob fails "
            "(rayjob.preRunningDeadlineSeconds) and backoffLimit counts it"
        )
    if settings.workload.uses_jobset:
        return f"{topic}: the JobSet fails at once on it (rule {rule}): a restart would {same}"
    return f"{topic}: the Job fails at once on it (backoffLimit 0)"


def fabric_lines(settings: StackSettings) -> list[str]:
    if not settings.workload.enabled:
        return []
    if not efa_enabled(settings):
        return ["fabric: no EFA on these nodes: NCCL uses TCP sockets (nothing pinned, no fabric check)"]
    return [
        f"fabric: NCCL_NET={NCCL_NET!r} (no fallback to sockets); a fabric-check init container fails a pod whose "
        f"EFA devices, libfabric efa domains or NCCL net plugin are missing within a minute (fi_info bounded to "
        f"{fabric.FI_INFO_TIMEOUT_SECONDS}s; exit {exit_codes.FABRIC_FAILED})",
        f"fabric: torch tears down a process on an NCCL error or timeout (TORCH_NCCL_ASYNC_ERROR_HANDLING=1); its "
        f"watchdog thread stuck {settings.workload.nccl_heartbeat_timeout_seconds}s aborts it",
    ]


def hang_lines(settings: StackSettings) -> list[str]:
    if not settings.workload.enabled:
        return []
    timeout = settings.workload.progress_timeout_seconds
    if timeout is None:
        return ["hang: progress watchdog off (workload.progressTimeoutSeconds: null): a silent hang holds the GPUs"]
    return [
        f"hang: no trainer output and no new global_step_N for {_duration(timeout)} stops the trainer "
        f"(SIGINT, SIGTERM, SIGKILL within {settings.workload.termination_grace_period_seconds}s); the pod exits "
        f"{exit_codes.PROGRESS_TIMEOUT} and its GPUs are released"
    ]


def reservation_lines(settings: StackSettings, now: Optional[datetime] = None) -> list[str]:
    gpu = settings.gpu_nodes
    if gpu.capacity_type != "CAPACITY_BLOCK":
        return []
    block = gpu.capacity_block
    if block is None or block.end_time is None:
        return ["reservation: Capacity Block end unknown (gpuNodes.capacityBlock.endTime unset): the run is not stopped before EC2 terminates the nodes"]
    now = now or datetime.now(timezone.utc)
    end = block.end_time.astimezone(timezone.utc)
    stop = progress.stop_at(settings)
    assert stop is not None
    left = (end - now).total_seconds()
    lines = [
        f"reservation: Capacity Block ends {CapacityBlockSettings.api_time(end)} "
        f"({_duration(left)} left)" if left > 0 else f"reservation: Capacity Block ended {CapacityBlockSettings.api_time(end)}",
        f"reservation: EC2 warns at {CapacityBlockSettings.api_time(end - progress.CAPACITY_BLOCK_WARNING)} and terminates the "
        f"instances 30 min before the end; the trainer is stopped from {CapacityBlockSettings.api_time(stop)} "
        f"(checkpoint writes settle first) and the pod exits {exit_codes.RESERVATION_ENDING}",
    ]
    if settings.workload.enabled and (stop - now).total_seconds() <= 0 < left:
        lines.append("reservation: the stop time has passed: a run started now is stopped at once")
    return lines


SPOT_NOTICE_SECONDS = 120
"""EC2 stops or terminates a Spot Instance two minutes after its interruption notice (EC2 User
Guide, "Spot Instance interruption notices")."""


def spot_lines(settings: StackSettings, stack: str) -> list[str]:
    """Spot GPU nodes (gpuNodes.capacityType SPOT): what an interruption does to the run, what is
    lost and what resumes it; a warning where nothing restarts the run."""
    gpu, wl = settings.gpu_nodes, settings.workload
    if gpu.capacity_type != "SPOT":
        return []
    drain = (
        "Karpenter reads the notice from its interruption queue and drains the node"
        if gpu.provisioner == "karpenter"
        else "the managed node group drains the node (EKS Capacity Rebalancing for Spot)"
    )
    lines = [f"spot: EC2 reclaims a Spot node with a {SPOT_NOTICE_SECONDS // 60}-minute notice; {drain}, and the instance stops {SPOT_NOTICE_SECONDS}s after the notice"]
    if not wl.enabled:
        return lines
    grace = wl.termination_grace_period_seconds
    cut = (
        f"the pods' terminationGracePeriodSeconds ({grace}s) outlasts the notice: the trainer is told to stop at the drain, and "
        f"a checkpoint still being written at {SPOT_NOTICE_SECONDS}s is cut off (never marked complete, never resumed from)"
        if grace > SPOT_NOTICE_SECONDS
        else f"the pods' terminationGracePeriodSeconds ({grace}s) fits in the notice"
    )
    run = resolve_run(settings, stack)
    kept = (
        "the newest complete checkpoint on FSx"
        if run.paths.shared
        else f"the newest complete checkpoint already in S3 (uploaded every {wl.checkpoint_sync_interval_seconds}s and when the "
        f"pod ends, an upload the {SPOT_NOTICE_SECONDS}s may cut short; the node's local copies go with it)"
    )
    lines.append(f"spot: {cut}; lost: every step after {kept}")
    resume = "from the newest complete checkpoint (resume as above)" if run.launch.resume is not None else "from step 0 (the dialect cannot resume)"
    if wl.launcher == "manual" and wl.uses_jobset:
        lines.append(
            f"spot: resumes: the JobSet restarts the gang on a new node {resume}, without counting the interruption against "
            f"maxRestarts={wl.restart.max_restarts} (rule NodeFault)"
        )
    elif wl.launcher == "kuberay" and wl.rayjob.cluster == "embedded" and wl.rayjob_backoff_limit:
        lines.append(f"spot: resumes: KubeRay retries the RayJob {resume}; each interruption counts against backoffLimit={wl.rayjob_backoff_limit}")
    else:
        lines.append(
            "spot: warning: workload.restart.maxRestarts is 0: an interruption ends the run and nothing restarts it; set it "
            f"(e.g. workload.restart.maxRestarts=3) so that a reclaimed node's run restarts {resume}"
        )
    return lines


def render_lines(settings: StackSettings) -> list[str]:
    """The simulator's render check (workload/render_check.py), for the configs that render."""
    if not settings.workload.enabled:
        return []
    renderer = render_check.renderer_for(settings)
    if renderer is None:
        return []
    video = ", and writes it as the trainer writes its videos (imageio, MP4)" if render_check.saves_videos(settings) else ""
    return [
        f"render: a render-check init container renders one {renderer.name} frame ({renderer.backend}) with the pod's "
        f"environment on one of its GPUs{video}, before anything is staged or Ray starts; a node or image that cannot "
        f"fails the pod within minutes (exit {exit_codes.RENDER_FAILED}, one line naming the remedy), and the restart policy "
        "counts it as any pod failure (a driver without its graphics libraries is as often the node's fault as the image's)"
    ]


def node_health_lines(settings: StackSettings) -> list[str]:
    if not settings.gpu_nodes.auto_repair:
        return ["node health: auto repair off (gpuNodes.autoRepair: false): a node with a failed GPU or EFA stays in the group"]
    agent = (
        "the eks-node-monitoring-agent add-on"
        if not settings.cluster.existing
        else "the eks-node-monitoring-agent add-on (install it on the existing cluster: not managed here)"
    )
    return [
        f"node health: {agent} marks a node with GPU XID errors or lost GPUs/network interfaces unhealthy; node auto "
        "repair replaces it; the training pod on it fails (exit status or eviction), and the Job's restart policy decides "
        "whether the run restarts on the replacement"
    ]


def fault_lines(settings: StackSettings, stack: str, now: Optional[datetime] = None) -> list[str]:
    return [
        *checkpoint_lines(settings, stack),
        *restart_lines(settings),
        *deadline_lines(settings),
        *image_lines(settings),
        *config_lines(settings),
        *fabric_lines(settings),
        *render_lines(settings),
        *hang_lines(settings),
        *reservation_lines(settings, now),
        *spot_lines(settings, stack),
        *node_health_lines(settings),
    ]


def render(settings: Optional[StackSettings], stack: str, now: Optional[datetime] = None) -> str:
    """The "Faults:" section of the printed plan, empty without settings."""
    if settings is None:
        return ""
    lines = fault_lines(settings, stack, now)
    return "\n".join(["Faults:", *(f"  {line}" for line in lines)]) if lines else ""
