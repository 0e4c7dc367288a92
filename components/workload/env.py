"""The environment of the Ray containers: the seed's variables, the trainer's startup environment
(its recipe's, per rollout backend), the network's (EFA, NCCL, torch's NCCL error handling), the
trainer dialect's and the user's, and the secrets by reference.

**NCCL pinned to the plugin** (:func:`nccl_env`, EFA runs only). ``NCCL_NET="AWS Libfabric"``
makes NCCL use aws-ofi-nccl or fail: NCCL skips every network whose name differs and, when none is
left (plugin missing, or its init found no EFA device), returns ncclInvalidUsage ("Error: network
AWS Libfabric not found.", NVIDIA/nccl src/net.cc ``ncclNetInit``) instead of falling back to
sockets. aws-ofi-nccl <= 1.11 names itself "AWS Libfabric"; later releases name themselves
"Libfabric" but take that name back when NCCL_NET asks for it (aws-ofi-nccl's
``nvidia_plugin_name_fixup``, kept because scripts set "AWS Libfabric"), so one value fits both.
``FI_PROVIDER=efa`` (:func:`network_env`) keeps libfabric off its TCP providers. NCCL_NET alone
fails only at the trainer's first collective: the fabric check (:mod:`.fabric`) fails the pod
before anything starts.

**torch's NCCL error handling** (:func:`nccl_timeout_env`): a collective that errors or times out
(the trainer's process-group timeout) tears the process down rather than leaving it hung.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ..config import StackSettings
from ..trainers import startup_env
from .kube import core
from .run import RunPaths, efa_enabled

SEED_ENV = {
    "NCCL_DEBUG": "WARN",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
}
"""The seed's variables for every pod. Its allocator setting (PYTORCH_CUDA_ALLOC_CONF) is not
here: it is a fact of the dialect and its rollout backend (the recipe's ``startup.environment``,
:func:`startup_env`), set only where upstream's run script sets it. Fatal to RLinf's vLLM rollout
in sleep mode, and, with RLinf's same-GPU CUDA IPC between Ray workers, a ``pidfd_getfd`` that pods
without CAP_SYS_PTRACE are refused (recipes/rlinf-embodied.yaml says why it is left out there
rather than the capability added)."""
UNBUFFERED_ENV = {"PYTHONUNBUFFERED": "1"}
"""Every Python process of the pod (the trainer, its Ray workers, the checks) writes stdout and
stderr as it goes. Piped, Python buffers its output in blocks; the progress supervisor
(:mod:`.progress`) counts a trainer silent for ``workload.progressTimeoutSeconds`` as hung, and a
block that never fills reads as that silence. Upstream's veRL command runs ``python -u`` for this;
the variable does the same for every dialect's command and for each Ray worker, which inherits the
pod's environment (and the RayJob's runtime env, built from the same variables)."""
SOCKET_INTERFACE = "eth0"  # the VPC CNI's pod interface
NCCL_NET = "AWS Libfabric"

SECRET_ENV = {"hf_token": "HF_TOKEN", "wandb_api_key": "WANDB_API_KEY"}
"""Secret config value -> the variable the trainer's libraries read (huggingface_hub, wandb)."""


def nccl_env(settings: StackSettings) -> dict[str, str]:
    """NCCL pinned to aws-ofi-nccl on EFA nodes (module docstring), nothing elsewhere."""
    return {"NCCL_NET": NCCL_NET} if efa_enabled(settings) else {}


def nccl_timeout_env(settings: StackSettings) -> dict[str, str]:
    """torch ProcessGroupNCCL (docs: "PYTORCH ProcessGroupNCCL Environment Variables"): 1 aborts
    the communicator and tears the process down on an error or timeout (the default, 3, skips the
    abort, and a communicator stuck in a kernel can then block the teardown); the monitoring
    thread kills a process whose watchdog thread is itself stuck."""
    return {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_ENABLE_MONITORING": "1",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": str(settings.workload.nccl_heartbeat_timeout_seconds),
    }


def network_env(settings: StackSettings) -> dict[str, str]:
    """EFA / NCCL variables (field notes, sections 1 and 3)."""
    env = {
        "NCCL_SOCKET_IFNAME": SOCKET_INTERFACE,
        "GLOO_SOCKET_IFNAME": SOCKET_INTERFACE,
        "RLINF_COMM_NET_DEVICES": SOCKET_INTERFACE,
    }
    if efa_enabled(settings):
        env["FI_PROVIDER"] = "efa"
        # libfabric registers memory that a fork()ed child could corrupt: Ray and dataloaders fork
        env["FI_EFA_FORK_SAFE"] = "1"
        if settings.gpu_nodes.instance.gpudirect_rdma:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    env.update(nccl_env(settings))
    env.update(nccl_timeout_env(settings))
    return env


def plain_env(settings: StackSettings, trainer_env: Mapping[str, str], paths: RunPaths) -> dict[str, str]:
    """Every plain (non-secret) variable of the Ray pods, in precedence order: the seed's, unbuffered
    Python (:data:`UNBUFFERED_ENV`), the trainer's startup environment for its rollout backend (its
    recipe's), the network's, the trainer dialect's, then ``workload.env`` (the user wins; one the
    trainer refuses is refused when the stack loads). PYTHONPATH is left out: the launchers prepend
    the trainer's checkout to the image's own PYTHONPATH."""
    env: dict[str, str] = {**SEED_ENV, **UNBUFFERED_ENV, **startup_env(settings), **network_env(settings)}
    if settings.workload.mlflow_tracking_uri:
        env["MLFLOW_TRACKING_URI"] = settings.workload.mlflow_tracking_uri
    env["RLINF_RUN_DIR"] = paths.root
    if settings.observability_backend == "prometheus":
        # the Ray dashboard's metrics charts: it queries Prometheus and embeds Grafana's panels,
        # which the browser loads from the Grafana port-forward (docs/observability.md)
        prometheus = settings.observability.prometheus
        env["RAY_PROMETHEUS_HOST"] = prometheus.prometheus_url
        env["RAY_GRAFANA_HOST"] = prometheus.grafana_url
        env["RAY_GRAFANA_IFRAME_HOST"] = "http://localhost:3000"
    env.update({k: v for k, v in trainer_env.items() if k != "PYTHONPATH"})
    env.update({k: v for k, v in settings.workload.env.items() if k != "PYTHONPATH"})
    return env


def trainer_pythonpath(settings: StackSettings, trainer_env: Mapping[str, str]) -> str:
    """The trainer's checkout first (the seed's ``/workspace``), then what the user adds."""
    parts = [trainer_env.get("PYTHONPATH") or settings.workload.trainer.workdir]
    if settings.workload.env.get("PYTHONPATH"):
        parts.append(settings.workload.env["PYTHONPATH"])
    return ":".join(parts)


def env_vars(plain: Mapping[str, str], secret_name: Optional[str], secret_keys: Sequence[str]) -> list[core.EnvVarArgs]:
    """Plain variables by value; secrets only by reference to the Kubernetes Secret."""
    env = [core.EnvVarArgs(name=k, value=v) for k, v in plain.items()]
    for key in secret_keys:
        env.append(
            core.EnvVarArgs(
                name=key,
                value_from=core.EnvVarSourceArgs(secret_key_ref=core.SecretKeySelectorArgs(name=secret_name, key=key)),
            )
        )
    return env
