set -uo pipefail
# L4 of `python -m rlinf_eks verify` on a single GPU node: all_reduce_perf over the node's GPUs, one
# rank per GPU, with the flags and environment of preflight.sh's inter-node run (sizes, iterations,
# NCCL's INFO lines on INIT and NET, libfabric pinned to efa on EFA nodes). The verdict is read from
# this log by rlinf_eks.verify.fabric; the exit status is all_reduce_perf's.
export PATH="/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:${PATH}"
log() { echo "rlinf-eks fabric[${RLINF_VERIFY_NODE:-this node}]: $*" >&2; }

efa_env=()
[ "${EFA_PER_NODE}" -gt 0 ] && efa_env=(-x FI_PROVIDER=efa -x FI_EFA_FORK_SAFE=1)
[ "${GPUDIRECT_RDMA}" = 1 ] && efa_env+=(-x FI_EFA_USE_DEVICE_RDMA=1)
log "all_reduce_perf over the ${GPUS_PER_NODE} GPUs of one ${INSTANCE_TYPE} node"
mpirun --allow-run-as-root -np "${GPUS_PER_NODE}" --bind-to none --mca pml ^ucx --mca btl tcp,self --mca btl_tcp_if_include eth0 \
  -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET -x NCCL_SOCKET_IFNAME=eth0 "${efa_env[@]}" \
  /opt/nccl-tests/build/all_reduce_perf -b 8M -e 8G -f 2 -g 1 -c 0 -n 20 2>&1
status=$?
log "all_reduce_perf exited with status ${status}"
exit "${status}"
