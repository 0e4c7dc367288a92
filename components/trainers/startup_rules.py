"""The stack's side of the trainer's startup facts (its recipe's ``startup``, :mod:`.startup`): what the
pods set for the dialect and its rollout backend (:func:`startup_env`, read by ``workload/env.py``),
and the stack rule :func:`refused_env_problems`: a ``workload.env`` value (or a recipe's own) that
the trainer refuses at startup with the stack's rollout backend is an exit-2 error naming the key,
the value and the upstream fact, before anything is created. (An override of a key that decides
where the trainer writes, ``startup.sets``, is refused with the other generated keys: :mod:`.pinned`.)
"""

from __future__ import annotations

from typing import Optional

from ..config import StackSettings
from ..config.errors import key_path, problem_line
from .base import config_name_of
from .recipe import recipe_of

__all__ = ["refused_env_problems", "startup_env"]


def startup_env(settings: StackSettings) -> dict[str, str]:
    """The variables the pods set for the trainer, its dialect's and rollout backend's."""
    return recipe_of(settings.workload.trainer.dialect).startup.env_set(settings.workload.rollout.backend)


def refused_env_problems(settings: StackSettings, stack: Optional[str] = None) -> list[str]:
    """A variable the trainer refuses with this rollout backend, set by ``workload.env`` (or by the
    dialect's recipe itself): one problem line each."""
    workload = settings.workload
    dialect, backend = workload.trainer.dialect, workload.rollout.backend
    recipe = recipe_of(dialect)
    refused = recipe.startup.env_refused(backend)
    if not refused:
        return []
    config = recipe.configs.get(config_name_of(workload.trainer))
    given = [
        (key_path("workload", "env", name), name, value) for name, value in workload.env.items()
    ] + [(f"recipes/{dialect}.yaml env", name, value) for name, value in {**(config.env if config else {}), **startup_env(settings)}.items()]
    problems = []
    for where, name, value in given:
        for item in refused:
            if item.name == name and item.refuses(value):
                problems.append(
                    problem_line(
                        where,
                        value,
                        f"the {dialect} trainer with workload.rollout.backend {backend} refuses {name} containing "
                        f"{item.contains}: {item.why}; leave {name} out, or set it without {item.contains}",
                    )
                )
    return problems

