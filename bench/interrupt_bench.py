"""Interrupt commands at random moments and count the outcomes (issue 45, item 1).

    python bench/interrupt_bench.py [--runs 50] [--seed N] [--command plan|verify|report|image-contract]

Each run starts ``python -m rlinf_eks <command>`` as a process, sends SIGINT at a moment drawn
uniformly from its run's length (measured first, uninterrupted, plus a fifth past its end) and
judges what it left (tests/interrupting.py): one line and exit 130, or exit 0 when the signal came
after the end; no traceback, no hang; its output folder as it was (absent or an older one) or
whole. Prints one line per run that went wrong and the counts; exits 1 if any did.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import report_logs  # noqa: E402
from tests.interrupting import fresh, problem, run  # noqa: E402


def _argv(command: str, out: Path, work: Path) -> list[str]:
    if command == "plan":
        return ["plan", "single-node", "--quiet", "--out", str(out)]
    if command == "verify":
        return ["verify", "vllm-rollout", "--dry-run", "--out", str(out)]
    if command == "report":
        return ["report", "single-node", "--run-dir", str(work / "run"), "--out", str(out)]
    return ["image-contract", "multi-node"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--command", choices=["plan", "verify", "report", "image-contract"], default="plan")
    args = parser.parse_args()
    chance = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="interrupt-bench-"))
    try:
        report_logs.verl_run(work / "run")
        new, out = work / "new", work / "runs" / "out"
        (work / "runs").mkdir()
        reference = run(_argv(args.command, new, work))
        if reference.status != 0:
            print(f"the uninterrupted run failed (exit {reference.status}): {reference.stderr[-1000:]}", file=sys.stderr)
            return 2
        length = reference.seconds
        outcomes: Counter[str] = Counter()
        for index in range(args.runs):
            fresh(out, None)
            delay = chance.uniform(0, length * 1.2)
            outcome = run(_argv(args.command, out, work), delay=delay)
            found = problem(outcome, out, [None, new]) if args.command != "image-contract" else (
                None if outcome.status in (0, 130) and "Traceback" not in outcome.stderr else f"exit {outcome.status}: {outcome.stderr[-500:]}"
            )  # fmt: skip
            if found:
                print(f"run {index}: {found}")
                outcomes["wrong"] += 1
            else:
                outcomes["interrupted (one line, exit 130)" if outcome.status == 130 else "finished first (exit 0)"] += 1
        print(f"{args.command}: {args.runs} runs, SIGINT uniformly in 0-{length * 1.2:.2f} s after the command's code started: "
              + ", ".join(f"{count} {what}" for what, count in sorted(outcomes.items())))  # fmt: skip
        return 1 if outcomes["wrong"] else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
