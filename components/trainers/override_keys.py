"""``workload.trainer.overrides`` checked at plan time against the keys of the trainer's upstream
config: an override of a key the config does not have (``runner.max_stepz=100``) is refused with
the near miss, before anything is created, instead of by the pod's config check after a GPU node
has started and pulled the image.

The keys are data, not the configs: ``data/<dialect>-keys.json`` lists every key path of each
config the dialect's recipe knows, composed with hydra-core from the pinned upstream configs
(``python -m tests.trainer_keys`` derives it; its ``provenance`` names the repository and commit).
A config the data does not list (one of the image's own) is not checked.

Hydra's own prefixes decide what is checked: ``key=value`` and ``~key`` (delete) need the key;
``+key=value`` (append) and ``++key=value`` (add or override) may add one, and are not checked;
config group overrides (``group@package=option``, ``group/sub=option``) and ``hydra.*`` are
Hydra's, not the config's. Keys the launcher generates are the pinned rule's (:mod:`.pinned`), and
the keys below a node the launcher replaces whole (RLinf's ``cluster.component_placement``) are
whatever it writes there.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping, Optional

from ..config import StackSettings
from ..config.errors import key_hint, problem_line, suggestion
from .base import config_name_of
from .pinned import PINNED
from .rlinf_common import PLACEMENT

DATA_DIR = Path(__file__).resolve().parent / "data"
_REPLACED_WHOLE = (PLACEMENT,)
"""Nodes the launcher replaces whole (``~node`` then ``+node={...}``): their keys are its own."""


def data_path(dialect: str) -> Path:
    return DATA_DIR / f"{dialect}-keys.json"


@functools.lru_cache(maxsize=None)
def key_data(dialect: str) -> Optional[Mapping[str, Any]]:
    path = data_path(dialect)
    return json.loads(path.read_text()) if path.exists() else None


@functools.lru_cache(maxsize=None)
def config_keys(dialect: str, config_name: str) -> Optional[frozenset[str]]:
    """Every key path of the dialect's config, or None when the data does not list the config."""
    data = key_data(dialect)
    keys = data["configs"].get(config_name) if data else None
    return frozenset(keys) if keys is not None else None


def checked_key(item: str) -> Optional[str]:
    """The key an override needs to exist, or None for one Hydra may add or that is not the config's."""
    if item.startswith("+"):
        return None  # +key=value appends, ++key=value adds or overrides
    key = item.removeprefix("~").split("=", 1)[0].strip()
    if not key or "/" in key or "@" in key or key == "hydra" or key.startswith("hydra."):
        return None  # a config group's option, or Hydra's own settings
    return key


def near_miss(key: str, keys: frozenset[str]) -> str:
    """' (did you mean a.b.c?)' for a mistyped last word (among its siblings), else for a mistyped path."""
    parent, _, word = key.rpartition(".")
    if not parent or parent in keys:
        siblings = {k.rpartition(".")[2]: k for k in keys if k.rpartition(".")[0] == parent}
        match = _hinted(key_hint(word, siblings))
        if match is not None:
            return suggestion(siblings[match])
    return key_hint(key, keys)


def _hinted(hint: str) -> Optional[str]:
    """The name in a ' (did you mean NAME?)' hint (config.errors.suggestion), or None."""
    prefix = " (did you mean "
    return hint[len(prefix) : -2] if hint.startswith(prefix) else None


def override_key_problems(settings: StackSettings, stack: Optional[str] = None) -> list[str]:
    """Each override of a key the trainer's upstream config does not have."""
    trainer = settings.workload.trainer
    name = config_name_of(trainer)
    keys = config_keys(trainer.dialect, name)
    if keys is None or not trainer.overrides:
        return []
    pinned = PINNED.get(trainer.dialect, {})
    source = key_data(trainer.dialect)["provenance"]
    where = f"{source['repository'].rsplit('/', 1)[-1]} {source['commit'][:8]}"
    problems = []
    for index, item in enumerate(trainer.overrides):
        key = checked_key(item)
        if key is None or key in keys or any(key == p or key.startswith(p + ".") for p in (*pinned, *_REPLACED_WHOLE)):
            continue
        add = "" if item.startswith("~") else f"; to add a key the config lacks, write +{item}"
        problems.append(
            problem_line(
                f"workload.trainer.overrides[{index}]", item,
                f"{key} is not a key of the {trainer.dialect} config {name} ({where}){near_miss(key, keys)}{add}",
            )
        )  # fmt: skip
    return problems
