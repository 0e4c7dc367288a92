"""The loading step, the single way in: a stack's settings from a mapping or from Pulumi config.

It sits above config and trainers (both below it, neither imports it):

1. validate every section of the stack by itself (rlinf_eks.config.validate_sections);
2. run the rule table, skipping each rule that reads a section which failed: config's stack
   rules, the trainers' rules (rollout backend, world sizes), config's GPU node rules, then the
   queue's (rlinf_eks.quota: a run that can never fit the pool);
3. raise one ConfigError with every problem, or return StackSettings.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .config import NODE_RULES, STACK_RULES, ConfigError, StackRule, StackSettings, broken_rules, pulumi_config, validate_sections
from .quota import QUEUE_RULES
from .trainers import TRAINER_RULES

RULES: tuple[StackRule, ...] = (*STACK_RULES, *TRAINER_RULES, *NODE_RULES, *QUEUE_RULES)
"""Every cross-section rule, in the order its problems are reported."""


def parse(data: Mapping[str, Any], stack: Optional[str] = None) -> StackSettings:
    """Validate a plain mapping (camelCase keys) into StackSettings, or raise ConfigError.

    ``stack`` (the Pulumi stack name) lets the names derived from it be checked too."""
    sections = validate_sections(data)
    problems = sections.problems + broken_rules(RULES, sections, stack)
    if problems:
        raise ConfigError(problems)
    return sections.settings


def settings_from_config(values: Mapping[str, Any], stack: Optional[str] = None) -> StackSettings:
    """StackSettings from a whole stack config ("namespace:key" -> value; objects as JSON text, as
    the engine passes them, or already structured), or raise ConfigError.

    Keys of other namespaces (aws:profile, kubernetes:context, ...) belong to providers and are
    left alone; an unknown key of this project's namespace is a typo and is rejected (its problem
    comes first)."""
    data, problems = pulumi_config.stack_data(values)
    try:
        settings = parse(data, stack)
    except ConfigError as err:
        raise ConfigError(problems + err.problems) from None
    if problems:
        raise ConfigError(problems)
    return settings


def from_pulumi_config() -> StackSettings:
    """Read the stack's settings from the running Pulumi program's whole config (so that a
    misspelt top-level key fails `pulumi up` too, instead of being ignored)."""
    values, stack = pulumi_config.running_stack_config()
    return settings_from_config(values, stack)
