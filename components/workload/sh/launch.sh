set -uo pipefail
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
index="${JOB_COMPLETION_INDEX:?the manual launcher runs as a pod of an Indexed Job}"
log() { echo "rlinf-eks[pod ${index}]: $*" >&2; }
# RLinf asks every node for its rank before `ray start` (0 = the head), which its node probes read
# from the raylet's environment: the pod's index is that rank.
if [ -n "${NODE_RANK_ENV}" ]; then export "${NODE_RANK_ENV}=${index}"; fi
ray_node_flags=(--num-gpus="${GPUS_PER_NODE}" --num-cpus="${CPUS_PER_NODE}" --object-store-memory="${OBJECT_STORE_BYTES}" --disable-usage-stats --metrics-export-port="${RAY_METRICS_PORT}")
# The status of a pod that was stopped (eviction, node drain, Job deletion): 128 + SIGTERM, whatever
# the trainer or Ray did when told to stop, so a stopped run never reads as a finished one.
STOPPED=143
FAILURE_FILE="${RUN_DIR}/.rlinf-eks/last-failure"
RESUME_RECORD="${STATE_DIR}/resumed-from"

finish() {
  [ -n "${marker_loop:-}" ] && kill "${marker_loop}" 2>/dev/null
  [ -n "${head_watch:-}" ] && kill "${head_watch}" 2>/dev/null
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
#include programs/head_reachable.py
PY
}

# Runs as a background job (`wait_for_cluster &`): exec makes that job python itself, so the
# stop trap's `kill` reaches it.
wait_for_cluster() {
  exec python3 - "${NNODES}" "${GPUS_PER_NODE}" "${JOIN_TIMEOUT_SECONDS}" "${HEAD_HOST}:${RAY_PORT}" <<'PY'
#include programs/wait_for_cluster.py
PY
}

# On SIGTERM let a checkpoint being written settle before stopping, within the pod's grace period:
# wait while a file of a checkpoint (a path under RUN_DIR with a `checkpoints` or `global_step_N`
# part: veRL's default_local_dir, RLinf's <log_path or output_dir>/<experiment>/checkpoints) changed in the
# last 30 s. Logs are not watched: a trainer logs until it is stopped.
# shellcheck disable=SC2329 # called by stop_trainer and stop_worker, themselves called through wait_for's ON_STOP
settle_checkpoints() {
  # Only the checkpoint written at the stop request counts (programs/checkpoint_writes.py): its write
  # has ended once a newer global_step_M appears beside it (the trainers save synchronously), the
  # tracker names it, or it did not change for 30 s. Later saves are not waited for: a trainer that
  # checkpoints every few seconds never goes quiet, and would train on for the whole window.
  local outcome
  outcome=$(python3 - "${RUN_DIR}" "$(( GRACE_SECONDS > 120 ? GRACE_SECONDS - 60 : GRACE_SECONDS / 2 ))" 30 "${COMPLETE_MARKER}" <<'PY'
#include programs/checkpoint_writes.py
#include programs/settle_checkpoints.py
PY
  )
  log "${outcome}"
}

# A TERM/INT only counts here; the waits below act on it. Bash runs a trap between commands and
# makes a running `wait` return 128+signal at once, whether or not the child has ended meanwhile.
stop_signals=0
stopping=0
trap 'stop_signals=$(( stop_signals + 1 ))' TERM INT

# wait_for PID ON_STOP: sets rc to PID's own exit status. The first TERM/INT runs ON_STOP once;
# a wait it interrupted is waited again (returning PID's status even if PID has ended by then).
# A TERM/INT that came after the caller's last look and before this wait (while PID and the jobs
# beside it were being started) runs ON_STOP first: it is not lost.
wait_for() {
  local pid=$1 on_stop=$2 seen status
  rc=
  while :; do
    if [ "${stop_signals}" != 0 ] && [ "${stopping}" = 0 ]; then stopping=1; stop_started=${SECONDS}; "${on_stop}"; fi
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
# shellcheck disable=SC2329 # called by stop_trainer and stop_worker, themselves called through wait_for's ON_STOP
alive_until() {
  while kill -0 "$1" 2>/dev/null; do
    [ "${SECONDS}" -ge "$2" ] && return 0
    sleep 1
  done
  return 1
}

# The last moment to have stopped the trainer or Ray: 10 s (a quarter of short grace periods)
# before the kubelet's SIGKILL, kept to stop Ray and record the status.
# shellcheck disable=SC2329 # called by stop_trainer and stop_worker, themselves called through wait_for's ON_STOP
stop_deadline() { echo $(( stop_started + GRACE_SECONDS - (GRACE_SECONDS > 40 ? 10 : GRACE_SECONDS / 4) )); }

# stop_group PGID NAME: SIGINT, then SIGTERM, then SIGKILL to the process group, within what is
# left of the grace period.
# shellcheck disable=SC2329 # called by stop_trainer and stop_worker, themselves called through wait_for's ON_STOP
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
  # shellcheck disable=SC2046 # one word per PID of a background job
  kill $(jobs -p) 2>/dev/null
  ray stop --force >/dev/null 2>&1
  finish "${STOPPED}"
}

# shellcheck disable=SC2329 # called through wait_for's ON_STOP ("${on_stop}"), which shellcheck cannot follow
stop_trainer() {
  log "SIGTERM: letting the checkpoint write in progress under ${RUN_DIR} end, then interrupting the trainer"
  settle_checkpoints
  # a trainer that ended by itself meanwhile keeps its own status
  kill -0 "${trainer}" 2>/dev/null || return 0
  trainer_stopped=1
  stop_group "${trainer}" "the trainer"
}

run_head() {
  check_run_identity || finish "${EXIT_RUN_MISMATCH}"
  # Only the head retains (one pod removes, also on the shared filesystem), and only once the run
  # directory is known to be this run's; the resume point it records is never removed while it is
  # the newest complete checkpoint.
  checkpoints newest 2>/dev/null > "${RESUME_RECORD}" || rm -f "${RESUME_RECORD}" 2>/dev/null
  RETAIN_LOCAL=${KEEP_LOCAL} mark_checkpoints_loop &
  marker_loop=$!
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
    checkpoints mark  # the one whose write the stop let end, once a newer one began
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

# shellcheck disable=SC2329 # called through wait_for's ON_STOP ("${on_stop}"), which shellcheck cannot follow
stop_worker() {
  # Every pod of the Job gets SIGTERM at once: this node's ranks may be writing their shards of the
  # checkpoint the head is letting settle, so stop Ray here only once the writes have settled too.
  log "SIGTERM: letting the checkpoint write in progress under ${RUN_DIR} end, then stopping Ray on this node"
  settle_checkpoints
  # `ray start --block` stops its processes on SIGTERM (waiting for them to exit) and exits 1
  kill -TERM "${raylet}" 2>/dev/null
  alive_until "${raylet}" "$(stop_deadline)" && kill -KILL "${raylet}" 2>/dev/null
}

# Runs as a background job while Ray runs on a worker. The head ends its run with `ray stop --force`
# (closing the GCS port) and its pod then ends, but Ray here would hold the node (and its GPUs)
# until its raylet gives up on the lost GCS (gcs_rpc_server_reconnect_timeout_s: 60 s by default)
# and the checks after it. So: the head is checked every 2 s; 3 misses in a row (the port refused
# or unresolvable for 6-20 s, longer than a Ray head ever closes it while its run lives) say that
# the run has ended: a checkpoint this node's ranks still write settles, then Ray here stops.
# Stopped (finish, or Ray on this node ended first), it ends its sleep with it: nothing outlives it.
watch_head() {
  local missed=0 nap=
  trap 'kill "${nap}" 2>/dev/null; exit 0' TERM
  while [ "${missed}" -lt 3 ]; do
    sleep 2 & nap=$!
    wait "${nap}"
    if head_reachable; then missed=0; else missed=$(( missed + 1 )); fi
  done
  log "the Ray head ${HEAD_HOST}:${RAY_PORT} is gone: letting checkpoint writes under ${RUN_DIR} settle, then stopping Ray on this node"
  : > "${HEAD_GONE}"
  settle_checkpoints
  kill -TERM "${raylet}" 2>/dev/null
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
  HEAD_GONE="${STATE_DIR}/head-gone"
  rm -f "${HEAD_GONE}"
  watch_head &
  head_watch=$!
  wait_for "${raylet}" stop_worker
  kill "${head_watch}" 2>/dev/null
  # A stopped worker reports that it was stopped: a node drained or evicted while the head still
  # trains fails the Job (backoffLimit 0) instead of leaving the head waiting on lost ranks; after
  # the head succeeded, the Job is already complete (successPolicy) when the controller stops the
  # rest.
  if [ "${stopping}" = 1 ]; then
    log "stopped: Ray on this node exited with status ${rc}; the pod reports ${STOPPED}"
    checkpoints mark
    finish "${STOPPED}"
  fi
  # The head decides the Job: the success policy completes it when index 0 succeeds, and
  # backoffLimit 0 fails it when any pod fails. Ray on a worker stops once the head is gone; that
  # worker has done its part. Ray stopping while the head still answers is this node failing.
  if [ -f "${HEAD_GONE}" ]; then
    log "the Ray head is gone: the run has ended"
  elif [ "${rc}" -ne 0 ]; then
    for _ in 1 2 3; do
      if head_reachable; then log "Ray on this node stopped (status ${rc}) while the head still runs"; finish "${rc}"; fi
      sleep 10 & wait $!
    done
    log "the Ray head is gone: the run has ended"
  fi
  finish 0
}

if [ "${index}" = 0 ]; then
  run_head
else
  mark_checkpoints_loop &
  marker_loop=$!
  run_worker
fi
