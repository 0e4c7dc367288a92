set -uo pipefail
export PATH="/opt/amazon/efa/bin:${PATH}"
# Runs in the training image before anything else of the pod (GPU work, the Ray join wait): a broken
# image fails the pod in seconds with one line naming what is missing and what to do. A restart
# cannot fix an image: the failure rules give up on IMAGE_BROKEN.
fail() {
  echo "rlinf-eks image-check: FAILED: $*; the image ${IMAGE} does not satisfy the image contract of ${DIALECT} (python -m rlinf_eks image-contract; docs/training-images-and-recipes.md) (exit ${EXIT_IMAGE_BROKEN})" >&2
  exit "${EXIT_IMAGE_BROKEN}"
}

# First what the trainer imports first (its recipe), in its order: an image of the wrong family or
# without the simulator fails here in seconds, not minutes later after the Ray join. The import's
# last line of error says why (a missing module, a prompt for a missing config, a crash).
for module in ${TRAINER_MODULES}; do
  out=$(timeout 120 python3 -c "import ${module}" 2>&1 </dev/null >/dev/null)
  rc=$?
  [ "${rc}" = 0 ] && continue
  if [ "${rc}" = 124 ]; then
    why="no answer within 120s"
  else
    why=$(printf '%s\n' "${out}" | tail -n 1)
    why="${why:-exit status ${rc}, nothing on stderr}"
  fi
  case "${out}" in
    *EOFError*) why="${why} (LIBERO asks on stdin for a dataset folder when the image has no config.yaml in HOME's .libero folder: write it at build time)" ;;
  esac
  fail "python3 cannot import ${module}, which the ${DIALECT} trainer imports (${CONFIG_NAME}): ${why}; build the image from ${DOCKERFILE}"
done
for tool in ${TOOLS}; do
  command -v "${tool}" >/dev/null 2>&1 || fail "${tool} is not on PATH in the image: rebuild it from ${DOCKERFILE}"
done
if [ "${EFA}" = 1 ]; then
  command -v fi_info >/dev/null 2>&1 || fail "fi_info (libfabric with the EFA provider) is not in the image: rebuild it from ${DOCKERFILE} (the AWS EFA installer, EFA_INSTALLER_VERSION)"
  plugin=""
  library_path=${LD_LIBRARY_PATH:-}
  for dir in ${library_path//:/ } ${PLUGIN_DIRS}; do
    for lib in "${dir}"/libnccl-net*.so*; do
      [ -e "${lib}" ] && { plugin=${lib}; break 2; }
    done
  done
  [ -n "${plugin}" ] || plugin=$(ldconfig -p 2>/dev/null | awk '/libnccl-net/ { print $NF; exit }')
  [ -n "${plugin}" ] || fail "aws-ofi-nccl (libnccl-net*.so) is in none of LD_LIBRARY_PATH, ${PLUGIN_DIRS} or the linker cache: rebuild it from ${DOCKERFILE} (the AWS EFA installer brings it)"
fi
ray_version=$(timeout 120 python3 -c 'import ray, sys; sys.stdout.write(ray.__version__)' 2>/dev/null) || fail "python3 cannot import ray: rebuild it from ${DOCKERFILE} with RAY_VERSION=${RAY_VERSION}"
[ "${ray_version}" = "${RAY_VERSION}" ] || fail "ray ${ray_version} in the image, workload.rayVersion is ${RAY_VERSION}: rebuild with RAY_VERSION=${RAY_VERSION} (or set workload.rayVersion: ${ray_version})"
for module in ${PYTHON_MODULES}; do
  [ "${module}" = ray ] && continue
  timeout 120 python3 -c "import ${module}" >/dev/null 2>&1 || fail "python3 cannot import ${module} (the model staging needs it): rebuild it from ${DOCKERFILE}"
done
[ -d "${WORKDIR}" ] || fail "no trainer checkout at ${WORKDIR} (workload.trainer.workdir): rebuild it from ${DOCKERFILE}, or set workload.trainer.workdir to where the image has it"
[ -f "${ENTRY_SCRIPT}" ] || fail "the entry script ${ENTRY_SCRIPT} is not in the image: rebuild it from ${DOCKERFILE} (TRAINER_REF), or set workload.trainer.workdir to the checkout that has it"
[ -d "${CONFIG_DIR}" ] || fail "the Hydra config dir ${CONFIG_DIR} is not in the image: rebuild it from ${DOCKERFILE}, or set workload.trainer.workdir to the checkout that has it"
echo "rlinf-eks image-check: OK: ray ${RAY_VERSION}, ${ENTRY_SCRIPT}, ${CONFIG_DIR}${plugin:+, NCCL net plugin ${plugin}}" >&2
