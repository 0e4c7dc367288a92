"""The inputs of a stack's run: each input of its config's recipe with the value the stack chose
(``workload.inputs.<name>``; for the model also ``workload.model.source`` or
``workload.trainer.modelPath``; else the recipe's source), where it lands below the inputs root,
and the rules that keep a run from reading a file no pod has."""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Optional

from ..config import ModelSource, StackSettings, parse_model_source
from ..config.errors import did_you_mean, key_path, problem_line
from .base import config_name_of
from .recipe import ConfigRecipe, RecipeInput, recipe_of


# What a path on the trainer's command line may hold: Hydra's override grammar reads ",", quotes,
# brackets, "=", "(", ")", "!" and "#" as syntax (a "," silently splits a list value in two).
_HYDRA_SAFE = re.compile(r"[A-Za-z0-9._/@+%:-]+")


@dataclass(frozen=True)
class ChosenInput:
    """An input and its value: a source URI (staged before the trainer starts) or an absolute path
    the pod already has. ``origin``: the stack key that chose it, or ``recipe``. ``by_override``:
    the user's own ``workload.trainer.overrides`` (or ``workload.env``) point the trainer at it, so
    nothing is staged and nothing generated for it."""

    spec: RecipeInput
    value: str
    origin: str
    by_override: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @functools.cached_property
    def source(self) -> Optional[ModelSource]:
        """The parsed source; None for a path the pod has (nothing to stage)."""
        return None if self.value.startswith("/") or self.by_override else parse_model_source(self.value)

    def staged_dir(self, root: str) -> str:
        """The folder it is staged into below ``root`` (one per source repository or prefix)."""
        source = self.source
        assert source is not None, "a path in the pod is not staged"
        return f"{root.rstrip('/')}/{source.relative_dir}"

    def path(self, root: str) -> str:
        """What the trainer is pointed at: the staged folder (or the file in it), or the path."""
        source = self.source
        if source is None:
            return self.value
        folder = self.staged_dir(root)
        if source.kind == "hf" and source.path:
            return f"{folder}/{source.path}"
        if source.kind == "s3" and self.spec.file:
            return f"{folder}/{posixpath.basename(source.prefix)}"
        return folder


def config_recipe(settings: StackSettings) -> Optional[ConfigRecipe]:
    """The recipe of the stack's config, None for a config the dialect's recipe does not know."""
    trainer = settings.workload.trainer
    return recipe_of(trainer.dialect).configs.get(config_name_of(trainer))


def _user_overrides(settings: StackSettings) -> dict[str, tuple[int, str]]:
    """The keys the user's overrides set (last wins): key -> (index, value)."""
    found = {}
    for index, item in enumerate(settings.workload.trainer.overrides):
        if item.startswith("~") or "=" not in item:
            continue
        key, _, value = item.lstrip("+").partition("=")
        found[key] = (index, value)
    return found


def _given_by_user(spec: RecipeInput, settings: StackSettings) -> Optional[ChosenInput]:
    """The input when the user's overrides set every key that reads it (and ``workload.env`` its
    variable): the trainer reads the user's files, so the recipe's source is not staged."""
    user = _user_overrides(settings)
    if not spec.hydra_keys or not all(key in user for key in spec.hydra_keys):
        return None
    if spec.env and spec.env not in settings.workload.env:
        return None
    index, value = user[spec.hydra_keys[0]]
    return ChosenInput(spec, value.strip("[]\"'"), f"workload.trainer.overrides[{index}]", by_override=True)


def chosen_inputs(settings: StackSettings) -> tuple[ChosenInput, ...]:
    """Every input the run needs, in the recipe's order. A config the recipe does not know has
    only the model, when the stack names one."""
    workload = settings.workload
    config = config_recipe(settings)
    if config is not None:
        specs = config.inputs
    else:
        given = workload.inputs.get("model") or workload.model.source or workload.trainer.model_path
        specs = (recipe_of(workload.trainer.dialect).model_input(),) if given else ()
    chosen = []
    for spec in specs:
        if spec.name in workload.inputs:
            chosen.append(ChosenInput(spec, workload.inputs[spec.name], key_path("workload", "inputs", spec.name)))
        elif spec.name == "model" and workload.model.source:
            chosen.append(ChosenInput(spec, workload.model.source, "workload.model.source"))
        elif spec.name == "model" and workload.trainer.model_path:
            chosen.append(ChosenInput(spec, workload.trainer.model_path, "workload.trainer.modelPath"))
        else:
            chosen.append(_given_by_user(spec, settings) or ChosenInput(spec, spec.source, "recipe"))
    return tuple(chosen)


def _placeholder(value: str, config: Optional[ConfigRecipe]) -> bool:
    """One of upstream's example paths: under ``/path/to/``, a ``~`` no trainer expands, or a
    placeholder the config's recipe lists (read from the upstream config)."""
    value = value.strip().strip("\"'")
    if value.startswith(("/path/to/", "~")):
        return True
    return config is not None and value.rstrip("/") in {p.rstrip("/") for p in config.placeholders}


def input_problems(settings: StackSettings, stack: Optional[str]) -> list[str]:
    """``workload.inputs`` names only inputs of the config's recipe; a file input's source names a
    file; every path fits on the trainer's command line; no value is one of upstream's placeholder
    paths (in ``workload.inputs``, ``trainer.modelPath`` or an override of a key an input sets)."""
    workload = settings.workload
    trainer = workload.trainer
    config = config_recipe(settings)
    known = [i.name for i in config.inputs] if config is not None else ["model"]
    problems = []
    for name, value in workload.inputs.items():
        if name not in known:
            where = f"the {config.name} recipe's inputs are {', '.join(known)}{did_you_mean(name, known, cutoff=0.6)}" if config is not None else (
                f"{trainer.dialect}'s recipe does not know config {config_name_of(trainer)!r}, so only the model is an input; "
                "point the trainer at other files with workload.trainer.overrides"
            )
            problems.append(problem_line(key_path("workload", "inputs", name), value, f"no such input: {where}"))
    chosen = chosen_inputs(settings)
    for item in chosen:
        if item.origin == "recipe" or item.by_override:  # the recipe's are tested; the overrides' are below
            continue
        source = item.source
        reads = ", ".join(item.spec.pointers())
        if item.spec.file and source is not None:
            named = source.path if source.kind == "hf" else source.prefix
            last = named.rsplit("/", 1)[-1]
            if not named or "." not in last:
                form = "hf://datasets/Org/Name/file.jsonl" if source.kind == "hf" else "s3://bucket/prefix/file.jsonl"
                problems.append(problem_line(item.origin, item.value, f"the trainer opens one file here ({reads}): name the file, {form}"))
                continue
        if _placeholder(item.value, config):
            problems.append(
                problem_line(item.origin, item.value, f"an upstream placeholder path, which no pod has: stage {item.name} "
                             f"(leave it out for the recipe's {item.spec.source}, or give an hf:// or s3:// source) or name a real path")
            )
        elif not _HYDRA_SAFE.fullmatch(item.path("/inputs")):
            problems.append(
                problem_line(item.origin, item.value, f"becomes {item.path('/inputs')!r} on the trainer's command line ({reads}), which Hydra "
                             "would misread: keep to letters, digits and ._/@+%:- in names (a ',' splits a list in two)")
            )
    keys = {key for item in chosen for key in item.spec.hydra_keys}
    for index, override in enumerate(trainer.overrides):
        key, _, value = override.lstrip("+").partition("=")
        if override.startswith("~") and key.lstrip("~") in keys:
            problems.append(
                problem_line(f"workload.trainer.overrides[{index}]", override, f"deletes {key.lstrip('~')}, which points the trainer "
                             "at an input: swap the input with workload.inputs instead")
            )
        elif key in keys and any(_placeholder(part, config) for part in value.strip("[]").split(",")):
            problems.append(
                problem_line(f"workload.trainer.overrides[{index}]", override, f"{key} is an upstream placeholder path, which no pod has: "
                             "drop the override (the recipe stages it) or name a real path")
            )
    return problems


def input_paths(settings: StackSettings, root: str) -> dict[str, str]:
    """Each input's path in the pod, inputs staged below ``root``."""
    return {item.name: item.path(root) for item in chosen_inputs(settings)}


def input_overrides(settings: StackSettings, root: str) -> list[str]:
    """The Hydra overrides that point the trainer at every input."""
    return [override for item in chosen_inputs(settings) if not item.by_override for override in item.spec.overrides(item.path(root))]


def recipe_env(settings: StackSettings, root: str) -> dict[str, str]:
    """The upstream run script's variables, then the inputs read from the environment."""
    config = config_recipe(settings)
    env = dict(config.env) if config is not None else {}
    env.update({item.spec.env: item.path(root) for item in chosen_inputs(settings) if item.spec.env and not item.by_override})
    return env


def recipe_overrides(settings: StackSettings, generated: list[str]) -> list[str]:
    """The upstream run script's settings, then the recipe's ``fixes`` to upstream's config, less
    the keys the dialect generates (``generated``: its overrides, ``key=value``), so that each key
    is on the command line once before the user's."""
    config = config_recipe(settings)
    if config is None:
        return []
    taken = {item.lstrip("~+").split("=", 1)[0] for item in generated}
    given = {**config.settings, **{key: fix.value for key, fix in config.fixes.items()}}
    return [f"{key}={value}" for key, value in given.items() if key not in taken]


def prepare_commands(settings: StackSettings, root: str) -> tuple[str, ...]:
    """The upstream run script's steps before the trainer, each ``{input}`` replaced by that
    input's path, shell-quoted."""
    config = config_recipe(settings)
    if config is None:
        return ()
    paths = {name: shlex.quote(path) for name, path in input_paths(settings, root).items()}
    return tuple(command.format(**paths) for command in config.prepare)
