"""Test helpers: run a component or a whole stack under Pulumi mocks and query what it registered.

    run = run_component(lambda: Network("rlinf", settings={}, gpu_az="us-east-1a", cluster_name="c", tags={}))
    vpc = one(run, "aws:ec2/vpc:Vpc")
    assert has_inputs(vpc, {"enableDnsHostnames": True})

Every run gets a fresh event loop, reset settings and its whole config replaced.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from rlinf_eks import config as config_mod
from rlinf_eks.loading import parse
from rlinf_eks.offline import engine
from rlinf_eks.offline.plan import Plan, make_plan
from rlinf_eks.offline.stack_config import available_stacks, load

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REQUIRE_SHARED_ENV = "RLINF_EKS_REQUIRE_SHARED"
"""Set to 1 (CI, with ../shared checked out) so that tests needing the shared data fail when it is
missing instead of skipping."""
STACKS = available_stacks(ROOT)

MINIMAL = {"workload": {"image": "example.com/rlinf:test"}, "cluster": {"deployFromVpc": True}}


def shared_required() -> bool:
    """Whether RLINF_EKS_REQUIRE_SHARED says the shared data must be there."""
    return os.environ.get(REQUIRE_SHARED_ENV, "").strip().lower() in ("1", "true", "yes")


def require_shared(path: Path, what: str) -> Path:
    """``path`` below ../shared, or skip the test when it is absent; with RLINF_EKS_REQUIRE_SHARED=1
    fail instead, so a CI run that lost the shared data cannot pass by skipping what it checks."""
    import pytest

    if path.exists():
        return path
    message = f"{what} not found at {path} (the shared folder is absent)"
    if shared_required():
        pytest.fail(f"{message}, and {REQUIRE_SHARED_ENV} says it must be there")
    pytest.skip(message)


def settings(**sections: Any) -> config_mod.StackSettings:
    """StackSettings from camelCase sections, on top of a minimal valid config."""
    data = copy.deepcopy(MINIMAL)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse(data)


def with_shared_filesystem(s: config_mod.StackSettings, shared: bool) -> config_mod.StackSettings:
    """``s`` with ``storage.sharedFilesystem.enabled`` set to ``shared`` (``s`` itself when it
    already agrees): RlinfTraining takes a claim exactly when its settings use the shared
    filesystem. Not validated again, so that a multi-node run without it (which the stack rules
    refuse) still renders, for the tests of the node-local layout."""
    if s.shared_filesystem == shared:
        return s
    fs = s.storage.shared_filesystem.model_copy(update={"enabled": shared})
    return s.model_copy(update={"storage": s.storage.model_copy(update={"shared_filesystem": fs})})


class Registered(list):
    """The resources a run registered, as plan.json dicts."""

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self if r["type"] == type_]


def run_component(program: Callable[[], Any], config: Mapping[str, str] | None = None, stack: str = "test") -> Registered:
    """Run ``program`` (which creates components) under mocks; return what was registered."""

    def wrapped() -> dict[str, Any]:
        program()
        return {}

    run = engine.run(wrapped, project=config_mod.PROJECT, stack=stack, config=config or {})
    return Registered(r.to_json() for r in run.registrations)


PLAN_CACHE_ENV = "RLINF_EKS_TEST_PLAN_CACHE"
"""A directory the test session's plans are shared through (tests/conftest.py makes one per session,
before the xdist workers start, and removes it at the end): each plan is computed by one worker."""


@functools.lru_cache(maxsize=64)
def plan_stack(stack: str, *sets: str) -> Plan:
    """The offline plan of a stack file, with ``--set`` edits (cached: treat it as read-only).

    Within a test session the plans are shared between the xdist workers through the directory
    RLINF_EKS_TEST_PLAN_CACHE names: the first worker to ask for a plan computes it under a file
    lock and pickles it there, the others load it. The sources cannot change within a session, so
    the stack and the edits are the whole key."""
    directory = os.environ.get(PLAN_CACHE_ENV)
    if not directory or not os.path.isdir(directory):
        return make_plan(load(ROOT, stack, list(sets)))
    import fcntl
    import hashlib
    import pickle

    key = hashlib.sha256(repr((stack, sets)).encode()).hexdigest()[:32]
    path = Path(directory, f"{key}.pickle")
    with open(Path(directory, f"{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())
        plan = make_plan(load(ROOT, stack, list(sets)))
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(path)
        return plan


def of_type(resources: Plan | list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    items = resources.resources if isinstance(resources, Plan) else resources
    return [r for r in items if r["type"] == type_]


def one(resources: Plan | list[dict[str, Any]], type_: str, name: str | None = None) -> dict[str, Any]:
    """The single resource of ``type_`` (and ``name``, if given); fails loudly otherwise."""
    found = [r for r in of_type(resources, type_) if name is None or r["name"] == name]
    names = [r["name"] for r in of_type(resources, type_)]
    assert len(found) == 1, f"expected one {type_} named {name!r}, found {len(found)} among {names}"
    return found[0]


def has_inputs(resource: dict[str, Any], partial: Any) -> bool:
    """True when ``partial`` is contained in the resource's inputs (dicts by key, lists by position)."""
    return _contains(resource["inputs"], partial)


def _contains(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(_contains(a, e) for a, e in zip(actual, expected))
    return actual == expected


def manifests(plan: Plan) -> dict[str, dict[str, Any]]:
    return plan.manifests()
