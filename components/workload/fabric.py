"""Fail fast on the fabric: a node whose EFA is missing fails its pod at once, never trains on TCP.

On EFA runs (:func:`.run.efa_enabled`, so the pod shape's EFA count > 0), in two parts:

1. **NCCL pinned to the plugin**: ``NCCL_NET="AWS Libfabric"`` and ``FI_PROVIDER=efa`` in every
   Ray container (:mod:`.env` says why): NCCL uses aws-ofi-nccl or fails, never sockets.
2. **A fabric check before anything else** (:func:`fabric_check_container`): the first init
   container of every Ray pod, in the training image (which carries libfabric and aws-ofi-nccl),
   counts the EFA devices the EFA device plugin mounted, asks libfabric for its efa domains
   (``fi_info -p efa -t FI_EP_RDM``, under a timeout) and looks for the NCCL net plugin library.
   Any miss fails the pod within a minute with ``exit_codes.FABRIC_FAILED`` and one line naming
   what is missing, before the model is staged or Ray starts. NCCL_NET alone would fail only at
   the trainer's first collective, minutes later.
"""

from __future__ import annotations

from ..config import StackSettings
from . import exit_codes, scripts
from .env import NCCL_NET
from .kube import SCRIPTS_DIR, core
from .run import RayPodShape

FABRIC_CHECK_SCRIPT = "fabric-check.sh"
# fi_info answers in well under a second on a healthy node; a hung driver must not hold the pod.
FI_INFO_TIMEOUT_SECONDS = 15
# Where EFA installer and the DLAMI / awsome-distributed-training images put aws-ofi-nccl.
PLUGIN_DIRS = "/opt/amazon/ofi-nccl/lib /opt/amazon/ofi-nccl/lib64 /opt/aws-ofi-nccl/lib /usr/local/lib /usr/lib/x86_64-linux-gnu"

FABRIC_CHECK = scripts.body("fabric-check.sh")


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
