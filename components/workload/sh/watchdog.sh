set -uo pipefail
log() { echo "rlinf-eks[watchdog]: $*" >&2; }
k() { kubectl --namespace "${NAMESPACE}" "$@"; }
waited=0

while true; do
  if ! conditions=$(k get job "${JOB_NAME}" -o jsonpath='{range .status.conditions[*]}{.type}={.status}{"\n"}{end}'); then
    log "cannot read job ${JOB_NAME} (retrying)"; sleep "${POLL_SECONDS}"; continue
  fi
  if printf '%s\n' "${conditions}" | grep -Eq '^(Complete|Failed|SuccessCriteriaMet|FailureTarget)=True$'; then
    log "job ${JOB_NAME} has finished: nothing to watch"; exit 0
  fi
  if ! pods=$(k get pods -l "batch.kubernetes.io/job-name=${JOB_NAME}" -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\t"}{.status.initContainerStatuses[*].state.waiting.reason}{" "}{.status.containerStatuses[*].state.waiting.reason}{"\t"}{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}'); then
    log "cannot list the pods of ${JOB_NAME} (retrying)"; sleep "${POLL_SECONDS}"; continue
  fi
  started=$(printf '%s\n' "${pods}" | awk -F'\t' '$2 == "Running" || $2 == "Succeeded"' | wc -l)
  if [ "${started}" -ge "${EXPECTED_PODS}" ]; then
    log "all ${EXPECTED_PODS} pods of ${JOB_NAME} are running: the pre-running deadline is met"; exit 0
  fi
  start=$(k get job "${JOB_NAME}" -o jsonpath='{.status.startTime}' || true)
  elapsed=0
  since="the job started"
  if [ -n "${start}" ]; then
    from=$(date -u -d "${start}" +%s)
    # no GPU node exists before a Capacity Block starts: the deadline counts from then
    if [ "${from}" -lt "${NOT_BEFORE}" ]; then from=${NOT_BEFORE}; since="the Capacity Block started"; fi
    elapsed=$(( $(date -u +%s) - from ))
  fi
  if [ "${elapsed}" -ge "${DEADLINE_SECONDS}" ]; then
    # one line per pod that is not running: name, phase, waiting reasons, scheduling reason
    stuck=$(printf '%s\n' "${pods}" | awk -F'\t' 'NF && $2 != "Running" && $2 != "Succeeded" {gsub(/ +/, " ", $3); gsub(/^ | $/, "", $3); printf "%s%s %s%s%s", sep, $1, $2, ($3 != "" ? " (" $3 ")" : ""), ($4 != "" && $4 != "True" ? " " $4 : ""); sep="; "}')
    reason="${started} of ${EXPECTED_PODS} pods running ${elapsed}s after ${since} (deadline ${DEADLINE_SECONDS}s): ${stuck:-no pods created}"
    log "failing job ${JOB_NAME}: ${reason}"
    k annotate job "${JOB_NAME}" --overwrite "${REASON_ANNOTATION}=pre-running deadline exceeded: ${reason}" || log "could not annotate ${JOB_NAME}"
    # the Job controller fails the Job (DeadlineExceeded) and deletes its pods
    if k patch job "${JOB_NAME}" --type=merge -p '{"spec":{"activeDeadlineSeconds":1}}'; then exit 0; fi
    log "could not patch ${JOB_NAME} (retrying)"; sleep "${POLL_SECONDS}"; continue
  fi
  if [ $(( waited % 300 )) -eq 0 ]; then log "${started} of ${EXPECTED_PODS} pods running, ${elapsed}s of ${DEADLINE_SECONDS}s"; fi
  sleep "${POLL_SECONDS}"
  waited=$(( waited + POLL_SECONDS ))
done
