"""A simulated EKS cluster for verify, on a real kube-apiserver (tests/kube_apiserver.py starts it):
the real kube-scheduler and kube-controller-manager run against it, and everything a kubelet, an
EC2 instance, Kueue's controller or a device plugin would do is played by this module.

What is real: the API server (validation, RBAC, authentication, CRDs and their status
subresources); the scheduler, which binds every pod (the device plugins', the controllers', and
verify's smoke and all-reduce Jobs' pods) onto the fake nodes by their allocatable, taints and
affinities; the controller manager's Job, DaemonSet, Deployment/ReplicaSet, persistent-volume
binder, garbage collector, pod GC and namespace controllers, which create the pods, count the
DaemonSets' ready pods, mark the Deployments Available and the Jobs Complete or Failed, bind the
shared filesystem's claim, and delete what verify deletes.

What is simulated (:class:`FakeKubelet`, :func:`deploy`): the Node objects (labels, taints,
capacity and allocatable of the catalog's instance type: GPUs, EFA devices, hugepages; the
kubelet's and the EKS node monitoring agent's conditions, written through the status subresource:
no kubelet heartbeats, so the node lifecycle controller is not run); each pod's status once bound
(Running and Ready, or a Job pod's exit status: the Job's containers never run), and the pods' logs
(served as a kubelet serves them, so the API server's log endpoint is real, but the text is
canned: the smoke checks' last line, nccl-tests' table); the ClusterQueue's and LocalQueue's
Active condition (Kueue's controller is not run); one CRD the pinned schemas lack
(``prometheuses.monitoring.coreos.com``, a stand-in with an open schema: verify reads only that it
is Established).
"""

from __future__ import annotations

import copy
import http.server
import os
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from rlinf_eks.verify.expect import Expectation
from tests import kube_apiserver
from tests.kube_apiserver import ApiError, ApiServer

CONTROLLERS = "job,daemonset,deployment,replicaset,garbagecollector,namespace,persistentvolume-binder,podgc"
"""kube-controller-manager's controllers: no node lifecycle controller (no kubelet posts heartbeats),
no service-account token controller (the server runs without the ServiceAccount admission plugin)."""
SCHEMA_FOLDERS = ("kueue", "jobset", "kuberay", "karpenter", "prometheus-operator")


def crd_file(name: str) -> Optional[Path]:
    """The pinned CRD file of ``name`` (``plural.group``) below ../shared/schemas, None if none."""
    plural, group = name.split(".", 1)
    for folder in SCHEMA_FOLDERS:
        for file in (f"{group}_{plural}.yaml", f"crd-{plural}.yaml"):
            path = kube_apiserver.SHARED / "schemas" / folder / file
            if path.exists() and (folder != "prometheus-operator" or group == "monitoring.coreos.com"):
                return path
    return None


def stand_in_crd(name: str) -> dict[str, Any]:
    """A CRD of ``name`` with an open schema, for one the pinned schemas lack (verify reads only
    that it is Established)."""
    plural, group = name.split(".", 1)
    kind = plural[:-2].capitalize() if plural.endswith("es") and plural[-3] == "s" else plural.rstrip("s").capitalize()
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }  # fmt: skip


JOB_LABEL = "job-name"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def until(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Poll ``check`` until it returns something true; TimeoutError naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"the simulated cluster: {what} not within {timeout:g}s")
        time.sleep(every)


def patch_status(server: ApiServer, path: str, status: dict[str, Any], *, strategic: bool = False) -> Any:
    kind = "application/strategic-merge-patch+json" if strategic else "application/merge-patch+json"
    return server.request("PATCH", f"{path}/status", {"status": status}, content_type=kind)


# --- the kubelet's part ------------------------------------------------------------------------------


JobOutcome = Callable[[dict[str, Any]], tuple[int, str]]
"""A verify Job's pod -> (its container's exit status, its log)."""


@dataclass
class FakeKubelet:
    """Plays every fake node's kubelet: each pod the scheduler binds to one of ``nodes`` gets the
    status a kubelet would post (a Job's pod: terminated with the exit status ``job_outcome`` gives;
    any other: Running, Ready unless its (namespace, owner) is listed in ``not_ready`` for that
    node), and its log is served on ``port`` as a kubelet serves ``/containerLogs``."""

    server: ApiServer
    cert: tuple[str, str]
    nodes: set[str] = field(default_factory=set)
    not_ready: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    job_outcome: Optional[JobOutcome] = None
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    bound: list[tuple[str, str, str]] = field(default_factory=list)
    """(namespace, pod, node) of every Job pod it saw bound: where the scheduler placed them."""
    port: int = 0
    _seen: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _httpd: Any = None

    def start(self) -> "FakeKubelet":
        logs = self.logs

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                text = logs.get((parts[1], parts[2])) if len(parts) >= 3 and parts[0] == "containerLogs" else None
                body = (text or "").encode()
                self.send_response(200 if text is not None else 404)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*self.cert)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self._threads = [threading.Thread(target=self._httpd.serve_forever, daemon=True), threading.Thread(target=self._loop, daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for pod in self.server.request("GET", "/api/v1/pods")["items"]:
                    self._post_status(pod)
            except (ApiError, OSError):
                pass  # the server stopping, or a pod deleted meanwhile: the next round sees
            self._stop.wait(0.2)

    def _post_status(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        node = spec.get("nodeName")
        if node not in self.nodes or meta.get("deletionTimestamp"):
            return
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), {})
        container = spec["containers"][0]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        if owner.get("kind") == "Job":
            if pod["status"].get("phase") in ("Succeeded", "Failed") or self._seen.get(meta["uid"]) == "done":
                return
            self.bound.append((meta["namespace"], meta["name"], node))
            code, log = self.job_outcome(pod) if self.job_outcome else (0, "")
            self.logs[(meta["namespace"], meta["name"])] = log
            state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": _now(), "finishedAt": _now()}}
            status = self._status("Succeeded" if code == 0 else "Failed", False, container, state, pod)
            self._seen[meta["uid"]] = "done"
        else:
            ready = node not in self.not_ready.get((meta["namespace"], owner.get("name", "")), set())
            if self._seen.get(meta["uid"]) == f"ready={ready}":
                return
            state = {"running": {"startedAt": _now()}} if ready else {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}}
            status = self._status("Running", ready, container, state, pod)
            self._seen[meta["uid"]] = f"ready={ready}"
        patch_status(self.server, path, status, strategic=True)

    @staticmethod
    def _status(phase: str, ready: bool, container: dict[str, Any], state: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
        flag = "True" if ready else "False"
        done = phase in ("Succeeded", "Failed")
        return {
            "phase": phase, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": "10.0.200.7", "podIPs": [{"ip": "10.0.200.7"}],
            "startTime": pod["status"].get("startTime") or _now(),
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "False" if done else "True", "lastTransitionTime": _now()},
                {"type": "Initialized", "status": "True", "lastTransitionTime": _now()},
                {"type": "Ready", "status": flag, "lastTransitionTime": _now(), **({"reason": "PodCompleted"} if done else {})},
                {"type": "ContainersReady", "status": flag, "lastTransitionTime": _now(), **({"reason": "PodCompleted"} if done else {})},
            ],
            "containerStatuses": [{
                "name": container["name"], "image": container["image"], "imageID": "", "ready": ready, "started": not done,
                "restartCount": 0 if "waiting" not in state else 5, "state": state,
            }],
        }  # fmt: skip


# --- the cluster ---------------------------------------------------------------------------------------


@dataclass
class Sim:
    """The running simulation: its API server, scheduler, controller manager and kubelet."""

    server: ApiServer
    workdir: Path
    kubelet: FakeKubelet
    processes: list[subprocess.Popen]
    timings: dict[str, float]
    crds: set[str] = field(default_factory=set)

    def stop(self) -> str:
        """Stop everything; one line on what the controllers and the API server cost (CPU seconds)."""
        self.kubelet.stop()
        used = []
        for process in self.processes:
            used.append(f"{Path(str(process.args[0])).name} {_cpu_seconds(process.pid):.1f}")
            process.kill()
            process.wait()
        server = kube_apiserver.stop(self.workdir / "kube-apiserver") or ""
        return f"{', '.join(used)} CPU-s; {server}"


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a running process (/proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(binaries: Path, workdir: Path) -> Sim:
    """A fresh API server of its own (tests/kube_apiserver.py's launcher; the session's shared one
    stays free of nodes and controllers), the scheduler and the controller manager, and the fake
    kubelet. :func:`deploy` installs the CRDs each stack uses."""
    timings: dict[str, float] = {}
    server = kube_apiserver.start(binaries, workdir / "kube-apiserver", os.getpid())
    timings["api server"] = server.started_seconds
    processes: list[subprocess.Popen] = []
    try:
        for name, args in (
            ("kube-scheduler", ["--leader-elect=false", "--secure-port=0"]),
            ("kube-controller-manager", ["--leader-elect=false", "--secure-port=0", f"--controllers={CONTROLLERS}",
                                         "--use-service-account-credentials=false", "--pvclaimbinder-sync-period=2s"]),
        ):  # fmt: skip
            with open(workdir / f"{name}.log", "wb") as log:  # the process keeps its own descriptor
                processes.append(subprocess.Popen([str(binaries / name), "--kubeconfig", server.kubeconfig, "--v=1", *args],
                                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))  # fmt: skip
        certs = Path(server.ca_file).parent
        kubelet = FakeKubelet(server, (str(certs / "apiserver.crt"), str(certs / "apiserver.key"))).start()
    except BaseException:
        for process in processes:
            process.kill()
            process.wait()
        kube_apiserver.stop(workdir / "kube-apiserver")
        raise
    return Sim(server, workdir, kubelet, processes, timings)


def _create(server: ApiServer, obj: dict[str, Any]) -> dict[str, Any]:
    """Create or update ``obj`` (server-side apply: the stack's objects as a second ``pulumi up``
    would), replacing it where the server refuses the update as immutable (another stack's
    ResourceFlavor: Kueue's CRD keeps nodeLabels and topologyName once topologyName is set)."""
    body = {k: v for k, v in copy.deepcopy(obj).items() if k != "status"}
    try:
        return server.create(body)
    except ApiError as err:
        if "immutable" not in err.message:
            raise
    server.request("DELETE", server.path(body))
    until(f"{body['kind']} {body['metadata']['name']} deleted", lambda: _absent(server, server.path(body)), timeout=30)
    return server.create(body)


def _absent(server: ApiServer, path: str) -> bool:
    try:
        server.request("GET", path)
    except ApiError as err:
        return err.status == 404
    return False


def _node_status(sim: Sim, node: dict[str, Any]) -> dict[str, Any]:
    """The node's status as its kubelet posts it, pointing the API server at the fake kubelet."""
    status = copy.deepcopy(node["status"])
    status.setdefault("capacity", dict(status.get("allocatable") or {}))
    status["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"}]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": sim.kubelet.port}}
    for condition in status.get("conditions") or []:
        condition.setdefault("lastHeartbeatTime", _now())
        condition.setdefault("lastTransitionTime", _now())
    return status


def put_node(sim: Sim, node: dict[str, Any]) -> None:
    """A Node as EKS registers it: created, then its status posted (as the kubelet does)."""
    name = node["metadata"]["name"]
    try:
        sim.server.request("GET", f"/api/v1/nodes/{name}")
    except ApiError as err:
        if err.status != 404:
            raise
        body = {"apiVersion": "v1", "kind": "Node", "metadata": node["metadata"], "spec": node.get("spec") or {}}
        sim.server.request("POST", "/api/v1/nodes", body)
    else:
        sim.server.request("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": node["metadata"].get("labels")}, "spec": node.get("spec") or {}},
                           content_type="application/merge-patch+json")  # fmt: skip
    patch_status(sim.server, f"/api/v1/nodes/{name}", _node_status(sim, node))
    # the API server taints a new node not-ready (TaintNodesByCondition) until the node lifecycle
    # controller sees its Ready condition: that controller's part, as it would do it
    sim.server.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": (node.get("spec") or {}).get("taints") or None}},
                       content_type="application/merge-patch+json")  # fmt: skip
    sim.kubelet.nodes.add(name)


def _daemonset(namespace: str, name: str, selector: dict[str, str]) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": dict(selector), "tolerations": [{"operator": "Exists"}], "priorityClassName": "system-node-critical",
            "containers": [{"name": "plugin", "image": f"public.ecr.aws/example/{name}:sim", "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}}}],
        }}},
    }  # fmt: skip


def _deployment(namespace: str, name: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"role": "system"},
            "containers": [{"name": "manager", "image": f"registry.example/{name}:sim", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
        }}},
    }  # fmt: skip


ACTIVE = {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
QUEUE_KINDS = ("ResourceFlavor", "Topology", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")
STACK_KINDS = ("Namespace", "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim", *QUEUE_KINDS, "EC2NodeClass", "NodeOverlay", "NodePool")


def _namespace(sim: Sim, name: str) -> None:
    if name not in ("kube-system", "default"):
        sim.server.ensure_namespace(name)


def deploy(sim: Sim, expect: Expectation, planned: list[dict[str, Any]], gpu_nodes: list[dict[str, Any]], system_nodes: list[dict[str, Any]]) -> None:
    """The cluster a healthy ``pulumi up`` of the stack leaves (its GPU and system nodes, the device
    plugins, the controllers, its queue, namespace, service account and claim), settled: the
    DaemonSets' pods Ready on every GPU node, the Deployments Available, the claim Bound. GPU
    nodes not in ``gpu_nodes`` are deleted (a smaller stack on the same server)."""
    server = sim.server
    install_crds(sim, [c.name for c in expect.crds])
    wanted = {n["metadata"]["name"] for n in gpu_nodes}
    for node in server.request("GET", "/api/v1/nodes", query={"labelSelector": ",".join(f"{k}={v}" for k, v in expect.gpu.selector.items())})["items"]:
        name = node["metadata"]["name"]
        if name not in wanted:
            server.request("DELETE", f"/api/v1/nodes/{name}")
            sim.kubelet.nodes.discard(name)
            # the pod GC controller deletes a gone node's pods only after 40 s of quarantine
            for pod in server.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={name}"})["items"]:
                meta = pod["metadata"]
                server.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", {"gracePeriodSeconds": 0})
    for node in [*system_nodes, *gpu_nodes]:
        put_node(sim, node)
    for obj in sorted((o for o in planned if o["kind"] in STACK_KINDS), key=lambda o: STACK_KINDS.index(o["kind"])):
        if obj["kind"] == "Namespace":
            _namespace(sim, obj["metadata"]["name"])
            continue
        created = _create(server, obj)
        if obj["kind"] in ("ClusterQueue", "LocalQueue"):  # Kueue's controller would say so
            meta = created["metadata"]
            path = server.path(created)
            patch_status(server, path, {"conditions": [{**ACTIVE, "lastTransitionTime": _now(), "observedGeneration": meta.get("generation", 1)}]})
    for ds in expect.daemonsets:
        _namespace(sim, ds.namespace)
        _create(server, _daemonset(ds.namespace, ds.name, dict(expect.gpu.selector)))
    for ctl in expect.controllers:
        _namespace(sim, ctl.namespace)
        _create(server, _deployment(ctl.namespace, ctl.name))
    settle(sim, expect, len(gpu_nodes))


def install_crds(sim: Sim, names: list[str]) -> None:
    """The CRDs ``names`` from their pinned files (a stand-in where ../shared/schemas has none), Established."""
    began = time.monotonic()
    missing = [n for n in names if n not in sim.crds]
    files = [f for f in dict.fromkeys(crd_file(n) for n in missing) if f is not None]
    installed = sim.server.install_crds(files) if files else []
    for name in missing:
        if crd_file(name) is None:
            sim.server.create(stand_in_crd(name))
            installed.append(name)
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
    until("the CRDs Established", lambda: all(kube_apiserver._established(sim.server.request("GET", path + n)) for n in missing))
    sim.crds.update(missing, installed)
    if missing:
        sim.timings["CRDs"] = round(sim.timings.get("CRDs", 0) + time.monotonic() - began, 2)


def settle(sim: Sim, expect: Expectation, gpu_node_count: int, timeout: float = 90.0) -> None:
    """Wait until the controllers and the kubelet caught up: every device plugin's DaemonSet counts
    a Ready pod on each GPU node, every controller Available, the shared claim Bound."""
    server = sim.server

    def ready() -> bool:
        for ds in expect.daemonsets:
            status = server.request("GET", f"/apis/apps/v1/namespaces/{ds.namespace}/daemonsets/{ds.name}").get("status") or {}
            if not status.get("desiredNumberScheduled") == status.get("numberReady") == gpu_node_count:
                return False
        for ctl in expect.controllers:
            conditions = (server.request("GET", f"/apis/apps/v1/namespaces/{ctl.namespace}/deployments/{ctl.name}").get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
                return False
        if expect.shared_claim:
            ns, name = expect.shared_claim
            if (server.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}").get("status") or {}).get("phase") != "Bound":
                return False
        return True

    until("the device plugins Ready, the controllers Available, the claim Bound", ready, timeout)


def service_account_kubeconfig(sim: Sim, namespace: str, name: str, path: Path) -> str:
    """A kubeconfig for a service account of the server (TokenRequest), a user with no rights but
    what it is bound to: its username."""
    _namespace(sim, namespace)
    _create(sim.server, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
    answer = sim.server.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})  # fmt: skip
    write_kubeconfig(sim, path, answer["status"]["token"])
    return f"system:serviceaccount:{namespace}:{name}"


def write_kubeconfig(sim: Sim, path: Path, token: str, server: Optional[str] = None) -> Path:
    """A kubeconfig for ``token`` at the simulation's server (or ``server``)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": server or sim.server.url, "certificate-authority": sim.server.ca_file}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
    }))  # fmt: skip
    return path
