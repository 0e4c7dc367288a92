"""The GPU proof: the quickstart stack's pod, every container as the kubelet runs it, trains real
RLinf on one GPU against an S3 API, is stopped, restores from the bucket into an empty run
directory and resumes; then its evaluation runs on the newest complete checkpoint.

Not a test (CI has no GPU): these steps, two machines.

0. ``python bench/gpu_proof.py kit RLINF_GIT_DIR`` and ``python bench/gpu_proof.py s3kit`` (here,
   PyPI and apt needed): the rlinf-gpu-kit in ``build/kit/`` (the training image's stand-in, larger
   than one device call: its parts go over several calls to one warm machine) and
   ``build/s3kit/s3kit.tar.xz`` (moto's S3 server and AWS CLI v1, trimmed to S3). Wheels the image
   has and the kit lacks go in a folder of their own (``--image-wheels``: imageio-ffmpeg, which the
   render check needs to write its MP4).
1. ``python bench/gpu_proof.py render`` (here, with the project installed): plans the quickstart
   stack with the proof's settings (``PROOF_SETTINGS``: what a machine without internet needs, and
   a short run) into ``build/gpu-proof/``, its evaluation (``workload.mode=eval``) into
   ``build/gpu-proof/eval/``, and ``build/gpu-proof/proof.json``: the config the proof composes and
   the stack's own (the config checks' JSON), the keys the proof sets, the commit rendered.
2. ``python bench/gpu_proof.py run --plan build/gpu-proof --kit build/kit --s3kit DIR
   --eval-plan build/gpu-proof/eval --out OUT`` (on the GPU machine, as root; Python 3, PyYAML and
   ``setpriv``): installs the kit at the trainer's workdir, starts moto's S3 server on loopback with
   the stack's bucket, and runs the training Job's pod as the kubelet would (``PodRun``): fresh
   emptyDir volumes, each init container's command and environment from the manifest to its end in
   order (image check, config check, render check, restore), the upload sidecar started and left
   running, then the ``ray`` container; each as the pod's user and HOME, with the container's
   capabilities as its bounding set and nothing inherited (no CAP_SYS_PTRACE), no_new_privs where
   privilege escalation is off; the AWS CLI containers get ``aws`` and the bucket's endpoint. Once
   a checkpoint is marked complete, SIGTERM goes to the launcher (the kubelet's stop of PID 1), then
   to the sidecar, which uploads. The second pod starts from an EMPTY run directory: only the
   restore from the bucket can bring the checkpoint back, and RLinf must resume from it and train
   on to ``runner.max_steps``. Then the evaluation's pod, likewise. A watch records the bucket's
   objects as they appear and the run directory's peak disk use. Logs, ``summary.json`` and the
   run directories without weights go to OUT.
3. ``python bench/gpu_proof.py record OUT --date D --machine M`` (here): ``python -m rlinf_eks
   report quickstart --run-dir`` over the training run and over the evaluation pod's run
   directory, and ``bench/RESULTS-gpu.md``'s proof section from ``summary.json``.
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
    ("workload.trainer.overrides=runner.max_steps=24", "a short run: the first start is stopped once a checkpoint is marked complete, the second trains on to step 24"),
    ("workload.trainer.overrides=runner.save_interval=4", "a checkpoint every 4 steps"),
    ("workload.trainer.overrides=runner.val_check_interval=2", "an evaluation every 2 steps"),
    # the launcher lets checkpoint writes settle for up to half of a short grace period before it
    # interrupts the trainer: 30 s here instead of 14 minutes
    ("workload.terminationGracePeriodSeconds=60", "a quick stop"),
    # the sidecar uploads complete checkpoints every 30 s (the least the key takes) instead of 300,
    # so that uploads happen while a minute-long start trains, not only at its end
    ("workload.checkpointSyncIntervalSeconds=30", "uploads while a short start trains"),
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


def _check_spec(plan: Path) -> dict:
    """The trainer's config and overrides as the plan's own config check composes them."""
    import yaml

    data = yaml.safe_load((plan / "manifests" / "configmap-rlinf-rlinf-launch.yaml").read_text())["data"]
    match = re.search(r"^CHECK='(.*)'$", data["config-check.sh"], re.M)
    return json.loads(match.group(1).replace("\'\"\'\"\'", "'"))


def _plan(out: Path, settings: list[str]) -> int:
    argv = [sys.executable, "-m", "rlinf_eks", "plan", STACK, "--quiet", "--out", str(out)]
    for setting in settings:
        argv += ["--set", setting]
    print("+", " ".join(argv), flush=True)
    return subprocess.call(argv, cwd=ROOT, stdout=subprocess.DEVNULL)


def render(out: Path) -> int:
    """The proof's plan (``out``), its evaluation's (``out/eval``, workload.mode=eval) and the
    stack's own (``out/stack``, only for its config), and ``out/proof.json``: the config each
    composes (the config checks' JSON), the keys the proof sets and the commit rendered."""
    shutil.rmtree(out, ignore_errors=True)
    settings = proof_settings()
    for folder, extra in ((out, []), (out / "eval", ["workload.mode=eval"]), (out / "stack", None)):
        if _plan(folder, settings + extra if extra is not None else []) != 0:
            return 1
    keys = sorted({re.split(r"[\]\[\"=]+", s.split("=", 1)[1] if s.startswith("workload.trainer.overrides") else s.split("[", 1)[-1])[0 if s.startswith("workload.trainer.overrides") else 1]
                   for s, _ in PROOF_SETTINGS if s.startswith("workload.trainer.")})
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    proof = {"specs": {"proof": _check_spec(out), "stack": _check_spec(out / "stack")}, "keys": keys,
             "commit": git("rev-parse", "HEAD"), "uncommitted": git("status", "--porcelain", "--", "components/workload", "components/trainers").splitlines()}
    shutil.rmtree(out / "stack")
    (out / "proof.json").write_text(json.dumps(proof, indent=2))
    print(f"wrote {out} (proof plan), {out / 'eval'} (its evaluation) and {out / 'proof.json'}: keys {keys}")
    return 0


KIT_TOOL = ROOT.parent / "shared" / "tools" / "rlinf-gpu-kit" / "pack.sh"
CALL_BYTES = 56 << 20  # a device call carries about 60 MiB with the working tree


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def carry_plan(kit_dir: Path) -> list[list[str]]:
    """The paths each device call carries, for one warm machine: the kit's parts, the S3 kit and
    the image's extra wheels packed first-fit into calls of at most CALL_BYTES and 8 paths (largest
    first), the plans and the memory kit with the last call, which runs the proof."""
    items = sorted(out for out in [*kit_dir.glob("site.tar.xz.*"), *(kit_dir / name for name in ("MANIFEST", "setup.sh", "rlinf-src.tgz", "debs")),
                                   ROOT / "build" / "s3kit", ROOT / "build" / "image-wheels"] if out.exists())
    last = [p for p in (ROOT / "build" / "gpu-proof", ROOT / "build" / "memkit") if p.exists()]
    calls: list[list[Path]] = [list(last)]
    for item in sorted(items, key=_bytes, reverse=True):
        home = next((c for c in calls if sum(map(_bytes, c)) + _bytes(item) <= CALL_BYTES and len(c) < 8), None)
        if home is None:
            calls.insert(0, home := [])
        home.append(item)
    return [[str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in c] for c in calls]


def kit(out: Path, rlinf_git_dir: Path) -> int:
    """The rlinf-gpu-kit packed into ``out`` (pack.sh: PyPI and apt needed here), then the files
    each device call carries (:func:`carry_plan`; the machine keeps carried files between calls
    while it stays warm)."""
    if subprocess.call(["bash", str(KIT_TOOL), str(out), str(rlinf_git_dir)]) != 0:
        return 1
    plan = carry_plan(out)
    for i, carry in enumerate(plan, 1):
        print(f"device call {i} of {len(plan)} carries: {json.dumps(carry)}")
    return 0


# The S3 API on the GPU machine's loopback and the `aws` the restore and sync containers call: moto's
# server and AWS CLI v1 from PyPI (the pod's aws-cli image holds v2, which PyPI does not carry),
# pinned, for CPython 3.12 on manylinux x86_64, installed into one folder and trimmed to S3: moto
# keeps the services its S3 backend imports, botocore its S3 and STS models, and the CLI's own
# botocore every other service's folder with an empty model (the CLI lists the services it knows
# at start; `aws s3` never loads another's model).
S3KIT_WHEELS = (
    "moto==5.2.6", "boto3==1.44.18", "botocore==1.44.18", "s3transfer==0.19.3", "jmespath==1.1.0",
    "xmltodict==1.0.4", "responses==0.26.3", "flask==3.1.3", "flask-cors==6.0.5", "itsdangerous==2.2.0",
    "blinker==1.9.0", "cryptography==51.0.1", "cffi==2.1.1", "pycparser==3.12",
    "py-partiql-parser==0.6.3", "awscli==1.46.3", "docutils==0.19", "rsa==4.7.2", "pyasn1==0.6.5",
)
S3KIT_MOTO_KEEP = {"core", "s3", "s3control", "s3bucket_path", "iam", "sts", "utilities", "moto_api", "moto_server",
                   "events", "sqs", "sns", "cloudwatch", "kms", "xray", "awslambda", "awslambda_simple", "ec2", "ecr",
                   "logs", "resourcegroupstaggingapi"}
S3KIT_MODELS = {"s3", "s3control", "sts"}
TARGET = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3",
          "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]


def s3kit(out: Path) -> int:
    """``out/s3kit.tar.xz``: moto's S3 server and the AWS CLI for the GPU machine (PyPI needed here)."""
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        wheels, site = Path(work) / "wheels", Path(work) / "site"
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        if subprocess.call([*pip, "download", "-q", "--no-deps", *TARGET, "-d", str(wheels), *S3KIT_WHEELS]) != 0:
            return 1
        if subprocess.call([*pip, "install", "-q", "--no-deps", "--no-compile", *TARGET, "--target", str(site), *map(str, sorted(wheels.glob("*.whl")))]) != 0:
            return 1
        shutil.rmtree(site / "bin", ignore_errors=True)
        shutil.rmtree(site / "awscli" / "examples", ignore_errors=True)
        for service in (site / "moto").iterdir():
            if service.is_dir() and service.name not in S3KIT_MOTO_KEEP and service.name != "__pycache__":
                shutil.rmtree(service)
        for service in (site / "botocore" / "data").iterdir():
            if service.is_dir() and service.name not in S3KIT_MODELS:
                shutil.rmtree(service)
        for service in (site / "awscli" / "botocore" / "data").iterdir():
            if service.is_dir() and service.name not in S3KIT_MODELS:
                for version in (v for v in service.iterdir() if v.is_dir()):
                    shutil.rmtree(version)
                    version.mkdir()
                    (version / "service-2.json").write_text("{}")
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / "s3kit.tar.xz", "w:xz") as tar:
            tar.add(site, arcname=".")
    print(f"wrote {out / 's3kit.tar.xz'} ({(out / 's3kit.tar.xz').stat().st_size >> 20} MiB)")
    return 0


# --- 2. run (the GPU machine) --------------------------------------------------------------------

# containerd's default capabilities of a container (what securityContext.capabilities drops from or
# adds to); CAP_SYS_PTRACE is not among them
DEFAULT_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid", "setfcap",
                "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")
POD_USER = (0, "/root")  # the images set no USER (images/rlinf-embodied/Dockerfile; the aws-cli image runs as root)
S3_PORT = 5123
S3_ENV = {  # the pod identity's stand-in: moto accepts any key
    "AWS_ACCESS_KEY_ID": "proof", "AWS_SECRET_ACCESS_KEY": "proof", "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}",
}
DEADLINE = 540  # seconds into the run: the evaluation is skipped when it cannot end before (one device call is 600 s)


def _documents(plan: Path):
    import yaml

    for path in sorted((plan / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield doc


def pod_of(plan: Path) -> dict:
    """The Job's pod whose main container is ``ray`` as the manifests give it: every container in
    the kubelet's order (init containers, a sidecar being one with restartPolicy Always, then the
    main one) with its command, environment, image and securityContext, and the files and empty
    directories its volumes mount."""
    docs = list(_documents(plan))
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    for doc in docs:
        if doc["kind"] != "Job":
            continue
        spec = doc["spec"]["template"]["spec"]
        main = next((c for c in spec["containers"] if c["name"] == CONTAINER), None)
        if main is None:
            continue
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        files, dirs = {}, []

        def container(c: dict, kind: str) -> dict:
            env = {}
            for item in c.get("env", []):
                if "value" not in item:
                    raise SystemExit(f"gpu_proof: {c['name']} env {item['name']} comes from {item.get('valueFrom')}: not known here")
                env[item["name"]] = item["value"]
            for mount in c.get("volumeMounts", []):
                volume = volumes[mount["name"]]
                if "configMap" in volume:
                    mode = volume["configMap"].get("defaultMode", 0o644)
                    for name, text in configmaps[volume["configMap"]["name"]].items():
                        files[os.path.join(mount["mountPath"], name)] = (text, mode)
                elif "emptyDir" in volume and mount["mountPath"] != "/dev/shm" and mount["mountPath"] not in dirs:
                    dirs.append(mount["mountPath"])
            return {"name": c["name"], "kind": kind, "image": c["image"], "command": list(c.get("command", [])) + list(c.get("args", [])),
                    "env": env, "workingDir": c.get("workingDir"), "securityContext": c.get("securityContext") or {}}

        containers = [container(c, "sidecar" if c.get("restartPolicy") == "Always" else "init") for c in spec.get("initContainers", [])]
        containers.append(container(main, "main"))
        return {"job": doc["metadata"]["name"], "containers": containers, "files": files, "dirs": dirs,
                "grace": int(spec.get("terminationGracePeriodSeconds", 30))}
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


def capabilities(security: dict) -> list[str]:
    """The container's capabilities: containerd's defaults less ``drop`` plus ``add``."""
    caps = security.get("capabilities") or {}
    drop = {c.lower() for c in caps.get("drop", [])}
    base = set() if "all" in drop else set(DEFAULT_CAPS) - drop
    return sorted(base | {c.lower() for c in caps.get("add", [])})


def as_pod(container: dict, argv: list[str]) -> list[str]:
    """``argv`` as the container's process: the pod's user, its capabilities as the bounding set
    (nothing inherited, so CAP_SYS_PTRACE and the rest are gone), no_new_privs where the container
    forbids privilege escalation."""
    uid, _ = POD_USER
    wrapper = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all" + "".join(f",+{c}" for c in capabilities(container["securityContext"]))]
    if container["securityContext"].get("allowPrivilegeEscalation") is False:
        wrapper.append("--no-new-privs")
    return wrapper + ["--"] + argv


def checkpoints(patterns: list[str], marker: str) -> dict[int, bool]:
    found = {}
    for pattern in patterns:
        for path in glob.glob(pattern):
            match = re.fullmatch(r"global_step_(\d+)", os.path.basename(path))
            if match and os.path.isdir(path):
                found[int(match.group(1))] = os.path.exists(os.path.join(path, marker))
    return found


def start(argv: list[str], env: dict, cwd: str, log_path: Path, limit: float, stop_when=None) -> dict:
    """The main container's command, as the pod's PID 1; with ``stop_when``, SIGTERM once it holds."""
    began = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
    try:
        subprocess.run(["ray", "stop", "--force"], env=env, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _disk_bytes(path: str) -> int:
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Watch:
    """Every 2 s: the run directory's disk use (its peak) and the bucket's objects (when each first
    appeared), in a thread beside the pods."""

    def __init__(self, run_dir: str, bucket: str, began: float):
        import threading

        self.run_dir, self.bucket, self.began = run_dir, bucket, began
        self.peak, self.seen, self.errors = 0, {}, []
        self.phase = "setup"
        self.client = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stopped.wait(2):
            self.sample()

    def sample(self) -> None:
        """One look (also called between pods, so an upload is dated by the pod that made it)."""
        import boto3

        with self.lock:
            if self.client is None:
                self.client = boto3.client("s3", endpoint_url=S3_ENV["AWS_ENDPOINT_URL"], region_name=S3_ENV["AWS_DEFAULT_REGION"],
                                           aws_access_key_id="proof", aws_secret_access_key="proof")
            self.peak = max(self.peak, _disk_bytes(self.run_dir))
            try:
                for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
                    for item in page.get("Contents", []):
                        self.seen.setdefault(item["Key"], {"at_s": round(time.monotonic() - self.began, 1), "during": self.phase, "bytes": item["Size"]})
            except Exception as err:  # noqa: BLE001 - recorded, the watch goes on
                self.errors.append(str(err)[:200])


def s3_server(site: Path, log_path: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(S3_PORT)], env=env,
                            stdout=log_path.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    import urllib.request

    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{S3_PORT}/moto-api/", timeout=1)
            return proc
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"gpu_proof: moto's S3 server did not answer on 127.0.0.1:{S3_PORT}")


def aws_shim(site: Path, bin_dir: Path) -> Path:
    """`aws`: AWS CLI v1 (awscli from PyPI) on this machine's Python, from the S3 kit's folder."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "aws"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -m awscli "$@"\n')
    shim.chmod(0o755)
    return bin_dir


class PodRun:
    """One pod of a plan, as the kubelet runs it on a new node: fresh volumes, every init container
    to its end in order (a sidecar started and left running), then the main container; at its end
    the sidecars get SIGTERM and the pod's grace period."""

    def __init__(self, pod: dict, image: dict, aws_path: Path, out: Path, tag: str, workdir: str):
        self.pod, self.image, self.aws_path, self.out, self.tag, self.workdir = pod, image, aws_path, out, tag, workdir

    def env_of(self, container: dict) -> dict:
        uid, home = POD_USER
        if "aws-cli" in container["image"]:  # the AWS CLI image: its PATH with `aws`, the pod identity's stand-in
            env = {"PATH": f"{self.aws_path}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", **S3_ENV}
        else:
            env = dict(self.image)
        env.update(container["env"])
        env.update(HOME=home, HOSTNAME=f"{self.pod['job']}-0", JOB_COMPLETION_INDEX="0")
        return env

    def cwd_of(self, container: dict) -> str:
        return container["workingDir"] or ("/" if "aws-cli" in container["image"] else self.workdir)

    def fresh_volumes(self) -> None:
        for path in [*self.pod["dirs"], *{os.path.dirname(p) for p in self.pod["files"]}]:
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path)
        for path, (text, mode) in self.pod["files"].items():
            Path(path).write_text(text)
            os.chmod(path, mode)

    def capabilities_seen(self, container: dict) -> str:
        probe = subprocess.run(as_pod(container, ["grep", "-E", "^(CapEff|NoNewPrivs)", "/proc/self/status"]), capture_output=True, text=True)
        return " ".join((probe.stdout or probe.stderr).split())

    def run(self, limit: float, stop_when=None, env_patch=None) -> dict:
        self.fresh_volumes()
        result: dict = {"job": self.pod["job"], "containers": []}
        sidecars = []
        began = time.monotonic()
        for container in self.pod["containers"]:
            env = self.env_of(container)
            if env_patch:
                env_patch(env)
            argv = as_pod(container, container["command"])
            entry = {"name": container["name"], "kind": container["kind"], "image": container["image"],
                     "capabilities": capabilities(container["securityContext"]), "seen": self.capabilities_seen(container)}
            result["containers"].append(entry)
            log_path = self.out / f"{self.tag}-{container['name']}.log"
            if container["kind"] == "init":
                t0 = time.monotonic()
                with log_path.open("w") as log:
                    try:
                        code = subprocess.run(argv, env=env, cwd=self.cwd_of(container), stdout=log, stderr=subprocess.STDOUT, timeout=300).returncode
                    except subprocess.TimeoutExpired:
                        code = None
                entry.update(exit=code, seconds=round(time.monotonic() - t0, 1), tail=_tail(log_path, 6))
                if code != 0:
                    result["failed_at"] = container["name"]
                    break
            elif container["kind"] == "sidecar":
                sidecars.append((entry, subprocess.Popen(argv, env=env, cwd=self.cwd_of(container), stdout=log_path.open("w"),
                                                         stderr=subprocess.STDOUT, start_new_session=True), log_path))
                entry["started_at_s"] = round(time.monotonic() - began, 1)
            else:
                entry.update(start(argv, env, self.cwd_of(container), log_path, limit, stop_when))
                end_of_pod(env)
        for entry, proc, log_path in sidecars:  # the main container has ended: the kubelet stops the sidecars
            t0 = time.monotonic()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.pod["grace"])
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            entry.update(exit=proc.returncode, stopped_in_s=round(time.monotonic() - t0, 1), tail=_tail(log_path, 6))
        result["seconds"] = round(time.monotonic() - began, 1)
        return result


def _tail(path: Path, n: int) -> list[str]:
    try:
        return [line[:300] for line in path.read_text(errors="replace").splitlines() if line.strip()][-n:]
    except OSError:
        return []


def _step_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if re.search(r"resuming from|Resuming training|Saving checkpoint|rlinf-eks|Global Step|Traceback|Error", line)]


def trainer_evidence(log: str) -> dict:
    """RLinf's own lines: the checkpoint it resumed from, the steps it logged, the saves."""
    resumed = re.search(r"Resuming training from checkpoint directory (\S+?)\.?$", log, re.M)
    steps = [int(m) for m in re.findall(r"Global Step[^0-9]*(\d+)", log)]
    saves = [int(m) for m in re.findall(r"Saving checkpoint at step (\d+)", log)]
    launcher = re.search(r"^resuming from (\S+)", log, re.M)
    return {"rlinf_resumed_from": resumed.group(1) if resumed else None,
            "rlinf_resume_line": resumed.group(0).strip() if resumed else None,
            "launcher_resumed_from": launcher.group(1) if launcher else None,
            "first_step_logged": steps[0] if steps else None, "last_step_logged": steps[-1] if steps else None,
            "saves": saves}


def composed_settings(image: dict, workdir: str, specs: dict, keys: list[str]) -> dict:
    """Each spec (a config check's JSON) composed with Hydra in the image; the values of ``keys``."""
    script = r'''
import json, sys
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
import rlinf  # noqa: F401 (its resolvers)
specs, keys = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, spec in specs.items():
    with initialize_config_dir(config_dir=spec["config_dir"], version_base=spec["version_base"]):
        cfg = compose(config_name=spec["config_name"], overrides=spec["overrides"])
    out[name] = {k: OmegaConf.select(cfg, k, default=None) for k in keys}
print(json.dumps(out, default=str))
'''
    done = subprocess.run(["python3", "-c", script, json.dumps(specs), json.dumps(keys)], env=image, cwd=workdir,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(plan: Path, kit: Path, s3site: Path, out: Path, eval_plan: Path | None, image_wheels: Path | None, deadline: float) -> int:
    began = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    added = []
    if image_wheels is not None:  # what the image has and the kit lacks (imageio's ffmpeg plugin: the render check writes an MP4)
        wheels = sorted(str(p) for p in image_wheels.glob("*.whl"))
        done = subprocess.run(["python3", "-m", "pip", "install", "-q", "--no-index", "--no-deps", *wheels], capture_output=True, text=True)
        added = [f"{Path(w).name} (pip exit {done.returncode})" for w in wheels]
    pod = pod_of(plan)
    main = pod["containers"][-1]
    launch = pod["files"]["/etc/rlinf/launch.sh"][0]
    patterns = [p for p in _launch_value(launch, "CHECKPOINT_PATTERNS").split("\n") if p]
    marker = _launch_value(launch, "COMPLETE_MARKER")
    run_dir = _launch_value(launch, "RUN_DIR")
    workdir = _launch_value(launch, "TRAINER_PYTHONPATH")
    s3_uri = next(c["env"]["S3_URI"] for c in pod["containers"] if "S3_URI" in c["env"])
    bucket = s3_uri.split("/")[2]
    summary: dict = {"image": main["image"], "command": main["command"], "checkpoint_patterns": patterns, "s3_uri": s3_uri,
                     "pod_user": {"uid": POD_USER[0], "HOME": POD_USER[1]}, "rendered": json.loads((plan / "proof.json").read_text()),
                     "image_added": added}

    def save() -> None:  # after each pod: what a call cut off at its limit still brings back
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    with (out / "setup.log").open("w") as log:
        image = image_env(kit, workdir, log)
        for probe in (["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], ["python3", "-c", "import torch, ray; print(torch.__version__, ray.__version__)"]):
            try:
                result = subprocess.run(probe, env=image, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as err:
                result = subprocess.CompletedProcess(probe, 1, "", str(err))
            log.write(f"$ {' '.join(probe)}\n{result.stdout}{result.stderr}")
            summary.setdefault("machine", []).append(result.stdout.strip() or result.stderr.strip()[-200:])
    summary["ptrace_scope"] = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip() if Path("/proc/sys/kernel/yama/ptrace_scope").exists() else "no Yama on this kernel"
    summary["env_changed"] = machine_interfaces(image)
    summary["settings"] = composed_settings(image, workdir, summary["rendered"]["specs"], [k for k in summary["rendered"]["keys"]])
    server = s3_server(s3site, out / "s3.log")
    aws_path = aws_shim(s3site, Path("/tmp/proof-bin"))
    summary["aws"] = subprocess.run([str(aws_path / "aws"), "--version"], capture_output=True, text=True).stdout.strip() or "?"
    made = subprocess.run([str(aws_path / "aws"), "s3", "mb", f"s3://{bucket}"], env=dict(os.environ, **S3_ENV), capture_output=True, text=True)
    summary["bucket"] = {"name": bucket, "mb_exit": made.returncode, "out": (made.stdout + made.stderr).strip()[-300:]}
    sys.path.append(str(s3site))  # boto3 for the watch
    watch = Watch(run_dir, bucket, began)
    watch.thread.start()
    try:
        def stop_now() -> bool:
            return sum(checkpoints(patterns, marker).values()) >= STOP_AFTER_COMPLETE

        watch.phase = "first start"
        runner = PodRun(pod, image, aws_path, out, "start1", workdir)
        first = runner.run(FIRST_START_LIMIT, stop_now)
        first["checkpoints"] = checkpoints(patterns, marker)
        first["trainer"] = trainer_evidence((out / "start1-ray.log").read_text(errors="replace"))
        first["log"] = _step_lines((out / "start1-ray.log").read_text(errors="replace"))[-40:]
        steps = sorted(first["checkpoints"])
        summary["first"] = first
        summary["newest_complete_after_stop"] = max((s for s, done in first["checkpoints"].items() if done), default=None)
        watch.sample()
        summary["bucket_after_first"] = sorted(watch.seen)
        save()
        # a new pod on a new node: nothing of the run directory is left, only the bucket holds it
        watch.phase = "second start"
        runner = PodRun(pod, image, aws_path, out, "start2", workdir)
        second = runner.run(SECOND_START_LIMIT)
        text = (out / "start2-ray.log").read_text(errors="replace")
        second["checkpoints"] = checkpoints(patterns, marker)
        second["trainer"] = trainer_evidence(text)
        second["log"] = _step_lines(text)[-40:]
        second["restored"] = _tail(out / "start2-restore-checkpoints.log", 20) if (out / "start2-restore-checkpoints.log").exists() else []
        summary["second"] = second
        watch.sample()
        summary["uploads"] = dict(watch.seen)
        summary["run_dir_peak_bytes"] = watch.peak
        save()
        tree = sorted(str(p.relative_to(run_dir)) for p in Path(run_dir).rglob("*"))
        (out / "tree.txt").write_text("".join(f"<run dir>/{p}\n" for p in tree))
        with tarfile.open(out / "run-logs.tgz", "w:gz") as tar:
            tar.add(run_dir, arcname="run", filter=lambda t: None if t.name.endswith((".pt", ".distcp")) else t)
        if eval_plan is not None and time.monotonic() - began < deadline - 150:
            watch.phase = "evaluation"
            epod = pod_of(eval_plan)
            elaunch = epod["files"]["/etc/rlinf/launch.sh"][0]
            erun = _launch_value(elaunch, "RUN_DIR")
            runner = PodRun(epod, image, aws_path, out, "eval", workdir)
            evaluation = runner.run(max(60, deadline - (time.monotonic() - began) - 30))
            evaluation["run_dir"] = erun
            evaluation["log"] = _step_lines((out / "eval-ray.log").read_text(errors="replace"))[-30:]
            volume = next((d for d in epod["dirs"] if erun.startswith(d)), erun)
            results = sorted(glob.glob(os.path.join(volume, "**", "eval.json"), recursive=True))
            evaluation["eval_json"] = {p: json.loads(Path(p).read_text()) for p in results[:4]}
            videos = sorted(glob.glob(os.path.join(volume, "**", "*.mp4"), recursive=True))
            evaluation["videos"] = {v: {"bytes": os.path.getsize(v), "mp4": Path(v).read_bytes()[4:8] == b"ftyp"} for v in videos}
            summary["evaluation"] = evaluation
            with tarfile.open(out / "eval-logs.tgz", "w:gz") as tar:
                tar.add(volume, arcname="run", filter=lambda t: None if t.name.endswith((".pt", ".distcp")) else t)
        elif eval_plan is not None:
            summary["evaluation"] = {"skipped": f"{round(time.monotonic() - began)} s into the run, too little left of its {deadline:.0f} s"}
    finally:
        watch.stopped.set()
        watch.thread.join(timeout=10)
        watch.sample()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    summary["run_dir_peak_bytes"] = watch.peak
    summary["uploads"] = watch.seen
    summary["watch_errors"] = watch.errors[-5:]
    summary["seconds"] = round(time.monotonic() - began, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    inits = [c.get("exit") for p in (summary["first"], summary["second"]) for c in p["containers"] if c["kind"] == "init"]
    print(json.dumps({"inits": inits, "first": summary["first"]["trainer"], "second": summary["second"]["trainer"],
                      "newest_complete_after_stop": summary["newest_complete_after_stop"], "peak_bytes": watch.peak,
                      "evaluation": {k: v for k, v in summary.get("evaluation", {}).items() if k in ("containers", "skipped", "eval_json", "videos")}}, indent=1, default=str)[-6000:])
    expected = summary["newest_complete_after_stop"]
    resumed = summary["second"]["trainer"]["rlinf_resumed_from"] or ""
    main_exit = summary["second"]["containers"][-1].get("exit")
    ok = all(code == 0 for code in inits) and expected is not None and resumed.endswith(f"global_step_{expected}") and main_exit == 0
    return 0 if ok else 1


# --- 3. record (here) ----------------------------------------------------------------------------


def _report(run_dir: Path, out: Path) -> tuple[int, list[str]]:
    argv = [sys.executable, "-m", "rlinf_eks", "report", STACK, "--run-dir", str(run_dir), "--out", str(out)]
    report = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    print(report.stdout + report.stderr)
    return report.returncode, [line.strip() for line in report.stdout.splitlines() if line.strip() and not line.startswith("wrote ")]


def _containers(pod: dict) -> str:
    parts = []
    for c in pod["containers"]:
        if c["kind"] == "main":
            state = f"exit {c.get('exit')} after {c.get('seconds')} s" + (f", SIGTERM at {c['sigterm_at_s']} s" if c.get("sigterm_at_s") else "")
        elif c["kind"] == "sidecar":
            state = f"sidecar, exit {c.get('exit')} {c.get('stopped_in_s')} s after its SIGTERM"
        else:
            state = f"exit {c.get('exit')} in {c.get('seconds')} s"
        parts.append(f"`{c['name']}` {state} ({c.get('seen', '')})")
    return "; ".join(parts)


def record(results: Path, date: str, machine: str) -> int:
    summary = json.loads((results / "summary.json").read_text())
    work = ROOT / "build" / "gpu-proof-results"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with tarfile.open(results / "run-logs.tgz") as tar:
        tar.extractall(work / "train", filter="data")
    code, report_lines = _report(work / "train" / "run", work / "report")
    from rlinf_eks.report.logs import read_logs

    logs = read_logs(work / "train" / "run")
    step_time = logs.series.get("time/step")
    times = [v for _, v in sorted(step_time.points.items())] if step_time else []
    steps = sorted(step_time.points) if step_time else []
    first, second = summary["first"], summary["second"]
    rendered = summary["rendered"]

    def marks(found: dict) -> str:
        return ", ".join(f"{step} {'complete' if done else 'not complete'}" for step, done in sorted((int(k), v) for k, v in found.items())) or "none"

    uploads = sorted(((v["at_s"], v["during"], k) for k, v in summary["uploads"].items() if k.endswith("/.rlinf-eks-complete")))
    machine_seen = "; ".join(" ".join(m.split()) for m in summary.get("machine", []))
    settings = summary.get("settings") or {}
    side = "; ".join(f"`{k}` {settings.get('proof', {}).get(k)} (stack: {settings.get('stack', {}).get(k)})" for k in rendered["keys"]) if "proof" in settings else f"not composed: {settings.get('error')}"
    lines = [
        "# The GPU proof: the quickstart stack's pod, init containers to trainer, with real RLinf and an S3 API",
        "",
        "Written by `python bench/gpu_proof.py record` from what `bench/gpu_proof.py run` brought back; not edited by hand.",
        "",
        f"- date: {date}; machine: {machine} ({machine_seen})",
        f"- rendered from commit {rendered['commit'][:12]}" + (f" with these files changed in the working tree: {', '.join(l.split()[-1] for l in rendered['uncommitted'])}" if rendered["uncommitted"] else ""),
        f"- the pod as the kubelet runs it: the `{first['job']}` Job's containers in order from the manifests, each with its command and "
        f"environment, as uid {summary['pod_user']['uid']} with HOME {summary['pod_user']['HOME']} (the images set no USER), its capabilities "
        "(containerd's defaults less `drop` plus `add`) as the bounding set and nothing inherited (`setpriv`; no CAP_SYS_PTRACE in any container), "
        "no_new_privs where `allowPrivilegeEscalation: false`; fresh emptyDir volumes per pod. Not reproduced: the read-only root filesystem of the "
        f"checks, the pod's network namespace, resource limits; Yama ptrace scope here: {summary.get('ptrace_scope')}",
        f"- the image: the rlinf-gpu-kit (RLinf v0.3 and its packages over this machine's PyTorch) stands in for the training image; "
        f"`aws` is {summary.get('aws')} from PyPI run as `python3 -m awscli` (the pod's aws-cli image holds v2), against moto's S3 server on "
        f"127.0.0.1:{S3_PORT} (`AWS_ENDPOINT_URL`, keys standing in for the pod identity); bucket `{summary['bucket']['name']}`, prefix `{summary['s3_uri']}`",
        "- proof settings (`--set`, each with its reason): " + "; ".join(f"`{s}` ({why})" for s, why in PROOF_SETTINGS),
        f"- the composed config, the proof's value beside the stack's own: {side}",
        f"- the pod's environment changed for this machine: {summary.get('env_changed') or 'nothing'}",
        f"- first start (empty bucket, empty run directory): {_containers(first)}",
        f"  - RLinf logged steps {first['trainer']['first_step_logged']}..{first['trainer']['last_step_logged']}, saved at steps {first['trainer']['saves']}; "
        f"checkpoints after the stop: {marks(first['checkpoints'])}; newest complete: global_step_{summary['newest_complete_after_stop']}",
        f"- uploads of complete checkpoints (the marker's first sight in the bucket, seconds into the run): "
        + ("; ".join(f"{k.split('/')[-2]} at {t} s ({during})" for t, during, k in uploads) or "none"),
        f"- second start, a new pod with an EMPTY run directory: {_containers(second)}",
        f"  - restore said: {' | '.join(second.get('restored', [])[-4:])}",
        f"  - RLinf's own line: `{second['trainer']['rlinf_resume_line']}`; the launcher's: resuming from `{second['trainer']['launcher_resumed_from']}`",
        f"  - first step RLinf logged after the resume: {second['trainer']['first_step_logged']}, last {second['trainer']['last_step_logged']}; saves at steps {second['trainer']['saves']}; "
        f"checkpoints at the end: {marks(second['checkpoints'])}",
        f"- the run directory's peak disk use: {summary['run_dir_peak_bytes'] / 2**20:.1f} MiB",
        f"- TensorBoard steps logged: {len(steps)} distinct ({steps[0] if steps else '-'}..{steps[-1] if steps else '-'}, RLinf logs global step N at N-1)",
        f"- seconds per step (time/step): median {sorted(times)[len(times) // 2]:.2f}, min {min(times):.2f}, max {max(times):.2f}" if times else "- no time/step",
        f"- `python -m rlinf_eks report {STACK} --run-dir` (exit {code}) over the run's own events said:",
        *(f"  - {line}" for line in report_lines),
    ]
    evaluation = summary.get("evaluation")
    if evaluation and "skipped" not in evaluation:
        lines.append(f"- evaluation (the stack rendered with workload.mode=eval, a new pod, its restore from the bucket): {_containers(evaluation)}")
        for path, data in evaluation.get("eval_json", {}).items():
            metrics = data.get("metrics") or {}
            shown = ", ".join(f"{k} {v:.3g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in list(metrics.items())[:8])
            lines.append(f"  - `{path}`: checkpoint {data.get('checkpoint')}, status {data.get('status')}, {shown}; videos listed {data.get('videos', [])}")
        lines.append(f"  - videos on disk: {evaluation.get('videos') or 'none'}")
        if (results / "eval-logs.tgz").exists():
            with tarfile.open(results / "eval-logs.tgz") as tar:
                tar.extractall(work / "eval", filter="data")
            # the evaluation pod's run volume: the training logs its restore brought back beside eval/step-<N>
            ecode, elines = _report(work / "eval" / "run", work / "report-eval")
            lines.append(f"  - `python -m rlinf_eks report {STACK} --run-dir` (exit {ecode}) over the evaluation pod's run volume (the training logs "
                         "its restore brought back, and eval/) said:")
            lines += [f"    - {line}" for line in elines]
    elif evaluation:
        lines.append(f"- evaluation: skipped: {evaluation['skipped']}")
    head = "\n".join(lines) + "\n"
    text = RESULTS.read_text() if RESULTS.exists() else ""
    keep = text.find("\n## GPU memory")
    RESULTS.write_text(head + (text[keep:] if keep >= 0 else ""))
    print(f"wrote {RESULTS}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    r = sub.add_parser("render")
    r.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-proof")
    g = sub.add_parser("run")
    g.add_argument("--plan", type=Path, required=True)
    g.add_argument("--kit", type=Path, required=True)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--s3kit", type=Path, required=True, help="the S3 kit unpacked (moto, awscli)")
    g.add_argument("--eval-plan", type=Path, default=None, help="the evaluation's plan (render's PLAN/eval)")
    g.add_argument("--image-wheels", type=Path, default=None, help="wheels the image has and the kit lacks, installed first")
    g.add_argument("--deadline", type=float, default=DEADLINE, help="seconds: the evaluation starts only with 150 s left before it")
    k = sub.add_parser("kit")
    k.add_argument("rlinf_git_dir", type=Path, help="an RLinf git dir with tag v0.3")
    k.add_argument("--out", type=Path, default=ROOT / "build" / "kit")
    s3 = sub.add_parser("s3kit")
    s3.add_argument("--out", type=Path, default=ROOT / "build" / "s3kit")
    c = sub.add_parser("record")
    c.add_argument("results", type=Path)
    c.add_argument("--date", required=True)
    c.add_argument("--machine", required=True)
    args = parser.parse_args(argv)
    if args.step == "render":
        return render(args.out)
    if args.step == "s3kit":
        return s3kit(args.out)
    if args.step == "kit":
        return kit(args.out.resolve(), args.rlinf_git_dir)
    if args.step == "run":
        return run(args.plan.resolve(), args.kit.resolve(), args.s3kit.resolve(), args.out, args.eval_plan.resolve() if args.eval_plan else None,
                   args.image_wheels.resolve() if args.image_wheels else None, args.deadline)
    return record(args.results, args.date, args.machine)


if __name__ == "__main__":
    sys.exit(main())
