"""The image check, run for real: the rendered image-check.sh against fake image roots (a healthy
image, a missing fi_info, a wrong Ray version, a missing entry script, ...), each failing at once
with IMAGE_BROKEN and its own one-line message; and the failure rules that stop on it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from rlinf_eks.offline.outputs.plan import settings_of
from rlinf_eks.offline.engine.stack_config import load
from rlinf_eks.workload import exit_codes, manual
from rlinf_eks.workload.image_check import image_check_script
from rlinf_eks.workload.image_contract import contract_for
from rlinf_eks.workload.run import resolve_run
from tests.harness import ROOT, manifests, plan_stack


def contract(stack: str = "multi-node", *sets: str):
    return contract_for(resolve_run(settings_of(load(ROOT, stack, list(sets))), stack))


def fake_image(
    tmp_path: Path, c, *, ray: str = "2.49.2", fi_info: bool = True, plugin: bool = True, entry: bool = True, ray_cli: bool = True,
    missing: tuple[str, ...] = (),
):
    """A fake image root below tmp_path/root and the PATH of its tools (the host's coreutils and
    bash); its python3 lacks the modules ``missing``, as CPython says it."""
    root = tmp_path / "root"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lacks = "".join(
        f'  *"import {m}") echo "Traceback (most recent call last):" >&2; echo "ModuleNotFoundError: No module named \'{m.split(".")[0]}\'" >&2; exit 1 ;;\n'
        for m in missing
    )
    python3 = f'case "$*" in\n{lacks}  *"import ray"*) printf %s {ray} ;;\nesac'
    tools = {"python3": python3, "python": "exit 0", "ldconfig": "exit 0"}
    if ray_cli:
        tools["ray"] = "exit 0"
    if fi_info:
        tools["fi_info"] = "exit 0"
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (root / c.config_dir.lstrip("/")).mkdir(parents=True)
    if entry:
        (root / c.entry_script.lstrip("/")).write_text("print('train')\n")
    if plugin:
        lib = root / c.plugin_dirs[0].lstrip("/")
        lib.mkdir(parents=True)
        (lib / "libnccl-net.so").touch()
    return str(root), {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def run_check(tmp_path: Path, c, **image):
    root, env = fake_image(tmp_path, c, **image)
    (tmp_path / "image-check.sh").write_text(image_check_script(c, root=root))
    started = time.monotonic()
    done = subprocess.run(["bash", str(tmp_path / "image-check.sh")], env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_given_an_image_that_satisfies_the_contract_when_checked_then_the_pod_goes_on(tmp_path):
    done, _ = run_check(tmp_path, contract())
    assert done.returncode == 0, done.stderr
    assert "image-check: OK: ray 2.49.2" in done.stderr and "libnccl-net.so" in done.stderr


@pytest.mark.parametrize(
    "stack, image, message",
    [
        ("multi-node", {"fi_info": False}, "fi_info (libfabric with the EFA provider) is not in the image: rebuild it from images/rlinf-embodied/Dockerfile"),
        ("multi-node", {"ray": "2.47.1"}, "ray 2.47.1 in the image, workload.rayVersion is 2.49.2: rebuild with RAY_VERSION=2.49.2"),
        ("multi-node", {"entry": False}, "the entry script {root}/workspace/examples/embodiment/train_embodied_agent.py is not in the image"),
        ("single-node", {"entry": False}, "the entry script {root}/workspace/verl/trainer/main_ppo.py is not in the image: rebuild it from images/simplevla-rl/Dockerfile"),
        ("multi-node", {"plugin": False}, "aws-ofi-nccl (libnccl-net*.so) is in none of LD_LIBRARY_PATH"),
        ("multi-node", {"ray_cli": False}, "ray is not on PATH in the image"),
    ],
    ids=["no-fi_info", "wrong-ray", "no-entry-script", "no-veRL-entry-script", "no-aws-ofi-nccl", "no-ray-cli"],
)
def test_given_a_broken_image_when_checked_then_the_pod_fails_in_seconds_naming_what_is_missing(tmp_path, stack, image, message):
    done, took = run_check(tmp_path, contract(stack), **image)
    assert done.returncode == exit_codes.IMAGE_BROKEN, done.stderr
    assert message.format(root=tmp_path / "root") in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # one line
    assert took < 5


def test_given_no_efa_when_checked_then_libfabric_is_not_asked_for(tmp_path):
    done, _ = run_check(tmp_path, contract("multi-node", "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true"), fi_info=False, plugin=False)
    assert done.returncode == 0, done.stderr
    # nor is the EFA installer's folder put on PATH: the script names nothing of EFA
    script = image_check_script(contract("quickstart"))
    assert not [word for word in ("/opt/amazon/efa", "fi_info", "ldconfig", "libnccl-net", "EFA=", "PLUGIN_DIRS") if word in script]
    assert "fi_info" in image_check_script(contract("multi-node"))


def test_the_image_check_runs_first_in_every_ray_pod_of_every_launcher():
    job = manifests(plan_stack("multi-node", "workload.restart.maxRestarts=0"))["job-rlinf-training.yaml"]["spec"]["template"]["spec"]
    assert [c["name"] for c in job["initContainers"]][:3] == ["image-check", "config-check", "fabric-check"]
    check = job["initContainers"][0]
    assert check["image"] == job["containers"][0]["image"]
    assert check["command"] == ["/bin/bash", "/etc/rlinf/image-check.sh"]
    rayjob = manifests(plan_stack("multi-node-kuberay"))["rayjob-rlinf-rlinf-training.yaml"]["spec"]["rayClusterSpec"]
    for template in (rayjob["headGroupSpec"]["template"], rayjob["workerGroupSpecs"][0]["template"]):
        assert template["spec"]["initContainers"][0]["name"] == "image-check"


def test_the_jobset_does_not_restart_a_broken_image():
    rules = manual.pod_failure_policy().rules
    index = next(i for i, r in enumerate(rules) if r.on_exit_codes and r.on_exit_codes.container_name == "image-check")
    assert rules[index].action == "FailJob" and rules[index].on_exit_codes.values == [exit_codes.IMAGE_BROKEN]
    jobset = manual.failure_policy(3)["rules"]
    broken = next(r for r in jobset if r["name"] == "ImageBroken")
    assert broken["action"] == "FailJobSet" and broken["onJobFailureMessagePatterns"] == [f"matching FailJob rule at index {index}$"]
    # the rule comes before the default (counted) restart, and after the node fault's own
    assert [r["name"] for r in jobset].index("ImageBroken") > [r["name"] for r in jobset].index("NodeFault")


@pytest.mark.parametrize(
    "stack, sets, retry",
    [
        ("multi-node", (), "the JobSet fails at once on it (rule ImageBroken)"),
        ("single-node", (), "the Job fails at once on it (backoffLimit 0)"),
        ("multi-node-kuberay", (), "KubeRay has no per-exit-code rule"),
    ],
)
def test_the_plans_faults_section_says_what_a_broken_image_does(stack, sets, retry):
    from rlinf_eks.offline.outputs import resilience

    text = resilience.render(settings_of(load(ROOT, stack, list(sets))), stack)
    assert f"exit {exit_codes.IMAGE_BROKEN}, one line naming it" in text
    assert retry in text


# Each family's first import, and a stack whose image would lack it: the family's own contract
# catches an image of another family (or without the simulator) before anything else runs.
FAMILY_IMPORTS = [
    ("multi-node", "mani_skill", "rlinf-embodied", "images/rlinf-embodied/Dockerfile"),
    ("vllm-rollout", "vllm", "rlinf-reasoning", "images/rlinf-reasoning/Dockerfile"),
    ("single-node", "timm", "verl-ppo", "images/simplevla-rl/Dockerfile"),
    ("single-node", "libero.libero.benchmark", "verl-ppo", "images/simplevla-rl/Dockerfile"),
]


@pytest.mark.parametrize("stack, module, dialect, dockerfile", FAMILY_IMPORTS, ids=[f"{s}-{m}" for s, m, _, _ in FAMILY_IMPORTS])
def test_given_an_image_without_a_module_the_trainer_imports_when_checked_then_it_fails_first_naming_it(tmp_path, stack, module, dialect, dockerfile):
    c = contract(stack)
    assert module in c.trainer_modules
    # also without a Ray CLI: the trainer's own imports are checked first
    done, took = run_check(tmp_path, c, missing=(module,), ray_cli=False)
    assert done.returncode == exit_codes.IMAGE_BROKEN, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"python3 cannot import {module}, which the {dialect} trainer imports" in line
    assert f"No module named '{module.split('.')[0]}'" in line and f"build the image from {dockerfile}" in line
    assert took < 5


@pytest.mark.parametrize("module", ["torch", "mani_skill"])
def test_given_a_quickstart_image_without_its_trainers_first_import_when_checked_then_it_fails_naming_it(tmp_path, module):
    """maniskill_ppo_mlp stages nothing, so the recipe knows it in otherConfigs: its first imports
    are checked as the other embodied configs' are (no EFA on the quickstart's g5.2xlarge)."""
    done, took = run_check(tmp_path, contract("quickstart"), missing=(module,), fi_info=False, plugin=False)
    assert done.returncode == exit_codes.IMAGE_BROKEN, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"python3 cannot import {module}, which the rlinf-embodied trainer imports (maniskill_ppo_mlp)" in line
    assert "build the image from images/rlinf-embodied/Dockerfile" in line and took < 5


def test_the_quickstarts_contract_names_its_trainers_first_imports_as_the_other_embodied_stacks_do():
    quickstart, multi_node = contract("quickstart"), contract("multi-node")
    assert quickstart.config_name == "maniskill_ppo_mlp"
    assert quickstart.trainer_modules == ("torch", "mani_skill")
    assert multi_node.trainer_modules[:2] == quickstart.trainer_modules
    assert "trainer imports (maniskill_ppo_mlp, checked first): torch mani_skill" in quickstart.render()
    # a config neither the recipe nor its otherConfigs know: nothing guessed
    assert contract("quickstart", "workload.trainer.configName=my_own_config").trainer_modules == ()


def test_the_reasoning_contract_imports_the_rollout_backend_the_stack_runs():
    assert contract("vllm-rollout").trainer_modules == ("torch", "vllm")
    sglang = contract("vllm-rollout", "workload.rollout.backend=sglang")
    assert sglang.trainer_modules == ("torch", "sglang")


def test_given_a_libero_without_its_config_when_checked_then_the_line_says_to_write_it_at_build_time(tmp_path):
    c = contract("single-node")
    root, env = fake_image(tmp_path, c)
    prompt = "#!/bin/bash\ncase \"$*\" in\n  *libero*) echo 'EOFError: EOF when reading a line' >&2; exit 1 ;;\n  *\"import ray\"*) printf %s 2.49.2 ;;\nesac\n"
    (tmp_path / "bin" / "python3").write_text(prompt)
    (tmp_path / "image-check.sh").write_text(image_check_script(c, root=root))
    done = subprocess.run(["bash", str(tmp_path / "image-check.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_codes.IMAGE_BROKEN
    (line,) = done.stderr.strip().splitlines()
    assert "python3 cannot import libero.libero.benchmark" in line and "no config.yaml in HOME's .libero folder: write it at build time" in line


def test_given_an_import_that_crashes_silently_when_checked_then_the_line_gives_its_status(tmp_path):
    c = contract("multi-node")
    root, env = fake_image(tmp_path, c)
    (tmp_path / "bin" / "python3").write_text("#!/bin/bash\ncase \"$*\" in\n  *mani_skill*) exit 132 ;;\nesac\n")
    (tmp_path / "image-check.sh").write_text(image_check_script(c, root=root))
    done = subprocess.run(["bash", str(tmp_path / "image-check.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_codes.IMAGE_BROKEN
    assert "python3 cannot import mani_skill, which the rlinf-embodied trainer imports (maniskill_ppo_openvlaoft): exit status 132, nothing on stderr" in done.stderr


@pytest.mark.parametrize(
    "stack, sets, value, fails",
    [
        ("vllm-rollout", (), "expandable_segments:True", True),
        ("vllm-rollout", (), "max_split_size_mb:512,expandable_segments:True", True),
        ("vllm-rollout", (), "expandable_segments:False", False),
        ("vllm-rollout", (), None, False),
        ("vllm-rollout", ("workload.rollout.backend=sglang",), "expandable_segments:True", False),
        ("multi-node", (), "expandable_segments:True", False),
    ],
    ids=["vllm-expandable", "vllm-among-others", "vllm-off", "vllm-unset", "sglang", "hf"],
)
def test_given_an_image_whose_env_kills_the_vllm_rollout_when_checked_then_the_pod_fails_before_the_ray_join(tmp_path, stack, sets, value, fails):
    """RLinf starts vLLM in sleep mode (vllm_worker.py:349) and vLLM 0.8.5's CuMemAllocator asserts
    that PYTORCH_CUDA_ALLOC_CONF has no expandable_segments:True (cumem.py:144-149): the pods never
    set it, so the image's own ENV is checked, first, and only where the rollout refuses it."""
    c = contract(stack, *sets)
    root, env = fake_image(tmp_path, c)
    if value is not None:
        env["PYTORCH_CUDA_ALLOC_CONF"] = value
    (tmp_path / "image-check.sh").write_text(image_check_script(c, root=root))
    done = subprocess.run(["bash", str(tmp_path / "image-check.sh")], env=env, capture_output=True, text=True, timeout=60)
    if not fails:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == exit_codes.IMAGE_BROKEN
    (line,) = done.stderr.strip().splitlines()
    assert f"PYTORCH_CUDA_ALLOC_CONF={value} in the image's environment" in line
    assert "set workload.env.PYTORCH_CUDA_ALLOC_CONF to a value without expandable_segments:True" in line
    assert "cannot import" not in line  # before the trainer's imports
