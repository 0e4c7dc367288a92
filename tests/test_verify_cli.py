"""verify as a user runs it: the dry run's manifests (valid for the API server), the ladder that
stops at the first failing level and cleans up whatever ends it, the table and the JSON report,
and bad usage as one line with exit 2 or 1, never a traceback. A fake cluster stands in for the
client (tests/test_verify_checks.py builds its realistic API objects)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlinf_eks.__main__ import main
from rlinf_eks.verify import cli as verify_cli
from rlinf_eks.verify.client import PodOutcome
from rlinf_eks.verify.model import Observed
from rlinf_eks.verify.runner import Ladder, climb, dry_run_objects
from tests.harness import plan_stack
from tests.schemas import builtin_errors
from tests.test_verify_checks import cluster_state, expect, set_condition


@dataclass
class FakeCluster:
    """The client's surface, answering from a prepared Observed; Jobs end with ``exit_code``."""

    state: Observed
    exit_code: int | None = 0
    log: str = ""
    applied: list[dict] = field(default_factory=list)
    cleaned: bool = False
    interrupt_at: str = ""
    fail_at: int = -1
    insecure_warning: str = ""  # the kubeconfig's insecure-skip-tls-verify, said once (client.Cluster)

    def observe_control_plane(self) -> Observed:
        s = self.state
        return Observed(server_version=s.server_version, identity=s.identity, crds=s.crds)

    def observe(self, observed: Observed, level: int, namespaces: list[str]) -> Observed:
        if level == self.fail_at:
            raise ConnectionResetError("the API server went away")
        for name in ("nodes", "pods", "daemonsets", "deployments", "namespaces", "cluster_queues", "local_queues", "service_accounts", "claims", "priority_classes"):
            setattr(observed, name, getattr(self.state, name))
        return observed

    def ensure_namespace(self, name: str, labels: dict[str, str]) -> None:
        pass

    def apply(self, objects: list[dict]) -> None:
        if self.interrupt_at == "apply":
            raise KeyboardInterrupt
        self.applied += objects

    def wait(self, namespace, run_label, jobs, deadline, progress) -> list[PodOutcome]:
        progress("0/1 Jobs finished (0s)")
        return [PodOutcome(job, 0, "", self.exit_code, self.log) for job in jobs]

    def clean_up(self) -> list[str]:
        self.cleaned = True
        return []


def ladder(stack: str) -> Ladder:
    settings = plan_stack(stack).settings
    return Ladder(settings, stack, expect(stack), "t0st01")


ALL_REDUCE_OK = """#  Using devices
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  8589934592    2147483648     float     sum      -1    48000  178.96  335.55      0    48100  178.59  334.85      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 335.2
ip-10-0-1-1:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
ip-10-0-1-1:1:1 [0] NCCL INFO Using network AWS Libfabric
"""


def test_the_dry_run_writes_one_valid_smoke_job_per_gpu_node_the_all_reduce_job_and_the_rbac(tmp_path, capsys):
    assert main(["verify", "multi-node", "--dry-run", "--out", str(tmp_path)]) == 0
    files = sorted((tmp_path / "manifests").glob("*.yaml"))
    objects = [yaml.safe_load(f.read_text()) for f in files]
    kinds = [o["kind"] for o in objects]
    smoke_jobs = [o for o in objects if o["kind"] == "Job" and "-smoke-" in o["metadata"]["name"]]
    fabric_jobs = [o for o in objects if o["kind"] == "Job" and "-fabric-" in o["metadata"]["name"]]
    assert len(smoke_jobs) == plan_stack("multi-node").settings.gpu_nodes.node_count == 2 and len(fabric_jobs) == 1
    assert {"ClusterRole", "Role", "Namespace"} <= set(kinds)
    for obj in objects:
        assert builtin_errors(obj, "1.35") == [], (obj["kind"], obj["metadata"]["name"])
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "rlinf-eks-verify"
    assert "wrote 11 manifests" in capsys.readouterr().out


def test_a_healthy_cluster_climbs_every_level_and_is_ready():
    fake = FakeCluster(cluster_state("multi-node"), log=ALL_REDUCE_OK)
    results = climb(ladder("multi-node"), fake)
    assert {r.level for r in results} == {0, 1, 2, 3, 4, 5}
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    assert any(o["kind"] == "Job" and "-smoke-" in o["metadata"]["name"] for o in fake.applied)


def test_the_climb_stops_at_the_first_failing_level_unless_told_to_keep_going():
    state = cluster_state("multi-node")
    set_condition(state.nodes[0], "Ready", "False", "KubeletNotReady", "container runtime network not ready")
    results = climb(ladder("multi-node"), FakeCluster(state, log=ALL_REDUCE_OK))
    assert max(r.level for r in results) == 1 and not all(r.ok for r in results)
    everything = climb(ladder("multi-node"), FakeCluster(cluster_state("multi-node"), exit_code=93, log="rlinf-eks image-check: FAILED: ray"), keep_going=True)
    assert {r.level for r in everything} == {0, 1, 2, 3, 4, 5}
    assert any(r.level == 3 and not r.ok and "image" in (r.detail + r.remedy).lower() for r in everything)


def _kubeconfig(tmp_path: Path, cluster: str) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                                                  "args": ["--region", "us-east-1", "eks", "get-token", "--cluster-name", cluster]}}}],
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_kubeconfig_for_another_cluster_is_one_line_and_exit_1(tmp_path, capsys):
    path = _kubeconfig(tmp_path, "someone-elses")
    assert main(["verify", "single-node", "--kubeconfig", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: the kubeconfig is for EKS cluster someone-elses, stack single-node's is rlinf-single-node: pass --kubeconfig or --context"]


def test_an_unknown_stack_is_exit_2_and_no_cluster_is_exit_1(tmp_path, capsys, monkeypatch):
    assert main(["verify", "no-such-stack"]) == 2
    assert "unknown stack 'no-such-stack'" in capsys.readouterr().err
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert main(["verify", "single-node"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: no cluster to verify:") and "Traceback" not in line


def test_whatever_ends_a_climb_the_objects_are_deleted_and_the_report_written(tmp_path, capsys, monkeypatch):
    fake = FakeCluster(cluster_state("multi-node"), interrupt_at="apply")
    monkeypatch.setattr("rlinf_eks.verify.client.Cluster", lambda path, context: fake)
    monkeypatch.setattr(verify_cli, "kubeconfig_cluster", lambda path, context: None)
    report = tmp_path / "report.json"
    assert main(["verify", "multi-node", "--kubeconfig", "x", "--json", str(report)]) == 130
    assert fake.cleaned
    out = capsys.readouterr().out
    assert "multi-node: interrupted" in out
    data = json.loads(report.read_text())
    assert data["ready"] is False and data["notDeleted"] == []


def test_a_ready_climb_prints_the_table_and_exits_0(tmp_path, capsys, monkeypatch):
    fake = FakeCluster(cluster_state("multi-node"), log=ALL_REDUCE_OK)
    monkeypatch.setattr("rlinf_eks.verify.client.Cluster", lambda path, context: fake)
    monkeypatch.setattr(verify_cli, "kubeconfig_cluster", lambda path, context: None)
    assert main(["verify", "multi-node", "--kubeconfig", "x", "--level", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["L", "check", "result", "time"]
    assert "multi-node: ready (levels 0-2 of 0-2)" in out and fake.cleaned


def test_the_dry_run_objects_of_every_workload_stack_are_valid():
    for stack in ("single-node", "vllm-rollout", "autoscaled"):
        for obj in dry_run_objects(ladder(stack)):
            assert builtin_errors(obj, "1.35") == [], (stack, obj["kind"], obj["metadata"]["name"])


@pytest.fixture(autouse=True)
def _no_pulumi(monkeypatch):
    """verify asks the Pulumi CLI for the stack's kubeconfig when none is given: not here."""
    monkeypatch.setattr(verify_cli, "_stack_kubeconfig", lambda stack: None)


def test_an_api_error_mid_climb_is_one_line_with_what_was_found_and_everything_deleted(tmp_path, capsys, monkeypatch):
    fake = FakeCluster(cluster_state("multi-node"), fail_at=2)
    monkeypatch.setattr("rlinf_eks.verify.client.Cluster", lambda path, context: fake)
    monkeypatch.setattr(verify_cli, "kubeconfig_cluster", lambda path, context: None)
    report = tmp_path / "r.json"
    assert main(["verify", "multi-node", "--kubeconfig", "x", "--json", str(report)]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == ["error: the cluster stopped answering: ConnectionResetError: the API server went away"]
    assert "Traceback" not in captured.err and fake.cleaned
    assert {c["level"] for c in json.loads(report.read_text())["checks"]} == {0, 1}  # what L0 and L1 found is kept
    assert "multi-node: NOT READY (levels 0-1 of 0-5)" in captured.out


def test_a_platform_has_no_run_to_smoke_so_levels_3_and_4_say_so():
    results = climb(ladder("platform"), FakeCluster(cluster_state("platform")), keep_going=True)
    three_four = [r for r in results if r.level in (3, 4)]
    assert three_four and all(r.outcome == "skip" and "verify an experiment stack" in r.detail for r in three_four)


def test_a_platforms_dry_run_writes_no_job_since_its_climb_creates_none(tmp_path):
    # GIVEN a platform (no training image, no run) WHEN verify --dry-run renders what a climb creates
    assert main(["verify", "platform", "--dry-run", "--out", str(tmp_path)]) == 0
    kinds = sorted(yaml.safe_load(p.read_text())["kind"] for p in (tmp_path / "manifests").iterdir())
    # THEN the namespace and the RBAC, and no smoke or all-reduce Job (levels 3 and 4 are skipped;
    # their Jobs had an empty image, which the API server refuses)
    assert "Job" not in kinds and "ConfigMap" not in kinds and "Namespace" in kinds and "ClusterRole" in kinds


def test_a_second_dry_run_rewrites_the_same_files(tmp_path, capsys):
    assert main(["verify", "single-node", "--dry-run", "--out", str(tmp_path)]) == 0
    first = sorted(p.name for p in (tmp_path / "manifests").iterdir())
    assert main(["verify", "single-node", "--dry-run", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == first
