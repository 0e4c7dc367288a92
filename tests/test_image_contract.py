"""The image contract cannot drift from the scripts: every command and absolute path that a rendered
script of any stack uses is in the contract of the training image (rlinf_eks.workload.image_contract),
in the image the project names for that script's container (preflight, sync, watchdog), mounted by
the pod, or a system path; and every tool the contract names is used by some script."""

from __future__ import annotations

import posixpath
import subprocess

import pytest

from rlinf_eks.workload.image_contract import (
    DEVICE_PATHS,
    EFA_TOOLS,
    OTHER_IMAGES,
    SYSTEM_PATHS,
    TRAINING_IMAGE_TOOLS,
    ImageContract,
    contract_for,
)
from rlinf_eks.offline.outputs.plan import settings_of
from rlinf_eks.offline.engine.stack_config import load
from rlinf_eks.workload import launch_scripts
from rlinf_eks.workload.run import resolve_run
from tests.harness import ROOT, STACKS, plan_stack
from tests.shell_words import BUILTINS, absolute_paths, command_words, defined_functions
from tests.test_shellcheck import rendered_scripts

# stage-model.sh runs in the training image (hf) or the AWS CLI image (s3): each branch's download
# command is only called in its own image.
STAGING_ONLY = {"hf": {"aws"}, "s3": {"python3"}}
BACKOFF_COMMAND = "bash-c-0"


def _under(path: str, roots: set[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _image_of(script: str, contract: ImageContract, staging_kind: str | None):
    """(what, tools, paths) of the image that runs ``script`` in this stack."""
    for other in OTHER_IMAGES:
        if script in other.scripts and not (script == "stage-model.sh" and staging_kind == "hf"):
            return other.what, set(other.tools), set(other.paths)
    return f"the training image ({contract.dialect})", set(contract.tools), set(contract.paths())


# No stack stages from S3: this variant renders stage-model.sh for the AWS CLI image too.
S3_VARIANT = ("single-node", "s3-staging", "workload.model.source=s3://rlinf-models-example/openvla-oft")


def _s3_run():
    stack, _, setting = S3_VARIANT
    return resolve_run(settings_of(load(ROOT, stack, [setting])), stack)


@pytest.fixture(scope="module")
def stack_scripts() -> dict[str, tuple[str, str]]:
    found = rendered_scripts()
    for name, text in launch_scripts(_s3_run()).items():
        found[f"{S3_VARIANT[1]}/rlinf-launch/{name}"] = ("bash" if text.startswith("#!/bin/bash\n") else "sh", text)
    return found


@pytest.fixture(scope="module")
def contracts() -> dict[str, tuple[ImageContract, str | None]]:
    found = {}
    for stack in STACKS:
        run = resolve_run(plan_stack(stack).settings, stack)
        found[stack] = (contract_for(run), "hf" if run.staging and "hf" in run.staging.kinds else ("s3" if run.staging else None))
    run = _s3_run()
    assert run.staging is not None and "s3" in run.staging.kinds
    found[S3_VARIANT[1]] = (contract_for(run), "s3")
    return found


def drift(stack_scripts, contracts) -> list[str]:
    problems = []
    for key, (_, text) in sorted(stack_scripts.items()):
        stack, resource, script = key.split("/")
        contract, kind = contracts[stack]
        what, tools, paths = _image_of(script, contract, kind)
        commands = command_words(text) - defined_functions(text) - BUILTINS
        if script == "stage-model.sh" and kind:
            commands -= STAGING_ONLY["hf" if what.startswith("the training image") else "s3"]
        for command in sorted(commands):
            if command.startswith("/"):
                if not _under(command, paths):
                    problems.append(f"{key}: runs {command}, which {what} is not said to carry")
            elif command not in tools:
                problems.append(f"{key}: calls {command!r}, which is not in the contract of {what}")
        allowed = paths | set(contract.mounts) | set(SYSTEM_PATHS) | set(DEVICE_PATHS)
        for path in sorted(absolute_paths(text)):
            if not _under(path, allowed):
                problems.append(f"{key}: uses the path {path}, which is neither in {what} nor mounted by the pod")
    return problems


def test_every_command_and_path_of_every_rendered_script_is_in_the_image_contract(stack_scripts, contracts):
    assert len(stack_scripts) > len(STACKS) * 5
    assert any(key.endswith("/image-check.sh") for key in stack_scripts)
    # the restart backoff is the only `bash -c` command (in the training image); a new one must say
    # which image runs it
    assert {key.rsplit("/", 1)[1] for key in stack_scripts if "/bash-c-" in key} == {BACKOFF_COMMAND}
    problems = drift(stack_scripts, contracts)
    assert not problems, "the scripts use what the image contract does not name:\n" + "\n".join(problems)


def test_every_tool_the_contract_names_is_used_by_a_script(stack_scripts, contracts):
    used: set[str] = set()
    other_used: dict[str, set[str]] = {o.what: set() for o in OTHER_IMAGES}
    for key, (_, text) in stack_scripts.items():
        stack, _, script = key.split("/")
        contract, kind = contracts[stack]
        what, _, _ = _image_of(script, contract, kind)
        words = command_words(text) | {"bash"}  # each script runs under bash
        (other_used[what] if what in other_used else used).update(words)
    stale = set(TRAINING_IMAGE_TOOLS + EFA_TOOLS) - used
    assert not stale, f"the contract names tools no script uses: {sorted(stale)}"
    for other in OTHER_IMAGES:
        unused = set(other.tools) - other_used[other.what]
        assert not unused, f"{other.what}: tools no script uses: {sorted(unused)}"


def test_the_drift_check_is_live(stack_scripts, contracts):
    # a new tool, or a path the image does not carry, in a training-image script is caught
    key = next(k for k in stack_scripts if k.startswith("multi-node/") and k.endswith("/launch.sh"))
    shell, text = stack_scripts[key]
    broken = {key: (shell, text + '\njq . "${RUN_DIR}/x.json" >/dev/null\ncat /opt/rlinf/extra.txt\n')}
    problems = drift(broken, contracts)
    assert any("calls 'jq'" in p for p in problems), problems
    assert any("/opt/rlinf/extra.txt" in p for p in problems), problems


def test_the_lexer_reads_commands_through_substitutions_pipes_and_wrappers():
    text = (
        'x=$(timeout -k 2 "${T}" fi_info -p efa 2>/dev/null | grep -c "d:")\n'
        'flags=(--num-gpus=1 -x A)\n[ "$(cat "${f}" 2>/dev/null)" = "${t}" ] && exec python3 - <<\'PY\'\nimport os\nPY\n'
        "case \"${a}\" in ''|*[!0-9]*) a=0 ;; esac\nfor d in ${DIRS}; do ls \"${d}\"; done\n"
        '${WRAP:-command} awk 1 /etc/x # not a command: mv\n'
    )
    assert command_words(text) - BUILTINS == {"timeout", "fi_info", "grep", "cat", "python3", "ls", "awk"}
    assert absolute_paths(text) == {"/dev/null", "/etc/x"}


def test_each_dialect_names_its_entry_script_and_config_dir_as_its_command_line_uses_them(contracts):
    # of the stacks with EFA (quickstart's one node has none: its contract is the EFA-off one below)
    by_dialect = {c.dialect: c for c, _ in contracts.values() if c.efa}
    assert by_dialect["verl-ppo"].entry_script == "/workspace/verl/trainer/main_ppo.py"
    assert by_dialect["verl-ppo"].config_dir == "/workspace/verl/trainer/config"
    assert by_dialect["rlinf-embodied"].entry_script == "/workspace/examples/embodiment/train_embodied_agent.py"
    assert by_dialect["rlinf-embodied"].config_dir == "/workspace/examples/embodiment/config"
    assert by_dialect["rlinf-reasoning"].config_dir == "/workspace/examples/reasoning/config/math"
    for contract in by_dialect.values():
        assert contract.ray_version == "2.49.2" and contract.efa
        assert posixpath.isabs(contract.entry_script)
    off = contract_for(resolve_run(plan_stack("multi-node", "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true").settings, "multi-node"))
    assert not off.efa and "fi_info" not in off.tools and not off.plugin_dirs


@pytest.mark.parametrize("stack", ["single-node", "multi-node-kuberay"])
def test_the_cli_prints_the_contract_of_a_stack(stack, cli_python):
    done = subprocess.run(
        [cli_python, "-m", "rlinf_eks", "image-contract", stack, "--set", "workload.rayVersion=2.47.1"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ray: exactly 2.47.1 (workload.rayVersion)" in done.stdout
    assert "entry script: /workspace/" in done.stdout and "fi_info -p efa" in done.stdout
    bad = subprocess.run([cli_python, "-m", "rlinf_eks", "image-contract", "nope"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "error: stack nope" in bad.stderr
