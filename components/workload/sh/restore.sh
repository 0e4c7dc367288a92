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
