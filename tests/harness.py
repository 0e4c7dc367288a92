"""Test helpers: run a component or a whole stack under Pulumi mocks and query what it registered.
The machinery is the library's public rlinf_eks.testing (running a program under the mocks, the
lookups one, of_type, has_inputs); this module adds this project's own: its stacks, a minimal
valid config, the shared data folder.

    run = run_component(lambda: Network("rlinf", settings={}, gpu_az="us-east-1a", cluster_name="c", tags={}))
    vpc = one(run, "aws:ec2/vpc:Vpc")
    assert has_inputs(vpc, {"enableDnsHostnames": True})

Every run gets a fresh event loop, reset settings and its whole config replaced.
"""

from __future__ import annotations

import copy
import functools
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from rlinf_eks import config as config_mod
from rlinf_eks.loading import parse
from rlinf_eks.offline.outputs.plan import Plan, make_plan
from rlinf_eks.offline.engine.stack_config import load
from rlinf_eks.testing import Registered, has_inputs, of_type, one, register
from tests.fetch_shared_data import SHARED_ENV, shared_folder

__all__ = [
    "MINIMAL", "PROJECT_STACKS", "REQUIRE_SHARED_ENV", "must_run_in_ci", "ROOT", "Registered", "SHARED", "STACKS", "has_inputs", "manifests", "of_type", "one",
    "plan_stack", "require_shared", "run_component", "settings", "shared_required", "with_shared_filesystem",
]  # fmt: skip

ROOT = Path(__file__).resolve().parents[1]
SHARED = shared_folder()
"""The reference data's folder: $RLINF_EKS_SHARED, else ../shared beside the clone; filled, at the
pinned commits, by ``python -m tests.fetch_shared_data`` (tests/data/shared-data.json)."""
REQUIRE_SHARED_ENV = "RLINF_EKS_REQUIRE_SHARED"
"""Set to 1 (CI, with ../shared checked out) so that tests needing the shared data fail when it is
missing instead of skipping."""
PROJECT_STACKS = (
    "autoscaled",
    "capacity-block",
    "experiment-embodied",
    "experiment-reasoning",
    "multi-node",
    "multi-node-kuberay",
    "platform",
    "quickstart",
    "single-node",
    "vllm-rollout",
)
"""The project's own stacks (stacks/Pulumi.<stack>.yaml): the one list every whole-stack test, the
golden plans and the benchmark read. A new stack of the project is one line here (and its golden
plans, recorded with RLINF_EKS_UPDATE_SNAPSHOTS=1); tests/test_repository_layout.py fails, naming
this list, when a tracked stack file is missing from it. A stack file of your own beside them
(README, steps 1-4) is yours: no test plans it or writes a golden plan for it."""
ALL_STACKS = sorted(PROJECT_STACKS)
"""The project's stacks, sorted (PROJECT_STACKS)."""


def _role(stack: str) -> str:
    from rlinf_eks.experiment import role_of

    return role_of(load(ROOT, stack).values)


ROLES = {stack: _role(stack) for stack in ALL_STACKS}
STACKS = [s for s in ALL_STACKS if ROLES[s] == "both"]
"""The stacks that are a cluster with its run (platform.role both): what every whole-stack test checks."""
PLATFORM_STACKS = [s for s in ALL_STACKS if ROLES[s] == "platform"]
EXPERIMENT_STACKS = [s for s in ALL_STACKS if ROLES[s] == "experiment"]



@functools.lru_cache(maxsize=None)
def dialect_of(stack: str) -> str:
    """The trainer dialect a project stack's settings have, read without planning it (for
    parametrizing at collection, where a plan would hold every xdist worker's start behind it): a
    stack with its run validates alone; an experiment, validated only on its platform's outputs,
    names its dialect in its own file."""
    from rlinf_eks.loading import settings_from_config

    values = load(ROOT, stack).values
    if ROLES[stack] != "experiment":
        return settings_from_config(values, stack).workload.trainer.dialect
    try:
        return values["rlinf-eks:workload"]["trainer"]["dialect"]
    except (KeyError, TypeError):
        raise AssertionError(f"experiment stack {stack} names no workload.trainer.dialect: dialect_of cannot read it without its platform") from None


MINIMAL = {"workload": {"image": "example.com/rlinf:test"}, "cluster": {"deployFromVpc": True}}


def shared_required() -> bool:
    """Whether RLINF_EKS_REQUIRE_SHARED says the shared data must be there."""
    return os.environ.get(REQUIRE_SHARED_ENV, "").strip().lower() in ("1", "true", "yes")


def must_run_in_ci() -> bool:
    """Whether this run is CI's, where a test that needs a tool CI installs (Chromium) must fail
    rather than skip: .ci/run says so through the same variable as for the shared data."""
    return shared_required()


def require_shared(path: Path, what: str) -> Path:
    """``path`` below ../shared, or skip the test when it is absent; with RLINF_EKS_REQUIRE_SHARED=1
    fail instead, so a CI run that lost the shared data cannot pass by skipping what it checks."""
    import pytest

    if path.exists():
        return path
    message = (f"{what} not found at {path}: the reference data is absent; `python -m tests.fetch_shared_data` "
               f"fetches it at its pinned commits (internet), or set {SHARED_ENV} to a copy")
    if shared_required():
        pytest.fail(f"{message}, and {REQUIRE_SHARED_ENV} says it must be there")
    pytest.skip(message)


def pending_shared(path: Path, what: str, source: str) -> Path:
    """``path`` below ../shared for data the shared folder does not hold yet (it is asked for in a
    closing note): skip naming ``source``, where it comes from, even under RLINF_EKS_REQUIRE_SHARED,
    since no CI run has it yet; once it is there the test runs, and a later loss fails it as
    :func:`require_shared` would (switch the test to that then)."""
    import pytest

    if path.exists():
        return path
    pytest.skip(f"{what} is not among the shared data yet ({path}): {source} belongs there")


BEFORE_1_28_ENDED = datetime(2025, 1, 1, tzinfo=timezone.utc)
"""A time when EKS still created clusters of every version the settings accept (1.28's extended
support ended 2025-11-26): for the tests of how an older cluster's objects are rendered."""


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


def run_component(program: Callable[[], Any], config: Mapping[str, str] | None = None, stack: str = "test") -> Registered:
    """Run ``program`` (which creates components) under mocks; return what was registered
    (rlinf_eks.testing.register in this project's namespace)."""
    return register(program, project=config_mod.PROJECT, stack=stack, config=config)


PLAN_CACHE_ENV = "RLINF_EKS_TEST_PLAN_CACHE"
"""A directory the test session's plans are shared through (tests/conftest.py makes one per session,
before the xdist workers start, and removes it at the end): each plan is computed by one worker."""


@functools.lru_cache(maxsize=64)
def plan_stack(stack: str, *sets: str) -> Plan:
    """The offline plan of a stack file, with ``--set`` edits (cached: treat it as read-only). An
    experiment is planned on its platform's plan (the stack file platform.stack names, planned
    first), as ``python -m rlinf_eks plan PLATFORM`` then ``plan EXPERIMENT`` do.

    Within a test session the plans are shared between the xdist workers through the directory
    RLINF_EKS_TEST_PLAN_CACHE names: the first worker to ask for a plan computes it under a file
    lock and pickles it there, the others load it. The sources cannot change within a session, so
    the stack and the edits are the whole key."""
    return _shared(repr(("plan_stack", stack, sets)), lambda: _make_stack_plan(stack, sets))


def _shared(key: str, compute: Callable[[], Plan]) -> Plan:
    """``compute()``, made once per test session for ``key`` (RLINF_EKS_TEST_PLAN_CACHE's directory,
    under a file lock), a fresh copy (unpickled) for every other caller; computed here without one."""
    directory = os.environ.get(PLAN_CACHE_ENV)
    if not directory or not os.path.isdir(directory):
        return compute()
    import fcntl
    import hashlib
    import pickle

    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    path = Path(directory, f"{name}.pickle")
    with open(Path(directory, f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())
        plan = compute()
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(path)
        return plan


def _make_stack_plan(stack: str, sets: tuple[str, ...]) -> Plan:
    from rlinf_eks.offline.engine.stack_config import Unset

    # "--unset KEY" as on the command line; every other edit is a --set KEY=VALUE
    edits = [Unset(item[len("--unset "):]) if item.startswith("--unset ") else item for item in sets]
    config = load(ROOT, stack, edits)
    platform = platform_of(config)
    return make_plan(config, platform) if platform is not None else shared_make_plan(config)


# --- the plans the command line makes in-process ----------------------------------------------------
#
# About 120 tests run the command line in-process (``main(["plan", STACK, ...])``) to read what it
# prints and writes; many plan the same stack with the same settings (single-node about 20 times in
# a session), each 0.15-0.3 CPU-s. A plan is a pure function of the loaded stack config, the clock
# and the sources, so the command's ``make_plan`` is shared through the session's plan cache
# (tests/conftest.py installs ``cli_make_plan`` in its place), keyed by the loaded config (what
# the stack file and the --set edits made of it), the clock and the working directory; everything
# else the command does (arguments, the output folder's checks, the refusals, what it writes and
# prints, the exit status) still runs in the test. It is made fresh where a test has changed
# anything a plan could read (a monkeypatch other than the clock, an environment variable, sys.path)
# or the plan is an experiment's (its platform's plan is a folder of the test's).

_MAKE_PLAN = make_plan  # the library's own, bound at import
_TEST_MONKEYPATCH: list = []
"""The running test's monkeypatch (tests/conftest.py's _fixed_clock sets it)."""


def _untouched() -> bool:
    """The running test has changed nothing a plan reads, but the clock (part of the key)."""
    if not _TEST_MONKEYPATCH:
        return False
    patched = _TEST_MONKEYPATCH[-1]
    from rlinf_eks import loading

    return (
        all(target is loading and name == "clock" for target, name, _ in patched._setattr)
        and not patched._setitem and patched._savesyspath is None
    )


def shared_make_plan(stack_config: Any, platform: Any = None) -> Plan:
    """``make_plan(stack_config, platform)``, shared within the session where the running test has
    changed nothing a plan reads (see above)."""
    if platform is not None or not _untouched():
        return _MAKE_PLAN(stack_config, platform)
    from rlinf_eks import loading

    key = repr(("make_plan", stack_config.project, stack_config.stack, sorted(stack_config.flat().items()),
                sorted(stack_config.secret_keys), list(stack_config.problems), loading.clock().isoformat(), os.getcwd()))  # fmt: skip
    return _shared(key, lambda: _MAKE_PLAN(stack_config, platform))


def platform_of(config: Any) -> Any:
    """The PlatformPlan an experiment's config reads (its platform stack file's plan), else None."""
    from rlinf_eks.experiment import platform_stack, role_of
    from rlinf_eks.offline.outputs.plan import platform_plan

    if role_of(config.values) != "experiment":
        return None
    name = platform_stack(config.values).rsplit("/", 1)[-1]
    return platform_plan(plan_stack(name).to_json(), ROOT / "build" / name)


def manifests(plan: Plan) -> dict[str, dict[str, Any]]:
    return plan.manifests()


# A fake trainer that checkpoints every 2 s: trains 1 s, then saves global_step_N under
# <argv[1]>/checkpoints in 1 s (four shards), logging to argv[2] "writing N T" once the first shard
# is there and "saved N T" once the save returned (T: Unix time); SIGINT ends it with status 130.
SAVING_EVERY_2S = """
import os, sys, time
run, log = sys.argv[1], open(sys.argv[2], "a", buffering=1)
step = 0
try:
    while True:
        time.sleep(1.0)
        step += 1
        shards = os.path.join(run, "checkpoints", f"global_step_{step}", "actor")
        os.makedirs(shards)
        for rank in range(4):
            open(os.path.join(shards, f"rank_{rank}.pt"), "w").write("x" * 1000)
            if rank == 0:
                log.write(f"writing {step} {time.time():.3f}\\n")
            time.sleep(0.25)
        log.write(f"saved {step} {time.time():.3f}\\n")
except KeyboardInterrupt:
    log.write(f"KeyboardInterrupt {step} {time.time():.3f}\\n")
    sys.exit(130)
"""


def saves_logged(log_text: str) -> tuple[dict[int, float], dict[int, float]]:
    """({step: when its write began}, {step: when its save returned}) from SAVING_EVERY_2S's log."""
    began: dict[int, float] = {}
    saved: dict[int, float] = {}
    for line in log_text.splitlines():
        what, step, when = line.split()
        if what in ("writing", "saved"):
            (began if what == "writing" else saved)[int(step)] = float(when)
    return began, saved


def cli_plan(monkeypatch: Any, capsys: Any, tmp_path: Path, stack: str, *sets: str) -> tuple[int, str]:
    """``python -m rlinf_eks plan STACK --quiet --out tmp_path/out --set ...`` in this process, as a
    user types it: its exit status and standard error (which never holds a traceback)."""
    from rlinf_eks.__main__ import main

    monkeypatch.chdir(ROOT)
    argv = ["plan", stack, "--quiet", "--out", str(tmp_path / "out")]
    for s in sets:
        argv += ["--set", s]
    status = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err
