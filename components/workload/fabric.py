"""Fail fast on the fabric: a node whose EFA is missing fails its pod at once, never trains on TCP.

Two parts, on EFA nodes only (the catalog's EFA count > 0 and ``gpuNodes.efa``):

1. **NCCL pinned to the plugin** (:func:`nccl_env`). ``NCCL_NET="AWS Libfabric"`` makes NCCL use
   aws-ofi-nccl or fail: NCCL skips every network whose name differs and, when none is left
   (plugin missing, or its init found no EFA device), returns ncclInvalidUsage ("Error: network
   AWS Libfabric not found.", NVIDIA/nccl src/net.cc ``ncclNetInit``) instead of falling back to
   sockets. aws-ofi-nccl <= 1.11 names itself "AWS Libfabric"; later releases name themselves
   "Libfabric" but take that name back when NCCL_NET asks for it (aws-ofi-nccl's
   ``nvidia_plugin_name_fixup``, kept because scripts set "AWS Libfabric"), so one value fits both.
   ``FI_PROVIDER=efa`` (pod.network_env) already keeps libfabric off its TCP providers.
2. **A fabric check before anything else** (:func:`fabric_check_container`): the first init
   container of every Ray pod, in the training image (which carries libfabric and aws-ofi-nccl),
   counts the EFA devices the EFA device plugin mounted, asks libfabric for its efa domains
   (``fi_info -p efa -t FI_EP_RDM``, under a timeout) and looks for the NCCL net plugin library.
   Any miss fails the pod within a minute with ``exit_codes.FABRIC_FAILED`` and one line naming
   what is missing, before the model is staged or Ray starts. NCCL_NET alone would fail only at
   the trainer's first collective, minutes later.

Then torch's NCCL error handling (:func:`nccl_timeout_env`): a collective that errors or times
out (the trainer's process-group timeout) tears the process down rather than leaving it hung.
"""

from __future__ import annotations

from ..config import StackSettings
from . import exit_codes, scripts
from .pod import SCRIPTS_DIR, RayPodShape, core

FABRIC_CHECK_SCRIPT = "fabric-check.sh"
NCCL_NET = "AWS Libfabric"
# fi_info answers in well under a second on a healthy node; a hung driver must not hold the pod.
FI_INFO_TIMEOUT_SECONDS = 15
# Where EFA installer and the DLAMI / awsome-distributed-training images put aws-ofi-nccl.
PLUGIN_DIRS = "/opt/amazon/ofi-nccl/lib /opt/amazon/ofi-nccl/lib64 /opt/aws-ofi-nccl/lib /usr/local/lib /usr/lib/x86_64-linux-gnu"

FABRIC_CHECK = scripts.body("fabric-check.sh")


def efa_enabled(settings: StackSettings) -> bool:
    return settings.gpu_nodes.efa and settings.gpu_nodes.instance.efa_capable


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


def fabric_check_script(settings: StackSettings, *, shape: RayPodShape, fi_info_timeout_seconds: int = FI_INFO_TIMEOUT_SECONDS) -> str:
    return scripts.render(
        {
            "INSTANCE_TYPE": settings.gpu_nodes.instance.name,
            "IMAGE": settings.workload.image,
            "EFA_PER_NODE": shape.efa,
            "FI_INFO_TIMEOUT_SECONDS": fi_info_timeout_seconds,
            "PLUGIN_DIRS": PLUGIN_DIRS,
            "NCCL_NET": NCCL_NET,
            "EXIT_FABRIC_FAILED": exit_codes.FABRIC_FAILED,
        },
        FABRIC_CHECK,
    )


def fabric_check_container(
    settings: StackSettings, *, resources: core.ResourceRequirementsArgs, mounts: list[core.VolumeMountArgs], env: list[core.EnvVarArgs]
) -> core.ContainerArgs:
    """The first init container: the Ray container's image, EFA devices (the kubelet hands an
    init container's devices on to the app containers) and environment (LD_LIBRARY_PATH)."""
    return core.ContainerArgs(
        name="fabric-check",
        image=settings.workload.image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/{FABRIC_CHECK_SCRIPT}"],
        env=env,
        resources=resources,
        volume_mounts=mounts,
        # fi_info only queries the devices: no memory to pin, so no IPC_LOCK
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(drop=["NET_RAW"])
        ),
    )
