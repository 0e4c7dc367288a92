"""The arguments of every command that reads a stack, one grammar for all of them (``plan``,
``image-contract``, ``verify``, ``report``, ``build-image``)::

    STACK [--set KEY=VALUE ...] [--unset KEY ...] [--platform DIR]

``STACK`` is a stack name (``stacks/Pulumi.<stack>.yaml``) or a stack file's path; ``--set`` and
``--unset`` edit a copy of its config as ``pulumi config set|rm --path`` would, in the order given
(rlinf_eks.offline.engine.config_edits); ``--platform DIR`` is an experiment's platform plan, refused for
any other stack. :func:`load_stack` reads them the same way for every command, so a typo, an
unknown stack or a misplaced ``--platform`` gets the same line (exit 2) whichever command it is.
:class:`Grammar` is the parser of the command line and of every command: argparse's own errors (an
unknown flag, a value outside a flag's choices, a missing argument or value) are one line too.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional, Sequence

from .config_edits import add_edit_arguments

if TYPE_CHECKING:
    from ..outputs.plan import PlatformPlan
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


class Grammar(argparse.ArgumentParser):
    """argparse's parser whose own errors are one line in the project's words, exit 2: the flag or
    argument, the value as written and what is valid (``error: plan --sett: no such flag (did you
    mean --set?); ...``) instead of a usage block and argparse's line. ``--help`` is argparse's.
    Subcommands' parsers are of this class too (``add_subparsers`` makes its parser's class)."""

    _seen: Sequence[str] = ()

    def _name(self) -> str:
        """The command's name (``plan``), '' for the top-level parser."""
        return self.prog.split()[-1] if getattr(self, "_command", False) else ""

    def add_subparsers(self, **kwargs: Any) -> Any:
        commands = super().add_subparsers(**kwargs)
        commands._parser_class = _command_grammar  # type: ignore[attr-defined]
        return commands

    def _flags(self) -> list[str]:
        return sorted(s for action in self._actions for s in action.option_strings if s.startswith("--"))

    def _commands(self) -> dict[str, "Grammar"]:
        return next((dict(a.choices) for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})

    def _unknown_flag(self, word: str) -> str:
        from ...config.errors import did_you_mean

        flag = word.split("=", 1)[0]
        flags = self._flags()
        hint = did_you_mean(flag, flags)
        if not self._name():  # before the command
            return f"{flag}: no such flag{hint}; {self.prog} takes --help, then a command: {', '.join(self._commands())}"
        return f"{self._name()} {flag}: no such flag{hint}; {self._name()} takes {', '.join(flags)}"

    def _first_unknown_flag(self, words: Sequence[str]) -> Optional[str]:
        flags = [s for action in self._actions for s in action.option_strings]
        for word in words:
            if word == "--":
                return None
            flag = word.split("=", 1)[0]
            if word.startswith("-") and len(word) > 1 and not word[1:].isdigit() and not any(f.startswith(flag) for f in flags):
                return word
            if word in self._commands():
                return None  # the rest is the command's
        return None

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._commands().get(getattr(parsed, "command", None) or "", self)
            word = extras[0]
            if word.startswith("-") and word != "-":
                self._refuse(command._unknown_flag(word))
            self._refuse(f"{command._name() or 'the command line'}: unexpected argument {word!r}; {_usage(command)}")
        return parsed

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        from ...config.errors import did_you_mean

        choices = [str(choice) for choice in action.choices]
        hint = did_you_mean(str(value), choices)
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"{value!r}: no such command{hint}; commands: {', '.join(choices)}")
        raise argparse.ArgumentError(None, f"{action.option_strings[0]} {value!r}: not a choice{hint}; valid: {', '.join(choices)}")

    def error(self, message: str) -> NoReturn:
        unknown = self._first_unknown_flag(self._seen)
        if unknown is not None:  # a misspelt flag before a missing argument: the flag is the news
            self._refuse(self._unknown_flag(unknown))
        where = f"{self._name()} " if self._name() else ""
        missing = re.fullmatch(r"the following arguments are required: (.*)", message)
        if missing:
            names = missing.group(1).split(", ")
            if names == ["command"]:
                self._refuse(f"no command given; commands: {', '.join(self._commands())} ({self.prog} COMMAND --help for each)")
            helps = {a.metavar or a.dest: a.help for a in self._actions}
            said = "; ".join(f"{name.upper() + ': ' if len(names) > 1 else ''}{helps.get(name) or name}" for name in names)
            self._refuse(f"{where}{' and '.join(n.upper() for n in names)} missing: {said}; {_usage(self)}")
        flag = re.match(r"argument (\S+): ", message)
        action = next((a for a in self._actions if flag and flag.group(1) in "/".join(a.option_strings).split("/")), None)
        if flag and action is not None:
            name = flag.group(1).split("/")[-1]
            if message.endswith(": expected one argument"):
                self._refuse(f"{where}{name}: needs a value ({action.metavar or action.dest.upper()})")
            typed = re.fullmatch(r"invalid (\w+) value: (.*)", message[flag.end() :])
            if typed:
                kind = {"int": "an integer", "float": "a number"}.get(typed.group(1), f"a valid {typed.group(1)}")
                valid = f"; valid: {', '.join(map(str, action.choices))}" if action.choices else ""
                self._refuse(f"{where}{name} {typed.group(2)}: must be {kind}{valid}")
        ambiguous = re.fullmatch(r"ambiguous option: (\S+) could match (.*)", message)
        if ambiguous:
            self._refuse(f"{where}{ambiguous.group(1)}: ambiguous, it could be {ambiguous.group(2).replace(', ', ' or ')}: spell it out")
        self._refuse(f"{where}{message.replace('argument ', '')}")

    def _refuse(self, line: str) -> NoReturn:
        self.exit(2, f"error: {line}\n")


def _command_grammar(**kwargs: Any) -> Grammar:
    """A command's parser (``add_parser``): a :class:`Grammar` that names its command in its lines."""
    parser = Grammar(**kwargs)
    parser._command = True  # type: ignore[attr-defined]
    return parser


def _usage(parser: argparse.ArgumentParser) -> str:
    """argparse's usage of ``parser`` in one line."""
    return " ".join(parser.format_usage().split())


def output_folder(text: str) -> str:
    """The type of every command's ``--out``: a folder's path (an empty one names none)."""
    if not text:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty path: give a folder, or leave --out out for the default")
    return text


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
    from ..outputs.plan import platform_for
    from .stack_config import load, project_root

    root = root or project_root()
    config = load(root, args.stack, args.set)
    platform = platform_for(config, args.platform, out or root / "build" / config.stack)
    return Stack(root, config, platform)
