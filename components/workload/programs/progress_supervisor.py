import os, re, signal, subprocess, sys, threading, time

RUN_DIR = os.environ["PROGRESS_RUN_DIR"]
TIMEOUT = int(os.environ["PROGRESS_TIMEOUT_SECONDS"] or 0)
STOP_AT = int(os.environ["PROGRESS_STOP_AT_EPOCH"] or 0)
BUDGET = int(os.environ["PROGRESS_STOP_BUDGET_SECONDS"])
SCAN = float(os.environ["PROGRESS_SCAN_SECONDS"])
SETTLE = float(os.environ["PROGRESS_SETTLE_SHARE"])
QUIET = float(os.environ["PROGRESS_SETTLE_QUIET_SECONDS"])
EXIT_PROGRESS_TIMEOUT = int(os.environ["EXIT_PROGRESS_TIMEOUT"])
EXIT_RESERVATION_ENDING = int(os.environ["EXIT_RESERVATION_ENDING"])
STEP = re.compile(r"^global_step_(\d+)$")
# newest_checkpoint_write: programs/checkpoint_writes.py, run before this program (progress.sh)


def log(message):
    print(f"rlinf-eks[progress]: {message}", file=sys.stderr, flush=True)


# A signal to our process group (the launcher stopping the pod) reaches the trainer too: note it,
# and keep relaying until the trainer has exited.
signal.signal(signal.SIGINT, lambda *_: None)
signal.signal(signal.SIGTERM, lambda *_: None)

trainer = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
last_output = time.monotonic()


def relay(source, sink):
    global last_output
    while True:
        chunk = os.read(source.fileno(), 65536)
        if not chunk:
            return
        last_output = time.monotonic()
        sink.write(chunk)
        sink.flush()


relays = [threading.Thread(target=relay, args=(trainer.stdout, sys.stdout.buffer), daemon=True),
          threading.Thread(target=relay, args=(trainer.stderr, sys.stderr.buffer), daemon=True)]
for thread in relays:
    thread.start()


def newest_step():
    """The highest global_step_N under RUN_DIR (not descending into a step's own files)."""
    best = -1
    for base, dirs, _ in os.walk(RUN_DIR):
        keep = []
        for name in dirs:
            match = STEP.match(name)
            if match:
                best = max(best, int(match.group(1)))
            elif base.count(os.sep) - RUN_DIR.count(os.sep) < 4:
                keep.append(name)
        dirs[:] = keep
    return best


def group_members():
    """Every other process of our process group (the trainer and whatever it started)."""
    me, group = os.getpid(), os.getpgrp()
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == group:
                    members.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return members


def signal_trainer(sig):
    # our own group when we lead it (both launchers start us as a group leader), else the trainer
    targets = group_members() if os.getpgrp() == os.getpid() else [trainer.pid]
    for pid in targets:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def wait_trainer(seconds):
    try:
        trainer.wait(timeout=max(0.0, seconds))
        return True
    except subprocess.TimeoutExpired:
        return False


def stop(reason, status, budget):
    log(f"{reason}: stopping the trainer (SIGINT, SIGTERM, then SIGKILL within {int(budget)}s)")
    started = time.monotonic()
    for sig, share in ((signal.SIGINT, 0.5), (signal.SIGTERM, 0.9)):
        signal_trainer(sig)
        if wait_trainer(started + budget * share - time.monotonic()):
            break
    else:
        signal_trainer(signal.SIGKILL)
        trainer.wait()
    log(f"the trainer exited with status {trainer.returncode}; exiting {status}")
    sys.exit(status)


step = newest_step()
last_step_change = time.monotonic()
next_scan = time.monotonic() + SCAN
poll = max(0.2, min(5.0, (TIMEOUT or 50) / 10))
if TIMEOUT:
    log(f"watching the trainer: stopped after {TIMEOUT}s without output or a new checkpoint step")
if STOP_AT:
    log(f"the Capacity Block ends soon after {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(STOP_AT))}: the trainer is stopped then")
while True:
    if wait_trainer(poll):
        for thread in relays:
            thread.join(timeout=5)
        code = trainer.returncode
        sys.exit(code if code >= 0 else 128 - code)
    now = time.monotonic()
    if TIMEOUT and now >= next_scan:
        found = newest_step()
        if found > step:
            step, last_step_change = found, now
        next_scan = now + SCAN
    if STOP_AT and time.time() >= STOP_AT:
        log("the Capacity Block ends in less than 40 minutes plus the stop budget: letting checkpoint writes settle")
        began = time.monotonic()
        settle_until = began + BUDGET * SETTLE
        while time.monotonic() < settle_until and time.time() - newest_checkpoint_write(RUN_DIR) < QUIET and trainer.poll() is None:
            time.sleep(min(1.0, max(0.0, settle_until - time.monotonic())))
        stop("the Capacity Block is ending", EXIT_RESERVATION_ENDING, BUDGET - (time.monotonic() - began))
    idle = now - max(last_output, last_step_change)
    if TIMEOUT and idle >= TIMEOUT:
        stop(f"no output and no new checkpoint step for {int(idle)}s (progressTimeoutSeconds {TIMEOUT})", EXIT_PROGRESS_TIMEOUT, BUDGET)
