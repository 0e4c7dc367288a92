"""The manual launcher (launch.sh) against real Ray: two pods on one machine.

Each simulated pod is what the kubelet gives a container: its own network namespace (an IP on a
veth pair, a default route, as with the VPC CNI) and its own PID namespace with launch.sh as PID 1
(so `ray stop --force` sees only that pod's processes, and bash as PID 1 gets no default signal
actions). The trainer is a real Ray driver that runs a task on every node. Real Ray differs from
the fake in test_workload_scripts.py where it matters: `ray start --block` stops its processes on
SIGTERM and exits 1, the driver's SIGINT disposition decides whether it can be interrupted, and a
cluster only forms when the worker really reaches the head's GCS.

Needs root (or passwordless sudo) for `ip netns` and `unshare`, and `ray` (a test dependency).
A machine where Ray cannot start fails these tests: they are how the stop path is known to work.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rlinf_eks.workload import progress, scripts

pytestmark = pytest.mark.real_ray

# What the pod runs with: the test venv's python3 and ray CLI, the system's bash, coreutils, ip.
VENV_BIN = Path(sys.executable).parent
SUDO = [] if os.geteuid() == 0 else ["sudo", "-n"]
HEAD_IP, WORKER_IP = "10.213.0.1", "10.213.0.2"
GPUS_PER_NODE = 2  # a Ray node claims GPUs it does not have (--num-gpus), as the catalog's count
_names = itertools.count()

# launch.sh's poll intervals, shortened in the rendered script: these tests wait on Ray, not on
# sleeps. The worker waits for the head's GCS 5 s between tries, checks the head every 2 s while Ray
# runs on its node (3 misses in a row: the run has ended) and, after Ray on its node stopped by
# itself, checks "is the head gone?" 3 times 10 s apart; everything else runs as rendered for a pod.
# Each interval must occur exactly once, so a changed body fails here instead of silently running long.
POLL_INTERVALS = {"sleep 5 & wait $!": "sleep 1 & wait $!", "sleep 10 & wait $!": "sleep 1 & wait $!"}
HEAD_WATCH = "sleep 2 & nap=$!"


def short_polls(script: str, head_watch: float = 1) -> str:
    for rendered, short in {**POLL_INTERVALS, HEAD_WATCH: f"sleep {head_watch} & nap=$!"}.items():
        assert script.count(rendered) == 1, f"launch.sh should have one {rendered!r}"
        script = script.replace(rendered, short)
    return script


# A real Ray driver: one task on each node, each taking all of a node's GPUs (so the tasks cannot
# share a node: the cluster formed; one Ray worker process per node), then "training" until
# TRAINER_SECONDS pass. It records how it was stopped; interrupted, it exits 0 as a trainer may.
TRAINER = """exec python3 - <<'PY'
import os, signal, sys, time
import ray

marker = os.environ["TRAINER_MARKER"]
def note(text):
    with open(marker, "a") as f:
        f.write(text + "\\n")

ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=0, num_gpus=int(os.environ["TASK_GPUS"]))
def where():
    return ray.get_runtime_context().get_node_id()

nodes = set(ray.get([where.options(scheduling_strategy="SPREAD").remote() for _ in range(int(os.environ["TASKS"]))]))
handler = signal.getsignal(signal.SIGINT)
note(f"training on {len(nodes)} nodes, SIGINT {getattr(handler, '__name__', None) or handler.name}")
try:
    time.sleep(float(os.environ.get("TRAINER_SECONDS", "0")))
except KeyboardInterrupt:
    note("KeyboardInterrupt")
    sys.exit(0)
note("done")
sys.exit(int(os.environ.get("TRAINER_STATUS", "0")))
PY
"""


def _run(*cmd: str) -> None:
    subprocess.run([*SUDO, *cmd], check=True, capture_output=True, text=True, timeout=30)


@dataclass
class Pod:
    """One pod of the Indexed Job: ``proc`` is `ip netns exec ... unshare ...`, ``pid1`` launch.sh."""

    index: int
    proc: subprocess.Popen
    state: Path
    ray_dir: Path
    pid1: int = 0
    out: str = ""
    err: str = ""

    def signal(self, sig: int) -> None:
        # the kubelet signals the container's PID 1; unshare does not forward signals
        subprocess.run([*SUDO, "kill", f"-{sig}", str(self.pid1)], check=True, timeout=10)

    def why(self) -> str:
        """The pod's log and the ends of its Ray logs, for a failure message."""
        self._read_logs()
        # raylet and GCS, and every other Ray process's log that says why it ended (agents, monitors)
        logs = sorted(self.ray_dir.glob("session_*/logs/raylet.*")) + sorted(self.ray_dir.glob("session_*/logs/gcs_server.*"))
        logs += [log for log in sorted(self.ray_dir.glob("session_*/logs/*")) if log.is_file() and log not in logs
                 and any(word in log.read_text(errors="replace") for word in ("Error", "error:", "Traceback", "exited"))]
        tails = "".join(f"\n--- {log.name}:\n{log.read_text(errors='replace')[-1500:]}" for log in logs if log.stat().st_size)
        return f"{self.err[-3000:]}{tails}"

    def kill(self) -> None:
        # killing a namespace's PID 1 kills every process in it
        subprocess.run([*SUDO, "kill", "-9", str(self.pid1)], timeout=10)
        self.proc.wait(timeout=30)

    def result(self, timeout: float) -> int:
        """The pod's exit status within ``timeout`` seconds (a test that hangs fails here)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self._read_logs()
            pytest.fail(f"pod {self.index} did not exit within {timeout}s:\n{self.why()}")
        self._read_logs()
        return self.proc.returncode

    def _read_logs(self) -> None:
        # files, not pipes: a pod never blocks on a full pipe while the test waits for something else
        self.out = (self.ray_dir.parent / "stdout").read_text(errors="replace")
        self.err = (self.ray_dir.parent / "stderr").read_text(errors="replace")


@dataclass
class PodNetwork:
    """Two network namespaces joined by a veth pair: the head's pod and one worker's pod."""

    root: Path
    names: tuple[str, str]
    pods: list[Pod] = field(default_factory=list)

    def start(self, index: int, *, nnodes: int = 2, join_timeout: int = 60, grace: int = 30, head_watch: float = 1, **env: str) -> Pod:
        pod_dir = self.root / f"pod{index}"
        state = pod_dir / "state"
        state.mkdir(parents=True)
        (pod_dir / "ray").mkdir()
        launch = pod_dir / "launch.sh"
        launch.write_text(short_polls(
            scripts.manual_launch(
                nnodes=nnodes,
                gpus_per_node=GPUS_PER_NODE,
                cpus_per_node=1,
                object_store_bytes=100 * 1024 * 1024,
                head_host=HEAD_IP,
                ray_port=6379,
                join_timeout_seconds=join_timeout,
                grace_seconds=grace,
                run_dir=str(self.root / "run"),
                state_dir=str(state),
                trainer_pythonpath=str(self.root),
                trainer_script=str(self.root / "trainer.sh"),
            ),
            head_watch,
        ))
        pod_env = {
            "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(pod_dir),
            "JOB_COMPLETION_INDEX": str(index),
            "TRAINER_MARKER": str(self.root / "trainer.marker"),
            "TASKS": str(nnodes),
            "TASK_GPUS": str(GPUS_PER_NODE),
            **env,
        }
        # Ray's /tmp/ray is the pod's own, as in a container (a worker would otherwise share the
        # head's session directory, which Ray warns against): a bind mount in the pod's mount namespace
        in_pod = 'mount --bind "$0" /tmp/ray && exec "$@"'
        cmd = [*SUDO, "ip", "netns", "exec", self.names[0 if index == 0 else 1],
               "unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c", in_pod, str(pod_dir / "ray"),
               "env", "-i", *(f"{k}={v}" for k, v in pod_env.items()), "bash", str(launch)]
        with open(pod_dir / "stdout", "wb") as out, open(pod_dir / "stderr", "wb") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        pod = Pod(index, proc, state, pod_dir / "ray")
        pod.pid1 = _pid1(proc.pid)
        self.pods.append(pod)
        return pod

    def marker(self) -> str:
        path = self.root / "trainer.marker"
        return path.read_text() if path.exists() else ""

    def wait_for_marker(self, text: str, timeout: float, *pods: Pod) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.marker():
            for pod in pods:
                if pod.proc.poll() is not None:
                    pod.result(1)
                    pytest.fail(f"pod {pod.index} exited {pod.proc.returncode} before the trainer wrote {text!r}:\n{pod.why()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the trainer did not write {text!r} within {timeout}s: {self.marker()!r}")
            time.sleep(0.2)


def _pid1(launcher: int) -> int:
    """The host PID of the namespace's PID 1: unshare's forked child (below sudo when not root),
    once it has become bash launch.sh (sh -c mounts /tmp/ray, then execs)."""

    def argv0(pid: int) -> str:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return os.path.basename(f.read().split(b"\0")[0].decode())
        except OSError:
            return ""

    def first_child(pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                children = f.read().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    deadline = time.monotonic() + 10
    pid: int | None = launcher
    while time.monotonic() < deadline:
        name = argv0(pid) if pid else ""
        if name == "bash":
            return pid
        if name in ("sudo", "ip", "unshare"):
            pid = first_child(pid) or pid
        time.sleep(0.02)
    pytest.fail(f"launch.sh did not start under {launcher}")


# At most this many of these tests run at once across the session's xdist workers: each starts two
# Ray nodes (a GCS, two raylets, their agents, task workers and a driver), and four tests' eight nodes
# at once on a 2-core machine that other work also loads is the contention under which a worker's
# Ray once exited while joining (issue 45). Two at a time keep the suite's wall time.
RAY_SLOTS = 2


@contextlib.contextmanager
def ray_slot():
    """One of RAY_SLOTS file locks in the session's directory (tests/conftest.py), held while a test's
    pods run; outside a session (no directory) no limit."""
    directory = os.environ.get("RLINF_EKS_TEST_PLAN_CACHE")
    if not directory or not os.path.isdir(directory):
        yield
        return
    files = [open(Path(directory, f"real-ray-slot-{i}"), "w") for i in range(RAY_SLOTS)]
    try:
        while True:
            for f in files:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield
                return
            time.sleep(0.2)
    finally:
        for f in files:
            f.close()  # closing releases the lock


@pytest.fixture
def pods() -> PodNetwork:
    assert shutil.which("ip") and shutil.which("unshare"), "iproute2 and util-linux unshare are needed"
    with ray_slot():
        yield from _pods()


def _pods() -> PodNetwork:
    n = f"{os.getpid() % 100000}{next(_names)}"
    head_ns, worker_ns = f"rr{n}h", f"rr{n}w"
    # short: Ray's unix sockets live under RAY_TMPDIR
    root = Path(tempfile.mkdtemp(prefix="rr", dir="/tmp"))
    (root / "run").mkdir()
    (root / "trainer.sh").write_text(TRAINER)
    (root / "progress.sh").write_text(progress.progress_script(run_dir=str(root / "run"), timeout_seconds=None, stop_at_time=None, stop_budget_seconds=30))
    try:
        _run("mkdir", "-p", "/tmp/ray")  # the mount point of each pod's own /tmp/ray
        _run("ip", "netns", "add", head_ns)
        _run("ip", "netns", "add", worker_ns)
        _run("ip", "link", "add", f"{head_ns}v", "netns", head_ns, "type", "veth", "peer", "name", f"{worker_ns}v", "netns", worker_ns)
        for ns, ip, peer in ((head_ns, HEAD_IP, WORKER_IP), (worker_ns, WORKER_IP, HEAD_IP)):
            _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", f"{ns}v")
            _run("ip", "-n", ns, "link", "set", f"{ns}v", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            # Ray finds the node IP through the default route, as in a pod
            _run("ip", "-n", ns, "route", "add", "default", "via", peer)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"cannot build the two pods' network namespaces ({' '.join(e.cmd)}): {e.stderr.strip()}: "
                    "these tests need root or passwordless sudo")
    network = PodNetwork(root, (head_ns, worker_ns))
    try:
        yield network
    finally:
        for pod in network.pods:
            if pod.proc.poll() is None:
                pod.kill()
        for ns in (head_ns, worker_ns):
            subprocess.run([*SUDO, "ip", "netns", "del", ns], capture_output=True, timeout=30)
        # the pods ran as root: so are the files they wrote
        subprocess.run([*SUDO, "rm", "-rf", str(root)], timeout=60)


# Ray starts in 3-10 s per node on an idle machine; the bounds below allow for a loaded 2-core CI
# machine and still fail a hang long before any kubelet would have.
START = 90


def test_given_two_pods_when_the_cluster_forms_then_the_trainer_runs_on_both_nodes_and_the_head_reports_its_status(pods):
    head = pods.start(0)
    worker = pods.start(1, head_watch=600)  # the controller's stop comes first (the next test: none comes)
    assert head.result(START + 30) == 0, head.why()
    assert "training on 2 nodes" in pods.marker() and "done" in pods.marker()
    assert "Ray cluster ready: 2 nodes, 4 GPUs" in head.out
    assert (head.state / "exit-code").read_text().strip() == "0"
    # the Job controller (successPolicy) then stops the lingering worker: it says it was stopped
    worker.signal(signal.SIGTERM)
    assert worker.result(45) == 143, worker.why()


def test_given_a_failing_trainer_when_it_exits_then_the_head_reports_its_status_and_the_worker_exits_0_within_seconds(pods):
    # The worker's part: Kubernetes < 1.31 has no successPolicy, so nothing stops the workers of a
    # run that ended, and a worker holds its node (8 GPUs) until it ends by itself. Real Ray's raylet
    # alone gives up on a lost GCS only after gcs_rpc_server_reconnect_timeout_s (60 s by default,
    # kept here): the worker's own check of the head stops Ray on its node within seconds of the
    # head's end, whatever the head's status (a finished run's worker is the two-pods test's).
    head = pods.start(0, TRAINER_STATUS="5")
    worker = pods.start(1)
    assert head.result(START + 30) == 5, head.why()
    ended = time.monotonic()
    assert "trainer exited with status 5" in head.err
    assert worker.result(45) == 0, worker.why()
    assert time.monotonic() - ended < 30, f"the worker held its node {time.monotonic() - ended:.0f}s after the head ended"
    assert f"the Ray head {HEAD_IP}:6379 is gone" in worker.err and "the Ray head is gone: the run has ended" in worker.err


def test_given_a_missing_worker_when_the_join_timeout_passes_then_the_head_fails_clearly(pods):
    # the timeout runs from when the head's Ray is up, so a short one still sees the head join
    head = pods.start(0, join_timeout=3)
    assert head.result(START) == 3, head.why()
    assert "did not form within 3s: 1 of 2 nodes and 2 of 4 GPUs joined" in head.err
    assert pods.marker() == ""


def test_given_a_missing_head_when_the_join_timeout_passes_then_the_worker_fails_clearly(pods):
    worker = pods.start(1, join_timeout=3)
    assert worker.result(30) == 3, worker.why()
    assert f"the Ray head {HEAD_IP}:6379 did not answer within 3s" in worker.err


def test_given_a_head_waiting_for_its_peers_when_stopped_then_it_exits_at_once(pods):
    head = pods.start(0, join_timeout=300)
    deadline = time.monotonic() + START
    while not list(head.ray_dir.glob("session_*/logs/raylet.out")):
        assert head.proc.poll() is None and time.monotonic() < deadline, f"the Ray head did not start: {head.why()}"
        time.sleep(0.2)
    time.sleep(3)  # ray start returned: the head waits for the second node
    sent = time.monotonic()
    head.signal(signal.SIGTERM)
    assert head.result(30) == 143, head.why()
    assert time.monotonic() - sent < 15
    assert "stopped before training started" in head.err


def test_given_a_training_head_when_all_pods_are_stopped_then_the_trainer_is_interrupted_and_both_report_stopped(pods):
    # Job deletion or a drain: every pod gets SIGTERM at once
    head = pods.start(0, TRAINER_SECONDS="600", grace=40)
    worker = pods.start(1, grace=40)
    pods.wait_for_marker("training on 2 nodes", START + 30, head, worker)
    assert "SIGINT default_int_handler" in pods.marker(), "the trainer runs with SIGINT ignored"
    sent = time.monotonic()
    head.signal(signal.SIGTERM)
    worker.signal(signal.SIGTERM)
    assert head.result(40) == 143, head.why()
    assert pods.marker().splitlines()[-1] == "KeyboardInterrupt"
    assert "the trainer exited with status 0 after the stop request; the pod reports 143" in head.err
    assert worker.result(45) == 143, worker.why()
    assert time.monotonic() - sent < 40, "the stop took longer than the grace period"


def test_given_a_running_head_when_a_worker_is_stopped_then_the_worker_reports_stopped(pods):
    # a drained node: real `ray start --block` stops its processes and exits 1; the pod says 143
    head = pods.start(0, TRAINER_SECONDS="600", grace=40)
    worker = pods.start(1, grace=40)
    pods.wait_for_marker("training on 2 nodes", START + 30, head, worker)
    worker.signal(signal.SIGTERM)
    assert worker.result(45) == 143, worker.why()
    assert "stopped: Ray on this node exited with status 1" in worker.err
    assert head.proc.poll() is None, "the head stopped with its worker"
