"""Derive the trainer configs' key lists (components/trainers/data/<dialect>-keys.json) from the
pinned upstream Hydra configs: each config a dialect's recipe knows (its ``configs`` and
``otherConfigs``) is composed with hydra-core as the trainer composes it, with no override, and
every key path of the result (interior nodes and leaves, unresolved) is listed. The plan checks
``workload.trainer.overrides`` against these lists (rlinf_eks.trainers.override_keys) without the
configs or Hydra; tests/test_override_keys.py checks the lists equal what this derives.

    python -m tests.trainer_keys        # rewrite the data from the reference configs
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from rlinf_eks.trainers import recipe_of
from rlinf_eks.trainers.override_keys import DATA_DIR, data_path
from tests.reference_trainers import REFERENCE

UPSTREAM = {
    "verl-ppo": {
        "repository": "https://github.com/PRIME-RL/SimpleVLA-RL",
        "commit": "7c51662df27b586f9e8a1ab35fcf849f2b8852f9",
        "configDir": "SimpleVLA-RL/verl/trainer/config",
        "versionBase": None,
    },
    "rlinf-embodied": {
        "repository": "https://github.com/RLinf/RLinf",
        "commit": "0505431899574619da86f551bad70b71e0ea2177",
        "configDir": "RLinf/examples/embodiment/config",
        "versionBase": "1.1",
    },
    "rlinf-reasoning": {
        "repository": "https://github.com/RLinf/RLinf",
        "commit": "0505431899574619da86f551bad70b71e0ea2177",
        "configDir": "RLinf/examples/reasoning/config/math",
        "versionBase": "1.1",
    },
}
"""Where each dialect's configs come from (the shared reference data's README: repository, commit)."""


def config_names(dialect: str) -> list[str]:
    recipe = recipe_of(dialect)
    return sorted({*recipe.configs, *recipe.other_configs})


def compose(dialect: str, name: str, reference: Path = REFERENCE) -> Any:
    """The config as the trainer's @hydra.main composes it (RLinf's embodied searchpath reads
    EMBODIED_PATH), unresolved."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    where = UPSTREAM[dialect]
    config_dir = reference / where["configDir"]
    before = os.environ.get("EMBODIED_PATH")
    os.environ["EMBODIED_PATH"] = str(reference / "RLinf" / "examples" / "embodiment")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=where["versionBase"]):
            return hydra_compose(config_name=name, overrides=[])
    finally:
        GlobalHydra.instance().clear()
        if before is None:
            os.environ.pop("EMBODIED_PATH", None)
        else:
            os.environ["EMBODIED_PATH"] = before


def key_paths(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key path of a composed config: a mapping's keys and, below each, its own keys; a
    list or a scalar is a leaf (an override replaces a list whole)."""
    from omegaconf import DictConfig, OmegaConf

    container = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else node
    for key, value in container.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, dict):
            yield from key_paths(value, path + ".")


def derive(dialect: str, reference: Path = REFERENCE) -> dict[str, Any]:
    import hydra
    import omegaconf

    where = UPSTREAM[dialect]
    return {
        "provenance": {
            "what": (
                f"Every key path of the {dialect} dialect's Hydra configs, composed with no override as the trainer composes "
                "them (interior nodes and leaves, interpolations unresolved); the plan refuses an override of a key not listed."
            ),
            "repository": where["repository"],
            "commit": where["commit"],
            "configDir": where["configDir"],
            "composedWith": f"hydra-core {hydra.__version__}, omegaconf {omegaconf.__version__} (version_base {where['versionBase']})",
            "generatedBy": "python -m tests.trainer_keys (from the shared reference configs and tests/data/upstream-trainers)",
        },
        "configs": {name: sorted(set(key_paths(compose(dialect, name, reference)))) for name in config_names(dialect)},
    }


def main() -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for dialect in UPSTREAM:
        data = derive(dialect)
        data_path(dialect).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {data_path(dialect)}: {', '.join(f'{n} ({len(k)} keys)' for n, k in data['configs'].items())}")


if __name__ == "__main__":
    main()
