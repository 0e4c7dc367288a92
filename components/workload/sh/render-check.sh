set -uo pipefail
# Runs in the training image, on the pod's GPUs, after the image, config and fabric checks and
# before anything is staged or Ray starts: renders one frame with the simulator's renderer and the
# pod's environment (programs/render_probe.py), and writes it as the trainer writes its videos when
# the run saves videos. A node or image that cannot render fails the pod here with one line (also
# its termination message), instead of the env workers' first reset minutes into the run.
fail() {
  why="$*"
  remedy=${REMEDY}
  # the frame rendered; the image lacks what writes the videos
  if [ "${why#video: }" != "${why}" ]; then
    why=${why#video: }
    remedy=${VIDEO_REMEDY}
  fi
  line="rlinf-eks render-check: FAILED: ${SIMULATOR} (${BACKEND}, config ${CONFIG_NAME}): ${why}; ${remedy} (exit ${EXIT_RENDER_FAILED})"
  echo "${line}" >&2
  { printf '%s' "${line}" > "${TERMINATION_LOG}"; } 2>/dev/null || true
  exit "${EXIT_RENDER_FAILED}"
}
video=""
[ "${VIDEO}" = 1 ] && video="${TMPDIR:-/tmp}/rlinf-eks-render-check-$$.mp4"
out=$(timeout -k 5 "${TIMEOUT_SECONDS}" python3 - "${PROBE}" "${video}" 2>&1 <<'PY'
#include programs/render_probe.py
PY
)
status=$?
[ -n "${video}" ] && rm -f "${video}"
if [ "${status}" = 124 ] || [ "${status}" = 137 ]; then
  fail "no frame within ${TIMEOUT_SECONDS}s (a hung driver or renderer)"
fi
result=$(printf '%s\n' "${out}" | grep -E '^RENDER (OK|FAILED): ' | tail -n 1)
if [ "${status}" != 0 ] || [ "${result#RENDER OK: }" = "${result}" ]; then
  why=${result#RENDER FAILED: }
  [ -n "${why}" ] || why="python3 exited with status ${status}: $(printf '%s\n' "${out}" | tail -n 1)"
  fail "${why}"
fi
echo "rlinf-eks render-check: OK: ${result#RENDER OK: }" >&2
