"""The render check (workload/render_check.py): in the run's own pod, before staging and Ray, the
simulator of an embodied config renders one frame with the trainer's renderer and the pod's
environment, and the frame is written as the trainer writes its videos; a node or image that
cannot fails the pod with exit RENDER_FAILED and one line. The probe runs here with stand-in
simulator packages (no GPU): what it asks of MuJoCo, ManiSkill and imageio is what the pods run."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlinf_eks.offline.outputs.plan import settings_of
from rlinf_eks.offline.engine.stack_config import load
from rlinf_eks.trainers import recipe_of
from rlinf_eks.workload import exit_codes, render_check
from tests.harness import ROOT, manifests, plan_stack

FAKE_MUJOCO = '''
import os
import numpy
__version__ = "3.1.6"
class MjModel:
    @staticmethod
    def from_xml_string(xml):
        assert "<camera name=\\"probe\\"" in xml
        return MjModel()
class MjData:
    def __init__(self, model): pass
def mj_forward(model, data): pass
class Renderer:
    def __init__(self, model, height, width):
        if os.environ.get("MUJOCO_GL") == "egl" and os.environ.get("FAKE_EGL") == "broken":
            raise RuntimeError("Failed to initialize OpenGL: eglInitialize failed (EGL_NOT_INITIALIZED)")
        self.shape = (height, width, 3)
    def update_scene(self, data, camera=None):
        assert camera == "probe"
    def render(self):
        frame = numpy.zeros(self.shape, dtype=numpy.uint8)
        if os.environ.get("FAKE_FRAME") != "blank":
            frame[8:40, 8:40] = (230, 76, 51)
        return frame
    def close(self): pass
'''
FAKE_GYM = '''
import numpy
class _Env:
    def reset(self, seed=None): return {}, {}
    def render(self): 
        frame = numpy.zeros((1, 512, 512, 3), dtype=numpy.uint8); frame[0, 100:200, 100:200] = 200; return frame
    def close(self): pass
def make(name, **kwargs):
    assert name == "PickCube-v1" and kwargs["render_mode"] == "rgb_array" and kwargs["num_envs"] == 1, kwargs
    assert kwargs["sim_backend"] == "cpu" and kwargs["obs_mode"] == "rgb", kwargs
    import os
    if os.environ.get("FAKE_VULKAN") == "missing":
        raise RuntimeError("vk::createInstanceUnique: ErrorIncompatibleDriver")
    return _Env()
'''
FAKE_IMAGEIO = '''
import os
class _Writer:
    def __init__(self, path, fps): self.path, self.frames = path, 0
    def append_data(self, frame): self.frames += 1
    def close(self):
        with open(self.path, "wb") as f: f.write(b"\\0\\0\\0\\x20ftypisom" + bytes(self.frames))
def get_writer(path, fps=None, **kwargs):
    if os.environ.get("FAKE_FFMPEG") == "missing":
        raise TypeError("TiffWriter.write() got an unexpected keyword argument 'fps'")
    assert path.endswith(".mp4") and fps
    return _Writer(path, fps)
'''


def fake_packages(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "mani_skill" / "envs").mkdir(parents=True)
    (site / "mani_skill" / "__init__.py").write_text("")
    (site / "mani_skill" / "envs" / "__init__.py").write_text("")
    (site / "gymnasium").mkdir()
    (site / "gymnasium" / "__init__.py").write_text(FAKE_GYM)
    (site / "mujoco.py").write_text(FAKE_MUJOCO)
    (site / "imageio.py").write_text(FAKE_IMAGEIO)
    return site


def settings(stack: str, *sets: str):
    return settings_of(load(ROOT, stack, list(sets)))


def run_check(tmp_path: Path, stack: str, *sets: str, timeout_seconds: int = 60, **env: str):
    site = fake_packages(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    log = tmp_path / "termination-log"
    script = tmp_path / "render-check.sh"
    script.write_text(render_check.render_check_script(settings(stack, *sets), termination_log=str(log), timeout_seconds=timeout_seconds))
    path = f"{bin_dir}:/usr/bin:/bin"
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(script)],
        env={"PATH": path, "PYTHONPATH": str(site), "TMPDIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, log.read_text() if log.exists() else "", time.monotonic() - started


# --- which runs check what ------------------------------------------------------------------------


def test_the_recipe_says_which_configs_render_and_with_what():
    recipe = recipe_of("rlinf-embodied")
    assert {name: recipe.renderer_of(name).name for name in recipe.configs} == {
        "maniskill_ppo_openvlaoft": "maniskill",
        "maniskill_ppo_openvla": "maniskill",
        "libero_10_grpo_openvlaoft": "libero",
    }
    assert recipe.renderer_of("maniskill_ppo_mlp").name == "maniskill"  # the quickstart's config (otherConfigs)
    assert recipe.renderer_of("my_own_config") is None
    for renderer in recipe.renderers.values():
        assert renderer.source and renderer.why and renderer.remedy and renderer.probe in ("maniskill", "mujoco")
    assert "osmesa" in recipe.renderers["libero"].remedy  # the CPU fallback LIBERO has, named when EGL fails
    assert recipe.video_writer.startswith("rlinf/envs/wrappers/record_video.py:479")
    assert all(recipe_of(d).renderer_of(c) is None for d in ("rlinf-reasoning", "verl-ppo") for c in recipe_of(d).configs)


@pytest.mark.parametrize(
    "stack, sets, simulator",
    [
        ("quickstart", (), "maniskill"),
        ("multi-node", (), "maniskill"),
        ("multi-node-kuberay", (), "maniskill"),
        ("multi-node", ("workload.trainer.configName=libero_10_grpo_openvlaoft",), "libero"),
        ("vllm-rollout", (), None),
        ("single-node", (), None),
    ],
    ids=["quickstart", "multi-node", "kuberay", "libero", "reasoning", "verl-ppo"],
)
def test_the_render_check_runs_in_every_ray_pod_of_a_rendering_config_before_staging_and_ray(stack, sets, simulator):
    docs = manifests(plan_stack(stack, *sets))
    if stack == "multi-node-kuberay":
        spec = docs["rayjob-rlinf-rlinf-training.yaml"]["spec"]["rayClusterSpec"]
        templates = [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]
    else:
        jobset = next((d for d in docs.values() if d.get("kind") == "JobSet"), None)
        job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"] if jobset else docs["job-rlinf-training.yaml"]["spec"]
        templates = [job["template"]]
    scripts = next(d for d in docs.values() if d.get("kind") == "ConfigMap" and "image-check.sh" in d.get("data", {}))["data"]
    for template in templates:
        names = [c["name"] for c in template["spec"]["initContainers"]]
        if simulator is None:
            assert "render-check" not in names and "render-check.sh" not in scripts
            continue
        after = {"image-check", "config-check", "fabric-check"} & set(names)
        assert max(names.index(n) for n in after) < names.index("render-check")
        assert all(names.index("render-check") < i for i, n in enumerate(names) if n.startswith(("stage-", "restore-", "preflight")))
        check = template["spec"]["initContainers"][names.index("render-check")]
        ray = template["spec"]["containers"][0]
        assert check["image"] == ray["image"] and check["command"] == ["/bin/bash", "/etc/rlinf/render-check.sh"]
        # the trainer's environment (its MUJOCO_GL), one of the pod's GPUs
        assert {e["name"]: e.get("value") for e in check["env"] if "value" in e} == {e["name"]: e.get("value") for e in ray["env"] if "value" in e}
        assert check["resources"]["limits"]["nvidia.com/gpu"] == "1" == check["resources"]["requests"]["nvidia.com/gpu"]
        assert check["securityContext"]["capabilities"] == {"drop": ["ALL"]} and not check["securityContext"]["privileged"]
        assert f"SIMULATOR={simulator}" in scripts["render-check.sh"] and f"EXIT_RENDER_FAILED={exit_codes.RENDER_FAILED}" in scripts["render-check.sh"]


def test_the_exit_status_is_its_own():
    assert exit_codes.RENDER_FAILED == 98
    assert list(exit_codes.ALL.values()).count(exit_codes.RENDER_FAILED) == 1


# --- the check itself -----------------------------------------------------------------------------


def test_a_libero_node_that_renders_with_egl_goes_on_and_says_what_rendered(tmp_path):
    done, log, took = run_check(tmp_path, "multi-node", "workload.trainer.configName=libero_10_grpo_openvlaoft", MUJOCO_GL="egl")
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rlinf-eks render-check: OK: MuJoCo 3.1.6 with MUJOCO_GL=egl: a 64x64 frame, written as ")
    assert "bytes, imageio)" in line and not log
    assert not list(tmp_path.glob("rlinf-eks-render-check-*.mp4"))  # the video is removed
    assert took < 20


def test_a_maniskill_node_renders_pickcube_through_sapien(tmp_path):
    done, _, _ = run_check(tmp_path, "quickstart")
    assert done.returncode == 0, done.stderr
    assert "render-check: OK: SAPIEN (Vulkan, render backend unknown), ManiSkill PickCube-v1: a 512x512 frame" in done.stderr


@pytest.mark.parametrize(
    "stack, sets, env, says",
    [
        (
            "multi-node",
            ("workload.trainer.configName=libero_10_grpo_openvlaoft",),
            {"MUJOCO_GL": "egl", "FAKE_EGL": "broken"},
            "libero (MuJoCo (robosuite's offscreen renderer) with MUJOCO_GL, config libero_10_grpo_openvlaoft): "
            "RuntimeError: Failed to initialize OpenGL: eglInitialize failed (EGL_NOT_INITIALIZED); with MUJOCO_GL=egl",
        ),
        ("multi-node", ("workload.trainer.configName=libero_10_grpo_openvlaoft",), {"MUJOCO_GL": "egl", "FAKE_FRAME": "blank"}, "rendered a blank 64x64 frame (every pixel 0)"),
        ("quickstart", (), {"FAKE_VULKAN": "missing"}, "maniskill (SAPIEN's Vulkan renderer on the GPU, config maniskill_ppo_mlp): RuntimeError: vk::createInstanceUnique: ErrorIncompatibleDriver; the image must name the NVIDIA Vulkan ICD"),
        (
            "quickstart",
            (),
            {"FAKE_FFMPEG": "missing"},
            "the frame rendered, but imageio cannot write an MP4 as the trainer writes its videos (TypeError: TiffWriter.write() got "
            "an unexpected keyword argument 'fps'): imageio lacks its ffmpeg plugin (imageio-ffmpeg); without it the evaluation's "
            "videos are not saved; install imageio-ffmpeg into the trainer's venv in the image (images/rlinf-embodied/Dockerfile)",
        ),
    ],
    ids=["egl-broken", "blank-frame", "no-vulkan", "no-mp4-writer"],
)
def test_a_node_or_image_that_cannot_render_fails_the_pod_with_its_own_exit_and_one_line(tmp_path, stack, sets, env, says):
    done, log, took = run_check(tmp_path, stack, *sets, **env)
    assert done.returncode == exit_codes.RENDER_FAILED, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rlinf-eks render-check: FAILED: ") and says in line, line
    assert line.endswith(f"(exit {exit_codes.RENDER_FAILED})") and log == line
    assert took < 20


def test_an_egl_context_that_cannot_be_made_is_not_called_a_missing_simulator(tmp_path):
    """MuJoCo raises ImportError when it cannot make its EGL context (seen on an H100 without the
    NVIDIA EGL vendor file): the line names that error, not a missing package."""
    site = fake_packages(tmp_path)
    (site / "mujoco.py").write_text(
        "class MjModel:\n    @staticmethod\n    def from_xml_string(xml):\n        raise ImportError('Cannot initialize a EGL device display. "
        "This likely means that your EGL driver does not support the PLATFORM_DEVICE extension')\n"
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)
    script = tmp_path / "render-check.sh"
    script.write_text(render_check.render_check_script(settings("multi-node", "workload.trainer.configName=libero_10_grpo_openvlaoft"), termination_log=str(tmp_path / "log")))
    done = subprocess.run(["bash", str(script)], env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(site), "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_codes.RENDER_FAILED
    assert "): ImportError: Cannot initialize a EGL device display." in done.stderr and "cannot import the simulator" not in done.stderr
    assert "MUJOCO_GL=osmesa" in done.stderr


def test_the_libero_failure_names_the_cpu_fallback(tmp_path):
    done, _, _ = run_check(tmp_path, "multi-node", "workload.trainer.configName=libero_10_grpo_openvlaoft", MUJOCO_GL="egl", FAKE_EGL="broken")
    assert "workload.env MUJOCO_GL=osmesa and PYOPENGL_PLATFORM=osmesa" in done.stderr


def test_a_simulator_that_is_not_in_the_image_fails_naming_the_import(tmp_path):
    (tmp_path / "empty").mkdir()
    script = tmp_path / "render-check.sh"
    script.write_text(render_check.render_check_script(settings("quickstart"), termination_log=str(tmp_path / "log")))
    done = subprocess.run(
        ["bash", str(script)], env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "empty"), "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # the venv's python3 has no gymnasium: the line names the import
    assert done.returncode == exit_codes.RENDER_FAILED
    assert "cannot import the simulator (ModuleNotFoundError: No module named 'gymnasium')" in done.stderr


def test_a_renderer_that_hangs_is_stopped_at_the_timeout(tmp_path):
    site = fake_packages(tmp_path)
    (site / "mujoco.py").write_text("import time\ntime.sleep(60)\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)
    script = tmp_path / "render-check.sh"
    s = settings("multi-node", "workload.trainer.configName=libero_10_grpo_openvlaoft")
    script.write_text(render_check.render_check_script(s, termination_log=str(tmp_path / "log"), timeout_seconds=2))
    started = time.monotonic()
    done = subprocess.run(["bash", str(script)], env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(site), "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_codes.RENDER_FAILED and "no frame within 2s (a hung driver or renderer)" in done.stderr
    assert time.monotonic() - started < 15
