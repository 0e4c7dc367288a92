"""observability.backend: the CloudWatch add-on with Pod Identity, the in-cluster Prometheus path,
the DaemonSets each adds to a GPU node, and the values each chart really has."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from rlinf_eks import catalog
from rlinf_eks.config import ConfigError
from rlinf_eks.observability.cloudwatch import (
    AGENT_POLICY,
    AGENT_SERVICE_ACCOUNT,
    NAMESPACE,
    CloudWatchObservability,
    configuration_values,
    pod_identity_trust_policy,
)
from rlinf_eks.scheduling import GPU_TAINT, node_labels
from tests.harness import SHARED, one, plan_stack, require_shared, run_component, settings

HELM = SHARED / "schemas" / "helm"
ADDON = "aws:eks/addon:Addon"


def chart_values(chart: str) -> dict[str, Any]:
    return yaml.safe_load(require_shared(HELM / chart / "values.yaml", f"the {chart} chart's values").read_text())


def unknown_keys(values: Any, chart: Any, path: str = "", passthrough: frozenset[str] = frozenset()) -> list[str]:
    """Key paths of ``values`` that the chart's values.yaml does not have. A key the chart sets to
    null, a list or a scalar takes any value; below a ``passthrough`` path (a subchart whose own
    values are not in the file) nothing is checked."""
    if path in passthrough or not isinstance(values, dict) or not isinstance(chart, dict):
        return []
    problems = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in chart:
            if where not in passthrough:
                problems.append(where)
            continue
        problems += unknown_keys(value, chart[key], where, passthrough)
    return problems


def tolerates(toleration: dict[str, str], taint: dict[str, str]) -> bool:
    if toleration.get("key") not in (None, "", taint["key"]):
        return False
    if toleration.get("effect") not in (None, "", taint["effect"]):
        return False
    return toleration.get("operator", "Equal") == "Exists" or toleration.get("value") == taint["value"]


def affinity_selects(affinity: dict[str, Any], labels: dict[str, str]) -> bool:
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return any(
        all(e["operator"] == "In" and labels.get(e["key"]) in e["values"] for e in term["matchExpressions"]) for term in terms
    )


# --- the setting --------------------------------------------------------------------------------


EXISTING = {
    "cluster": {"existing": True, "name": "shared", "deployFromVpc": False},
    "network": {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"], "gpuSubnetId": "subnet-0123456789abcdef0"},
}


def test_given_a_new_cluster_then_cloudwatch_and_given_an_existing_one_then_none_by_default():
    assert settings().observability_backend == "cloudwatch"
    assert settings(**EXISTING).observability_backend == "none"
    assert settings(**EXISTING, observability={"backend": "prometheus"}).observability_backend == "prometheus"


@pytest.mark.parametrize("version", ["6.4.0", "v6.1.0-eksbuild.1", "v4.4.0-eksbuild.1", "latest"])
def test_given_a_bad_addon_version_then_the_config_is_rejected_naming_the_key(version):
    with pytest.raises(ConfigError, match="observability.cloudwatchAddonVersion"):
        settings(observability={"cloudwatchAddonVersion": version})


def test_given_an_unknown_backend_then_the_config_is_rejected():
    with pytest.raises(ConfigError, match="observability.backend"):
        settings(observability={"backend": "datadog"})


# --- cloudwatch ---------------------------------------------------------------------------------


def run_cloudwatch():
    return run_component(
        lambda: CloudWatchObservability("observability", cluster_name="c", addon_version="v6.4.0-eksbuild.1", partition="aws", tags={"a": "b"})
    )


def test_given_cloudwatch_then_the_pinned_addon_waits_for_the_agents_pod_identity():
    run = run_cloudwatch()
    addon = one(run, ADDON)
    association = one(run, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    attachment = one(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert addon["inputs"]["addonName"] == "amazon-cloudwatch-observability"
    assert addon["inputs"]["addonVersion"] == "v6.4.0-eksbuild.1"
    assert {association["urn"], attachment["urn"]} <= set(addon["options"]["dependsOn"])
    assert (association["inputs"]["namespace"], association["inputs"]["serviceAccount"]) == (NAMESPACE, AGENT_SERVICE_ACCOUNT)
    assert attachment["inputs"]["policyArn"] == f"arn:aws:iam::aws:policy/{AGENT_POLICY}"


def test_given_the_agent_role_then_only_eks_pod_identity_may_assume_it_with_session_tags():
    run = run_cloudwatch()
    role = one(run, "aws:iam/role:Role")
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    assert trust == pod_identity_trust_policy()
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]


def test_given_the_addon_configuration_then_every_key_is_one_of_the_charts_values():
    chart = chart_values("amazon-cloudwatch-observability-6.4.0")
    assert unknown_keys(configuration_values(), chart) == []
    run = run_cloudwatch()
    assert json.loads(one(run, ADDON)["inputs"]["configurationValues"]) == configuration_values()


def test_given_the_addon_configuration_then_its_daemonsets_tolerate_the_gpu_taint_and_dcgm_selects_the_gpu_nodes():
    values = configuration_values()
    assert all(tolerates(t, GPU_TAINT.as_dict()) for t in values["tolerations"])
    assert any(tolerates(t, GPU_TAINT.as_dict()) for t in values["tolerations"])
    gpu = settings(gpuNodes={"instanceType": "g5.2xlarge", "efa": False}).gpu_nodes  # not in the chart's type list
    assert affinity_selects(values["dcgmExporter"]["affinity"], node_labels(gpu))
    assert not affinity_selects(values["dcgmExporter"]["affinity"], {"role": "system"})
    assert values["otelContainerInsights"] == {"enabled": True}


def test_given_the_cloudwatch_chart_then_the_gpu_daemonset_budget_counts_its_requests():
    chart = chart_values("amazon-cloudwatch-observability-6.4.0")

    def requests(section: dict[str, Any]) -> tuple[int, int]:
        req = section["resources"]["requests"]
        return int(req["cpu"].removesuffix("m")), int(req["memory"].removesuffix("Mi"))

    # the agent DaemonSet takes $.agent's defaults (agents[0] overrides only its name)
    from_chart = {
        "cloudwatch-agent": requests(chart["agent"]),
        "fluent-bit": requests(chart["containerLogs"]["fluentBit"]),
        "dcgm-exporter": requests(chart["dcgmExporter"]),
        "node-exporter": requests(chart["nodeExporter"]),
    }
    assert catalog.OBSERVABILITY_DAEMONSETS["cloudwatch"] == from_chart
    assert chart["agents"][0] == {"name": "cloudwatch-agent"}


@pytest.mark.parametrize("backend", ["none", "cloudwatch", "prometheus"])
@pytest.mark.parametrize("instance_type", sorted(catalog.CATALOG))
def test_given_any_backend_then_the_training_pod_still_fits_beside_every_daemonset(backend, instance_type):
    instance = catalog.CATALOG[instance_type]
    shape = catalog.pod_shape_for(instance, 5 * 1024, 0.4, backend)
    alloc_cpu, alloc_mem = catalog.allocatable(instance, 5 * 1024)
    cpu, mib = catalog.daemonset_budget(backend)
    assert 0 < shape.millicpu <= alloc_cpu - cpu
    assert 0 < shape.memory_mib <= alloc_mem - mib


def test_given_the_default_stack_then_the_plan_carries_the_addon():
    plan = plan_stack("single-node")
    addon = [r for r in plan.resources if r["type"] == ADDON and r["inputs"]["addonName"] == "amazon-cloudwatch-observability"]
    assert len(addon) == 1
