"""rlinf-reasoning: RLinf v0.3 math GRPO (``examples/reasoning/main_grpo.py``), rolling out with
vLLM or SGLang (``RlinfReasoning.rollout_backends``: the loading step rejects hf). The driver
calls ``ray.init(address="auto")`` and waits for ``cluster.num_nodes`` nodes (field notes,
section 3). Where it writes its checkpoints and logs, and what resume reads: its recipe's ``startup``.
"""

from __future__ import annotations

from ..config import StackSettings
from . import rlinf_common as common
from .rlinf_runner import runner_warnings
from .inputs import input_overrides, recipe_env, recipe_overrides
from .base import TrainerDialect, TrainerLaunch, World, batch_overrides, checkpoint_layout, config_name_of, register
from .recipe import recipe_of

DIALECT = "rlinf-reasoning"
SCRIPT = "examples/reasoning/main_grpo.py"
CONFIG_DIR = "examples/reasoning/config/math"

# The reference config's placement (`actor,rollout,reward: all`) and the sizes RLinf derives the
# actor batch from (a test composes the reference config and compares).
REFERENCE: dict[str, common.Reference] = {
    "qwen2.5-1.5b-grpo-fsdp": common.Reference(
        "all",
        {
            "data.rollout_batch_size": 512,
            "algorithm.group_size": 8,
            "algorithm.n_minibatches": 4,
            "algorithm.training_batch_size_per_gpu": 1,
        },
    ),
}


def launch(
    settings: StackSettings,
    world: World,
    *,
    log_dir: str,
    checkpoint_dir: str,
    inputs_root: str,
    wandb: bool,
) -> TrainerLaunch:
    """The main_grpo.py command line; where it writes and resumes from: the recipe's ``startup``
    (checkpoints below ``runner.output_dir``, which the stack sets to ``log_dir``)."""
    trainer, rollout = settings.workload.trainer, settings.workload.rollout
    overrides = [
        f"cluster.num_nodes={world.nnodes}",
        f"rollout.rollout_backend={rollout.backend}",
        f"rollout.tensor_parallel_size={rollout.tensor_parallel_size}",
        f"rollout.gpu_memory_utilization={rollout.gpu_memory_utilization}",
        f"rollout.enforce_eager={rollout.enforce_eager}",
    ]
    if rollout.backend == "vllm":
        # rollout.vllm has no max_num_batched_tokens in the v0.3 YAML (RLinf's validate_rollout_cfg
        # reads it with a default of None); "++" adds it, or sets it where a newer config has it
        overrides.append(f"++rollout.vllm.max_num_batched_tokens={rollout.max_num_batched_tokens}")
    # the experiment name, the log path and output_dir, below which it writes its checkpoints
    overrides += recipe_of(DIALECT).startup.overrides(log_dir=log_dir, checkpoint_dir=checkpoint_dir, experiment=trainer.experiment_name)
    if wandb:
        overrides.append("runner.logger.logger_backends=[tensorboard,wandb]")
    # the model (rollout, actor, tokenizer) and the dataset (recipe keys)
    overrides += input_overrides(settings, inputs_root)
    overrides += recipe_overrides(settings, overrides)
    argv = [
        "python", SCRIPT,
        "--config-path", f"{trainer.workdir.rstrip('/')}/{CONFIG_DIR}",
        "--config-name", config_name_of(trainer),
        *overrides, *batch_overrides(settings), *trainer.overrides,
    ]  # fmt: skip
    patterns, resume = checkpoint_layout(settings, argv)
    return TrainerLaunch(
        argv=argv,
        env={**common.env(trainer.workdir), **recipe_env(settings, inputs_root)},
        workdir=trainer.workdir,
        warnings=common.placement_warnings(settings, REFERENCE, world) + runner_warnings(settings),
        resume=resume,
        checkpoint_patterns=patterns,
        node_rank_env=common.node_rank_env(world),
    )


def world_size_problems(settings: StackSettings, world: World) -> list[str]:
    """rlinf/config.py ``validate_reasoning_cfg`` sets actor.micro_batch_size =
    algorithm.training_batch_size_per_gpu and actor.global_batch_size = data.rollout_batch_size x
    algorithm.group_size // algorithm.n_minibatches; ``validate_cfg`` (FSDP) then needs the global
    batch divisible by micro batch x actor world size."""
    ranks = common.component_world_sizes(settings, REFERENCE, world)
    if ranks is None:
        return []
    sizes = common.sizes(settings, REFERENCE)
    needed = ("data.rollout_batch_size", "algorithm.group_size", "algorithm.n_minibatches", "algorithm.training_batch_size_per_gpu")
    if any(key not in sizes for key in needed) or sizes["algorithm.n_minibatches"].value <= 0:
        return []
    prompts, group, minibatches, per_gpu = (sizes[key] for key in needed)
    total = prompts.value * group.value // minibatches.value
    step = per_gpu.value * ranks["actor"]
    if per_gpu.value > 0 and total > 0 and total % step == 0:
        return []
    # name the key the user most likely set; all four are listed in the message
    culprit = next((sizes[k] for k in needed if not sizes[k].note.startswith((" (the default", " (the recipe's"))), prompts)
    return [
        common.problem(
            culprit,
            f"the actor global batch data.rollout_batch_size x algorithm.group_size // algorithm.n_minibatches = "
            f"{prompts.value} x {group.value} // {minibatches.value} = {total} must be divisible by "
            f"algorithm.training_batch_size_per_gpu x actor world size = {per_gpu.value} x {ranks['actor']} = {step}",
        )
    ]


class RlinfReasoning:
    """This module as a TrainerDialect."""

    name = DIALECT
    default_config_name = "qwen2.5-1.5b-grpo-fsdp"
    config_names = tuple(REFERENCE)
    references = REFERENCE
    """The reference configs' placement and the sizes the rules read (checked against the configs)."""
    config_dir = CONFIG_DIR
    rollout_backends = ("vllm", "sglang")
    unsupported_backend = "RLinf reasoning rolls out with vllm or sglang"
    launch = staticmethod(launch)
    world_size_problems = staticmethod(world_size_problems)


TRAINER: TrainerDialect = register(RlinfReasoning())
