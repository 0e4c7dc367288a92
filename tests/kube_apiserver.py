"""A real kube-apiserver for the tests, on loopback, the way controller-runtime's envtest runs one:
etcd on a free port with a temporary data folder, kube-apiserver against it with a generated
service-account key, a self-signed serving certificate and a static admin token (group
system:masters, authorization RBAC), the CRDs the stacks use installed from the pinned sources in
../shared/schemas/ and waited for until Established.

The binaries come from ``RLINF_EKS_KUBE_ASSETS`` or envtest's ``KUBEBUILDER_ASSETS``: a folder
holding ``etcd`` and ``kube-apiserver`` (:data:`HOW_TO_GET` says how to get them). Without them the
tests of this tier skip, with that one line.

One server per test session: the first process to ask (an xdist worker, or pytest itself without
xdist) starts it under a file lock in the session folder ``tests/conftest.py`` makes
(``RLINF_EKS_TEST_KUBE_DIR``) and writes its address there; the others read it. The server runs
under a small supervisor (``python -m tests.kube_apiserver serve``) that stops etcd and
kube-apiserver when pytest's main process ends it at the end of the session, or when that process
is gone (a killed run leaves nothing behind).

    server = shared_server()            # or the session fixture ``kube_apiserver`` (tests/conftest.py)
    server.ensure_namespace("rlinf")
    error = server.apply(obj)           # server-side apply, dryRun=All, fieldValidation=Strict
    assert error is None, error         # else the API server's own message (its status message)
    api = server.api_client()           # a kubernetes.client.ApiClient as admin
    server.kubeconfig                   # a kubeconfig file for the same
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

ASSETS_ENV = "RLINF_EKS_KUBE_ASSETS"
ENVTEST_ASSETS_ENV = "KUBEBUILDER_ASSETS"
SESSION_DIR_ENV = "RLINF_EKS_TEST_KUBE_DIR"
"""The session's folder for the shared server (made by tests/conftest.py before the workers start)."""
SESSION_PID_ENV = "RLINF_EKS_TEST_SESSION_PID"
"""pytest's main process: the supervisor stops the server when it is gone."""
BINARIES = ("etcd", "kube-apiserver")
HOW_TO_GET = (
    f"no kube-apiserver and etcd: set {ASSETS_ENV} (or {ENVTEST_ASSETS_ENV}) to a folder holding both, "
    "built with ../shared/tools/build-kube-apiserver.sh SRC OUT (SRC: a Kubernetes v1.35.3 source tree with vendor/) "
    "or downloaded with `setup-envtest use 1.35.x -p path`"
)
FIELD_MANAGER = "rlinf-eks-tests"
START_TIMEOUT_SECONDS = 90.0
ESTABLISHED_TIMEOUT_SECONDS = 60.0

SHARED = Path(__file__).resolve().parents[2] / "shared"
CRD_FILES = (
    "kuberay/ray.io_rayclusters.yaml",
    "kuberay/ray.io_rayjobs.yaml",
    "jobset/jobset.x-k8s.io_jobsets.yaml",
    "kueue/kueue.x-k8s.io_clusterqueues.yaml",
    "kueue/kueue.x-k8s.io_localqueues.yaml",
    "kueue/kueue.x-k8s.io_resourceflavors.yaml",
    "kueue/kueue.x-k8s.io_topologies.yaml",
    "kueue/kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "kueue/kueue.x-k8s.io_workloads.yaml",
    "prometheus-operator/crd-podmonitors.yaml",
    "karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml",
    "karpenter/karpenter.sh_nodeoverlays.yaml",
    "karpenter/karpenter.sh_nodepools.yaml",
)
"""The CustomResourceDefinitions of the kinds the stacks' objects and what the controllers make of
them are (tests/controllers.py: Kueue's Workloads), below ../shared/schemas (pinned releases:
KubeRay 1.7.0, JobSet 0.11.1, Kueue 0.19.2, prometheus-operator, Karpenter 1.14.1). Only those:
each costs the server CPU at every session's start (the unused RayService alone is 1 MB), and an
object of a kind not installed is refused ("the server has no kind"), so a new kind says so."""


def assets() -> Optional[Path]:
    """The folder of the binaries the variables name, if it holds them all."""
    for env in (ASSETS_ENV, ENVTEST_ASSETS_ENV):
        value = os.environ.get(env, "").strip()
        if value and all(os.access(Path(value, b), os.X_OK) for b in BINARIES):
            return Path(value)
    return None


def misconfigured() -> Optional[str]:
    """Why the variables name no usable binaries although one is set (a folder without etcd or
    kube-apiserver, or not executable), else None: such a run fails rather than skip the tier."""
    for env in (ASSETS_ENV, ENVTEST_ASSETS_ENV):
        value = os.environ.get(env, "").strip()
        if value:
            missing = [b for b in BINARIES if not os.access(Path(value, b), os.X_OK)]
            if missing:
                return f"{env}={value} holds no executable {' or '.join(missing)}"
    return None


class ApiError(Exception):
    """A request the API server refused: ``status`` (HTTP) and the server's message."""

    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.body = status, message, body


@dataclass(frozen=True)
class ApiServer:
    """A running kube-apiserver: its URL, the admin token and the CA bundle of its certificate."""

    url: str
    token: str
    ca_file: str
    kubeconfig: str
    supervisor_pid: int
    started_seconds: float
    """How long etcd and kube-apiserver took to serve (/readyz), the CRDs not counted."""

    # -- requests ---------------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, *, query: Optional[dict[str, str]] = None,
        content_type: str = "application/json", timeout: float = 30.0,
    ) -> Any:  # fmt: skip
        """One request as admin; the decoded JSON answer, or :class:`ApiError` with the server's
        message."""
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=_context_of(self), timeout=timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                status = json.loads(raw)
            except ValueError:
                raise ApiError(err.code, raw.decode(errors="replace").strip()) from None
            raise ApiError(err.code, status.get("message", raw.decode(errors="replace")), status) from None
        return json.loads(raw) if raw else None

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """The resource's plural and whether it is namespaced, from the server's discovery."""
        found = _discovery(self, api_version).get(kind)
        if found is None:
            _DISCOVERY.pop((self.url, api_version), None)  # a CRD installed since: ask again
            found = _discovery(self, api_version).get(kind)
        if found is None:
            raise ApiError(404, f"the server has no kind {kind} in {api_version}")
        return found

    def path(self, obj: dict[str, Any], *, namespace: Optional[str] = None) -> str:
        """The URL path of ``obj`` (its own namespace, else ``namespace``, else default)."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.resource(api_version, kind)
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        meta = obj.get("metadata") or {}
        where = f"/namespaces/{meta.get('namespace') or namespace or 'default'}" if namespaced else ""
        return f"{prefix}{where}/{plural}/{urllib.parse.quote(str(meta.get('name', '')), safe='')}"

    def apply(self, obj: dict[str, Any], *, dry_run: bool = True, field_validation: str = "Strict") -> Optional[str]:
        """Server-side apply of ``obj`` (``dryRun=All`` unless ``dry_run`` is False,
        ``fieldValidation=Strict``, forced, as :data:`FIELD_MANAGER`): None when the server accepts
        it, else its refusal (the Status message, e.g. ``Job.batch "x" is invalid: ...``)."""
        query = {"fieldManager": FIELD_MANAGER, "fieldValidation": field_validation, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        try:
            self.request("PATCH", self.path(obj), obj, query=query, content_type="application/apply-patch+yaml")
        except ApiError as err:
            return err.message
        return None

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` for real (an apply without dryRun); :class:`ApiError` when refused."""
        error = self.apply(obj, dry_run=False)
        if error is not None:
            raise ApiError(422, error)
        return self.request("GET", self.path(obj))

    def ensure_namespace(self, name: str, labels: Optional[dict[str, str]] = None) -> None:
        """A namespace created for real (namespaced objects are refused in a missing one)."""
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}})

    def install_crds(self, files: Iterable[Path], timeout: float = ESTABLISHED_TIMEOUT_SECONDS) -> list[str]:
        """Create every CustomResourceDefinition of ``files`` for real and wait until each is
        Established; their names."""
        from concurrent.futures import ThreadPoolExecutor

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        crds = [c for f in files for c in yaml.load_all(Path(f).read_text(), Loader=loader) if c and c.get("kind") == "CustomResourceDefinition"]
        # sent side by side (the server's own work to establish them is most of the time)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(self.create, crds))
        names = [c["metadata"]["name"] for c in crds]
        deadline = time.monotonic() + timeout
        for name in names:
            while not _established(self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} not Established within {timeout:g}s")
                time.sleep(0.1)
        return names

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` as admin (the kubernetes package the project uses)."""
        from kubernetes import client as k8s

        configuration = k8s.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = self.ca_file
        configuration.api_key = {"authorization": f"Bearer {self.token}"}
        return k8s.ApiClient(configuration)


_CONTEXTS: dict[str, ssl.SSLContext] = {}
_DISCOVERY: dict[tuple[str, str], dict[str, tuple[str, bool]]] = {}


def _context_of(server: ApiServer) -> ssl.SSLContext:
    if server.ca_file not in _CONTEXTS:
        _CONTEXTS[server.ca_file] = ssl.create_default_context(cafile=server.ca_file)
    return _CONTEXTS[server.ca_file]


def _discovery(server: ApiServer, api_version: str) -> dict[str, tuple[str, bool]]:
    key = (server.url, api_version)
    if key not in _DISCOVERY:
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        try:
            listing = server.request("GET", path)
        except ApiError as err:
            if err.status != 404:
                raise
            return {}
        _DISCOVERY[key] = {
            r["kind"]: (r["name"], bool(r["namespaced"])) for r in listing.get("resources", []) if "/" not in r["name"]
        }
    return _DISCOVERY[key]


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


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
            state = ApiServer(url, token, ca_file, str(kubeconfig), os.getpid(), round(seconds, 2))
            partial = workdir / "server.json.partial"
            partial.write_text(json.dumps(asdict(state)))
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(binaries: Path, workdir: Path, parent_pid: Optional[int] = None) -> ApiServer:
    """Start the supervisor (:func:`serve`) detached in ``workdir`` and wait for its server."""
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))}
    subprocess.Popen(
        [sys.executable, "-m", "tests.kube_apiserver", "serve", str(binaries), str(workdir), str(parent_pid or os.getpid())],
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
    return ApiServer(**json.loads((workdir / "server.json").read_text()))


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


# -- the session's one server -----------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    server: ApiServer
    crds: tuple[str, ...]
    crd_seconds: float


_SESSION: list[Session] = []


def session_dir() -> Path:
    """The session's folder (tests/conftest.py makes one per session), else one for this process."""
    value = os.environ.get(SESSION_DIR_ENV)
    if value:
        return Path(value)
    import tempfile

    return Path(tempfile.mkdtemp(prefix="rlinf-eks-kube-"))


def server_dir(session: "str | Path") -> Path:
    """Where the session folder keeps its server (etcd's data, the certificates, server.json)."""
    return Path(session) / "kube-apiserver"


def shared_server(binaries: Optional[Path] = None) -> Session:
    """The session's server with the CRDs installed, started by the first process that asks (under
    a lock in :func:`session_dir`); the others reuse it."""
    if _SESSION:
        return _SESSION[0]
    binaries = binaries or assets()
    if binaries is None:
        raise RuntimeError(HOW_TO_GET)
    workdir = server_dir(session_dir())
    workdir.parent.mkdir(parents=True, exist_ok=True)
    with open(workdir.parent / "kube-apiserver.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = workdir / "ready.json"
        if ready.exists():
            found = json.loads(ready.read_text())
            session = Session(ApiServer(**found["server"]), tuple(found["crds"]), found["crd_seconds"])
        else:
            parent = int(os.environ.get(SESSION_PID_ENV) or os.getpid())
            server = start(binaries, workdir, parent)
            began = time.monotonic()
            crds = server.install_crds([SHARED / "schemas" / f for f in CRD_FILES])
            session = Session(server, tuple(crds), round(time.monotonic() - began, 2))
            ready.write_text(json.dumps({"server": asdict(server), "crds": crds, "crd_seconds": session.crd_seconds}))
    _SESSION.append(session)
    return session


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"] and len(argv) == 4:
        serve(Path(argv[1]), Path(argv[2]), int(argv[3]))
        return 0
    print("usage: python -m tests.kube_apiserver serve BINARIES WORKDIR PARENT_PID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
