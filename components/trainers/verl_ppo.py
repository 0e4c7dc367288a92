"""verl-ppo: the seed's veRL layout as SimpleVLA-RL ships it (``python -m verl.trainer.main_ppo``,
Hydra config ``verl/trainer/config/ppo_trainer.yaml``, no defaults list).

Facts from shared/reference/trainers/README.md (SimpleVLA-RL section):
- the FSDP worker floor-divides ``actor.ppo_mini_batch_size``, ``actor.ppo_micro_batch_size``,
  ``rollout.log_prob_micro_batch_size`` and ``ref.log_prob_micro_batch_size`` by the world size
  ``nnodes * n_gpus_per_node``, then ``update_policy`` asserts a per-GPU micro batch of 1: so
  ``ppo_micro_batch_size`` is derived (= world size), never typed;
- ``rollout.name=vllm`` raises ValueError in ``RobActorRolloutRefWorker._build_rollout`` today;
- ``main_ppo`` calls ``ray.init()`` without an address (field notes, section 3).
- no resume (ppo_trainer.yaml has no ``trainer.resume_mode``), where it writes its checkpoints
  and logs: its recipe's ``startup``.
"""

from __future__ import annotations

from ..config import StackSettings
from .inputs import input_overrides, prepare_commands, recipe_env, recipe_overrides
from .recipe import recipe_of
from .base import TrainerDialect, TrainerLaunch, Value, World, attempt_keys, batch_overrides, checkpoint_layout, config_name_of, effective_sizes, problem, register

DIALECT = "verl-ppo"
MODULE = "verl.trainer.main_ppo"
MICRO_BATCH = "actor_rollout_ref.actor.ppo_micro_batch_size"

# Sizes the FSDP worker floor-divides by the world size, with ppo_trainer.yaml's values (a test
# composes the reference config and compares).
DIVIDED_BY_WORLD: dict[str, dict[str, int]] = {
    "ppo_trainer": {
        "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size": 128,
        "actor_rollout_ref.ref.log_prob_micro_batch_size": 128,
    }
}

VLLM_WARNING = (
    "workload.rollout.backend=vllm with the verl-ppo dialect: SimpleVLA-RL's RobActorRolloutRefWorker "
    "raises ValueError for rollout.name=vllm today; this works only with an image whose VLA worker "
    "gained vLLM support (use hf, or the rlinf-reasoning dialect for a working vLLM rollout)"
)


def launch(
    settings: StackSettings,
    world: World,
    *,
    log_dir: str,
    checkpoint_dir: str,
    inputs_root: str,
    wandb: bool,
) -> TrainerLaunch:
    """The main_ppo command line. ``log_dir`` is unused: veRL logs to the console and to its
    checkpoint directory (the recipe's ``startup.logs``), and W&B."""
    trainer, rollout = settings.workload.trainer, settings.workload.rollout
    ref = "actor_rollout_ref"
    overrides = [
        f"trainer.nnodes={world.nnodes}",
        f"trainer.n_gpus_per_node={world.gpus_per_node}",
        f"{MICRO_BATCH}={world.size}",
        f"{ref}.rollout.name={rollout.backend}",
        # ppo_trainer.yaml defaults to TP 2; the seed's hf runs set it explicitly (1)
        f"{ref}.rollout.tensor_model_parallel_size={rollout.tensor_parallel_size}",
    ]
    if rollout.backend == "vllm":
        overrides += [
            f"{ref}.rollout.gpu_memory_utilization={rollout.gpu_memory_utilization}",
            f"{ref}.rollout.max_num_batched_tokens={rollout.max_num_batched_tokens}",
            f"{ref}.rollout.enforce_eager={rollout.enforce_eager}",
        ]
    # the model (the LIBERO script points both keys at the SFT checkpoint)
    overrides += input_overrides(settings, inputs_root)
    # the experiment name and default_local_dir, below which it writes its checkpoints and logs
    overrides += recipe_of(DIALECT).startup.overrides(log_dir=log_dir, checkpoint_dir=checkpoint_dir, experiment=trainer.experiment_name)
    overrides += [
        # ppo_trainer.yaml logs to wandb by default, which fails without an API key
        "trainer.logger=[console,wandb]" if wandb else "trainer.logger=[console]",
    ]
    # main_ppo is @hydra.main(config_path='config', config_name='ppo_trainer'): Hydra's
    # --config-name picks another config of verl/trainer/config (none when the stack names none,
    # so the default stays the script's own)
    config = ["--config-name", trainer.config_name] if trainer.config_name else []
    env = {"PYTHONPATH": trainer.workdir, "HYDRA_FULL_ERROR": "1", **recipe_env(settings, inputs_root)}
    if world.nnodes > 1:
        # ray.init() without an address, finding no RAY_ADDRESS, may start a private one-node Ray
        # and wait forever for GPUs that are on other pods (field notes, section 3). "auto" joins
        # the cluster that `ray start` runs on this pod, and raises ConnectionError if there is
        # none, rather than starting one (ray.init docs, address resolution). A literal
        # 127.0.0.1:6379 would name the GCS by an address the raylet did not register with.
        env["RAY_ADDRESS"] = "auto"
    warnings = ([VLLM_WARNING] if rollout.backend == "vllm" else []) + _floor_division_warnings(settings, world)
    overrides += recipe_overrides(settings, overrides)
    argv = ["python", "-m", MODULE, *config, *overrides, *batch_overrides(settings), *trainer.overrides]
    return TrainerLaunch(
        argv=argv,
        env=env,
        workdir=trainer.workdir,
        warnings=warnings,
        checkpoint_patterns=checkpoint_layout(settings, argv)[0],
        attempt_keys=attempt_keys(settings),
        resume_note=recipe_of(DIALECT).startup.cannot_resume,
        prepare=prepare_commands(settings, inputs_root),
    )


def world_size_problems(settings: StackSettings, world: World) -> list[str]:
    """The FSDP worker's rules: the micro batch is the world size itself (per-GPU 1), and each
    size it floor-divides must give every GPU at least 1 (a per-GPU 0 would pass its
    mini-divisible-by-micro assert and then split the batch into empty pieces)."""
    sizes = _sizes(settings)
    problems = []
    micro = sizes.get(MICRO_BATCH)
    if micro is not None and micro.value != world.size:
        problems.append(
            problem(
                micro,
                f"derived, not set: the FSDP worker asserts a per-GPU micro batch of 1, so it must equal "
                f"nnodes x GPUs per node = {world.nnodes} x {world.gpus_per_node} = {world.size}; remove it",
            )
        )
    for key in DIVIDED_BY_WORLD["ppo_trainer"]:
        size = sizes.get(key)
        if size is not None and size.value < world.size:
            problems.append(
                problem(
                    size,
                    f"the FSDP worker floor-divides it by the world size {world.size} ({world.nnodes} x "
                    f"{world.gpus_per_node} GPUs), giving {max(size.value, 0) // world.size} per GPU: use at least "
                    f"{world.size}, best a multiple of it",
                )
            )
    return problems


def _floor_division_warnings(settings: StackSettings, world: World) -> list[str]:
    sizes = _sizes(settings)
    warnings = []
    for key in DIVIDED_BY_WORLD["ppo_trainer"]:
        size = sizes.get(key)
        if size is not None and size.value >= world.size and size.value % world.size:
            per_gpu = size.value // world.size
            warnings.append(
                problem(
                    size,
                    f"not a multiple of the world size {world.size}: the FSDP worker floor-divides it, so it runs as "
                    f"{per_gpu} per GPU ({per_gpu * world.size} in all); {per_gpu * world.size} or "
                    f"{(per_gpu + 1) * world.size} say what runs",
                )
            )
    return warnings


def _sizes(settings: StackSettings) -> dict[str, Value]:
    return effective_sizes(settings, DIVIDED_BY_WORLD.get(config_name_of(settings.workload.trainer), {}))


class VerlPpo:
    """This module as a TrainerDialect."""

    name = DIALECT
    default_config_name = "ppo_trainer"
    config_names = tuple(DIVIDED_BY_WORLD)
    config_dir = "verl/trainer/config"
    rollout_backends = ("hf", "vllm")
    unsupported_backend = "the verl-ppo dialect supports hf or vllm"
    launch = staticmethod(launch)
    world_size_problems = staticmethod(world_size_problems)


TRAINER: TrainerDialect = register(VerlPpo())
