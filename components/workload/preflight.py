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
from .pod import SCRIPTS_DIR, RayPodShape, core

SSH_PORT = 2222
PREFLIGHT_SCRIPT = "preflight.sh"

PREFLIGHT = r"""
set -uo pipefail
export PATH="/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:${PATH}"
index="${JOB_COMPLETION_INDEX:-0}"
log() { echo "rlinf-eks preflight[pod ${index}]: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${gpus}" -eq "${GPUS_PER_NODE}" ] || fail "nvidia-smi lists ${gpus} GPUs; ${INSTANCE_TYPE} has ${GPUS_PER_NODE}"
efa=0
if [ "${EFA_PER_NODE}" -gt 0 ]; then
  efa=$(ls -1 /dev/infiniband/ 2>/dev/null | grep -c '^uverbs')
  [ "${efa}" -eq "${EFA_PER_NODE}" ] || fail "/dev/infiniband has ${efa} EFA devices; ${INSTANCE_TYPE} has ${EFA_PER_NODE} (is the EFA device plugin running on this node?)"
  domains=$(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c 'domain:')
  [ "${domains}" -ge "${EFA_PER_NODE}" ] || fail "fi_info -p efa shows ${domains} EFA domains; ${INSTANCE_TYPE} has ${EFA_PER_NODE}"
fi
log "node OK: ${gpus} GPUs, ${efa} EFA devices"
if [ "${NNODES}" -le 1 ] || [ -z "${EXCHANGE_DIR}" ]; then
  log "no inter-node all-reduce to measure here"
  exit 0
fi

dir="${EXCHANGE_DIR}/${RUN_ID:?}"
deadline=$(( SECONDS + JOIN_TIMEOUT_SECONDS ))
mkdir -p /root/.ssh /run/sshd && chmod 700 /root/.ssh
if [ "${index}" = 0 ]; then
  (umask 077; mkdir -p "${dir}" && ssh-keygen -q -t ed25519 -N '' -C rlinf-preflight -f "${dir}/id_ed25519") || fail "cannot create the preflight key under ${dir}"
else
  until [ -s "${dir}/id_ed25519.pub" ]; do
    [ "${SECONDS}" -lt "${deadline}" ] || fail "pod 0 did not publish the preflight key under ${dir} within ${JOIN_TIMEOUT_SECONDS}s"
    sleep 5
  done
fi
cp "${dir}/id_ed25519.pub" /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
ssh-keygen -A >/dev/null
/usr/sbin/sshd -p "${SSH_PORT}" -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no -o StrictModes=no || fail "sshd did not start"

if [ "${index}" != 0 ]; then
  until [ -s "${dir}/result" ]; do
    [ "${SECONDS}" -lt "$(( deadline + 1800 ))" ] || fail "no verdict from pod 0 under ${dir}"
    sleep 5
  done
  log "$(cat "${dir}/result")"
  grep -q '^PASS' "${dir}/result" || exit 1
  exit 0
fi

cp "${dir}/id_ed25519" /root/.ssh/id_ed25519 && chmod 600 /root/.ssh/id_ed25519
ssh_opts="-p ${SSH_PORT} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=5"
hosts="${HOST_PREFIX}-0.${SERVICE}:${GPUS_PER_NODE}"
for i in $(seq 1 $(( NNODES - 1 ))); do
  host="${HOST_PREFIX}-${i}.${SERVICE}"
  until ssh ${ssh_opts} "${host}" true 2>/dev/null; do
    [ "${SECONDS}" -lt "${deadline}" ] || { echo "FAIL: ${host} did not accept ssh on port ${SSH_PORT} within ${JOIN_TIMEOUT_SECONDS}s" > "${dir}/result"; rm -f "${dir}/id_ed25519"; fail "$(cat "${dir}/result")"; }
    sleep 5
  done
  hosts="${hosts},${host}:${GPUS_PER_NODE}"
done
rm -f "${dir}/id_ed25519"

efa_env=()
[ "${EFA_PER_NODE}" -gt 0 ] && efa_env=(-x FI_PROVIDER=efa -x FI_EFA_FORK_SAFE=1)
[ "${GPUDIRECT_RDMA}" = 1 ] && efa_env+=(-x FI_EFA_USE_DEVICE_RDMA=1)
mpirun --allow-run-as-root --prefix "$(dirname "$(dirname "$(command -v mpirun)")")" \
  -np $(( NNODES * GPUS_PER_NODE )) -H "${hosts}" --map-by "ppr:${GPUS_PER_NODE}:node" --bind-to none \
  --mca plm_rsh_args "${ssh_opts}" --mca pml ^ucx --mca btl tcp,self --mca btl_tcp_if_include eth0 \
  -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET -x NCCL_SOCKET_IFNAME=eth0 "${efa_env[@]}" \
  /opt/nccl-tests/build/all_reduce_perf -b 8M -e 8G -f 2 -g 1 -c 0 -n 20 2>&1 | tee "${dir}/all_reduce_perf.log"
status=${PIPESTATUS[0]}

verdict() { echo "$1" > "${dir}/result"; log "$1"; }
if [ "${status}" -ne 0 ]; then
  verdict "FAIL: all_reduce_perf exited with status ${status} (log: ${dir}/all_reduce_perf.log)"
elif [ "${EFA_PER_NODE}" -gt 0 ] && grep -q 'Using network Socket' "${dir}/all_reduce_perf.log"; then
  verdict "FAIL: NCCL fell back to TCP sockets instead of EFA (check the EFA security group's self rule and aws-ofi-nccl in the image)"
else
  # the last data row is the largest message: size count type redop root time algbw busbw ...
  busbw=$(awk '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { last = $8 } END { print last + 0 }' "${dir}/all_reduce_perf.log")
  if awk -v b="${busbw}" -v m="${MIN_BUS_BANDWIDTH_GBPS}" 'BEGIN { exit !(b >= m) }'; then
    verdict "PASS: all_reduce_perf bus bandwidth ${busbw} GB/s across ${NNODES} nodes (minimum ${MIN_BUS_BANDWIDTH_GBPS} GB/s)"
  else
    verdict "FAIL: all_reduce_perf bus bandwidth ${busbw} GB/s across ${NNODES} nodes is below ${MIN_BUS_BANDWIDTH_GBPS} GB/s (${MIN_BUS_BANDWIDTH_FRACTION} of ${INSTANCE_TYPE}'s ${LINE_RATE_GBPS} Gbps)"
  fi
fi
grep -q '^PASS' "${dir}/result" || exit 1
exit 0
"""


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

