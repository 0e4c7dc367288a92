"""Benchmark of the test suite: the README's test command, timed.

    python bench/suite_bench.py [--runs 3] [--write]
    python bench/suite_bench.py --runs 2 --before DIR --before-label TEXT [--write]


Runs the pytest part of the README's test command (Quick start, second line: what follows the
last `&&`, the set-up before it being done once) ``--runs`` times, each a fresh process started
from the repository root, and records each run's wall time, exit status, pytest's summary line and
the processes it left behind, the median, the machine (cores, CPU, Python, load average) and the
commit. Target (issue 45; issue 21's 60 s was for 1,553 tests): median <= 100 s on 2 cores, every
run green with nothing skipped,
nothing left behind.
--write records its section of bench/RESULTS.md (bench/results.py). Exit status 1 when a target
is missed.

A run's leftovers are the processes still alive after it ended that carry its marker in their
environment (RLINF_EKS_SUITE_RUN, set for the run) or belong to its session (it starts in a new
one): a test that starts a process must stop it.

--before DIR times the same command in DIR too (a checkout of the code before a change, e.g. a
``git worktree``; this interpreter, the same environment), the runs interleaved (before, after,
before, after...) so that the host's load drifts alike for both, into the section "suite-compare".
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import results  # noqa: E402 (the repository root is on sys.path only from here)

TARGET_SECONDS = 100.0  # issue 45
QUICK_TARGET_SECONDS = 30.0  # issue 45: the quick tier of the edit loop
QUICK = ' -m pytest -n 2 --dist worksteal -m "not slow"'  # the quick tier's pytest part (docs/testing-and-contributing.md, tests/tiers.py)
MARKER = "RLINF_EKS_SUITE_RUN"


def readme_test_command() -> str:
    """The pytest part of the Quick start's second command (tests/test_readme.py keeps .ci/run on it)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    command = lines[1].rsplit("&&", 1)[1].strip()
    if " -m pytest" not in command:
        raise SystemExit(f"the README's test command does not end in a pytest run: {lines[1]!r}")
    return command


def leftovers(marker: str, sid: int) -> list[str]:
    """Live processes that carry ``marker`` in their environment or run in session ``sid``."""
    found = []
    needle = f"{MARKER}={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            state, session = stat.rsplit(")", 1)[1].split()[0], int(stat.rsplit(")", 1)[1].split()[4])
            if state == "Z":
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            if session == sid or needle in environ.split(b"\0"):
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                found.append(f"{entry} {cmd[:120]}")
        except (OSError, ValueError, IndexError):
            continue
    return found


def run_once(command: str, cwd: Path = ROOT) -> dict:
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(shlex.split(command), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    out, _ = proc.communicate()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the CPU of pytest and every process it waited for (workers, scripts, checkov, Ray): unlike the
    # wall time, about the same however loaded the machine is
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    time.sleep(1)  # let processes that are ending end
    summary = next((line.strip("= ") for line in reversed(out.splitlines()) if re.search(r"\b(passed|failed|error)", line)), "")
    return {"wall": wall, "cpu": cpu, "status": proc.returncode, "summary": summary, "left": leftovers(marker, proc.pid),
            "load": load, "load_end": os.getloadavg()[0], "tail": out[-3000:]}



def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # bench/RESULTS.md itself (a section another run just wrote) does not change what is timed
    dirty = [line for line in git("status", "--porcelain", "--untracked-files=no").splitlines() if not line.endswith("bench/RESULTS.md")]
    return f"{head}{' (with uncommitted changes)' if dirty else ''}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write the suite section of bench/RESULTS.md")
    parser.add_argument("--quick", action="store_true", help=f"time the quick tier (python{QUICK}) into its own section")
    parser.add_argument("--before", type=Path, help="a checkout of the code before a change: time both, interleaved")
    parser.add_argument("--before-label", default="", help="what --before holds (for the section's text)")
    args = parser.parse_args()
    if args.before:
        return compare(args)

    # the quick tier: the README command's interpreter with the testing guide's arguments
    command = readme_test_command().split(" -m pytest", 1)[0] + QUICK if args.quick else readme_test_command()
    target = QUICK_TARGET_SECONDS if args.quick else TARGET_SECONDS
    runs = []
    for n in range(1, args.runs + 1):
        result = run_once(command)
        runs.append(result)
        print(f"run {n}: {result['wall']:.1f} s, {result['cpu']:.1f} CPU-s, exit {result['status']}, {result['summary']}, "
              f"{len(result['left'])} processes left behind, load average {result['load']:.2f} at the start", flush=True)
        for line in result["left"]:
            print(f"    left behind: {line}")
        if result["status"] != 0:
            print(result["tail"])
    median = statistics.median(r["wall"] for r in runs)
    # every test run: a skip (../shared absent, say) or a deselection would time a smaller suite
    # (the quick tier deselects the slow tests by design)
    unexpected = r"skipped|xfailed|xpassed" if args.quick else r"skipped|deselected|xfailed|xpassed"
    green = all(r["status"] == 0 and not re.search(unexpected, r["summary"]) for r in runs)
    clean = not any(r["left"] for r in runs)
    within = median <= target
    ok = green and clean and within
    cpu = statistics.median(r["cpu"] for r in runs)
    print(f"median {median:.1f} s, {cpu:.1f} CPU-s over {len(runs)} runs (target <= {target:.0f} s): "
          f"{'all targets met' if ok else 'TARGET MISSED'}")

    lines = [
        "# Test suite benchmark" + (": the quick tier" if args.quick else ""),
        "",
        f"Machine: {results.machine()}. Commit {commit()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        (f"Each run is a fresh process of the quick tier's command (docs/testing-and-contributing.md, Tests;"
         if args.quick else f"Each run is a fresh process of the README's test command (Quick start, second line, after the"),
        (f"the README's interpreter), from the repository root: `{command}`. Produced by"
         if args.quick else f"set-up), from the repository root: `{command}`. Produced by"),
        f"`python bench/suite_bench.py --runs {args.runs}{' --quick' if args.quick else ''} --write`.",
        "",
        "The load average (1 min) at each run's start and end shows whether the machine was quiet: on a",
        "shared machine the wall times are not comparable with a quiet one's. The CPU-seconds (user +",
        "system of pytest and every process it waited for) are: on a quiet machine with N cores the wall",
        "time is at least CPU / N.",
        "",
        f"## Wall time (target: median <= {target:.0f} s, every run green, no process left behind)",
        "",
        "| run | wall (s) | CPU (s) | exit status | pytest | processes left behind | load average at start / end |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    for n, r in enumerate(runs, 1):
        lines.append(f"| {n} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['status']} | {r['summary']} | {len(r['left'])} | {r['load']:.2f} / {r['load_end']:.2f} |")
    lines += [
        "",
        f"Median: {median:.1f} s, {cpu:.1f} CPU-s; within target: {'yes' if within else 'NO'}; every run green with nothing skipped: "
        f"{'yes' if green else 'NO'}; nothing left behind: {'yes' if clean else 'NO'}.",
        "",
    ]
    if args.write:
        from bench.results import write_section

        write_section("suite-quick" if args.quick else "suite", "suite_bench.py", "\n".join(lines))
    return 0 if ok else 1


def compare(args: argparse.Namespace) -> int:
    """The command (the full suite, or the quick tier with --quick) in ``args.before`` and here,
    interleaved; a table per side, their medians and the change."""
    command = readme_test_command().split(" -m pytest", 1)[0] + QUICK if args.quick else readme_test_command()
    sides = {"before": args.before.resolve(), "after": ROOT}
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for n in range(1, args.runs + 1):
        for side, where in sides.items():
            result = run_once(command, where)
            runs[side].append(result)
            print(f"{side} run {n}: {result['wall']:.1f} s, {result['cpu']:.1f} CPU-s, exit {result['status']}, {result['summary']}, "
                  f"load average {result['load']:.2f} / {result['load_end']:.2f}", flush=True)
    median = {side: (statistics.median(r["wall"] for r in rs), statistics.median(r["cpu"] for r in rs)) for side, rs in runs.items()}
    lines = [
        "# Test suite benchmark: before and after" + (" (the quick tier)" if args.quick else ""),
        "",
        f"Machine: {results.machine()}. After: commit {commit()}; before: {args.before_label or args.before}. "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"Each run is a fresh process of `{command}` from the checkout's root, the two checkouts' runs interleaved",
        f"(before, after, before, ...) so that the host's load drifts alike for both. Produced by",
        f"`python bench/suite_bench.py --runs {args.runs}{' --quick' if args.quick else ''} --before DIR --write`. Environment: "
        + ", ".join(f"{k}={os.environ[k]}" for k in ("RLINF_EKS_KUBE_ASSETS", "RLINF_EKS_SHARED") if os.environ.get(k)) + ".",
        "The CPU-seconds (user + system of pytest and every process it waited for) are the figure to compare on a",
        "shared machine; the load average (1 min) at each run's start and end says how shared it was.",
        "",
        "| run | checkout | wall (s) | CPU (s) | exit status | pytest | load average at start / end |",
        "|---:|---|---:|---:|---:|---|---:|",
    ]
    for n in range(args.runs):
        for side in sides:
            r = runs[side][n]
            lines.append(f"| {n + 1} | {side} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['status']} | {r['summary']} | {r['load']:.2f} / {r['load_end']:.2f} |")
    (wall_b, cpu_b), (wall_a, cpu_a) = median["before"], median["after"]
    lines += [
        "",
        f"Median before: {wall_b:.1f} s, {cpu_b:.1f} CPU-s; after: {wall_a:.1f} s, {cpu_a:.1f} CPU-s "
        f"({cpu_a - cpu_b:+.1f} CPU-s, {100 * (cpu_a - cpu_b) / cpu_b:+.1f}%; wall {wall_a - wall_b:+.1f} s).",
        "",
    ]
    print("\n".join(lines))
    if args.write:
        from bench.results import write_section

        write_section("suite-compare-quick" if args.quick else "suite-compare", "suite_bench.py", "\n".join(lines))
    return 0 if all(r["status"] == 0 for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
