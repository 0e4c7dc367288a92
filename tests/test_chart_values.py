"""Every Helm release of every stack sets only values its pinned chart reads: Helm ignores a key the
chart does not know, so a misspelt or moved key would install the chart's default without a word.
Checked against each chart's own values.yaml in ../shared/schemas/helm (tests/schemas.py)."""

from __future__ import annotations

import pytest

from tests import reference
from tests.harness import ALL_STACKS, plan_stack, require_shared
from tests.schemas import HELM_CHARTS, KARPENTER_CHART, chart_passthrough, chart_values, release_chart, release_values_errors, unknown_keys

RELEASE = "kubernetes:helm.sh/v3:Release"

# The optional charts' other settings (plans shared with tests/test_aws_models.py's variants)
VARIANTS = [
    ("multi-node", "kuberay.enabled=true"),
    ("multi-node", "observability.backend=prometheus"),
    ("autoscaled", "gpuNodes.maxNodes=4"),
    ("autoscaled", "gpuNodes.scaleToZero=false", "autoscaler.enabled=false"),
    ("multi-node", "gpuNodes.provisioner=karpenter"),
]
PLANS = [(stack,) for stack in ALL_STACKS] + VARIANTS


def releases(stack: str, *sets: str) -> list[dict]:
    return [r for r in plan_stack(stack, *sets).resources if r["type"] == RELEASE]


@pytest.mark.parametrize("plan", PLANS, ids=[",".join(p) for p in PLANS])
def test_every_release_sets_only_keys_its_pinned_chart_reads(plan):
    problems = [f"{r['name']}: {p}" for r in releases(*plan) for p in release_values_errors(r["inputs"])]
    assert problems == []


# An EKS add-on, not a release: tests/test_observability.py checks its configurationValues
ADDON_CHARTS = {"amazon-cloudwatch-observability"}


def test_the_stacks_install_every_chart_of_the_shared_data():
    # every pinned chart's values are checked by some plan above, at the version the shared data has
    shared = {p.name for p in require_shared(HELM_CHARTS, "the pinned charts").iterdir() if p.is_dir()}
    # a chart the project carries a newer copy of (tests/data/reference) replaces the shared one
    own = {p.name for p in (reference.OWN / "schemas" / "helm").iterdir() if p.is_dir()}
    shared = {c for c in shared if c.rsplit("-", 1)[0] not in {o.rsplit("-", 1)[0] for o in own}} | own
    planned = {release_chart(r["inputs"]) for plan in PLANS for r in releases(*plan)}
    assert planned == {chart for chart in shared if chart.rsplit("-", 1)[0] not in ADDON_CHARTS} | {KARPENTER_CHART}


def test_a_misspelt_or_misplaced_key_is_named_with_its_chart():
    inputs = {
        "chart": "oci://registry.k8s.io/jobset/charts/jobset",
        "version": "0.12.0",
        "values": {"controller": {"nodeSelektor": {"role": "system"}}, "replicas": 2},
    }
    assert release_values_errors(inputs) == [
        "jobset-0.12.0: values key 'controller.nodeSelektor' is not in the chart's values.yaml (Helm would ignore it)",
        "jobset-0.12.0: values key 'replicas' is not in the chart's values.yaml (Helm would ignore it)",
    ]


def test_passed_through_keys_take_any_content_and_nothing_else_is_exempt():
    chart = "nvidia-device-plugin-0.20.0"
    passthrough = chart_passthrough(chart)
    assert {"nodeSelector", "tolerations", "config.map", "nvidiaDevRoot"} <= passthrough  # meta.json
    values = {"config": {"map": {"default": "anything: [at, all]"}}, "nvidiaDevRoot": "/", "tolerations": [{"x": 1}]}
    assert unknown_keys(values, chart_values(chart), passthrough=passthrough) == []
    assert unknown_keys({"config": {"mapp": {}}}, chart_values(chart), passthrough=passthrough) == ["config.mapp"]
    # a subchart's documented key, and only that one
    stack = "kube-prometheus-stack-88.5.3"
    assert unknown_keys({"grafana": {"grafana.ini": {}}}, chart_values(stack), passthrough=chart_passthrough(stack)) == []
    assert unknown_keys({"grafana": {"nodeSelektor": {}}}, chart_values(stack), passthrough=chart_passthrough(stack)) == ["grafana.nodeSelektor"]
