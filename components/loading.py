"""The loading step above config and trainers: the schema and its rules (rlinf_eks.config), then
the trainers' world-size rules (rlinf_eks.trainers), all problems in one ConfigError.

``rlinf_eks.config.parse``, ``settings_from_config`` and ``from_pulumi_config`` are these."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .config import pulumi_config, schema
from .config.rules import StackRule
from .config.schema import StackSettings
from .trainers import check_world_size

TRAINER_RULES: tuple[StackRule, ...] = (check_world_size,)
"""Run among the workload rules, with the GPU nodes' count and GPUs per node (a workload that is
enabled and GPU nodes that validated)."""


def parse(data: Mapping[str, Any], stack: Optional[str] = None) -> StackSettings:
    """Validate a plain mapping (camelCase keys) into StackSettings, or raise ConfigError.

    ``stack`` (the Pulumi stack name) lets the names derived from it be checked too."""
    return schema.validate(data, stack, TRAINER_RULES)


def settings_from_config(values: Mapping[str, Any], stack: Optional[str] = None) -> StackSettings:
    """StackSettings from a whole stack config ("namespace:key" -> value), or raise ConfigError
    (see rlinf_eks.config.pulumi_config.settings_from_config)."""
    return pulumi_config.settings_from_config(values, stack, TRAINER_RULES)


def from_pulumi_config() -> StackSettings:
    """Read the stack's settings from the running Pulumi program's whole config (so that a
    misspelt top-level key fails `pulumi up` too, instead of being ignored)."""
    return pulumi_config.from_pulumi_config(TRAINER_RULES)
