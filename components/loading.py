"""The loading step, the single way in: a stack's settings from a mapping or from Pulumi config.

It sits above config and trainers (both below it, neither imports it):

1. validate every section of the stack by itself (rlinf_eks.config.validate_sections);
2. run the rule table, skipping each rule that reads a section which failed: config's stack
   rules, the trainers' rules (rollout backend, world sizes), config's GPU node rules, then the
   queue's (rlinf_eks.quota: a run that can never fit the pool), the staged model's volume
   (rlinf_eks.model_size: a model larger than the emptyDir it is staged into), then the storage budget's
   (rlinf_eks.storage_budget: a run whose checkpoints cannot fit its run directory's storage);
3. compare the times that must lie ahead (a Capacity Block's) with ``clock()`` or ``now``;
4. raise one ConfigError with every problem, or return StackSettings.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Optional

from .config import (
    NODE_RULES,
    STACK_RULES,
    ConfigError,
    StackRule,
    StackSettings,
    broken_rules,
    capacity_block_time_problems,
    pulumi_config,
    validate_sections,
)
from .config.eks_versions import version_problems
from .model_size import MODEL_VOLUME_RULES
from .quota import QUEUE_RULES
from .storage_budget import STORAGE_RULES
from .trainers import TRAINER_RULES

RULES: tuple[StackRule, ...] = (*STACK_RULES, *TRAINER_RULES, *NODE_RULES, *QUEUE_RULES, *MODEL_VOLUME_RULES, *STORAGE_RULES)
"""Every cross-section rule, in the order its problems are reported."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


clock: Callable[[], datetime] = utc_now
"""The time a stack is loaded at, for the rules that compare with it (a Capacity Block already
past). Tests set it (or pass ``now``) so that none depends on today's date."""


def parse(data: Mapping[str, Any], stack: Optional[str] = None, *, now: Optional[datetime] = None) -> StackSettings:
    """Validate a plain mapping (camelCase keys) into StackSettings, or raise ConfigError.

    ``stack`` (the Pulumi stack name) lets the names derived from it be checked too; ``now``
    (default: ``clock()``) is the time the Capacity Block's times are compared with."""
    sections = validate_sections(data)
    problems = sections.problems + broken_rules(RULES, sections, stack)
    if "gpuNodes" not in sections.failed:
        problems += capacity_block_time_problems(sections.settings.gpu_nodes, now or clock())
    if "cluster" not in sections.failed:
        cluster = sections.settings.cluster
        problems += version_problems(cluster.kubernetes_version, not cluster.existing, now or clock())
    if problems:
        raise ConfigError(problems)
    return sections.settings


def settings_from_config(values: Mapping[str, Any], stack: Optional[str] = None, *, now: Optional[datetime] = None) -> StackSettings:
    """StackSettings from a whole stack config ("namespace:key" -> value; objects as JSON text, as
    the engine passes them, or already structured), or raise ConfigError.

    Keys of other namespaces (aws:profile, kubernetes:context, ...) belong to providers and are
    left alone; an unknown key of this project's namespace is a typo and is rejected (its problem
    comes first)."""
    data, problems = pulumi_config.stack_data(values)
    try:
        settings = parse(data, stack, now=now)
    except ConfigError as err:
        raise ConfigError(problems + err.problems) from None
    if problems:
        raise ConfigError(problems)
    return settings


def from_pulumi_config() -> StackSettings:
    """Read the stack's settings from the running Pulumi program's whole config (so that a
    misspelt top-level key fails `pulumi up` too, instead of being ignored), and warn (pulumi.log)
    of every secret key given as a plain value."""
    values, stack = pulumi_config.running_stack_config()
    settings = settings_from_config(values, stack)
    warn_plain_secrets(values)
    return settings


def warn_plain_secrets(values: Mapping[str, Any]) -> None:
    """Warn (pulumi.log) of every secret key of the running stack given as a plain value."""
    import pulumi

    for warning in pulumi_config.plain_secret_warnings(values, pulumi_config.running_secret_keys().__contains__):
        pulumi.log.warn(warning)
