"""A hosted component, constructed through the provider from the values another language sends,
plans exactly what the Python API plans with the same settings: the same resources (types, names,
parents, inputs, options)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from rlinf_eks import DevicePlugins, EfaGpuNodeGroup, KubeRayOperator, RlinfTraining
from rlinf_eks.config import pulumi_config
from rlinf_eks.offline.engine.stack_config import load
from rlinf_eks.workload import TrainingSettings
from tests.harness import ROOT, plan_stack
from tests.hosted_harness import construct, resources, without_component

SG = "sg-0123456789abcdef0"
SUBNET = "subnet-0123456789abcdef0"
GPU_NODES = [
    {"instanceType": "p5en.48xlarge", "nodeCount": 4, "labels": {"example.com/team": "robotics"}},
    {"instanceType": "p4d.24xlarge", "nodeCount": 2, "capacityReservationId": "cr-0123456789abcdef0", "hugepagesGib": 8},
    {"instanceType": "g6e.48xlarge", "efa": False, "amiType": "BOTTLEROCKET_x86_64_NVIDIA", "rootVolumeGib": 200},
]


@pytest.mark.parametrize("gpu", GPU_NODES, ids=lambda g: g["instanceType"])
def test_efa_gpu_node_group(gpu):
    refs = {"cluster_name": "my-cluster", "cluster_security_group_id": SG, "subnet_id": SUBNET, "tags": {"team": "robotics"}}

    def python():
        EfaGpuNodeGroup("gpu", settings=gpu, autoscaled=True, **refs)

    def hosted():
        state = construct(
            "EfaGpuNodeGroup",
            "gpu",
            {"gpuNodes": gpu, "clusterName": "my-cluster", "clusterSecurityGroupId": SG, "subnetId": SUBNET,
             "autoscaled": True, "tags": {"team": "robotics"}},
        ).state  # fmt: skip
        assert set(state) >= {"nodeGroupName", "launchTemplateId", "labels", "taints"}

    expected = resources(python)
    assert [r["type"] for r in expected].count("aws:eks/nodeGroup:NodeGroup") == 1
    assert resources(hosted) == expected


def _provider() -> k8s.Provider:
    return k8s.Provider("my-k8s", kubeconfig="{}")


@pytest.mark.parametrize("gpu", GPU_NODES, ids=lambda g: g["instanceType"])
def test_device_plugins_with_the_provider_of_the_options(gpu):
    def python():
        DevicePlugins("device-plugins", settings={"nvidiaVersion": "0.17.1"}, gpu_nodes=gpu, opts=pulumi.ResourceOptions(provider=_provider()))

    def hosted():
        opts = pulumi.ResourceOptions(providers={"kubernetes": _provider()})
        construct("DevicePlugins", "device-plugins", {"devicePlugins": {"nvidiaVersion": "0.17.1"}, "gpuNodes": gpu}, opts)

    expected = resources(python)
    assert resources(hosted) == expected


def test_device_plugins_with_a_kubeconfig():
    def python():
        provider = k8s.Provider("device-plugins-kubernetes", kubeconfig=pulumi.Output.secret("{}"))
        DevicePlugins("device-plugins", settings={}, gpu_nodes={}, opts=pulumi.ResourceOptions(provider=provider))

    def hosted():
        construct("DevicePlugins", "device-plugins", {"kubeconfig": "{}"})

    expected = resources(python)
    assert [r["name"] for r in expected if r["type"] == "pulumi:providers:kubernetes"] == ["device-plugins-kubernetes"]
    assert resources(hosted) == expected


def test_kuberay_operator():
    def python():
        KubeRayOperator("kuberay", settings={"version": "1.7.0", "namespace": "ray"}, opts=pulumi.ResourceOptions(provider=_provider()))

    def hosted():
        state = construct(
            "KubeRayOperator", "kuberay", {"kuberay": {"version": "1.7.0", "namespace": "ray"}},
            pulumi.ResourceOptions(providers={"kubernetes": _provider()}),
        ).state  # fmt: skip
        assert set(state) == {"releaseName", "namespace"}

    assert resources(hosted) == resources(python)


TRAININGS = {
    "one-node-synced": {
        "workload": {"image": "example.com/rlinf:1", "trainer": {"dialect": "rlinf-reasoning"}, "rollout": {"backend": "vllm", "tensorParallelSize": 2}},
        "gpuNodes": {"instanceType": "p5.48xlarge", "nodeCount": 1},
        "storage": {"sharedFilesystem": {"enabled": False}},
    },
    "two-nodes-shared-restarts": {
        "workload": {"image": "example.com/rlinf:1", "trainer": {"dialect": "rlinf-embodied"}, "restart": {"maxRestarts": 3},
                     "progressTimeoutSeconds": 3600, "env": {"NCCL_DEBUG": "INFO"}},
        "gpuNodes": {"instanceType": "p5.48xlarge", "nodeCount": 2},
        "storage": {"sharedFilesystem": {"enabled": True, "mountPath": "/data"}},
        "preflight": {"enabled": True, "minBusBandwidthFraction": 0.5},
    },
    "kuberay": {
        "workload": {"image": "example.com/rlinf:1", "launcher": "kuberay", "trainer": {"dialect": "rlinf-embodied"}},
        "gpuNodes": {"instanceType": "p5.48xlarge", "nodeCount": 2},
        "storage": {"sharedFilesystem": {"enabled": True}},
        "kuberay": {"enabled": True},
    },
}  # fmt: skip


@pytest.mark.parametrize("sections", list(TRAININGS.values()), ids=list(TRAININGS))
def test_rlinf_training(sections):
    shared = sections["storage"]["sharedFilesystem"]["enabled"]
    refs = {"service_account_name": "training-sa", "bucket_name": "my-checkpoints", "shared_volume_claim": "shared-fs" if shared else None}

    def python():
        hf_token = pulumi.Output.secret("hf_x")
        RlinfTraining("rlinf", settings=TrainingSettings.model_validate(sections), hf_token=hf_token, controllers_installed=True,
                      opts=pulumi.ResourceOptions(provider=_provider()), **refs)  # fmt: skip

    def hosted():
        values = {**sections, "serviceAccountName": "training-sa", "bucketName": "my-checkpoints", "hfToken": "hf_x"}
        if shared:
            values["sharedVolumeClaim"] = "shared-fs"
        state = construct("RlinfTraining", "rlinf", values, pulumi.ResourceOptions(providers={"kubernetes": _provider()})).state
        assert set(state) == {"entrypoint"}

    expected = resources(python)
    assert any(r["type"] == "kubernetes:core/v1:ConfigMap" for r in expected)
    assert resources(hosted) == expected


@pytest.mark.parametrize("stack", ["single-node", "multi-node-kuberay", "capacity-block", "platform"])
def test_rlinf_stack_is_the_stack_planned_by_the_cli(stack):
    """RlinfStack with a stack file's sections: the resources of ``python -m rlinf_eks plan STACK``,
    each one level down (under the component)."""
    config = load(ROOT, stack)
    data, problems = pulumi_config.stack_data(config.values)
    assert not problems
    region = data.pop("region")

    def hosted():
        construct("RlinfStack", "stack", data)

    expected = plan_stack(stack).to_json()["resources"]
    got = resources(hosted, stack=stack, config={"aws:region": region})
    stack_component = [r for r in got if r["type"] == "rlinf-eks:index:RlinfStack"]
    assert len(stack_component) == 1
    assert all(r["parent"] for r in got if r["type"] != "rlinf-eks:index:RlinfStack" and not r["type"].startswith("pulumi:providers:"))
    assert without_component(got, "rlinf-eks:index:RlinfStack", stack) == expected


# --- the programs in other languages (docs/components.md) ----------------------------------------

README_SECTION = "### From TypeScript, YAML and other languages"


def _readme_blocks(language: str) -> list[str]:
    from tests import docs_text

    return docs_text.fenced(docs_text.section(docs_text.DOCS / "components.md", README_SECTION), language)


def test_the_readmes_yaml_program_constructs_and_plans():
    import yaml

    from rlinf_eks.hosted.provider import schema

    (block,) = _readme_blocks("yaml")
    program = yaml.safe_load(block)
    package = schema()
    for name, resource in program["resources"].items():
        spec = package["resources"][resource["type"]]
        properties = {k: ("hf_example" if v == "${hfToken}" else v) for k, v in resource["properties"].items()}
        assert set(properties) <= set(spec["inputProperties"])
        component = resource["type"].rsplit(":", 1)[1]
        resources(lambda: construct(component, name, properties))
    for reference in program["outputs"].values():
        resource, output = reference.strip("${}").split(".")
        assert output in package["resources"][program["resources"][resource]["type"]]["properties"]


def test_the_readmes_typescript_program_uses_the_schemas_names():
    import re

    from rlinf_eks.hosted.provider import schema

    (block,) = _readme_blocks("typescript")
    package = schema()["resources"]
    calls = re.findall(r"new rlinf\.(\w+)\(\"[^\"]+\", \{(.*?)\}(?:, \{|\))", block, flags=re.S)
    assert [c for c, _ in calls] == ["DevicePlugins", "EfaGpuNodeGroup"]
    for component, body in calls:
        body = re.sub(r"\{[^{}]*\}", "", body)
        keys = set(re.findall(r"(\w+)\s*(?=[:,]|$)", body.strip()))
        keys = {k for k in keys if not re.search(rf"[.(]{k}", body)}  # property names, not the values' words
        assert keys and keys <= set(package[f"rlinf-eks:index:{component}"]["inputProperties"]), (component, keys)
    for output in re.findall(r"nodes\.(\w+)", block):
        assert output in package["rlinf-eks:index:EfaGpuNodeGroup"]["properties"]
