
# The run directory belongs to one run (RUN_IDENTITY: the dialect, the trainer config, the model).
# A run of another identity finding complete checkpoints there would resume from another model's
# weights (or, without resume, mix two runs' checkpoints): it stops at once, naming both, before
# any GPU work. With no complete checkpoint yet the directory is taken over.
check_run_identity() {
  local file="${RUN_DIR}/.rlinf-eks/run-identity" recorded newest
  if ! mkdir -p "${RUN_DIR}/.rlinf-eks"; then
    echo "rlinf-eks: cannot write ${RUN_DIR}/.rlinf-eks: the run's identity is not recorded" >&2
    return 0
  fi
  if [ -f "${file}" ]; then
    recorded=$(cat "${file}")
    if [ "${recorded}" != "${RUN_IDENTITY}" ]; then
      newest=$(checkpoints newest) || newest=""
      # only a complete checkpoint of the other run stops this one ("none", or a failed look, does not)
      if [ -n "${newest}" ] && [ "${newest}" != none ]; then
        echo "rlinf-eks: FAILED: the run directory ${RUN_DIR} holds the checkpoints of another run (${recorded}; newest ${newest}), and this run trains ${RUN_IDENTITY}: set workload.runName to start a new run beside it (those checkpoints stay where they are), or put back what changed (exit ${EXIT_RUN_MISMATCH})" >&2
        return 1
      fi
    fi
  fi
  echo "${RUN_IDENTITY}" > "${file}"
}
