import os, re, time

CHECKPOINT_PART = re.compile(r"^(checkpoints|global_step_\d+)$")
STEP_PART = re.compile(r"^global_step_(\d+)$")
TRACKER = "latest_checkpointed_iteration.txt"  # upstream veRL's, beside its global_step_N


def checkpoint_units(root, marker, top=None):
    """{checkpoint: newest modification time of a file or directory of it} under top (root): a
    checkpoint is a global_step_N directory (below a 'checkpoints' directory or not), or for
    a layout without steps the first 'checkpoints' directory of a path. Files beside global_step_N
    directories (a tracker, written once a save returned) and completeness markers are no write.
    It stats every file of every kept checkpoint (metadata operations on FSx): walk it once."""
    units = {}
    for base, dirs, files in os.walk(top or root):
        parts = os.path.relpath(base, root).split(os.sep)
        step = next((i for i, part in enumerate(parts) if STEP_PART.match(part)), None)
        first = next((i for i, part in enumerate(parts) if CHECKPOINT_PART.match(part)), None)
        if step is not None:
            unit, names = os.path.join(root, *parts[: step + 1]), [""] + files  # "": base itself
        elif first is not None and not any(STEP_PART.match(d) for d in dirs):
            unit, names = os.path.join(root, *parts[: first + 1]), files
        else:
            continue
        latest = units.get(unit, 0.0)
        for name in names:
            if name and name.startswith(marker):
                continue
            try:
                latest = max(latest, os.stat(os.path.join(base, name)).st_mtime)
            except OSError:
                pass
        units[unit] = latest
    return units


def step_of(unit):
    match = STEP_PART.match(os.path.basename(unit))
    return int(match.group(1)) if match else None


def completed_by(unit, known):
    """What says the save of the global_step_N unit returned (None: nothing yet): a newer
    global_step_M beside it that is not in known (the step directories of the stop request), as the
    trainers save synchronously and start step M only once N's save returned on every rank (a
    newer one already there may be left from an earlier run), or the tracker naming N or later."""
    step, parent = step_of(unit), os.path.dirname(unit)
    try:
        with open(os.path.join(parent, TRACKER)) as tracker:
            if int(tracker.read().strip()) >= step:
                return f"{TRACKER} names it"
    except (OSError, ValueError):
        pass
    try:
        names = os.listdir(parent)
    except OSError:
        return None
    newer = [n for n in names if STEP_PART.match(n) and int(n[12:]) > step and os.path.join(parent, n) not in known]
    return f"{min(newer, key=lambda n: int(n[12:]))} began" if newer else None


def settle_checkpoint_writes(root, budget, quiet, marker, running=lambda: True, poll=2.0):
    """Lets the checkpoint writes in progress now under root end, within budget seconds, and says
    how they ended. In progress: a checkpoint with a write in the last quiet seconds, bar one with
    a newer global_step_M written lately beside it (its save has returned). It has ended once a
    global_step_M newer than it appears, the tracker names it, or it did not change for quiet
    seconds. Later saves are not waited for: a trainer that saves every few seconds never goes
    quiet. Stops early once running() is false (the trainer has exited)."""
    deadline = time.monotonic() + budget
    units, now = checkpoint_units(root, marker), time.time()
    known = {unit for unit in units if step_of(unit) is not None}
    recent = {unit for unit, written in units.items() if now - written < quiet}
    pending = set()
    for unit in recent:
        step = step_of(unit)
        if step is None or not any(step_of(o) is not None and step_of(o) > step and os.path.dirname(o) == os.path.dirname(unit) for o in recent):
            pending.add(unit)
    ended = []
    while pending:
        for unit in sorted(pending):
            how = completed_by(unit, known) if step_of(unit) is not None else None
            if how is None:
                top = unit if step_of(unit) is not None else None
                written = max(checkpoint_units(root, marker, top).get(unit, 0.0), units[unit])
                if time.time() - written >= quiet:
                    how = f"no change for {quiet:g}s"
                units[unit] = written
            if how is not None:
                pending.discard(unit)
                ended.append(f"{os.path.relpath(unit, root)} ({how})")
        if not pending or not running():
            break
        if time.monotonic() >= deadline:
            return f"checkpoint writes still in progress after {budget}s: {', '.join(os.path.relpath(u, root) for u in sorted(pending))}"
        time.sleep(max(0.0, min(poll, deadline - time.monotonic())))
    if not ended:
        return "no checkpoint write in progress" if not pending else "the trainer exited"
    return "the checkpoint write in progress ended: " + ", ".join(ended)
