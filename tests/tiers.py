"""The quick tier for the edit loop: ``python -m pytest -n 2 --dist worksteal -m "not slow"``.

A test is ``slow`` (marked at collection) when it runs something whole: a module of WHOLE_MODULES
(real Ray, the documentation's shell blocks, checkov, shellcheck, the diff edits of every stack,
botocore's models over every plan, the property test, the scripts run against their time bounds,
the warm CLI server), or a test that plans a whole stack, runs the CLI or starts a process, found
in its source: a call of ``plan_stack``, ``make_plan``, the CLI's ``main([...])``, ``python -m
rlinf_eks`` or ``subprocess.run/Popen/call/check_call/check_output`` (a rendered script run against
its timeouts, a tool), directly or through a function or fixture of its module that makes one, or
that uses the session's real kube-apiserver (SERVER_FIXTURES).
What is left are the pure functions and the components under mocks: every test still runs in the
full suite, which is the gate."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

WHOLE_MODULES = frozenset({
    "tests/test_launch_real_ray.py", "tests/test_docs.py", "tests/test_checkov.py", "tests/test_shellcheck.py",
    "tests/test_diff_edits.py", "tests/test_aws_models.py", "tests/test_properties.py", "tests/test_fault_fast.py",
    "tests/test_workload_scripts.py", "tests/test_checkpoint_resume.py", "tests/test_cli_unix.py",
    "tests/test_report_browser.py", "tests/test_warm_cli.py",
})  # fmt: skip
SERVER_FIXTURES = frozenset({"kube_api", "kube_apiserver_session"})
"""The session's real kube-apiserver (tests/kube_apiserver.py, the real API server tier): etcd and the
server started, the stacks' CRDs installed and waited for until Established (about 20 s on 2 cores)."""
WHOLE = re.compile(r"\bplan_stack\(|\bmake_plan\(|\bmain\(\[|\"-m\", \"rlinf_eks\"|-m rlinf_eks|\bsubprocess\.(?:run|Popen|call|check_call|check_output)\(")


def _whole_imports(tree: ast.Module, path: str) -> set[str]:
    """The names a module imports from a helper module of the suite (``from tests.x import run``)
    that plan a whole stack or run the CLI there (tests/interrupting.py's ``run`` starts
    ``python -m rlinf_eks``)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests."):
            helper = Path(path).parent / (node.module.split(".", 1)[1].replace(".", "/") + ".py")
            if helper.is_file() and helper.resolve() != Path(path).resolve():
                whole = _whole_names(str(helper))
                names |= {alias.asname or alias.name for alias in node.names if alias.name in whole}
    return names


@functools.lru_cache(maxsize=None)
def _whole_names(path: str) -> frozenset[str]:
    """The functions of a module that plan a whole stack or run the CLI, directly, through another
    of its functions, or through one it imports from a helper module of the suite."""
    source = Path(path).read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    functions = {n.name: "\n".join(lines[n.lineno - 1 : n.end_lineno]) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    imported = _whole_imports(tree, path)
    # an imported name is called bare (``run(``), not as another object's attribute (``subprocess.run(``)
    by_import = re.compile(r"(?<![.\w])(?:" + "|".join(map(re.escape, imported)) + r")\(") if imported else None
    whole = {name for name, text in functions.items() if WHOLE.search(text) or (by_import and by_import.search(text))}
    while True:
        called = re.compile(r"\b(?:" + "|".join(map(re.escape, whole)) + r")\b") if whole else None
        more = {name for name, text in functions.items() if name not in whole and called and called.search(text)}
        if not more:
            return frozenset(whole)
        whole |= more


def is_slow(nodeid: str, path: str, function: str, fixtures: tuple[str, ...]) -> bool:
    module = nodeid.split("::", 1)[0]
    if module in WHOLE_MODULES or SERVER_FIXTURES.intersection(fixtures):
        return True
    whole = _whole_names(path)
    return function in whole or any(f in whole for f in fixtures)


def mark_slow(items: list) -> None:
    import pytest

    for item in items:
        function = getattr(item, "originalname", None) or getattr(item, "name", "")
        fixtures = tuple(getattr(item, "fixturenames", ()))
        if str(item.path).endswith(".py") and is_slow(item.nodeid, str(item.path), function, fixtures):
            item.add_marker(pytest.mark.slow)
