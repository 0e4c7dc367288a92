"""The size of the staged model where the plan can know it, so that a model larger than the
node-local volume it is staged into (``workload.model.sizeGib``, the emptyDir's sizeLimit) is
refused before a GPU node starts and pulls its image, instead of the kubelet evicting the pod
midway through the download.

Known sizes, each an estimate at :data:`BYTES_PER_PARAMETER` (the Hub's checkpoints of these
models are bf16 safetensors):

- the recipe's own model (chosen by the recipe, or the same source named in the stack): the
  parameter count of its ``models`` facts (components/trainers/recipes/*.yaml, each with its source);
- a Hugging Face model whose name states its parameter count as one dash-separated part
  (``Qwen/Qwen2.5-72B-Instruct``: 72B; ``Qwen3-235B-A22B``: 235B) and no quantization
  (AWQ, GPTQ, FP8, Int4, GGUF, ...: those are smaller, and not estimated).

An S3 prefix, a dataset or any other name: not known, nothing refused. With the shared filesystem
the inputs go to FSx, not to the emptyDir: nothing refused here either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from . import catalog
from .config import StackRule, StackSettings
from .config.errors import problem_line
from .storage_budget import model_facts
from .trainers import ChosenInput

BYTES_PER_PARAMETER = 2
"""bf16 (or fp16) weights, as the Hub publishes the models the recipes train."""
HEADROOM = 1.1
"""The volume to suggest: the estimate plus 10% (tokenizer, configs, the download's temporary files)."""

_PARAMETERS = re.compile(r"(\d+(?:\.\d+)?)([bBmM])")
_QUANTIZED = re.compile(r"(?i)awq|gptq|gguf|exl2|fp8|fp4|int4|int8|4bit|8bit|bnb|nf4|w4a16|w8a8|mlx")


@dataclass(frozen=True)
class ModelSize:
    """An estimate of a staged model's size: ``gib``, and how it was reached."""

    gib: float
    basis: str


def parameters_by_name(repo: str) -> Optional[float]:
    """The parameter count a Hub repository's name states (``Org/Name-72B-Instruct``), or None:
    no such part, more than one (which to believe?), or a quantized checkpoint."""
    name = repo.rsplit("/", 1)[-1]
    if _QUANTIZED.search(name):
        return None
    counts = [m for part in re.split(r"[-_]", name) if (m := _PARAMETERS.fullmatch(part))]
    if len(counts) != 1:
        return None
    number, unit = counts[0].groups()
    return float(number) * (1e9 if unit in "bB" else 1e6)


def staged_model(settings: StackSettings) -> Optional[tuple[ChosenInput, ModelSize]]:
    """The model input the pods stage and its estimated size, or None when it is not known."""
    from .trainers import chosen_inputs

    model = next((item for item in chosen_inputs(settings) if item.name == "model"), None)
    if model is None or model.source is None:
        return None
    if model.origin == "recipe" or model.value == model.spec.source:
        # the recipe's own model, chosen by the recipe or named again in the stack
        facts = model_facts(settings)
        if facts is None:
            return None
        basis = f"{facts.parameters / 1e9:.2f}B parameters by the recipe's facts, at {BYTES_PER_PARAMETER} bytes each in bf16"
        return model, ModelSize(facts.parameters * BYTES_PER_PARAMETER / catalog.GIB, basis)
    source = model.source
    if source.kind != "hf" or source.repo_type != "model":
        return None
    parameters = parameters_by_name(source.repo)
    if parameters is None:
        return None
    basis = f"{parameters / 1e9:g}B parameters by its name, at {BYTES_PER_PARAMETER} bytes each in bf16"
    return model, ModelSize(parameters * BYTES_PER_PARAMETER / catalog.GIB, basis)


def model_volume_problems(settings: StackSettings, stack: Optional[str] = None) -> list[str]:
    """A staged model larger than the node-local volume it goes into."""
    if settings.shared_filesystem:
        return []
    staged = staged_model(settings)
    limit = settings.workload.model.size_gib
    if staged is None or staged[1].gib <= limit:
        return []
    model, size = staged
    need = int(size.gib * HEADROOM) + 1
    return [
        problem_line(
            "workload.model.sizeGib",
            limit,
            f"the staged model {model.value} (set by {model.origin}) is about {size.gib:.0f} GiB ({size.basis}), more than "
            f"the volume it is staged into; set workload.model.sizeGib to {need} or more, or use the shared filesystem "
            f"(storage.sharedFilesystem.enabled: true)",
        )
    ]


MODEL_VOLUME_RULES: tuple[StackRule, ...] = (StackRule(("gpuNodes", "storage", "workload"), model_volume_problems),)
"""Run by rlinf_eks.loading before the storage budget (a larger volume may then not fit the node)."""
