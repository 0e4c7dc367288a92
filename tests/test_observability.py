"""observability.backend: the CloudWatch add-on with Pod Identity, the in-cluster Prometheus path,
the DaemonSets each adds to a GPU node, and the values each chart really has."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
from tests.harness import one, plan_stack, run_component, settings
from tests.schemas import chart_passthrough, chart_values, unknown_keys

ADDON = "aws:eks/addon:Addon"


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


# --- prometheus ---------------------------------------------------------------------------------

from rlinf_eks.observability import prometheus as prom  # noqa: E402
from rlinf_eks.workload.kube import PROGRESS_METRICS_PORT, RAY_METRICS_PORT  # noqa: E402
from tests.schemas import builtin_errors  # noqa: E402

RELEASE = "kubernetes:helm.sh/v3:Release"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}

# Every metric a dashboard may query, by the exporter that produces it (the test keeps the list)
EXPORTED_METRICS = {
    # dcgm-exporter 4.x default-counters.csv (the chart's default arguments: -f default-counters.csv)
    "dcgm-exporter": {
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_XID_ERRORS",
    },
    # observability/prometheus.py EFA_EXPORTER_SCRIPT
    "efa-exporter": {"efa_hw_counter"},
    # Ray's system metrics (Ray docs, "System Metrics"), on every Ray node's metrics port
    "ray": {
        "ray_cluster_active_nodes", "ray_node_gpus_utilization", "ray_node_cpu_utilization", "ray_node_mem_used",
        "ray_tasks", "ray_actors", "ray_object_store_memory",
    },
    # the progress supervisor (workload/programs/progress_supervisor.py metrics_text)
    "progress-supervisor": {
        "rlinf_eks_train_step", "rlinf_eks_checkpoint_complete_step", "rlinf_eks_checkpoint_complete_timestamp_seconds",
        "rlinf_eks_progress_timestamp_seconds", "rlinf_eks_progress_timeout_seconds",
    },
}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def metrics_in(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers outside label matchers, strings,
    ranges and by/without lists that are not functions or keywords."""
    import re

    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or match.group() in PROMQL_WORDS:
            continue
        names.add(match.group())
    return names


def run_prometheus(launcher: str = "manual"):
    s = settings(observability={"backend": "prometheus"})
    return s, run_component(
        lambda: prom.PrometheusObservability(
            "observability", settings=s.observability, gpu_nodes=s.gpu_nodes, workload_namespace="rlinf", launcher=launcher
        )
    )


def test_given_prometheus_then_the_pinned_charts_install_in_their_namespace():
    s, run = run_prometheus()
    stack = one(run, RELEASE, "observability-stack")["inputs"]
    dcgm = one(run, RELEASE, "observability-dcgm")["inputs"]
    assert (stack["chart"], stack["version"], stack["repositoryOpts"]["repo"], stack["name"]) == (
        "kube-prometheus-stack", "88.5.3", "https://prometheus-community.github.io/helm-charts", "kps"
    )
    assert (dcgm["chart"], dcgm["version"], dcgm["repositoryOpts"]["repo"]) == ("dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts")
    assert stack["namespace"] == dcgm["namespace"] == "monitoring"
    release = one(run, RELEASE, "observability-stack")
    for resource in run:
        if resource["type"].startswith("kubernetes:") and resource["name"] != "observability-stack":
            assert release["urn"] in resource["options"]["dependsOn"], resource["name"]


def test_given_the_stack_values_then_every_key_is_the_charts_or_a_documented_subchart_key():
    observability = settings(observability={"backend": "prometheus"}).observability
    name = f"kube-prometheus-stack-{observability.prometheus.stack_version}"
    chart = chart_values(name)
    values = prom.stack_values(observability)
    assert unknown_keys(values, chart, passthrough=chart_passthrough(name)) == []
    for subchart in ("grafana", "kube-state-metrics", "prometheus-node-exporter"):
        assert subchart in chart  # passed through to a subchart the stack really has


def test_given_the_dcgm_values_then_every_key_is_the_charts():
    assert unknown_keys(prom.dcgm_values(), chart_values("dcgm-exporter-4.8.2")) == []


def test_given_prometheus_then_its_control_plane_runs_on_the_system_nodes():
    values = prom.stack_values(settings(observability={"backend": "prometheus"}).observability)
    for selector in (
        values["prometheus"]["prometheusSpec"]["nodeSelector"],
        values["prometheusOperator"]["nodeSelector"],
        values["grafana"]["nodeSelector"],
        values["kube-state-metrics"]["nodeSelector"],
    ):
        assert selector == {"role": "system"}


def test_given_prometheus_then_the_gpu_daemonsets_tolerate_the_taint_and_select_the_gpu_nodes():
    s, run = run_prometheus()
    gpu = node_labels(s.gpu_nodes)
    dcgm = prom.dcgm_values()
    assert dcgm["tolerations"] == [GPU_TOLERATION]
    assert all(gpu.get(k) == v for k, v in dcgm["nodeSelector"].items()) and dcgm["nodeSelector"] != {}
    efa = one(run, "kubernetes:apps/v1:DaemonSet", "observability-efa-exporter")["inputs"]["spec"]["template"]["spec"]
    assert efa["tolerations"] == [GPU_TOLERATION]
    assert all(gpu.get(k) == v for k, v in efa["nodeSelector"].items()) and efa["nodeSelector"].get("role") == "gpu-training"
    node_exporter = prom.stack_values(s.observability)["prometheus-node-exporter"]
    assert node_exporter["tolerations"] == [GPU_TOLERATION]  # node metrics from the GPU nodes too


def _mib(quantity: str) -> int:
    return int(quantity.removesuffix("Mi")) if quantity.endswith("Mi") else int(quantity.removesuffix("Gi")) * 1024


def test_given_prometheus_then_the_gpu_daemonset_budget_counts_the_requests_it_sets():
    _, run = run_prometheus()
    efa = one(run, "kubernetes:apps/v1:DaemonSet", "observability-efa-exporter")["inputs"]["spec"]["template"]["spec"]["containers"][0]
    rendered = {
        "node-exporter": prom.stack_values(settings().observability)["prometheus-node-exporter"]["resources"]["requests"],
        "dcgm-exporter": prom.dcgm_values()["resources"]["requests"],
        "efa-exporter": efa["resources"]["requests"],
    }
    assert catalog.OBSERVABILITY_DAEMONSETS["prometheus"] == {
        name: (int(req["cpu"].removesuffix("m")), _mib(req["memory"])) for name, req in rendered.items()
    }


def test_given_prometheus_then_every_builtin_object_passes_the_kubernetes_schema():
    _, run = run_prometheus()
    objects = [r["inputs"] for r in run if r["type"].startswith("kubernetes:") and r["type"] not in (RELEASE, POD_MONITOR)]
    assert {o["kind"] for o in objects} == {"DaemonSet", "ConfigMap", "NetworkPolicy"}
    for obj in objects:
        assert builtin_errors(obj, "1.35") == [], obj["metadata"]["name"]


# prometheus-operator v1 PodMonitor (API reference, monitoring.coreos.com/v1): the fields used here
POD_MONITOR_SPEC = {"namespaceSelector": {"matchNames"}, "selector": {"matchLabels"}, "podMetricsEndpoints": {"port", "path", "interval", "relabelings"}}


@pytest.mark.parametrize("launcher", ["manual", "kuberay"])
def test_given_the_pod_monitors_then_they_scrape_ray_everywhere_and_the_supervisor_on_the_head(launcher):
    _, run = run_prometheus(launcher)
    monitors = {r["inputs"]["metadata"]["name"]: r["inputs"] for r in run.of_type(POD_MONITOR)}
    assert set(monitors) == {"ray", "rlinf-run", "efa-exporter"}
    for monitor in monitors.values():
        spec = monitor["spec"]
        assert set(spec) == set(POD_MONITOR_SPEC)
        for endpoint in spec["podMetricsEndpoints"]:
            assert set(endpoint) <= POD_MONITOR_SPEC["podMetricsEndpoints"]
    assert monitors["ray"]["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    head = monitors["rlinf-run"]["spec"]["selector"]["matchLabels"]
    assert head.get("batch.kubernetes.io/job-completion-index") == "0" or head.get("ray.io/node-type") == "head"


def test_given_the_dashboards_then_each_is_grafana_json_loaded_by_the_sidecar():
    _, run = run_prometheus()
    maps = [r["inputs"] for r in run.of_type("kubernetes:core/v1:ConfigMap")]
    assert {m["metadata"]["name"] for m in maps} == {f"rlinf-dashboard-{n}" for n in ("gpu", "efa", "ray", "run")}
    sidecar = prom.stack_values(settings().observability)["grafana"]["sidecar"]["dashboards"]
    for config_map in maps:
        assert config_map["metadata"]["labels"][sidecar["label"]] == sidecar["labelValue"]
        assert config_map["metadata"]["namespace"] == sidecar["searchNamespace"]
    uids = set()
    for name, text in prom.dashboards().items():
        board = json.loads(text)
        assert {"uid", "title", "panels", "schemaVersion", "time"} <= set(board), name
        uids.add(board["uid"])
        assert board["panels"]
        for panel in board["panels"]:
            assert {"id", "type", "title", "gridPos", "targets", "datasource"} <= set(panel), (name, panel.get("title"))
            assert set(panel["gridPos"]) == {"x", "y", "w", "h"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
            assert [t["refId"] for t in panel["targets"]] == [chr(65 + n) for n in range(len(panel["targets"]))]
    assert len(uids) == len(prom.dashboards())


def test_given_every_dashboard_query_then_it_names_only_metrics_an_exporter_produces():
    produced = set().union(*EXPORTED_METRICS.values())
    for name, text in prom.dashboards().items():
        for panel in json.loads(text)["panels"]:
            for target in panel["targets"]:
                read = metrics_in(target["expr"])
                assert read, (name, target["expr"])
                assert read <= produced, (name, panel["title"], read - produced)


def test_given_the_supervisor_program_and_the_efa_script_then_they_produce_the_listed_metrics():
    from rlinf_eks.workload import scripts

    program = scripts.program("progress_supervisor.py")
    for metric in EXPORTED_METRICS["progress-supervisor"]:
        assert f'"{metric}"' in program
    assert "efa_hw_counter{device=" in prom.EFA_EXPORTER_SCRIPT


def test_given_prometheus_then_the_training_pods_admit_prometheus_on_the_metrics_ports_only():
    plan = plan_stack("multi-node")  # backend: prometheus
    policy = next(r["inputs"] for r in plan.resources if r["type"] == "kubernetes:networking.k8s.io/v1:NetworkPolicy" and r["inputs"]["metadata"]["name"] == "rlinf-training")
    scraper = [rule for rule in policy["spec"]["ingress"] if any("namespaceSelector" in p and p["namespaceSelector"].get("matchLabels") for p in rule["from"])]
    assert len(scraper) == 1
    assert scraper[0]["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]
    assert sorted(p["port"] for p in scraper[0]["ports"]) == [RAY_METRICS_PORT, PROGRESS_METRICS_PORT]
    exporters = [r["inputs"] for r in plan.resources if r["type"] == "kubernetes:networking.k8s.io/v1:NetworkPolicy" and r["inputs"]["metadata"]["namespace"] == "monitoring"]
    assert len(exporters) == 2 and all(len(e["spec"]["ingress"]) == 1 for e in exporters)
    assert not [r for r in plan.resources if r["type"] == "kubernetes:core/v1:Service"  and r["inputs"]["spec"].get("type") in ("LoadBalancer", "NodePort")]


def test_given_prometheus_then_the_ray_head_embeds_grafana_and_queries_prometheus():
    from rlinf_eks.workload.env import plain_env
    from rlinf_eks.workload.run import resolve_run  # noqa: F401

    s = settings(observability={"backend": "prometheus"})

    class Paths:
        root = "/run"

    env = plain_env(s, {}, Paths())  # type: ignore[arg-type]
    assert env["RAY_PROMETHEUS_HOST"] == "http://kps-prometheus.monitoring.svc:9090"
    assert env["RAY_GRAFANA_HOST"] == "http://kps-grafana.monitoring.svc:80"
    assert "RAY_GRAFANA_HOST" not in plain_env(settings(), {}, Paths())  # type: ignore[arg-type]


# --- the launcher's figures, served for real ------------------------------------------------------


@pytest.mark.parametrize(
    "folders",
    [
        ("checkpoints/global_step_3", "checkpoints/global_step_4"),
        # verl-ppo's attempts: the second starts again at step 1, below the first attempt's 50
        ("checkpoints/attempt-1/actor/global_step_50", "checkpoints/attempt-2/actor/global_step_3", "checkpoints/attempt-2/actor/global_step_4"),
    ],
)
def test_given_a_supervised_trainer_then_its_step_and_newest_complete_checkpoint_are_served_as_metrics(tmp_path, folders):
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from rlinf_eks.trainers.base import COMPLETE_MARKER
    from rlinf_eks.workload import progress

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "trainer.py").write_text(
        "import os, sys, time\n"
        f"run = {str(tmp_path)!r}\n"
        f"for folder in {list(folders)!r}:\n"
        "    os.makedirs(os.path.join(run, folder), exist_ok=True)\n"
        f"    if not folder.endswith('global_step_4'): open(os.path.join(run, folder, {COMPLETE_MARKER!r}), 'w').close()\n"
        "print('trainer: step 4', flush=True)\n"
        "time.sleep(6)\n"
    )
    script = tmp_path / "progress.sh"
    script.write_text(progress.progress_script(run_dir=str(tmp_path), timeout_seconds=None, stop_at_time=None, stop_budget_seconds=5, scan_seconds=0.2, metrics_port=port))
    proc = subprocess.Popen(["bash", str(script), sys.executable, str(tmp_path / "trainer.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline, text = time.monotonic() + 5, ""
        while time.monotonic() < deadline and "rlinf_eks_train_step 4" not in text:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
            except OSError:
                pass
            time.sleep(0.2)
        assert "rlinf_eks_train_step 4" in text, text
        assert "rlinf_eks_checkpoint_complete_step 3" in text
        samples = dict(line.split(" ", 1) for line in text.splitlines() if not line.startswith("#"))
        assert float(samples["rlinf_eks_progress_timestamp_seconds"]) > time.time() - 30
        assert "# TYPE rlinf_eks_train_step gauge" in text
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == 0
