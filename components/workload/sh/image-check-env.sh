# Rendered before image-check.sh's own body when the trainer refuses some environment at startup
# (its recipe's startup.environment, for the run's rollout backend): REFUSED_ENV holds NAME=text
# pairs. The pods never set such a variable (the stack refuses it in workload.env), so only the
# image's own ENV can: the rollout would die of it minutes later, after the Ray join.
for refused in ${REFUSED_ENV}; do
  name=${refused%%=*}
  text=${refused#*=}
  value=${!name-}
  case "${value}" in
    *"${text}"*)
      echo "rlinf-eks image-check: FAILED: ${name}=${value} in the image's environment: the ${DIALECT} trainer dies at startup of ${name} containing ${text} (python -m rlinf_eks image-contract says why); remove it from the ENV of ${IMAGE} (${DOCKERFILE}), or set workload.env.${name} to a value without ${text} (exit ${EXIT_IMAGE_BROKEN})" >&2
      exit "${EXIT_IMAGE_BROKEN}"
      ;;
  esac
done
