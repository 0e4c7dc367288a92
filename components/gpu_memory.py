"""Does the trainer fit its GPUs? The per-GPU memory of a config at the rendered settings, from the
figures measured or cited in ``trainers/gpu_memory.yaml``, against the GPU type's memory (catalog).

The settings a figure depends on are the recipe's ``models.<config>`` keys (sequence length,
micro batch, gradient checkpointing) as the command sets them: the config's default, then
``workload.trainer.batch`` and ``workload.trainer.overrides``. The figure used is the nearest one
at or above the run's sequence length with the same micro batch and gradient checkpointing (a
longer sequence needs more memory, so it bounds the run's need from above); of those at that
length, one measured with the trainer's own code (``trainerCode``: the GPU proof's
bench/gpu_memory.py runs RLinf's FSDPActor.training_step) before one that was not (issue 52's plain
Hugging Face model), then the newest (``date``). The plan names the figure it read (its source and
date). A figure of the
activations only (``activationsOnly``) gets the model's own state added: FSDP ``full_shard`` keeps
1/N of the weights, their gradients and Adam's two moments on each of the N GPUs of the actor
(:func:`model_state_gib`). A run no figure covers is "not measured", never guessed.

:func:`gpu_memory_problems` refuses, at plan time (``plan`` exits 2 before writing anything), a
GPU type a figure says the run does not fit, naming the keys that fix it. It is a plan-time check,
not a stack rule of every load: some figures were measured outside the trainers' own code (issue
52's plain Hugging Face model), so they judge the plan a person reviews, not every settings object
the library builds; figures measured with the trainers' code (the GPU proof) are preferred.
:func:`gpu_memory` is plan.json's ``gpuMemory`` and :func:`render` the plan's lines.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Optional

import yaml

from . import catalog
from .config import StackSettings
from .config.errors import problem_line
from .trainers.base import config_name_of, effective_sizes, overridden
from .trainers.recipe import KeyDefault, ModelFacts, recipe_of

USABLE_FRACTION = 0.92
"""Of a GPU's memory, what the trainer's tensors may take: the CUDA context, NCCL's buffers and the
caching allocator's fragmentation take the rest (an estimate)."""


@dataclass(frozen=True)
class Figure:
    """One entry of gpu_memory.yaml."""

    recipe: str
    seq_length: int
    micro_batch: int
    gradient_checkpointing: bool
    peak_gib: Optional[float]
    oom: bool
    gpu: str
    source: str
    how: str
    activations_only: bool
    trainer_code: bool = False
    """Measured with the trainer's own code (``trainerCode``), not a stand-in model."""
    date: str = ""

    @property
    def preference(self) -> tuple[bool, int]:
        """Sorts first the figure to prefer among equals: the trainer's own code's, then the newest."""
        try:
            day = datetime.date.fromisoformat(self.date).toordinal()
        except ValueError:
            day = 0
        return (not self.trainer_code, -day)

    @property
    def gpu_gib(self) -> Optional[float]:
        """The measuring GPU's memory from its name (``NVIDIA H100 80GB HBM3``: 80)."""
        match = re.search(r"(\d+)\s*GB", self.gpu)
        return float(match.group(1)) if match else None


@lru_cache(maxsize=None)
def figures() -> tuple[Figure, ...]:
    text = resources.files("rlinf_eks.trainers").joinpath("gpu_memory.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    return tuple(
        Figure(
            recipe=str(f["recipe"]), seq_length=int(f["seqLength"]), micro_batch=int(f["microBatch"]),
            gradient_checkpointing=bool(f["gradientCheckpointing"]),
            peak_gib=None if f.get("peakGiB") is None else float(f["peakGiB"]), oom=bool(f.get("oom")),
            gpu=str(f.get("gpu") or ""), source=str(f.get("source") or ""), how=str(f.get("how") or ""),
            activations_only=bool(f.get("activationsOnly")),
            trainer_code=bool(f.get("trainerCode")), date=str(f.get("date") or ""),
        )
        for f in data.get("figures") or ()
    )


@dataclass(frozen=True)
class Setting:
    """A key's value as the command sets it and the stack key path that sets it."""

    key: str
    value: Any
    path: str


def _bool_override(settings: StackSettings, key: str) -> Optional[tuple[bool, str]]:
    found = None
    for i, item in enumerate(settings.workload.trainer.overrides):
        name, sep, value = item.lstrip("+").partition("=")
        if sep and name == key and value.strip().lower() in ("true", "false"):
            found = (value.strip().lower() == "true", f"workload.trainer.overrides[{i}]")
    return found


def rendered(settings: StackSettings, model: ModelFacts) -> Optional[dict[str, Setting]]:
    """The sequence length, micro batch and gradient checkpointing of the run, or None when the
    recipe names no such keys for the config."""
    keys: dict[str, KeyDefault] = {
        name: fact for name, fact in (("seqLength", model.seq_length), ("microBatch", model.micro_batch), ("gradientCheckpointing", model.gradient_checkpointing))
        if fact is not None
    }
    if len(keys) < 3:
        return None
    default_note = f"the default of {config_name_of(settings.workload.trainer)}"
    sizes = effective_sizes(settings, {keys[k].key: int(keys[k].default) for k in ("seqLength", "microBatch")})  # type: ignore[call-overload]
    out = {name: Setting(keys[name].key, sizes[keys[name].key].value,
                         sizes[keys[name].key].path if "overrides" in sizes[keys[name].key].path else default_note) for name in ("seqLength", "microBatch")}
    checkpointing = keys["gradientCheckpointing"]
    given = _bool_override(settings, checkpointing.key)
    out["gradientCheckpointing"] = Setting(checkpointing.key, given[0] if given else bool(checkpointing.default), given[1] if given else default_note)
    return out


def actor_gpus(settings: StackSettings, model: ModelFacts) -> int:
    """The GPUs the actor's FSDP shards are spread over (``actorShards: gpus``: every GPU of the run)."""
    if model.actor_shards == "gpus" and not overridden(settings, "cluster.component_placement"):
        return settings.gpu_nodes.node_count * settings.gpu_nodes.instance.gpus
    return 1


def model_state_gib(model: ModelFacts, gpus: int) -> float:
    """One GPU's share of the model's state under FSDP full_shard: the weights and their gradients
    in the model's precision, and Adam's two moments of each trainable weight."""
    values = 2 * model.parameters + 2 * model.trainable
    return values * model.bytes_per_value / gpus / catalog.GIB


def _nearest(recipe: str, run: Mapping[str, Setting]) -> tuple[Optional[Figure], Optional[Figure]]:
    """(the measured peak at the smallest sequence length >= the run's, an out-of-memory figure at a
    sequence length <= the run's), both at the run's micro batch and gradient checkpointing; among
    equals, the trainer's own code's figure, then the newest (:attr:`Figure.preference`). Running
    out of memory at a longer sequence says nothing of the run's."""
    alike = [f for f in figures() if f.recipe == recipe and f.micro_batch == run["microBatch"].value
             and f.gradient_checkpointing == run["gradientCheckpointing"].value]
    above = sorted((f for f in alike if not f.oom and f.seq_length >= run["seqLength"].value), key=lambda f: (f.seq_length, *f.preference))
    oom_below = sorted((f for f in alike if f.oom and f.seq_length <= run["seqLength"].value), key=lambda f: (-(f.gpu_gib or 0), *f.preference))
    return (above[0] if above else None), (oom_below[0] if oom_below else None)


def gpu_memory(settings: StackSettings) -> Optional[dict[str, Any]]:
    """plan.json's ``gpuMemory``: None for a stack that trains nothing."""
    workload = settings.workload
    if not workload.enabled or workload.mode != "train":
        return None
    trainer = workload.trainer
    recipe = f"{trainer.dialect}/{config_name_of(trainer)}"
    instance = settings.gpu_nodes.instance
    gpu_gib = float(instance.gpu_memory_gib)
    usable = gpu_gib * USABLE_FRACTION
    report: dict[str, Any] = {"recipe": recipe, "gpu": f"{instance.gpu_model} {instance.gpu_memory_gib} GiB ({instance.name})",
                              "usableGiB": round(usable, 1)}
    model = recipe_of(trainer.dialect).models.get(config_name_of(trainer))
    run = rendered(settings, model) if model is not None else None
    if model is None or run is None:
        return {**report, "verdict": "not measured", "reason": f"the recipe names no sequence length, micro batch and gradient checkpointing keys for {recipe}"}
    report["settings"] = {name: {"key": s.key, "value": s.value, "setBy": s.path} for name, s in run.items()}
    figure, oom = _nearest(recipe, run)
    gpus = actor_gpus(settings, model)
    state = model_state_gib(model, gpus)
    if figure is not None and figure.peak_gib is not None:
        need = figure.peak_gib + (state if figure.activations_only else 0.0)
        verdict = "fits" if need <= usable else "does not fit"
        return {**report, "verdict": verdict, "needGiB": round(need, 1),
                "figure": {"seqLength": figure.seq_length, "peakGiB": figure.peak_gib, "activationsOnly": figure.activations_only,
                           "gpu": figure.gpu, "source": figure.source, "date": figure.date, "trainerCode": figure.trainer_code, "how": figure.how},
                "modelStateGiB": round(state, 2) if figure.activations_only else None, "actorGpus": gpus}
    if oom is not None and oom.gpu_gib is not None and gpu_gib <= oom.gpu_gib:
        return {**report, "verdict": "does not fit", "needGiB": None,
                "figure": {"seqLength": oom.seq_length, "oom": True, "gpu": oom.gpu, "source": oom.source, "date": oom.date,
                           "trainerCode": oom.trainer_code, "how": oom.how}}
    return {**report, "verdict": "not measured", "reason": f"no figure of {recipe} at sequence length >= {run['seqLength'].value}, "
            f"micro batch {run['microBatch'].value}, gradient checkpointing {run['gradientCheckpointing'].value} for a {gpu_gib:g} GiB GPU "
            "(trainers/gpu_memory.yaml)"}


def _fits_types(need: Optional[float]) -> list[str]:
    if need is None:
        return []
    return sorted(name for name, row in catalog.CATALOG.items() if need <= row.gpu_memory_gib * USABLE_FRACTION and row.gpus == 8)


def gpu_memory_problems(settings: StackSettings) -> list[str]:
    """The plan's refusal: a figure says the run's trainer does not fit the GPU type."""
    report = gpu_memory(settings)
    if report is None or report["verdict"] != "does not fit":
        return []
    run, figure = report["settings"], report["figure"]
    seq, check = run["seqLength"], run["gradientCheckpointing"]
    if figure.get("oom"):
        measured = f"ran out of memory on an {figure['gpu']} at {figure['seqLength']} tokens"
    else:
        state = f" + {report['modelStateGiB']:g} GiB of model state over {report['actorGpus']} GPUs" if figure["activationsOnly"] else ""
        measured = f"needs {report['needGiB']:g} GiB a GPU ({figure['peakGiB']:g} GiB measured at {figure['seqLength']} tokens{state})"
    fixes = []
    if not check["value"]:
        fixes.append(f"turn on gradient checkpointing ({check['key']}=true in workload.trainer.overrides)")
    fixes.append(f"lower the sequence length ({seq['key']}={seq['value']}, {seq['setBy']})")
    types = _fits_types(report.get("needGiB"))
    fixes.append(f"use a GPU type with more memory (gpuNodes.instanceType{': ' + ', '.join(types) if types else ''})")
    return [
        problem_line(
            "gpuNodes.instanceType", settings.gpu_nodes.instance_type,
            f"{report['recipe']} at {seq['key']}={seq['value']}, {check['key']}={str(check['value']).lower()} {measured} "
            f"(trainers/gpu_memory.yaml, {figure['source']}): more than the {report['usableGiB']:g} GiB usable of a {report['gpu']}; "
            + ", ".join(fixes[:-1]) + " or " + fixes[-1]
        )
    ]


def render(report: Optional[Mapping[str, Any]]) -> str:
    """The plan's lines ("" without a report)."""
    if not report:
        return ""
    head = f"GPU memory ({report['verdict']}, {report['recipe']} on {report['gpu']}):"
    if report["verdict"] == "not measured":
        return f"{head}\n  {report['reason']}"
    run = report["settings"]
    at = ", ".join(f"{s['key']}={str(s['value']).lower() if isinstance(s['value'], bool) else s['value']}" for s in run.values())
    figure = report["figure"]
    if figure.get("oom"):
        need = f"out of memory on an {figure['gpu']} at {figure['seqLength']} tokens"
    else:
        state = f" + model state {report['modelStateGiB']:g} GiB ({report['actorGpus']} GPUs)" if figure["activationsOnly"] else ""
        need = f"{report['needGiB']:g} of {report['usableGiB']:g} GiB: measured {figure['peakGiB']:g} GiB at {figure['seqLength']} tokens{state}"
    return f"{head}\n  at {at}\n  need {need}\n  figure {_figure_words(figure)}"


def _figure_words(figure: Mapping[str, Any]) -> str:
    """Which figure the rule read: its source, date and whether the trainer's own code measured it."""
    code = "with the trainer's own code" if figure.get("trainerCode") else "outside the trainer's code"
    return f"{figure['source']}, {figure.get('date') or 'undated'}, measured {code} on an {figure['gpu']}"
