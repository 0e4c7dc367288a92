"""Climbing the ladder: each level observes what it needs (through the client), runs its checks,
and the climb stops at the first level with a failure unless ``keep_going``. The objects levels 3
and 4 create live in the verify namespace (the L4 all-reduce across nodes in the training
namespace, where the shared filesystem's claim is), carry the verify run's label, and are deleted
when the climb ends, however it ends (:func:`climb` and the CLI's ``finally``).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass
from typing import Callable

from ..config import StackSettings
from ..workload.run import Run, resolve_run
from . import admission, addons, control_plane, fabric, nodes, smoke
from .client import Cluster, PodOutcome
from .expect import Expectation
from .model import LEVELS, CheckResult, Observed, skipped

VERIFY_NAMESPACE = "rlinf-verify"
NAMESPACE_LABELS = {"app.kubernetes.io/managed-by": smoke.MANAGED_BY, "app.kubernetes.io/part-of": "rlinf-eks"}
JOB_MARGIN_SECONDS = 60
"""Past a Job's own activeDeadlineSeconds, how long verify waits for its pods to report."""


def new_run_id() -> str:
    """A short id for this verify run's object names and label."""
    return secrets.token_hex(3)


@dataclass
class Ladder:
    """One verify run of a stack."""

    settings: StackSettings
    stack: str
    expect: Expectation
    run_id: str
    progress: Callable[[str], None] = lambda line: None

    @property
    def run(self) -> Run:
        return resolve_run(self.settings, self.stack)

    @property
    def namespaces(self) -> list[str]:
        found = [self.expect.training_namespace]
        if self.expect.queue is not None and self.expect.queue.local_queue_namespace not in found:
            found.append(self.expect.queue.local_queue_namespace)
        return found

    # -- the jobs of levels 3 and 4 ----------------------------------------------------------------

    def smoke_objects(self, node_names: list[str]) -> list[dict]:
        return smoke.smoke_objects(self.run, node_names, namespace=VERIFY_NAMESPACE, run_id=self.run_id)

    def fabric_namespace(self, node_names: list[str]) -> str:
        return self.expect.training_namespace if len(node_names) > 1 else VERIFY_NAMESPACE

    def fabric_objects(self, node_names: list[str]) -> list[dict]:
        return fabric.fabric_objects(self.run, node_names, namespace=self.fabric_namespace(node_names), run_id=self.run_id)


def _deadline(objects: list[dict]) -> float:
    seconds = max((o["spec"].get("activeDeadlineSeconds") or 0 for o in objects if o["kind"] == "Job"), default=600)
    return time.monotonic() + seconds + JOB_MARGIN_SECONDS


def _jobs(objects: list[dict]) -> list[str]:
    return [o["metadata"]["name"] for o in objects if o["kind"] == "Job"]


def _run_label(ladder: Ladder) -> str:
    return f"{smoke.RUN_LABEL}={ladder.run_id}"


def run_smoke(ladder: Ladder, cluster: Cluster, node_names: list[str]) -> list[CheckResult]:
    objects = ladder.smoke_objects(node_names)
    cluster.ensure_namespace(VERIFY_NAMESPACE, NAMESPACE_LABELS)
    cluster.apply(objects)
    jobs = _jobs(objects)
    outcomes = cluster.wait(VERIFY_NAMESPACE, _run_label(ladder), jobs, _deadline(objects), lambda s: ladder.progress(f"L3 node smoke: {s}"))
    by_job = {o.job: o for o in outcomes}
    results = []
    for job, node in zip(jobs, node_names):
        outcome = by_job.get(job) or PodOutcome(job, 0, node, None, "")
        results.append(smoke.smoke_verdict(node, outcome.exit_code, outcome.log or outcome.reason))
    return results


def run_fabric(ladder: Ladder, cluster: Cluster, node_names: list[str]) -> list[CheckResult]:
    objects = ladder.fabric_objects(node_names)
    if not objects:
        return [skipped(4, "fabric.all-reduce", "one GPU on one node: nothing to all-reduce")]
    namespace = ladder.fabric_namespace(node_names)
    if namespace == VERIFY_NAMESPACE:
        cluster.ensure_namespace(namespace, NAMESPACE_LABELS)
    cluster.apply(objects)
    outcomes = cluster.wait(namespace, _run_label(ladder), _jobs(objects), _deadline(objects), lambda s: ladder.progress(f"L4 all-reduce: {s}"))
    return fabric.fabric_results(ladder.settings, {o.index: (o.exit_code, o.log or o.reason) for o in outcomes})


# -- the climb ----------------------------------------------------------------------------------------


def _timed(level: int, work: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    """The level's checks, each carrying the level's time (the checks of a level run together)."""
    started = time.monotonic()
    results = work()
    seconds = time.monotonic() - started
    return [dataclasses.replace(r, seconds=seconds) for r in results]


def climb(
    ladder: Ladder, cluster: Cluster, *, up_to: int = 5, keep_going: bool = False, results: list[CheckResult] | None = None
) -> list[CheckResult]:
    """Every check of levels 0..``up_to``, level by level; stops after the first level with a
    failure unless ``keep_going``. ``results`` (default a new list) receives each level's checks
    as they finish, so an interrupted climb still reports what it found. The caller cleans up
    (``cluster.clean_up()``)."""
    expect = ladder.expect
    observed = Observed()
    results = [] if results is None else results

    def gpu_node_names() -> list[str]:
        # Ready and schedulable: a cordoned node would leave its Job Pending until the deadline
        return [nodes.node_name(n) for n in nodes.gpu_nodes(expect, observed) if nodes.is_ready(n) and not nodes.is_cordoned(n)]

    def no_run(level: int, name: str) -> list[CheckResult] | None:
        if expect.run is None:
            return [skipped(level, name, "a platform has no training image or run: verify an experiment stack for this level")]
        return None

    def level_0() -> list[CheckResult]:
        nonlocal observed
        observed = cluster.observe_control_plane()
        return control_plane.check_control_plane(expect, observed)

    def level_1() -> list[CheckResult]:
        cluster.observe(observed, 1, ladder.namespaces)
        return nodes.check_nodes(expect, observed)

    def level_2() -> list[CheckResult]:
        cluster.observe(observed, 2, ladder.namespaces)
        return addons.check_addons(expect, observed)

    def level_3() -> list[CheckResult]:
        if (skip := no_run(3, "smoke")) is not None:
            return skip
        names = gpu_node_names()
        if not names:
            return [skipped(3, "smoke", "no Ready GPU node to run on (scale-from-zero with none up, or L1 said why)")]
        return run_smoke(ladder, cluster, names)

    def level_4() -> list[CheckResult]:
        if (skip := no_run(4, "fabric.all-reduce")) is not None:
            return skip
        names = gpu_node_names()
        if not names:
            return [skipped(4, "fabric.all-reduce", "no Ready GPU node to run on")]
        if len(names) > 1 and not ladder.settings.shared_filesystem:
            return [skipped(4, "fabric.all-reduce", "no shared filesystem to exchange the all-reduce's ssh key through (as the run's preflight)")]
        return run_fabric(ladder, cluster, names)

    def level_5() -> list[CheckResult]:
        cluster.observe(observed, 5, ladder.namespaces)
        return admission.check_admission(expect, observed)

    for level, work in enumerate((level_0, level_1, level_2, level_3, level_4, level_5)):
        if level > up_to:
            break
        ladder.progress(f"L{level} {LEVELS[level]}")
        found = _timed(level, work)
        results += found
        if not keep_going and not all(r.ok for r in found):
            break
    return results


def dry_run_nodes(expect: Expectation) -> list[str]:
    """Stand-in node names for a dry run (no cluster): the stack's GPU node count, at least one."""
    return [f"gpu-node-{i}" for i in range(max(expect.gpu.count, 1))]


DRY_RUN_ID = "dry-run"
"""The run id of a dry run's objects: fixed, so that a second dry run rewrites the same files."""


def dry_run_objects(ladder: Ladder) -> list[dict]:
    """What a climb would create, for review: the namespace, the RBAC a non-admin user needs, one
    smoke Job per GPU node and the all-reduce Job (stand-in node names). A platform has no run, so
    no Jobs: its climb skips levels 3 and 4 (their Jobs would have no image to run)."""
    from .rbac import rbac_objects

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": VERIFY_NAMESPACE, "labels": dict(NAMESPACE_LABELS)}}
    objects = [namespace, *rbac_objects(ladder.expect, VERIFY_NAMESPACE)]
    if ladder.expect.run is None:
        return objects
    names = dry_run_nodes(ladder.expect)
    return [*objects, *ladder.smoke_objects(names), *ladder.fabric_objects(names)]
