set -euo pipefail
shopt -s globstar nullglob
# RUN_DIR and S3_URI come from the container's env. Nothing there yet is a fresh run.
# Only what the run needs comes back: every file that is no checkpoint's (logs, the launcher's
# .rlinf-eks state) and the newest complete checkpoint of each checkpoint directory (one whose
# marker is in S3: the upload sends a marker only after all its files), of the newest attempt of
# a dialect that cannot resume (attempt-<K>, written by trainer.sh). RESTORE_CHECKPOINT
# (workload.mode eval): the checkpoint to evaluate instead, global_step_<N> (each directory's) or
# an absolute path under RUN_DIR.
status=0
checkpoints=$(list_complete_checkpoints) || status=$?
if [ "${status}" != 0 ]; then
  echo "rlinf-eks: FAILED: could not list ${S3_URI}/ (aws exit ${status})" >&2
  exit "${status}"
fi
# Bash 4.2 (the AWS CLI image's Amazon Linux 2) under `set -u`: no associative arrays, and an
# array that may be empty is read as ${a[@]+"${a[@]}"}.
newest=()  # attempt TAB directory: each checkpoint directory's newest complete checkpoint
named=()
newest_attempt=0
seen=""
while IFS=$'\t' read -r family attempt step dir; do
  [ -n "${dir}" ] || continue
  if [ -n "${RESTORE_CHECKPOINT}" ]; then
    if [ "global_step_${step}" = "${RESTORE_CHECKPOINT}" ]; then named+=("${dir}"); fi
    continue
  fi
  # sorted: each directory's newest attempt, then its newest step, first
  if [ "${family}" = "${seen}" ]; then continue; fi
  seen=${family}
  newest+=("${attempt}"$'\t'"${dir}")
  if [ "${attempt}" -gt "${newest_attempt}" ]; then newest_attempt=${attempt}; fi
done < <(sort -t $'\t' -k1,1 -k2,2nr -k3,3nr <<< "${checkpoints}")
# the filters apply in order, the last that matches a file wins
filters=(--exclude "global_step_*/*" --exclude "*/global_step_*/*")
if [ -n "${RESTORE_CHECKPOINT}" ]; then
  for dir in ${named[@]+"${named[@]}"}; do filters+=(--include "${dir}/*"); done
  case "${RESTORE_CHECKPOINT}" in
    "${RUN_DIR}"/*) filters+=(--include "${RESTORE_CHECKPOINT#"${RUN_DIR}/"}/*") ;;
  esac
else
  for item in ${newest[@]+"${newest[@]}"}; do
    if [ "${item%%$'\t'*}" = "${newest_attempt}" ]; then filters+=(--include "${item#*$'\t'}/*"); fi
  done
fi
echo "rlinf-eks: restoring ${S3_URI}/ into ${RUN_DIR}/: $(( ${#filters[@]} / 2 - 2 )) checkpoint(s) and every file beside them" >&2
aws s3 sync "${S3_URI}/" "${RUN_DIR}/" --only-show-errors "${filters[@]}"
# A step without its marker is never a checkpoint: whatever came back without one is removed.
for step in "${RUN_DIR}"/**/global_step_*/; do
  if [ ! -f "${step}${COMPLETE_MARKER}" ]; then
    echo "rlinf-eks: ${step} is not a complete checkpoint in ${S3_URI}: removed, not resumed from" >&2
    rm -rf "${step}"
  fi
done
