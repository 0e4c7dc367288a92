"""Security of what is rendered: checkov's Kubernetes checks over every stack's manifests/, with
the skips listed (each with its reason) in policy/checkov-skips.yaml.

checkov runs as one subprocess over all stacks (about 4 s on the 2-core machine), found as
``$CHECKOV``, ``.venv-checkov/bin/checkov`` (the README's test command installs it there: checkov
pins ``packaging`` to an old release, which would hold Pulumi's SDK back in the project's own
venv), ``checkov`` on PATH, or the ``checkov`` package of this interpreter. Without it the test
skips, except under CI, where it fails.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harness import ROOT, STACKS, plan_stack

SKIPS_FILE = ROOT / "policy" / "checkov-skips.yaml"


def checkov_command() -> list[str] | None:
    if os.environ.get("CHECKOV"):
        return [os.environ["CHECKOV"]]
    tool_venv = ROOT / ".venv-checkov" / "bin" / "checkov"
    if tool_venv.exists():
        return [str(tool_venv)]
    found = shutil.which("checkov")
    if found:
        return [found]
    if importlib.util.find_spec("checkov") is not None:
        return [sys.executable, "-m", "checkov.main"]
    return None


def load_skips() -> list[dict]:
    return (yaml.safe_load(SKIPS_FILE.read_text()) or {}).get("skips") or []


def skipped(failure: dict, skips: list[dict]) -> dict | None:
    for skip in skips:
        if failure["check_id"] == skip["check"] and any(fnmatch.fnmatchcase(failure["resource"], p) for p in skip["objects"]):
            return skip
    return None


def run_checkov(folder: Path) -> list[dict]:
    """checkov's failed checks over every YAML file below ``folder`` (offline: --skip-download)."""
    command = checkov_command()
    if command is None:
        if os.environ.get("CI"):
            pytest.fail("checkov is not installed: python3 -m venv .venv-checkov && .venv-checkov/bin/pip install 'checkov>=3.2,<4'")
        pytest.skip("checkov is not installed (python3 -m venv .venv-checkov && .venv-checkov/bin/pip install 'checkov>=3.2,<4'); CI runs this test")
    result = subprocess.run(
        [*command, "-d", str(folder), "--framework", "kubernetes", "--skip-download", "-o", "json"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    assert result.returncode in (0, 1), f"checkov failed to run ({result.returncode}):\n{result.stderr[-3000:]}"
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    parsing_errors = [e for r in reports for e in r.get("results", {}).get("parsing_errors", [])]
    assert not parsing_errors, f"checkov could not parse {parsing_errors}"
    return [
        {"check_id": f["check_id"], "check_name": f["check_name"], "resource": f["resource"], "file": f["file_path"]}
        for report in reports
        for f in report.get("results", {}).get("failed_checks", [])
    ]


_CUSTOM_RESOURCE_KINDS = ("RayCluster", "RayJob", "RayService", "JobSet")


def pods_of_custom_resources(manifests: dict[str, dict]) -> dict[str, dict]:
    """checkov checks only the kinds it knows: the pod templates inside KubeRay's custom resources
    and JobSets are written out as Pods (named <resource>-<role>) so their containers are checked too."""
    from rlinf_eks.plan_reader import pod_templates

    pods: dict[str, dict] = {}
    for obj in manifests.values():
        if obj.get("kind") not in _CUSTOM_RESOURCE_KINDS:
            continue
        meta = obj.get("metadata") or {}
        for template in pod_templates(obj):
            path, spec = template.path, template.spec
            role = ("head" if "headGroupSpec" in path else "submitter" if "submitter" in path
                    else template.role if obj["kind"] == "JobSet"
                    else "worker-" + path.split("workerGroupSpecs[")[1].split("]")[0])
            name = f"{meta['name']}-{role}"
            pods[f"pod-{meta.get('namespace', 'cluster')}-{name}.yaml".lower()] = {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": meta.get("namespace")}, "spec": spec,
            }
    return pods


@pytest.fixture(scope="module")
def stack_manifests(tmp_path_factory) -> tuple[Path, list[str], dict[str, list[str]]]:
    """Every stack's manifests/ (as the offline plan writes them) under one folder, one sub-folder per
    stack, each distinct file once: a manifest that several stacks render alike (about half of them)
    is scanned in the first stack's folder, and ``stacks_of`` names every stack that has it."""
    import hashlib

    from rlinf_eks.offline.outputs.plan import write

    root = tmp_path_factory.mktemp("manifests")
    planned, first_of, stacks_of = [], {}, {}
    for stack in STACKS:
        plan = plan_stack(stack)
        write(plan, root / stack)
        extracted = root / stack / "custom-resource-pods"
        extracted.mkdir()
        for file_name, pod in pods_of_custom_resources(plan.manifests()).items():
            (extracted / file_name).write_text(yaml.safe_dump(pod, sort_keys=True))
        for path in sorted((root / stack).rglob("*.yaml")):
            digest = hashlib.sha256(path.name.encode() + b"\0" + path.read_bytes()).hexdigest()
            kept = first_of.setdefault(digest, str(path))
            stacks_of.setdefault(kept, []).append(stack)
            if kept != str(path):
                path.unlink()
        planned.append(stack)
    if not planned:
        pytest.skip("no stack can plan yet")
    return root, planned, stacks_of


def _stacks_of(reported: str, stacks_of: dict[str, list[str]]) -> list[str]:
    """The stacks that render the file checkov reported (a path relative to the folder it scanned)."""
    found = [stacks for path, stacks in stacks_of.items() if path.endswith(reported.lstrip("/"))]
    return found[0] if found else [Path(reported).parts[1] if len(Path(reported).parts) > 1 else reported]


def test_the_skip_list_gives_a_check_objects_and_reason_for_every_skip():
    for skip in load_skips():
        assert set(skip) == {"check", "objects", "reason"}, skip
        assert skip["check"].startswith("CKV"), skip
        assert skip["objects"] and all(isinstance(p, str) for p in skip["objects"]), skip
        assert len(skip["reason"].split()) >= 5, f"{skip['check']}: say why"


CANARY = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "canary", "namespace": "canary"},
          "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]}}


@pytest.fixture(scope="module")
def checkov_failures(stack_manifests) -> list[dict]:
    """One checkov run over every stack's manifests plus a canary Pod that must fail."""
    root, _, _ = stack_manifests
    (root / "canary").mkdir(exist_ok=True)
    (root / "canary" / "pod-canary-canary.yaml").write_text(yaml.safe_dump(CANARY))
    return run_checkov(root)


def test_given_a_privileged_pod_then_checkov_reports_it(checkov_failures):
    """The stacks' test below can fail: checkov does flag a bad manifest in the same run."""
    assert {"CKV_K8S_16", "CKV_K8S_20"} <= {f["check_id"] for f in checkov_failures if f["resource"] == "Pod.canary.canary"}


def test_given_a_rayjob_then_its_pod_templates_are_extracted_as_pods():
    worker = {"containers": [{"name": "w", "image": "i"}]}
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job", "namespace": "ns"},
              "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": worker}}, "workerGroupSpecs": [{"template": {"spec": worker}}]}}}
    pods = pods_of_custom_resources({"rayjob-ns-job.yaml": rayjob})
    assert sorted(pods) == ["pod-ns-job-head.yaml", "pod-ns-job-worker-0.yaml"]
    assert pods["pod-ns-job-worker-0.yaml"]["spec"] == worker


def test_given_every_stack_when_rendered_then_checkov_fails_nothing_outside_the_skip_list(stack_manifests, checkov_failures):
    _, planned, stacks_of = stack_manifests
    skips = load_skips()
    failures = [f for f in checkov_failures if not f["resource"].startswith("Pod.canary.")]
    unexpected = [f for f in failures if not skipped(f, skips)]
    assert not unexpected, "checkov failures not in policy/checkov-skips.yaml:\n" + "\n".join(
        f"  {f['check_id']} {f['resource']} ({', '.join(_stacks_of(f['file'], stacks_of))}): {f['check_name']}" for f in unexpected
    )
    if planned == STACKS:
        used = {id(skipped(f, skips)) for f in failures}
        stale = [s["check"] for s in skips if id(s) not in used]
        assert not stale, f"skips no stack needs any more (remove them from policy/checkov-skips.yaml): {stale}"
