"""The inputs of a stack's run: each input of its config's recipe with the value the stack chose
(``workload.inputs.<name>``; for the model also ``workload.model.source`` or
``workload.trainer.modelPath``; else the recipe's source), where it lands below the inputs root,
and the rules that keep a run from reading a file no pod has."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Optional

from ..config import ModelSource, StackSettings, parse_model_source
from ..config.errors import did_you_mean, key_path, problem_line
from .base import config_name_of
from .recipe import PLACEHOLDER, ConfigRecipe, RecipeInput, recipe_of


@dataclass(frozen=True)
class ChosenInput:
    """An input and its value: a source URI (staged before the trainer starts) or an absolute path
    the pod already has. ``origin``: the stack key that chose it, or ``recipe``."""

    spec: RecipeInput
    value: str
    origin: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def source(self) -> Optional[ModelSource]:
        """The parsed source; None for a path the pod has (nothing to stage)."""
        return None if self.value.startswith("/") else parse_model_source(self.value)

    def staged_dir(self, root: str) -> str:
        """The folder it is staged into below ``root`` (one per source)."""
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
            chosen.append(ChosenInput(spec, spec.source, "recipe"))
    return tuple(chosen)


def input_problems(settings: StackSettings, stack: Optional[str]) -> list[str]:
    """``workload.inputs`` names only inputs of the config's recipe; a file input's source names a
    file; no value is one of upstream's placeholder paths (in ``workload.inputs``,
    ``trainer.modelPath`` or an override of a key the recipe sets)."""
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
    for item in chosen_inputs(settings):
        source = item.source
        if item.spec.file and source is not None and source.kind == "hf" and not source.path:
            problems.append(
                problem_line(item.origin, item.value, f"the trainer opens one file here ({', '.join(item.spec.pointers())}): "
                             "name it in the dataset, hf://datasets/Org/Name/file.jsonl")
            )
        if source is None and PLACEHOLDER.match(item.value):
            problems.append(
                problem_line(item.origin, item.value, f"an upstream placeholder path, which no pod has: stage {item.name} "
                             f"(leave it out for the recipe's {item.spec.source}, or give an hf:// or s3:// source) or name a real path")
            )
    keys = {key for item in chosen_inputs(settings) for key in item.spec.hydra_keys}
    for index, override in enumerate(trainer.overrides):
        key, _, value = override.lstrip("+").partition("=")
        if key in keys and PLACEHOLDER.match(value.strip("[]\"'")):
            problems.append(
                problem_line(f"workload.trainer.overrides[{index}]", override, f"{key} is an upstream placeholder path, which no pod has: "
                             "drop the override (the recipe stages it) or name a real path")
            )
        elif override.startswith("~") and key.lstrip("~") in keys:
            problems.append(
                problem_line(f"workload.trainer.overrides[{index}]", override, f"deletes {key.lstrip('~')}, which points the trainer "
                             "at a staged input: swap the input with workload.inputs instead")
            )
    return problems


def input_paths(settings: StackSettings, root: str) -> dict[str, str]:
    """Each input's path in the pod, inputs staged below ``root``."""
    return {item.name: item.path(root) for item in chosen_inputs(settings)}


def input_overrides(settings: StackSettings, root: str) -> list[str]:
    """The Hydra overrides that point the trainer at every input."""
    return [override for item in chosen_inputs(settings) for override in item.spec.overrides(item.path(root))]


def recipe_env(settings: StackSettings, root: str) -> dict[str, str]:
    """The upstream run script's variables, then the inputs read from the environment."""
    config = config_recipe(settings)
    env = dict(config.env) if config is not None else {}
    env.update({item.spec.env: item.path(root) for item in chosen_inputs(settings) if item.spec.env})
    return env


def recipe_overrides(settings: StackSettings, generated: list[str]) -> list[str]:
    """The upstream run script's settings, less the keys the dialect generates (``generated``: its
    overrides, ``key=value``), so that each key is on the command line once before the user's."""
    config = config_recipe(settings)
    if config is None:
        return []
    taken = {item.lstrip("~+").split("=", 1)[0] for item in generated}
    return [f"{key}={value}" for key, value in config.settings.items() if key not in taken]


def prepare_commands(settings: StackSettings, root: str) -> tuple[str, ...]:
    """The upstream run script's steps before the trainer, each ``{input}`` replaced by that
    input's path, shell-quoted."""
    config = config_recipe(settings)
    if config is None:
        return ()
    paths = {name: shlex.quote(path) for name, path in input_paths(settings, root).items()}
    return tuple(command.format(**paths) for command in config.prepare)
