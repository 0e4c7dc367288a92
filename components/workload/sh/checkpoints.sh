# The trainers give no completeness signal a launcher can read for every layout (SimpleVLA-RL's
# veRL writes no tracker file), but their
# drivers save synchronously: RLinf's runner and veRL's fit() call the worker group's
# save_checkpoint, which returns only once every rank's save returned, before the next step
# starts. So global_step_N is complete once a newer global_step_M (M > N) exists beside it, once
# upstream veRL's latest_checkpointed_iteration.txt beside it names N or later, or once the
# trainer exited 0. The marker is written by rename: its presence is never partial.
# checkpoints mark|final|newest|loop: mark the complete ones (final: all of the trainer's own
# attempt, it exited 0), print the newest complete one ("none"), or mark every 10 s until killed.
# With RETAIN_LOCAL > 0 (the pod that retains) the loop also removes older checkpoints beyond it
# from the run directory once S3 holds them: UPLOAD_RECORD, the sync sidecar's list of what it
# uploaded (empty on the shared filesystem: EXPORT_SETTLE_SECONDS after its marker, FSx has
# exported it); RESUME_RECORD holds the resume point, kept while nothing newer is complete.
checkpoints() {
  ${CHECKPOINTS_EXEC:-command} python3 - "$1" "${CHECKPOINT_PATTERNS}" "${COMPLETE_MARKER}" "${RETAIN_LOCAL:-0}" "${UPLOAD_RECORD}" "${RESUME_RECORD:-}" "${EXPORT_SETTLE_SECONDS}" <<'PY'
#include programs/checkpoints.py
PY
}

# Runs as a background job: exec makes that job python itself, so `kill` stops it.
mark_checkpoints_loop() { CHECKPOINTS_EXEC='exec' checkpoints loop; }
