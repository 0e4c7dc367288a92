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
METRICS_PORT = int(os.environ.get("PROGRESS_METRICS_PORT") or 0)
COMPLETE_MARKER = os.environ.get("PROGRESS_COMPLETE_MARKER", ".rlinf-eks-complete")
STEP = re.compile(r"^global_step_(\d+)$")
ATTEMPT = re.compile(r"^attempt-(\d+)$")
# settle_checkpoint_writes: programs/checkpoint_writes.py, run before this program (progress.sh)


def log(message):
    print(f"rlinf-eks[progress]: {message}", file=sys.stderr, flush=True)


# A signal to our process group (the launcher stopping the pod) reaches the trainer too: note it,
# and keep relaying until the trainer has exited.
signal.signal(signal.SIGINT, lambda *_: None)
signal.signal(signal.SIGTERM, lambda *_: None)

trainer = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
last_output = time.monotonic()
# what the dashboard shows is what the watchdog judges: the same step and the same last progress
progress_wall = time.time()


def relay(source, sink):
    global last_output, progress_wall
    while True:
        chunk = os.read(source.fileno(), 65536)
        if not chunk:
            return
        last_output, progress_wall = time.monotonic(), time.time()
        sink.write(chunk)
        sink.flush()


relays = [threading.Thread(target=relay, args=(trainer.stdout, sys.stdout.buffer), daemon=True),
          threading.Thread(target=relay, args=(trainer.stderr, sys.stderr.buffer), daemon=True)]
for thread in relays:
    thread.start()


def newest_steps():
    """The newest global_step_N under RUN_DIR (not descending into a step's own files), and the
    newest one marked complete, each as (attempt, N), (0, -1) for none: a dialect that cannot
    resume writes each attempt below attempt-<K>, its steps starting again, and a new attempt's
    steps are newer than any earlier attempt's."""
    best = complete = (0, -1)
    for base, dirs, _ in os.walk(RUN_DIR):
        keep = []
        attempts = [int(part[8:]) for part in os.path.relpath(base, RUN_DIR).split(os.sep) if ATTEMPT.match(part)]
        attempt = attempts[-1] if attempts else 0
        for name in dirs:
            match = STEP.match(name)
            if match:
                best = max(best, (attempt, int(match.group(1))))
                if os.path.exists(os.path.join(base, name, COMPLETE_MARKER)):
                    complete = max(complete, (attempt, int(match.group(1))))
            elif base.count(os.sep) - RUN_DIR.count(os.sep) < 4:
                keep.append(name)
        dirs[:] = keep
    return best, complete


def metrics_text():
    """The run's figures in Prometheus' text format (the dashboard 'Is it training?')."""
    lines = []
    for name, kind, help_text, value in (
        ("rlinf_eks_train_step", "gauge", "Newest global_step_N directory of the run (the step the progress watchdog counts).", step[1]),
        ("rlinf_eks_checkpoint_complete_step", "gauge", "Newest global_step_N marked complete (what a restart resumes from).", complete_step[1]),
        ("rlinf_eks_checkpoint_complete_timestamp_seconds", "gauge", "When the supervisor first saw that checkpoint complete (Unix time).", complete_seen),
        ("rlinf_eks_progress_timestamp_seconds", "gauge", "Last trainer output or new step (Unix time); the watchdog stops the trainer progressTimeoutSeconds after it.", progress_wall),
        ("rlinf_eks_progress_timeout_seconds", "gauge", "workload.progressTimeoutSeconds (0: no watchdog).", TIMEOUT),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
    return "\n".join(lines) + "\n"


def serve_metrics(port):
    import http.server

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    try:
        server = http.server.ThreadingHTTPServer(("", port), Metrics)
    except OSError as err:  # another supervisor of this pod holds it: run on without metrics
        log(f"metrics port {port}: {err}")
        return
    threading.Thread(target=server.serve_forever, daemon=True).start()


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


step, complete_step = newest_steps()
complete_seen = time.time() if complete_step[1] >= 0 else 0
last_step_change = time.monotonic()
if METRICS_PORT:
    serve_metrics(METRICS_PORT)
next_scan = time.monotonic() + SCAN
poll = max(0.2, min(5.0, SCAN, (TIMEOUT or 50) / 10))
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
    if (TIMEOUT or METRICS_PORT) and now >= next_scan:
        found, found_complete = newest_steps()
        if found > step:
            step, last_step_change, progress_wall = found, now, time.time()
        if found_complete > complete_step:
            complete_step, complete_seen = found_complete, time.time()
        next_scan = now + SCAN
    if STOP_AT and time.time() >= STOP_AT:
        log("the Capacity Block ends in less than 40 minutes plus the stop budget: letting the checkpoint write in progress end")
        began = time.monotonic()
        log(settle_checkpoint_writes(RUN_DIR, int(BUDGET * SETTLE), QUIET, COMPLETE_MARKER, running=lambda: trainer.poll() is None))
        stop("the Capacity Block is ending", EXIT_RESERVATION_ENDING, BUDGET - (time.monotonic() - began))
    idle = now - max(last_output, last_step_change)
    if TIMEOUT and idle >= TIMEOUT:
        stop(f"no output and no new checkpoint step for {int(idle)}s (progressTimeoutSeconds {TIMEOUT})", EXIT_PROGRESS_TIMEOUT, BUDGET)
