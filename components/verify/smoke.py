"""L3 of the verify ladder, node smoke: one short Job per GPU node, in the training image, with all of
the node's GPUs and EFA devices, that runs what the run's pods would meet first, in their order:

1. the run's image check (:mod:`rlinf_eks.workload.image_check`, ``image-check.sh``: the image
   contract, exit ``exit_codes.IMAGE_BROKEN``);
2. on EFA stacks, the run's fabric check (:mod:`rlinf_eks.workload.fabric`, ``fabric-check.sh``:
   EFA devices, libfabric's efa domains, aws-ofi-nccl; exit ``exit_codes.FABRIC_FAILED``);
3. ``nvidia-smi -L`` lists the instance type's GPU count (exit :data:`GPUS_MISSING`);
4. for the dialects whose simulators render (:data:`RENDER_DIALECTS`: ManiSkill and LIBERO render
   headless on the GPU), the render check (``sh/render-check.sh``): the graphics driver capability,
   a Vulkan or EGL ICD file, one offscreen EGL context on the GPU (exit :data:`RENDER_BROKEN`).

The scripts are the run's own renderings (nothing retyped): the pod fails on this node exactly as a
training pod would, minutes before a run and without its GPU hours. Objects are plain API dicts
(camelCase) for the verify client to create; checks are pure: :func:`smoke_verdict` reads one pod's
exit status and log. Every object carries :data:`MANAGED_BY` and ``rlinf-eks/verify-run: <run_id>``
(the client finds, waits for and deletes them by those).

Shared with :mod:`.fabric` (L4): the labels, names, node pinning and the ``sh/`` bodies.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any, Mapping, Optional, Sequence

from ..scheduling import GPU_RESOURCE, gpu_toleration
from ..workload import exit_codes, scripts
from ..workload.env import env_vars, plain_env
from ..workload.fabric import FABRIC_CHECK_SCRIPT, fabric_check_script
from ..workload.image_check import IMAGE_CHECK_SCRIPT, image_check_script
from ..workload.image_contract import DOCKERFILES, contract_for
from ..workload.kube import SCRIPTS_DIR, core, cpu, guaranteed, meta, mi, security_context, to_manifest
from ..workload.run import Run
from ..workload.template import accelerator_quantities
from .model import CheckResult, failed, passed

LEVEL = 3

# --- what every verify object carries -------------------------------------------------------------

MANAGED_BY = "rlinf-eks-verify"
"""``app.kubernetes.io/managed-by`` of every object the verify ladder creates."""
RUN_LABEL = "rlinf-eks/verify-run"
"""The verify run's id: the client selects, waits for and deletes its objects by it."""
LEVEL_LABEL = "rlinf-eks/verify-level"
NODE_ANNOTATION = "rlinf-eks/verify-node"
"""The node a smoke Job is pinned to (an annotation: node names can be longer than a label value)."""
NODE_ENV = "RLINF_VERIFY_NODE"
NAME_PREFIX = "rlinf-verify"
TTL_SECONDS_AFTER_FINISHED = 3600
"""Finished Jobs (and their pods, with the logs) stay an hour for the client to read, then go."""

_RUN_ID = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MAX = 63


def check_run_id(run_id: str) -> str:
    """``run_id`` is used in object names and as a label value: lowercase letters, digits, '-'."""
    if not _RUN_ID.fullmatch(run_id or ""):
        raise ValueError(f"verify run id {run_id!r}: lowercase letters, digits and '-', starting and ending with a letter or digit")
    return run_id


def object_name(check: str, run_id: str, index: Optional[int] = None, *, reserve: int = 0) -> str:
    """``rlinf-verify-<check>-<run_id>[-<index>]``; ``reserve``: characters Kubernetes appends (an
    Indexed Job's pod hostname ``<job>-<index>``). Raises ValueError beyond a DNS label (63)."""
    name = f"{NAME_PREFIX}-{check}-{check_run_id(run_id)}" + ("" if index is None else f"-{index}")
    if len(name) + reserve > _DNS_LABEL_MAX:
        raise ValueError(f"verify run id {run_id!r} is too long: {name!r} (+{reserve}) exceeds {_DNS_LABEL_MAX} characters")
    return name


def verify_labels(run_id: str, level: int, component: str) -> dict[str, str]:
    """The labels of every object (and pod) of one level of one verify run."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": "rlinf-eks",
        "app.kubernetes.io/component": component,
        RUN_LABEL: check_run_id(run_id),
        LEVEL_LABEL: str(level),
    }


def pinned_to(nodes: Sequence[str]) -> core.AffinityArgs:
    """A required node affinity on the nodes' *names* (``matchFields metadata.name``, as the
    DaemonSet controller pins its pods): exact whatever the ``kubernetes.io/hostname`` label says,
    and unlike ``nodeName`` it goes through the scheduler, so a node whose GPUs are taken leaves the
    pod Pending (the client reports it unschedulable) instead of failing it at admission.

    One node selector term per node (the terms are ORed): the API server takes exactly one value
    under a ``matchFields`` requirement ("must be only one value when `operator` is 'In' or 'NotIn'
    for node field selector"), so N nodes cannot share one term's ``values``."""
    return core.AffinityArgs(
        node_affinity=core.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=core.NodeSelectorArgs(
                node_selector_terms=[
                    core.NodeSelectorTermArgs(
                        match_fields=[core.NodeSelectorRequirementArgs(key="metadata.name", operator="In", values=[node])]
                    )
                    for node in nodes
                ]
            )
        )
    )


def check_nodes(nodes: Sequence[str]) -> list[str]:
    names = list(nodes)
    if not names:
        raise ValueError("no GPU nodes to verify")
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"GPU node names must be distinct and non-empty: {names}")
    return names


@functools.cache
def body(name: str) -> str:
    """The body ``sh/<name>`` of this package (rendered as the workload's scripts are:
    :func:`rlinf_eks.workload.scripts.render` puts the quoted values above it)."""
    return "\n" + resources.files(__package__).joinpath("sh").joinpath(name).read_text(encoding="utf-8")


def config_map(name: str, namespace: str, labels: Mapping[str, str], data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": to_manifest(meta.ObjectMetaArgs(name=name, namespace=namespace, labels=dict(labels))),
        "data": dict(data),
    }


def scripts_volume(config_map_name: str) -> tuple[core.VolumeArgs, core.VolumeMountArgs]:
    """The scripts ConfigMap, mounted where the run mounts its launch ConfigMap."""
    return (
        core.VolumeArgs(name="scripts", config_map=core.ConfigMapVolumeSourceArgs(name=config_map_name, default_mode=0o555)),
        core.VolumeMountArgs(name="scripts", mount_path=SCRIPTS_DIR, read_only=True),
    )


def capped_quantities(run: Run, *, millicpu: int, memory_mib: int) -> dict[str, str]:
    """``millicpu`` and ``memory_mib`` (never more than the run's own pod has: what fits the run
    fits this) and every accelerator of the node, as the run's pod asks for them (GPUs, EFA
    devices, 2 MiB hugepages)."""
    shape = run.shape
    return {
        "cpu": cpu(min(millicpu, shape.ray_millicpu)),
        "memory": mi(min(memory_mib, shape.ray_memory_mib)),
        **accelerator_quantities(shape),
    }


# --- L3 --------------------------------------------------------------------------------------------

SMOKE_SCRIPT = "smoke.sh"
RENDER_CHECK_SCRIPT = "render-check.sh"

GPUS_MISSING = 81
"""``nvidia-smi -L`` is missing, fails, or lists fewer (or more) GPUs than the instance type has.
Chosen outside :mod:`rlinf_eks.workload.exit_codes`' statuses (3, 90-94, 143), the launch scripts'
86, what bash and Python use for themselves (1, 2, 126, 127, 128+n) and ``sysexits.h`` (64-78)."""
RENDER_BROKEN = 82
"""The render check failed: no graphics capability, no Vulkan/EGL ICD file, or no offscreen EGL
context on the GPU (same choice of range as :data:`GPUS_MISSING`)."""

RENDER_DIALECTS = frozenset({"rlinf-embodied", "verl-ppo"})
"""The dialects whose environments render headless on the GPU: RLinf embodied (ManiSkill through
SAPIEN's Vulkan renderer; its recipe sets MUJOCO_GL=egl for the MuJoCo ones) and verl-ppo
(SimpleVLA-RL's LIBERO: robosuite renders with MuJoCo on EGL). rlinf-reasoning renders nothing."""
ICD_FILES = (
    "/usr/share/vulkan/icd.d/nvidia_icd.json",
    "/etc/vulkan/icd.d/nvidia_icd.json",
    "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
)
"""Where the NVIDIA container toolkit (graphics capability) or the image puts the driver's Vulkan
ICD and glvnd's EGL vendor file; at least one must be in the container."""
EGL_LIBRARY = "libEGL.so.1"
"""glvnd's libEGL (libegl1), which dispatches to the NVIDIA EGL vendor library."""
EGL_TIMEOUT_SECONDS = 60
NVIDIA_SMI_TIMEOUT_SECONDS = 60
SMOKE_DEADLINE_SECONDS = 600
"""The Job's activeDeadlineSeconds: pulling the training image onto a fresh node is most of it."""
SMOKE_MILLICPU = 4000
SMOKE_MEMORY_MIB = 16 * 1024
"""The imports of the image check run one python3 at a time (vLLM or TensorFlow with torch take about 1 GiB)."""


def renders(run: Run) -> bool:
    """The run's dialect renders (:data:`RENDER_DIALECTS`)."""
    return run.settings.workload.trainer.dialect in RENDER_DIALECTS


def render_check_script(
    dialect: str, *, root: str = "", egl_library: str = EGL_LIBRARY, timeout_seconds: int = EGL_TIMEOUT_SECONDS
) -> str:
    """render-check.sh. ``root``: a directory standing for the container's / (tests run the script
    against fake roots), ``egl_library``: the libEGL to open (tests: a fake one); empty and
    :data:`EGL_LIBRARY` in the pods."""
    return scripts.render(
        {
            "DIALECT": dialect,
            "DOCKERFILE": DOCKERFILES.get(dialect, "the image's Dockerfile"),
            "ICD_FILES": " ".join(ICD_FILES),
            "ROOT": root,
            "EGL_LIBRARY": egl_library,
            "EGL_TIMEOUT_SECONDS": timeout_seconds,
            "EXIT_RENDER_BROKEN": RENDER_BROKEN,
        },
        body(RENDER_CHECK_SCRIPT),
    )


def smoke_script(run: Run, *, scripts_dir: str = SCRIPTS_DIR) -> str:
    """smoke.sh: the driver that runs the others from the ConfigMap (mounted at ``scripts_dir``;
    tests run it from a directory of their own), in order."""
    settings = run.settings
    return scripts.render(
        {
            "INSTANCE_TYPE": settings.gpu_nodes.instance.name,
            "IMAGE": settings.workload.image,
            "GPUS_PER_NODE": run.shape.pod.gpus,
            "EFA_PER_NODE": run.shape.efa,
            "RENDER": int(renders(run)),
            "SCRIPTS_DIR": scripts_dir,
            "NVIDIA_SMI_TIMEOUT_SECONDS": NVIDIA_SMI_TIMEOUT_SECONDS,
            "EXIT_GPUS_MISSING": GPUS_MISSING,
        },
        body(SMOKE_SCRIPT),
    )


def smoke_scripts(run: Run) -> dict[str, str]:
    """The smoke ConfigMap's files: the run's image check (and fabric check on EFA stacks), the
    render check for the rendering dialects, and the driver."""
    files = {SMOKE_SCRIPT: smoke_script(run), IMAGE_CHECK_SCRIPT: image_check_script(contract_for(run))}
    if run.shape.efa:
        files[FABRIC_CHECK_SCRIPT] = fabric_check_script(run.settings, shape=run.shape)
    if renders(run):
        files[RENDER_CHECK_SCRIPT] = render_check_script(run.settings.workload.trainer.dialect)
    return files


def smoke_objects(run: Run, nodes: list[str], *, namespace: str, run_id: str) -> list[dict]:
    """The ConfigMap of the scripts, then one Job per node (``rlinf-verify-smoke-<run_id>-<i>``,
    ``i`` the node's index in ``nodes``), pinned to it, tolerating the GPU taint, with the node's GPUs,
    EFA devices and hugepages (as the run's pod), the run's plain environment (the network's
    FI_PROVIDER and NCCL variables, the dialect's MUJOCO_GL, ``workload.env``), ``backoffLimit: 0``,
    :data:`SMOKE_DEADLINE_SECONDS` and :data:`TTL_SECONDS_AFTER_FINISHED`."""
    nodes = check_nodes(nodes)
    settings = run.settings
    labels = verify_labels(run_id, LEVEL, "verify-smoke")
    name = object_name("smoke", run_id)
    # each Job's name (and the job-name label the Job controller puts on its pods) is a DNS label
    names = [object_name("smoke", run_id, i) for i in range(len(nodes))]
    volume, mount = scripts_volume(name)
    env = plain_env(settings, run.launch.env, run.paths)
    objects: list[dict[str, Any]] = [config_map(name, namespace, labels, smoke_scripts(run))]
    for job_name, node in zip(names, nodes):
        container = core.ContainerArgs(
            name="smoke",
            image=settings.workload.image,
            command=["/bin/bash", f"{SCRIPTS_DIR}/{SMOKE_SCRIPT}"],
            env=env_vars({**env, NODE_ENV: node}, None, []),
            resources=guaranteed(capped_quantities(run, millicpu=SMOKE_MILLICPU, memory_mib=SMOKE_MEMORY_MIB)),
            volume_mounts=[mount],
            # the Ray container's: IPC_LOCK for libfabric (fi_info opens the devices), not privileged
            security_context=security_context(),
        )
        annotations = {NODE_ANNOTATION: node}
        spec = core.PodSpecArgs(
            restart_policy="Never",
            affinity=pinned_to([node]),
            tolerations=[core.TolerationArgs(**gpu_toleration())],
            automount_service_account_token=False,
            enable_service_links=False,
            termination_grace_period_seconds=10,
            containers=[container],
            volumes=[volume],
        )
        job_spec = {
            "backoffLimit": 0,
            "activeDeadlineSeconds": SMOKE_DEADLINE_SECONDS,
            "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
            "template": {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": to_manifest(spec)},
        }
        objects.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": to_manifest(meta.ObjectMetaArgs(name=job_name, namespace=namespace, labels=dict(labels), annotations=annotations)),
                "spec": job_spec,
            }
        )
    return objects


# --- the verdict -----------------------------------------------------------------------------------

_MEANINGS: dict[int, tuple[str, str]] = {
    exit_codes.IMAGE_BROKEN: (
        "image broken",
        "rebuild workload.image so that it satisfies the image contract (python -m rlinf_eks image-contract STACK; docs/training-images-and-recipes.md)",
    ),
    exit_codes.FABRIC_FAILED: (
        "EFA fabric not usable",
        "check the EFA device plugin pod on this node and fi_info -p efa on it; cordon and replace the node if its EFA interfaces are missing",
    ),
    GPUS_MISSING: (
        "GPUs missing",
        "check the NVIDIA device plugin pod on this node and nvidia-smi on the host; cordon and replace the node if a GPU is gone",
    ),
    RENDER_BROKEN: (
        "headless rendering broken",
        "set NVIDIA_DRIVER_CAPABILITIES=all (or compute,utility,graphics) and install libEGL (libglvnd) in the image; "
        "the node's NVIDIA container toolkit must mount the graphics libraries",
    ),
    exit_codes.STOPPED: ("stopped (deleted, evicted or past the deadline)", "run verify again; if it recurs, kubectl describe the pod"),
    137: ("killed (out of memory, or past the deadline)", "kubectl describe the pod: OOMKilled means the checks needed more memory than the Job asked for"),
    126: ("the smoke script could not be executed", "the image's /bin/bash cannot run the mounted scripts: rebuild workload.image"),
    127: ("a command was not found (bash?)", "the image needs /bin/bash and the tools of the image contract: rebuild workload.image"),
}
NOT_FINISHED = (
    "did not finish within the deadline: never scheduled (another pod holds the node's GPUs, a taint, the node is gone) "
    "or the image pull took too long"
)


def last_meaningful_line(log: str, limit: int = 300) -> str:
    """The line that says why: the last FAILED line of the project's scripts, else the last
    non-blank line (cut to ``limit`` characters)."""
    lines = [line.strip() for line in (log or "").splitlines() if line.strip()]
    failing = [line for line in lines if "FAILED" in line]
    line = (failing or lines or [""])[-1]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def smoke_verdict(node: str, exit_code: Optional[int], log: str) -> CheckResult:
    """One line for one node: pass, or fail with what the exit status means, the last meaningful log
    line and what to do. ``exit_code`` None: the pod did not finish in time (or never ran)."""
    name = f"smoke.{node}"
    line = last_meaningful_line(log)
    if exit_code == 0:
        return passed(LEVEL, name, f"{node}: {line}" if line else f"{node}: smoke checks passed")
    if exit_code is None:
        detail = f"{node}: {NOT_FINISHED}" + (f"; last: {line}" if line else "")
        return failed(
            LEVEL,
            name,
            detail,
            f"kubectl describe pods -l {RUN_LABEL}=<run id> for Insufficient {GPU_RESOURCE}, taints or ImagePull events; "
            "stop whatever holds the GPUs, or run verify again once the image is pulled",
        )
    what, remedy = _MEANINGS.get(exit_code, (f"failed with exit status {exit_code}", "kubectl logs the pod for the whole output"))
    return failed(LEVEL, name, f"{node}: {what} (exit {exit_code})" + (f": {line}" if line else ""), remedy)
