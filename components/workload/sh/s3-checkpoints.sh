# S3_URI (s3://<bucket>/<prefix>) comes from the container's env.
S3_PREFIX=${S3_URI#s3://}
S3_PREFIX=${S3_PREFIX#*/}

# The complete checkpoints S3 holds under S3_URI (a marker there: the upload sends it only after
# every file of its step), one a line: the checkpoint directory across attempts (attempt-<K>
# read as attempt-*, "/"-led and "/"-ended), the attempt (0: none), the step, and the step's
# directory relative to S3_URI, tab-separated. Bash and the AWS CLI only: the image has no
# python3. Status: aws's when listing failed (beyond 1, which `aws s3 ls` returns for nothing).
list_complete_checkpoints() {
  local listing status=0 key rel dir step parent attempt family rest
  listing=$(aws s3 ls "${S3_URI}/" --recursive) || status=$?
  if [ "${status}" -gt 1 ]; then return "${status}"; fi
  while read -r _ _ _ key; do
    rel=${key#"${S3_PREFIX}/"}
    case "${rel}" in
      global_step_*/"${COMPLETE_MARKER}" | */global_step_*/"${COMPLETE_MARKER}") ;;
      *) continue ;;
    esac
    dir=${rel%/*}
    step=${dir##*global_step_}
    case "${step}" in '' | *[!0-9]*) continue ;; esac
    parent=/${dir%global_step_*}
    attempt=0
    family=${parent}
    case "${parent}" in
      */attempt-[0-9]*/*)
        rest=${parent##*/attempt-}
        attempt=${rest%%/*}
        case "${attempt}" in
          *[!0-9]*) attempt=0 ;;
          *) family="${parent%"${rest}"}*/${rest#*/}" ;;
        esac
        ;;
    esac
    printf '%s\t%s\t%s\t%s\n' "${family}" "$(( 10#${attempt} ))" "$(( 10#${step} ))" "${dir}"
  done <<< "${listing}"
}
