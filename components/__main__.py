"""The command line, ``python -m rlinf_eks COMMAND``: DESCRIPTION below is its --help."""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from .wording import counted

DESCRIPTION = """\
The offline plan and the tools around a stack: plan, diff, image-contract, verify, report and
build-image (python -m rlinf_eks COMMAND --help for each).

Exit status: 0 success; 1 a diff found changes, or under --strict a policy violation, a
placeholder value (unless --allow-placeholders or the stack's allowPlaceholders: true) or a GPU
instance type not sold in the stack's region; 2 bad input (the stack's settings, the arguments);
74 a write failed (a full device: one line); 130 interrupted (Ctrl-C: one line, no output folder
half-written)."""


def _plan(args: argparse.Namespace) -> int:
    from .config import ConfigError
    from .offline.outputs import plan as plan_mod, tree
    from .offline.engine.arguments import load_stack
    from .offline.engine.stack_config import StackConfigError

    try:
        stack = load_stack(args, Path(args.out) if args.out else None)
        out = Path(args.out) if args.out else stack.root / "build" / stack.name
        plan_mod.check_output(out)
        plan = plan_mod.make_plan(stack.config, stack.platform)
        from .gpu_memory import gpu_memory_problems

        refused = plan_mod.downgrade_problems(plan, out) + (gpu_memory_problems(plan.settings) if plan.settings is not None else [])
        if refused:
            raise ConfigError(refused)
        written = plan_mod.write(plan, out)
    except plan_mod.OutputError as err:
        print(f"error: --out: {err}", file=sys.stderr)
        return 2
    except (ConfigError, StackConfigError) as err:
        print(f"error: stack {args.stack}: {err}", file=sys.stderr)
        return 2
    report = plan_mod.efficiency_of_plan(plan)
    if args.quiet:  # the few lines a script or a reviewer needs (rlinf_eks.offline.outputs.summary); plan.json has the rest
        from .offline.outputs import summary

        budget = plan.to_json().get(plan_mod.STORAGE_BUDGET)
        print("\n".join(summary.lines(plan, report, budget, out, plan_mod.PLAN_FILE, plan_mod.MANIFESTS)))
        return _verdicts(plan, args, [*plan.warnings, *written])
    print(tree.render_tree(plan))
    print()
    if report is not None:
        from .offline.outputs.efficiency import render_efficiency

        print(render_efficiency(report))
        print()
    from .gpu_memory import render as render_gpu_memory
    from .storage_budget import render as render_storage_budget

    data = plan.to_json()
    for section in (render_storage_budget(data.get(plan_mod.STORAGE_BUDGET)), render_gpu_memory(data.get(plan_mod.GPU_MEMORY))):
        if section:
            print(section)
            print()
    from .offline.outputs.inputs import render as render_inputs
    from .offline.outputs.resilience import render as render_faults

    inputs = render_inputs(plan.settings, plan.stack)
    if inputs:
        print(inputs)
        print()

    if plan.unchecked:
        print("\n".join(["Not checked offline (`pulumi up` is the first to test them):", *(f"  {line}" for line in plan.unchecked)]))
        print()
    faults = render_faults(plan.settings, plan.stack)
    if faults:
        print(faults)
        print()
    from .offline.outputs.first_step import render as render_first_step

    first_step = render_first_step(plan.first_step)
    if first_step:
        print(first_step)
        print()
    from .offline.outputs.queue import render as render_queue

    queue = render_queue(plan.settings, plan.stack)
    if queue:
        print(queue)
        print()
    if plan.settings is not None and plan.settings.platform.role != "experiment":  # an experiment's nodes are its platform's
        from .quotas import render as render_quotas

        print(render_quotas(plan.settings))
        print()
    print("\n".join(tree.render_outputs(plan.outputs)))
    print()
    print(f"wrote {out / plan_mod.PLAN_FILE} and {counted(len(plan.manifests()), 'manifest')} in {out / plan_mod.MANIFESTS}")
    return _verdicts(plan, args, [*plan.warnings, *written])


def _verdicts(plan: Any, args: argparse.Namespace, warnings: list[str]) -> int:
    """The plan's warnings, policy violations, placeholders and GPU types not sold in the region, on
    stderr (with --quiet too: they are what to act on), and the status: 1 under --strict for any but
    a warning (placeholders allowed by --allow-placeholders or allowPlaceholders: true), else 0."""
    from .offerings import not_sold
    from .offline.outputs import plan as plan_mod

    strict = " (--strict: failing)" if args.strict else ""
    allowed = args.allow_placeholders or (plan.settings is not None and plan.settings.allow_placeholders)
    placeholders_fail = bool(plan.placeholders) and args.strict and not allowed
    unsold = not_sold(plan.settings) if plan.settings is not None else []
    violations = plan_mod.violations_of_plan(plan)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    for violation in violations:
        print(f"policy violation: {violation}", file=sys.stderr)
    for placeholder in plan.placeholders:
        print(f"placeholder: {placeholder}", file=sys.stderr)
    for line in unsold:
        print(f"not sold: {line}", file=sys.stderr)
    if violations:
        print(f"{counted(len(violations), 'policy violation')}{strict}", file=sys.stderr)
    if plan.placeholders:
        one = len(plan.placeholders) == 1
        if plan.settings is not None and plan.settings.allow_placeholders:
            state = f", deployed as {'it is' if one else 'they are'} (allowPlaceholders: true)"
        else:
            state = f" to replace: pulumi up refuses {'it' if one else 'them'} unless the stack sets allowPlaceholders: true"
            state += " (--strict: failing; --allow-placeholders to plan example stacks)" if placeholders_fail else ""
        print(f"{counted(len(plan.placeholders), 'placeholder')}{state}", file=sys.stderr)
    if unsold:
        print(f"{counted(len(unsold), 'GPU instance type')} not sold in aws:region {plan.region}{strict}", file=sys.stderr)
    return 1 if (violations or unsold) and args.strict or placeholders_fail else 0


def _image_contract(args: argparse.Namespace) -> int:
    from .config import ConfigError
    from .offline.outputs import plan as plan_mod
    from .offline.engine.arguments import load_stack
    from .offline.engine.stack_config import StackConfigError
    from .workload.image_contract import contract_for
    from .workload.run import resolve_run

    try:
        stack = load_stack(args)
        # an experiment reads its nodes from its platform's plan, as `plan` does
        settings = plan_mod.settings_of(stack.config, stack.platform)
    except (ConfigError, StackConfigError) as err:
        print(f"error: stack {args.stack}: {err}", file=sys.stderr)
        return 2
    if not settings.workload.enabled:
        role = "a platform (platform.role: platform)" if settings.platform.role == "platform" else "a stack whose workload is disabled"
        print(f"error: stack {args.stack}: {role} runs no training pods, so no image contract: ask it of a stack that runs one "
              "(an experiment on this platform)", file=sys.stderr)  # fmt: skip
        return 2
    print(contract_for(resolve_run(settings, stack.name)).render())
    return 0


def _diff(args: argparse.Namespace) -> int:
    from .offline.diff import diff as diff_mod
    from .offline.diff.diff_text import render_text

    form = args.format or ("text" if sys.stdout.isatty() else "markdown")
    status, text = diff_mod.run(args.base, args.new, render_text if form == "text" else diff_mod.render_markdown)
    print(text, file=sys.stderr if status == 2 else sys.stdout)
    return status


class _Version(argparse.Action):
    """``--version``: rlinf_eks.__version__ on stdout (argparse's own version action drops a failed write)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from . import __version__

        print(f"rlinf-eks {__version__}")
        parser.exit()


BUILT_IN = ("plan", "diff", "image-contract")
OWN_MODULES = {"verify": ".verify.cli", "report": ".report.cli", "build-image": ".image_build.cli"}
"""The commands whose parser and code live in a module of their own: a command line that names
another command first imports none of them (a plan or a diff starts without verify's, report's
and build-image's imports); --help, no command or an unknown one registers them all."""


def main(argv: list[str] | None = None) -> int:
    from .offline.engine.arguments import Grammar, add_stack_arguments, output_folder

    parser = Grammar(
        prog="python -m rlinf_eks", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print rlinf-eks's version and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    plan = commands.add_parser("plan", help="run a stack's program under Pulumi mocks and write plan.json and manifests/")
    add_stack_arguments(plan, default="single-node")
    plan.add_argument("--out", metavar="DIR", type=output_folder, help="output folder; default build/<stack>")
    plan.add_argument(
        "--quiet", action="store_true",
        help="print a five-line summary (the stack, its cost, the storage budget's verdict, the placeholders, what was "
        "written) instead of the plan's sections; warnings and problems still go to stderr",
    )
    plan.add_argument(
        "--strict", action="store_true",
        help="exit 1 when a policy (rlinf_eks.policies) is violated or a placeholder value is left (rlinf_eks.placeholders)",
    )
    plan.add_argument(
        "--allow-placeholders", action="store_true",
        help="with --strict: report placeholder values but do not fail on them (CI plans of the example stacks)",
    )
    plan.set_defaults(func=_plan)

    diff = commands.add_parser(
        "diff", help="compare two offline plans (plan.json files or plan folders); exit 0 equal, 1 different, 2 bad input"
    )
    diff.add_argument("base", help="the base plan: plan.json or the folder holding it (e.g. build/base/single-node)")
    diff.add_argument("new", help="the new plan: plan.json or the folder holding it")
    diff.add_argument(
        "--format", choices=["text", "markdown"],
        help="text for a terminal, markdown (GitHub's: a PR comment, a job summary); default text when stdout is a terminal, else markdown",
    )
    diff.set_defaults(func=_diff)

    contract = commands.add_parser(
        "image-contract", help="print what the stack's pods need inside workload.image (tools, Ray, trainer paths, EFA)"
    )
    add_stack_arguments(contract, default="single-node")
    contract.set_defaults(func=_image_contract)

    argv = sys.argv[1:] if argv is None else argv
    for name, module in OWN_MODULES.items():
        if not argv or argv[0] not in [*BUILT_IN, *OWN_MODULES] or argv[0] == name:
            importlib.import_module(module, __package__).add_parser(commands)

    args = parser.parse_args(argv)
    return args.func(args)


def cli() -> None:
    """The process entry point: ``main`` tuned for a short-lived command.

    The Pulumi SDKs build tens of thousands of classes at import; the cyclic garbage collector
    rescans them over and over (about a fifth of a plan's wall time) and interpreter teardown
    frees them one by one (about half a second). The command makes few cycles and exits right
    after its files are written and closed, so it runs without the collector and leaves with
    ``os._exit`` once its output is flushed (bench/RESULTS.md has the figures). Ctrl-C or SIGTERM
    ends it with one line and status 130 (143), leaving no output folder half-written.
    """
    from . import interrupts

    interrupts.install()  # Ctrl-C: one line, exit 130, whatever the command is doing (rlinf_eks.interrupts)
    gc.disable()
    try:
        try:
            status = main()
        except SystemExit as done:  # argparse's --help, --version and usage errors: their output is flushed below too
            status = done.code if isinstance(done.code, int) else 0 if done.code is None else _said(str(done.code))
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader stopped early (`plan | head`): no traceback, the status of a process SIGPIPE ended
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 128 + signal.SIGPIPE
    except OSError as err:
        if err.errno not in WRITE_ERRORS:
            raise
        status = _write_failed(err)
    try:
        sys.stderr.flush()
    except OSError:
        pass  # stderr is the full device too: the status says it
    os._exit(status)


WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
"""A write the device refused (full, over quota, too large, failing, read-only): one line, EX_IOERR."""
EX_IOERR = 74
"""sysexits.h: an error occurred while doing I/O on some file."""


def _said(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def _write_failed(err: OSError) -> int:
    """One line for a write the device refused (``plan > /dev/full``), and EX_IOERR. What stdout
    still buffers is dropped: the command leaves with os._exit."""
    what = err.filename or "standard output"
    line = f"error: could not write {what}: {err.strerror} ({errno.errorcode.get(err.errno, err.errno)})"
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass
    return EX_IOERR


if __name__ == "__main__":
    cli()
