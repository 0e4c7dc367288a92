"""Starting and stopping the tests' kube-apiserver (tests/kube_apiserver.py has the client and the
session's one server): etcd on a free loopback port with a data folder in the work folder,
kube-apiserver against it as controller-runtime's envtest configures one, both under a supervisor
process (``python -m tests.kube_processes serve BINARIES WORKDIR PARENT_PID``) that stops them on
SIGTERM or once the parent (pytest's main process) is gone. The supervisor writes
``WORKDIR/server.json`` (the fields of :class:`tests.kube_apiserver.ApiServer`) once the server
answers /readyz, ``server.error`` if it cannot start, and ``usage.json`` (CPU seconds) at its end."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

import yaml

START_TIMEOUT_SECONDS = 90.0
SESSION_PREFIX = "rlinf-eks-test-kube-"
"""The name of the session folders tests/conftest.py makes (tempfile.mkdtemp's prefix)."""

# -- starting one -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, token: str, ca_file: Optional[str], processes: list[subprocess.Popen], deadline: float, log: Path) -> None:
    while True:
        for p in processes:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited {p.returncode} while starting; its log: {log}\n{_tail(log)}")
        try:
            context = ssl.create_default_context(cafile=ca_file) if ca_file else None
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, context=context, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready within {START_TIMEOUT_SECONDS:g}s; log: {log}\n{_tail(log)}")
        time.sleep(0.1)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _stop(processes: list[subprocess.Popen]) -> None:
    """Killed, not terminated: their data is the session's scratch (a graceful kube-apiserver
    shutdown takes seconds)."""
    for p in reversed(processes):  # kube-apiserver before etcd
        if p.poll() is None:
            p.kill()
        p.wait()


def serve(binaries: Path, workdir: Path, parent_pid: int) -> None:
    """The supervisor: start etcd and kube-apiserver in ``workdir``, write ``workdir/server.json``
    once they serve, and stop both on SIGTERM or once ``parent_pid`` is gone."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    processes: list[subprocess.Popen] = []
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    started = time.monotonic()
    try:
        with open(log, "ab") as out:
            etcd_port, peer_port = free_port(), free_port()
            etcd_url = f"http://127.0.0.1:{etcd_port}"
            processes.append(subprocess.Popen(
                [str(binaries / "etcd"), "--data-dir", str(workdir / "etcd"), "--listen-client-urls", etcd_url,
                 "--advertise-client-urls", etcd_url, "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                 "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
                 "--unsafe-no-fsync", "--log-level", "warn"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            ))  # fmt: skip
            key = workdir / "sa.key"
            subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
            token = os.urandom(16).hex()
            (workdir / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
            port = free_port()
            certs = workdir / "certs"
            processes.append(subprocess.Popen(
                [str(binaries / "kube-apiserver"), "--etcd-servers", etcd_url, "--bind-address", "127.0.0.1",
                 "--secure-port", str(port), "--cert-dir", str(certs), "--token-auth-file", str(workdir / "tokens.csv"),
                 "--authorization-mode", "RBAC", "--service-account-issuer", "https://kubernetes.default.svc",
                 "--service-account-key-file", str(key), "--service-account-signing-key-file", str(key),
                 "--service-cluster-ip-range", "10.0.0.0/24", "--allow-privileged=true",
                 # as envtest: no token controller runs, so pods naming a service account would wait on it
                 "--disable-admission-plugins", "ServiceAccount",
                 "--advertise-address", "127.0.0.1", "--v", "0"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            ))  # fmt: skip
            url = f"https://127.0.0.1:{port}"
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while not (certs / "apiserver.crt").exists():
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise RuntimeError(f"kube-apiserver wrote no certificate; log: {log}\n{_tail(log)}")
                time.sleep(0.05)
            ca_file = str(certs / "apiserver.crt")
            _wait_ready(url + "/readyz", token, ca_file, processes, deadline, log)
            seconds = time.monotonic() - started
            kubeconfig = workdir / "kubeconfig"
            kubeconfig.write_text(yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config", "current-context": "tests",
                "clusters": [{"name": "tests", "cluster": {"server": url, "certificate-authority": ca_file}}],
                "users": [{"name": "admin", "user": {"token": token}}],
                "contexts": [{"name": "tests", "context": {"cluster": "tests", "user": "admin"}}],
            }))  # fmt: skip
            state = {"url": url, "token": token, "ca_file": ca_file, "kubeconfig": str(kubeconfig),
                     "supervisor_pid": os.getpid(), "started_seconds": round(seconds, 2)}  # fmt: skip
            partial = workdir / "server.json.partial"
            partial.write_text(json.dumps(state))
            partial.replace(workdir / "server.json")
            while not stopping and _alive(parent_pid) and all(p.poll() is None for p in processes):
                time.sleep(0.2)
    except BaseException as err:  # noqa: BLE001 - told to the starter through the state folder
        (workdir / "server.error").write_text(f"{type(err).__name__}: {err}")
    finally:
        _stop(processes)
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # etcd, kube-apiserver, openssl
        (workdir / "usage.json").write_text(json.dumps({"cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2)}))
        if not stopping and not _alive(parent_pid):
            # pytest was killed: nobody is left to remove the session's folder (conftest's, named
            # SESSION_PREFIX...) or, for a server of its own, this folder with etcd's data
            import shutil

            session = workdir.parent if workdir.parent.name.startswith(SESSION_PREFIX) else workdir
            shutil.rmtree(session, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(binaries: Path, workdir: Path, parent_pid: Optional[int] = None) -> dict[str, Any]:
    """Start the supervisor (:func:`serve`) detached in ``workdir`` and wait for its server."""
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))}
    subprocess.Popen(
        [sys.executable, "-m", "tests.kube_processes", "serve", str(binaries), str(workdir), str(parent_pid or os.getpid())],
        cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS + 10
    while not (workdir / "server.json").exists():
        if (workdir / "server.error").exists():
            raise RuntimeError(f"the test kube-apiserver did not start: {(workdir / 'server.error').read_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the test kube-apiserver did not start within {START_TIMEOUT_SECONDS:g}s ({workdir})")
        time.sleep(0.1)
    return json.loads((workdir / "server.json").read_text())


def stop(workdir: Path) -> Optional[str]:
    """Stop the supervisor of ``workdir`` (it stops etcd and kube-apiserver) and wait for it; one
    line on what the server cost (start seconds, CPU seconds), None when none was started."""
    state = workdir / "server.json"
    if not state.exists() or (workdir / "stopped").exists():
        return None
    (workdir / "stopped").touch()  # once: the pid is not signalled again after it is gone
    _stop_supervisor(json.loads(state.read_text())["supervisor_pid"])
    summary = f"the tests' kube-apiserver: serving in {json.loads(state.read_text())['started_seconds']:g}s"
    ready = workdir / "ready.json"
    if ready.exists():
        found = json.loads(ready.read_text())
        summary += f", {len(found['crds'])} CRDs Established in {found['crd_seconds']:g}s"
    usage = workdir / "usage.json"
    if usage.exists():
        summary += f", etcd and kube-apiserver used {json.loads(usage.read_text())['cpu_seconds']:g} CPU-s"
    return summary


def _stop_supervisor(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        try:  # our own child when this process started it: reap it
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:
            pass
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"] and len(argv) == 4:
        serve(Path(argv[1]), Path(argv[2]), int(argv[3]))
        return 0
    print("usage: python -m tests.kube_processes serve BINARIES WORKDIR PARENT_PID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
