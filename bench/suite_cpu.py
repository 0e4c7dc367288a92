"""Where the test suite's CPU goes: a pytest plugin recording each test's CPU time.

    RLINF_EKS_CPU_LOG=DIR python -m pytest -p bench.suite_cpu -n 4 --dist worksteal
    python bench/suite_cpu.py DIR          # the table: CPU-seconds per module, and per process

CPU, not wall time, because the machines this runs on are shared and their wall times are not
comparable: a test's CPU is the user+system time of the pytest process (worker) during the test
(setup, call and teardown) plus that of the child processes it waited for in that time
(``RUSAGE_CHILDREN``: scripts, checkov, Ray under ``sudo unshare``, reaped by their parents up to
the test). Each process also records its start-up (interpreter, plugins, imports and collection:
its CPU at the end of collection) and its total at exit, so ``sum(tests) + start-up`` can be
checked against the total (the controller's total is its own CPU: its children are the
workers). Each process writes one JSON file into DIR.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "RLINF_EKS_CPU_LOG"


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


_record: dict = {"tests": {}}


def pytest_collection_finish(session):
    if os.environ.get(ENV):
        _record["startup"] = sum(_cpu())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get(ENV):
        yield
        return
    own0, kids0 = _cpu()
    yield
    own1, kids1 = _cpu()
    _record["tests"][item.nodeid] = [own1 - own0, kids1 - kids0]


@pytest.hookimpl(trylast=True)  # after tests/conftest.py has stopped and reaped the session's servers
def pytest_unconfigure(config):
    directory = os.environ.get(ENV)
    if not directory:
        return
    worker = getattr(config, "workerinput", {}).get("workerid")
    own, kids = _cpu()
    # the controller's children are the workers, counted in their own files, and the session's
    # servers it started and reaped (tests/warm_cli.py): its own CPU, and its children's apart
    _record["total"] = own + kids if worker else own
    if not worker:
        _record["children"] = kids
    _record["worker"] = worker or "controller"
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"{os.getpid()}.json").write_text(json.dumps(_record))


def report(directory: Path) -> str:
    per_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    lines, startup, total = [], 0.0, 0.0
    controller_children = workers = 0.0
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        if record["worker"] == "controller":
            controller_children = record.get("children", 0.0)
        elif record["worker"].startswith("gw"):
            workers += record["total"]
        tests = sum(own + kids for own, kids in record["tests"].values())
        startup += record.get("startup", 0.0)
        total += record["total"]
        lines.append(f"  {record['worker']:<10} start-up {record.get('startup', 0.0):6.1f}  tests {tests:6.1f}  total {record['total']:6.1f}")
        for nodeid, (own, kids) in record["tests"].items():
            module = per_module[nodeid.split("::", 1)[0]]
            module[0] += own
            module[1] += kids
            module[2] += 1
    rows = sorted(per_module.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    out = ["CPU-s per module (own = pytest process, children = reaped subprocesses)",
           f"{'module':45s} {'tests':>5s} {'own':>7s} {'children':>8s} {'total':>7s}"]
    for module, (own, kids, n) in rows:
        out.append(f"{module:45s} {n:5d} {own:7.1f} {kids:8.1f} {own + kids:7.1f}")
    tests_total = sum(own + kids for own, kids, _ in per_module.values())
    out.append(f"{'tests':45s} {'':5s} {'':7s} {'':8s} {tests_total:7.1f}")
    out.append(f"{'start-up (imports, collection) of every process':51s} {'':15s}{startup:7.1f}")
    # without xdist the controller runs the tests: its children are already in the tests' figures
    servers = max(0.0, controller_children - workers) if workers else 0.0
    out.append(f"{'session servers the controller reaped (tests/warm_cli.py)':51s} {'':15s}{servers:7.1f}")
    out.append(f"{'all processes (total at exit)':51s} {'':15s}{total + servers:7.1f}")
    return "\n".join(out + ["per process:"] + lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1])))
