"""Trainer dialects: how typed stack settings become the trainer's command line.

    from rlinf_eks.trainers import launch_for
    launch = launch_for(settings, nnodes=2, gpus_per_node=8, log_dir="/fsx/logs/rlinf",
                        checkpoint_dir="/fsx/checkpoints/rlinf", inputs_root="/fsx/models")
    launch.argv       # ["python", "-m", "verl.trainer.main_ppo", "trainer.nnodes=2", ...]
    launch.env        # dialect env, e.g. RAY_ADDRESS=auto (verl-ppo, nnodes > 1), EMBODIED_PATH, MUJOCO_GL
    launch.workdir    # run argv from here (workload.trainer.workdir), after launch.prepare
    launch.warnings   # for the plan, e.g. verl-ppo + vllm
    launch.resume     # Resume(checkpoint_globs, key) or None; launch.script() uses it
    launch.shell()    # shlex-quoted command line
    launch.script()   # sh: cd workdir, resume from the newest checkpoint if any, exec the trainer

One module per dialect (verl_ppo, rlinf_embodied, rlinf_reasoning), each a
:class:`~.base.TrainerDialect`: its name, default config name and rollout backends,
``launch(...)`` and ``world_size_problems(settings, world)``, and a recipe beside it
(``recipes/<dialect>.yaml``, :mod:`.recipe`: the inputs, imports, environment and settings of each
config, from the upstream run script). ``TRAINER_RULES`` are the stack rules the loading step
(rlinf_eks.loading) runs: the dialect's rollout backend, world sizes, inputs (:mod:`.inputs`), the
environment its trainer refuses at startup (:mod:`.startup_rules`, from the recipe's ``startup``) and
the generated keys an override may not change (:mod:`.pinned`, where the trainer writes among them)
and the keys an override may name (:mod:`.override_keys`, the upstream config's).
Generated overrides come first (the world, the inputs' paths), then the recipe's settings, then
``workload.trainer.batch`` as ``key=value``, then ``workload.trainer.overrides`` (the user wins).
Every generated key exists in the reference trainer configs (tests compose them with Hydra).
"""

from __future__ import annotations

from typing import Optional

from ..config import ConfigError, StackRule, StackSettings
from ..config.errors import problem_line
from . import verl_ppo, rlinf_embodied, rlinf_reasoning  # noqa: F401, I001 (each registers its dialect, in this order)
from .base import DIALECTS, Resume, TrainerDialect, TrainerLaunch, World, config_name_of
from .startup_rules import refused_env_problems, startup_env
from .evaluation import eval_problems, evaluation_launch
from .inputs import ChosenInput, chosen_inputs, config_recipe, input_problems
from .override_keys import override_key_problems
from .pinned import pinned_problems
from .recipe import recipe_of
from .rlinf_runner import runner_problems

__all__ = [
    "DIALECTS", "ChosenInput", "Resume", "TRAINER_RULES", "TrainerDialect", "TrainerLaunch", "World", "check_world_size",
    "chosen_inputs", "config_name_of", "config_recipe", "launch_for", "recipe_of", "startup_env",
]  # fmt: skip


def check_world_size(settings: StackSettings, nnodes: int, gpus_per_node: int) -> list[str]:
    """Problems with the batch and env sizes on ``nnodes`` x ``gpus_per_node`` GPUs, one line
    each naming the key path, the value and what is valid; empty when the sizes fit. Sizes the
    stack does not set are checked at the reference config's default for known config names."""
    world = World(nnodes, gpus_per_node)
    return DIALECTS[settings.workload.trainer.dialect].world_size_problems(settings, world)


def _rollout_backend(settings: StackSettings, stack: Optional[str]) -> list[str]:
    """The dialect runs the stack's rollout backend."""
    dialect, backend = DIALECTS[settings.workload.trainer.dialect], settings.workload.rollout.backend
    return [] if backend in dialect.rollout_backends else [problem_line("workload.rollout.backend", backend, dialect.unsupported_backend)]


def _config_name(settings: StackSettings, stack: Optional[str]) -> list[str]:
    """workload.trainer.configName is not another dialect's reference config (left from a dialect
    switch): the dialect would look for it in its own config folder and fail in the pod."""
    trainer = settings.workload.trainer
    dialect, name = DIALECTS[trainer.dialect], trainer.config_name
    if name is None or name in dialect.config_names:
        return []
    owner = next((other for other in DIALECTS.values() if name in other.config_names), None)
    if owner is None:
        return []
    return [
        problem_line(
            "workload.trainer.configName",
            name,
            f"a config of the {owner.name} dialect; the {dialect.name} dialect reads its configs from "
            f"{dialect.config_dir} ({', '.join(dialect.config_names)}): name one of them or one your image adds, "
            "or leave configName out for the dialect's default",
        )
    ]


def _world_size(settings: StackSettings, stack: Optional[str]) -> list[str]:
    """An enabled workload's sizes fit the GPU nodes."""
    if not settings.workload.enabled:
        return []
    return check_world_size(settings, settings.gpu_nodes.node_count, settings.gpu_nodes.instance.gpus)


TRAINER_RULES: tuple[StackRule, ...] = (
    StackRule(("workload",), _rollout_backend),
    StackRule(("workload",), _config_name),
    StackRule(("workload",), input_problems),
    StackRule(("workload", "gpuNodes"), _world_size),
    StackRule(("workload",), pinned_problems),
    StackRule(("workload",), override_key_problems),
    StackRule(("workload",), eval_problems),
    StackRule(("workload",), refused_env_problems),
    StackRule(("workload",), runner_problems),
)
"""The trainers' stack rules; rlinf_eks.loading runs them after config's STACK_RULES."""


def launch_for(
    settings: StackSettings,
    *,
    nnodes: int,
    gpus_per_node: int,
    log_dir: str,
    checkpoint_dir: str,
    inputs_root: str,
    wandb: bool = False,
    run_dir: str = "",
    identity: str = "",
) -> TrainerLaunch:
    """The trainer launch of ``settings.workload.trainer.dialect`` on ``nnodes`` pods of
    ``gpus_per_node`` GPUs.

    ``log_dir``: logs (RLinf also writes its checkpoints here); ``checkpoint_dir``: veRL's
    ``trainer.default_local_dir``; ``inputs_root``: where the recipe's inputs are staged (each
    below it in a folder of its own, :mod:`.inputs`); ``wandb``: also log to W&B (needs
    WANDB_API_KEY in the pod), defaults to False; ``run_dir``: the run's directory, below which
    ``workload.mode: eval`` writes (``<run_dir>/eval/step-<N>``, :mod:`.evaluation`), whose run ``identity`` it checks. Raises
    ConfigError when the world-size rules fail (or the dialect has no evaluation).
    """
    problems = check_world_size(settings, nnodes, gpus_per_node)
    if problems:
        raise ConfigError(problems)
    launch = DIALECTS[settings.workload.trainer.dialect].launch(
        settings,
        World(nnodes, gpus_per_node),
        log_dir=log_dir,
        checkpoint_dir=checkpoint_dir,
        inputs_root=inputs_root,
        wandb=wandb,
    )
    if settings.workload.mode == "eval":
        return evaluation_launch(
            settings, launch, run_dir=run_dir or log_dir.rsplit("/", 1)[0], experiment=settings.workload.trainer.experiment_name, identity=identity,
            inputs_root=inputs_root,
        )
    return launch
