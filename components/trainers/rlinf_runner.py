"""What RLinf v0.3's runner and ManiSkill refuse at run time, refused (or warned of) at plan time.

- ``runner.save_interval`` must be divisible by ``runner.val_check_interval`` whenever evaluation
  runs (``val_check_interval > 0``) and saving is on (``save_interval > 0``):
  ``rlinf/utils/runner_utils.py:43-46`` (``check_progress``, called after every step by every
  runner) asserts it, so a run fails at its first step's end, after the whole start-up.
- ManiSkill's CPU physics (``sim_backend: cpu`` or ``physx_cpu``) simulates one environment per
  env worker: more fail when the env worker builds its environments (the rlinf-gpu-kit's
  measurement, ``shared/tools/rlinf-gpu-kit/README.md``; GPU physics, the upstream default
  ``sim_backend: "gpu"`` of ``env/maniskill_*.yaml``, takes many).
- ``runner.save_interval`` at or below 0 saves no checkpoint: nothing to resume from (a warning,
  since a short try may want none).

The values a stack leaves at the config's default are the upstream configs': the sizes its
dialect already knows (``references``: the world-size rules' table) and ``DEFAULTS`` for the rest,
read at RLinf v0.3 (commit 0505431), file:line there.
"""

from __future__ import annotations

from typing import Mapping, Optional

from ..config import StackSettings
from .base import DIALECTS, Value, config_name_of, effective_sizes

SAVE, VAL = "runner.save_interval", "runner.val_check_interval"
CPU_BACKENDS = frozenset({"cpu", "physx_cpu"})

DEFAULTS: Mapping[str, Mapping[str, int]] = {
    # examples/embodiment/config/<name>.yaml (runner: val_check_interval, save_interval; env.train/
    # env.eval total_num_envs where the dialect's reference sizes lack them)
    "maniskill_ppo_mlp": {VAL: 50, SAVE: -1, "env.train.total_num_envs": 1024, "env.eval.total_num_envs": 32},  # :33-34, :72, :79
    "maniskill_ppo_openvlaoft": {VAL: -1, SAVE: 40, "env.eval.total_num_envs": 16},  # :35-36, :78
    "maniskill_ppo_openvla": {VAL: -1, SAVE: 40, "env.eval.total_num_envs": 16},  # :35-36, :81
    "libero_10_grpo_openvlaoft": {VAL: -1, SAVE: 25},  # :33-34 (LIBERO: no ManiSkill physics)
    # examples/reasoning/config/math/qwen2.5-1.5b-grpo-fsdp.yaml:27-28
    "qwen2.5-1.5b-grpo-fsdp": {VAL: 1, SAVE: 50},
}
"""The upstream defaults the rules read, per reference config, beyond its dialect's reference sizes."""


def upstream_defaults(dialect: str, config_name: str) -> dict[str, int]:
    """The upstream config's values the rules read: the dialect's reference sizes (its
    ``references``, checked against the configs with the world-size table), then ``DEFAULTS``."""
    reference = getattr(DIALECTS.get(dialect), "references", {}).get(config_name)
    return {**(reference.sizes if reference is not None else {}), **DEFAULTS.get(config_name, {})}


def _sizes(settings: StackSettings) -> dict[str, Value]:
    trainer = settings.workload.trainer
    return effective_sizes(settings, upstream_defaults(trainer.dialect, config_name_of(trainer)))


def _string_override(settings: StackSettings, key: str) -> Optional[tuple[str, str]]:
    """(key path, value) of the last override that sets ``key`` to a string, or None."""
    found = None
    for i, item in enumerate(settings.workload.trainer.overrides):
        name, sep, value = item.lstrip("+").partition("=")
        if sep and name == key:
            found = (f"workload.trainer.overrides[{i}]", value.strip().strip("'\""))
    return found


def _shown(size: Value) -> str:
    return f"{size.path}={size.value}{size.note}"


def interval_problems(settings: StackSettings) -> list[str]:
    sizes = _sizes(settings)
    save, val = sizes.get(SAVE), sizes.get(VAL)
    if save is None or val is None or val.value <= 0 or save.value <= 0 or save.value % val.value == 0:
        return []
    return [
        f"{save.path}={save.value}{save.note or f' ({SAVE})'}: RLinf requires {SAVE} to be divisible by {VAL} "
        f"while evaluation runs, and {_shown(val)}{'' if val.note else f' ({VAL})'} (rlinf/utils/runner_utils.py "
        f"check_progress fails the run at its first step): a multiple of {val.value}, or {VAL} -1 (no evaluation)"
    ]


def cpu_physics_problems(settings: StackSettings) -> list[str]:
    sizes = _sizes(settings)
    problems = []
    for part in ("train", "eval"):
        backend = _string_override(settings, f"env.{part}.init_params.sim_backend")
        envs = sizes.get(f"env.{part}.total_num_envs")
        if backend is None or backend[1] not in CPU_BACKENDS or envs is None or envs.value <= 1:
            continue
        path, value = backend
        problems.append(
            f"{_shown(envs)}: ManiSkill's CPU physics ({path}: env.{part}.init_params.sim_backend={value}) simulates "
            f"one environment per env worker: set env.{part}.total_num_envs to 1, or keep GPU physics (sim_backend gpu, "
            "the config's default) for more"
        )
    return problems


def runner_problems(settings: StackSettings, stack: Optional[str] = None) -> list[str]:
    """A stack rule of the RLinf dialects (rlinf_eks.trainers.TRAINER_RULES)."""
    if not settings.workload.trainer.dialect.startswith("rlinf-"):
        return []
    return interval_problems(settings) + cpu_physics_problems(settings)


def _gpu_physics(settings: StackSettings) -> bool:
    """A ManiSkill config (maniskill_*) that keeps GPU physics for training or evaluation."""
    if not config_name_of(settings.workload.trainer).startswith("maniskill"):
        return False
    backends = [_string_override(settings, f"env.{part}.init_params.sim_backend") for part in ("train", "eval")]
    return any(b is None or b[1] not in CPU_BACKENDS for b in backends)


def runner_warnings(settings: StackSettings) -> list[str]:
    """What the launch warns of: a run that saves no checkpoint; GPU physics with a HOME that is
    not root's (RLinf's image bakes SAPIEN's PhysX GPU library under /opt/assets/.sapien and links
    it into root's home at build time, docker/Dockerfile:174-187 and :222-223; SAPIEN looks in
    ~/.sapien/physx and otherwise downloads it from GitHub at first use)."""
    warnings = []
    save = _sizes(settings).get(SAVE)
    if save is not None and save.value <= 0:
        warnings.append(
            f"{save.path}={save.value}{save.note}: RLinf saves no checkpoint, so a stopped or restarted run "
            f"starts again from step 0 and evaluation has nothing to read: set {SAVE} (a multiple of {VAL} "
            "while evaluation runs) in workload.trainer.overrides"
        )
    home = settings.workload.env.get("HOME")
    if settings.workload.trainer.dialect == "rlinf-embodied" and _gpu_physics(settings) and home not in (None, "/root"):
        warnings.append(
            f"workload.env.HOME={home!r}: ManiSkill's GPU physics loads SAPIEN's PhysX GPU library from "
            "~/.sapien, which RLinf's image links into /root only: with another HOME SAPIEN downloads it from "
            "GitHub at first use (fails without internet access); leave HOME unset (the image's root user has /root)"
        )
    return warnings
