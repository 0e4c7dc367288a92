# The trainers give no completeness signal a launcher can read for every layout (SimpleVLA-RL's
# veRL writes no tracker file), but their
# drivers save synchronously: RLinf's runner and veRL's fit() call the worker group's
# save_checkpoint, which returns only once every rank's save returned, before the next step
# starts. So global_step_N is complete once a newer global_step_M (M > N) exists beside it, once
# upstream veRL's latest_checkpointed_iteration.txt beside it names N or later, or once the
# trainer exited 0. The marker is written by rename: its presence is never partial.
# checkpoints mark|final|newest|loop: mark the complete ones (final: all, the trainer exited 0),
# print the newest complete one ("none"), or mark every 10 s until killed.
checkpoints() {
  ${CHECKPOINTS_EXEC:-command} python3 - "$1" "${CHECKPOINT_PATTERNS}" "${COMPLETE_MARKER}" <<'PY'
#include programs/checkpoints.py
PY
}

# Runs as a background job: exec makes that job python itself, so `kill` stops it.
mark_checkpoints_loop() { CHECKPOINTS_EXEC='exec' checkpoints loop; }
