"""Command line: ``python -m rlinf_eks plan|diff ...``.

Exit status: 0 success, 1 a diff found changes (``diff``) or policy violations under ``--strict``,
2 bad input (stack config, arguments).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _plan(args: argparse.Namespace) -> int:
    from .config import ConfigError
    from .offline import plan as plan_mod
    from .offline.stack_config import StackConfigError, load, project_root

    try:
        root = project_root()
        stack_config = load(root, args.stack, args.set)
        plan = plan_mod.make_plan(stack_config)
    except (ConfigError, StackConfigError) as err:
        print(f"error: stack {args.stack}: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else root / "build" / args.stack
    plan_mod.write(plan, out)
    if not args.quiet:
        print(plan_mod.render_tree(plan))
        report = plan_mod.efficiency_of_plan(plan)
        if report is not None:
            from .offline.efficiency import render_efficiency

            print(render_efficiency(report))
        print("\n".join(plan_mod.render_outputs(plan.outputs)))
    for warning in plan.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote {out / plan_mod.PLAN_FILE} and {len(plan.manifests())} manifests in {out / plan_mod.MANIFESTS}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlinf_eks", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    plan = commands.add_parser("plan", help="run a stack's program under Pulumi mocks and write plan.json and manifests/")
    plan.add_argument("stack", nargs="?", default="single-node", help="stack name (stacks/Pulumi.<stack>.yaml); default single-node")
    plan.add_argument("--out", help="output folder; default build/<stack>")
    plan.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="as `pulumi config set --path KEY VALUE` on a copy of the stack's config, e.g. gpuNodes.nodeCount=4",
    )
    plan.add_argument("--quiet", action="store_true", help="do not print the resource tree")
    plan.set_defaults(func=_plan)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
