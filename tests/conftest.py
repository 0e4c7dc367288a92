"""Process state every test starts from."""

import gc
import os
import shutil
import signal
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

# Bytecode caches, even where PYTHONDONTWRITEBYTECODE is set (some container images set it; this
# machine does). Every process of the suite (the xdist workers, the controller) imports about a
# thousand modules, and pytest rewrites the asserts of every test module and of every module of a
# pytest plugin's distribution (all of hydra and hypothesis): without caches each process parses,
# rewrites and compiles them anew (collecting the suite: 4.2 CPU-s, 1.6 with the caches). Written
# to the usual __pycache__ folders (git-ignored), read by the next run and by the Python
# subprocesses the tests start (which keep the variable: they read caches, they write none).
sys.dont_write_bytecode = False

# Before any test module imports an SDK: the SDKs' generated packages load only the modules used
# (rlinf_eks/offline/engine/sdk_imports.py, installed on importing rlinf_eks.offline), as in the plan.
import rlinf_eks.offline  # noqa: F401

from tests import kube_apiserver, warm_cli

PLAN_CACHE_ENV = "RLINF_EKS_TEST_PLAN_CACHE"  # tests/harness.py plan_stack

# A clean run prints nothing alarming. cel-python's Environment() (tests/schemas.py: the CRDs' CEL
# rules) sets the recursion limit to 2500 each time it is built; built first inside a property test,
# that made Hypothesis warn that it "will not reset the recursion limit". Raised here once, before any
# test, it never changes during one.
CELPY_RECURSION_LIMIT = 2500  # celpy/__init__.py, Environment.__init__
sys.setrecursionlimit(max(sys.getrecursionlimit(), CELPY_RECURSION_LIMIT))
# No example database: Hypothesis flushes it from a background thread that a finalizer joins at
# interpreter exit, where a worker interrupted while ending printed "Exception ignored ...
# KeyboardInterrupt". A failing example is printed with what reproduces it. (.hypothesis/ still
# holds Hypothesis's constants cache: git-ignored.)
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("rlinf-eks", database=None)
_hypothesis_settings.load_profile("rlinf-eks")


def pytest_configure(config):
    # One directory per session (made by the controller before the xdist workers start, so they
    # inherit it) through which the workers share the stacks' plans: tests/harness.py plan_stack.
    if not hasattr(config, "workerinput") and not os.environ.get(PLAN_CACHE_ENV):
        config._rlinf_eks_plan_cache = tempfile.mkdtemp(prefix="rlinf-eks-test-plans-")
        os.environ[PLAN_CACHE_ENV] = config._rlinf_eks_plan_cache
    # The documentation's blocks run `python -m rlinf_eks` forked from one warm server per session
    # (tests/warm_cli.py), started here, before the workers, and waited for below.
    if not hasattr(config, "workerinput") and not os.environ.get(warm_cli.SESSION_ENV):
        config._rlinf_eks_warm_cli = tempfile.mkdtemp(prefix="rlinf-eks-warm-cli-")
        config._rlinf_eks_warm_server = warm_cli.start(Path(config._rlinf_eks_warm_cli))
        os.environ[warm_cli.SESSION_ENV] = config._rlinf_eks_warm_cli
    # The real API server's tier (tests/kube_apiserver.py): one server per session, started by the
    # first worker that asks, in a folder made here so that every worker finds it; stopped below.
    if not hasattr(config, "workerinput") and not os.environ.get(kube_apiserver.SESSION_DIR_ENV) and kube_apiserver.assets():
        config._rlinf_eks_kube_dir = tempfile.mkdtemp(prefix=kube_apiserver.kube_processes.SESSION_PREFIX)
        os.environ[kube_apiserver.SESSION_DIR_ENV] = config._rlinf_eks_kube_dir
        os.environ[kube_apiserver.SESSION_PID_ENV] = str(os.getpid())
    # A container's PID 1 starts with every signal at its default disposition. A test run started
    # in the background of a non-interactive shell (as CI may start it) inherits SIGINT and SIGQUIT
    # *ignored*, and bash cannot un-ignore a signal that was ignored when it started, so the launch
    # scripts would run their trainer with SIGINT ignored, as no pod ever does. A caught signal
    # resets to its default across exec, so catching them here gives every script the tests start
    # the dispositions of a pod. (Runs in every xdist worker too.)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, lambda *_: None)


# --- the order the tests start in ------------------------------------------------------------------
#
# The suite waits more than it computes (real Ray starting, scripts waiting on their timeouts), so it
# runs with more workers than cores and work stealing (`-n 4 --dist worksteal`, the README's
# command). Worksteal first hands each worker one contiguous chunk of the collection; a worker that
# runs dry steals the tail of the longest queue. Left in file order, the slow tests sit in one chunk
# and run one after another on one worker while the others go idle. So the collection is laid out
# as the chunks worksteal will cut (every worker computes the same order from the same
# collection): the known-slow units longest first, each to the chunk with the least slow time so far,
# at the head of its chunk; the rest keep their order. Only the order changes: every test runs.
#
# Units that mostly wait (WAITS: Ray starting, scripts run against their time bounds) head the first
# half of the chunks and the units that compute head the other half. Spread over every chunk, the
# waiting units came up on all four workers at once, 50-80 s into the run, and left both cores about
# two-thirds idle for 20 s; apart, two workers wait while two compute.
#
# Seconds each takes on an idle 2-core machine (`pytest --durations`), for the balance only. A unit
# is one test, or a whole module whose tests share an expensive module-scoped fixture (kept on one
# worker so the fixture runs once).
SLOW_TESTS = {
    "tests/test_launch_real_ray.py::test_given_two_pods_": 11,
    "tests/test_launch_real_ray.py::test_given_a_failing_trainer_": 12,
    "tests/test_launch_real_ray.py::test_given_a_training_head_": 8,
    "tests/test_launch_real_ray.py::test_given_a_running_head_": 8,
    "tests/test_launch_real_ray.py::test_given_a_missing_worker_": 7,
    "tests/test_launch_real_ray.py::test_given_a_head_waiting_": 6,
    "tests/test_launch_real_ray.py::test_given_a_missing_head_": 3,
    "tests/test_properties.py::test_any_valid_config_plans_": 10,
    # 7-9 processes of the command each, interrupted at moments spread over its run (a report's is the longest)
    "tests/test_interrupts.py::test_ctrl_c_at_any_moment_of_a_report_": 10,
    "tests/test_interrupts.py::test_ctrl_c_at_any_moment_of_a_plan_": 7,
    "tests/test_interrupts.py::test_ctrl_c_at_any_moment_of_verify_dry_run_": 4,
    # each stack's edits planned in-process (the suite's plan cache holds none of them)
    "tests/test_diff_edits.py::test_each_edit_gives_the_verdicts_a_real_preview_would": 3,
    "tests/test_aws_models.py::test_policy_grammar_problems_are_found": 6,
    "tests/test_fault_fast.py::test_given_a_checkpoint_being_written_when_the_block_ends_": 6,
    "tests/test_fault_fast.py::test_given_a_capacity_block_stop_time_": 5,
    # each of the documentation's offline shell blocks: a process that plans (1-4 s)
    "tests/test_docs.py::test_an_offline_block_runs_as_written": 3,
    # scripts run against their time bounds: they wait (each 1-8 s) more than they compute, so they
    # go early, beside the tests that compute, instead of idling both cores at the end of the run
    "tests/test_workload_scripts.py::test_": 2,
    "tests/test_fault_fast.py::test_": 1.5,
    "tests/test_model_staging.py::test_given_": 0.5,
    # a launcher, its sync sidecar and a trainer pacing 1 s a save over many saves and a restart
    "tests/test_checkpoint_disk.py::test_a_rerun_": 19,
    "tests/test_checkpoint_disk.py::test_a_resuming_run_": 13,
}
WAITS = (
    "tests/test_launch_real_ray.py::",
    "tests/test_workload_scripts.py::",
    "tests/test_fault_fast.py::",
    "tests/test_model_staging.py::",
    "tests/test_checkpoint_disk.py::",
)
"""The known-slow units that wait far more than they compute (see above)."""
SLOW_MODULES = {
    "tests/test_checkov.py": 18,  # checkov_failures: one checkov run over every stack
    "tests/test_shellcheck.py": 5,  # stack_scripts: every stack's rendered scripts
}
if os.environ.get("RLINF_EKS_KUBE_ASSETS") or os.environ.get("KUBEBUILDER_ASSETS"):
    # sim: a kube-apiserver, scheduler and controller manager; without their binaries it skips at once
    SLOW_MODULES["tests/test_verify_sim.py"] = 55


def _slow_seconds(nodeid: str) -> tuple[str, float] | None:
    """The unit a test belongs to and that unit's seconds, or None for a test not known to be slow."""
    for prefix, seconds in SLOW_TESTS.items():
        if nodeid.startswith(prefix):
            return nodeid, seconds
    module = nodeid.split("::", 1)[0]
    if module in SLOW_MODULES:
        return module, SLOW_MODULES[module]
    return None


def worksteal_chunks(total: int, workers: int) -> list[int]:
    """The sizes of the chunks xdist's worksteal scheduler first hands out (check_schedule: each idle
    worker in turn gets what is left divided by the workers left)."""
    sizes, left = [], total
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def waiting_chunks(workers: int) -> int:
    """How many of the first chunks the waiting units head: half of them (all of them for one)."""
    return max(1, workers // 2) if workers > 1 else 1


def slow_first(items: list, workers: int) -> list:
    """``items`` laid out in ``workers`` chunks (worksteal_chunks), each headed by its share of the
    known-slow units: the waiting ones (WAITS) in the first ``waiting_chunks``, the computing ones in
    the rest, each kind balanced by its seconds over its chunks."""
    units: dict[str, list] = {}
    seconds: dict[str, float] = {}
    rest = []
    for item in items:
        slow = _slow_seconds(item.nodeid)
        if slow is None:
            rest.append(item)
        else:
            units.setdefault(slow[0], []).append(item)
            seconds[slow[0]] = slow[1]
    sizes = worksteal_chunks(len(items), workers)
    heads: list[list] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    split = waiting_chunks(len(sizes))
    for unit in sorted(units, key=lambda u: (-seconds[u], u)):
        kind = range(split) if unit.startswith(WAITS) or len(sizes) == 1 else range(split, len(sizes))
        # the least loaded chunk of its kind that still has room for the whole unit
        fits = [i for i in kind if len(heads[i]) + len(units[unit]) <= sizes[i]] or [min(kind, key=lambda j: load[j])]
        i = min(fits, key=lambda j: (load[j], j))
        heads[i] += units[unit]
        load[i] += seconds[unit]
    ordered, rest_at = [], 0
    for head, size in zip(heads, sizes):
        take = max(0, size - len(head))
        ordered += head + rest[rest_at : rest_at + take]
        rest_at += take
    return ordered + rest[rest_at:]


def pytest_unconfigure(config):
    directory = getattr(config, "_rlinf_eks_plan_cache", None)
    if directory:
        os.environ.pop(PLAN_CACHE_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)
    warm = getattr(config, "_rlinf_eks_warm_cli", None)
    if warm:
        warm_cli.stop(config._rlinf_eks_warm_server)
        os.environ.pop(warm_cli.SESSION_ENV, None)
        shutil.rmtree(warm, ignore_errors=True)
    kube_dir = getattr(config, "_rlinf_eks_kube_dir", None)
    if kube_dir:
        kube_apiserver.stop(kube_apiserver.server_dir(kube_dir))  # already stopped, unless the run broke off
        for env in (kube_apiserver.SESSION_DIR_ENV, kube_apiserver.SESSION_PID_ENV):
            os.environ.pop(env, None)
        shutil.rmtree(kube_dir, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, config):
    # the real API server's cost, once every worker is done with it (stopped here, not at unconfigure,
    # so that its CPU can be told)
    kube_dir = getattr(config, "_rlinf_eks_kube_dir", None)
    summary = kube_dir and kube_apiserver.stop(kube_apiserver.server_dir(kube_dir))
    if summary:
        terminalreporter.write_line(summary)
    elif _without_kube_assets():
        terminalreporter.write_line(f"the real API server tier did not run: {kube_apiserver.HOW_TO_GET}")


KUBE_TIER_FIXTURES = {"kube_api", "kube_apiserver_session"}
KUBE_TIER_MODULES = {"tests/test_verify_sim.py"}  # the simulated cluster: its own server, scheduler and controllers


def _without_kube_assets() -> bool:
    """No binaries named for the real API server's tier (a variable naming a folder without them is
    no reason to leave the tier out: its tests fail, saying so)."""
    return kube_apiserver.assets() is None and not kube_apiserver.misconfigured()


def _leave_out_the_kube_tier(config, items) -> None:
    """Without the binaries the tier's tests are left out (deselected), and the session's summary
    says so in one line with how to get them, rather than a skip line per test."""
    if not _without_kube_assets():
        return
    tier = [i for i in items if KUBE_TIER_FIXTURES & set(getattr(i, "fixturenames", ())) or i.nodeid.split("::")[0] in KUBE_TIER_MODULES]
    if tier:
        config.hook.pytest_deselected(items=tier)
        items[:] = [i for i in items if i not in set(tier)]


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the quick tier's marks come first
def pytest_collection_modifyitems(config, items):
    _leave_out_the_kube_tier(config, items)
    if "slow" in (config.getoption("markexpr", "") or ""):
        from tests.tiers import mark_slow

        mark_slow(items)
    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput["workercount"]) if workerinput else 1
    items[:] = slow_first(items, workers)


# --- the cyclic garbage collector --------------------------------------------------------------------
#
# Most of the suite's CPU is plans made in-process, and a plan allocates hundreds of thousands of
# objects (asyncio tasks, Outputs, the SDKs' args) while the process already holds a large heap: the
# SDK modules, the cached plans. At CPython's default thresholds (700, 10, 10) the collector keeps
# walking that heap: with it, a warm plan costs about 1.6x its CPU without (measured: 12 plans,
# 5.3 CPU-s against 3.3 with the collector off). The plan command turns it off (rlinf_eks.__main__);
# the suite cannot, since thousands of plans' cycles would pile up (0.9 GB for four modules). So once
# collection has imported everything: collect, freeze what is left (imports, fixtures' module state:
# never scanned again), and collect the young generation every GC_YOUNG allocations instead of 700.
# Measured on test_aws_models, test_replacement, test_workload and test_kueue in one process:
# 69.5 CPU-s at the defaults, 60.5 frozen alone, 45.2 frozen with a young threshold of 10,000,
# 43.9 with the collector off; peak memory 638 MB, 646 MB, 916 MB off. Collection stays on:
# objects are freed as before, only less often scanned.
GC_YOUNG = 20_000


def pytest_collection_finish(session):
    # the command line's plans made in-process (main(["plan", ...])) are shared within the session:
    # tests/harness.py shared_make_plan
    from rlinf_eks.offline.outputs import plan as plan_mod
    from tests import harness

    plan_mod.make_plan = harness.shared_make_plan
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
TEST_NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
"""The time every test loads a stack at (rlinf_eks.loading.clock): no test depends on today's date,
so a Capacity Block of a test stays ahead. The example stack's own block is checked against the
real clock by tests/test_config_holes.py."""


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch):
    from rlinf_eks import loading
    from tests import harness

    monkeypatch.setattr(loading, "clock", lambda: TEST_NOW)
    # the command line's in-process plans are shared where the test changed nothing a plan reads
    # (tests/harness.py shared_make_plan reads this monkeypatch's record)
    harness._TEST_MONKEYPATCH.append(monkeypatch)
    yield
    harness._TEST_MONKEYPATCH.remove(monkeypatch)


@pytest.fixture(scope="session")
def cli_python(tmp_path_factory) -> str:
    """The ``python`` a test runs ``[cli_python, "-m", "rlinf_eks", ...]`` with, to read what the
    command prints and writes: the session's warm shim (tests/warm_cli.py), whose ``-m rlinf_eks``
    is a process of its own, forked with the imports done, running the command's entry point with
    the caller's arguments, environment, working directory and standard streams
    (tests/test_warm_cli.py holds it to a fresh interpreter's output, files and exit status); about
    0.8 of the 1.2-1.4 CPU-s of a fresh ``plan`` process are its imports. A test of the process
    itself (its start, signals, a closed or full stream) runs ``sys.executable``."""
    session = os.environ.get(warm_cli.SESSION_ENV)
    if not session or not os.path.isdir(session):
        return sys.executable
    return str(warm_cli.bin_dir(tmp_path_factory.mktemp("cli-python"), warm_cli.socket_of(Path(session))) / "python")


@pytest.fixture(scope="session")
def kube_apiserver_session() -> "kube_apiserver.Session":
    """The session's real kube-apiserver (tests/kube_apiserver.py) with the stacks' CRDs installed
    and Established, and its start-up times; skips with one line saying how to get the binaries
    when RLINF_EKS_KUBE_ASSETS / KUBEBUILDER_ASSETS name none."""
    if kube_apiserver.assets() is None:
        if kube_apiserver.misconfigured():
            pytest.fail(kube_apiserver.misconfigured())
        pytest.skip(kube_apiserver.HOW_TO_GET)
    return kube_apiserver.shared_server()


@pytest.fixture(scope="session")
def kube_api(kube_apiserver_session) -> "kube_apiserver.ApiServer":
    """The running server: ``.apply(obj)`` (server-side apply, dryRun=All, fieldValidation=Strict:
    None or the server's refusal), ``.ensure_namespace``, ``.create``, ``.request``, ``.kubeconfig``,
    ``.api_client()``."""
    return kube_apiserver_session.server
