"""Plan and test your own Pulumi program offline, the way ``python -m rlinf_eks plan`` plans this
project's stacks: the program runs in-process under the project's mocks (no Pulumi CLI, no
credentials, no network), and you get the same plan the CLI writes: every resource as plan.json
holds it (inputs by wire name, parent, provider, options; secrets masked), the stack outputs, every
Kubernetes manifest, and the policy results.

A program function (it creates resources; it may return its outputs or ``pulumi.export`` them)::

    from rlinf_eks.testing import one, plan_program, violations

    def program():
        ...  # EfaGpuNodeGroup(...), RlinfTraining(...), your own resources

    plan = plan_program(program, project="my-infra", stack="dev", config={"aws:region": "us-west-2"})
    node_group = one(plan, "aws:eks/nodeGroup:NodeGroup")
    assert plan.manifests()["job-rlinf-training.yaml"]["spec"]["parallelism"] == 2
    assert violations(plan) == []

A project folder (its ``Pulumi.yaml`` and ``Pulumi.<stack>.yaml``, read as the CLI reads this
project's; then its ``__main__.py`` runs as ``pulumi up`` runs it)::

    plan = plan_project("path/to/project", "dev", sets=["my-infra:gpuCount=4"])
    write_plan(plan, Path("build/dev"))  # plan.json and manifests/, as the CLI writes them

Every run gets a fresh event loop, reset Pulumi settings and its whole config replaced, so runs
do not leak into each other. The mocks give every resource a deterministic id and answer the
invokes this project's components make (``rlinf_eks.offline.engine.fake_cloud``); a program that
invokes anything else gets empty results.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from pulumi.runtime.settings import get_root_resource

from .offline.engine import engine
from .offline.outputs.plan import Plan, plan_of_run, violations_of_plan
from .offline.outputs.plan import write as _write
from .offline.engine.stack_config import StackConfig, StackConfigError, load
from .policies import PolicyOptions, Violation, evaluate

__all__ = [
    "Plan",
    "Registered",
    "has_inputs",
    "of_type",
    "one",
    "plan_program",
    "plan_project",
    "register",
    "violations",
    "write_plan",
]

Program = Callable[[], Any]
"""A Pulumi program as a function: it creates resources, and returns its stack outputs as a mapping
or exports them with ``pulumi.export`` (any other return value is ignored)."""

DEFAULT_REGION = "us-east-1"


class Registered(list):
    """The resources a run registered, in the order the engine received them, as plan.json dicts."""

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self if r["type"] == type_]


def _stack_config(project: str, stack: str, config: Optional[Mapping[str, Any]], secret_keys: Iterable[str]) -> StackConfig:
    """Config as the engine hands it over: keys qualified with the project's namespace unless they
    name one (``aws:region``), values structured or as text."""
    values = {key if ":" in key else f"{project}:{key}": value for key, value in (config or {}).items()}
    qualified = {key if ":" in key else f"{project}:{key}" for key in secret_keys}
    return StackConfig(project=project, stack=stack, values=values, secret_keys=qualified)


def _run(program: Program, stack_config: StackConfig) -> engine.Run:
    def body() -> Mapping[str, Any]:
        returned = program()
        # pulumi.export writes to the root stack resource, which the mocks create afresh for each run
        exported = getattr(get_root_resource(), "outputs", None) or {}
        return {**exported, **(returned if isinstance(returned, Mapping) else {})}

    region = stack_config.values.get("aws:region") or DEFAULT_REGION
    return engine.run(
        body,
        project=stack_config.project,
        stack=stack_config.stack,
        config=stack_config.flat(),
        secret_keys=stack_config.secret_keys,
        region=str(region),
    )


def register(
    program: Program,
    *,
    project: str = "test",
    stack: str = "test",
    config: Optional[Mapping[str, Any]] = None,
    secret_keys: Iterable[str] = (),
) -> Registered:
    """Run ``program`` under mocks; return what it registered, in the order the engine received it
    (a resource after those it depends on; siblings in any order). A plan sorts by URN:
    :func:`plan_program`."""
    run = _run(program, _stack_config(project, stack, config, secret_keys))
    return Registered(r.to_json() for r in run.registrations)


def plan_program(
    program: Program,
    *,
    project: str,
    stack: str = "test",
    config: Optional[Mapping[str, Any]] = None,
    secret_keys: Iterable[str] = (),
) -> Plan:
    """Run ``program`` under mocks and return its plan, the one ``python -m rlinf_eks plan`` writes
    for a stack: ``plan.resources`` (sorted by URN), ``plan.outputs``, ``plan.manifests()``,
    ``plan.warnings`` (what ``pulumi.log.warn`` said), ``plan.to_json()`` / ``plan.dumps()`` (plan.json).

    Args:
        program: creates the resources; returns its outputs or exports them (``pulumi.export``).
        project: the Pulumi project's name (the URNs' and ``pulumi.Config()``'s).
        stack: the stack's name (``pulumi.get_stack()``).
        config: the stack's config, ``{"key": value}`` in the project's namespace or
            ``{"namespace:key": value}`` (``aws:region``, which also picks the mocks' region;
            us-east-1 unset); values as a stack file holds them (objects, lists, scalars) or as text.
        secret_keys: the config keys that are secrets (``pulumi config set --secret``): the
            program reads them as secret Outputs, and the plan masks them.
    """
    return plan_of_run(_run(program, _stack_config(project, stack, config, secret_keys)))


def plan_project(project_dir: str | Path, stack: str, *, sets: Iterable[str] = (), program: Optional[Program] = None) -> Plan:
    """The plan of a Pulumi project folder's stack: config from its ``Pulumi.yaml`` (project values
    and defaults, ``stackConfigDir``) and ``Pulumi.<stack>.yaml``, then ``sets`` (``KEY=VALUE``, what
    ``pulumi config set --path KEY VALUE`` would do on a copy), exactly as the CLI reads this
    project's stacks; then ``program``, or else the project's own program (``main`` in Pulumi.yaml,
    ``__main__.py`` by default) run as ``pulumi up`` runs it. Secure values in the stack file stay
    secret (``[secret]``). A stack of this project itself carries its settings, as the CLI's plan
    does (plan.json's ``firstStep``, the placeholders). Raises
    ``rlinf_eks.offline.engine.stack_config.StackConfigError`` for a missing or malformed file or ``--set``."""
    root = Path(project_dir).resolve()
    stack_config = load(root, stack, list(sets))
    if stack_config.problems:
        raise StackConfigError("; ".join(stack_config.problems))
    main = program if program is not None else _main_of(root)
    return plan_of_run(_run(main, stack_config), _own_settings(stack_config))


def _own_settings(stack_config: StackConfig) -> Any:
    """This project's settings of a stack of its own (what the CLI's plan carries: plan.json's
    firstStep, efficiency.json), else None (another project, or an experiment without its platform)."""
    from .config import PROJECT, ConfigError
    from .offline.outputs.plan import settings_of
    from .offline.engine.stack_config import StackConfigError

    if stack_config.project != PROJECT:
        return None
    try:
        return settings_of(stack_config)
    except (ConfigError, StackConfigError):
        return None


def _main_of(root: Path) -> Program:
    """The project's program, run as the Pulumi language host runs it (``runpy.run_path`` as
    ``__main__``, its folder first on ``sys.path``)."""
    import yaml

    main = (yaml.safe_load((root / "Pulumi.yaml").read_text(encoding="utf-8")) or {}).get("main") or "."
    path = root / main
    folder = path if path.is_dir() else path.parent

    def program() -> None:
        sys.path.insert(0, str(folder))
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            sys.path.remove(str(folder))

    return program


def violations(plan: Plan, options: Optional[PolicyOptions] = None) -> list[Violation]:
    """The policy results of the plan: every rule of ``rlinf_eks.policies`` (the CrossGuard pack's
    too) over its resources, as the CLI reports them. ``options`` (``rlinf_eks.policies.PolicyOptions``)
    carries the opt-ins a stack's settings would (a public endpoint open to anywhere)."""
    if options is None:
        return violations_of_plan(plan)
    return evaluate(plan.resources, options)


def write_plan(plan: Plan, out: str | Path) -> list[str]:
    """Write ``plan.json`` and ``manifests/`` into ``out`` as the CLI does (``efficiency.json`` only
    for a plan of this project's own settings, as the CLI makes); return the warnings about files
    it left in place."""
    return _write(plan, Path(out))


# --- looking things up in a plan --------------------------------------------------------------------


def of_type(resources: Plan | list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    """The resources of a Pulumi type token (``aws:eks/nodeGroup:NodeGroup``)."""
    items = resources.resources if isinstance(resources, Plan) else resources
    return [r for r in items if r["type"] == type_]


def one(resources: Plan | list[dict[str, Any]], type_: str, name: Optional[str] = None) -> dict[str, Any]:
    """The single resource of ``type_`` (and logical ``name``, if given); AssertionError otherwise,
    naming what there is."""
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
