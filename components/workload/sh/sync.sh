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
for _ in 1 2 3; do
  if upload; then echo "rlinf-eks: run directory saved to ${S3_URI}/" >&2; exit 0; fi
  sleep 10
done
echo "rlinf-eks: FINAL CHECKPOINT UPLOAD TO ${S3_URI} FAILED: the newest checkpoint exists only on this node" >&2
exit 1
