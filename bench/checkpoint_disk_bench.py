"""The node's disk over a run of many saves (issue 52, item 6): before and after checkpoint retention.

    python bench/checkpoint_disk_bench.py [--saves 50] [--kill-at 30] [--save-mib 4] [--step-seconds 0.6] [--write]

Runs what tests/test_checkpoint_disk.py runs (the rendered launch.sh with the sync sidecar's sync.sh
beside it, a fake trainer of the rlinf-embodied layout, S3 a folder behind the fake ``aws`` CLI)
for ``--saves`` saves of ``--save-mib`` MiB each, killed in the middle of save ``--kill-at`` and
restarted on a fresh node (the run directory restored from S3), twice:

- before: the scripts of 3d8e539 (restore.sh syncs the whole prefix back, sync.sh records
  nothing) and no retention in the launcher (keepLocal 0);
- after: today's scripts, workload.checkpoints.keepLocal 2.

It prints the bytes under the run directory after every tenth save, the peak, what the restore
brought back, and what the bucket holds at the end; ``--write`` puts the table in bench/RESULTS.md
(section checkpoint-disk)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import machine, write_section  # noqa: E402
from rlinf_eks.workload import scripts  # noqa: E402
from tests.test_checkpoint_disk import Run  # noqa: E402

BEFORE = "3d8e539"
MIB = 1 << 20


def _old(name: str) -> str:
    """sh/<name> as it was at BEFORE, rendered as then (COMPLETE_MARKER its only value)."""
    text = subprocess.run(["git", "show", f"{BEFORE}:components/workload/sh/{name}"], capture_output=True, text=True, check=True).stdout
    return scripts.render({"COMPLETE_MARKER": scripts.COMPLETE_MARKER}, "\n" + text)


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def one_run(label: str, args: argparse.Namespace, **kind: object) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(Path(tmp), "rlinf-embodied", **kind)  # type: ignore[arg-type]
        env = {"SAVE_BYTES": str(args.save_mib * MIB), "STEP_SECONDS": str(args.step_seconds)}
        node = run.node()
        run.restore(node)
        first, _ = run.train(node, LAST_STEP=str(args.saves), FAIL_AT_STEP=str(args.kill_at), **env)
        if first.returncode != 128 + 9:
            raise SystemExit(f"{label}: the first pod ended with {first.returncode}, not killed:\n{first.stderr[-2000:]}")
        node = run.node()
        restored = run.restore(node)
        if restored.returncode != 0:
            raise SystemExit(f"{label}: restore failed:\n{restored.stderr}")
        restored_bytes = _bytes(node.run_dir)
        second, _ = run.train(node, LAST_STEP=str(args.saves), **env)
        if second.returncode != 0:
            raise SystemExit(f"{label}: the second pod ended with {second.returncode}:\n{second.stderr[-2000:]}")
        disk = run.disk()
        return {
            "label": label,
            "every_tenth": {step: used for step, used in disk if step % 10 == 0},
            "peak": max(used for _, used in disk),
            "restored": restored_bytes,
            "end": _bytes(node.run_dir),
            "bucket": _bytes(run.s3()),
            "resumed_from": run.resumes()[-1].rsplit("/", 1)[-1],
        }


def table(results: list[dict[str, object]], args: argparse.Namespace) -> str:
    mib = lambda n: f"{int(n) / MIB:.1f}"  # noqa: E731
    steps = sorted({s for r in results for s in r["every_tenth"]})  # type: ignore[attr-defined]
    lines = [
        "| | " + " | ".join(f"after save {s}" for s in steps) + " | peak | restored at the restart | run dir at the end | bucket at the end | resumed from |",
        "|---|" + "---:|" * (len(steps) + 4) + "---|",
    ]
    for r in results:
        row = [mib(r["every_tenth"].get(s, 0)) for s in steps]  # type: ignore[attr-defined]
        lines.append(f"| {r['label']} | " + " | ".join(row) + f" | {mib(r['peak'])} | {mib(r['restored'])} | {mib(r['end'])} | {mib(r['bucket'])} | {r['resumed_from']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=50)
    parser.add_argument("--kill-at", type=int, default=30)
    parser.add_argument("--save-mib", type=int, default=4)
    parser.add_argument("--step-seconds", type=float, default=0.6)
    parser.add_argument("--write", action="store_true", help="write the table into bench/RESULTS.md")
    args = parser.parse_args()
    results = [
        one_run(f"before ({BEFORE}: no retention, whole-prefix restore)", args, keep_local=0, restore=_old("restore.sh"), sync=_old("sync.sh")),
        one_run("after (keepLocal 2)", args),
    ]
    text = table(results, args)
    print(text)
    if args.write:
        body = (
            "# Checkpoint disk over a long run\n\n"
            f"Machine: {machine()}. Produced by `python bench/checkpoint_disk_bench.py --saves {args.saves} --kill-at {args.kill_at} "
            f"--save-mib {args.save_mib} --step-seconds {args.step_seconds} --write`: the rendered launch.sh and sync.sh with a fake "
            f"trainer (rlinf-embodied layout) saving {args.save_mib} MiB every {args.step_seconds} s, killed in the middle of save "
            f"{args.kill_at} and restarted on a fresh node from the (fake, local) bucket. MiB under the node's run directory, measured "
            "by the trainer after each save (the peak: retention only lowers it). Target: the peak within (keepLocal + 1) saves plus "
            "the files beside them, whatever the number of saves; the restore brings back one checkpoint.\n\n"
            f"{text}\n"
        )
        write_section("checkpoint-disk", "checkpoint_disk_bench.py", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
