# The render check's probe (sh/render-check.sh; rlinf_eks.workload.render_check): renders one frame
# with the simulator's own renderer, in the training image, with the pod's environment, then (when
# the run saves videos) writes it as the trainer writes its videos. Prints one line, RENDER OK: or
# RENDER FAILED: ..., and exits 0 or 1. argv: the probe (maniskill or mujoco), a video file or "".
import os
import sys


def failed(message):
    print("RENDER FAILED: " + " ".join(str(message).split()))
    sys.exit(1)


def maniskill_frame():
    # a task with no downloaded assets (ManiSkill builds its cube and ships its Panda), CPU physics
    # ("cpu", as RLinf's configs name it): only the rendering goes through the GPU, through SAPIEN's
    # Vulkan renderer (ManiSkill's default render backend, "gpu")
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401  (registers the tasks)

    env = gym.make("PickCube-v1", num_envs=1, obs_mode="rgb", render_mode="rgb_array", sim_backend="cpu")
    try:
        env.reset(seed=0)
        frame = env.render()
        backend = getattr(getattr(getattr(env, "unwrapped", env), "backend", None), "render_backend", "unknown")
    finally:
        env.close()
    if hasattr(frame, "cpu"):
        frame = frame.cpu().numpy()
    return frame[0] if frame.ndim == 4 else frame, f"SAPIEN (Vulkan, render backend {backend}), ManiSkill PickCube-v1"


SCENE = """<mujoco><worldbody><light pos="0 0 2"/>
<geom type="plane" size="1 1 .1" rgba=".4 .6 .8 1"/><geom type="box" pos="0 0 .1" size=".1 .1 .1" rgba=".9 .3 .2 1"/>
<camera name="probe" pos="0 -1 .6" xyaxes="1 0 0 0 .5 1"/></worldbody></mujoco>"""


def mujoco_frame():
    import mujoco

    model = mujoco.MjModel.from_xml_string(SCENE)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, 64, 64)
    try:
        renderer.update_scene(data, camera="probe")
        frame = renderer.render()
    finally:
        close = getattr(renderer, "close", None)
        if close is not None:
            close()
    return frame, f"MuJoCo {mujoco.__version__} with MUJOCO_GL={os.environ.get('MUJOCO_GL', '(unset)')}"


def write_video(frame, path):
    """As RLinf writes its videos: imageio.get_writer(<file>.mp4, fps=...), append_data, close."""
    import imageio

    try:
        writer = imageio.get_writer(path, fps=10)
        for _ in range(2):
            writer.append_data(frame)
        writer.close()
    except Exception as err:
        failed(
            f"video: the frame rendered, but imageio cannot write an MP4 as the trainer writes its videos "
            f"({type(err).__name__}: {err}): imageio lacks its ffmpeg plugin (imageio-ffmpeg); without it the "
            f"evaluation's videos are not saved"
        )
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        failed(f"video: imageio wrote no MP4 at {path}")
    return os.path.getsize(path)


def main(probe, video):
    frames = {"maniskill": maniskill_frame, "mujoco": mujoco_frame}
    if probe not in frames:
        failed(f"unknown probe {probe!r}")
    try:
        frame, how = frames[probe]()
    except ModuleNotFoundError as err:
        failed(f"cannot import the simulator ({type(err).__name__}: {err})")
    except Exception as err:  # one line, whatever the renderer raised (MuJoCo's EGL context raises ImportError)
        failed(f"{type(err).__name__}: {err}")
    import numpy

    frame = numpy.asarray(frame)
    if frame.ndim != 3 or frame.shape[-1] not in (3, 4) or frame.size == 0:
        failed(f"{how} returned no image (shape {frame.shape})")
    if int(frame.max()) == int(frame.min()):
        failed(f"{how} rendered a blank {frame.shape[1]}x{frame.shape[0]} frame (every pixel {int(frame.max())})")
    wrote = f", written as {video} ({write_video(frame[..., :3], video)} bytes, imageio)" if video else ""
    print(f"RENDER OK: {how}: a {frame.shape[1]}x{frame.shape[0]} frame{wrote}")


try:
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
except SystemExit:
    raise
except Exception as err:
    failed(f"{type(err).__name__}: {err}")
