attempt="${RESTART_ATTEMPT:-0}"
case "${attempt}" in ''|*[!0-9]*) attempt=0 ;; esac
delay=$(( attempt * BACKOFF_SECONDS ))
if [ "${delay}" -gt "${MAX_BACKOFF_SECONDS}" ]; then delay=${MAX_BACKOFF_SECONDS}; fi
echo "rlinf-eks[restart]: restart attempt ${attempt}: waiting ${delay}s" >&2
# PID 1 ignores an untrapped TERM: exit at once when the pod is stopped while waiting
trap 'exit 143' TERM INT
sleep "${delay}" &
wait $!
