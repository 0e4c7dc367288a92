"""The optional preflight: an init container of every training pod that must pass before the
trainer's container starts (Kubernetes starts app containers only after every init container
succeeded).

Design (``preflight.enabled``, image ``preflight.image``, an nccl-tests image such as
awsome-distributed-training's, which carries Open MPI, libfabric, aws-ofi-nccl, sshd and
``/opt/nccl-tests/build/all_reduce_perf``):

1. Every pod checks its own node: ``nvidia-smi -L`` lists the catalog's GPU count, and
   ``/dev/infiniband/uverbs*`` (the EFA device plugin mounts one per allocated interface) plus
   ``fi_info -p efa`` show the catalog's EFA count.
2. With more than one node (manual launcher), the pods measure ``all_reduce_perf`` across the
   nodes. nccl-tests spans nodes only through MPI, and Open MPI starts remote ranks over ssh
   (awsome-distributed-training runs it as a Kubeflow MPIJob; this project installs no MPI
   operator). So each pod's init container runs sshd on port 2222; pod 0 generates a one-run key
   on the shared filesystem (always present with more than one node, and reachable only by the
   training pods' claim) under ``.preflight/<Job uid>``, waits for every worker's sshd, runs
   ``mpirun`` over ``training-<i>.training-svc``, writes PASS or FAIL there and deletes the key.
   Workers wait for that verdict and exit with it. It fails when NCCL fell back to TCP sockets or
   when the bus bandwidth at the largest message size is below
   ``preflight.minBusBandwidthFraction`` x the instance type's line rate (Gbps / 8 = GB/s).
3. The KubeRay launcher runs step 1 only (its worker pods have no stable names to ssh to).

A failed preflight fails its pod, so (backoffLimit 0) the Job fails before any trainer starts.
"""

from __future__ import annotations

from typing import Optional

from ..config import StackSettings
from . import scripts
from .kube import SCRIPTS_DIR, core
from .run import RayPodShape

SSH_PORT = 2222
PREFLIGHT_SCRIPT = "preflight.sh"

PREFLIGHT = scripts.body("preflight.sh")


def min_bus_bandwidth_gbps(settings: StackSettings) -> float:
    """The pass mark in GB/s: the configured fraction of the instance type's line rate."""
    return round(settings.preflight.min_bus_bandwidth_fraction * settings.gpu_nodes.instance.bandwidth_gbps / 8, 3)


def preflight_script(
    settings: StackSettings,
    *,
    shape: RayPodShape,
    nnodes: int,
    host_prefix: str,
    service: str,
    exchange_dir: Optional[str],
) -> str:
    """preflight.sh; ``exchange_dir`` (on the shared filesystem) enables the all-reduce step."""
    instance = settings.gpu_nodes.instance
    return scripts.render(
        {
            "INSTANCE_TYPE": instance.name,
            "NNODES": nnodes,
            "GPUS_PER_NODE": shape.pod.gpus,
            "EFA_PER_NODE": shape.efa,
            "GPUDIRECT_RDMA": int(bool(shape.efa and instance.gpudirect_rdma)),
            "LINE_RATE_GBPS": instance.bandwidth_gbps,
            "MIN_BUS_BANDWIDTH_FRACTION": settings.preflight.min_bus_bandwidth_fraction,
            "MIN_BUS_BANDWIDTH_GBPS": min_bus_bandwidth_gbps(settings),
            "JOIN_TIMEOUT_SECONDS": settings.workload.join_timeout_seconds,
            "HOST_PREFIX": host_prefix,
            "SERVICE": service,
            "SSH_PORT": SSH_PORT,
            "EXCHANGE_DIR": exchange_dir or "",
        },
        PREFLIGHT,
    )


def preflight_container(
    settings: StackSettings,
    *,
    resources: core.ResourceRequirementsArgs,
    mounts: list[core.VolumeMountArgs],
) -> core.ContainerArgs:
    """The init container: the Ray container's GPUs, EFA devices and memory (init containers'
    requests count as max(init, sum of app containers), so this adds nothing to the pod)."""
    return core.ContainerArgs(
        name="preflight",
        image=settings.preflight.image,
        command=["/bin/bash", f"{SCRIPTS_DIR}/{PREFLIGHT_SCRIPT}"],
        env=[
            core.EnvVarArgs(
                name="RUN_ID",
                # one exchange directory per Job run (label set by the Job controller, k8s >= 1.27)
                value_from=core.EnvVarSourceArgs(
                    field_ref=core.ObjectFieldSelectorArgs(field_path="metadata.labels['batch.kubernetes.io/controller-uid']")
                ),
            ),
        ],
        resources=resources,
        volume_mounts=mounts,
        # sshd and IPC_LOCK for libfabric; still not privileged
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False, capabilities=core.CapabilitiesArgs(add=["IPC_LOCK"], drop=["NET_RAW"])
        ),
    )

