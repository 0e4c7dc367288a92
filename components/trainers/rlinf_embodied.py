"""rlinf-embodied: RLinf v0.3 VLA training (``examples/embodiment/train_embodied_agent.py``).

HuggingFace rollout only (``RlinfEmbodied.rollout_backends``: the loading step rejects vllm and
sglang). The config needs ``EMBODIED_PATH`` (its ``hydra.searchpath`` reads it), MuJoCo/PyOpenGL
render headless with EGL, and the driver calls ``ray.init(address="auto")`` and waits for
``cluster.num_nodes`` nodes (field notes, section 3). Where it writes its checkpoints and logs, and
what resume reads: its recipe's ``startup``.
"""

from __future__ import annotations

from ..config import StackSettings
from . import rlinf_common as common
from .rlinf_runner import runner_warnings
from .inputs import input_overrides, recipe_env, recipe_overrides
from .base import TrainerDialect, TrainerLaunch, World, batch_overrides, checkpoint_layout, config_name_of, register
from .recipe import recipe_of

DIALECT = "rlinf-embodied"
SCRIPT = "examples/embodiment/train_embodied_agent.py"

# The reference configs' placement and the sizes RLinf's world-size rules read (a test composes
# each reference config and compares). "split": actor on every GPU, env on the first half and
# rollout on the second (maniskill: actor 0-7, env 0-3, rollout 4-7 on one node); "all":
# everything collocated (`actor,env,rollout: all`).
REFERENCE: dict[str, common.Reference] = {
    "maniskill_ppo_openvlaoft": common.Reference(
        "split",
        {"actor.global_batch_size": 640, "actor.micro_batch_size": 40, "env.train.total_num_envs": 128, "rollout.pipeline_stage_num": 1},
    ),
    "maniskill_ppo_openvla": common.Reference(
        "split",
        {"actor.global_batch_size": 640, "actor.micro_batch_size": 80, "env.train.total_num_envs": 128, "rollout.pipeline_stage_num": 2},
    ),
    "libero_10_grpo_openvlaoft": common.Reference(
        "all",
        {"actor.global_batch_size": 16384, "actor.micro_batch_size": 32, "env.train.total_num_envs": 64, "rollout.pipeline_stage_num": 1},
    ),
}


def embodied_path(workdir: str) -> str:
    return f"{workdir.rstrip('/')}/examples/embodiment"


def launch(
    settings: StackSettings,
    world: World,
    *,
    log_dir: str,
    checkpoint_dir: str,
    inputs_root: str,
    wandb: bool,
) -> TrainerLaunch:
    """The train_embodied_agent.py command line; where it writes and resumes from: the recipe's
    ``startup`` (checkpoints below ``runner.logger.log_path``, which the stack sets to ``log_dir``)."""
    trainer = settings.workload.trainer
    path = embodied_path(trainer.workdir)
    overrides = [f"cluster.num_nodes={world.nnodes}"]
    overrides += common.placement_overrides(settings, REFERENCE, world, ("actor", "env", "rollout"))
    # the log path, below which it writes its checkpoints, and the experiment name
    overrides += recipe_of(DIALECT).startup.overrides(log_dir=log_dir, checkpoint_dir=checkpoint_dir, experiment=trainer.experiment_name)
    if wandb:
        overrides.append("runner.logger.logger_backends=[tensorboard,wandb]")
    # the model, the LoRA adapter (recipe keys; the assets are an environment variable)
    overrides += input_overrides(settings, inputs_root)
    overrides += recipe_overrides(settings, overrides)
    argv = [
        "python", SCRIPT,
        "--config-path", f"{path}/config",
        "--config-name", config_name_of(trainer),
        *overrides, *batch_overrides(settings), *trainer.overrides,
    ]  # fmt: skip
    env = {
        **common.env(trainer.workdir),
        "EMBODIED_PATH": path,
        # headless rendering of the simulators (MuJoCo for LIBERO, PyOpenGL) on the GPU, as
        # run_embodiment.sh sets them (for a config the recipe does not know too)
        "MUJOCO_GL": "egl",
        "PYOPENGL_PLATFORM": "egl",
        **recipe_env(settings, inputs_root),
    }
    patterns, resume = checkpoint_layout(settings, argv)
    return TrainerLaunch(
        argv=argv,
        env=env,
        workdir=trainer.workdir,
        warnings=common.placement_warnings(settings, REFERENCE, world) + runner_warnings(settings),
        resume=resume,
        checkpoint_patterns=patterns,
        node_rank_env=common.node_rank_env(world),
    )


def world_size_problems(settings: StackSettings, world: World) -> list[str]:
    """RLinf's rules (rlinf/config.py ``validate_embodied_cfg`` and ``validate_cfg``):
    env.train.total_num_envs divisible by the env world size, the per-env-rank count divisible by
    rollout.pipeline_stage_num, and actor.global_batch_size divisible by actor.micro_batch_size x
    the actor world size."""
    ranks = common.component_world_sizes(settings, REFERENCE, world)
    if ranks is None:
        return common.placement_problems(settings, REFERENCE, world)
    sizes = common.sizes(settings, REFERENCE)
    problems = common.actor_batch_problems(sizes, ranks["actor"])
    envs, stages = sizes.get("env.train.total_num_envs"), sizes.get("rollout.pipeline_stage_num")
    env_ranks = ranks["env"]
    if envs is not None and envs.value % env_ranks:
        problems.append(
            common.problem(
                envs,
                f"must be divisible by the env world size {env_ranks} (env GPUs of {world.nnodes} x "
                f"{world.gpus_per_node}): a multiple of {env_ranks}",
            )
        )
    elif envs is not None and stages is not None and stages.value > 0 and (envs.value // env_ranks) % stages.value:
        problems.append(
            common.problem(
                envs,
                f"gives {envs.value // env_ranks} envs per env rank ({env_ranks} ranks), which must be divisible "
                f"by rollout.pipeline_stage_num={stages.value}: a multiple of {env_ranks * stages.value}",
            )
        )
    return problems


class RlinfEmbodied:
    """This module as a TrainerDialect."""

    name = DIALECT
    default_config_name = "maniskill_ppo_openvlaoft"
    config_names = tuple(REFERENCE)
    references = REFERENCE
    """The reference configs' placement and the sizes the rules read (checked against the configs)."""
    config_dir = "examples/embodiment/config"
    rollout_backends = ("hf",)
    unsupported_backend = "RLinf embodied training rolls out with HuggingFace only: use hf"
    launch = staticmethod(launch)
    world_size_problems = staticmethod(world_size_problems)


TRAINER: TrainerDialect = register(RlinfEmbodied())
