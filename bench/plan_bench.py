"""Benchmark of the offline plan: each stack against the one-resource floor, and growth with the
GPU node count.

    python bench/plan_bench.py [--runs 5] [--instructions] [--write]

Each measurement is a fresh `python -m rlinf_eks plan` process (interpreter start and imports
included: what a user waits for), timed by its wall time and by its CPU time (user + system, from
``os.wait4``: comparable on a loaded machine where wall times are not). The floor (issue 21) is a
one-resource Pulumi program under the same mocks: a fresh process that runs one
``pulumi.CustomResource`` through the offline engine (``rlinf_eks.offline.engine.engine.run``) with the
plan command's interpreter settings, importing no provider SDK. Targets (issues 2, 6 and 21): every
stack's median wall within 2.5x the floor's, paired in one run; resource count constant and wall
time flat from 1 to 512 nodes (max/min of the medians <= 1.1). --instructions adds, for the floor and
each node count, the instructions the process executes (valgrind's callgrind, PYTHONHASHSEED=0):
one run each, the same count whatever else the host runs, where the times of a shared machine move
by 10-25% between identical runs. --write records its section of bench/RESULTS.md
(bench/results.py).
Exit status 1 when a target is missed.

Measurements are interleaved: every round runs every case once, so a host that slows down or
speeds up during the benchmark (shared machines do) moves all cases alike.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import results  # noqa: E402 (the repository root is on sys.path only from here)

TARGET_RATIO = 2.5  # a stack's plan against the one-resource floor
FLAT_RATIO = 1.1  # the slowest node count against the fastest
NODE_COUNTS = (1, 2, 8, 64, 512)
SCALING_STACK = "multi-node-kuberay"

# What every plan must import before it can register a resource: the Pulumi SDK modules the program
# uses, like the plan command without the cyclic GC and without interpreter teardown. Its time is
# the floor under every plan's and tells how fast this host is during the run.
SDK_IMPORTS = (
    "import gc, os; gc.disable();"
    "import pulumi_aws as a, pulumi_kubernetes as k, pulumi_eks;"
    "a.ec2.Vpc; a.eks.NodeGroup; a.iam.Role; a.s3.Bucket; a.kms.Key; a.vpc.SecurityGroupIngressRule; a.fsx.LustreFileSystem;"
    "k.core.v1.Namespace; k.batch.v1.Job; k.helm.v3.Release; k.apiextensions.CustomResource;"
    "os._exit(0)"
)

# The one-resource floor: a Pulumi program of one resource under the offline engine's mocks, in a
# process set up as the plan command's (no cyclic GC, no interpreter teardown).
ONE_RESOURCE = (
    "import gc, os; gc.disable();"
    "import pulumi; from rlinf_eks.offline.engine import engine;"
    "run = engine.run(lambda: (pulumi.CustomResource('rlinf:bench:One', 'one', {'size': 1}), {})[1],"
    " project='rlinf-eks', stack='bench', config={});"
    "assert len(run.registrations) >= 1, run.registrations;"
    "os._exit(0)"
)


def scaled(nodes: int) -> list[str]:
    """--set edits for N nodes, keeping RLinf's world-size rules: the actor batch divides by micro
    batch x world size, the environments by the env ranks (half the GPUs) and pipeline stages."""
    world = nodes * 8
    return [
        f"gpuNodes.nodeCount={nodes}",
        f"gpuNodes.maxNodes={nodes}",
        f'workload.trainer.batch["actor.global_batch_size"]={40 * world}',
        f'workload.trainer.batch["env.train.total_num_envs"]={2 * world}',
    ]


def plan_command(stack: str, out: Path, sets: list[str]) -> list[str]:
    args = [sys.executable, "-m", "rlinf_eks", "plan", stack, "--quiet", "--out", str(out)]
    for item in sets:
        args += ["--set", item]
    return args


def timed(args: list[str]) -> tuple[float, float]:
    """The wall and CPU (user + system) seconds of one run of ``args``."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def instructions(args: list[str]) -> int:
    """The instructions one run of ``args`` executes, counted by valgrind's callgrind (the
    interpreter's start and teardown included), with a fixed hash seed so that the same inputs run
    the same code: a count that does not move with the host's load."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    counted = re.search(r"^==\d+== Collected : (\d+)$", proc.stderr, re.MULTILINE)
    if proc.returncode != 0 or not counted:
        raise SystemExit(f"valgrind {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return int(counted.group(1))


def measure(cases: dict[str, list[str]], runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU time of each case's command, over ``runs`` interleaved rounds (after a
    warm-up)."""
    for args in cases.values():
        timed(args)
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, args in cases.items():
            wall, cpu = timed(args)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return ({name: statistics.median(v) for name, v in walls.items()},
            {name: statistics.median(v) for name, v in cpus.items()})


def resources_in(out: Path) -> int:
    return len(json.loads((out / "plan.json").read_text())["resources"])



def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--instructions", action="store_true",
                        help="count the floor's and each node count's instructions under valgrind (about a minute each)")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()
    if args.instructions and not shutil.which("valgrind"):
        parser.exit(2, "plan_bench.py: --instructions needs valgrind on PATH (Debian: apt-get install valgrind)\n")

    from rlinf_eks.experiment import role_of
    from rlinf_eks.offline.engine.stack_config import load

    sys.path.insert(0, str(ROOT))
    from tests.harness import ALL_STACKS  # the project's stacks, not a stack file of your own beside them

    # The package's bytecode, as `pip install` compiles an installed package's: an editable
    # install under PYTHONDONTWRITEBYTECODE would otherwise compile every module on every run.
    compileall.compile_dir(ROOT / "components", quiet=1)
    work = Path(tempfile.mkdtemp(prefix="rlinf-bench-"))
    # experiments last: each plans on its platform's plan beside it (work/<platform>)
    stacks = sorted(ALL_STACKS, key=lambda stack: role_of(load(ROOT, stack).values) == "experiment")
    cases = {"one-resource": [sys.executable, "-c", ONE_RESOURCE], "sdk-imports": [sys.executable, "-c", SDK_IMPORTS]}
    cases.update({stack: plan_command(stack, work / stack, []) for stack in stacks})
    cases.update({f"nodes={n}": plan_command(SCALING_STACK, work / f"nodes-{n}", scaled(n)) for n in NODE_COUNTS})
    walls, cpus = measure(cases, args.runs)
    counted = {name: instructions(cases[name]) for name in ["one-resource", *(f"nodes={n}" for n in NODE_COUNTS)]} if args.instructions else {}
    floor, floor_cpu = walls["one-resource"], cpus["one-resource"]
    load_average = os.getloadavg()[0]

    ok = True
    lines = [
        "# Offline plan benchmark",
        "",
        f"Machine: {results.machine()}; load average (1 min) {load_average:.2f} at the end. Median of {args.runs} fresh",
        "processes per case (`python -m rlinf_eks plan STACK --quiet`), interpreter start and imports included,",
        "measured in interleaved rounds so that the host's speed drifts alike for every case; wall time and",
        "CPU time (user + system), with the package's bytecode compiled first (as `pip install` does). Produced by",
        f"`python bench/plan_bench.py {' '.join(sys.argv[1:])}`. On a loaded machine",
        "(load average above the core count) the wall times are inflated and the CPU ratios are the ones to read.",
        "",
        f"Floor: {floor:.2f} s wall, {floor_cpu:.2f} s CPU, a one-resource Pulumi program under the same mocks",
        "(one `pulumi.CustomResource` through `rlinf_eks.offline.engine.engine.run`, the plan command's interpreter",
        f"settings, no provider SDK). For scale: importing the SDK modules the program uses alone takes",
        f"{walls['sdk-imports']:.2f} s wall, {cpus['sdk-imports']:.2f} s CPU (with `rlinf_eks.offline.engine.sdk_imports` the plan imports",
        "fewer of them than that).",
        "",
        f"## Per stack (target: median wall <= {TARGET_RATIO} x the floor's)",
        "",
        "| stack | resources | median wall (s) | x floor (wall) | median CPU (s) | x floor (CPU) | within target |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    print(f"{'one-resource floor':24s}      {floor:.2f} s wall  {floor_cpu:.2f} s CPU")
    print(f"{'sdk-imports':24s}      {walls['sdk-imports']:.2f} s wall  {cpus['sdk-imports']:.2f} s CPU")
    for stack in stacks:
        wall, cpu, resources = walls[stack], cpus[stack], resources_in(work / stack)
        within = wall <= TARGET_RATIO * floor
        ok &= within
        lines.append(f"| {stack} | {resources} | {wall:.2f} | {wall / floor:.2f} | {cpu:.2f} | {cpu / floor_cpu:.2f} | "
                     f"{'yes' if within else 'NO'} |")
        print(f"{stack:24s} {resources:4d} resources  {wall:.2f} s wall ({wall / floor:.2f}x)  {cpu:.2f} s CPU ({cpu / floor_cpu:.2f}x)")

    lines += [
        "",
        f"## Growth with the node count ({SCALING_STACK} stack, `--set gpuNodes.nodeCount=N`)",
        "",
        f"Target: the number of registered resources is constant and the median wall time flat (slowest / fastest <= {FLAT_RATIO}).",
        "",
        "| nodes | resources | median wall (s) | median CPU (s) |" + (" instructions (millions) | x floor (instructions) |" if counted else ""),
        "|---:|---:|---:|---:|" + ("---:|---:|" if counted else ""),
    ]
    counts, node_walls, node_cpus = [], [], []
    for nodes in NODE_COUNTS:
        wall, cpu, resources = walls[f"nodes={nodes}"], cpus[f"nodes={nodes}"], resources_in(work / f"nodes-{nodes}")
        counts.append(resources)
        node_walls.append(wall)
        node_cpus.append(cpu)
        ran = counted.get(f"nodes={nodes}")
        extra = f" {ran / 1e6:,.0f} | {ran / counted['one-resource']:.2f} |" if ran else ""
        lines.append(f"| {nodes} | {resources} | {wall:.2f} | {cpu:.2f} |{extra}")
        print(f"nodes={nodes:<4d}               {resources:4d} resources  {wall:.2f} s wall  {cpu:.2f} s CPU"
              + (f"  {ran / 1e6:,.0f} M instructions" if ran else ""))
    flat_resources = len(set(counts)) == 1
    wall_ratio, cpu_ratio = max(node_walls) / min(node_walls), max(node_cpus) / min(node_cpus)
    flat_time = wall_ratio <= FLAT_RATIO
    ok &= flat_resources and flat_time
    lines += [
        "",
        f"Resources constant: {'yes' if flat_resources else 'NO'}; slowest / fastest: {wall_ratio:.2f} wall, "
        f"{cpu_ratio:.2f} CPU; flat (wall <= {FLAT_RATIO}): {'yes' if flat_time else 'NO'}.",
        "",
    ]
    print(f"node count: slowest / fastest {wall_ratio:.2f} wall, {cpu_ratio:.2f} CPU")
    if counted:
        node_counts = [counted[f"nodes={n}"] for n in NODE_COUNTS]
        several = node_counts[1:]  # one node's RayJob has no worker group: from two on, the same objects
        floor_count = counted["one-resource"]
        lines += [
            f"Instructions (callgrind, one run each, PYTHONHASHSEED=0; the same count however loaded the host is): "
            f"slowest / fastest {max(node_counts) / min(node_counts):.3f}, and {max(several) / min(several):.4f} from "
            f"{NODE_COUNTS[1]} to {NODE_COUNTS[-1]} nodes (one node's RayJob has no worker group); the floor executes "
            f"{floor_count / 1e6:,.0f} million, a plan of this stack {min(node_counts) / floor_count:.2f}-"
            f"{max(node_counts) / floor_count:.2f}x that.",
            "",
        ]
        print(f"instructions: floor {floor_count / 1e6:,.0f} M; node count slowest / fastest {max(node_counts) / min(node_counts):.3f}"
              f" ({max(several) / min(several):.4f} from {NODE_COUNTS[1]} nodes on)")
    if args.write:
        from bench.results import write_section

        write_section("plan", "plan_bench.py", "\n".join(lines))
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
