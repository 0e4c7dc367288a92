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


# --- manual launcher ------------------------------------------------------------------------------

MANUAL_LAUNCH = r"""
set -uo pipefail
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
index="${JOB_COMPLETION_INDEX:?the manual launcher runs as a pod of an Indexed Job}"
log() { echo "rlinf-eks[pod ${index}]: $*" >&2; }
ray_node_flags=(--num-gpus="${GPUS_PER_NODE}" --num-cpus="${CPUS_PER_NODE}" --object-store-memory="${OBJECT_STORE_BYTES}" --disable-usage-stats)

finish() {
  [ -d "${STATE_DIR}" ] && echo "$1" > "${STATE_DIR}/exit-code"
  exit "$1"
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
            f"(kubectl get pods -l batch.kubernetes.io/job-name=training), that the GPU node group has "
            f"{nodes_wanted} ready nodes, and that the workers reach {head}."
        )
    time.sleep(5)
ray.shutdown()
PY
}

# On SIGTERM (eviction, node drain, Job deletion) let a checkpoint being written settle before
# interrupting the trainer, within the pod's grace period.
settle_checkpoints() {
  python3 - "${RUN_DIR}" "$(( GRACE_SECONDS > 120 ? GRACE_SECONDS - 60 : GRACE_SECONDS / 2 ))" <<'PY'
import os, sys, time

root, budget = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + budget

def newest() -> float:
    latest = 0.0
    for base, _dirs, files in os.walk(root):
        for name in files:
            try:
                latest = max(latest, os.stat(os.path.join(base, name)).st_mtime)
            except OSError:
                pass
    return latest

while time.monotonic() < deadline and time.time() - newest() < 30:
    time.sleep(5)
PY
}

# Until training starts a stop request ends the pod at once: bash as PID 1 ignores SIGTERM
# without a trap, which would hold a pod that is still waiting for its peers for the whole grace
# period. (Waits run in the background so that `wait` returns as soon as the signal arrives.)
trap 'log "stopped before training started"; kill $(jobs -p) 2>/dev/null; ray stop --force >/dev/null 2>&1; finish 143' TERM INT

run_head() {
  ray start --head --port="${RAY_PORT}" --dashboard-host=0.0.0.0 "${ray_node_flags[@]}" || { log "ray start --head failed"; finish 1; }
  wait_for_cluster &
  wait "$!" || finish 3
  export RAY_ADDRESS="${RAY_ADDRESS:-127.0.0.1:${RAY_PORT}}"
  bash "${TRAINER_SCRIPT}" &
  trainer=$!
  trap 'log "SIGTERM: letting checkpoint writes under ${RUN_DIR} settle, then interrupting the trainer"; settle_checkpoints; kill -INT "${trainer}" 2>/dev/null' TERM INT
  wait "${trainer}"; rc=$?
  while kill -0 "${trainer}" 2>/dev/null; do wait "${trainer}"; rc=$?; done
  log "trainer exited with status ${rc}"
  ray stop --force >/dev/null 2>&1
  finish "${rc}"
}

run_worker() {
  deadline=$(( SECONDS + JOIN_TIMEOUT_SECONDS ))
  until head_reachable; do
    if [ "${SECONDS}" -ge "${deadline}" ]; then
      log "the Ray head ${HEAD_HOST}:${RAY_PORT} did not answer within ${JOIN_TIMEOUT_SECONDS}s: is pod training-0 Running?"
      finish 3
    fi
    sleep 5
  done
  ray start --address="${HEAD_HOST}:${RAY_PORT}" "${ray_node_flags[@]}" --block &
  raylet=$!
  # Every pod of the Job gets SIGTERM at once: this node's ranks may be writing their shards of the
  # checkpoint the head is letting settle, so stop Ray here only once the writes have settled too.
  trap 'log "SIGTERM: letting checkpoint writes under ${RUN_DIR} settle, then stopping Ray on this node"; settle_checkpoints; kill -TERM "${raylet}" 2>/dev/null' TERM INT
  wait "${raylet}"; rc=$?
  while kill -0 "${raylet}" 2>/dev/null; do wait "${raylet}"; rc=$?; done
  # The head decides the Job: the success policy completes it when index 0 succeeds, and
  # backoffLimit 0 fails it when any pod fails. Ray on a worker stops once the head is gone; that
  # worker has done its part. Ray stopping while the head still answers is this node failing.
  if [ "${rc}" -ne 0 ]; then
    for _ in 1 2 3; do
      if head_reachable; then log "Ray on this node stopped (status ${rc}) while the head still runs"; finish "${rc}"; fi
      sleep 10
    done
    log "the Ray head is gone: the run has ended"
  fi
  finish 0
}

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
        },
        MANUAL_LAUNCH,
    )


# --- KubeRay driver ---------------------------------------------------------------------------------

KUBERAY_DRIVER = r"""
set -uo pipefail
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
exec bash "${TRAINER_SCRIPT}"
"""


def kuberay_driver(*, trainer_pythonpath: str, trainer_script: str) -> str:
    """driver.sh: the RayJob entrypoint, run by the job supervisor on the head pod."""
    return render({"TRAINER_PYTHONPATH": trainer_pythonpath, "TRAINER_SCRIPT": trainer_script}, KUBERAY_DRIVER)


# --- checkpoints without the shared filesystem --------------------------------------------------------

RESTORE = r"""
set -euo pipefail
# RUN_DIR and S3_URI come from the container's env. Nothing there yet is a fresh run.
echo "rlinf-eks: restoring ${S3_URI}/ into ${RUN_DIR}/" >&2
aws s3 sync "${S3_URI}/" "${RUN_DIR}/" --only-show-errors
"""

SYNC = r"""
set -uo pipefail
# RUN_DIR, STATE_DIR, S3_URI and SYNC_INTERVAL_SECONDS come from the container's env.
stop=0
trap 'stop=1' TERM INT
upload() { aws s3 sync "${RUN_DIR}/" "${S3_URI}/" --only-show-errors; }
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
    return f"{_SHEBANG}{RESTORE}"


def sync() -> str:
    return f"{_SHEBANG}{SYNC}"
