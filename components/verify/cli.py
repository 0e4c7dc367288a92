"""``python -m rlinf_eks verify STACK``: the command around the ladder (:mod:`.runner`).

Exit status: 0 ready (every check passed or was skipped), 1 not ready (a check failed, or no
cluster answered), 130 interrupted (after the clean-up), 2 bad usage (an unknown stack, bad settings, bad flags). ``--dry-run --out DIR``
needs no cluster: it writes the objects a climb would create (and the RBAC a non-admin user needs)
as manifests, to review like a plan. Whatever ends a climb (a failure, Ctrl-C, SIGTERM), the
objects it created are deleted before the command exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from ..wording import counted
from typing import Any, Optional

import yaml

from .. import interrupts
from .model import LEVELS, CheckResult

REMEDY_WIDTH = 100
DRY_RUN_OUTPUTS = ("manifests",)
"""What a dry run writes into --out: a folder with files must hold it to be written into."""



def add_parser(commands: Any) -> None:
    from ..offline.engine.arguments import add_stack_arguments, output_folder

    verify = commands.add_parser(
        "verify", help="prove a deployed stack's cluster ready, level by level (0 ready, 1 not ready, 2 bad usage)"
    )
    add_stack_arguments(verify)
    verify.add_argument("--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, else the stack's kubeconfig output (pulumi), else ~/.kube/config")
    verify.add_argument("--context", metavar="NAME", help="the kubeconfig context; default its current one")
    verify.add_argument("--level", type=int, default=5, choices=sorted(LEVELS), help="run levels 0..N (default 5: all)")
    verify.add_argument("--keep-going", action="store_true", help="run every level even after one failed")
    verify.add_argument("--json", metavar="FILE", help="also write the report as JSON (for CI)")
    verify.add_argument("--dry-run", action="store_true", help="no cluster: write the objects verify would create into --out")
    verify.add_argument("--out", metavar="DIR", type=output_folder, help="with --dry-run: the folder of the manifests (default build/<stack>-verify)")
    verify.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> tuple[Any, Path]:
    from ..offline.outputs import plan as plan_mod
    from ..offline.engine.arguments import load_stack

    stack = load_stack(args)
    return plan_mod.settings_of(stack.config, stack.platform), stack.root


def _stack_kubeconfig(stack: str) -> Optional[str]:
    """The stack's kubeconfig output, through the Pulumi CLI when it is installed, as a temporary
    file (0600); None without the CLI or the output."""
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        return None
    try:
        done = subprocess.run(
            [pulumi, "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack], capture_output=True, text=True, timeout=120
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    with interrupts.held():  # Ctrl-C from here on removes the file (it holds the cluster's credentials)
        handle, path = tempfile.mkstemp(prefix="rlinf-verify-", suffix=".kubeconfig")
        interrupts.staging(path)
    with os.fdopen(handle, "w") as out:
        out.write(done.stdout)
    return path


def kubeconfig_cluster(path: Optional[str], context: Optional[str]) -> Optional[str]:
    """The EKS cluster a kubeconfig's context authenticates to (``aws eks get-token --cluster-name
    X``, as ``aws eks update-kubeconfig`` and the stack's output write it), None when it says none."""
    file = Path(path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
    try:
        config = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    def mapping(value: Any) -> dict:
        return value if isinstance(value, dict) else {}

    def entries(key: str) -> list[dict]:  # a kubeconfig's list of named entries; anything else is none
        found = mapping(config).get(key)
        return [mapping(entry) for entry in found] if isinstance(found, list) else []

    # a file that is YAML but no kubeconfig (a list, a string: --kubeconfig /etc/passwd) names no
    # cluster here; the Kubernetes client then says what is wrong with it
    name = context or mapping(config).get("current-context")
    ctx = next((mapping(c.get("context")) for c in entries("contexts") if c.get("name") == name), {})
    user = next((mapping(u.get("user")) for u in entries("users") if u.get("name") == ctx.get("user")), {})
    args = mapping(user.get("exec")).get("args")
    args = [str(a) for a in args] if isinstance(args, list) else []
    for flag in ("--cluster-name", "-i"):
        if flag in args and args.index(flag) + 1 < len(args):
            return str(args[args.index(flag) + 1])
    return None


def render_table(results: list[CheckResult]) -> str:
    """One row a check: level, check, result, time, then what was seen or what to do."""
    rows = [("L", "check", "result", "time", "detail / remedy")]
    for r in results:
        text = r.detail if r.ok else f"{r.detail} -> {r.remedy}"
        rows.append((str(r.level), r.name, r.outcome, f"{r.seconds:.1f}s", text))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4] for row in rows]
    return "\n".join(lines)


def report_json(stack: str, results: list[CheckResult], ready: bool, left: list[str]) -> dict[str, Any]:
    return {"stack": stack, "ready": ready, "checks": [r.as_json() for r in results], "notDeleted": left}


def _progress(line: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\033[K{line}")
        sys.stderr.flush()


def _dry_run_folder() -> Any:
    """The dry run's --out (rlinf_eks.offline.outputs.output): its manifests/, never a plan's folder, which
    holds manifests/ too (a dry run's objects must not mix with, or replace, the plan's)."""
    from ..offline.outputs.output import OutputFolder
    from ..offline.outputs.plan import PLAN_FILE, WRITTEN_FILE

    return OutputFolder("verify", ("manifests",), DRY_RUN_OUTPUTS, {name: "a plan's folder" for name in (PLAN_FILE, WRITTEN_FILE)})


def _dry_run(ladder: Any, out: Path) -> int:
    import dataclasses

    from ..offline.outputs.output import commit, staged
    from ..offline.outputs.plan import manifest_file_name
    from .runner import DRY_RUN_ID, dry_run_objects

    objects = dry_run_objects(dataclasses.replace(ladder, run_id=DRY_RUN_ID))
    with staged(out, _dry_run_folder()) as folder:
        (folder / "manifests").mkdir()
        for obj in objects:
            (folder / "manifests" / manifest_file_name(obj)).write_text(yaml.safe_dump(obj, sort_keys=True, default_flow_style=False))
        commit(folder, out)
    print(f"wrote {counted(len(objects), 'manifest')} in {out / 'manifests'} (GPU node names are stand-ins: gpu-node-0...)")
    return 0


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..offline.outputs.output import OutputError, check_output
    from ..offline.engine.stack_config import StackConfigError, stack_name
    from .expect import expectation_of
    from .runner import Ladder, new_run_id

    if args.out and not args.dry_run:
        print("error: --out is the folder of --dry-run's manifests: add --dry-run, or leave --out out", file=sys.stderr)
        return 2
    problem = _json_file_problem(Path(args.json)) if args.json else None
    if problem:
        print(f"error: --json {args.json}: {problem}", file=sys.stderr)
        return 2
    try:
        if args.out:
            check_output(Path(args.out), _dry_run_folder())  # before anything else, as every command checks its output folder
        settings, root = _settings(args)
        args.stack_file, args.stack = args.stack, stack_name(args.stack)  # the rest names the stack
        ladder = Ladder(settings, args.stack, expectation_of(settings, args.stack), new_run_id(), progress=_progress)
    except OutputError as err:
        print(f"error: --out: {err}", file=sys.stderr)
        return 2
    except (ConfigError, StackConfigError) as err:
        print(f"error: stack {args.stack}: {err}", file=sys.stderr)
        return 2
    if not settings.workload.enabled and settings.platform.role != "platform":
        print(f"error: stack {args.stack}: no workload to verify for", file=sys.stderr)
        return 2
    if args.dry_run:
        try:
            return _dry_run(ladder, Path(args.out) if args.out else root / "build" / f"{args.stack}-verify")
        except OutputError as err:
            print(f"error: --out: {err}", file=sys.stderr)
            return 2
    from_pulumi = None if args.kubeconfig or os.environ.get("KUBECONFIG") else _stack_kubeconfig(args.stack)
    try:
        with interrupts.raising():  # the climb cleans up after itself, so Ctrl-C reaches it as KeyboardInterrupt
            return _climb(args, settings, ladder, args.kubeconfig or from_pulumi)
    except KeyboardInterrupt:  # before the climb created anything (reading the kubeconfig, reaching the cluster)
        print("error: interrupted: verify stopped (what a climb creates is deleted before it ends)", file=sys.stderr)
        return 130
    finally:
        if from_pulumi:
            Path(from_pulumi).unlink(missing_ok=True)
            interrupts.staged(from_pulumi)


def _climb(args: argparse.Namespace, settings: Any, ladder: Any, path: Optional[str]) -> int:
    from .client import Cluster, ClusterError
    from .runner import climb

    expected = settings.cluster.name or f"rlinf-{args.stack}"
    if settings.platform.role == "experiment":
        expected = None  # the platform's cluster: its name is the platform's
    found = kubeconfig_cluster(path, args.context)
    if expected and found and found != expected:
        print(f"error: the kubeconfig is for EKS cluster {found}, stack {args.stack}'s is {expected}: pass --kubeconfig or --context", file=sys.stderr)
        return 1
    if path is None and not os.environ.get("KUBECONFIG") and not (Path.home() / ".kube" / "config").exists():
        print(
            f"error: no cluster to verify: no kubeconfig (no --kubeconfig, no $KUBECONFIG, no kubeconfig output of stack {args.stack}, "
            f"no ~/.kube/config): pass --kubeconfig PATH, or see what verify would create without a cluster: "
            f"python -m rlinf_eks verify {args.stack_file} --dry-run",
            file=sys.stderr,
        )
        return 1
    try:
        cluster = Cluster(path, args.context)
    except ClusterError as err:
        print(f"error: {err} (without a cluster: python -m rlinf_eks verify {args.stack_file} --dry-run)", file=sys.stderr)
        return 1
    if cluster.insecure_warning:
        print(f"warning: {cluster.insecure_warning}", file=sys.stderr)

    def stop(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    stopped = ""
    results: list[CheckResult] = []
    try:
        climb(ladder, cluster, up_to=args.level, keep_going=args.keep_going, results=results)
    except KeyboardInterrupt:
        stopped = "interrupted"
    except ClusterError as err:
        stopped = str(err)
    except Exception as err:  # noqa: BLE001 - an API or network error ends the climb with one line, never a traceback
        stopped = _failure_line(ladder, cluster, err)
    finally:
        # a second Ctrl-C (or SIGTERM) must not stop the clean-up
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in handlers:
            signal.signal(sig, signal.SIG_IGN)
        left = cluster.clean_up()
        signal.signal(signal.SIGINT, interrupt)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
    ready = bool(results) and not stopped and all(r.ok for r in results)
    print(render_table(results))
    if left:
        print(f"could not delete: {', '.join(left)} (label rlinf-eks/verify-run={ladder.run_id}: delete them by hand)", file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report_json(args.stack, results, ready, left), indent=2) + "\n")
    top = max((r.level for r in results), default=-1)
    if stopped and stopped != "interrupted":
        print(f"error: {stopped}", file=sys.stderr)
    verdict = "interrupted" if stopped == "interrupted" else ("ready" if ready else "NOT READY")
    print(f"{args.stack}: {verdict} (levels 0-{top} of 0-{args.level})")
    if stopped == "interrupted":
        print("error: interrupted: the climb stopped" + (" and deleted what it created" if not left else ""), file=sys.stderr)
        return 130  # as a command Ctrl-C ended, after the clean-up
    return 0 if ready else 1


def _json_file_problem(path: Path) -> Optional[str]:
    """Why --json FILE cannot be written, checked before the climb (as every output is); None if it can."""
    from ..offline.outputs.output import OutputError, check_output

    if path.is_dir():
        return f"a folder, not a file: name the file, such as {path / 'verify.json'}"
    try:
        check_output(path.parent)
    except OutputError as err:
        return str(err)
    return None


def _failure_line(ladder: Any, cluster: Any, err: BaseException) -> str:
    """One line for what ended a climb: a failed API call's endpoint, reason and remedy, else the error's first line."""
    from .client import api_failure
    from .control_plane import failure_words

    failure = api_failure(err, getattr(cluster, "endpoint", "the API server"))
    if failure is None or failure.reason == "error":
        return f"the cluster stopped answering: {type(err).__name__}: {_first_line(err)}"
    detail, remedy = failure_words(ladder.expect, failure)
    return f"{detail}: {remedy}"


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else ""
