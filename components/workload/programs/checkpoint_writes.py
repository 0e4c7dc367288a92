import os, re

CHECKPOINT_PART = re.compile(r"^(checkpoints|global_step_\d+)$")


def newest_checkpoint_write(root):
    """The newest modification time of a file below a checkpoint directory of root (a path with a
    checkpoints or global_step_N part), 0.0 when there is none. It stats every file of every kept
    checkpoint: metadata operations on FSx, so callers poll it every few seconds at most."""
    latest = 0.0
    for base, _, files in os.walk(root):
        if not any(CHECKPOINT_PART.match(p) for p in os.path.relpath(base, root).split(os.sep)):
            continue
        for name in files:
            try:
                latest = max(latest, os.stat(os.path.join(base, name)).st_mtime)
            except OSError:
                pass
    return latest
