"""What RLinf's two dialects share: component placement over the world, its world-size rules,
and env (where each writes and resumes from: its recipe's ``startup``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Optional

from ..config import StackSettings
from .base import config_name_of, Value, World, effective_sizes, overridden, problem

__all__ = ["Reference", "problem"]

PLACEMENT = "cluster.component_placement"


@dataclass(frozen=True)
class Reference:
    """A reference config's placement shape and the sizes the world-size rules read."""

    placement: Literal["all", "split"]
    sizes: Mapping[str, int]


def _reference(settings: StackSettings, references: Mapping[str, Reference]) -> Optional[Reference]:
    """The placement we know for this config, or None (an unknown config, or the user replaced
    the placement)."""
    if overridden(settings, PLACEMENT):
        return None
    return references.get(config_name_of(settings.workload.trainer))


def component_world_sizes(
    settings: StackSettings, references: Mapping[str, Reference], world: World
) -> Optional[dict[str, int]]:
    """GPUs (ranks) of each component, or None when unknown or impossible. On one GPU every
    component has one rank, whatever the config places (a config this module does not know, such
    as upstream maniskill_ppo_mlp's ``env,rollout,actor: 0``, or a placement of the user's)."""
    reference = _reference(settings, references)
    if reference is None:
        return {"actor": 1, "env": 1, "rollout": 1} if world.size == 1 else None
    if reference.placement == "all":
        return {"actor": world.size, "env": world.size, "rollout": world.size}
    if world.size < 2 or world.size % 2:
        return None
    return {"actor": world.size, "env": world.size // 2, "rollout": world.size // 2}


def placement_overrides(
    settings: StackSettings, references: Mapping[str, Reference], world: World, components: tuple[str, ...]
) -> list[str]:
    """A split placement rescaled to every GPU of the world. The reference configs name GPUs
    0-7 of one node, so on two nodes they would leave the second idle. A key like
    `actor,env,rollout` cannot be named in an override, hence delete-then-add of the whole node
    (reference README, "Offline check")."""
    ranks = component_world_sizes(settings, references, world)
    reference = _reference(settings, references)
    if ranks is None or reference is None or reference.placement != "split":
        return []
    last, half = world.size - 1, world.size // 2
    actor, env, rollout = components
    value = f"{{{actor}:0-{last},{env}:0-{half - 1},{rollout}:{half}-{last}}}"
    return [f"~{PLACEMENT}", f"+{PLACEMENT}={value}"]


def placement_warnings(settings: StackSettings, references: Mapping[str, Reference], world: World) -> list[str]:
    if _reference(settings, references) is not None or world.size == 1:
        return []
    name = config_name_of(settings.workload.trainer)
    return [
        f"workload.trainer.configName={name!r}: its {PLACEMENT} is not known here (or replaced by an override), "
        f"so RLinf's world-size rules were not checked at plan time; make sure it places work on all "
        f"{world.size} GPUs ({world.nnodes} x {world.gpus_per_node})"
    ]


def placement_problems(settings: StackSettings, references: Mapping[str, Reference], world: World) -> list[str]:
    reference = _reference(settings, references)
    if reference is None or reference.placement != "split" or (world.size >= 2 and world.size % 2 == 0):
        return []
    name = config_name_of(settings.workload.trainer)
    return [
        f"workload.trainer.configName={name!r}: places env and rollout on separate halves of the GPUs, so it needs "
        f"an even number of GPUs, but nnodes x GPUs per node = {world.nnodes} x {world.gpus_per_node} = {world.size}"
    ]


def sizes(settings: StackSettings, references: Mapping[str, Reference]) -> dict[str, Value]:
    reference = references.get(config_name_of(settings.workload.trainer))
    return effective_sizes(settings, reference.sizes if reference else {})


def actor_batch_problems(sizes: Mapping[str, Value], actor_ranks: int) -> list[str]:
    """rlinf/config.py ``validate_cfg`` (FSDP): actor.global_batch_size %
    (actor.micro_batch_size * actor_world_size) == 0."""
    total, micro = sizes.get("actor.global_batch_size"), sizes.get("actor.micro_batch_size")
    if total is None or micro is None or micro.value <= 0:
        return []
    step = micro.value * actor_ranks
    if total.value > 0 and total.value % step == 0:
        return []
    return [
        problem(
            total,
            f"must be divisible by actor.micro_batch_size x actor world size = {micro.value} x {actor_ranks} = {step}: "
            f"a positive multiple of {step}",
        )
    ]


def env(workdir: str) -> dict[str, str]:
    # RLinf's verl/ and rlinf/ must shadow any installed copy (the seed: PYTHONPATH=/workspace:...)
    return {"PYTHONPATH": workdir, "HYDRA_FULL_ERROR": "1"}


def node_rank_env(world: World) -> str:
    """RLinf's multi-node guide (docs guides/multi_node.rst:29-33): every node exports
    RLINF_NODE_RANK (unique, 0..N-1, head 0) before ``ray start``; its node probes read it from the
    raylet's environment (rlinf/scheduler node.py:503-510), and a cluster where only some nodes set
    it fails an assertion (node.py:450). The manual launcher sets it from the pod index; KubeRay's
    pods have no index, so there every node leaves it unset and RLinf ranks them itself."""
    return "RLINF_NODE_RANK" if world.nnodes > 1 else ""
