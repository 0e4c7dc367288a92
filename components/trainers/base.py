"""What every trainer dialect shares: the protocol a dialect implements and the registry of
dialects, the launch it returns, the world it runs on, and where a batch value came from (the
reference config, ``workload.trainer.batch`` or a user override)."""

from __future__ import annotations

import glob
import re
import shlex
from dataclasses import dataclass, field
from typing import Mapping, Optional, Protocol, Sequence

from ..config import StackSettings, TrainerSettings
from ..config.errors import key_path
from .recipe import recipe_of

COMPLETE_MARKER = ".rlinf-eks-complete"
"""In a ``global_step_<N>`` directory: the launcher wrote it once that checkpoint was complete
(see :mod:`rlinf_eks.workload.scripts`); resume, the S3 upload and the restore take only marked
directories."""


@dataclass(frozen=True)
class Resume:
    """How a restarted run picks up its latest checkpoint.

    ``checkpoint_globs``: shell globs (``*`` unquoted) of the checkpoint directories the trainer
    writes, each ending in ``global_step_<N>``; ``key``: the Hydra key that takes the directory.
    """

    checkpoint_globs: tuple[str, ...]
    key: str

    def override(self, checkpoint: str) -> str:
        return f"{self.key}={checkpoint}"


@dataclass(frozen=True)
class TrainerLaunch:
    """The trainer's command line for one stack.

    ``argv``: the whole command (generated overrides, then ``workload.trainer.batch``, then the
    user's ``workload.trainer.overrides`` last, so the user wins); ``env``: the dialect's variables
    (PYTHONPATH holds only the trainer checkout: prepend it to the image's own PYTHONPATH);
    ``workdir``: run ``argv`` from here; ``warnings``: things the plan should show;
    ``resume``: how to resume from the latest checkpoint, None when the dialect cannot;
    ``checkpoint_patterns``: Python glob patterns of every ``global_step_<N>`` directory the
    trainer writes (the launcher marks the complete ones), whether or not it can resume;
    ``resume_note``: for the plan, why a dialect without ``resume`` cannot resume;
    ``prepare``: shell commands the upstream run script runs from ``workdir`` before the trainer
    (the recipe's), each of which must succeed.
    """

    argv: list[str]
    env: dict[str, str]
    workdir: str
    warnings: list[str] = field(default_factory=list)
    resume: Optional[Resume] = None
    checkpoint_patterns: tuple[str, ...] = ()
    resume_note: str = ""
    prepare: tuple[str, ...] = ()
    node_rank_env: str = ""
    """A variable each node of a multi-node run sets to its rank (0 = the head) before ``ray
    start``: RLinf's RLINF_NODE_RANK; empty for none."""
    attempt_keys: tuple[str, ...] = ()
    """A dialect that cannot resume (:func:`attempt_keys`): the keys whose value (the checkpoint
    directory) the script extends with ``/attempt-<K>``, K chosen when it starts."""

    def shell(self) -> str:
        """The command line, quoted for a POSIX shell."""
        return shlex.join(self.argv)

    def _attempt(self) -> tuple[list[str], str]:
        """The lines that pick this attempt's directory, and the command line writing into it."""
        values = final_values(self.argv)
        last = {key: max(i for i, item in enumerate(self.argv) if "=" in item and item.lstrip("+").split("=", 1)[0] == key) for key in self.attempt_keys}
        base = values[self.attempt_keys[0]].rstrip("/")
        lines = [
            # one more than any attempt there (on the shared filesystem, or restored from S3)
            f"attempts={shlex.quote(base)}",
            "attempt=1",
            'for d in "$attempts/' + ATTEMPT_PREFIX + '"*; do n="${d##*/' + ATTEMPT_PREFIX + '}"; case "$n" in ""|*[!0-9]*) ;;'
            ' *) if [ "$n" -ge "$attempt" ]; then attempt=$((n + 1)); fi ;; esac; done',
            f'mkdir -p "$attempts/{ATTEMPT_PREFIX}$attempt" && echo "$attempt" > "$attempts/{ATTEMPT_PREFIX}$attempt/.rlinf-eks-attempt" || exit',
            f'echo "rlinf-eks: attempt $attempt: this trainer cannot resume; it writes its checkpoints below $attempts/{ATTEMPT_PREFIX}$attempt"',
        ]
        words = []
        for i, item in enumerate(self.argv):
            key = next((k for k, at in last.items() if at == i), None)
            if key is None:
                words.append(shlex.quote(item))
            else:
                words.append(shlex.quote(f"{item.rstrip('/')}/{ATTEMPT_PREFIX}") + '"$attempt"')
        return lines, " ".join(words)

    def script(self) -> str:
        """POSIX sh that runs the trainer from ``workdir``, resuming from the newest complete
        ``global_step_<N>`` checkpoint (one holding :data:`COMPLETE_MARKER`) when one exists
        (``exec``: the trainer's exit status is the script's). A directory without the marker is a
        save that was cut off (a killed pod, a lost node) and is never resumed from."""
        # a workdir missing from the image must fail the run, not start the trainer elsewhere
        lines = [f"cd {shlex.quote(self.workdir)} || exit"]
        lines += [f"{command} || exit" for command in self.prepare]
        if self.resume is None and self.attempt_keys:
            attempt, command = self._attempt()
            return "\n".join([*lines, *attempt, f"exec {command}", ""])
        if self.resume is None:
            return "\n".join([*lines, f"exec {self.shell()}", ""])
        globs = " ".join(self.resume.checkpoint_globs)
        lines += [
            # newest by step number, whichever of the trainer's layouts wrote it
            f"latest=$(for d in {globs}; do [ -f \"$d/{COMPLETE_MARKER}\" ] && echo \"$d\"; done | awk -F'global_step_' '{{print $NF \"\\t\" $0}}'"
            " | sort -n | tail -n 1 | cut -f2-)",
            'if [ -n "$latest" ]; then',
            f'  echo "resuming from $latest"; set -- {shlex.quote(self.resume.key + "=")}"$latest"',
            "else",
            "  set --",
            "fi",
            f'exec {self.shell()} "$@"',
            "",
        ]
        return "\n".join(lines)


def final_values(argv: Sequence[str]) -> dict[str, str]:
    """The Hydra overrides of a command line as the trainer sees them: ``key`` -> value, the last
    one winning (``+``/``++`` add or set it, ``~`` deletes it)."""
    values: dict[str, str] = {}
    for item in argv:
        if item.startswith("-") or "=" not in item and not item.startswith("~"):
            continue
        key, _, value = item.partition("=")
        if key.startswith("~"):
            values.pop(key.lstrip("~"), None)
        else:
            values[key.lstrip("+")] = value
    return values


ATTEMPT_PREFIX = "attempt-"
"""A dialect that cannot resume trains again from step 0 after a failure: each attempt writes
below ``<checkpoint directory>/attempt-<K>`` (K one more than any there), so a new attempt's
``global_step_<N>`` is never taken for an earlier attempt's, nor the other way round."""


def attempt_keys(settings: StackSettings) -> tuple[str, ...]:
    """The Hydra keys that take the checkpoint directory of a dialect that cannot resume (its
    recipe's ``startup.sets`` to ``checkpoints``), each attempt below its own attempt-<K>; none for
    a dialect that resumes (one directory, whose newest complete checkpoint it resumes from)."""
    facts = recipe_of(settings.workload.trainer.dialect).startup
    if facts.resume is not None:
        return ()
    return tuple(key for key, what in facts.sets.items() if what == "checkpoints" and key in facts.checkpoints.keys)


def checkpoint_layout(settings: StackSettings, argv: Sequence[str]) -> tuple[tuple[str, ...], Optional[Resume]]:
    """Where the trainer of ``argv`` writes its checkpoints (its recipe's ``startup.checkpoints``,
    with the values the command line gives its keys), as Python glob patterns for the launcher's
    completeness markers, and how a restart resumes from them (None: the trainer cannot, or the
    user's own ``workload.trainer.overrides`` name the checkpoint to resume from)."""
    facts = recipe_of(settings.workload.trainer.dialect).startup
    values = final_values(argv)
    missing = [key for key in facts.checkpoints.keys if key not in values]
    if missing:  # the launch sets every key of startup.sets (a test holds it): a dialect's bug
        raise ValueError(f"the {settings.workload.trainer.dialect} launch leaves {missing} to the config: its checkpoints would land anywhere")
    # a dialect that cannot resume writes each attempt below its own attempt-<K> (trainer.sh)
    suffixes = {key: f"/{ATTEMPT_PREFIX}*" for key in attempt_keys(settings)}
    pattern = facts.checkpoints.resolve(values, glob.escape, suffixes=suffixes)
    if facts.resume is None or overridden(settings, facts.resume.key):
        return (pattern,), None
    return (pattern,), Resume(checkpoint_globs=(facts.checkpoints.resolve(values, shlex.quote),), key=facts.resume.key)


@dataclass(frozen=True)
class World:
    """The Ray cluster the trainer sees: ``nnodes`` pods of ``gpus_per_node`` GPUs."""

    nnodes: int
    gpus_per_node: int

    @property
    def size(self) -> int:
        return self.nnodes * self.gpus_per_node


class TrainerDialect(Protocol):
    """What a trainer dialect (one module of this package) provides."""

    name: str
    """workload.trainer.dialect (config's Dialect)."""
    default_config_name: str
    """workload.trainer.configName when the stack leaves it out: the dialect's reference config
    (one tests/test_trainers.py composes with Hydra)."""
    config_names: tuple[str, ...]
    """The trainer's reference configs this project knows (the default among them); a stack may
    name another config its image holds, but not one of another dialect's."""
    config_dir: str
    """Where the trainer reads its Hydra configs from, relative to workload.trainer.workdir."""
    rollout_backends: tuple[str, ...]
    """The workload.rollout.backend values the dialect runs."""
    unsupported_backend: str
    """The problem line's message for any other backend."""

    def launch(
        self, settings: StackSettings, world: World, *, log_dir: str, checkpoint_dir: str, inputs_root: str, wandb: bool
    ) -> TrainerLaunch:
        """The trainer's command line on ``world``, the recipe's inputs staged below ``inputs_root``."""
        ...

    def world_size_problems(self, settings: StackSettings, world: World) -> list[str]:
        """Batch and environment sizes that do not fit ``world``, one problem line each."""
        ...


DIALECTS: dict[str, TrainerDialect] = {}
"""Every dialect by name; each dialect module registers itself (the package imports them all)."""


def register(dialect: TrainerDialect) -> TrainerDialect:
    DIALECTS[dialect.name] = dialect
    return dialect


def config_name_of(trainer: TrainerSettings) -> str:
    """The Hydra config name the trainer runs: workload.trainer.configName, else the dialect's default."""
    return trainer.config_name or DIALECTS[trainer.dialect].default_config_name


@dataclass(frozen=True)
class Value:
    """A batch or environment size, the stack key path that sets it and, for a value the stack
    leaves at the trainer config's default, a note saying so (for error lines)."""

    value: int
    path: str
    note: str = ""


_INT_OVERRIDE = re.compile(r"^\+{0,2}([A-Za-z0-9_.]+)=(-?\d+)$")


def effective_sizes(settings: StackSettings, defaults: Mapping[str, int]) -> dict[str, Value]:
    """The sizes the trainer will see, in command-line order: the reference config's value, the
    recipe's (the upstream run script's), then ``workload.trainer.batch``, then integer
    ``workload.trainer.overrides`` (last wins)."""
    trainer = settings.workload.trainer
    note = f" (the default of {config_name_of(trainer)})"
    sizes = {key: Value(v, key_path("workload", "trainer", "batch", key), note) for key, v in defaults.items()}
    recipe = recipe_of(trainer.dialect).configs.get(config_name_of(trainer))
    for key, text in (recipe.settings.items() if recipe is not None else ()):
        if key in defaults and re.fullmatch(r"-?\d+", text):
            sizes[key] = Value(int(text), key_path("workload", "trainer", "batch", key), f" (the recipe's, from {recipe.script})")
    for key, v in trainer.batch.items():
        sizes[key] = Value(v, key_path("workload", "trainer", "batch", key))
    for i, item in enumerate(trainer.overrides):
        match = _INT_OVERRIDE.match(item)
        if match:
            sizes[match.group(1)] = Value(int(match.group(2)), f"workload.trainer.overrides[{i}]", f" ({match.group(1)})")
    return sizes


def problem(size: Value, message: str) -> str:
    """One ConfigError line: the key path, the value, what is valid."""
    return f"{size.path}={size.value}{size.note}: {message}"


def overridden(settings: StackSettings, key: str) -> bool:
    """Whether the user's overrides set or delete ``key`` (or a key below it)."""
    for item in settings.workload.trainer.overrides:
        name = item.lstrip("~+").split("=", 1)[0]
        if name == key or name.startswith(key + "."):
            return True
    return False


def batch_overrides(settings: StackSettings) -> list[str]:
    return [f"{key}={value}" for key, value in settings.workload.trainer.batch.items()]
