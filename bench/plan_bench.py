"""Benchmark of the offline plan: wall time per stack, and growth with the GPU node count.

    python bench/plan_bench.py [--runs 5] [--write]

Each measurement is a fresh `python -m rlinf_eks plan` process (interpreter start and imports
included: what a user waits for). Targets (issues 2 and 6): median <= 1.5 s per stack on a 2-core
machine; resource count and wall time flat from 1 to 512 nodes. --write records its section of
bench/RESULTS.md (bench/results.py).
Exit status 1 when a target is missed.

Measurements are interleaved: every round runs every case once, so a host that slows down or
speeds up during the benchmark (shared machines do) moves all cases alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import results  # noqa: E402 (the repository root is on sys.path only from here)

TARGET_SECONDS = 1.5
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


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(cases: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall time of each case's command, over ``runs`` interleaved rounds (after a warm-up)."""
    for args in cases.values():
        timed(args)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, args in cases.items():
            samples[name].append(timed(args))
    return {name: statistics.median(values) for name, values in samples.items()}


def resources_in(out: Path) -> int:
    return len(json.loads((out / "plan.json").read_text())["resources"])



def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()

    from rlinf_eks.experiment import role_of
    from rlinf_eks.offline.stack_config import available_stacks, load

    work = Path(tempfile.mkdtemp(prefix="rlinf-bench-"))
    # experiments last: each plans on its platform's plan beside it (work/<platform>)
    stacks = sorted(available_stacks(ROOT), key=lambda stack: role_of(load(ROOT, stack).values) == "experiment")
    cases = {"sdk-floor": [sys.executable, "-c", SDK_IMPORTS]}
    cases.update({stack: plan_command(stack, work / stack, []) for stack in stacks})
    cases.update({f"nodes={n}": plan_command(SCALING_STACK, work / f"nodes-{n}", scaled(n)) for n in NODE_COUNTS})
    walls = measure(cases, args.runs)
    floor = walls["sdk-floor"]

    ok = True
    lines = [
        "# Offline plan benchmark",
        "",
        f"Machine: {results.machine()}. Median of {args.runs} fresh processes per case",
        "(`python -m rlinf_eks plan STACK --quiet`), interpreter start and imports included, measured in",
        "interleaved rounds so that the host's speed drifts alike for every case. Produced by",
        "`python bench/plan_bench.py --write`.",
        "",
        f"SDK import floor: {floor:.2f} s, a process that only imports the Pulumi SDK modules the program",
        "uses (pulumi_aws ec2/eks/iam/s3/kms/vpc/fsx, pulumi_kubernetes core/batch/helm, pulumi_eks), as the",
        "plan command does. Every plan pays it before registering anything; it shows how fast the host is",
        "during the run (on this shared machine it ranged from 1.0 s to 1.6 s within one session).",
        "",
        f"## Per stack (target: median <= {TARGET_SECONDS} s)",
        "",
        "| stack | resources | median wall (s) | above the SDK import floor (s) | within target |",
        "|---|---:|---:|---:|---|",
    ]
    print(f"{'sdk-floor':24s}       {floor:.2f} s")
    for stack in stacks:
        wall, resources = walls[stack], resources_in(work / stack)
        within = wall <= TARGET_SECONDS
        ok &= within
        lines.append(f"| {stack} | {resources} | {wall:.2f} | {wall - floor:.2f} | {'yes' if within else 'NO'} |")
        print(f"{stack:24s} {resources:4d} resources  {wall:.2f} s")

    lines += [
        "",
        f"## Growth with the node count ({SCALING_STACK} stack, `--set gpuNodes.nodeCount=N`)",
        "",
        "Target: the number of registered resources and the wall time do not grow with N.",
        "",
        "| nodes | resources | median wall (s) |",
        "|---:|---:|---:|",
    ]
    counts, node_walls = [], []
    for nodes in NODE_COUNTS:
        wall, resources = walls[f"nodes={nodes}"], resources_in(work / f"nodes-{nodes}")
        counts.append(resources)
        node_walls.append(wall)
        lines.append(f"| {nodes} | {resources} | {wall:.2f} |")
        print(f"nodes={nodes:<4d}               {resources:4d} resources  {wall:.2f} s")
    flat_resources = len(set(counts)) == 1
    flat_time = max(node_walls) <= min(node_walls) * 1.25 + 0.05
    ok &= flat_resources and flat_time
    lines += [
        "",
        f"Resources constant: {'yes' if flat_resources else 'NO'}; wall time flat (max <= 1.25 x min + 50 ms): "
        f"{'yes' if flat_time else 'NO'}.",
        "",
    ]
    if args.write:
        from bench.results import write_section

        write_section("plan", "plan_bench.py", "\n".join(lines))
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
