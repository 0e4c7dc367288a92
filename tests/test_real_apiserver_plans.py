"""Every object of every stack's plan (and of the variants the other whole-stack tests plan), every
object ``verify --dry-run`` renders for it, and the Jobs, Pods and RayClusters the JobSet, Job and
KubeRay controllers would create from them (tests/controllers.py), sent to a real kube-apiserver
v1.35.3 with the stacks' CRDs (tests/kube_apiserver.py) as a server-side apply with dryRun=All
and fieldValidation=Strict, into namespaces created for real: the API server's own validation
(what no OpenAPI schema holds: a node field selector's single value, a pod's hostname, immutable
defaults, CEL rules of the CRDs) refuses none. Skips with one line without the binaries."""

from __future__ import annotations

import dataclasses

import pytest

from rlinf_eks.verify.expect import expectation_of
from rlinf_eks.verify.runner import DRY_RUN_ID, Ladder, dry_run_objects
from tests.controllers import derived
from tests.harness import ALL_STACKS, manifests, plan_stack
from tests.test_aws_models import VARIANTS as AWS_VARIANTS
from tests.test_chart_values import VARIANTS as CHART_VARIANTS
from tests.test_kueue import VARIANTS as KUEUE_VARIANTS

PLANS: list[tuple[str, ...]] = list(
    dict.fromkeys(
        [(stack,) for stack in ALL_STACKS]
        + [(stack, *sets) for stack, sets in AWS_VARIANTS]
        + [tuple(v) for v in CHART_VARIANTS]
        + [tuple(v) for v in KUEUE_VARIANTS]
    )
)
"""Every stack, then every variant another whole-stack test plans (the plans are shared through the
session's plan cache: tests/harness.py plan_stack)."""


def verify_objects(plan) -> list[dict]:
    """What ``verify STACK --dry-run`` writes for this plan's settings (no objects when the stack
    has nothing to verify a run on, as the command refuses it)."""
    settings = plan.settings
    if settings is None or (not settings.workload.enabled and settings.platform.role != "platform"):
        return []
    ladder = Ladder(settings, plan.stack, expectation_of(settings, plan.stack), DRY_RUN_ID)
    return dry_run_objects(dataclasses.replace(ladder, run_id=DRY_RUN_ID))


def objects_of(plan_key: tuple[str, ...]) -> list[dict]:
    plan = plan_stack(*plan_key)
    rendered = list(manifests(plan).values()) + verify_objects(plan)
    return rendered + derived(rendered)


def send(api, objects: list[dict]) -> dict[str, str]:
    """Each object to the server (its namespace created for real first); the refusals by object."""
    for namespace in sorted({o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}):
        api.ensure_namespace(namespace)
    refused = {}
    for obj in objects:
        error = api.apply(obj)
        if error is not None:
            refused[f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"] = error
    return refused


@pytest.mark.parametrize("plan_key", PLANS, ids=[",".join(p) for p in PLANS])
def test_every_object_of_the_plan_and_of_its_controllers_is_accepted_by_the_api_server(kube_api, plan_key):
    # GIVEN a stack's plan: its manifests, verify's dry-run objects, what the controllers make of them
    objects = objects_of(plan_key)
    assert objects
    # WHEN each is sent to the real API server (dryRun=All, fieldValidation=Strict)
    # THEN the server refuses none
    assert send(kube_api, objects) == {}
