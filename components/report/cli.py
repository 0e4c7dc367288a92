"""The ``report`` command: ``python -m rlinf_eks report STACK [--run-dir DIR | --from-bucket] [--out DIR]``.

Exit status: 0 a report with curves, 1 the run has logged nothing yet (the page says so), 2 bad
input (an unknown stack, a missing run directory, an unreadable bucket, the extra not installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any, Optional

from ..wording import counted

REPORT_OUTPUTS = ("index.html", "report.json", "figures", "run")
"""What a report's folder holds (the page, its data, its figures, a run copied from the bucket): a
folder with files must hold one of them to be written into."""
INSTALL = "pip install 'rlinf-eks[report]'  (from a checkout: pip install -e '.[report]')"


def add_parser(commands: Any) -> None:
    from ..offline.engine.arguments import add_stack_arguments, output_folder

    report = commands.add_parser(
        "report", help="draw a run's curves and evaluations from its logs into an HTML page (0 drawn, 1 nothing logged yet, 2 bad input)"
    )
    add_stack_arguments(report, stack_help="stack name (stacks/Pulumi.<stack>.yaml) or a stack file's path: its dialect, run directory and bucket prefix")
    where = report.add_mutually_exclusive_group()
    where.add_argument("--run-dir", metavar="DIR", help="the run directory (or a copy of it); default the stack's on the shared filesystem, when mounted here")
    where.add_argument("--from-bucket", action="store_true", help="copy the run's logs from s3://<bucket>/<stack>[-runs/<runName>]/ first (boto3, your AWS credentials)")
    report.add_argument("--bucket", metavar="NAME", help="with --from-bucket: the checkpoint bucket (the stack output checkpointBucket); default storage.bucketName")
    report.add_argument("--out", metavar="DIR", type=output_folder, help="the report folder; default build/<stack>/report")
    report.set_defaults(func=run)


def _missing_extra(from_bucket: bool) -> list[str]:
    modules = ["matplotlib", "tensorboard", *(["boto3"] if from_bucket else [])]
    return [name for name in modules if importlib.util.find_spec(name) is None]


def _error(stack: str, text: str) -> int:
    print(f"error: report {stack}: {text}", file=sys.stderr)
    return 2


def _settings(args: argparse.Namespace) -> tuple[Any, Path]:
    from ..offline.outputs import plan as plan_mod
    from ..offline.engine.arguments import load_stack

    stack = load_stack(args)
    args.stack = stack.name  # a stack file's path names its stack
    return plan_mod.settings_of(stack.config, stack.platform), stack.root


def _from_bucket(args: argparse.Namespace, settings: Any, prefix: str, dest: Path) -> Optional[str]:
    """Copy the run's logs into ``dest``; an error line, or None."""
    import boto3

    from .bucket import BucketError, download_logs

    bucket = args.bucket or settings.storage.bucket_name
    if not bucket:
        return "--from-bucket needs --bucket NAME: the stack's generated bucket name is its output checkpointBucket (pulumi stack output checkpointBucket)"
    try:
        copied = download_logs(boto3.client("s3"), bucket, prefix, dest)
    except BucketError as err:
        return str(err)
    print(f"copied {counted(len(copied), 'log file')} from s3://{bucket}/{prefix}/ into {dest}", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    missing = _missing_extra(args.from_bucket)
    if missing:
        return _error(args.stack, f"needs {', '.join(missing)} (the report extra): {INSTALL}")
    from ..config import ConfigError
    from ..offline.outputs.output import REPORT_FOLDER, OutputError, OutputFolder, check_output

    report_folder = OutputFolder("report", ("figures",), REPORT_OUTPUTS)
    from ..offline.engine.stack_config import StackConfigError
    from ..workload.run import run_paths

    try:
        if args.out:
            check_output(Path(args.out), report_folder)  # before anything else, as every command checks its output folder
        settings, root = _settings(args)
    except OutputError as err:
        return _error(args.stack, f"--out: {err}")
    except (ConfigError, StackConfigError) as err:
        return _error(args.stack, str(err))
    if not settings.workload.enabled:
        role = "a platform (platform.role: platform)" if settings.platform.role == "platform" else "a stack whose workload is disabled"
        return _error(args.stack, f"{role} runs no training, so it has no run to report: report an experiment of it")
    paths = run_paths(settings, args.stack, settings.shared_filesystem)
    out = Path(args.out) if args.out else root / "build" / args.stack / REPORT_FOLDER
    try:
        check_output(out, report_folder)
    except OutputError as err:
        return _error(args.stack, f"--out: {err}")
    if args.from_bucket:
        run_dir = out / "run"
        problem = _from_bucket(args, settings, paths.s3_prefix, run_dir)
        if problem:
            return _error(args.stack, problem)
        where = f"s3 prefix {paths.s3_prefix}/ (copied to {run_dir})"
    else:
        run_dir = Path(args.run_dir) if args.run_dir else Path(paths.root)
        if not run_dir.is_dir():
            given = "--run-dir" if args.run_dir else f"the stack's run directory ({'shared filesystem' if paths.shared else 'node-local, synced to S3'})"
            return _error(
                args.stack,
                f"{given} {run_dir}: no such folder here; give --run-dir DIR (a copy of the run directory) or --from-bucket "
                f"(s3://<bucket>/{paths.s3_prefix}/)",
            )
        where = str(run_dir)
    from ..offline.outputs.output import commit, staged
    from . import make_report

    from ..trainers import recipe_of

    dialect = settings.workload.trainer.dialect
    step_offset = recipe_of(dialect).startup.logged_step.offset
    try:
        # written beside out and moved into place whole: an interrupted report leaves out as it was
        with staged(out, report_folder) as folder:
            result = make_report(
                run_dir, out, title=f"{args.stack}: {settings.workload.run_name or 'default run'} ({dialect})",
                backend=settings.observability_backend, meta=f"run {where}; dialect {dialect}; mode {settings.workload.mode}", into=folder,
                step_offset=step_offset,
            )  # fmt: skip
            commit(folder, out)
    except OutputError as err:
        return _error(args.stack, f"--out: {err}")
    print(result.summary)
    from .logs import foreign_logs

    foreign = foreign_logs(dialect, result.formats)
    if foreign:
        print(f"warning: report {args.stack}: {foreign}", file=sys.stderr)
    print(f"wrote {out / 'index.html'} and {counted(len(result.files) - 2, 'figure file')} in {out / 'figures'}")
    return result.status

