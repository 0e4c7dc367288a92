set -uo pipefail
# The simulators of the dialect render headless on the GPU: ManiSkill through SAPIEN's Vulkan
# renderer, LIBERO through MuJoCo on EGL (MUJOCO_GL=egl). The NVIDIA container toolkit mounts the
# driver's EGL and Vulkan libraries only for the graphics capability; without them the simulator
# fails or renders on the CPU, minutes into a run. Checked here: the capability, an ICD file, and
# one offscreen EGL context on the GPU (ctypes on libEGL, no GL package needed).
fail() {
  echo "rlinf-eks render-check: FAILED: $*; the ${DIALECT} simulators cannot render on this node (exit ${EXIT_RENDER_BROKEN})" >&2
  exit "${EXIT_RENDER_BROKEN}"
}

caps=${NVIDIA_DRIVER_CAPABILITIES:-}
case ",${caps// /}," in
  *,all,* | *,graphics,*) ;;
  *) fail "NVIDIA_DRIVER_CAPABILITIES is '${caps:-unset}', without graphics or all: the NVIDIA container toolkit mounts no EGL or Vulkan driver; set it in the image (${DOCKERFILE} does) or in workload.env" ;;
esac
found=""
for icd in ${ICD_FILES}; do
  [ -f "${ROOT}${icd}" ] && found="${found:+${found} }${icd}"
done
[ -n "${found}" ] || fail "none of ${ICD_FILES} is in the container: no Vulkan or EGL driver was mounted (the graphics capability, the NVIDIA container toolkit on the node)"
vk_icds=${VK_ICD_FILENAMES:-}
for icd in ${vk_icds//:/ }; do
  [ -f "${ROOT}${icd}" ] || fail "VK_ICD_FILENAMES names ${icd}, which is not in the container: Vulkan would find no driver"
done

IFS= read -r -d '' probe <<'PY'
import ctypes
import sys

EGL_ERRORS = {
    0x3000: "EGL_SUCCESS", 0x3001: "EGL_NOT_INITIALIZED", 0x3002: "EGL_BAD_ACCESS", 0x3003: "EGL_BAD_ALLOC",
    0x3004: "EGL_BAD_ATTRIBUTE", 0x3005: "EGL_BAD_CONFIG", 0x3006: "EGL_BAD_CONTEXT", 0x3007: "EGL_BAD_CURRENT_SURFACE",
    0x3008: "EGL_BAD_DISPLAY", 0x3009: "EGL_BAD_MATCH", 0x300A: "EGL_BAD_NATIVE_PIXMAP", 0x300B: "EGL_BAD_NATIVE_WINDOW",
    0x300C: "EGL_BAD_PARAMETER", 0x300D: "EGL_BAD_SURFACE", 0x300E: "EGL_CONTEXT_LOST",
}
EGL_NONE, EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT = 0x3038, 0x3033, 0x0001, 0x3040, 0x0008
EGL_WIDTH, EGL_HEIGHT, EGL_VENDOR, EGL_OPENGL_API, EGL_PLATFORM_DEVICE_EXT = 0x3057, 0x3056, 0x3053, 0x30A2, 0x313F
P, I, U = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint


def die(message):
    print("EGL FAILED: " + message)
    sys.exit(1)


def main(library):
    try:
        egl = ctypes.CDLL(library)
    except OSError as err:
        die(f"cannot load {library} ({err}): the image lacks libEGL (libglvnd's libegl1)")

    def fn(name, restype, *argtypes):
        try:
            f = getattr(egl, name)
        except AttributeError:
            die(f"{library} has no {name}")
        f.restype, f.argtypes = restype, list(argtypes)
        return f

    get_error = fn("eglGetError", I)

    def error():
        code = get_error()
        return EGL_ERRORS.get(code, hex(code))

    # headless: the first EGL device (EGL_EXT_device_enumeration + EGL_EXT_platform_device, as
    # MuJoCo's EGL backend does), else the default display
    get_proc = fn("eglGetProcAddress", P, ctypes.c_char_p)
    display, devices = None, 0
    query, platform = get_proc(b"eglQueryDevicesEXT"), get_proc(b"eglGetPlatformDisplayEXT")
    if query and platform:
        query = ctypes.CFUNCTYPE(U, I, ctypes.POINTER(P), ctypes.POINTER(I))(query)
        platform = ctypes.CFUNCTYPE(P, U, P, ctypes.POINTER(I))(platform)
        found, count = (P * 16)(), I(0)
        if query(16, found, ctypes.byref(count)) and count.value > 0:
            devices = count.value
            display = platform(EGL_PLATFORM_DEVICE_EXT, found[0], None)
    if not display:
        display = fn("eglGetDisplay", P, P)(None)
    if not display:
        die(f"no EGL display ({devices} EGL devices; {error()})")
    major, minor = I(0), I(0)
    if not fn("eglInitialize", U, P, ctypes.POINTER(I), ctypes.POINTER(I))(display, ctypes.byref(major), ctypes.byref(minor)):
        die(f"eglInitialize failed ({error()}), {devices} EGL devices: the NVIDIA EGL library is not in the container")
    vendor = (fn("eglQueryString", ctypes.c_char_p, P, I)(display, EGL_VENDOR) or b"").decode(errors="replace")
    if "NVIDIA" not in vendor:
        die(f"the EGL vendor is {vendor or 'unnamed'}, not NVIDIA: rendering would run on the CPU (the NVIDIA EGL vendor file is missing)")
    attributes = (I * 5)(EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE)
    config, configs = (P * 1)(), I(0)
    if not fn("eglChooseConfig", U, P, ctypes.POINTER(I), ctypes.POINTER(P), I, ctypes.POINTER(I))(
        display, attributes, config, 1, ctypes.byref(configs)
    ) or configs.value < 1:
        die(f"no EGL config for an OpenGL pbuffer ({error()})")
    if not fn("eglBindAPI", U, U)(EGL_OPENGL_API):
        die(f"eglBindAPI(OpenGL) failed ({error()})")
    surface = fn("eglCreatePbufferSurface", P, P, P, ctypes.POINTER(I))(display, config[0], (I * 5)(EGL_WIDTH, 64, EGL_HEIGHT, 64, EGL_NONE))
    if not surface:
        die(f"eglCreatePbufferSurface failed ({error()})")
    context = fn("eglCreateContext", P, P, P, P, ctypes.POINTER(I))(display, config[0], None, None)
    if not context:
        die(f"eglCreateContext failed ({error()})")
    make_current = fn("eglMakeCurrent", U, P, P, P, P)
    if not make_current(display, surface, surface, context):
        die(f"eglMakeCurrent failed ({error()})")
    make_current(display, None, None, None)
    fn("eglDestroyContext", U, P, P)(display, context)
    fn("eglDestroySurface", U, P, P)(display, surface)
    fn("eglTerminate", U, P)(display)
    print(f"EGL OK: {vendor} EGL {major.value}.{minor.value}, {devices} EGL devices, an OpenGL context on an offscreen pbuffer")


try:
    main(sys.argv[1])
except SystemExit:
    raise
except Exception as err:  # one line, whatever went wrong
    die(f"{type(err).__name__}: {err}")
PY
out=$(timeout -k 5 "${EGL_TIMEOUT_SECONDS}" python3 -c "${probe}" "${EGL_LIBRARY}" 2>&1 </dev/null)
rc=$?
[ "${rc}" = 124 ] && fail "no EGL context within ${EGL_TIMEOUT_SECONDS}s (a hung driver)"
egl=$(printf '%s\n' "${out}" | grep '^EGL ' | tail -n 1)
if [ "${rc}" != 0 ] || [ "${egl#EGL OK}" = "${egl}" ]; then
  why=${egl#EGL FAILED: }
  [ -n "${why}" ] || why="python3 exited with status ${rc}: $(printf '%s\n' "${out}" | tail -n 1)"
  fail "${why}"
fi
echo "rlinf-eks render-check: OK: NVIDIA_DRIVER_CAPABILITIES=${caps}, ${found}; ${egl}" >&2
