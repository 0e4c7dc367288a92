"""Which logged metric goes on which figure, and the numbers of the terminal summary.

The tags are those the pinned trainers log (read at their sources):

- RLinf v0.3 embodied runner: ``env/<key>`` for the training rollouts' episode info
  (``success_once``, ``return``, ``episode_len``; embodied_runner.py:371-393), ``eval/<key>`` for
  evaluations, ``train/actor/policy_loss``, ``train/critic/value_loss`` and friends (losses.py),
  ``time/step`` and ``time/<phase>`` (its ScopedTimer, embodied_runner.py:497-526);
- RLinf v0.3 reasoning runner: ``rollout/<key>`` (rewards), ``actor/training/<key>`` (losses),
  ``time/<phase>`` (reasoning_runner.py:600-625);
- veRL in SimpleVLA-RL: ``val/test_score/<suite>`` (validation success rate),
  ``train_verify_score/<suite>`` (the rollouts' success rate), ``critic/score/mean`` and
  ``critic/rewards/mean``, ``actor/pg_loss``, ``actor/entropy_loss``, ``timing/<phase>``
  (ray_trainer.py:336-389, 500-688; dp_actor.py:332-333). It logs no step time: the wall time
  between consecutive training lines stands for it.

A metric matching none of the groups is listed on the page with its last value, not plotted.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Optional

from .logs import STEP_TIME_FROM_LOG, RunLogs, Series

__all__ = ["GROUPS", "Group", "Summary", "grouped", "headline_success", "summarise"]


@dataclass(frozen=True)
class Group:
    name: str
    title: str
    ylabel: str
    pattern: re.Pattern[str]


GROUPS: tuple[Group, ...] = (
    Group(
        "success", "Success rate", "success rate",
        re.compile(r"^(env|eval|rollout)/success[^/]*$|^val/test_score/[^/]+$|^train_verify_score/[^/]+$|^(rollout|eval)/(accuracy|acc)[^/]*$"),
    ),
    Group(
        "reward", "Reward and return", "reward",
        re.compile(r"^(env|eval)/return$|^critic/(score|rewards)/mean$|^rollout/(rewards?|reward_scores?)(_mean)?$"),
    ),
    Group("loss", "Losses", "loss", re.compile(r"(^|/)[a-z_]*loss[a-z_]*$")),
    Group("step_time", "Time per step", "seconds", re.compile(r"^time/step$|^" + re.escape(STEP_TIME_FROM_LOG) + "$")),
    Group("gpu", "GPU utilisation", "percent", re.compile(r"gpu[^/]*util", re.I)),
)  # fmt: skip
"""In order; a metric joins the first group it matches."""

# the success rate the summary quotes, best first, per trainer's tags
_HEADLINE = ("eval/success_once", "env/success_once", "val/test_score/all", "train_verify_score/all", "rollout/accuracy")
MAX_LINES = 8
"""Lines drawn per figure; the rest are listed, not drawn."""


def grouped(logs: RunLogs) -> tuple[dict[str, list[Series]], list[Series]]:
    """The series of each group (in tag order, at most MAX_LINES) and those of no group."""
    groups: dict[str, list[Series]] = {g.name: [] for g in GROUPS}
    other: list[Series] = []
    for tag in sorted(logs.series):
        series = logs.series[tag]
        group = next((g for g in GROUPS if g.pattern.search(tag)), None)
        (groups[group.name] if group else other).append(series)
    for name, members in groups.items():
        # the means before the min/max and per-rank variants
        members.sort(key=lambda s: (not s.tag.endswith(("/all", "mean", "success_once", "/step", "policy_loss", "pg_loss")), s.tag))
        overflow = members[MAX_LINES:]
        groups[name] = members[:MAX_LINES]
        other.extend(overflow)
    return {k: v for k, v in groups.items() if v}, other


def headline_success(logs: RunLogs) -> Optional[Series]:
    for tag in _HEADLINE:
        if tag in logs.series:
            return logs.series[tag]
    return None


@dataclass(frozen=True)
class Summary:
    last_step: Optional[int]
    success_tag: Optional[str]
    best_success: Optional[float]
    best_step: Optional[int]
    step_time_tag: Optional[str]
    median_step_seconds: Optional[float]
    last_step_seconds: Optional[float]
    metric_count: int


def summarise(logs: RunLogs) -> Summary:
    success = headline_success(logs)
    best = best_step = None
    if success is not None:
        # the earliest step reaching the best value
        best = max(success.values)
        best_step = min(step for step, value in success.points.items() if value == best)
    step_time = logs.series.get("time/step") or logs.series.get(STEP_TIME_FROM_LOG)
    median = last = None
    if step_time is not None:
        median = statistics.median(step_time.values)
        last = step_time.values[-1]
    return Summary(
        last_step=logs.last_step,
        success_tag=success.tag if success else None,
        best_success=best,
        best_step=best_step,
        step_time_tag=step_time.tag if step_time else None,
        median_step_seconds=median,
        last_step_seconds=last,
        metric_count=len(logs.series),
    )
