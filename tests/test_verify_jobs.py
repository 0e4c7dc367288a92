"""The verify ladder's L3 (node smoke) and L4 (fabric across nodes): the Jobs they describe, valid for
the cluster's API and pinned, labelled and sized as the run's pods are; their scripts run for real
against fake tools (nvidia-smi, a fake image root, a fake libEGL built with the host's C compiler,
a fake mpirun); and the verdicts, for every exit status and for NCCL logs in the real formats of
nccl-tests and NCCL (a healthy EFA run, a TCP-socket fallback, low bandwidth, a missing provider
line, a truncated log, the older table without ``root``)."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from rlinf_eks.scheduling import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE, gpu_toleration
from rlinf_eks.verify import fabric, nccl, smoke
from rlinf_eks.verify.fabric import fabric_objects, fabric_results, fabric_verdict
from rlinf_eks.verify.model import CheckResult
from rlinf_eks.verify.nccl import parse_all_reduce
from rlinf_eks.verify.smoke import smoke_objects, smoke_verdict
from rlinf_eks.workload import exit_codes
from rlinf_eks.workload.fabric import fabric_check_script
from rlinf_eks.workload.config_check import config_check_script
from rlinf_eks.workload.image_check import image_check_script
from rlinf_eks.workload.image_contract import contract_for
from rlinf_eks.workload.kube import mi
from rlinf_eks.workload.preflight import PREFLIGHT, min_bus_bandwidth_gbps, preflight_script
from rlinf_eks.workload.run import Run, resolve_run
from tests.harness import plan_stack
from tests.schemas import builtin_errors
from tests.test_image_check import fake_image

NODES = ["ip-10-0-1-23.ec2.internal", "ip-10-0-1-57.ec2.internal"]
RUN_ID = "a1b2c3"


def run_of(stack: str, *sets: str) -> Run:
    return resolve_run(plan_stack(stack, *sets).settings, stack)


def kinds(objects: list[dict]) -> list[str]:
    return [o["kind"] for o in objects]


def jobs(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] == "Job"]


def pod(job: dict) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]


def node_names(job: dict) -> list[str]:
    """The nodes a Job's pods are pinned to: one term per node, each one ``metadata.name In [node]``
    (the API server takes one value under matchFields; tests/test_real_apiserver.py sends them)."""
    terms = pod(job)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    names = []
    for term in terms:
        assert list(term) == ["matchFields"] and len(term["matchFields"]) == 1, term
        (field,) = term["matchFields"]
        assert field["key"] == "metadata.name" and field["operator"] == "In" and len(field["values"]) == 1, field
        names += field["values"]
    return names


def assert_valid_and_labelled(run: Run, objects: list[dict], level: int) -> None:
    version = run.settings.cluster.kubernetes_version
    for obj in objects:
        assert builtin_errors(obj, version) == [], (obj["kind"], obj["metadata"]["name"])
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "rlinf-eks-verify"
        assert labels["rlinf-eks/verify-run"] == RUN_ID and labels["rlinf-eks/verify-level"] == str(level)
        assert obj["metadata"]["namespace"] == "rlinf"
        assert len(obj["metadata"]["name"]) <= 63
        if obj["kind"] == "Job":
            assert obj["spec"]["template"]["metadata"]["labels"] == labels  # the pods too
            assert obj["spec"]["backoffLimit"] == 0 and obj["spec"]["ttlSecondsAfterFinished"] > 0
            assert obj["spec"]["activeDeadlineSeconds"] > 0
            spec = pod(obj)
            assert spec["restartPolicy"] == "Never" and gpu_toleration() in spec["tolerations"]
            assert spec["automountServiceAccountToken"] is False


def assert_whole_node(run: Run, container: dict) -> None:
    """Every GPU, EFA device and the hugepages of the node, as the run's pod asks for them."""
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    assert resources["limits"][GPU_RESOURCE] == str(run.shape.pod.gpus)
    if run.shape.efa:
        assert resources["limits"][EFA_RESOURCE] == str(run.shape.efa)
    else:
        assert EFA_RESOURCE not in resources["limits"]
    assert resources["limits"].get(HUGEPAGES_2MI_RESOURCE) == (mi(run.shape.pod.hugepages_2mi_mib) if run.shape.pod.hugepages_2mi_mib else None)


# --- L3: the smoke Jobs --------------------------------------------------------------------------------


def test_given_two_gpu_nodes_when_smoke_is_built_then_one_valid_job_pinned_to_each_node_runs_the_runs_own_checks():
    run = run_of("multi-node")
    objects = smoke_objects(run, NODES, namespace="rlinf", run_id=RUN_ID)
    assert kinds(objects) == ["ConfigMap", "Job", "Job"]
    assert_valid_and_labelled(run, objects, 3)
    data = objects[0]["data"]
    # the run's renderings, not copies: the pod fails exactly as a training pod would
    assert data["image-check.sh"] == image_check_script(contract_for(run))
    assert data["fabric-check.sh"] == fabric_check_script(run.settings, shape=run.shape)
    assert data["config-check.sh"] == config_check_script(run)  # run for real in tests/test_config_check.py
    assert set(data) == {"smoke.sh", "image-check.sh", "config-check.sh", "fabric-check.sh", "render-check.sh"}  # ManiSkill renders
    for job, node in zip(jobs(objects), NODES):
        assert node_names(job) == [node]
        assert job["metadata"]["annotations"]["rlinf-eks/verify-node"] == node
        (container,) = pod(job)["containers"]
        assert container["image"] == run.settings.workload.image
        assert container["command"] == ["/bin/bash", "/etc/rlinf/smoke.sh"]
        assert_whole_node(run, container)
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["FI_PROVIDER"] == "efa" and env["NCCL_NET"] == "AWS Libfabric" and env["MUJOCO_GL"] == "egl"
        assert env["RLINF_VERIFY_NODE"] == node
        assert pod(job)["volumes"][0]["configMap"]["name"] == objects[0]["metadata"]["name"]
        assert job["spec"]["activeDeadlineSeconds"] == smoke.SMOKE_DEADLINE_SECONDS
    assert [j["metadata"]["name"] for j in jobs(objects)] == [f"rlinf-verify-smoke-{RUN_ID}-0", f"rlinf-verify-smoke-{RUN_ID}-1"]


@pytest.mark.parametrize(
    "stack, sets, files",
    [
        ("single-node", (), {"smoke.sh", "image-check.sh", "config-check.sh", "fabric-check.sh", "render-check.sh"}),  # verl-ppo: LIBERO renders
        ("vllm-rollout", (), {"smoke.sh", "image-check.sh", "config-check.sh", "fabric-check.sh"}),  # reasoning renders nothing
        ("multi-node", ("gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true"), {"smoke.sh", "image-check.sh", "config-check.sh", "render-check.sh"}),  # no EFA: no fabric check
    ],
    ids=["single-node", "vllm-rollout", "multi-node-no-efa"],
)
def test_given_a_stack_when_smoke_is_built_then_its_scripts_follow_the_dialect_and_the_fabric(stack, sets, files):
    run = run_of(stack, *sets)
    objects = smoke_objects(run, NODES[:1], namespace="rlinf", run_id=RUN_ID)
    assert kinds(objects) == ["ConfigMap", "Job"]
    assert_valid_and_labelled(run, objects, 3)
    assert set(objects[0]["data"]) == files
    assert f"RENDER={int('render-check.sh' in files)}" in objects[0]["data"]["smoke.sh"]
    assert_whole_node(run, pod(jobs(objects)[0])["containers"][0])


@pytest.mark.parametrize(
    "nodes, run_id, message",
    [
        ([], RUN_ID, "no GPU nodes"),
        (["n1", "n1"], RUN_ID, "distinct"),
        (["n1"], "Not_Valid", "lowercase letters"),
        (["n1"], "x" * 50, "too long"),
    ],
)
def test_given_bad_nodes_or_run_id_when_built_then_it_refuses_naming_why(nodes, run_id, message):
    with pytest.raises(ValueError, match=message):
        smoke_objects(run_of("multi-node"), nodes, namespace="rlinf", run_id=run_id)


# --- L3: the verdicts ------------------------------------------------------------------------------------

FAILED_LINES = {
    exit_codes.IMAGE_BROKEN: "rlinf-eks image-check: FAILED: fi_info (libfabric with the EFA provider) is not in the image (exit 93)",
    exit_codes.FABRIC_FAILED: "rlinf-eks fabric-check: FAILED: /dev/infiniband has 0 EFA devices, p5.48xlarge has 32 (exit 90)",
    smoke.GPUS_MISSING: "rlinf-eks smoke[n1]: FAILED: nvidia-smi lists 7 GPUs, p5.48xlarge has 8 (exit 81)",
    smoke.RENDER_BROKEN: "rlinf-eks render-check: FAILED: EGL vendor is Mesa Project, not NVIDIA (exit 82)",
}


@pytest.mark.parametrize(
    "code, meaning",
    [
        (exit_codes.IMAGE_BROKEN, "image broken"),
        (exit_codes.FABRIC_FAILED, "EFA fabric not usable"),
        (smoke.GPUS_MISSING, "GPUs missing"),
        (smoke.RENDER_BROKEN, "headless rendering broken"),
        (143, "stopped"),
        (137, "killed"),
        (1, "failed with exit status 1"),
    ],
)
def test_given_a_failing_exit_status_when_judged_then_one_line_says_what_it_means_and_what_to_do(code, meaning):
    line = FAILED_LINES.get(code, "Traceback (most recent call last):")
    log = f"rlinf-eks image-check: OK: ray 2.49.2\nsome output\n{line}\n\n"
    result = smoke_verdict("n1", code, log)
    assert result.outcome == "fail" and result.level == 3 and result.name == "smoke.n1"
    assert meaning in result.detail and f"(exit {code})" in result.detail and line in result.detail
    assert "\n" not in result.detail and result.remedy


def test_given_a_pod_that_never_finished_when_judged_then_it_fails_as_unschedulable_or_too_slow():
    result = smoke_verdict("n1", None, "")
    assert result.outcome == "fail" and "did not finish within the deadline" in result.detail
    assert "Insufficient nvidia.com/gpu" in result.remedy


def test_given_a_passing_pod_when_judged_then_it_passes_with_its_ok_line():
    result = smoke_verdict("n1", 0, "rlinf-eks image-check: OK: ray\nrlinf-eks smoke[n1]: OK: image x, 8 GPUs, 32 EFA devices\n")
    assert result.outcome == "pass" and result.detail == "n1: rlinf-eks smoke[n1]: OK: image x, 8 GPUs, 32 EFA devices"


# --- L3: the scripts, run for real -------------------------------------------------------------------------

FAKE_EGL = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef int EGLint;
typedef unsigned int EGLBoolean, EGLenum;
typedef void *EGLDisplay, *EGLConfig, *EGLSurface, *EGLContext, *EGLDeviceEXT;
static char device, display, config, surface, context;
static EGLint error = 0x3000;
static int mode(const char *name) { const char *m = getenv("FAKE_EGL"); return strcmp(m ? m : "ok", name) == 0; }
EGLint eglGetError(void) { EGLint e = error; error = 0x3000; return e; }
EGLBoolean eglQueryDevicesEXT(EGLint max, EGLDeviceEXT *devices, EGLint *count) {
  *count = 0;
  if (mode("nodevices")) return 1;
  if (max > 0) { devices[0] = &device; *count = 1; }
  return 1;
}
EGLDisplay eglGetPlatformDisplayEXT(EGLenum platform, void *native, const EGLint *attributes) {
  return platform == 0x313F && native == &device ? &display : NULL;
}
void *eglGetProcAddress(const char *name) {
  if (!strcmp(name, "eglQueryDevicesEXT")) return (void *)eglQueryDevicesEXT;
  if (!strcmp(name, "eglGetPlatformDisplayEXT")) return (void *)eglGetPlatformDisplayEXT;
  return NULL;
}
EGLDisplay eglGetDisplay(void *native) { if (mode("nodevices")) { error = 0x3008; return NULL; } return &display; }
EGLBoolean eglInitialize(EGLDisplay d, EGLint *major, EGLint *minor) {
  if (mode("hang")) sleep(30);
  if (mode("noinit") || d != &display) { error = 0x3001; return 0; }
  *major = 1; *minor = 5; return 1;
}
const char *eglQueryString(EGLDisplay d, EGLint name) { return name == 0x3053 ? (mode("mesa") ? "Mesa Project" : "NVIDIA") : "1.5"; }
EGLBoolean eglChooseConfig(EGLDisplay d, const EGLint *attributes, EGLConfig *configs, EGLint size, EGLint *count) {
  if (size > 0) configs[0] = &config;
  *count = 1; return 1;
}
EGLBoolean eglBindAPI(EGLenum api) { return api == 0x30A2; }
EGLSurface eglCreatePbufferSurface(EGLDisplay d, EGLConfig c, const EGLint *attributes) { return c == &config ? &surface : NULL; }
EGLContext eglCreateContext(EGLDisplay d, EGLConfig c, EGLContext share, const EGLint *attributes) {
  if (mode("nocontext")) { error = 0x3003; return NULL; }
  return &context;
}
EGLBoolean eglMakeCurrent(EGLDisplay d, EGLSurface draw, EGLSurface read, EGLContext c) { return 1; }
EGLBoolean eglDestroyContext(EGLDisplay d, EGLContext c) { return 1; }
EGLBoolean eglDestroySurface(EGLDisplay d, EGLSurface s) { return 1; }
EGLBoolean eglTerminate(EGLDisplay d) { return 1; }
"""


@pytest.fixture(scope="module")
def fake_egl(tmp_path_factory) -> str:
    """A libEGL with the entry points the probe calls, behaving as FAKE_EGL says (built per session)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the fake libEGL")
    directory = tmp_path_factory.mktemp("egl")
    (directory / "egl.c").write_text(FAKE_EGL)
    library = directory / "libEGL.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(directory / "egl.c")], check=True, capture_output=True)
    return str(library)


def python_bin(tmp_path: Path) -> Path:
    """A PATH directory whose python3 is the real one (the render probe is real Python)."""
    directory = tmp_path / "pybin"
    directory.mkdir(exist_ok=True)
    (directory / "python3").symlink_to(sys.executable)
    return directory


def render_root(tmp_path: Path, *icds: str) -> Path:
    root = tmp_path / "render-root"
    for icd in icds:
        (root / icd.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / icd.lstrip("/")).write_text("{}\n")
    root.mkdir(exist_ok=True)
    return root


def run_render_check(tmp_path: Path, library: str, *, mode: str = "ok", caps: Optional[str] = "all", icds=(smoke.ICD_FILES[2],),
                     vk_icds: Optional[str] = None, timeout: int = smoke.EGL_TIMEOUT_SECONDS) -> subprocess.CompletedProcess:
    root = render_root(tmp_path, *icds)
    script = tmp_path / "render-check.sh"
    script.write_text(smoke.render_check_script("rlinf-embodied", root=str(root), egl_library=library, timeout_seconds=timeout))
    env = {"PATH": f"{python_bin(tmp_path)}:/usr/bin:/bin", "FAKE_EGL": mode}
    if caps is not None:
        env["NVIDIA_DRIVER_CAPABILITIES"] = caps
    if vk_icds is not None:
        env["VK_ICD_FILENAMES"] = vk_icds
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("caps", ["all", "compute,utility,graphics", "graphics"])
def test_given_a_gpu_that_renders_when_checked_then_one_offscreen_egl_context_is_made(tmp_path, fake_egl, caps):
    done = run_render_check(tmp_path, fake_egl, caps=caps, vk_icds=smoke.ICD_FILES[2])
    assert done.returncode == 0, done.stderr
    assert "render-check: OK: NVIDIA_DRIVER_CAPABILITIES=" in done.stderr
    assert "EGL OK: NVIDIA EGL 1.5, 1 EGL devices, an OpenGL context on an offscreen pbuffer" in done.stderr


@pytest.mark.parametrize(
    "case, message",
    [
        (dict(caps=None), "NVIDIA_DRIVER_CAPABILITIES is 'unset', without graphics or all"),
        (dict(caps="compute,utility"), "NVIDIA_DRIVER_CAPABILITIES is 'compute,utility', without graphics or all"),
        (dict(icds=()), "none of /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json"),
        (dict(vk_icds="/etc/vulkan/icd.d/nvidia_icd.json"), "VK_ICD_FILENAMES names /etc/vulkan/icd.d/nvidia_icd.json, which is not in the container"),
        (dict(mode="noinit"), "eglInitialize failed (EGL_NOT_INITIALIZED), 1 EGL devices"),
        (dict(mode="nodevices"), "no EGL display (0 EGL devices; EGL_BAD_DISPLAY)"),
        (dict(mode="mesa"), "the EGL vendor is Mesa Project, not NVIDIA: rendering would run on the CPU"),
        (dict(mode="nocontext"), "eglCreateContext failed (EGL_BAD_ALLOC)"),
        (dict(mode="hang", timeout=2), "no EGL context within 2s"),
        (dict(library="/nonexistent/libEGL.so.1"), "cannot load /nonexistent/libEGL.so.1"),
    ],
    ids=["no-caps", "no-graphics-cap", "no-icd", "vk-icd-missing", "no-init", "no-device", "mesa", "no-context", "hang", "no-libegl"],
)
def test_given_a_node_that_cannot_render_when_checked_then_it_fails_with_its_own_code_and_one_line(tmp_path, fake_egl, case, message):
    case = dict(case)
    library = case.pop("library", fake_egl)
    done = run_render_check(tmp_path, library, **case)
    assert done.returncode == smoke.RENDER_BROKEN, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert smoke.RENDER_BROKEN not in exit_codes.ALL.values()


def fake_node(tmp_path: Path, run: Run, *, gpus: Optional[int] = None, nvidia_smi: bool = True, **image) -> dict[str, str]:
    """A fake image root and PATH (test_image_check's), with an nvidia-smi listing ``gpus`` GPUs and a
    python3 that answers the image check as the fake does and runs the render probe for real."""
    root, env = fake_image(tmp_path, contract_for(run), **image)
    bin_dir = tmp_path / "bin"
    (bin_dir / "python3").write_text(
        f'#!/bin/bash\ncase "$*" in\n  *"import ray, sys"*) printf %s 2.49.2 ;;\n  *EGL_ERRORS*) exec {sys.executable} "$@" ;;\nesac\n'
    )
    if nvidia_smi:
        count = run.shape.pod.gpus if gpus is None else gpus
        listing = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d}-0000)\\n" for i in range(count))
        (bin_dir / "nvidia-smi").write_text(f'#!/bin/bash\n[ "$1" = -L ] && printf "{listing}"\n')
        (bin_dir / "nvidia-smi").chmod(0o755)
    render_root_dir = Path(root)
    for icd in smoke.ICD_FILES[1:]:
        (render_root_dir / icd.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (render_root_dir / icd.lstrip("/")).write_text("{}\n")
    plugin = Path(root) / contract_for(run).plugin_dirs[0].lstrip("/") if run.shape.efa else Path(root)
    return {**env, "NVIDIA_DRIVER_CAPABILITIES": "all", "LD_LIBRARY_PATH": str(plugin), "RLINF_VERIFY_NODE": "n1", "ROOT": root}


def run_smoke(tmp_path: Path, run: Run, library: str, *, real_fabric: bool = False, egl: str = "ok", **node) -> subprocess.CompletedProcess:
    """smoke.sh from the ConfigMap's own files, in a directory of the test's: image-check.sh and
    config-check.sh rendered against the fake root, and (the test host has no /dev/infiniband) fabric-check.sh rendered for
    no EFA devices unless ``real_fabric``."""
    env = fake_node(tmp_path, run, **node)
    root = env.pop("ROOT")
    scripts_dir = tmp_path / "scripts"
    scripts_dir.mkdir()
    files = smoke.smoke_scripts(run)
    files["smoke.sh"] = smoke.smoke_script(run, scripts_dir=str(scripts_dir))
    files["image-check.sh"] = image_check_script(contract_for(run), root=root)
    # the checkout in the fake root; the fake python3 answers the program (run for real with Hydra
    # against the reference configs in tests/test_config_check.py)
    files["config-check.sh"] = config_check_script(
        run, checkout=root + run.settings.workload.trainer.workdir, termination_log=str(tmp_path / "termination-log")
    )
    if "fabric-check.sh" in files and not real_fabric:
        files["fabric-check.sh"] = fabric_check_script(run.settings, shape=type(run.shape)(run.shape.pod, 0, run.shape.sync))
    if "render-check.sh" in files:
        files["render-check.sh"] = smoke.render_check_script(run.settings.workload.trainer.dialect, root=root, egl_library=library)
    for name, text in files.items():
        (scripts_dir / name).write_text(text)
    return subprocess.run(["bash", str(scripts_dir / "smoke.sh")], env={**env, "FAKE_EGL": egl}, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("stack", ["multi-node", "single-node", "vllm-rollout"])
def test_given_a_healthy_node_when_smoked_then_every_check_passes_in_order_and_the_verdict_passes(tmp_path, fake_egl, stack):
    run = run_of(stack)
    done = run_smoke(tmp_path, run, fake_egl)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("rlinf-eks image-check: OK")
    assert lines[1].startswith("rlinf-eks fabric-check: OK")
    assert ("rlinf-eks render-check: OK" in done.stderr) == smoke.renders(run)
    assert lines[-1].startswith("rlinf-eks smoke[n1]: OK: image ") and f", {run.shape.pod.gpus} GPUs, " in lines[-1]
    assert smoke_verdict("n1", done.returncode, done.stdout + done.stderr).outcome == "pass"


@pytest.mark.parametrize(
    "case, code, message",
    [
        (dict(fi_info=False), exit_codes.IMAGE_BROKEN, "fi_info (libfabric with the EFA provider) is not in the image"),
        (dict(real_fabric=True), exit_codes.FABRIC_FAILED, "/dev/infiniband has 0 EFA devices, p5.48xlarge has 32"),
        (dict(gpus=7), smoke.GPUS_MISSING, "nvidia-smi lists 7 GPUs, p5.48xlarge has 8"),
        (dict(nvidia_smi=False), smoke.GPUS_MISSING, "nvidia-smi is not in the container"),
        (dict(egl="mesa"), smoke.RENDER_BROKEN, "the EGL vendor is Mesa Project, not NVIDIA"),
    ],
    ids=["image", "fabric", "gpu-count", "no-nvidia-smi", "render"],
)
def test_given_a_broken_node_when_smoked_then_it_stops_at_the_first_failing_check_and_the_verdict_names_it(tmp_path, fake_egl, case, code, message):
    if case.get("real_fabric") and glob.glob("/dev/infiniband/uverbs*"):
        pytest.skip("this host has EFA devices")
    run = run_of("multi-node")
    done = run_smoke(tmp_path, run, fake_egl, **case)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert "smoke[n1]: OK" not in done.stderr
    verdict = smoke_verdict("n1", done.returncode, done.stdout + done.stderr)
    assert verdict.outcome == "fail" and message in verdict.detail and f"(exit {code})" in verdict.detail


# --- L4: the fabric Job ----------------------------------------------------------------------------------


def test_given_two_nodes_when_the_fabric_is_built_then_the_runs_preflight_spans_them_over_a_headless_service():
    run = run_of("multi-node")
    settings = run.settings
    objects = fabric_objects(run, NODES, namespace="rlinf", run_id=RUN_ID)
    assert kinds(objects) == ["ConfigMap", "Service", "NetworkPolicy", "Job"]
    assert_valid_and_labelled(run, objects, 4)
    config_map, service, policy, job = objects
    name = f"rlinf-verify-fabric-{RUN_ID}"
    assert {o["metadata"]["name"] for o in objects} == {name}
    # the run's own preflight.sh, for these two nodes and this Job's host names
    assert config_map["data"] == {
        "preflight.sh": preflight_script(settings, shape=run.shape, nnodes=2, host_prefix=name, service=name, exchange_dir="/fsx/.preflight")
    }
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == job["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"] == service["spec"]["selector"]
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert pod(job)["subdomain"] == name
    assert node_names(job) == NODES
    anti = pod(job)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname" and anti["labelSelector"]["matchLabels"] == service["spec"]["selector"]
    (container,) = pod(job)["containers"]
    assert container["image"] == settings.preflight.image
    assert container["command"] == ["/bin/bash", "/etc/rlinf/preflight.sh"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['batch.kubernetes.io/controller-uid']"
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    assert_whole_node(run, container)
    volumes = {v["name"]: v for v in pod(job)["volumes"]}
    assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == "shared-fs"
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert {m["name"]: m["mountPath"] for m in container["volumeMounts"]} == {"scripts": "/etc/rlinf", "dshm": "/dev/shm", "shared": "/fsx"}


@pytest.mark.parametrize("stack", ["single-node", "vllm-rollout"])
def test_given_one_node_when_the_fabric_is_built_then_one_pod_all_reduces_over_its_gpus(stack):
    run = run_of(stack)
    objects = fabric_objects(run, NODES[:1], namespace="rlinf", run_id=RUN_ID)
    assert kinds(objects) == ["ConfigMap", "Job"]
    assert_valid_and_labelled(run, objects, 4)
    config_map, job = objects
    assert set(config_map["data"]) == {"all-reduce-local.sh"}
    assert "GPUS_PER_NODE=8" in config_map["data"]["all-reduce-local.sh"] and "EFA_PER_NODE=32" in config_map["data"]["all-reduce-local.sh"]
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)
    assert "subdomain" not in pod(job) and node_names(job) == NODES[:1]
    (container,) = pod(job)["containers"]
    assert container["image"] == run.settings.preflight.image
    assert container["command"] == ["/bin/bash", "/etc/rlinf/all-reduce-local.sh"]
    assert_whole_node(run, container)
    assert not [v for v in pod(job)["volumes"] if "persistentVolumeClaim" in v]


def test_given_several_nodes_without_the_shared_filesystem_then_the_fabric_refuses_naming_why():
    with pytest.raises(ValueError, match="exchanges its one-run ssh key on the shared filesystem"):
        fabric_objects(run_of("single-node"), NODES, namespace="rlinf", run_id=RUN_ID)


def test_given_one_node_with_one_gpu_then_there_is_nothing_to_all_reduce_and_the_verdict_skips():
    run = run_of("single-node", "gpuNodes.instanceType=g6e.8xlarge", "gpuNodes.efa=false")
    assert run.shape.pod.gpus == 1
    assert fabric_objects(run, NODES[:1], namespace="rlinf", run_id=RUN_ID) == []
    (result,) = fabric_verdict(run.settings, None, None, nodes=1)
    assert result.outcome == "skip"


def fake_mpirun(tmp_path: Path, table: str, status: int = 0) -> dict[str, str]:
    bin_dir = tmp_path / "mpibin"
    bin_dir.mkdir()
    (tmp_path / "table.txt").write_text(table)
    (bin_dir / "mpirun").write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {tmp_path}/args\ncat {tmp_path}/table.txt\nexit {status}\n')
    (bin_dir / "mpirun").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "RLINF_VERIFY_NODE": "n1"}


@pytest.mark.parametrize("status", [0, 1])
def test_given_one_node_when_the_local_all_reduce_runs_then_it_is_preflights_measurement_and_its_status(tmp_path, status):
    run = run_of("single-node")
    (tmp_path / "all-reduce-local.sh").write_text(fabric.local_script(run))
    env = fake_mpirun(tmp_path, healthy_log(nodes=1), status)
    done = subprocess.run(["bash", str(tmp_path / "all-reduce-local.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == status
    args = (tmp_path / "args").read_text().splitlines()
    assert args[args.index("-np") + 1] == "8" and "FI_PROVIDER=efa" in args and "FI_EFA_USE_DEVICE_RDMA=1" in args
    assert "NCCL_DEBUG=INFO" in args and "NCCL_DEBUG_SUBSYS=INIT,NET" in args
    # the flags of the run's preflight, so that one and many nodes measure the same thing
    assert " ".join(args[args.index("/opt/nccl-tests/build/all_reduce_perf"):]) in PREFLIGHT
    assert parse_all_reduce(done.stdout + done.stderr).max_size_busbw == 356.81


# --- NCCL logs, in the real formats ------------------------------------------------------------------------

SIZES = [8 * 2**20 * 2**k for k in range(11)]  # -b 8M -e 8G -f 2


def row(size: int, busbw: float, *, wrong: str = "N/A", root: bool = True) -> str:
    """One table row as nccl-tests prints it (src/util.cu: "%12li  %12li  %8s  %6s  %6s", then per
    run "  %7s  %6s  %6s  %6s"; -c 0 prints N/A for #wrong)."""
    count = size // 4
    algbw = busbw / (2 * 15 / 16)
    time_us = size / (algbw * 1e3) if algbw else 0.0
    run = f"  {time_us:7.1f}  {algbw:6.2f}  {busbw:6.2f}  {wrong:>6}"
    return f"{size:12d}  {count:12d}  {'float':>8}  {'sum':>6}  " + (f"{-1:6d}" if root else "") + run + run


def header(nodes: int, *, root: bool = True) -> str:
    ranks = "\n".join(f"#  Rank {r:2d} Group  0 Pid {80 + r:6d} on rlinf-verify-fabric-a1b2c3-{r // 8} device {r % 8:2d} [0000:53:00] NVIDIA H100 80GB HBM3" for r in range(8 * nodes))
    columns = (
        "#                                                              out-of-place                       in-place          \n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
    ) if root else (
        "#                                                     out-of-place                       in-place\n"
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"
    )
    return (
        "# nThread 1 nGpus 1 minBytes 8388608 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 0 graph: 0\n"
        f"#\n# Using devices\n{ranks}\n#\n{columns}"
    )


def nccl_info(host: str, *lines: str) -> str:
    return "\n".join(f"{host}:81:95 [0] NCCL INFO {line}" for line in lines)


EFA_INIT = (
    "Bootstrap: Using eth0:10.0.1.23<0>",
    "NCCL version 2.27.5+cuda12.8",
    "NET/OFI Initializing aws-ofi-nccl 1.16.0",
    "NET/OFI Using Libfabric version 2.1",
    "NET/OFI Setting provider_filter to efa",
    "NET/OFI Selected Provider is efa (found 32 nics)",
    "NET/OFI Using transport protocol RDMA",
    "Using network Libfabric",
    "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Libfabric/0/GDRDMA",
    "Channel 01/0 : 0[0] -> 8[0] [send] via NET/Libfabric/1/GDRDMA",
)
SOCKET_INIT = (
    "Bootstrap: Using eth0:10.0.1.23<0>",
    "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
    "Failed to open libibverbs.so[.1]",
    "NET/Socket : Using [0]eth0:10.0.1.23<0>",
    "Using network Socket",
    "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
)
HEALTHY_BUSBW = [71.72, 103.15, 140.2, 187.64, 231.9, 270.31, 301.85, 325.4, 341.77, 350.02, 356.81]


def healthy_log(nodes: int = 2, *, init=EFA_INIT, busbw=HEALTHY_BUSBW, sizes=SIZES, summary: bool = True, root: bool = True, tail: str = "") -> str:
    avg = sum(busbw[: len(sizes)]) / len(sizes[: len(busbw)])
    body = [
        header(nodes, root=root),
        *(row(size, bw, root=root, wrong="N/A" if root else "0e+00") for size, bw in zip(sizes, busbw)),
    ]
    text = "\n".join([nccl_info("rlinf-verify-fabric-a1b2c3-0", *init), nccl_info("rlinf-verify-fabric-a1b2c3-1", *init), *body])
    if summary:
        text += f"\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:g} \n#\n"
    return text + tail


P5_MARK = 200.0  # preflight.minBusBandwidthFraction 0.5 x 3200 Gbps / 8


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def test_the_pass_mark_is_the_preflights():
    assert min_bus_bandwidth_gbps(run_of("multi-node").settings) == P5_MARK


def test_given_a_healthy_efa_log_when_parsed_then_every_figure_and_line_is_read():
    result = parse_all_reduce(healthy_log(tail="\nrlinf-eks preflight[pod 0]: PASS: all_reduce_perf bus bandwidth 356.81 GB/s across 2 nodes (minimum 200.0 GB/s)\n"))
    assert len(result.rows) == 11 and result.rows[0].size == 8 * 2**20 and result.rows[-1].size == 8 * 2**30
    assert result.rows[-1].root == -1 and result.rows[-1].oop_wrong is None and result.rows[-1].type == "float"
    assert result.max_size_busbw == 356.81 and result.avg_busbw == pytest.approx(sum(HEALTHY_BUSBW) / len(HEALTHY_BUSBW), abs=1e-3)
    assert (result.network, result.provider, result.socket_fallback, result.gdrdma) == ("Libfabric", "efa", False, True)
    assert result.max_bytes == 8 * 2**30 and result.out_of_bounds == 0 and not result.truncated and result.complete
    assert result.verdict.endswith("(minimum 200.0 GB/s)")


def test_the_parser_reads_the_largest_sizes_busbw_as_preflight_sh_does():
    # preflight.sh's own awk, taken from the body the run renders, over the same log
    awk = re.search(r"busbw=\$\((awk .*?) \"\$\{dir\}/all_reduce_perf\.log\"\)", PREFLIGHT).group(1)
    for log in (healthy_log(), healthy_log(init=SOCKET_INIT, busbw=[1.0 + i for i in range(11)])):
        done = subprocess.run(["bash", "-c", f"{awk} /dev/stdin"], input=log, capture_output=True, text=True, check=True)
        assert float(done.stdout) == parse_all_reduce(log).max_size_busbw


def test_given_a_healthy_two_node_efa_run_when_judged_then_it_passes_reporting_the_figure():
    settings = run_of("multi-node").settings
    results = by_name(fabric_verdict(settings, parse_all_reduce(healthy_log()), 0))
    assert [r.outcome for r in results.values()] == ["pass", "pass", "pass"]
    assert results["fabric.network"].detail == "NCCL over Libfabric, provider efa, GPUDirect RDMA"
    assert results["fabric.bus-bandwidth"].detail.startswith(
        "356.81 GB/s bus bandwidth at 8 GiB across 2 p5.48xlarge nodes (minimum 200 GB/s, 0.5 of 3200 Gbps)"
    )
    assert all(r.level == 4 for r in results.values())


def test_given_the_older_table_without_root_and_aws_libfabric_when_judged_then_it_reads_the_same():
    init = ("NET/OFI Selected Provider is efa", "Using network AWS Libfabric", "Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0")
    log = healthy_log(init=init, root=False)
    # an NCCL line in the middle of the table (aws/aws-ofi-nccl#64) and mpirun's --tag-output prefix
    lines = log.splitlines()
    lines.insert(lines.index(next(line for line in lines if line.strip().startswith("8388608"))), "ip-10-0-1-23:9738:9738 [0] NCCL INFO Launch mode Parallel")
    log = "\n".join(f"[1,0]<stdout>:{line}" for line in lines)
    result = parse_all_reduce(log)
    assert len(result.rows) == 11 and result.rows[-1].root is None and result.rows[-1].oop_wrong == 0.0
    assert (result.max_size_busbw, result.network, result.provider, result.gdrdma) == (356.81, "AWS Libfabric", "efa", False)
    assert [r.outcome for r in fabric_verdict(run_of("multi-node").settings, result, 0)] == ["pass", "pass", "pass"]


def test_given_a_tcp_socket_fallback_when_judged_then_the_network_and_the_bandwidth_fail():
    log = healthy_log(init=SOCKET_INIT, busbw=[0.5 + 0.25 * i for i in range(11)],
                      tail="\nrlinf-eks preflight[pod 0]: FAIL: NCCL fell back to TCP sockets instead of EFA\n")
    result = parse_all_reduce(log)
    assert result.socket_fallback and result.network == "Socket" and result.provider is None
    results = by_name(fabric_verdict(run_of("multi-node").settings, result, 1))
    assert results["fabric.network"].outcome == "fail" and "NCCL fell back to TCP sockets" in results["fabric.network"].detail
    assert "security group" in results["fabric.network"].remedy
    assert results["fabric.bus-bandwidth"].outcome == "fail" and results["fabric.bus-bandwidth"].detail.startswith("3 GB/s bus bandwidth at 8 GiB")
    assert results["fabric.all-reduce"].outcome == "fail" and "FAIL: NCCL fell back to TCP sockets" in results["fabric.all-reduce"].detail


def test_given_an_old_nccl_that_only_says_net_socket_when_parsed_then_it_is_a_fallback_too():
    result = parse_all_reduce(nccl_info("h", "NET/OFI Only EFA provider is supported", "NET/IB : No device found.", "NET/Socket : Using [0]ens5:172.31.0.112<0>"))
    assert result.socket_fallback and result.networks == ()
    # but the socket interface line beside a plugin that was chosen is no fallback
    assert not parse_all_reduce(nccl_info("h", "NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network AWS Libfabric")).socket_fallback


def test_given_a_socket_run_on_a_stack_without_efa_then_the_network_passes():
    settings = run_of("multi-node", "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true").settings
    results = by_name(fabric_verdict(settings, parse_all_reduce(healthy_log(init=SOCKET_INIT, busbw=[10.0] * 11)), 0))
    assert results["fabric.network"].outcome == "pass" and "this stack has no EFA" in results["fabric.network"].detail
    # the mark is still the instance type's line rate (preflight's): TCP sockets do not reach it
    assert results["fabric.bus-bandwidth"].outcome == "fail" and "(minimum 200 GB/s" in results["fabric.bus-bandwidth"].detail


def test_given_low_bandwidth_when_judged_then_it_fails_with_the_figure_and_the_mark():
    busbw = [b * 0.28 for b in HEALTHY_BUSBW]
    results = by_name(fabric_verdict(run_of("multi-node").settings, parse_all_reduce(healthy_log(busbw=busbw)), 0))
    assert results["fabric.network"].outcome == "pass" and results["fabric.all-reduce"].outcome == "pass"
    low = results["fabric.bus-bandwidth"]
    assert low.outcome == "fail" and low.detail.startswith(f"{round(busbw[-1], 2):g} GB/s bus bandwidth at 8 GiB across 2 p5.48xlarge nodes (minimum 200 GB/s")
    assert "placement group" in low.remedy


def test_given_no_provider_line_on_an_efa_stack_when_judged_then_the_network_fails():
    init = tuple(line for line in EFA_INIT if "Selected Provider" not in line)
    results = by_name(fabric_verdict(run_of("multi-node").settings, parse_all_reduce(healthy_log(init=init)), 0))
    network = results["fabric.network"]
    assert network.outcome == "fail" and "no 'NET/OFI Selected Provider is efa' line" in network.detail
    assert results["fabric.bus-bandwidth"].outcome == "pass"


def test_given_a_tcp_provider_behind_the_plugin_when_judged_then_the_network_fails():
    init = tuple(line.replace("is efa (found 32 nics)", "is tcp;ofi_rxm") for line in EFA_INIT)
    network = by_name(fabric_verdict(run_of("multi-node").settings, parse_all_reduce(healthy_log(init=init)), 0))["fabric.network"]
    assert network.outcome == "fail" and "provider tcp;ofi_rxm" in network.detail


def test_given_a_truncated_log_when_judged_then_the_run_fails_and_the_bandwidth_is_not_judged():
    log = healthy_log(sizes=SIZES[:7], summary=False) + "\nrlinf-verify-fabric-a1b2c3-1:77:90 [3] transport/net.cc:1200 NCCL WARN NET/OFI Request completed with error\n"
    result = parse_all_reduce(log)
    assert result.truncated and not result.complete and result.rows[-1].size == 512 * 2**20
    results = by_name(fabric_verdict(run_of("multi-node").settings, result, None))
    run = results["fabric.all-reduce"]
    assert run.outcome == "fail" and "did not finish within 2100s" in run.detail and "its table stops at 512 MiB" in run.detail
    assert "NCCL WARN NET/OFI Request completed with error" in run.detail
    assert results["fabric.bus-bandwidth"].outcome == "skip" and "512 MiB, the last size printed" in results["fabric.bus-bandwidth"].detail
    # the same cut log of a pod that exited
    exited = by_name(fabric_verdict(run_of("multi-node").settings, result, 143))["fabric.all-reduce"]
    assert exited.outcome == "fail" and "stops at 512 MiB of 8 GiB, with no summary (exit 143)" in exited.detail


def test_given_a_log_cut_before_the_table_when_judged_then_it_says_no_table_and_why():
    log = "rlinf-eks preflight[pod 0]: FAILED: nvidia-smi lists 7 GPUs; p5.48xlarge has 8\n"
    results = by_name(fabric_verdict(run_of("multi-node").settings, parse_all_reduce(log), 1))
    assert results["fabric.all-reduce"].outcome == "fail"
    assert "printed no all_reduce_perf table (exit 1): rlinf-eks preflight[pod 0]: FAILED: nvidia-smi lists 7 GPUs" in results["fabric.all-reduce"].detail
    assert results["fabric.network"].outcome == "fail" and results["fabric.bus-bandwidth"].outcome == "skip"
    assert by_name(fabric_verdict(run_of("multi-node").settings, None, None))["fabric.all-reduce"].outcome == "fail"


def test_given_one_node_when_judged_then_the_figure_is_nvlinks_and_the_network_is_still_checked():
    settings = run_of("single-node").settings
    results = by_name(fabric_verdict(settings, parse_all_reduce(healthy_log(nodes=1)), 0, nodes=1))
    assert [r.outcome for r in results.values()] == ["pass", "pass", "pass"]
    assert "over the 8 GPUs of one p5.48xlarge node (NVLink, no network hop)" in results["fabric.bus-bandwidth"].detail
    init = tuple(line for line in EFA_INIT if "Selected Provider" not in line)
    assert by_name(fabric_verdict(settings, parse_all_reduce(healthy_log(nodes=1, init=init)), 0, nodes=1))["fabric.network"].outcome == "fail"


def test_given_every_pod_of_the_fabric_job_then_a_worker_that_failed_its_node_check_is_named():
    settings = run_of("multi-node").settings
    healthy = fabric_results(settings, {0: (0, healthy_log()), 1: (0, "rlinf-eks preflight[pod 1]: PASS: ...")})
    assert [r.outcome for r in healthy] == ["pass", "pass", "pass"]
    worker = "rlinf-eks preflight[pod 1]: FAILED: /dev/infiniband has 30 EFA devices; p5.48xlarge has 32 (is the EFA device plugin running on this node?)"
    results = by_name(fabric_results(settings, {0: (143, "rlinf-eks preflight[pod 0]: node OK: 8 GPUs, 32 EFA devices"), 1: (1, worker)}))
    assert results["fabric.pod-1"].outcome == "fail" and "30 EFA devices" in results["fabric.pod-1"].detail
    assert results["fabric.all-reduce"].outcome == "fail"


def test_the_new_exit_codes_are_the_verify_ladders_own():
    assert {smoke.GPUS_MISSING, smoke.RENDER_BROKEN}.isdisjoint(exit_codes.ALL.values())
    assert smoke.GPUS_MISSING != smoke.RENDER_BROKEN and all(79 <= c <= 85 for c in (smoke.GPUS_MISSING, smoke.RENDER_BROKEN))


def test_the_nccl_module_never_raises_on_garbage():
    result = nccl.parse_all_reduce("\x00\n#\n   8  x  float sum -1 a b c d e f g h\nNCCL INFO Using network\n")
    assert result.rows == () and result.max_size_busbw is None and result.truncated
