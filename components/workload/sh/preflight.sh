set -uo pipefail
export PATH="/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:${PATH}"
index="${JOB_COMPLETION_INDEX:-0}"
log() { echo "rlinf-eks preflight[pod ${index}]: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${gpus}" -eq "${GPUS_PER_NODE}" ] || fail "nvidia-smi lists ${gpus} GPUs; ${INSTANCE_TYPE} has ${GPUS_PER_NODE}"
efa=0
if [ "${EFA_PER_NODE}" -gt 0 ]; then
  efa=$(compgen -G '/dev/infiniband/uverbs*' | wc -l)
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
ssh_opts=(-p "${SSH_PORT}" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=5)
hosts="${HOST_PREFIX}-0.${SERVICE}:${GPUS_PER_NODE}"
for i in $(seq 1 $(( NNODES - 1 ))); do
  host="${HOST_PREFIX}-${i}.${SERVICE}"
  until ssh "${ssh_opts[@]}" "${host}" true 2>/dev/null; do
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
  --mca plm_rsh_args "${ssh_opts[*]}" --mca pml ^ucx --mca btl tcp,self --mca btl_tcp_if_include eth0 \
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
