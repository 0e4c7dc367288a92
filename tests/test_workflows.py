"""The GitHub workflows stay hardened: zizmor's security audit finds nothing, and each file is a
valid workflow by SchemaStore's github-workflow schema.

preview.yml holds AWS credentials (OIDC) and a write token for the pull request, so an action
moved under a tag, a template expanded into a script, or a token left in .git/config would run
someone else's code with them. zizmor (a test dependency) runs offline, at its pedantic persona,
with its JSON output; check-jsonschema (a test dependency) carries the schema as
``vendor.github-workflows``. Both are required: a missing one fails the test, never skips it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harness import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])

# owner/repo[/path]@<full commit SHA> # vX.Y.Z: the SHA is what runs, the comment is for people
# (and for Dependabot, which updates both together).
PINNED_USES = re.compile(r"^(?P<action>[\w.-]+/[\w.-]+(?:/[\w./-]+)?)@(?P<sha>[0-9a-f]{40}) # (?P<version>v\d+\.\d+\.\d+)$")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>.+?)\s*$", re.M)


def zizmor_command() -> list[str]:
    """zizmor from ``$ZIZMOR``, beside this interpreter (the project's .venv), or on PATH."""
    if os.environ.get("ZIZMOR"):
        if not shutil.which(os.environ["ZIZMOR"]):
            pytest.fail(f"ZIZMOR={os.environ['ZIZMOR']!r} is not an executable")
        return [os.environ["ZIZMOR"]]
    beside = Path(sys.executable).parent / "zizmor"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("zizmor")
    if found:
        return [found]
    pytest.fail("zizmor is not installed, and it is a test dependency: .venv/bin/pip install -e '.[test]'")


def run_zizmor(*inputs: Path) -> list[dict]:
    """zizmor's findings (JSON v1) over ``inputs``, offline and at the pedantic persona (the
    regular audits plus code smells). Ignore rules in a zizmor config file, each with its reason,
    are honoured."""
    result = subprocess.run(
        [*zizmor_command(), "--offline", "--persona=pedantic", "--format=json-v1", "--no-exit-codes", "--no-progress", *map(str, inputs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"zizmor failed (exit {result.returncode}):\n{result.stderr}"
    return json.loads(result.stdout)


def describe_finding(finding: dict) -> str:
    primary = next(loc for loc in finding["locations"] if loc["symbolic"]["kind"] == "Primary")
    path = primary["symbolic"]["key"]["Local"]["verbatim_path"]
    line = primary["concrete"]["location"]["start_point"]["row"] + 1
    source = Path(path).read_text().splitlines()[line - 1].strip()
    level = finding["determinations"]
    return (
        f"{path}:{line}: {finding['ident']} ({level['severity']}, confidence {level['confidence']}): "
        f"{finding['desc']}: {primary['symbolic']['annotation']}\n    {source}\n    see {finding['url']}"
    )


def run_schema_check(*files: Path) -> dict:
    """check-jsonschema's JSON report for ``files`` against its vendored github-workflow schema
    (it parses YAML 1.2, so a top-level ``on:`` stays a key, not the boolean PyYAML makes it)."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", "--output-format", "json", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "No module named check_jsonschema" in result.stderr:
        pytest.fail("check-jsonschema is not installed, and it is a test dependency: .venv/bin/pip install -e '.[test]'")
    assert result.returncode in (0, 1), f"check-jsonschema failed (exit {result.returncode}):\n{result.stderr}"
    return json.loads(result.stdout)


def describe_schema_error(error: dict) -> str:
    deepest = error.get("best_deep_match") or error.get("best_match") or error
    return f"{error['filename']}: {deepest['path']}: {deepest['message']}"


def uses_refs(text: str) -> list[str]:
    """Every ``uses:`` value of a workflow's text, with its trailing comment (which YAML drops)."""
    return [match["ref"] for match in USES_LINE.finditer(text)]


def load_workflow(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_there_are_workflows_to_check():
    assert {p.name for p in WORKFLOW_FILES} >= {"ci.yml", "preview.yml"}


def test_zizmor_finds_nothing_in_the_workflows():
    findings = run_zizmor(*WORKFLOW_FILES)
    assert not findings, f"zizmor reports {len(findings)} finding(s):\n" + "\n".join(map(describe_finding, findings))


def test_zizmor_reports_the_weaknesses_this_gate_exists_for(tmp_path):
    # The audit really runs and its JSON is read: the weaknesses preview.yml used to have are found.
    workflow = tmp_path / ".github" / "workflows" / "weak.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(
        "on: pull_request\n"
        "permissions:\n  contents: read\n  id-token: write\n"
        "jobs:\n  weak:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        '      - run: echo "${{ github.head_ref }}"\n'
    )
    found = {finding["ident"] for finding in run_zizmor(workflow)}
    assert {"unpinned-uses", "artipacked", "excessive-permissions", "template-injection"} <= found, found


def test_workflows_are_valid_by_the_github_workflow_schema():
    report = run_schema_check(*WORKFLOW_FILES)
    problems = [describe_schema_error(e) for e in report["errors"]] + [str(e) for e in report.get("parse_errors", [])]
    assert report["status"] == "ok" and not problems, "\n".join(problems)


def test_the_schema_check_rejects_an_invalid_workflow(tmp_path):
    workflow = tmp_path / "typo.yml"
    workflow.write_text("on: push\njobs:\n  test:\n    runs_on: ubuntu-latest\n    steps: [{run: 'true'}]\n")
    report = run_schema_check(workflow)
    assert report["status"] == "fail"
    assert any("runs_on" in describe_schema_error(e) or "runs-on" in describe_schema_error(e) for e in report["errors"]), report


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_version(path):
    refs = [ref for ref in uses_refs(path.read_text()) if not ref.startswith(("./", "docker://"))]
    assert refs, f"{path.name} uses no action: the pattern no longer matches its steps"
    loose = [ref for ref in refs if not PINNED_USES.match(ref)]
    assert not loose, f"{path.name}: pin each action as owner/repo@<40-hex commit SHA> # vX.Y.Z, not: {loose}"


def test_one_pin_per_action_across_the_workflows():
    pins: dict[str, set[tuple[str, str]]] = {}
    for path in WORKFLOW_FILES:
        for ref in uses_refs(path.read_text()):
            if match := PINNED_USES.match(ref):
                pins.setdefault(match["action"], set()).add((match["sha"], match["version"]))
    drifted = {action: sorted(found) for action, found in pins.items() if len(found) > 1}
    assert not drifted, f"an action pinned to different commits in different places: {drifted}"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_scripts_take_values_through_env_not_templates(path):
    # Stricter than zizmor's template-injection audit (attacker-controllable contexts only):
    # an expression expanded into a script is pasted in as code, whatever its source.
    templated = [
        f"{job_id}: {step.get('name') or step.get('id') or step['run'].splitlines()[0]}"
        for job_id, job in load_workflow(path)["jobs"].items()
        for step in job.get("steps", [])
        if "run" in step and "${{" in step["run"]
    ]
    assert not templated, f"{path.name}: pass these values through the step's env: {templated}"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_scripts_are_valid_bash(path):
    # GitHub runs a ubuntu step's `run:` as `bash -e {0}` (no `shell:` is set here).
    for job_id, job in load_workflow(path)["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step:
                result = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True, timeout=30)
                assert result.returncode == 0, f"{path.name}: job {job_id}, step {step.get('name') or step.get('id')}: {result.stderr}"


def test_only_the_job_assuming_the_aws_role_can_mint_an_oidc_token():
    for path in WORKFLOW_FILES:
        workflow = load_workflow(path)
        top = workflow.get("permissions") or {}
        assert top in ({}, "read-all") or all(v in ("read", "none") for v in top.values()), (
            f"{path.name}: workflow-level permissions {top!r} grant a write to every job; grant it on the job that needs it"
        )
        for job_id, job in workflow["jobs"].items():
            assumes_role = any(str(s.get("uses", "")).startswith("aws-actions/configure-aws-credentials@") for s in job.get("steps", []))
            mints = (job.get("permissions") or {}).get("id-token") == "write"
            assert mints == assumes_role, f"{path.name}: job {job_id}: id-token: write {'without' if mints else 'missing for'} the AWS role"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_checkouts_do_not_persist_the_token(path):
    checkouts = [
        step
        for job in load_workflow(path)["jobs"].values()
        for step in job.get("steps", [])
        if str(step.get("uses", "")).startswith("actions/checkout@")
    ]
    assert checkouts
    assert all((step.get("with") or {}).get("persist-credentials") is False for step in checkouts), checkouts
