set -uo pipefail
# RUN_DIR, STATE_DIR, S3_URI and SYNC_INTERVAL_SECONDS come from the container's env.
stop=0
trap 'stop=1' TERM INT
shopt -s globstar nullglob
# Only complete checkpoints (a global_step_<N> holding the launcher's marker) go up, and their
# markers in a second pass once every file is there: S3 never holds a marker for a partial step.
# Every step is left out unless it was complete when the pass began (filters: the later wins), so
# a step the trainer begins during the upload is not sent either.
# The markers sent are those of the steps complete when the first pass began (a step marked since
# had its files left out). Then UPLOAD_RECORD in STATE_DIR lists them: the launcher removes a
# checkpoint from the node only once it is there (checkpoints.sh).
upload() {
  local step rel complete=() markers=(--exclude "*") n=0 filters=(--exclude "*global_step_*/*")
  for step in "${RUN_DIR}"/**/global_step_*/; do
    rel=${step#"${RUN_DIR}/"}
    if [ -f "${step}${COMPLETE_MARKER}" ]; then
      complete+=("${step%/}")
      n=$(( n + 1 ))
      filters+=(--include "${rel}*")
      markers+=(--include "${rel}${COMPLETE_MARKER}")
    fi
  done
  filters+=(--exclude "*${COMPLETE_MARKER}" --exclude "*${COMPLETE_MARKER}.*.tmp" --exclude "*/${REMOVING}")
  aws s3 sync "${RUN_DIR}/" "${S3_URI}/" --only-show-errors "${filters[@]}" || return
  if [ "${n}" -gt 0 ]; then
    aws s3 sync "${RUN_DIR}/" "${S3_URI}/" --only-show-errors "${markers[@]}" || return
  fi
  printf '%s\n' ${complete[@]+"${complete[@]}"} > "${STATE_DIR}/${UPLOAD_RECORD}.tmp" &&
    mv "${STATE_DIR}/${UPLOAD_RECORD}.tmp" "${STATE_DIR}/${UPLOAD_RECORD}" ||
    echo "rlinf-eks: could not record the upload in ${STATE_DIR}: the launcher keeps every checkpoint on the node" >&2
  if [ -n "${KEEP_IN_BUCKET}" ]; then prune_bucket; fi
  return 0
}

# workload.checkpoints.keepInBucket: the KEEP_IN_BUCKET newest complete checkpoints of each
# checkpoint directory stay (an earlier attempt's older than any of the newest attempt's), the
# others are deleted, marker first (a deletion cut off midway leaves files no restore takes). The
# bucket is versioned: the deleted objects' versions expire with its lifecycle rule.
prune_bucket() {
  local checkpoints status=0 family attempt step dir seen="" kept=0
  checkpoints=$(list_complete_checkpoints) || status=$?
  if [ "${status}" != 0 ]; then
    echo "rlinf-eks: could not list ${S3_URI}/ to keep ${KEEP_IN_BUCKET} checkpoints there (aws exit ${status})" >&2
    return 0
  fi
  while IFS=$'\t' read -r family attempt step dir; do
    [ -n "${dir}" ] || continue
    if [ "${family}" != "${seen}" ]; then seen=${family}; kept=0; fi
    kept=$(( kept + 1 ))
    if [ "${kept}" -le "${KEEP_IN_BUCKET}" ]; then continue; fi
    if aws s3 rm "${S3_URI}/${dir}/${COMPLETE_MARKER}" --only-show-errors && aws s3 rm "${S3_URI}/${dir}/" --recursive --only-show-errors; then
      echo "rlinf-eks: deleted ${S3_URI}/${dir}/ (workload.checkpoints.keepInBucket=${KEEP_IN_BUCKET}; attempt ${attempt}, step ${step})" >&2
    else
      echo "rlinf-eks: could not delete ${S3_URI}/${dir}/; retrying after the next upload" >&2
    fi
  done < <(sort -t $'\t' -k1,1 -k2,2nr -k3,3nr <<< "${checkpoints}")
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
# no delete flag: a sync never removes anything from S3 (only keepInBucket deletes, by name)
for _ in 1 2 3; do
  if upload; then echo "rlinf-eks: run directory saved to ${S3_URI}/" >&2; exit 0; fi
  sleep 10
done
echo "rlinf-eks: FINAL CHECKPOINT UPLOAD TO ${S3_URI} FAILED: the newest checkpoint exists only on this node" >&2
exit 1
