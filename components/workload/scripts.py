"""The shell scripts rendered into the launch ConfigMap (mounted at /etc/rlinf).

Each script is a block of generated ``NAME=value`` assignments (quoted with shlex) followed by a
fixed body: nothing is substituted inside the body, so a value can never break its syntax.
"""

from __future__ import annotations

from typing import Any, Mapping

from .pod import shell_assignments

_SHEBANG = "#!/bin/bash\n# Rendered by rlinf-eks (components/workload/scripts.py). Do not edit in the cluster.\n"


def render(values: Mapping[str, Any], body: str) -> str:
    return f"{_SHEBANG}{shell_assignments(values)}\n{body}"


# --- complete checkpoints --------------------------------------------------------------------------

COMPLETE_MARKER = ".rlinf-eks-complete"  # the same name as trainers.base.COMPLETE_MARKER
REPEATED_FAILURE = 86
"""The head's status when the trainer failed twice from the same complete checkpoint (no new one in
between): a trainer bug, not a fault that a restart cures."""

# Bash functions of launch.sh and driver.sh, on every pod that runs Ray. CHECKPOINT_PATTERNS:
# Python glob patterns (one a line) of the trainer's global_step_<N> directories.
CHECKPOINTS = r"""
# The trainers give no completeness signal a launcher can read for every layout (SimpleVLA-RL's
# veRL writes no tracker file), but their
# drivers save synchronously: RLinf's runner and veRL's fit() call the worker group's
# save_checkpoint, which returns only once every rank's save returned, before the next step
# starts. So global_step_N is complete once a newer global_step_M (M > N) exists beside it, once
# upstream veRL's latest_checkpointed_iteration.txt beside it names N or later, or once the
# trainer exited 0. The marker is written by rename: its presence is never partial.
# checkpoints mark|final|newest|loop: mark the complete ones (final: all, the trainer exited 0),
# print the newest complete one ("none"), or mark every 10 s until killed.
checkpoints() {
  ${CHECKPOINTS_EXEC:-command} python3 - "$1" "${CHECKPOINT_PATTERNS}" "${COMPLETE_MARKER}" <<'PY'
import glob, os, re, socket, sys, time

mode, patterns, marker = sys.argv[1], sys.argv[2].split("\n"), sys.argv[3]


def scan(mode):
    by_parent = {}
    for pattern in filter(None, patterns):
        for path in glob.glob(pattern):
            match = re.fullmatch(r"global_step_(\d+)", os.path.basename(path))
            if match and os.path.isdir(path):
                by_parent.setdefault(os.path.dirname(path), {})[int(match.group(1))] = path
    complete = []
    for parent, steps in by_parent.items():
        try:
            tracked = int(open(os.path.join(parent, "latest_checkpointed_iteration.txt")).read().strip())
        except (OSError, ValueError):
            tracked = -1
        newest = max(steps)
        for step, path in steps.items():
            done = os.path.exists(os.path.join(path, marker))
            if not done and mode != "newest" and (mode == "final" or step < newest or step <= tracked):
                # every pod marks (each node's own run directory without the shared filesystem):
                # a per-process temporary name, so two pods never rename each other's file
                tmp = os.path.join(path, f"{marker}.{socket.gethostname()}.{os.getpid()}.tmp")
                try:
                    with open(tmp, "w") as out:
                        out.write(f"{step}\n")
                    os.replace(tmp, os.path.join(path, marker))
                except OSError as err:
                    print(f"rlinf-eks: could not mark {path} complete: {err}", file=sys.stderr)
                    continue
                print(f"rlinf-eks: checkpoint {path} is complete", file=sys.stderr)
                done = True
            if done:
                complete.append((step, path))
    return max(complete)[1] if complete else "none"


if mode == "loop":
    # a glob of the checkpoint parents: a few directory listings, no file stats
    while True:
        scan("mark")
        time.sleep(10)
result = scan(mode)
if mode == "newest":
    print(result)
PY
}

# Runs as a background job: exec makes that job python itself, so `kill` stops it.
mark_checkpoints_loop() { CHECKPOINTS_EXEC=exec checkpoints loop; }
"""

# --- manual launcher ------------------------------------------------------------------------------

MANUAL_LAUNCH = r"""
set -uo pipefail
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
index="${JOB_COMPLETION_INDEX:?the manual launcher runs as a pod of an Indexed Job}"
log() { echo "rlinf-eks[pod ${index}]: $*" >&2; }
ray_node_flags=(--num-gpus="${GPUS_PER_NODE}" --num-cpus="${CPUS_PER_NODE}" --object-store-memory="${OBJECT_STORE_BYTES}" --disable-usage-stats)
# The status of a pod that was stopped (eviction, node drain, Job deletion): 128 + SIGTERM, whatever
# the trainer or Ray did when told to stop, so a stopped run never reads as a finished one.
STOPPED=143
FAILURE_FILE="${RUN_DIR}/.rlinf-eks/last-failure"

finish() {
  [ -n "${marker_loop:-}" ] && kill "${marker_loop}" 2>/dev/null
  [ -d "${STATE_DIR}" ] && echo "$1" > "${STATE_DIR}/exit-code"
  exit "$1"
}

# After a trainer failure: the run would resume from the newest complete checkpoint. A second
# failure from that same checkpoint (no newer complete one in between) is a trainer bug that fails
# again at the same step: the pod reports REPEATED_FAILURE, a status of its own that a gang-restart
# policy can match (podFailurePolicy onExitCodes -> FailJob) to stop retrying; with today's Job
# (backoffLimit 0) every failure already ends the run. The file lives beside the checkpoints (FSx,
# or the run directory synced to S3), so it outlives the pod.
check_repeated_failure() {
  local resume_point
  resume_point=$(checkpoints newest)
  mkdir -p "$(dirname "${FAILURE_FILE}")"
  if [ -f "${FAILURE_FILE}" ] && [ "$(cat "${FAILURE_FILE}")" = "${resume_point}" ]; then
    log "the trainer failed again (status ${rc}) from the same checkpoint (${resume_point}): not a fault a restart cures; the pod reports ${REPEATED_FAILURE}"
    rc=${REPEATED_FAILURE}
  else
    echo "${resume_point}" > "${FAILURE_FILE}"
  fi
}

head_reachable() {
  python3 - "${HEAD_HOST}" "${RAY_PORT}" <<'PY'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
except OSError:
    sys.exit(1)
PY
}

# Runs as a background job (`wait_for_cluster &`): exec makes that job python itself, so the
# stop trap's `kill` reaches it.
wait_for_cluster() {
  exec python3 - "${NNODES}" "${GPUS_PER_NODE}" "${JOIN_TIMEOUT_SECONDS}" "${HEAD_HOST}:${RAY_PORT}" <<'PY'
import sys, time
import ray

nodes_wanted, gpus_per_node, timeout = (int(a) for a in sys.argv[1:4])
head = sys.argv[4]
gpus_wanted = nodes_wanted * gpus_per_node
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + timeout
while True:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if len(alive) >= nodes_wanted and gpus >= gpus_wanted:
        print(f"rlinf-eks: Ray cluster ready: {len(alive)} nodes, {gpus} GPUs", flush=True)
        break
    if time.monotonic() > deadline:
        sys.exit(
            f"rlinf-eks: the Ray cluster did not form within {timeout}s: {len(alive)} of {nodes_wanted} "
            f"nodes and {gpus} of {gpus_wanted} GPUs joined. Check that every pod of the Job is Running "
            f"(kubectl get pods -l app.kubernetes.io/component=manual-ray), that the GPU node group has "
            f"{nodes_wanted} ready nodes, and that the workers reach {head}."
        )
    time.sleep(5)
ray.shutdown()
PY
}

# On SIGTERM let a checkpoint being written settle before stopping, within the pod's grace period:
# wait while a file of a checkpoint (a path under RUN_DIR with a `checkpoints` or `global_step_N`
# part: veRL's default_local_dir, RLinf's <log_path>[/<experiment>]/checkpoints) changed in the
# last 30 s. Logs are not watched: a trainer logs until it is stopped.
settle_checkpoints() {
  python3 - "${RUN_DIR}" "$(( GRACE_SECONDS > 120 ? GRACE_SECONDS - 60 : GRACE_SECONDS / 2 ))" <<'PY'
import os, re, sys, time

root, budget = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + budget
checkpoint_part = re.compile(r"^(checkpoints|global_step_\d+)$")

def newest() -> float:
    latest = 0.0
    for base, dirs, files in os.walk(root):
        parts = os.path.relpath(base, root).split(os.sep)
        if not any(checkpoint_part.match(p) for p in parts):
            continue
        for name in files:
            try:
                latest = max(latest, os.stat(os.path.join(base, name)).st_mtime)
            except OSError:
                pass
    return latest

# every 5 s at most: a walk stats every file of every kept checkpoint (metadata operations on FSx)
while time.monotonic() < deadline and time.time() - newest() < 30:
    time.sleep(max(0.0, min(5.0, deadline - time.monotonic())))
PY
}

# A TERM/INT only counts here; the waits below act on it. Bash runs a trap between commands and
# makes a running `wait` return 128+signal at once, whether or not the child has ended meanwhile.
stop_signals=0
stopping=0
trap 'stop_signals=$(( stop_signals + 1 ))' TERM INT

# wait_for PID ON_STOP: sets rc to PID's own exit status. The first TERM/INT runs ON_STOP once;
# a wait it interrupted is waited again (returning PID's status even if PID has ended by then).
wait_for() {
  local pid=$1 on_stop=$2 seen status
  rc=
  while :; do
    seen=${stop_signals}
    wait "${pid}"; status=$?
    # 127: the previous wait had already returned PID's status when the signal arrived
    if [ "${status}" = 127 ] && [ -n "${rc}" ]; then return; fi
    rc=${status}
    [ "${stop_signals}" = "${seen}" ] && return
    if [ "${stopping}" = 0 ]; then stopping=1; stop_started=${SECONDS}; "${on_stop}"; fi
  done
}

# alive_until PID DEADLINE: whether PID still runs at DEADLINE (in $SECONDS), polling each second.
alive_until() {
  while kill -0 "$1" 2>/dev/null; do
    [ "${SECONDS}" -ge "$2" ] && return 0
    sleep 1
  done
  return 1
}

# The last moment to have stopped the trainer or Ray: 10 s (a quarter of short grace periods)
# before the kubelet's SIGKILL, kept to stop Ray and record the status.
stop_deadline() { echo $(( stop_started + GRACE_SECONDS - (GRACE_SECONDS > 40 ? 10 : GRACE_SECONDS / 4) )); }

# stop_group PGID NAME: SIGINT, then SIGTERM, then SIGKILL to the process group, within what is
# left of the grace period.
stop_group() {
  local pgid=$1 name=$2 deadline
  deadline=$(stop_deadline)
  kill -INT -- "-${pgid}" 2>/dev/null || return 0
  alive_until "${pgid}" $(( SECONDS + (deadline - SECONDS) / 2 )) || return 0
  log "${name} still runs after SIGINT: sending SIGTERM"
  kill -TERM -- "-${pgid}" 2>/dev/null
  alive_until "${pgid}" "${deadline}" || return 0
  log "${name} still runs after SIGTERM: sending SIGKILL"
  kill -KILL -- "-${pgid}" 2>/dev/null
}

# Before training (the head waiting for its peers, a worker waiting for the head) a stop ends the
# pod at once: bash as PID 1 ignores SIGTERM without a trap, which would hold the pod for the whole
# grace period.
stop_at_once() {
  log "stopped before training started"
  kill $(jobs -p) 2>/dev/null
  ray stop --force >/dev/null 2>&1
  finish "${STOPPED}"
}

stop_trainer() {
  log "SIGTERM: letting checkpoint writes under ${RUN_DIR} settle, then interrupting the trainer"
  settle_checkpoints
  # a trainer that ended by itself meanwhile keeps its own status
  kill -0 "${trainer}" 2>/dev/null || return 0
  trainer_stopped=1
  stop_group "${trainer}" "the trainer"
}

run_head() {
  ray start --head --port="${RAY_PORT}" --dashboard-host=0.0.0.0 "${ray_node_flags[@]}" || { log "ray start --head failed"; finish 1; }
  [ "${stop_signals}" = 0 ] || stop_at_once
  wait_for_cluster &
  wait_for "$!" stop_at_once
  [ "${rc}" = 0 ] || finish 3
  [ "${stop_signals}" = 0 ] || stop_at_once
  export RAY_ADDRESS="${RAY_ADDRESS:-127.0.0.1:${RAY_PORT}}"
  # Job control gives the trainer its own process group with SIGINT at its default: bash starts a
  # background command of a script with SIGINT ignored, and Python then installs no
  # KeyboardInterrupt handler (Python docs, signal: "SIGINT is translated into KeyboardInterrupt
  # ... unless it is ignored"). The group also reaches whatever the trainer started.
  trainer_stopped=0
  set -m
  bash "${TRAINER_SCRIPT%/*}/progress.sh" bash "${TRAINER_SCRIPT}" &  # under the progress watchdog (progress.py)
  trainer=$!
  set +m
  wait_for "${trainer}" stop_trainer
  if [ "${trainer_stopped}" = 1 ]; then
    log "stopped: the trainer exited with status ${rc} after the stop request; the pod reports ${STOPPED}"
    rc=${STOPPED}
  else
    log "trainer exited with status ${rc}"
    if [ "${rc}" = 0 ]; then
      checkpoints final
      rm -f "${FAILURE_FILE}"
    else
      checkpoints mark
      check_repeated_failure
    fi
  fi
  ray stop --force >/dev/null 2>&1
  finish "${rc}"
}

stop_worker() {
  # Every pod of the Job gets SIGTERM at once: this node's ranks may be writing their shards of the
  # checkpoint the head is letting settle, so stop Ray here only once the writes have settled too.
  log "SIGTERM: letting checkpoint writes under ${RUN_DIR} settle, then stopping Ray on this node"
  settle_checkpoints
  # `ray start --block` stops its processes on SIGTERM (waiting for them to exit) and exits 1
  kill -TERM "${raylet}" 2>/dev/null
  alive_until "${raylet}" "$(stop_deadline)" && kill -KILL "${raylet}" 2>/dev/null
}

run_worker() {
  deadline=$(( SECONDS + JOIN_TIMEOUT_SECONDS ))
  until head_reachable; do
    [ "${stop_signals}" = 0 ] || stop_at_once
    if [ "${SECONDS}" -ge "${deadline}" ]; then
      log "the Ray head ${HEAD_HOST}:${RAY_PORT} did not answer within ${JOIN_TIMEOUT_SECONDS}s: is pod ${HEAD_HOST%%.*} Running?"
      finish 3
    fi
    sleep 5 & wait $!
  done
  [ "${stop_signals}" = 0 ] || stop_at_once
  ray start --address="${HEAD_HOST}:${RAY_PORT}" "${ray_node_flags[@]}" --block &
  raylet=$!
  wait_for "${raylet}" stop_worker
  # A stopped worker reports that it was stopped: a node drained or evicted while the head still
  # trains fails the Job (backoffLimit 0) instead of leaving the head waiting on lost ranks; after
  # the head succeeded, the Job is already complete (successPolicy) when the controller stops the
  # rest.
  if [ "${stopping}" = 1 ]; then
    log "stopped: Ray on this node exited with status ${rc}; the pod reports ${STOPPED}"
    finish "${STOPPED}"
  fi
  # The head decides the Job: the success policy completes it when index 0 succeeds, and
  # backoffLimit 0 fails it when any pod fails. Ray on a worker stops once the head is gone; that
  # worker has done its part. Ray stopping while the head still answers is this node failing.
  if [ "${rc}" -ne 0 ]; then
    for _ in 1 2 3; do
      if head_reachable; then log "Ray on this node stopped (status ${rc}) while the head still runs"; finish "${rc}"; fi
      sleep 10 & wait $!
    done
    log "the Ray head is gone: the run has ended"
  fi
  finish 0
}

mark_checkpoints_loop &
marker_loop=$!
if [ "${index}" = 0 ]; then run_head; else run_worker; fi
"""


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
) -> str:
    """launch.sh of the Indexed Job: pod 0 starts the Ray head, waits until ``nnodes`` nodes and
    ``nnodes * gpus_per_node`` GPUs joined (failing with a clear message after the timeout), then
    runs the trainer and exits with its status; pods 1..N-1 join the head and block."""
    return render(
        {
            "NNODES": nnodes,
            "GPUS_PER_NODE": gpus_per_node,
            "CPUS_PER_NODE": cpus_per_node,
            "OBJECT_STORE_BYTES": object_store_bytes,
            "HEAD_HOST": head_host,
            "RAY_PORT": ray_port,
            "JOIN_TIMEOUT_SECONDS": join_timeout_seconds,
            "GRACE_SECONDS": grace_seconds,
            "RUN_DIR": run_dir,
            "STATE_DIR": state_dir,
            "TRAINER_PYTHONPATH": trainer_pythonpath,
            "TRAINER_SCRIPT": trainer_script,
            "CHECKPOINT_PATTERNS": "\n".join(checkpoint_patterns),
            "COMPLETE_MARKER": COMPLETE_MARKER,
            "REPEATED_FAILURE": REPEATED_FAILURE,
        },
        CHECKPOINTS + MANUAL_LAUNCH,
    )


# --- KubeRay driver ---------------------------------------------------------------------------------

KUBERAY_DRIVER = r"""
set -uo pipefail
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
# Ray's job supervisor stops a driver with SIGTERM (ray job stop): pass it on to the trainer, which
# runs under the progress watchdog (progress.sh: a hang or a Capacity Block's end stops it). The
# watchdog ignores signals sent to it and leaves them to the trainer, so they go to the process
# group the two share (job control gives it its own).
set -m
bash "${TRAINER_SCRIPT%/*}/progress.sh" bash "${TRAINER_SCRIPT}" &
trainer=$!
set +m
trap 'kill -TERM -- "-${trainer}" 2>/dev/null' TERM INT
mark_checkpoints_loop &
marker_loop=$!
while :; do
  wait "${trainer}"; rc=$?
  kill -0 "${trainer}" 2>/dev/null || break
done
kill "${marker_loop}" 2>/dev/null
if [ "${rc}" = 0 ]; then checkpoints final; else checkpoints mark; fi
exit "${rc}"
"""


def kuberay_driver(*, trainer_pythonpath: str, trainer_script: str, checkpoint_patterns: tuple[str, ...] = ()) -> str:
    """driver.sh: the RayJob entrypoint, run by the job supervisor on the head pod. It marks the
    trainer's complete checkpoints as launch.sh does; a retried RayJob (``backoffLimit``) resumes
    from the newest marked one."""
    return render(
        {
            "TRAINER_PYTHONPATH": trainer_pythonpath,
            "TRAINER_SCRIPT": trainer_script,
            "CHECKPOINT_PATTERNS": "\n".join(checkpoint_patterns),
            "COMPLETE_MARKER": COMPLETE_MARKER,
        },
        CHECKPOINTS + KUBERAY_DRIVER,
    )


# --- checkpoints without the shared filesystem --------------------------------------------------------

RESTORE = r"""
set -euo pipefail
shopt -s globstar nullglob
# RUN_DIR and S3_URI come from the container's env. Nothing there yet is a fresh run.
echo "rlinf-eks: restoring ${S3_URI}/ into ${RUN_DIR}/" >&2
aws s3 sync "${S3_URI}/" "${RUN_DIR}/" --only-show-errors
# The upload sends a checkpoint's marker only after all its files, so files of a step without its
# marker are an upload cut off midway: never restore them as a checkpoint.
for step in "${RUN_DIR}"/**/global_step_*/; do
  if [ ! -f "${step}${COMPLETE_MARKER}" ]; then
    echo "rlinf-eks: ${step} is not a complete checkpoint in ${S3_URI}: removed, not resumed from" >&2
    rm -rf "${step}"
  fi
done
"""

SYNC = r"""
set -uo pipefail
# RUN_DIR, STATE_DIR, S3_URI and SYNC_INTERVAL_SECONDS come from the container's env.
stop=0
trap 'stop=1' TERM INT
shopt -s globstar nullglob
# Only complete checkpoints (a global_step_<N> holding the launcher's marker) go up, and their
# markers in a second pass once every file is there: S3 never holds a marker for a partial step.
upload() {
  local step excludes=(--exclude "*${COMPLETE_MARKER}" --exclude "*${COMPLETE_MARKER}.*.tmp")
  for step in "${RUN_DIR}"/**/global_step_*/; do
    [ -f "${step}${COMPLETE_MARKER}" ] || excludes+=(--exclude "${step#"${RUN_DIR}/"}*")
  done
  aws s3 sync "${RUN_DIR}/" "${S3_URI}/" --only-show-errors "${excludes[@]}" &&
    aws s3 sync "${RUN_DIR}/" "${S3_URI}/" --only-show-errors --exclude "*" --include "*/${COMPLETE_MARKER}"
}
waited=0
while [ ! -f "${STATE_DIR}/exit-code" ] && [ "${stop}" = 0 ]; do
  sleep 5 & wait $!
  waited=$(( waited + 5 ))
  if [ "${waited}" -ge "${SYNC_INTERVAL_SECONDS}" ]; then
    upload || echo "rlinf-eks: checkpoint upload to ${S3_URI} failed; retrying in ${SYNC_INTERVAL_SECONDS}s" >&2
    waited=0
  fi
done
# no delete flag: a sync never removes anything from S3
for attempt in 1 2 3; do
  if upload; then echo "rlinf-eks: run directory saved to ${S3_URI}/" >&2; exit 0; fi
  sleep 10
done
echo "rlinf-eks: FINAL CHECKPOINT UPLOAD TO ${S3_URI} FAILED: the newest checkpoint exists only on this node" >&2
exit 1
"""


def restore() -> str:
    return render({"COMPLETE_MARKER": COMPLETE_MARKER}, RESTORE)


def sync() -> str:
    return render({"COMPLETE_MARKER": COMPLETE_MARKER}, SYNC)
