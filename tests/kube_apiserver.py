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
under a small supervisor (``python -m tests.kube_processes serve``) that stops etcd and
kube-apiserver when pytest's main process ends it at the end of the session, or when that process
is gone (a killed run leaves nothing behind): tests/kube_processes.py.

    server = shared_server().server     # or the session fixture ``kube_api`` (tests/conftest.py)
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
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from tests import kube_processes
from tests.fetch_shared_data import shared_folder
from tests.reference import reference
from tests.kube_processes import stop

__all__ = ["ApiError", "ApiServer", "Session", "assets", "misconfigured", "shared_server", "server_dir", "start", "stop"]

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
ESTABLISHED_TIMEOUT_SECONDS = 60.0

SHARED = shared_folder()
"""The reference data (the CRDs below ../shared/schemas): $RLINF_EKS_SHARED, else ../shared, as for every test."""
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
KubeRay 1.7.0, JobSet at its pin (tests/data/reference), Kueue 0.19.2, prometheus-operator, Karpenter 1.14.1). Only those:
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


def start(binaries: Path, workdir: Path, parent_pid: Optional[int] = None) -> ApiServer:
    """A server of its own in ``workdir`` (not the session's), stopped by :func:`stop` (``workdir``)
    or when ``parent_pid`` (default this process) is gone; the CRDs are not installed."""
    return ApiServer(**kube_processes.start(binaries, workdir, parent_pid))


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
    import atexit
    import shutil
    import tempfile

    made = tempfile.mkdtemp(prefix="rlinf-eks-kube-")
    atexit.register(lambda: (stop(server_dir(made)), shutil.rmtree(made, ignore_errors=True)))
    return Path(made)


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
        ready, failed = workdir / "ready.json", workdir.parent / "kube-apiserver.failed"
        if failed.exists():  # one start per session: the other workers fail with the first one's reason
            raise RuntimeError(failed.read_text())
        if ready.exists():
            found = json.loads(ready.read_text())
            session = Session(ApiServer(**found["server"]), tuple(found["crds"]), found["crd_seconds"])
        else:
            parent = int(os.environ.get(SESSION_PID_ENV) or os.getpid())
            try:
                server = start(binaries, workdir, parent)
                began = time.monotonic()
                crds = server.install_crds([reference(f"schemas/{f}") for f in CRD_FILES])
            except Exception as err:
                failed.write_text(f"the tests' kube-apiserver did not start: {type(err).__name__}: {err}")
                raise
            session = Session(server, tuple(crds), round(time.monotonic() - began, 2))
            ready.write_text(json.dumps({"server": asdict(server), "crds": crds, "crd_seconds": session.crd_seconds}))
    _SESSION.append(session)
    return session


if __name__ == "__main__":  # the supervisor's old entry point
    import sys

    sys.exit(kube_processes.main(sys.argv[1:]))
