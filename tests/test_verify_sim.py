"""verify against a simulated EKS cluster on a real kube-apiserver with the real kube-scheduler and
kube-controller-manager (tests/sim_cluster.py says what is real and what is simulated): a healthy
2-node multi-node cluster and a 1-node single-node cluster are ready at every level (the smoke and
all-reduce Jobs' pods placed by the real scheduler on the fake nodes, their Jobs completed by the
real Job controller from the statuses the fake kubelet posts, their logs read through the API
server); each planted fault (no EFA allocatable, a device plugin pod not Ready, another minor, a node
the monitoring agent marks unhealthy, a failing smoke Job, NCCL over TCP sockets, a closed port, a
failing credential plugin) is named by the check it breaks; the API server's own 401 and 403 are
told apart; a user bound to the RBAC ``verify --dry-run`` writes can climb every level.

Skips with one line without the binaries (RLINF_EKS_KUBE_ASSETS or KUBEBUILDER_ASSETS naming a
folder with etcd, kube-apiserver, kube-scheduler and kube-controller-manager)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from rlinf_eks.__main__ import main
from rlinf_eks.verify.rbac import rbac_objects
from rlinf_eks.verify.runner import NAMESPACE_LABELS, VERIFY_NAMESPACE
from rlinf_eks.verify.smoke import RUN_LABEL
from tests import kube_apiserver, sim_cluster
from tests.sim_cluster import Sim, deploy, until
from rlinf_eks.verify.expect import expectation_of
from tests.harness import manifests, plan_stack
from tests.test_verify_checks import expect, gpu_node, planned, system_node
from tests.test_verify_cli import ALL_REDUCE_OK
from tests.test_verify_karpenter import of_type

SIM_BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
SMOKE_OK = "rlinf-eks smoke: OK: 8 GPUs (nvidia-smi -L), 32 EFA devices, NCCL net plugin found"


def binaries() -> Path:
    """The folder of the four binaries, or a skip saying which are missing and how to get them (a
    variable naming a folder without etcd or kube-apiserver fails, as the API server tier does)."""
    found = kube_apiserver.assets()
    if found is None and kube_apiserver.misconfigured():
        pytest.fail(kube_apiserver.misconfigured())
    if found is None:
        pytest.skip(kube_apiserver.HOW_TO_GET + " (the simulated cluster also needs kube-scheduler and kube-controller-manager there)")
    missing = [b for b in SIM_BINARIES if not os.access(found / b, os.X_OK)]
    if missing:
        pytest.skip(f"{found} has no {' or '.join(missing)}: the simulated cluster needs them (../shared/tools/build-kube-apiserver.sh builds them)")
    return found


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    folder = binaries()
    workdir = Path(tempfile.mkdtemp(prefix="rlinf-eks-sim-"))
    started = time.monotonic()
    try:
        running = sim_cluster.start(folder, workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    running.timings["start"] = round(time.monotonic() - started, 2)
    try:
        yield running
    finally:
        cost = running.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # etcd's data, the certificates, the logs
        print(f"\nthe simulated cluster's seconds: {running.timings}; {cost}")


def job_outcome(pod: dict[str, Any]) -> tuple[int, str]:
    """A healthy node: every smoke check passes, the all-reduce's pod 0 prints nccl-tests' table."""
    meta = pod["metadata"]
    if "-fabric-" in meta["labels"].get("job-name", ""):
        index = (meta.get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", "0")
        return 0, ALL_REDUCE_OK if index == "0" else "rlinf-eks preflight: sshd up"
    return 0, SMOKE_OK


def cluster(sim: Sim, stack: str, nodes: int) -> list[str]:
    """``stack``'s healthy cluster with ``nodes`` GPU nodes (the kubelet healthy again); their names."""
    sim.kubelet.not_ready.clear()
    sim.kubelet.job_outcome = job_outcome
    e = expect(stack)
    gpu = [gpu_node(e, i) for i in range(nodes)]
    started = time.monotonic()
    deploy(sim, e, list(planned(stack).values()), gpu, [system_node(0), system_node(1)])
    sim.timings[f"deploy {stack}"] = round(time.monotonic() - started, 2)
    return [n["metadata"]["name"] for n in gpu]


def verify(sim: Sim, tmp_path: Path, stack: str, *args: str, kubeconfig: str | Path | None = None) -> tuple[int, list[dict[str, Any]]]:
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    code = main(["verify", stack, "--kubeconfig", str(kubeconfig or sim.server.kubeconfig), "--json", str(report), *args])
    return code, json.loads(report.read_text())["checks"] if report.exists() else []


def failing(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in checks if c["result"] == "fail"]


def only_failure(code: int, checks: list[dict[str, Any]], name: str) -> dict[str, Any]:
    assert code == 1, checks
    (found,) = failing(checks) or [{}]
    assert found.get("check") == name, failing(checks)
    assert found["detail"] and found["remedy"] and "\n" not in found["detail"] + found["remedy"]
    return found


def leftovers(sim: Sim) -> list[str]:
    """Objects of a verify run still there (Jobs and pods; a Terminating namespace is on its way)."""
    found = []
    for path in ("/apis/batch/v1/jobs", "/api/v1/pods", "/api/v1/configmaps"):
        items = sim.server.request("GET", path, query={"labelSelector": RUN_LABEL})["items"]
        found += [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in items if not i["metadata"].get("deletionTimestamp")]
    return found


# --- healthy clusters ------------------------------------------------------------------------------


def test_a_healthy_one_node_cluster_is_ready_at_every_level(sim, tmp_path):
    nodes = cluster(sim, "single-node", 1)
    started = time.monotonic()
    code, checks = verify(sim, tmp_path, "single-node")
    sim.timings["verify single-node L0-L5"] = round(time.monotonic() - started, 2)
    assert code == 0, failing(checks)
    assert {c["level"] for c in checks} == {0, 1, 2, 3, 4, 5}
    assert next(c for c in checks if c["check"] == "gpu-nodes.count")["detail"].startswith("1 GPU node (role=gpu-training)")
    assert f"smoke.{nodes[0]}" in {c["check"] for c in checks}


def test_a_healthy_two_node_cluster_is_ready_at_every_level_and_left_as_found(sim, tmp_path):
    nodes = cluster(sim, "multi-node", 2)
    sim.kubelet.bound.clear()
    started = time.monotonic()
    code, checks = verify(sim, tmp_path, "multi-node")
    sim.timings["verify multi-node L0-L5"] = round(time.monotonic() - started, 2)
    assert code == 0, failing(checks)
    assert {c["level"] for c in checks} == {0, 1, 2, 3, 4, 5} and all(c["result"] == "pass" for c in checks)
    # the real scheduler placed one smoke pod on each node and the all-reduce's two pods one a node
    smoke = sorted(node for ns, pod, node in sim.kubelet.bound if ns == VERIFY_NAMESPACE and "-smoke-" in pod)
    fabric = sorted(node for ns, pod, node in sim.kubelet.bound if ns == "rlinf" and "-fabric-" in pod)
    assert smoke == fabric == sorted(nodes)
    # their logs came through the API server's log endpoint (from the fake kubelet)
    assert {c["detail"] for c in checks if c["check"].startswith("smoke.")} == {f"{n}: {SMOKE_OK}" for n in nodes}
    assert "335.55 GB/s" in next(c["detail"] for c in checks if c["check"] == "fabric.bus-bandwidth")
    until("verify's Jobs and pods deleted", lambda: not leftovers(sim), timeout=30)


# --- planted faults ----------------------------------------------------------------------------------


def _patch_node_status(sim: Sim, node: str, status: dict[str, Any]) -> None:
    sim_cluster.patch_status(sim.server, f"/api/v1/nodes/{node}", status, strategic=True)


def test_a_node_without_efa_allocatable_fails_naming_the_node_and_the_efa_plugin(sim, tmp_path):
    nodes = cluster(sim, "multi-node", 2)
    _patch_node_status(sim, nodes[1], {"allocatable": {"vpc.amazonaws.com/efa": None}, "capacity": {"vpc.amazonaws.com/efa": None}})
    found = only_failure(*verify(sim, tmp_path, "multi-node", "--level", "2"), "gpu-nodes.allocatable")
    assert found["detail"] == f"{nodes[1]}: vpc.amazonaws.com/efa missing (expects 32)"
    assert "kube-system/aws-efa-k8s-device-plugin's pod on those nodes" in found["remedy"]


def test_a_device_plugin_pod_not_ready_fails_naming_its_node(sim, tmp_path):
    nodes = cluster(sim, "multi-node", 2)
    sim.kubelet.not_ready[("kube-system", "aws-efa-k8s-device-plugin")] = {nodes[0]}
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/aws-efa-k8s-device-plugin"
    until("the DaemonSet controller counting one Ready pod", lambda: (sim.server.request("GET", path).get("status") or {}).get("numberReady") == 1)
    found = only_failure(*verify(sim, tmp_path, "multi-node", "--level", "2"), "daemonset.aws-efa-k8s-device-plugin")
    assert found["detail"].startswith("the EFA device plugin: numberReady 1 of desiredNumberScheduled 2; aws-efa-k8s-device-plugin-")
    assert found["detail"].endswith(f" on {nodes[0]} Running, not Ready (CrashLoopBackOff)")


def test_a_control_plane_of_another_minor_fails_the_version(sim, tmp_path):
    cluster(sim, "multi-node", 2)
    found = only_failure(*verify(sim, tmp_path, "multi-node", "--set", "cluster.kubernetesVersion=1.34", "--level", "2"), "api.version")
    assert found["detail"] == "the cluster runs Kubernetes 1.35 (v1.35.3), the stack says cluster.kubernetesVersion 1.34"


def test_a_gpu_node_the_monitoring_agent_marks_unhealthy_fails_its_health(sim, tmp_path):
    nodes = cluster(sim, "multi-node", 2)
    fault = {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error", "message": "GPU has fallen off the bus"}
    _patch_node_status(sim, nodes[0], {"conditions": [fault]})
    found = only_failure(*verify(sim, tmp_path, "multi-node", "--level", "2"), "gpu-nodes.health")
    assert found["detail"] == f"{nodes[0]}: AcceleratedHardwareReady=False (NvidiaXID79Error: GPU has fallen off the bus)"


def test_a_closed_port_is_named_with_the_endpoint(sim, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = sim_cluster.write_kubeconfig(sim, tmp_path / "closed", "a-token", server=f"https://127.0.0.1:{port}")
    found = only_failure(*verify(sim, tmp_path, "multi-node", kubeconfig=kubeconfig), "api.reachable")
    assert found["detail"] == f"https://127.0.0.1:{port} refused the connection (GET /version): nothing listens there"


def test_a_node_whose_smoke_job_fails_is_named_with_what_its_exit_status_means(sim, tmp_path):
    nodes = cluster(sim, "multi-node", 2)
    line = f"rlinf-eks fabric-check: FAILED: /dev/infiniband has 0 EFA devices, p5.48xlarge has 32; this node cannot train over EFA (exit 90)"

    def efa_gone(pod: dict[str, Any]) -> tuple[int, str]:
        return (90, line) if pod["spec"].get("nodeName") == nodes[1] else job_outcome(pod)

    sim.kubelet.job_outcome = efa_gone
    found = only_failure(*verify(sim, tmp_path, "multi-node", "--level", "3"), f"smoke.{nodes[1]}")
    assert found["detail"].startswith(f"{nodes[1]}: ") and "(exit 90)" in found["detail"] and found["detail"].endswith(line)
    until("verify's Jobs and pods deleted", lambda: not leftovers(sim), timeout=30)


def _gone(sim: Sim, path: str) -> bool:
    try:
        found = sim.server.request("GET", path)
    except kube_apiserver.ApiError as err:
        return err.status == 404
    return (found.get("status") or {}).get("phase") != "Terminating"


def test_an_all_reduce_that_fell_back_to_tcp_sockets_fails_the_network_check(sim, tmp_path):
    cluster(sim, "multi-node", 2)
    fallback = ALL_REDUCE_OK.replace("NET/OFI Selected Provider is efa (found 4 nics)", "NET/Socket : Using [0]eth0:10.0.1.23<0>").replace(
        "Using network AWS Libfabric", "Using network Socket"
    )

    def over_sockets(pod: dict[str, Any]) -> tuple[int, str]:
        code, log = job_outcome(pod)
        return code, fallback if log == ALL_REDUCE_OK else log

    sim.kubelet.job_outcome = over_sockets
    found = only_failure(*verify(sim, tmp_path, "multi-node", "--level", "4"), "fabric.network")
    assert found["detail"].startswith("NCCL fell back to TCP sockets (networks: Socket; provider: none)")
    until("verify's Jobs and pods deleted", lambda: not leftovers(sim), timeout=30)


# --- who is asking ------------------------------------------------------------------------------------


def test_a_token_the_api_server_does_not_know_is_401(sim, tmp_path):
    kubeconfig = sim_cluster.write_kubeconfig(sim, tmp_path / "bad-token", "not-a-token-the-server-knows")
    found = only_failure(*verify(sim, tmp_path, "multi-node", kubeconfig=kubeconfig), "api.reachable")
    assert found["detail"] == f"{sim.server.url} refused the credentials (GET /version): 401 Unauthorized"
    assert "aws sts get-caller-identity" in found["remedy"]


def test_a_credential_plugin_that_fails_is_named_instead_of_the_anonymous_users_403(sim, tmp_path, capsys):
    # GIVEN a kubeconfig as EKS writes it, whose aws eks get-token fails (no AWS credentials)
    aws = tmp_path / "aws"
    aws.write_text("#!/bin/sh\necho 'Unable to locate credentials. You can configure credentials by running \"aws configure\".' >&2\nexit 255\n")
    aws.chmod(0o755)
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "eks",
        "clusters": [{"name": "eks", "cluster": {"server": sim.server.url, "certificate-authority": sim.server.ca_file}}],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "eks"}}],
        "users": [{"name": "eks", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(aws),
                                                    "args": ["--region", "us-east-1", "eks", "get-token", "--cluster-name", "rlinf-multi-node"]}}}],
    }  # fmt: skip
    (tmp_path / "eks").write_text(yaml.safe_dump(config))
    capsys.readouterr()
    # WHEN verify reads the control plane THEN the plugin's own words, not system:anonymous's 403
    found = only_failure(*verify(sim, tmp_path, "multi-node", kubeconfig=tmp_path / "eks"), "api.identity")
    assert found["detail"] == (
        f"no credentials were sent to {sim.server.url}: the kubeconfig's exec credential plugin failed: exec: process returned 255. "
        'Unable to locate credentials. You can configure credentials by running "aws configure".'
    )
    assert "system:anonymous" not in found["detail"] and "aws sso login" in found["remedy"]
    assert "exec:" not in capsys.readouterr().err  # said once, in the table


def test_a_user_without_rights_is_403_and_the_rbac_the_dry_run_writes_lets_it_climb_every_level(sim, tmp_path, capsys):
    cluster(sim, "multi-node", 2)
    user = sim_cluster.service_account_kubeconfig(sim, "sim-users", "verifier", tmp_path / "user")
    found = only_failure(*verify(sim, tmp_path, "multi-node", kubeconfig=tmp_path / "user"), "api.identity")
    assert found["detail"].startswith(f"as {user}: {sim.server.url} forbids it (list customresourcedefinitions): 403 ")
    assert f'User "{user}" cannot list resource "customresourcedefinitions"' in found["detail"]
    assert "python -m rlinf_eks verify multi-node --dry-run" in found["remedy"]
    # an admin creates the verify namespace (once an earlier verify's is gone) and binds the dry
    # run's ClusterRole and Roles to the user
    until(f"namespace {VERIFY_NAMESPACE} gone", lambda: _gone(sim, f"/api/v1/namespaces/{VERIFY_NAMESPACE}"), timeout=60)
    sim.server.ensure_namespace(VERIFY_NAMESPACE, dict(NAMESPACE_LABELS))
    subject = [{"kind": "ServiceAccount", "name": "verifier", "namespace": "sim-users"}]
    cluster_role, *roles = rbac_objects(expect("multi-node"), VERIFY_NAMESPACE)
    for obj in (cluster_role, *roles):
        sim.server.create(obj)
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "subjects": subject}

    def bind(obj: dict[str, Any]) -> None:
        kind = "ClusterRoleBinding" if obj["kind"] == "ClusterRole" else "RoleBinding"
        sim.server.create({**binding, "kind": kind, "metadata": dict(obj["metadata"], labels={}),
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": obj["kind"], "name": obj["metadata"]["name"]}})  # fmt: skip

    # the ClusterRole alone reads levels 0-2; creating the smoke Jobs' objects is refused: one line, exit 1
    bind(cluster_role)
    capsys.readouterr()
    code, checks = verify(sim, tmp_path, "multi-node", kubeconfig=tmp_path / "user")
    assert code == 1 and {c["level"] for c in checks} == {0, 1, 2} and not failing(checks)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {sim.server.url} forbids it: 403 configmaps is forbidden: User \"{user}\" cannot create resource \"configmaps\"")
    assert line.endswith("--dry-run writes (or add the identity to cluster.adminRoleArns)")
    for role in roles:
        bind(role)
    code, checks = verify(sim, tmp_path, "multi-node", kubeconfig=tmp_path / "user")
    assert code == 0, failing(checks)
    assert {c["level"] for c in checks} == {0, 1, 2, 3, 4, 5}
    until("verify's Jobs and pods deleted", lambda: not leftovers(sim), timeout=30)


# --- Karpenter's fallback types ---------------------------------------------------------------------

KARPENTER_SETS = ("gpuNodes.provisioner=karpenter", "gpuNodes.fallbackInstanceTypes[0]=p5e.48xlarge")


def test_a_karpenter_stack_with_a_node_of_its_fallback_type_is_ready_and_that_node_is_judged_by_its_type(sim, tmp_path):
    plan = plan_stack("multi-node", *KARPENTER_SETS)
    e = expectation_of(plan.settings, "multi-node")
    sim.kubelet.job_outcome = job_outcome
    gpu = [of_type(e, 0, "p5.48xlarge"), of_type(e, 1, "p5e.48xlarge")]
    deploy(sim, e, list(manifests(plan).values()), gpu, [system_node(0), system_node(1)])
    sets = [word for s in KARPENTER_SETS for word in ("--set", s)]
    code, checks = verify(sim, tmp_path, "multi-node", *sets)
    assert code == 0, failing(checks)
    assert {c["level"] for c in checks} == {0, 1, 2, 3, 4, 5}
    assert next(c for c in checks if c["check"] == "gpu-nodes.instance-type")["detail"] == (
        "every GPU node of a type the NodePool allows: 1 p5.48xlarge, 1 p5e.48xlarge (fallback)"
    )
    assert next(c for c in checks if c["check"] == "crds.karpenter")["detail"].startswith("4 CRDs of the Karpenter controller Established")
    # the fallback node with less memory than a p5e.48xlarge has
    name = gpu[1]["metadata"]["name"]
    sim_cluster.patch_status(sim.server, f"/api/v1/nodes/{name}", {"capacity": {"memory": "1500Gi"}})
    found = only_failure(*verify(sim, tmp_path, "multi-node", *sets, "--level", "1"), "gpu-nodes.allocatable")
    assert found["detail"] == f"{name}: memory capacity 1500Gi (a p5e.48xlarge has at least 1939865Mi)"
    until("verify's Jobs and pods deleted", lambda: not leftovers(sim), timeout=30)
