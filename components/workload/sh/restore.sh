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
declare -A step_of=() attempt_of=() dir_of=()
named=()
newest_attempt=0
while IFS=$'\t' read -r family attempt step dir; do
  [ -n "${dir}" ] || continue
  if [ -n "${RESTORE_CHECKPOINT}" ]; then
    if [ "global_step_${step}" = "${RESTORE_CHECKPOINT}" ]; then named+=("${dir}"); fi
    continue
  fi
  if (( attempt > newest_attempt )); then newest_attempt=${attempt}; fi
  if [ -z "${step_of["${family}"]+set}" ] || (( attempt > attempt_of["${family}"] || (attempt == attempt_of["${family}"] && step > step_of["${family}"]) )); then
    step_of["${family}"]=${step}
    attempt_of["${family}"]=${attempt}
    dir_of["${family}"]=${dir}
  fi
done <<< "${checkpoints}"
# the filters apply in order, the last that matches a file wins
filters=(--exclude "global_step_*/*" --exclude "*/global_step_*/*")
if [ -n "${RESTORE_CHECKPOINT}" ]; then
  for dir in ${named[@]+"${named[@]}"}; do filters+=(--include "${dir}/*"); done
  case "${RESTORE_CHECKPOINT}" in
    "${RUN_DIR}"/*) filters+=(--include "${RESTORE_CHECKPOINT#"${RUN_DIR}/"}/*") ;;
  esac
else
  for family in "${!step_of[@]}"; do
    if [ "${attempt_of["${family}"]}" = "${newest_attempt}" ]; then filters+=(--include "${dir_of["${family}"]}/*"); fi
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
