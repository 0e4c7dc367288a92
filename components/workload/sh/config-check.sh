set -uo pipefail
# Runs in the training image after the image check, before Ray starts and before anything is
# staged: composes the trainer's Hydra config with the rendered overrides and runs the trainer's
# own validation as far as it goes without the cluster (programs/config_check.py). A config the
# trainer would refuse fails the pod in seconds with one line (also its termination message); a
# restart cannot fix a rendered command, so the failure rules do not retry it.
cd "${WORKDIR}" || {
  echo "rlinf-eks config-check: FAILED: no trainer checkout at ${WORKDIR} (workload.trainer.workdir) (exit ${EXIT_CONFIG_INVALID})" >&2
  exit "${EXIT_CONFIG_INVALID}"
}
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
# the check's own timeout: importing the trainer's validation imports torch (seconds, not minutes)
timeout -k 5 "${TIMEOUT_SECONDS}" python3 - "${CHECK}" <<'PY'
#include programs/config_check.py
PY
status=$?
if [ "${status}" = 124 ] || [ "${status}" = 137 ]; then
  line="rlinf-eks config-check: FAILED: ${WHAT}: no answer within ${TIMEOUT_SECONDS}s (exit ${EXIT_CONFIG_INVALID})"
  echo "${line}" >&2
  { printf '%s' "${line}" > "${TERMINATION_LOG}"; } 2>/dev/null || true
  exit "${EXIT_CONFIG_INVALID}"
fi
exit "${status}"
