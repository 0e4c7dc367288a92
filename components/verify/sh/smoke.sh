set -uo pipefail
# L3 of `python -m rlinf_eks verify`: one pod per GPU node, in the training image, with the node's GPUs
# and EFA devices, runs what the run's pods would meet first, in the run's order, and stops at the
# first failure with that check's own exit status: the image contract (image-check.sh), the
# trainer's config composed and validated in the image (config-check.sh), the EFA
# fabric (fabric-check.sh, EFA nodes), the GPUs (here) and, for the simulator dialects, headless
# rendering (render-check.sh). Every failure is one line naming what is missing.
node=${RLINF_VERIFY_NODE:-this node}
log() { echo "rlinf-eks smoke[${node}]: $*" >&2; }
gpu_fail() { log "FAILED: $*; this node cannot train (exit ${EXIT_GPUS_MISSING})"; exit "${EXIT_GPUS_MISSING}"; }

bash "${SCRIPTS_DIR}/image-check.sh" || exit $?
bash "${SCRIPTS_DIR}/config-check.sh" || exit $?
efa=0
if [ "${EFA_PER_NODE}" -gt 0 ]; then
  bash "${SCRIPTS_DIR}/fabric-check.sh" || exit $?
  efa=${EFA_PER_NODE}
fi

command -v nvidia-smi >/dev/null 2>&1 || gpu_fail "nvidia-smi is not in the container: the NVIDIA container toolkit injected no driver (NVIDIA_DRIVER_CAPABILITIES=${NVIDIA_DRIVER_CAPABILITIES:-unset} needs utility; is the NVIDIA device plugin running on ${node}?)"
listing=$(timeout -k 5 "${NVIDIA_SMI_TIMEOUT_SECONDS}" nvidia-smi -L 2>&1 </dev/null)
rc=$?
[ "${rc}" = 0 ] || gpu_fail "nvidia-smi -L exited with status ${rc}: $(printf '%s\n' "${listing}" | tail -n 1)"
gpus=$(printf '%s\n' "${listing}" | grep -c '^GPU ')
[ "${gpus}" -eq "${GPUS_PER_NODE}" ] || gpu_fail "nvidia-smi lists ${gpus} GPUs, ${INSTANCE_TYPE} has ${GPUS_PER_NODE} (a GPU fell off the bus, or the device plugin hands out fewer)"

rendering=""
if [ "${RENDER}" = 1 ]; then
  bash "${SCRIPTS_DIR}/render-check.sh" || exit $?
  rendering=", headless rendering"
fi
log "OK: image ${IMAGE}, ${gpus} GPUs, ${efa} EFA devices${rendering}"
