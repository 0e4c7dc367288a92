"""The shell scripts rendered into the launch ConfigMap (mounted at /etc/rlinf).

Each script is a block of generated ``NAME=value`` assignments (quoted with shlex) followed by a
fixed body: nothing is substituted inside the body, so a value can never break its syntax. The
bodies are the files of ``sh/``; the Python programs they run are the files of ``programs/``,
inlined where a body names them (the pod only has the ConfigMap, so a rendered script carries
everything it runs).
"""

from __future__ import annotations

import functools
import re
import shlex
from importlib import resources
from typing import Any, Mapping, Optional

from ..trainers.base import COMPLETE_MARKER
from .exit_codes import RUN_MISMATCH
from .kube import RAY_METRICS_PORT

_SHEBANG = "#!/bin/bash\n# Rendered by rlinf-eks (components/workload/scripts.py). Do not edit in the cluster.\n"
# A whole line of a body: replaced by the text of that file of this package.
_INCLUDE = re.compile(r"^#include (programs/[a-z_]+\.py)\n", re.M)
_HEREDOC_END = "PY"


def shell_assignments(values: Mapping[str, Any]) -> str:
    """``NAME=value`` lines, quoted for bash, for the head of a rendered script."""
    return "\n".join(f"{k}={shlex.quote(str(v))}" for k, v in values.items())


def render(values: Mapping[str, Any], body: str) -> str:
    return f"{_SHEBANG}{shell_assignments(values)}\n{body}"


def program(name: str) -> str:
    """The text of ``programs/<name>`` (a Python program run in the pod)."""
    return resources.files(__package__).joinpath("programs", name).read_text(encoding="utf-8")


@functools.cache
def body(name: str) -> str:
    """The body ``sh/<name>`` with its ``#include programs/X.py`` lines replaced by those programs.
    Each include stands inside a ``<<'PY'`` heredoc, so a program may hold no line ``PY`` (it would
    end the heredoc early)."""
    text = resources.files(__package__).joinpath("sh", name).read_text(encoding="utf-8")

    def inline(match: re.Match[str]) -> str:
        source = program(match.group(1).split("/", 1)[1])
        if _HEREDOC_END in source.splitlines():
            raise ValueError(f"{match.group(1)} has a line {_HEREDOC_END!r}: it would end the heredoc of sh/{name} early")
        return source if source.endswith("\n") else source + "\n"

    text = _INCLUDE.sub(inline, text)
    if "#include " in text:
        raise ValueError(f"sh/{name}: an #include line names no file of programs/ ({_INCLUDE.pattern})")
    # the blank line between the prelude (or the previous body) and this body
    return "\n" + text


# --- complete checkpoints --------------------------------------------------------------------------

# COMPLETE_MARKER (trainers.base): the marker the scripts write into a complete global_step_<N>
REPEATED_FAILURE = 86
"""The head's status when the trainer failed twice from the same complete checkpoint (no new one in
between): a trainer bug, not a fault that a restart cures."""

UPLOAD_RECORD = "uploaded"
"""In the pod's state directory: the complete checkpoints (absolute paths, one a line) whose files
and marker the sync sidecar's last upload put in S3 (sync.sh writes it, the launcher's retention
reads it: a checkpoint leaves the node only once S3 holds it)."""
EXPORT_SETTLE_SECONDS = 900
"""On the shared filesystem: how long after its marker a checkpoint counts as exported to S3. FSx
exports a file asynchronously once it is closed (FSx for Lustre user guide, "Automatically export
updates to your S3 bucket") and a pod cannot read the export state (``lfs hsm_state`` needs the
Lustre client tools, in no image): 15 minutes is many times a save's own write time."""


def retention_values(*, keep_local: int, state_dir: str, shared: bool) -> dict[str, Any]:
    """The variables of the launcher's local retention (checkpoints.sh): ``keep_local``
    (workload.checkpoints.keepLocal, 0: none); without the shared filesystem, the sync sidecar's
    record in ``state_dir``."""
    return {
        "KEEP_LOCAL": keep_local,
        "UPLOAD_RECORD": "" if shared else f"{state_dir.rstrip('/')}/{UPLOAD_RECORD}",
        "EXPORT_SETTLE_SECONDS": EXPORT_SETTLE_SECONDS,
    }


# Bash functions of launch.sh and driver.sh, on every pod that runs Ray. CHECKPOINT_PATTERNS:
# Python glob patterns (one a line) of the trainer's global_step_<N> directories.
CHECKPOINTS = body("checkpoints.sh")
# The bash function check_run_identity (needs CHECKPOINTS): RUN_DIR, RUN_IDENTITY, EXIT_RUN_MISMATCH.
RUN_IDENTITY = body("run-identity.sh")

# --- manual launcher ------------------------------------------------------------------------------

MANUAL_LAUNCH = body("launch.sh")


def manual_launch(
    *,
    nnodes: int,
    gpus_per_node: int,
    cpus_per_node: int,
    object_store_bytes: int,
    head_host: str,
    ray_port: int,
    join_timeout_seconds: int,
    grace_seconds: int,
    run_dir: str,
    state_dir: str,
    trainer_pythonpath: str,
    trainer_script: str,
    checkpoint_patterns: tuple[str, ...] = (),
    node_rank_env: str = "",
    run_identity: str = "",
    keep_local: int = 0,
    shared: bool = True,
) -> str:
    """launch.sh of the Indexed Job: pod 0 starts the Ray head, waits until ``nnodes`` nodes and
    ``nnodes * gpus_per_node`` GPUs joined (failing with a clear message after the timeout), then
    runs the trainer and exits with its status; pods 1..N-1 join the head and block.
    ``node_rank_env``: a variable set to the pod's index before ``ray start`` (RLinf's
    RLINF_NODE_RANK), empty for none. ``keep_local``: the head's retention
    (:func:`retention_values`; 0: none); ``shared``: the run directory is on the shared
    filesystem (else the sync sidecar's record says what S3 holds)."""
    return render(
        {
            "NNODES": nnodes,
            "GPUS_PER_NODE": gpus_per_node,
            "CPUS_PER_NODE": cpus_per_node,
            "OBJECT_STORE_BYTES": object_store_bytes,
            "HEAD_HOST": head_host,
            "RAY_PORT": ray_port,
            "RAY_METRICS_PORT": RAY_METRICS_PORT,
            "JOIN_TIMEOUT_SECONDS": join_timeout_seconds,
            "GRACE_SECONDS": grace_seconds,
            "RUN_DIR": run_dir,
            "STATE_DIR": state_dir,
            "TRAINER_PYTHONPATH": trainer_pythonpath,
            "TRAINER_SCRIPT": trainer_script,
            "CHECKPOINT_PATTERNS": "\n".join(checkpoint_patterns),
            "COMPLETE_MARKER": COMPLETE_MARKER,
            "REPEATED_FAILURE": REPEATED_FAILURE,
            "NODE_RANK_ENV": node_rank_env,
            "RUN_IDENTITY": run_identity,
            "EXIT_RUN_MISMATCH": RUN_MISMATCH,
            **retention_values(keep_local=keep_local, state_dir=state_dir, shared=shared),
        },
        CHECKPOINTS + RUN_IDENTITY + MANUAL_LAUNCH,
    )


# --- KubeRay driver ---------------------------------------------------------------------------------

KUBERAY_DRIVER = body("driver.sh")


def kuberay_driver(
    *,
    trainer_pythonpath: str,
    trainer_script: str,
    checkpoint_patterns: tuple[str, ...] = (),
    run_dir: str = "",
    run_identity: str = "",
    state_dir: str = "",
    keep_local: int = 0,
    shared: bool = True,
) -> str:
    """driver.sh: the RayJob entrypoint, run by the job supervisor on the head pod. It marks the
    trainer's complete checkpoints and retains as launch.sh does; a retried RayJob
    (``backoffLimit``) resumes from the newest marked one."""
    return render(
        {
            "TRAINER_PYTHONPATH": trainer_pythonpath,
            "TRAINER_SCRIPT": trainer_script,
            "CHECKPOINT_PATTERNS": "\n".join(checkpoint_patterns),
            "COMPLETE_MARKER": COMPLETE_MARKER,
            "RUN_DIR": run_dir,
            "RUN_IDENTITY": run_identity,
            "EXIT_RUN_MISMATCH": RUN_MISMATCH,
            "STATE_DIR": state_dir,
            **retention_values(keep_local=keep_local, state_dir=state_dir, shared=shared),
        },
        CHECKPOINTS + RUN_IDENTITY + KUBERAY_DRIVER,
    )


# --- checkpoints without the shared filesystem --------------------------------------------------------

# The bash function list_complete_checkpoints of restore.sh and sync.sh: S3_URI, COMPLETE_MARKER.
S3_CHECKPOINTS = body("s3-checkpoints.sh")

RESTORE = body("restore.sh")

SYNC = body("sync.sh")


REMOVING = ".rlinf-eks-removing"
"""In a global_step_<N> the launcher's retention is removing (programs/checkpoints.py): written
before the marker goes, so the marking rule never marks a half-removed step again; never uploaded."""


def restore(checkpoint: Optional[str] = None) -> str:
    """restore.sh: the run's files and the newest complete checkpoint of each checkpoint directory;
    ``checkpoint`` (workload.mode eval's workload.eval.checkpoint): that one instead."""
    return render({"COMPLETE_MARKER": COMPLETE_MARKER, "RESTORE_CHECKPOINT": (checkpoint or "").rstrip("/")}, S3_CHECKPOINTS + RESTORE)


def sync(keep_in_bucket: Optional[int] = None) -> str:
    """sync.sh: uploads the run directory's complete checkpoints and records them in
    :data:`UPLOAD_RECORD`; ``keep_in_bucket`` (workload.checkpoints.keepInBucket): then deletes
    older complete checkpoints beyond it from the bucket (None: keeps every one)."""
    values = {"COMPLETE_MARKER": COMPLETE_MARKER, "UPLOAD_RECORD": UPLOAD_RECORD, "REMOVING": REMOVING, "KEEP_IN_BUCKET": keep_in_bucket or ""}
    return render(values, S3_CHECKPOINTS + SYNC)
