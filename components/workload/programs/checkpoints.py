import glob, os, re, shutil, socket, sys, time

mode, patterns, marker = sys.argv[1], sys.argv[2].split("\n"), sys.argv[3]
# Retention (0: none, as on the pods that do not retain): keep this many checkpoints of each
# checkpoint directory; the sync sidecar's record of what S3 holds (empty: the shared filesystem,
# which FSx exports by itself); the resume point recorded at start; on the shared filesystem, how
# long after its marker a checkpoint counts as exported. Left out: no retention.
retention = sys.argv[4:8] + [""] * (4 - len(sys.argv[4:8]))
keep, record, resumed, settle = int(retention[0] or 0), retention[1], retention[2], float(retention[3] or 0)
STEP = re.compile(r"global_step_(\d+)")
ATTEMPT = re.compile(r"attempt-(\d+)")
REMOVING = ".rlinf-eks-removing"  # in a global_step_<N> the retention is removing (scripts.REMOVING)


def attempt_of(parent):
    """A non-resuming dialect writes each attempt below attempt-<K> (trainer.sh picks K): its number, 0 for none."""
    found = [int(m.group(1)) for m in map(ATTEMPT.fullmatch, parent.split(os.sep)) if m]
    return found[-1] if found else 0


def family_of(parent):
    """The checkpoint directory across attempts: attempt-<K> read as any attempt."""
    return os.sep.join("attempt-*" if ATTEMPT.fullmatch(part) else part for part in parent.split(os.sep))


def attempts_begun():
    """The newest attempt-<K> directory trainer.sh made (0: none): an attempt that has saved
    nothing yet is still the current one."""
    newest = 0
    for pattern in filter(None, patterns):
        head, found, _ = pattern.partition(os.sep + "attempt-*" + os.sep)
        for path in glob.glob(head + os.sep + "attempt-*") if found else ():
            match = ATTEMPT.fullmatch(os.path.basename(path))
            if match and os.path.isdir(path):
                newest = max(newest, int(match.group(1)))
    return newest


def mark(path, step):
    # every pod marks (each node's own run directory without the shared filesystem): a
    # per-process temporary name, so two pods never rename each other's file
    tmp = os.path.join(path, f"{marker}.{socket.gethostname()}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as out:
            out.write(f"{step}\n")
        os.replace(tmp, os.path.join(path, marker))
    except OSError as err:
        print(f"rlinf-eks: could not mark {path} complete: {err}", file=sys.stderr)
        return False
    print(f"rlinf-eks: checkpoint {path} is complete", file=sys.stderr)
    return True


def scan(mode):
    """Marks the complete checkpoints; returns {family: (current attempt, [(attempt, step, path,
    complete: True, False, or None for one being removed)])}."""
    by_parent = {}
    for pattern in filter(None, patterns):
        for path in glob.glob(pattern):
            match = STEP.fullmatch(os.path.basename(path))
            if match and os.path.isdir(path):
                by_parent.setdefault(os.path.dirname(path), {})[int(match.group(1))] = path
    current, begun = {}, attempts_begun()
    for parent in by_parent:
        family = family_of(parent)
        current[family] = max(current.get(family, 0), attempt_of(parent), begun if family != parent else 0)
    found = {family: [] for family in current}
    for parent, steps in by_parent.items():
        try:
            tracked = int(open(os.path.join(parent, "latest_checkpointed_iteration.txt")).read().strip())
        except (OSError, ValueError):
            tracked = -1
        newest, attempt, family = max(steps), attempt_of(parent), family_of(parent)
        # the trainer exited 0: every step of its own attempt is complete, never an earlier
        # attempt's step that was cut off (step numbers start again in each attempt's directory)
        final = mode == "final" and attempt == current[family]
        for step, path in steps.items():
            done = os.path.exists(os.path.join(path, marker))
            if not done and os.path.exists(os.path.join(path, REMOVING)):
                done = None  # being removed (retain)
            elif not done and mode != "newest" and (final or step < newest or step <= tracked):
                done = mark(path, step)
            found[family].append((attempt, step, path, done))
    return {family: (current[family], items) for family, items in found.items()}


def newest(found):
    complete = [(attempt, step, path) for _, items in found.values() for attempt, step, path, done in items if done]
    return max(complete)[2] if complete else "none"


def uploaded(path, copies):
    """S3 holds the checkpoint: the sync sidecar listed it after its marker reached S3 or, on the
    shared filesystem, its marker is older than the export settle time."""
    if record:
        return os.path.normpath(path) in copies
    try:
        return time.time() - os.stat(os.path.join(path, marker)).st_mtime >= settle
    except OSError:
        return False


def remove(path, why):
    # A tombstone, then no marker: a removal cut off midway leaves a step nothing resumes from and
    # the marking rule never marks again; the next pass ends it. No rename to take it out of the
    # globs first: on FSx a renamed file is exported again, under its new name.
    try:
        open(os.path.join(path, REMOVING), "w").close()
        if os.path.exists(os.path.join(path, marker)):
            os.remove(os.path.join(path, marker))
    except OSError as err:
        print(f"rlinf-eks: could not remove {path}: {err}", file=sys.stderr)
        return
    shutil.rmtree(path, ignore_errors=True)
    print(f"rlinf-eks: removed {path} from the run directory ({why})", file=sys.stderr)


def retain(found):
    """Keeps the `keep` newest checkpoints of each checkpoint directory (an earlier attempt's older
    than any of the current one's), counting the one being written (the newest step, unmarked), and
    always the newest complete one and the resume point while nothing newer is complete; removes
    the others once S3 holds them. An earlier attempt's unmarked step was cut off: removed."""
    try:
        copies = {os.path.normpath(line) for line in open(record).read().split("\n") if line} if record else set()
    except OSError:
        copies = set()
    try:
        start = open(resumed).read().strip() if resumed else ""
    except OSError:
        start = ""
    for family, (current, items) in found.items():
        items.sort(reverse=True)
        complete = [item for item in items if item[3]]
        # the newest complete one; the resume point while nothing newer is complete
        protected = {complete[0][2]} if complete else set()
        protected |= {path for attempt, step, path, done in complete if path == start and not any(o[:2] > (attempt, step) for o in complete)}
        kept = 0
        for attempt, step, path, done in items:
            if done is None:
                shutil.rmtree(path, ignore_errors=True)  # a removal cut off midway
            elif path in protected:
                kept += 1
            elif not done and attempt < current:
                remove(path, "cut off in an earlier attempt, never complete")
            elif not done or kept < keep:
                # not done: being written, or written and not yet known complete; it counts
                kept += 1
            elif uploaded(path, copies):
                remove(path, f"workload.checkpoints.keepLocal={keep}; a copy is in S3")


if mode == "loop":
    # a glob of the checkpoint parents: a few directory listings, no file stats
    while True:
        found = scan("mark")
        if keep:
            retain(found)
        time.sleep(10)
found = scan(mode)
if mode == "newest":
    print(newest(found))
