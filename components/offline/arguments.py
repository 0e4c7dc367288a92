"""The arguments of every command that reads a stack, one grammar for all of them (``plan``,
``image-contract``, ``verify``, ``report``, ``build-image``)::

    STACK [--set KEY=VALUE ...] [--unset KEY ...] [--platform DIR]

``STACK`` is a stack name (``stacks/Pulumi.<stack>.yaml``) or a stack file's path; ``--set`` and
``--unset`` edit a copy of its config as ``pulumi config set|rm --path`` would, in the order given
(rlinf_eks.offline.config_edits); ``--platform DIR`` is an experiment's platform plan, refused for
any other stack. :func:`load_stack` reads them the same way for every command, so a typo, an
unknown stack or a misplaced ``--platform`` gets the same line (exit 2) whichever command it is.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .config_edits import add_edit_arguments

if TYPE_CHECKING:
    from .plan import PlatformPlan
    from .stack_config import StackConfig

STACK_HELP = "stack name (stacks/Pulumi.<stack>.yaml) or a stack file's path (path/to/Pulumi.<stack>.yaml)"
SET_HELP = (
    "as `pulumi config set --path KEY VALUE` on a copy of the stack's config, e.g. gpuNodes.nodeCount=4; "
    'a key holding ".", ":" or "=" is quoted: tags["team:owner"]=ml'
)
PLATFORM_HELP = (
    "an experiment stack (platform.role: experiment): its platform's plan folder, whose outputs answer the "
    "StackReference; default: the folder beside the output named after the platform's stack (build/<platform>); "
    "refused for any other stack"
)


def add_stack_arguments(parser: argparse.ArgumentParser, *, default: Optional[str] = None, stack_help: str = STACK_HELP) -> None:
    """STACK (required unless ``default``), ``--set``, ``--unset`` and ``--platform``."""
    if default is None:
        parser.add_argument("stack", help=stack_help)
    else:
        parser.add_argument("stack", nargs="?", default=default, help=f"{stack_help}; default {default}")
    add_edit_arguments(parser, help_set=SET_HELP)
    parser.add_argument("--platform", metavar="DIR", help=PLATFORM_HELP)


@dataclass(frozen=True)
class Stack:
    """A stack as the command line gives it: the project folder, its config with the edits applied
    (edits that could not be applied are its ``problems``) and an experiment's platform plan."""

    root: Path
    config: StackConfig
    platform: Optional[PlatformPlan]

    @property
    def name(self) -> str:
        return self.config.stack


def load_stack(args: argparse.Namespace, out: Optional[Path] = None, root: Optional[Path] = None) -> Stack:
    """The stack of ``args`` (STACK, --set/--unset, --platform); ``out``: the command's output folder,
    beside which an experiment's platform plan is looked for (default build/<stack>); ``root``: the
    project folder (default: the one holding the current folder). Raises
    StackConfigError (or ConfigError) with the line to print."""
    from .plan import platform_for
    from .stack_config import load, project_root

    root = root or project_root()
    config = load(root, args.stack, args.set)
    platform = platform_for(config, args.platform, out or root / "build" / config.stack)
    return Stack(root, config, platform)
