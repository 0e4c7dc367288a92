set -euo pipefail
# One input of the run: INPUT_NAME, MODEL_SOURCE, MODEL_KIND (hf or s3), MODEL_DIR and HF_REPO /
# HF_REPO_TYPE / HF_REVISION / HF_PATH or S3_URI / S3_OBJECT come from the container's env.
# one marker per file or folder of a repository (HF_PATH): two inputs, or two runs, that take
# different files of one dataset share its folder but never each other's marker
hf_path="${HF_PATH:-}"
marker="${MODEL_DIR}/${MARKER}${hf_path:+.${hf_path//\//_}}"
lock="${MODEL_DIR}.lock"
me="${HOSTNAME:-pid-$$}"
# who holds the lock: the pod and this attempt (a restarted init container keeps its HOSTNAME)
token="${me}:$$:${RANDOM}${RANDOM}"
INPUT_NAME="${INPUT_NAME:-model}"
log() { echo "rlinf-eks[stage-${INPUT_NAME} ${me}]: $*" >&2; }
staged() { [ -f "${marker}" ] && [ "$(cat "${marker}")" = "${MODEL_SOURCE}" ]; }

download_hf() {
  python3 - <<'PY'
#include programs/download_hf.py
PY
}

download_s3() {
  if [ "${S3_OBJECT:-0}" = 1 ]; then
    aws s3 cp "${S3_URI}" "${MODEL_DIR}/${S3_URI##*/}" --only-show-errors
  else
    aws s3 sync "${S3_URI}/" "${MODEL_DIR}/" --only-show-errors
  fi
}

# Both downloads resume: files already complete are skipped on the next attempt.
download() {
  local attempt
  for attempt in 1 2 3; do
    if "download_${MODEL_KIND}"; then return 0; fi
    log "download attempt ${attempt} of ${MODEL_SOURCE} failed"
    if [ "${attempt}" -lt 3 ]; then sleep "${RETRY_SECONDS}"; fi
  done
  return 1
}

hold_lock() {
  echo "${token}" > "${lock}/owner"
  touch "${lock}/heartbeat"
  ( while sleep "${HEARTBEAT_SECONDS}"; do touch "${lock}/heartbeat" 2>/dev/null || exit 0; done ) &
  beat=$!
  trap release_lock EXIT
  trap 'exit 143' TERM INT
}

# Only our own lock: when our heartbeat stalled past LOCK_STALE_SECONDS, another pod took the lock
# over, and removing its lock would let a third pod download into the same folder beside it.
release_lock() {
  kill "${beat}" 2>/dev/null || true
  if [ "$(cat "${lock}/owner" 2>/dev/null)" = "${token}" ]; then rm -rf "${lock}"; fi
}

lock_age() {
  local now changed
  now=$(date +%s)
  changed=$(stat -c %Y "${lock}/heartbeat" 2>/dev/null || stat -c %Y "${lock}" 2>/dev/null || echo "${now}")
  echo $(( now - changed ))
}

mkdir -p "$(dirname "${MODEL_DIR}")"
waited=0
until staged; do
  if mkdir "${lock}" 2>/dev/null; then
    hold_lock
    if ! staged; then
      log "staging ${MODEL_SOURCE} into ${MODEL_DIR}"
      mkdir -p "${MODEL_DIR}"
      download || { echo "rlinf-eks: FAILED: input ${INPUT_NAME}: could not stage ${MODEL_SOURCE} into ${MODEL_DIR} after 3 attempts (unreachable, missing, or no access: the hfToken secret for a gated repository, the training role for S3); set workload.inputs.${INPUT_NAME} to a source the pods can read" >&2; exit 1; }
      echo "${MODEL_SOURCE}" > "${marker}.${me}"
      mv -f "${marker}.${me}" "${marker}"
    fi
    break
  fi
  age=$(lock_age)
  owner=$(cat "${lock}/owner" 2>/dev/null || echo "another pod")
  owner="${owner%%:*}"
  if [ "${age}" -gt "${LOCK_STALE_SECONDS}" ]; then
    # rename first: of several waiters only one moves the stale lock away
    log "the staging lock of ${owner} has not moved for ${age}s: taking over"
    stale="${lock}.stale.${me}.$$"
    if mv "${lock}" "${stale}" 2>/dev/null; then rm -rf "${stale}"; fi
    continue
  fi
  if [ $(( waited % 60 )) -eq 0 ]; then log "waiting for ${owner} to stage ${MODEL_SOURCE} (${waited}s)"; fi
  sleep "${POLL_SECONDS}"
  waited=$(( waited + POLL_SECONDS ))
done
log "input ${INPUT_NAME} (${MODEL_SOURCE}) is ready at ${MODEL_DIR}"
