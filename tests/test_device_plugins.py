"""Device plugins: pinned charts, exactly the GPU taint tolerated, only GPU/EFA nodes selected,
no NVIDIA plugin on Bottlerocket, no EFA plugin without EFA."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from rlinf_eks.device_plugins import DevicePlugins
from rlinf_eks.scheduling import GPU_TAINT, node_labels, node_taints
from tests.harness import one, run_component, settings

RELEASE = "kubernetes:helm.sh/v3:Release"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def run_plugins(**gpu_nodes: Any):
    s = settings(gpuNodes=gpu_nodes)

    def build():
        provider = pulumi.ProviderResource("kubernetes", "k8s", {})
        DevicePlugins(
            "device-plugins",
            settings=s.device_plugins,
            gpu_nodes=s.gpu_nodes,
            opts=pulumi.ResourceOptions(provider=provider),
        )

    return s, run_component(build)


def tolerates(toleration: dict[str, str], taint: dict[str, str]) -> bool:
    """Kubernetes toleration matching (operator Equal/Exists, empty effect matches all)."""
    if toleration.get("key") not in (None, "", taint["key"]):
        return False
    if toleration.get("effect") not in (None, "", taint["effect"]):
        return False
    return toleration.get("operator", "Equal") == "Exists" or toleration.get("value") == taint["value"]


def selects(values: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = values.get("nodeSelector", {})
    return all(labels.get(k) == v for k, v in selector.items())


def test_given_al2023_efa_nodes_when_built_then_both_pinned_charts_in_kube_system():
    s, run = run_plugins()
    nvidia = one(run, RELEASE, "device-plugins-nvidia")["inputs"]
    efa = one(run, RELEASE, "device-plugins-efa")["inputs"]
    assert (nvidia["chart"], nvidia["version"], nvidia["repositoryOpts"]["repo"]) == (
        "nvidia-device-plugin", s.device_plugins.nvidia_version, "https://nvidia.github.io/k8s-device-plugin"
    )
    assert (efa["chart"], efa["version"], efa["repositoryOpts"]["repo"]) == (
        "aws-efa-k8s-device-plugin", s.device_plugins.efa_version, "https://aws.github.io/eks-charts"
    )
    assert nvidia["namespace"] == efa["namespace"] == "kube-system"


def test_given_releases_when_built_then_they_use_the_cluster_provider_and_are_children():
    _, run = run_plugins()
    component = one(run, "rlinf-eks:index:DevicePlugins")
    for release in run.of_type(RELEASE):
        assert release["parent"] == component["urn"]
        assert release["provider"] and release["provider"].endswith("::k8s")


@pytest.mark.parametrize("chart", ["device-plugins-nvidia", "device-plugins-efa"])
def test_given_plugin_when_built_then_it_tolerates_exactly_the_gpu_taint_and_selects_gpu_nodes(chart):
    s, run = run_plugins()
    values = one(run, RELEASE, chart)["inputs"]["values"]
    assert values["tolerations"] == [GPU_TOLERATION]
    assert all(tolerates(t, GPU_TAINT.as_dict()) for t in node_taints())
    gpu_labels = node_labels(s.gpu_nodes)
    assert selects(values, gpu_labels)
    assert not selects(values, {"role": "system"})


def test_given_nvidia_chart_when_built_then_nfd_affinity_is_replaced_by_the_gpu_label():
    _, run = run_plugins()
    values = one(run, RELEASE, "device-plugins-nvidia")["inputs"]["values"]
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["gpu-training"]}]}]


def test_given_efa_chart_when_built_then_it_selects_the_efa_label_and_this_instance_type():
    _, run = run_plugins(instanceType="p5en.48xlarge")
    values = one(run, RELEASE, "device-plugins-efa")["inputs"]["values"]
    assert values["nodeSelector"]["vpc.amazonaws.com/efa.present"] == "true"
    assert values["supportedInstanceLabels"] == {"keys": ["node.kubernetes.io/instance-type"], "values": ["p5en.48xlarge"]}


def test_given_bottlerocket_when_built_then_no_nvidia_plugin_but_efa_plugin():
    # Bottlerocket has no NVMe RAID0: the run directory shares its data volume with the image
    _, run = run_plugins(amiType="BOTTLEROCKET_x86_64_NVIDIA", rootVolumeGib=400)
    names = [r["name"] for r in run.of_type(RELEASE)]
    assert names == ["device-plugins-efa"]


def test_given_efa_off_when_built_then_no_efa_plugin():
    _, run = run_plugins(instanceType="g5.2xlarge", efa=False)
    assert [r["name"] for r in run.of_type(RELEASE)] == ["device-plugins-nvidia"]


def test_given_default_versions_then_they_are_the_verified_pins():
    s = settings()
    # nvidia 0.20.0 is in the chart repo's index (0.18.1 never was, NVIDIA/k8s-device-plugin #1588);
    # the eks-charts EFA chart versions carry a leading v (v0.5.30 lists p6-b300, p5.4xlarge, g6e, g7e).
    assert s.device_plugins.nvidia_version == "0.20.0"
    assert s.device_plugins.efa_version == "v0.5.30"
