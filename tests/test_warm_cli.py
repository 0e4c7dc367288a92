"""The documentation's warm ``python -m rlinf_eks`` (tests/warm_cli.py) is the command itself: for
the same command line it prints the same, writes the same files and exits with the same status as a
fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import warm_cli
from tests.harness import ROOT


@pytest.fixture(scope="module")
def shims(tmp_path_factory) -> Path:
    session = os.environ.get(warm_cli.SESSION_ENV)
    if not session or not os.path.isdir(session):
        pytest.fail("no warm server in this session: tests/conftest.py starts one in the session's controller")
    return warm_cli.bin_dir(tmp_path_factory.mktemp("shims"), warm_cli.socket_of(Path(session)))


def _both(shims: Path, command: str, cwd: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    def run(first: Path, out: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": f"{first}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        return subprocess.run(["bash", "-c", command.format(out=out)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)

    return run(Path(sys.executable).parent, "cold"), run(shims, "warm")


def _project(into: Path) -> Path:
    into.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", into / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", into / "stacks")
    return into


def test_a_plan_through_the_warm_server_is_the_plan_a_fresh_interpreter_makes(shims, tmp_path):
    project = _project(tmp_path / "project")
    cold, warm = _both(shims, "python -m rlinf_eks plan multi-node --out build/{out} --set workload.runName=same | sed s/{out}/OUT/g", project)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert cold.returncode == 0, cold.stderr
    files = sorted(p.relative_to(project / "build" / "cold") for p in (project / "build" / "cold").rglob("*") if p.is_file())
    assert len(files) > 10
    assert files == sorted(p.relative_to(project / "build" / "warm") for p in (project / "build" / "warm").rglob("*") if p.is_file())
    for name in files:
        assert (project / "build" / "warm" / name).read_bytes() == (project / "build" / "cold" / name).read_bytes(), name


@pytest.mark.parametrize("command", [
    "python -m rlinf_eks plan single-node --set gpuNodes.nodeCount=0",  # bad input: one line, exit 2
    "python -m rlinf_eks --help",  # argparse's own exit
    "echo ok | python -m rlinf_eks image-contract single-node --set workload.image= | head -3",  # stdin, a closed pipe
])  # fmt: skip
def test_bad_input_help_and_pipes_through_the_warm_server_are_as_from_a_fresh_interpreter(shims, tmp_path, command):
    cold, warm = _both(shims, command, tmp_path)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)



def test_the_server_runs_only_the_modules_a_plan_runs(shims, tmp_path):
    """Its start-up is the plan's imports, no more: a package the SDKs hand out lazily that the plan
    never used stays unrun (running pulumi_aws's 270 such packages cost 6 CPU-s a session). Read
    from the session's own server, which records both once it has imported."""
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", "python -m rlinf_eks --help"], cwd=tmp_path, env=env, capture_output=True, timeout=120, check=True)  # the server imports on its first request
    record = json.loads((Path(os.environ[warm_cli.SESSION_ENV]) / warm_cli.MODULES_FILE).read_text())
    plan, server = dict(record["plan"]), dict(record["server"])
    assert len(plan) > 500  # the plan's modules
    # each as far as the plan took it: [server's, plan's] (the server's own modules aside: its socket, select, ...)
    differ = {n: [server.get(n), plan.get(n)] for n in {*server, *plan} - {"__main__"} if n in plan and server.get(n) != plan.get(n)}
    assert differ == {}
    ran = sorted(n for n, state in server.items() if state == warm_cli.RAN and n not in plan)
    assert len(ran) < 20, ran  # only the server's own few
