set -uo pipefail
export PATH="/opt/amazon/efa/bin:${PATH}"
log() { echo "rlinf-eks fabric-check: $*" >&2; }
fail() { log "FAILED: $*; this node cannot train over EFA (exit ${EXIT_FABRIC_FAILED})"; exit "${EXIT_FABRIC_FAILED}"; }

efa=$(compgen -G '/dev/infiniband/uverbs*' | wc -l)
[ "${efa}" -ge "${EFA_PER_NODE}" ] || fail "/dev/infiniband has ${efa} EFA devices, ${INSTANCE_TYPE} has ${EFA_PER_NODE} (is the EFA device plugin running on this node?)"
command -v fi_info >/dev/null 2>&1 || fail "fi_info (libfabric) is not in the training image ${IMAGE}"
domains=$(timeout -k 2 "${FI_INFO_TIMEOUT_SECONDS}" fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c 'domain:')
[ "${domains}" -ge "${EFA_PER_NODE}" ] || fail "fi_info -p efa shows ${domains} EFA domains within ${FI_INFO_TIMEOUT_SECONDS}s, ${INSTANCE_TYPE} has ${EFA_PER_NODE}"
plugin=""
# LD_LIBRARY_PATH is unset in many images: under set -u a bare expansion would exit 1, not 90
library_path=${LD_LIBRARY_PATH:-}
for dir in ${library_path//:/ } ${PLUGIN_DIRS}; do
  for lib in "${dir}"/libnccl-net*.so*; do
    [ -e "${lib}" ] && { plugin=${lib}; break 2; }
  done
done
[ -n "${plugin}" ] || plugin=$(ldconfig -p 2>/dev/null | awk '/libnccl-net/ { print $NF; exit }')
[ -n "${plugin}" ] || fail "no NCCL net plugin (libnccl-net*.so, aws-ofi-nccl) in LD_LIBRARY_PATH, ${PLUGIN_DIRS} or the linker cache: NCCL_NET=\"${NCCL_NET}\" would fail"
log "OK: ${efa} EFA devices, ${domains} libfabric efa domains, NCCL net plugin ${plugin}"
