"""Each dialect's recipe, kept as data beside it (``recipes/<dialect>.yaml``): what a run of one of
its configs needs to train as upstream trains it.

For each config the dialect knows:

- ``inputs``: every file the trainer opens that is not in the image (model weights, adapters,
  datasets, simulator assets), each with its default ``source`` (``hf://...`` or ``s3://...``), what
  it is, and the Hydra ``keys`` (``key[]`` for a list) or the ``env`` variable that points the
  trainer at it. ``workload.inputs.<name>`` swaps any of them; the model takes the dialect's
  ``modelKeys``;
- ``imports``: the Python modules the trainer imports first, in its order (``rolloutImports``: per
  rollout backend), which the image check imports before anything else runs;
- ``renders``: the simulator whose renderer the config uses (the dialect's ``renderers``: backend,
  probe, source and remedy), which the render check renders one frame with in the run's pod;
- ``prepare``: commands the upstream run script runs before the trainer (``{name}``: an input's path);
- ``env`` and ``settings``: the variables and Hydra overrides the upstream run script sets, passed
  as they are; ``generated``: the keys the stack derives from its own settings instead (``upstream
  -> ours`` where the run script sets them); ``leftOut``: what the run script sets that the stack
  deliberately does not, and why; ``overrideCount``: how many Hydra overrides the run script passes
  (``settings`` + the run script's ``generated`` + ``leftOut`` keys cover them all);
- ``fixes``: Hydra overrides the stack adds to upstream's config because the trainer refuses (or
  mishandles) it as it ships, each with its ``value``, ``why`` and the upstream ``source``
  (file:line); not the run script's, so outside ``overrideCount``; after ``settings`` on the
  command line, before the user's ``workload.trainer.overrides``;
- ``unread``: placeholder paths of the composed upstream config that this run never opens, and why;
  ``placeholders``: every placeholder value of the composed upstream config (a stack that would
  hand one of them to the trainer is refused).

For the dialect as a whole, ``startup`` (:mod:`.startup`): what the trainer does when it starts,
each fact with its upstream file and lines: where it writes checkpoints and logs, which keys the
stack sets so they land in the run directory, what resume reads, the environment it needs and the
environment it refuses per rollout backend, and what its evaluation composes and loads.

Staging (:mod:`rlinf_eks.workload.run`), the trainers' command lines and the image contract read
it; tests compose every stack's command against the upstream configs and walk it for placeholders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Mapping, Optional

import yaml

from .startup import StartupFacts, parse_startup

__all__ = ["ConfigFix", "ConfigRecipe", "DialectRecipe", "EvalRecipe", "ImagePatch", "OtherConfig", "RecipeInput", "Renderer", "recipe_of", "PLACEHOLDER"]

PLACEHOLDER = re.compile(r"^(/path/to/|/dataset/|~/|/home/|/data/public/)")
"""The shapes of upstream's example paths, to find them in a composed config (the tests walk every
stack's); a stack is refused only for the exact ``placeholders`` of its config's recipe, a
``/path/to/`` path or a ``~`` (:mod:`.inputs`), never for a real path that merely starts alike."""


@dataclass(frozen=True)
class ConfigFix:
    """An override the stack adds to upstream's config (``fixes``): ``value``, ``why`` upstream's
    config needs it, ``source``: the upstream file:line it answers."""

    value: str
    why: str
    source: str


@dataclass(frozen=True)
class RecipeInput:
    """One input of a config: ``name`` (``workload.inputs.<name>``), its default ``source``, what it
    is, and where the trainer reads its path: Hydra ``keys`` (a ``[]`` suffix: a one-item list)
    and/or an ``env`` variable; ``file``: a file, not a folder."""

    name: str
    source: str
    what: str
    keys: tuple[str, ...] = ()
    env: Optional[str] = None
    file: bool = False
    """The trainer opens a file, not a folder: a Hugging Face source names it (``.../file.jsonl``),
    an S3 source is that object."""

    def overrides(self, path: str) -> list[str]:
        """The Hydra overrides that point the trainer at ``path``."""
        return [f"{key[:-2]}=[{path}]" if key.endswith("[]") else f"{key}={path}" for key in self.keys]

    @property
    def hydra_keys(self) -> tuple[str, ...]:
        return tuple(key.removesuffix("[]") for key in self.keys)

    def pointers(self) -> list[str]:
        """Where the trainer reads it, for the plan: keys, then the variable."""
        return [*self.hydra_keys, *([f"${self.env}"] if self.env else [])]


@dataclass(frozen=True)
class ConfigRecipe:
    name: str
    script: str
    trains: str
    data: str
    expect: str
    inputs: tuple[RecipeInput, ...]
    imports: tuple[str, ...]
    rollout_imports: Mapping[str, tuple[str, ...]]
    prepare: tuple[str, ...]
    env: Mapping[str, str]
    settings: Mapping[str, str]
    generated: Mapping[str, str]
    left_out: Mapping[str, str]
    override_count: int
    unread: Mapping[str, str]
    placeholders: tuple[str, ...] = ()
    """Every placeholder path of the composed upstream config (a test compares it with the config)."""
    renders: str = ""
    """The simulator whose renderer the config uses (a key of the dialect's ``renderers``), if any."""
    fixes: Mapping[str, ConfigFix] = field(default_factory=dict)
    """Overrides the stack adds because upstream's config is refused as it ships (key: the fix)."""

    def input(self, name: str) -> Optional[RecipeInput]:
        return next((i for i in self.inputs if i.name == name), None)

    def imports_for(self, backend: str) -> tuple[str, ...]:
        """What the trainer imports first, then the rollout backend's package."""
        return (*self.imports, *self.rollout_imports.get(backend, ()))

    def upstream_settings(self) -> list[str]:
        """``settings`` as Hydra overrides, in the recipe's order."""
        return [f"{key}={value}" for key, value in self.settings.items()]


@dataclass(frozen=True)
class EvalRecipe:
    """How the dialect evaluates a checkpoint upstream (``evaluation`` of the recipe):
    ``script``: the evaluation entry point replacing the training script (empty: the training
    command itself, with ``settings``); ``checkpoint_keys`` take ``<checkpoint>/<checkpoint_file>``;
    ``dir_keys`` and ``video_keys`` take the evaluation's directory (and ``videos`` below it);
    ``videos``: where the videos land (``{experiment}``: the experiment name), relative to the
    evaluation directory when ``video_keys`` point there, else to the trainer's working directory;
    ``unsupported``: why the dialect has no evaluation (then nothing else is set)."""

    script: str = ""
    checkpoint_keys: tuple[str, ...] = ()
    checkpoint_file: str = ""
    dir_keys: tuple[str, ...] = ()
    video_keys: tuple[str, ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)
    videos: str = ""
    unsupported: str = ""
    copy_checkpoint: bool = False
    """The trainer writes into the folder it loads: evaluate a copy of the checkpoint (and run
    the config's ``prepare`` steps on the copy, ``{model}`` being it)."""


@dataclass(frozen=True)
class Renderer:
    """How one simulator renders (``renderers.<name>``): its ``backend``, the render check's
    ``probe`` (``maniskill``: a ManiSkill task's frame through SAPIEN; ``mujoco``: a MuJoCo frame
    with the pod's MUJOCO_GL), why, the upstream ``source`` and the ``remedy`` a failure names."""

    name: str
    backend: str
    probe: str
    why: str
    source: str
    remedy: str


@dataclass(frozen=True)
class OtherConfig:
    """An upstream config a stack may run that the recipe does not describe in full
    (``otherConfigs.<name>``: nothing to stage): what the trainer imports first and renders with."""

    name: str
    imports: tuple[str, ...]
    renders: str
    source: str


@dataclass(frozen=True)
class ImagePatch:
    """A change the dialect's image makes to the trainer's checkout (``image.patches``): the patch
    ``file`` (in the image's build context), the upstream file it ``patches``, what it ``fixes`` and
    its ``source``. The Dockerfile applies it so that the build fails when it no longer applies."""

    file: str
    patches: str
    fixes: str
    source: str


@dataclass(frozen=True)
class LayoutPart:
    """One part of a checkpoint save (``checkpointLayout``): ``values`` per weight, ``parameters``
    (every weight) or ``2 x trainable`` (Adam's two moments of each trainable weight)."""

    part: str
    values: str
    source: str

    def count(self, model: "ModelFacts") -> float:
        """How many values of the model's precision this part holds."""
        factor, _, what = self.values.rpartition(" x ")
        base = model.trainable if what == "trainable" else model.parameters
        return base * (float(factor) if factor else 1.0)


@dataclass(frozen=True)
class KeyDefault:
    """A Hydra key the rules read and the config's default (``models.<config>.seqLength`` ...)."""

    key: str
    default: object
    source: str = ""


@dataclass(frozen=True)
class StepFacts:
    """How many steps a run takes and how often it saves: ``epochs`` x ``steps_per_epoch`` (None:
    the dataset's size decides, unknown offline), capped by ``max_steps`` >= 0; a save every
    ``save_every`` steps (<= 0: none)."""

    epochs_key: str
    epochs: int
    max_steps_key: str
    max_steps: int
    steps_per_epoch: Optional[int]
    save_key: str
    save_every: int
    source: str


@dataclass(frozen=True)
class ModelFacts:
    """The model a config trains (``models`` of the recipe): its size, precision and the keys the
    storage budget and the GPU memory rule read."""

    parameters: int
    trainable: int
    bytes_per_value: int
    source: str
    steps: Optional[StepFacts] = None
    seq_length: Optional[KeyDefault] = None
    micro_batch: Optional[KeyDefault] = None
    gradient_checkpointing: Optional[KeyDefault] = None
    actor_shards: str = ""
    """``gpus``: the actor is sharded (FSDP full_shard) over every GPU of the run."""


@dataclass(frozen=True)
class DialectRecipe:
    dialect: str
    repository: str
    commit: str
    dockerfile: str
    family: str
    model_keys: tuple[str, ...]
    startup: StartupFacts
    """What the trainer does when it starts (``startup`` of the recipe, :mod:`.startup`)."""
    configs: Mapping[str, ConfigRecipe] = field(default_factory=dict)
    evaluation: EvalRecipe = field(default_factory=EvalRecipe)
    checkpoint_layout: tuple[LayoutPart, ...] = ()
    """What one checkpoint save writes (``checkpointLayout``)."""
    models: Mapping[str, ModelFacts] = field(default_factory=dict)
    """The model of each config name the recipe knows (``models``), by config name."""
    image_patches: tuple[ImagePatch, ...] = ()
    """What the image changes in the checkout at ``commit`` (``image.patches``)."""
    renderers: Mapping[str, Renderer] = field(default_factory=dict)
    other_configs: Mapping[str, OtherConfig] = field(default_factory=dict)
    video_writer: str = ""
    """Where the configs write their videos (``videoWriter.source``): the render check writes its
    frame the same way; empty: no config saves videos."""

    def imports_of(self, config_name: str, backend: str) -> tuple[str, ...]:
        """What the trainer imports first with ``config_name``: its recipe's, else its
        ``otherConfigs`` entry's, else nothing known."""
        if config_name in self.configs:
            return self.configs[config_name].imports_for(backend)
        other = self.other_configs.get(config_name)
        return other.imports if other is not None else ()

    def renderer_of(self, config_name: str) -> Optional[Renderer]:
        """The renderer ``config_name`` uses, None when it renders nothing (or is unknown)."""
        config = self.configs.get(config_name)
        other = self.other_configs.get(config_name)
        name = config.renders if config is not None else other.renders if other is not None else ""
        return self.renderers[name] if name else None

    def model_input(self, source: str = "") -> RecipeInput:
        """The model of a config this recipe does not know (an image's own config)."""
        return RecipeInput("model", source, "the model", self.model_keys)


def _strings(mapping: Optional[Mapping[str, object]]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (mapping or {}).items()}


def _config(name: str, data: Mapping, model_keys: tuple[str, ...]) -> ConfigRecipe:
    inputs = []
    for input_name, spec in (data.get("inputs") or {}).items():
        keys = tuple(spec.get("keys") or (model_keys if input_name == "model" else ()))
        inputs.append(RecipeInput(input_name, spec["source"], spec.get("what", ""), keys, spec.get("env"), bool(spec.get("file"))))
    return ConfigRecipe(
        name=name,
        script=data["script"],
        trains=data["trains"],
        data=data["data"],
        expect=" ".join(str(data["expect"]).split()),
        inputs=tuple(inputs),
        imports=tuple(data.get("imports") or ()),
        rollout_imports={k: tuple(v) for k, v in (data.get("rolloutImports") or {}).items()},
        prepare=tuple(data.get("prepare") or ()),
        env=_strings(data.get("env")),
        settings=_strings(data.get("settings")),
        generated=_strings(data.get("generated")),
        left_out=_strings(data.get("leftOut")),
        override_count=int(data["overrideCount"]),
        unread=_strings(data.get("unread")),
        placeholders=tuple(data.get("placeholders") or ()),
        renders=str(data.get("renders") or ""),
        fixes={str(key): ConfigFix(str(fix["value"]), " ".join(str(fix["why"]).split()), " ".join(str(fix["source"]).split()))
               for key, fix in (data.get("fixes") or {}).items()},
    )


@lru_cache(maxsize=None)
def recipe_of(dialect: str) -> DialectRecipe:
    """The recipe of ``dialect`` (read once per process)."""
    text = resources.files(__package__).joinpath("recipes", f"{dialect}.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if data["dialect"] != dialect:
        raise ValueError(f"recipes/{dialect}.yaml is the recipe of {data['dialect']}")
    model_keys = tuple(data["modelKeys"])
    renderers = {
        str(name): Renderer(str(name), str(spec["backend"]), str(spec["probe"]), *(" ".join(str(spec[k]).split()) for k in ("why", "source", "remedy")))
        for name, spec in (data.get("renderers") or {}).items()
    }
    other_configs = {
        str(name): OtherConfig(str(name), tuple(spec.get("imports") or ()), str(spec.get("renders") or ""), " ".join(str(spec.get("source") or "").split()))
        for name, spec in (data.get("otherConfigs") or {}).items()
    }
    configs = {name: _config(name, spec, model_keys) for name, spec in data["configs"].items()}
    unknown = sorted({c.renders for c in (*configs.values(), *other_configs.values()) if c.renders} - set(renderers))
    if unknown:
        raise ValueError(f"recipes/{dialect}.yaml: renders {', '.join(unknown)}, which renderers does not describe")
    return DialectRecipe(
        dialect=dialect,
        repository=data["repository"],
        commit=data["commit"],
        dockerfile=data["image"]["dockerfile"],
        family=data["image"]["family"],
        model_keys=model_keys,
        startup=parse_startup(dialect, data["startup"]),
        configs=configs,
        evaluation=_evaluation(data.get("evaluation") or {}),
        checkpoint_layout=tuple(LayoutPart(str(p["part"]), str(p["values"]), str(p["source"])) for p in data.get("checkpointLayout") or ()),
        models={str(name): _model(spec) for name, spec in (data.get("models") or {}).items()},
        image_patches=tuple(
            ImagePatch(str(p["file"]), str(p["patches"]), " ".join(str(p["fixes"]).split()), " ".join(str(p["source"]).split()))
            for p in data["image"].get("patches") or ()
        ),
        renderers=renderers,
        other_configs=other_configs,
        video_writer=" ".join(str((data.get("videoWriter") or {}).get("source") or "").split()),
    )


def _key_default(data: Optional[Mapping]) -> Optional[KeyDefault]:
    return KeyDefault(str(data["key"]), data["default"], str(data.get("source") or "")) if data else None


def _model(data: Mapping) -> ModelFacts:
    parameters = int(data["parameters"])
    trainable = parameters if data.get("trainable") == "all" else int(data["trainable"])
    steps = data.get("steps")
    return ModelFacts(
        parameters=parameters,
        trainable=trainable,
        bytes_per_value=int(data["bytesPerValue"]),
        source="; ".join(str(data[k]) for k in ("parametersSource", "trainableSource", "bytesSource") if data.get(k)),
        steps=StepFacts(
            str(steps["epochsKey"]), int(steps["epochs"]), str(steps["maxStepsKey"]), int(steps["maxSteps"]),
            None if steps.get("stepsPerEpoch") is None else int(steps["stepsPerEpoch"]),
            str(steps["saveKey"]), int(steps["saveEvery"]), str(steps["source"]),
        ) if steps else None,
        seq_length=_key_default(data.get("seqLength")),
        micro_batch=_key_default(data.get("microBatch")),
        gradient_checkpointing=_key_default(data.get("gradientCheckpointing")),
        actor_shards=str(data.get("actorShards") or ""),
    )


def _evaluation(data: Mapping) -> EvalRecipe:
    return EvalRecipe(
        script=str(data.get("script") or ""),
        checkpoint_keys=tuple(data.get("checkpointKeys") or ()),
        checkpoint_file=str(data.get("checkpointFile") or ""),
        dir_keys=tuple(data.get("dirKeys") or ()),
        video_keys=tuple(data.get("videoKeys") or ()),
        settings=_strings(data.get("settings")),
        videos=str(data.get("videos") or ""),
        unsupported=" ".join(str(data.get("unsupported") or "").split()),
        copy_checkpoint=bool(data.get("copyCheckpoint")),
    )
