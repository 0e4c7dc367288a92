"""The order the suite starts its tests in (conftest.py): under `-n 4 --dist worksteal` each worker's
first chunk starts with its share of the known-slow tests, and the list of slow tests names tests
that exist."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.conftest import SLOW_MODULES, SLOW_TESTS, WAITS, slow_first, waiting_chunks, worksteal_chunks
from tests.harness import ROOT


@dataclass
class Item:
    nodeid: str


class FakeNode:
    """What xdist's scheduler needs of a worker: it records the test indices it is sent."""

    shutting_down = False

    def __init__(self, n: int) -> None:
        self.sent: list[int] = []
        self.gateway = type("Gateway", (), {"id": f"gw{n}"})()

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices


class FakeConfig:
    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str):
        assert name == "tx"
        return [f"{self.workers}*popen"]


def first_chunks(collection: list[str], workers: int) -> list[list[str]]:
    """The chunks xdist's own worksteal scheduler first sends to ``workers`` workers."""
    from xdist.scheduler.worksteal import WorkStealingScheduling

    sched = WorkStealingScheduling(FakeConfig(workers))
    nodes = [FakeNode(n) for n in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    sched.schedule()
    return [[collection[i] for i in node.sent] for node in nodes]


def suite_like(fast: int = 1000) -> list[Item]:
    """A collection shaped like the suite's: every known-slow test and module among fast tests."""
    slow = [f"{prefix}x" for prefix in SLOW_TESTS] + [f"{module}::test_{i}" for module in SLOW_MODULES for i in range(3)]
    items = [Item(f"tests/test_fast_{i}.py::test") for i in range(fast)]
    for n, nodeid in enumerate(slow):
        items.insert((n * 37) % len(items), Item(nodeid))
    return items


def test_every_known_slow_test_and_module_exists():
    for prefix in SLOW_TESTS:
        module, function = prefix.split("::")
        source = (ROOT / module).read_text()
        assert re.search(rf"^def {re.escape(function)}", source, re.M), f"conftest.SLOW_TESTS: no test {prefix}* in {module}"
    for module in SLOW_MODULES:
        assert (ROOT / module).is_file(), f"conftest.SLOW_MODULES: no {module}"


def test_the_chunk_sizes_are_those_xdist_worksteal_sends():
    for total, workers in ((1069, 4), (1070, 4), (13, 3), (5, 2)):
        chunks = first_chunks([f"t{i}" for i in range(total)], workers)
        assert [len(c) for c in chunks] == worksteal_chunks(total, workers)


def test_under_worksteal_each_worker_starts_with_its_share_of_the_slow_tests():
    items = suite_like()
    for workers in (2, 3, 4):
        ordered = slow_first(items, workers)
        assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items), "every test runs, once"
        seconds, kinds = [], []
        for chunk in first_chunks([i.nodeid for i in ordered], workers):
            slow = [nodeid for nodeid in chunk if nodeid.startswith(tuple(SLOW_TESTS)) or nodeid.split("::")[0] in SLOW_MODULES]
            assert chunk[: len(slow)] == slow, "the slow tests lead the chunk"
            seconds.append(sum(s for p, s in SLOW_TESTS.items() for nodeid in slow if nodeid.startswith(p))
                           + sum(s for m, s in SLOW_MODULES.items() if any(nodeid.startswith(m) for nodeid in slow)))
            kinds.append({nodeid.startswith(WAITS) for nodeid in slow})
        # the waiting units head the first chunks, the computing ones the others: never both in one
        split = waiting_chunks(workers)
        assert all(k <= {True} for k in kinds[:split]) and all(k <= {False} for k in kinds[split:]), kinds
        # balanced: within each kind no chunk holds more slow time than its least loaded one plus the longest unit
        longest = max([*SLOW_TESTS.values(), *SLOW_MODULES.values()])
        for group in (seconds[:split], seconds[split:]):
            assert max(group) - min(group) <= longest, seconds


def test_a_module_sharing_an_expensive_fixture_stays_in_one_chunk():
    ordered = slow_first(suite_like(), 4)
    for module in SLOW_MODULES:
        holders = [n for n, chunk in enumerate(first_chunks([i.nodeid for i in ordered], 4)) if any(x.startswith(module) for x in chunk)]
        assert len(holders) == 1, (module, holders)


def test_run_alone_the_order_is_slow_first_then_file_order():
    items = suite_like(50)
    ordered = slow_first(items, 1)
    fast = [i for i in items if i.nodeid.startswith("tests/test_fast_")]
    assert ordered[-len(fast):] == fast


# --- the quick tier (tests/tiers.py) -----------------------------------------------------------------


def test_the_quick_tier_leaves_out_what_plans_a_stack_directly_or_through_a_helper_or_fixture(tmp_path):
    from tests import tiers

    module = tmp_path / "test_example.py"
    module.write_text(
        "def _plans(stack):\n    return plan_stack(stack)\n\n"
        "def _twice(stack):\n    return [_plans(stack), _plans(stack)]\n\n"
        "def planned():\n    return _twice('multi-node')\n\n"
        "def test_direct():\n    plan_stack('single-node')\n\n"
        "def test_through_helpers():\n    _twice('x')\n\n"
        "def test_through_a_fixture(planned):\n    assert planned\n\n"
        "def test_the_cli():\n    main(['plan', 'x'])\n\n"
        "def test_a_script():\n    subprocess.run(['sh', '-c', 'sleep 1'])\n\n"
        "def test_pure():\n    assert 1 + 1 == 2\n"
    )
    path = str(module)
    slow = {name for name, fixtures in [("test_direct", ()), ("test_through_helpers", ()), ("test_through_a_fixture", ("planned",)),
                                        ("test_the_cli", ()), ("test_a_script", ()), ("test_pure", ())]
            if tiers.is_slow(f"tests/test_example.py::{name}", path, name, fixtures)}
    assert slow == {"test_direct", "test_through_helpers", "test_through_a_fixture", "test_the_cli", "test_a_script"}
    assert tiers.is_slow("tests/test_launch_real_ray.py::test_x", path, "test_pure", ())


def test_the_quick_tier_leaves_out_what_runs_the_cli_through_a_helper_module_of_the_suite(tmp_path):
    # tests/test_interrupts.py runs `python -m rlinf_eks` through tests/interrupting.py's run()
    from tests import tiers

    (tmp_path / "helper.py").write_text(
        "import subprocess, sys\n\n"
        "def run(argv):\n    return subprocess.run([sys.executable, \"-m\", \"rlinf_eks\", *argv])\n\n"
        "def pure():\n    return 1\n"
    )
    module = tmp_path / "test_uses_helper.py"
    module.write_text(
        "import runner\nfrom tests.helper import pure, run as run_cli\n\n"
        "def test_the_cli():\n    run_cli(['plan', 'x'])\n\n"
        "def _through(stack):\n    return run_cli(['plan', stack])\n\n"
        "def test_through_a_function():\n    _through('x')\n\n"
        "def test_pure_helper():\n    assert pure() == 1\n\n"
        "def test_another_run():\n    runner.run(['true'])\n"
    )
    path = str(module)
    names = ["test_the_cli", "test_through_a_function", "test_pure_helper", "test_another_run"]
    slow = {name for name in names if tiers.is_slow(f"tests/test_uses_helper.py::{name}", path, name, ())}
    assert slow == {"test_the_cli", "test_through_a_function"}
    assert tiers.is_slow("tests/test_interrupts.py::test_image_contract_interrupted_says_one_line", str(tiers.Path(__file__).parent / "test_interrupts.py"),
                         "test_image_contract_interrupted_says_one_line", ())


def test_the_quick_tier_leaves_out_what_uses_the_sessions_real_api_server(tmp_path):
    # the real API server tier's fixtures start etcd and a kube-apiserver and wait for the stacks'
    # CRDs to be Established (about 20 s on 2 cores): a process of its own, as the quick tier leaves out
    from tests import tiers

    module = tmp_path / "test_server.py"
    module.write_text("def test_applies(api):\n    assert api\n\ndef test_pure():\n    assert 1\n")
    path = str(module)
    assert tiers.is_slow("tests/test_server.py::test_applies", path, "test_applies", ("api", "kube_api", "kube_apiserver_session"))
    assert tiers.is_slow("tests/test_server.py::test_applies", path, "test_applies", ("kube_apiserver_session",))
    assert not tiers.is_slow("tests/test_server.py::test_pure", path, "test_pure", ("tmp_path",))
