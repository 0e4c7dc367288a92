"""The GPU proof: the quickstart stack's own rendered launcher runs real RLinf on one GPU.

Not a test (CI has no GPU): three steps, two machines.

0. ``python bench/gpu_proof.py kit RLINF_GIT_DIR`` (here): packs the rlinf-gpu-kit into
   ``build/kit/`` and prints what each device call carries (the kit is larger than one call).
1. ``python bench/gpu_proof.py render`` (here, with the project installed): plans the quickstart
   stack with the proof's settings (``PROOF_SETTINGS``: what a machine without internet needs, and
   a short run) into ``build/gpu-proof/`` (plan.json and the manifests).
2. ``python bench/gpu_proof.py run --plan build/gpu-proof --kit build/kit --out DIR`` (on a GPU
   machine with the rlinf-gpu-kit, as root; needs only Python 3 and PyYAML): reads the training
   Job's ``ray`` container (command, environment) and the launch ConfigMap's scripts from the
   manifests, installs the kit at the trainer's workdir (it stands in for the training image),
   writes the scripts where the pod mounts them, and starts the container's command as the pod
   would: Ray starts as the pod starts it, the trainer trains, the launcher marks complete
   checkpoints. Once a checkpoint is marked complete, SIGTERM goes to the launcher (the kubelet's
   stop of PID 1); a second start of the same command must resume from the newest complete
   checkpoint and train on to ``runner.max_steps``. Logs and a copy of the run directory without
   weights go to DIR (``summary.json`` says what happened).
3. ``python bench/gpu_proof.py record DIR`` (here): ``python -m rlinf_eks report quickstart
   --run-dir`` over the run's own TensorBoard events, and ``bench/RESULTS-gpu.md`` from
   ``summary.json`` and the report's summary.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

STACK = "quickstart"
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS-gpu.md"

# What the proof changes in the stack, each with its reason. Everything else is the stack's own.
PROOF_SETTINGS: tuple[tuple[str, str], ...] = (
    # SAPIEN downloads its PhysX GPU library from GitHub at first use (RLinf's image bakes it in);
    # a machine without internet has CPU physics only, and ManiSkill's CPU physics takes one env
    ("workload.trainer.batch[\"env.train.total_num_envs\"]=1", "CPU physics: one env"),
    ("workload.trainer.batch[\"env.eval.total_num_envs\"]=1", "CPU physics: one env"),
    ("workload.trainer.batch[\"actor.global_batch_size\"]=50", "1 env x 50 steps per rollout"),
    ("workload.trainer.batch[\"actor.micro_batch_size\"]=50", "1 env x 50 steps per rollout"),
    ("workload.trainer.overrides=env.train.init_params.sim_backend=physx_cpu", "no GPU PhysX offline"),
    ("workload.trainer.overrides=env.eval.init_params.sim_backend=physx_cpu", "no GPU PhysX offline"),
    ("workload.trainer.overrides=env.eval.video_cfg.save_video=False", "small results"),
    # a short run with frequent checkpoints, so that a stop falls between two of them
    ("workload.trainer.overrides=runner.max_steps=40", "a short run: the first start is stopped once a checkpoint is marked complete, the second trains on to step 40"),
    ("workload.trainer.overrides=runner.save_interval=4", "a checkpoint every 4 steps"),
    ("workload.trainer.overrides=runner.val_check_interval=2", "an evaluation every 2 steps"),
    # the launcher lets checkpoint writes settle for up to half of a short grace period before it
    # interrupts the trainer: 30 s here instead of 14 minutes
    ("workload.terminationGracePeriodSeconds=60", "a quick stop"),
)
CONTAINER = "ray"
STOP_AFTER_COMPLETE = 1  # SIGTERM once this many checkpoints are marked complete
FIRST_START_LIMIT = 240  # seconds: the two starts and the kit fit one 10-minute device call
SECOND_START_LIMIT = 240


# --- 1. render (here) ----------------------------------------------------------------------------


def proof_settings() -> list[str]:
    """PROOF_SETTINGS as --set arguments: the proof's Hydra overrides replace the stack's own of
    the same key (Hydra takes a key once), the stack's others are kept, first."""
    import yaml

    stack = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]
    own = stack.get("rlinf-eks:workload", {}).get("trainer", {}).get("overrides", [])
    prefix = "workload.trainer.overrides="
    mine = [s[len(prefix):] for s, _ in PROOF_SETTINGS if s.startswith(prefix)]
    keys = {item.split("=", 1)[0] for item in mine}
    merged = [item for item in own if item.split("=", 1)[0] not in keys] + mine
    settings = [s for s, _ in PROOF_SETTINGS if not s.startswith(prefix)]
    return settings + [f"workload.trainer.overrides[{i}]={item}" for i, item in enumerate(merged)]


def render(out: Path) -> int:
    argv = [sys.executable, "-m", "rlinf_eks", "plan", STACK, "--quiet", "--out", str(out)]
    for setting in proof_settings():
        argv += ["--set", setting]
    print("+", " ".join(argv), flush=True)
    return subprocess.call(argv, cwd=ROOT)


KIT_TOOL = ROOT.parent / "shared" / "tools" / "rlinf-gpu-kit" / "pack.sh"
CALL_BYTES = 56 << 20  # a device call carries about 60 MiB with the working tree


def kit(out: Path, rlinf_git_dir: Path) -> int:
    """The rlinf-gpu-kit packed into ``out`` (pack.sh: PyPI and apt needed here), then the files
    each device call carries: the kit's parts spread over calls of at most CALL_BYTES, the plan
    and the rest of the kit with the last one (the machine keeps carried files between calls
    while it stays warm)."""
    if subprocess.call(["bash", str(KIT_TOOL), str(out), str(rlinf_git_dir)]) != 0:
        return 1
    parts = sorted(out.glob("site.tar.xz.*"))
    rest = [out / name for name in ("MANIFEST", "setup.sh", "rlinf-src.tgz", "debs")]
    calls: list[list[Path]] = [[]]
    for part in parts:
        if calls[-1] and sum(p.stat().st_size for p in calls[-1]) + part.stat().st_size > CALL_BYTES:
            calls.append([])
        calls[-1].append(part)
    calls[-1] += rest
    for i, paths in enumerate(calls, 1):
        carry = [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in paths]
        if i == len(calls):
            carry.append("build/gpu-proof")
        print(f"device call {i} of {len(calls)} carries: {json.dumps(carry)}")
    return 0


# --- 2. run (the GPU machine) --------------------------------------------------------------------


def _documents(plan: Path):
    import yaml

    for path in sorted((plan / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield doc


def pod_of(plan: Path) -> dict:
    """The training Job's pod as the manifests give it: the ``ray`` container's command, working
    directory and environment, and the files its ConfigMap volumes mount."""
    docs = list(_documents(plan))
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    for doc in docs:
        if doc["kind"] != "Job":
            continue
        spec = doc["spec"]["template"]["spec"]
        container = next((c for c in spec["containers"] if c["name"] == CONTAINER), None)
        if container is None:
            continue
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        files, dirs = {}, []
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if "configMap" in volume:
                mode = volume["configMap"].get("defaultMode", 0o644)
                for name, text in configmaps[volume["configMap"]["name"]].items():
                    files[os.path.join(mount["mountPath"], name)] = (text, mode)
            elif "emptyDir" in volume and mount["mountPath"] != "/dev/shm":
                dirs.append(mount["mountPath"])
        env = {}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
            else:
                raise SystemExit(f"gpu_proof: env {item['name']} comes from {item.get('valueFrom')}: not known here")
        # an Indexed Job's pod: Kubernetes sets the index and the hostname <job>-<index>
        env["JOB_COMPLETION_INDEX"] = "0"
        env["HOSTNAME"] = f"{doc['metadata']['name']}-0"
        return {
            "job": doc["metadata"]["name"],
            "command": list(container.get("command", [])) + list(container.get("args", [])),
            "workingDir": container.get("workingDir"),
            "env": env,
            "files": files,
            "dirs": dirs,
            "image": container["image"],
        }
    raise SystemExit(f"gpu_proof: no Job with a {CONTAINER!r} container in {plan}/manifests")


def _launch_value(script: str, name: str) -> str:
    """A value launch.sh sets at its top (NAME=value or NAME='multi\\nline')."""
    match = re.search(rf"^{name}=('([^']*)'|(\S*))$", script, re.M)
    if not match:
        raise SystemExit(f"gpu_proof: launch.sh sets no {name}")
    return match.group(2) if match.group(2) is not None else match.group(3)


def image_env(kit: Path, workdir: str, log) -> dict:
    """The kit installed with RLinf at the trainer's workdir; its exports stand in for the image's
    ENV. RLINF_NODE_RANK is left to the launcher (it sets it only for more than one node)."""
    env = dict(os.environ, RLINF_DIR=workdir)
    exports = subprocess.run(["bash", str(kit / "setup.sh"), str(kit)], env=env, capture_output=True, text=True)
    log.write(exports.stderr)
    log.flush()
    if exports.returncode != 0:
        raise SystemExit(f"gpu_proof: the kit's setup.sh failed (exit {exports.returncode}): {exports.stderr.strip()[-500:]}")
    script = exports.stdout + "\nenv -0\n"
    dumped = subprocess.run(["bash", "-c", script], env=dict(os.environ), check=True, capture_output=True).stdout
    image = dict(item.split("=", 1) for item in dumped.decode().split("\0") if "=" in item)
    image.pop("RLINF_NODE_RANK", None)
    if shutil.which("python", path=image.get("PATH")) is None:  # the image's venv has `python`
        os.symlink(shutil.which("python3", path=image.get("PATH")), "/usr/local/bin/python")
    return image


INTERFACE_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "RLINF_COMM_NET_DEVICES")


def machine_interfaces(env: dict) -> dict[str, str]:
    """The pod's network interface (eth0 in a pod) where this machine has another: the variables
    naming one it lacks are pointed at its first interface other than lo, and the change is
    recorded. Returns what changed."""
    present = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    other = next((name for name in present if name != "lo"), None)
    changed = {}
    for name in INTERFACE_VARS:
        value = env.get(name)
        if value and other and value not in present:
            env[name] = changed[name] = other
    return changed


def checkpoints(patterns: list[str], marker: str) -> dict[int, bool]:
    found = {}
    for pattern in patterns:
        for path in glob.glob(pattern):
            match = re.fullmatch(r"global_step_(\d+)", os.path.basename(path))
            if match and os.path.isdir(path):
                found[int(match.group(1))] = os.path.exists(os.path.join(path, marker))
    return found


def start(pod: dict, env: dict, log_path: Path, limit: float, stop_when=None) -> dict:
    """The container's command, as the pod's PID 1; with ``stop_when``, SIGTERM once it holds."""
    began = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(pod["command"], env=env, cwd=pod["workingDir"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        stopped_at = None
        while proc.poll() is None:
            if time.monotonic() - began > limit:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"exit": None, "killed_after_s": limit, "seconds": round(time.monotonic() - began, 1)}
            if stop_when is not None and stopped_at is None and stop_when():
                stopped_at = round(time.monotonic() - began, 1)
                proc.send_signal(signal.SIGTERM)  # to PID 1 only, as the kubelet does
            time.sleep(1)
    return {"exit": proc.returncode, "sigterm_at_s": stopped_at, "seconds": round(time.monotonic() - began, 1)}


def end_of_pod(env: dict) -> None:
    """What the end of a pod does to Ray: its processes go (the launcher stops Ray itself; this is
    for a start killed at its time limit, whose raylet would hold the port)."""
    subprocess.run(["ray", "stop", "--force"], env=env, capture_output=True, timeout=120)


def _step_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if re.search(r"resuming from|rlinf-eks|Global Step:|Step Time|Traceback|Error", line)]


def run(plan: Path, kit: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    pod = pod_of(plan)
    launch = pod["files"]["/etc/rlinf/launch.sh"][0]
    patterns = [p for p in _launch_value(launch, "CHECKPOINT_PATTERNS").split("\n") if p]
    marker = _launch_value(launch, "COMPLETE_MARKER")
    run_dir = _launch_value(launch, "RUN_DIR")
    workdir = _launch_value(launch, "TRAINER_PYTHONPATH")
    summary: dict = {"image": pod["image"], "command": pod["command"], "checkpoint_patterns": patterns}
    with (out / "setup.log").open("w") as log:
        env = image_env(kit, workdir, log)
        for probe in (["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], ["python3", "-c", "import torch, ray; print(torch.__version__, ray.__version__)"]):
            try:
                result = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as err:
                result = subprocess.CompletedProcess(probe, 1, "", str(err))
            log.write(f"$ {' '.join(probe)}\n{result.stdout}{result.stderr}")
            summary.setdefault("machine", []).append(result.stdout.strip() or result.stderr.strip()[-200:])
    # the pod's volumes, empty as a new pod finds them (the run directory is kept between the two
    # starts, as the shared filesystem or the restore init container keeps it)
    for path in [*pod["dirs"], "/etc/rlinf"]:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    for path, (text, mode) in pod["files"].items():
        Path(path).write_text(text)
        os.chmod(path, mode)
    env.update(pod["env"])  # the pod's env over the image's
    summary["env_changed"] = machine_interfaces(env)
    pod["workingDir"] = pod["workingDir"] or workdir  # the image's WORKDIR is the trainer's checkout

    def stop_now() -> bool:
        return sum(checkpoints(patterns, marker).values()) >= STOP_AFTER_COMPLETE

    first = start(pod, env, out / "start1.log", FIRST_START_LIMIT, stop_now)
    end_of_pod(env)
    first["checkpoints"] = checkpoints(patterns, marker)
    steps = sorted(first["checkpoints"])
    summary["first"] = first
    # the launcher's rule: a step is complete once a newer one exists beside it (RLinf saves
    # before the next step starts); the newest may be a save cut off by the stop
    summary["newest_complete_after_stop"] = steps[-2] if len(steps) > 1 else None
    # a new pod: empty state and config volumes, the same run directory
    for path in pod["dirs"]:
        if path != run_dir:
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path)
    second = start(pod, env, out / "start2.log", SECOND_START_LIMIT)
    end_of_pod(env)
    second["checkpoints"] = checkpoints(patterns, marker)
    text = (out / "start2.log").read_text(errors="replace")
    resumed = re.search(r"^resuming from (\S+)", text, re.M)
    second["resumed_from"] = resumed.group(1) if resumed else None
    summary["second"] = second
    summary["first_log"] = _step_lines((out / "start1.log").read_text(errors="replace"))[-60:]
    summary["second_log"] = _step_lines(text)[-60:]
    # the run directory without weights: events, metrics.log, config, markers, the tree
    tree = sorted(str(p.relative_to(run_dir)) for p in Path(run_dir).rglob("*"))
    (out / "tree.txt").write_text("".join(f"<run dir>/{p}\n" for p in tree))
    with tarfile.open(out / "run-logs.tgz", "w:gz") as tar:
        tar.add(run_dir, arcname="run", filter=lambda t: None if t.name.endswith((".pt", ".distcp")) else t)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: summary[k] for k in ("first", "newest_complete_after_stop", "second")}, indent=2))
    expected = summary["newest_complete_after_stop"]
    resumed_ok = expected is not None and second["resumed_from"] is not None and second["resumed_from"].endswith(f"/global_step_{expected}")
    return 0 if second["exit"] == 0 and resumed_ok else 1


# --- 3. record (here) ----------------------------------------------------------------------------


def record(results: Path, date: str, machine: str) -> int:
    summary = json.loads((results / "summary.json").read_text())
    work = ROOT / "build" / "gpu-proof-results"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with tarfile.open(results / "run-logs.tgz") as tar:
        tar.extractall(work, filter="data")
    report_dir = work / "report"
    argv = [sys.executable, "-m", "rlinf_eks", "report", STACK, "--run-dir", str(work / "run"), "--out", str(report_dir)]
    report = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    print(report.stdout + report.stderr)
    from rlinf_eks.report.logs import read_logs

    logs = read_logs(work / "run")
    step_time = logs.series.get("time/step")
    times = [v for _, v in sorted(step_time.points.items())] if step_time else []
    steps = sorted(step_time.points) if step_time else []
    first, second = summary["first"], summary["second"]

    def marks(found: dict) -> str:
        return ", ".join(f"{step} {'complete' if done else 'not complete'}" for step, done in sorted((int(k), v) for k, v in found.items()))

    machine_seen = "; ".join(" ".join(m.split()) for m in summary.get("machine", []))
    report_lines = [line for line in report.stdout.splitlines() if line.strip() and not line.startswith("wrote ")]
    lines = [
        "# The GPU proof: the quickstart stack's launcher with real RLinf",
        "",
        "Written by `python bench/gpu_proof.py record` from what `bench/gpu_proof.py run` brought back; not edited by hand.",
        "",
        f"- date: {date}; machine: {machine} ({machine_seen})",
        f"- launcher: the `{CONTAINER}` container of the quickstart stack's training Job, command `{' '.join(summary['command'])}`, "
        "scripts from its ConfigMap, its environment from the manifest over the kit's (the stand-in for the image)",
        "- proof settings (`--set`, each with its reason): " + "; ".join(f"`{s}` ({why})" for s, why in PROOF_SETTINGS),
        f"- the pod's environment changed for this machine: {summary.get('env_changed') or 'nothing'}",
        f"- first start: SIGTERM after {first.get('sigterm_at_s')} s (once a checkpoint was marked complete), exit {first['exit']} "
        f"after {first['seconds']} s; checkpoints then: {marks(first['checkpoints'])}",
        f"- second start: resumed from `{second['resumed_from']}` (newest complete by the launcher's rule after the stop: "
        f"global_step_{summary['newest_complete_after_stop']}), exit {second['exit']} after {second['seconds']} s; checkpoints: {marks(second['checkpoints'])}",
        f"- TensorBoard steps logged: {len(steps)} distinct ({steps[0] if steps else '-'}..{steps[-1] if steps else '-'}, RLinf logs global step N at N-1)",
        f"- seconds per step (time/step): median {sorted(times)[len(times) // 2]:.2f}, min {min(times):.2f}, max {max(times):.2f}" if times else "- no time/step",
        f"- `python -m rlinf_eks report {STACK} --run-dir` (exit {report.returncode}) over the run's own events said:",
        *(f"  - {line.strip()}" for line in report_lines),
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS}")
    return report.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    r = sub.add_parser("render")
    r.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-proof")
    g = sub.add_parser("run")
    g.add_argument("--plan", type=Path, required=True)
    g.add_argument("--kit", type=Path, required=True)
    g.add_argument("--out", type=Path, required=True)
    k = sub.add_parser("kit")
    k.add_argument("rlinf_git_dir", type=Path, help="an RLinf git dir with tag v0.3")
    k.add_argument("--out", type=Path, default=ROOT / "build" / "kit")
    c = sub.add_parser("record")
    c.add_argument("results", type=Path)
    c.add_argument("--date", required=True)
    c.add_argument("--machine", required=True)
    args = parser.parse_args(argv)
    if args.step == "render":
        return render(args.out)
    if args.step == "kit":
        return kit(args.out.resolve(), args.rlinf_git_dir)
    if args.step == "run":
        return run(args.plan.resolve(), args.kit.resolve(), args.out)
    return record(args.results, args.date, args.machine)


if __name__ == "__main__":
    sys.exit(main())
