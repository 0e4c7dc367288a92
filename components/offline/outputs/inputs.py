"""What the run trains on, as the plan prints it (``python -m rlinf_eks plan``, section
"Inputs:"): the recipe of the stack's config (what it trains, on which data, what to expect), then
every input with its source, where it lands, how it gets there and the keys that point the trainer
at it, then the image family and what the image check imports first. Printed only (plan.json and
the manifests carry the same facts as the init containers' environment and the command line)."""

from __future__ import annotations

from typing import Optional

from ...config import StackSettings
from ...trainers import config_name_of, config_recipe, recipe_of
from ...workload.image_contract import contract_for
from ...workload.run import resolve_run


def input_lines(settings: StackSettings, stack: str) -> list[str]:
    if not settings.workload.enabled:
        return []
    run = resolve_run(settings, stack)
    trainer = settings.workload.trainer
    dialect = recipe_of(trainer.dialect)
    config = config_recipe(settings)
    name = config_name_of(trainer)
    lines = []
    if config is None:
        staged = "only the model is staged" if settings.workload.model.source else "nothing is staged (no workload.model.source)"
        lines.append(
            f"recipe: none for {trainer.dialect} config {name!r} (an image's own config): {staged}; "
            "make sure every path the config reads exists in the pod"
        )
    else:
        lines += [
            f"recipe: {trainer.dialect} {name}, as {config.script} runs it ({dialect.repository} at {dialect.commit[:7]})",
            f"trains: {config.trains}",
            f"data: {config.data}",
        ]
    staging = run.staging
    root = staging.root if staging is not None else ""
    where = "on FSx, once for every pod and run" if run.shared else "in each pod's node-local models volume"
    for item in run.inputs:
        reads = ", ".join(item.spec.pointers()) or "nothing (unused)"
        origin = "the recipe's" if item.origin == "recipe" else f"from {item.origin}"
        if item.source is None:
            lines.append(f"input {item.name}: {item.value} ({origin}, in the pod already, not staged); read by {reads}")
        else:
            lines.append(
                f"input {item.name}: {item.value} ({origin}) -> {item.path(root)} (staged {where} by init container "
                f"stage-{item.name}); read by {reads}"
            )
    if config is not None:
        for key, why in config.left_out.items():
            lines.append(f"left out of the upstream run: {key}: {why}")
        for key, fix in config.fixes.items():
            lines.append(f"added to upstream's config: {key}={fix.value}: {fix.why} ({fix.source})")
        lines.append(f"expect: {config.expect}")
    contract = contract_for(run)
    first = f"; the image check imports first: {' '.join(contract.trainer_modules)}" if contract.trainer_modules else ""
    lines.append(f"image: {dialect.family}, built by {dialect.dockerfile}{first}")
    return lines


def render(settings: Optional[StackSettings], stack: str) -> str:
    """The "Inputs:" section of the printed plan, empty without settings or a workload."""
    if settings is None:
        return ""
    lines = input_lines(settings, stack)
    return "\n".join(["Inputs:", *(f"  {line}" for line in lines)]) if lines else ""
