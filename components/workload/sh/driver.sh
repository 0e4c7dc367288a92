set -uo pipefail
export PYTHONPATH="${TRAINER_PYTHONPATH}${PYTHONPATH:+:${PYTHONPATH}}"
check_run_identity || exit "${EXIT_RUN_MISMATCH}"
# the resume point, never removed while it is the newest complete checkpoint (checkpoints.sh)
RESUME_RECORD=${STATE_DIR:+${STATE_DIR}/resumed-from}
if [ -n "${RESUME_RECORD}" ]; then checkpoints newest 2>/dev/null > "${RESUME_RECORD}" || rm -f "${RESUME_RECORD}"; fi
# Ray's job supervisor stops a driver with SIGTERM (ray job stop): pass it on to the trainer, which
# runs under the progress watchdog (progress.sh: a hang or a Capacity Block's end stops it). The
# watchdog ignores signals sent to it and leaves them to the trainer, so they go to the process
# group the two share (job control gives it its own).
set -m
bash "${TRAINER_SCRIPT%/*}/progress.sh" bash "${TRAINER_SCRIPT}" &
trainer=$!
set +m
trap 'kill -TERM -- "-${trainer}" 2>/dev/null' TERM INT
RETAIN_LOCAL=${KEEP_LOCAL} mark_checkpoints_loop &
marker_loop=$!
while :; do
  wait "${trainer}"; rc=$?
  kill -0 "${trainer}" 2>/dev/null || break
done
kill "${marker_loop}" 2>/dev/null
if [ "${rc}" = 0 ]; then checkpoints final; else checkpoints mark; fi
exit "${rc}"
