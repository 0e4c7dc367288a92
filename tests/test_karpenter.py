"""Karpenter for the GPU nodes (gpuNodes.provisioner: karpenter), as pure functions: the
EC2NodeClass and NodePool against the v1.14.1 CRDs (CEL rules included), the EFA layout from the
catalog, the settings that cannot work together (config and CLI, exit 2), the Kueue flavors, the
chart values and the quota. The plans end to end: tests/test_karpenter_plans.py."""

from __future__ import annotations

import pytest

from rlinf_eks import catalog, karpenter_specs as specs
from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError, GpuNodeSettings
from rlinf_eks.kueue import gpu_flavor_names
from rlinf_eks.quota import queue_plan
from rlinf_eks.scheduling import GPU_TAINT
from tests.harness import ROOT, settings
from tests.schemas import karpenter_errors

KARPENTER = "gpuNodes.provisioner=karpenter"


def _gpu(**values) -> GpuNodeSettings:
    return GpuNodeSettings.model_validate({"provisioner": "karpenter", **values})


def _node_class(gpu: GpuNodeSettings, placement: str | None = "pg-name") -> dict:
    spec = specs.node_class_spec(
        gpu, role_name="gpu-node-role", subnet_id="subnet-0abc", security_group_ids=["sg-0cluster", "sg-0efa"],
        placement_group=placement, tags={"project": "rlinf-eks"},
    )  # fmt: skip
    return {"apiVersion": specs.NODE_CLASS_API_VERSION, "kind": "EC2NodeClass", "metadata": {"name": "rlinf-gpu"}, "spec": spec}


def _node_pool(gpu: GpuNodeSettings) -> dict:
    spec = specs.node_pool_spec(gpu, zone="us-east-1a")
    return {"apiVersion": specs.NODE_POOL_API_VERSION, "kind": "NodePool", "metadata": {"name": "rlinf-gpu"}, "spec": spec}


# --- pure: the EFA layout ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(n for n, row in catalog.CATALOG.items() if row.efa_capable))
def test_the_node_class_has_as_many_efa_devices_as_the_launch_template(name):
    gpu = _gpu(instanceType=name)
    interfaces = specs.node_class_interfaces(gpu)
    template = catalog.efa_interfaces_for(gpu.instance)
    assert specs.efa_devices(gpu) == catalog.efa_device_count(gpu.instance) == min(gpu.instance.network_cards, gpu.instance.max_efa)
    # one ENA primary, then one efa-only on every card the template wires
    assert interfaces[0] == specs.NodeClassInterface(0, 0, "interface")
    assert sorted(n.network_card_index for n in interfaces if n.interface_type == "efa-only") == [
        n.network_card_index for n in template if n.interface_type in catalog.EFA_INTERFACE_TYPES
    ]
    assert karpenter_errors(_node_class(gpu)) == []


def test_p5_gets_32_efa_only_interfaces_one_per_card():
    gpu = _gpu()
    efa_only = [n for n in specs.node_class_interfaces(gpu) if n.interface_type == "efa-only"]
    assert len(efa_only) == 32 and {n.network_card_index for n in efa_only} == set(range(32))


def test_without_efa_the_node_class_has_no_interfaces_and_karpenter_its_default():
    gpu = _gpu(instanceType="g5.2xlarge", efa=False)
    assert "networkInterfaces" not in _node_class(gpu)["spec"]
    assert karpenter_errors(_node_class(gpu)) == []


def test_the_crd_rules_refuse_a_layout_without_its_primary_or_with_two_efa_on_a_card():
    # the CEL rules run for real: the layout above passes because it is right, not because nothing is checked
    obj = _node_class(_gpu())
    obj["spec"]["networkInterfaces"][0]["interfaceType"] = "efa-only"
    assert any("primary interface" in e for e in karpenter_errors(obj))
    obj = _node_class(_gpu())
    obj["spec"]["networkInterfaces"].append({"networkCardIndex": 1, "deviceIndex": 2, "interfaceType": "efa-only"})
    assert any("at most one efa device per network card" in e for e in karpenter_errors(obj))
    obj = _node_class(_gpu())
    obj["spec"]["networkInterfaces"][1]["interfaceType"] = "efa"
    assert karpenter_errors(obj)  # not an interface type Karpenter knows


# --- pure: the node class is the launch template ---------------------------------------------------


def test_the_node_class_carries_imdsv2_the_volume_the_hugepages_and_the_selectors_by_id():
    spec = _node_class(_gpu(rootVolumeGib=500, hugepagesGib=5))["spec"]
    assert spec["metadataOptions"] == {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpTokens": "required", "httpPutResponseHopLimit": 2}
    assert spec["blockDeviceMappings"] == [
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "500Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}}
    ]
    assert "vm.nr_hugepages = 2560" in spec["userData"] and "NodeConfig" not in spec["userData"]
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0abc"}]
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-0cluster"}, {"id": "sg-0efa"}]
    assert spec["placementGroupSelector"] == {"name": "pg-name"}
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert spec["kubelet"] == {"maxPods": catalog.max_pods(catalog.lookup("p5.48xlarge"))}


def test_raid0_is_karpenters_instance_store_policy_not_a_second_node_config():
    spec = _node_class(_gpu(localNvmeRaid0=True))["spec"]
    assert spec["instanceStorePolicy"] == "RAID0" and "NodeConfig" not in spec["userData"]
    assert karpenter_errors(_node_class(_gpu(localNvmeRaid0=True))) == []


@pytest.mark.parametrize(
    "values, capacity, term",
    [
        ({}, ["on-demand"], None),
        ({"capacityReservationId": "cr-0123456789abcdef0"}, ["reserved", "on-demand"], "cr-0123456789abcdef0"),
        ({"instanceType": "p5en.48xlarge", "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef1"}, ["reserved"], "cr-0123456789abcdef1"),
        ({"capacityType": "SPOT"}, ["spot"], None),
    ],
)
def test_reservations_come_first_and_are_selected_by_id(values, capacity, term):
    gpu = _gpu(**values)
    pool, node_class = _node_pool(gpu), _node_class(gpu, None if gpu.reserved_capacity else "pg")
    requirements = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == capacity
    assert node_class["spec"].get("capacityReservationSelectorTerms") == ([{"id": term}] if term else None)
    assert specs.wants_placement_group(gpu) is (term is None)
    assert karpenter_errors(pool) == [] and karpenter_errors(node_class) == []


def test_the_node_pool_has_the_managed_groups_taint_and_labels_the_types_in_order_and_gpu_limits():
    gpu = _gpu(nodeCount=2, maxNodes=4, fallbackInstanceTypes=["p5e.48xlarge"], labels={"team": "vla"})
    spec = _node_pool(gpu)["spec"]
    template = spec["template"]
    assert template["spec"]["taints"] == [GPU_TAINT.as_dict()]
    assert template["metadata"]["labels"] == {"role": "gpu-training", "vpc.amazonaws.com/efa.present": "true", "team": "vla"}
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"] == ["p5.48xlarge", "p5e.48xlarge"]
    assert requirements["topology.kubernetes.io/zone"] == ["us-east-1a"]
    assert spec["limits"] == {"nvidia.com/gpu": "32"}  # 4 nodes x 8 GPUs
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"}
    assert karpenter_errors(_node_pool(gpu)) == []


def test_the_node_pool_crd_refuses_what_the_spec_must_not_do():
    pool = _node_pool(_gpu())
    pool["spec"]["template"]["spec"]["requirements"].append({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]})
    assert karpenter_errors(pool)  # a restricted label: the CEL rule fires


# --- pure: settings that cannot work together -------------------------------------------------------


@pytest.mark.parametrize(
    "values, key, says",
    [
        ({"fallbackInstanceTypes": ["p5en.48xlarge"]}, "fallbackInstanceTypes[0]='p5en.48xlarge'", "16 EFA interfaces"),
        ({"fallbackInstanceTypes": ["p4d.24xlarge"]}, "fallbackInstanceTypes[0]='p4d.24xlarge'", "same shape: p5e.48xlarge"),
        ({"fallbackInstanceTypes": ["p5.48xlarge"]}, "fallbackInstanceTypes[0]='p5.48xlarge'", "listed twice"),
        ({"fallbackInstanceTypes": ["m5.large"]}, "fallbackInstanceTypes[0]='m5.large'", "not in the catalog"),
        ({"amiType": "BOTTLEROCKET_x86_64_NVIDIA"}, "amiType='BOTTLEROCKET_x86_64_NVIDIA'", "AL2023"),
        ({"karpenter": {"amiAlias": "al2023@latest"}}, "karpenter.amiAlias='al2023@latest'", "pinned"),
        (
            {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0", "fallbackInstanceTypes": ["p5e.48xlarge"]},
            "fallbackInstanceTypes[0]='p5e.48xlarge'", "a Capacity Block holds one instance type",
        ),
        ({"provisioner": "managed", "fallbackInstanceTypes": ["p5e.48xlarge"]}, "fallbackInstanceTypes=['p5e.48xlarge']", "only with provisioner karpenter"),
    ],
)  # fmt: skip
def test_settings_that_cannot_work_name_their_key(values, key, says):
    with pytest.raises(ConfigError) as caught:
        settings(gpuNodes={"provisioner": "karpenter", **values})
    text = str(caught.value)
    assert key in text and says in text, text


@pytest.mark.parametrize(
    "sections, key, says",
    [
        ({"autoscaler": {"enabled": True}}, "autoscaler.enabled=true", "two autoscalers"),
        ({"gpuNodes": {"fallbackInstanceTypes": ["p5e.48xlarge"]}, "queue": {"enabled": False}}, "gpuNodes.fallbackInstanceTypes", "queue.enabled"),
        (
            {"gpuNodes": {"fallbackInstanceTypes": ["p5e.48xlarge"]}, "queue": {"enabled": True}, "kuberay": {"enabled": True},
             "workload": {"launcher": "kuberay"}},
            "gpuNodes.fallbackInstanceTypes", "separate Kueue pod sets",
        ),
    ],
)
def test_stack_rules_refuse_karpenter_with_the_autoscaler_or_fallbacks_without_the_queue(sections, key, says):
    gpu = {"provisioner": "karpenter", **sections.pop("gpuNodes", {})}
    with pytest.raises(ConfigError) as caught:
        settings(gpuNodes=gpu, **sections)
    assert key in str(caught.value) and says in str(caught.value), str(caught.value)


def test_karpenter_on_an_existing_cluster_is_refused():
    with pytest.raises(ConfigError) as caught:
        settings(
            gpuNodes={"provisioner": "karpenter"},
            cluster={"existing": True, "name": "theirs"},
            network={"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0a", "subnet-0b"], "gpuSubnetId": "subnet-0a"},
        )
    assert "gpuNodes.provisioner='karpenter'" in str(caught.value) and "existing" in str(caught.value)


@pytest.mark.parametrize(
    "sets, says",
    [
        ((KARPENTER, "autoscaler.enabled=true"), "autoscaler.enabled=true"),
        ((KARPENTER, "gpuNodes.fallbackInstanceTypes[0]=p5en.48xlarge"), "gpuNodes.fallbackInstanceTypes[0]='p5en.48xlarge'"),
    ],
)
def test_the_cli_refuses_them_with_exit_2_and_no_traceback(monkeypatch, capsys, tmp_path, sets, says):
    monkeypatch.chdir(ROOT)
    status = main(["plan", "multi-node", "--quiet", "--out", str(tmp_path), *(a for s in sets for a in ("--set", s))])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and "Traceback" not in err
    assert says in err, err


# --- the queue: one type per run, quota from the pool's limits -------------------------------------


def test_each_allowed_type_is_a_kueue_flavor_of_its_own_in_order():
    s = settings(gpuNodes={"provisioner": "karpenter", "maxNodes": 4, "fallbackInstanceTypes": ["p5e.48xlarge"]}, queue={"enabled": True})
    assert gpu_flavor_names(s) == [("rlinf-gpu", "p5.48xlarge"), ("rlinf-gpu-p5e-48xlarge", "p5e.48xlarge")]
    plan = queue_plan(s)
    assert plan.nodes == 4 and "NodePool" in plan.nodes_from  # the pool's limits, not nodeCount
    assert not plan.topology.on and "Karpenter" in plan.topology.reason


def test_the_release_values_are_keys_of_the_charts_values_yaml_and_a_typo_is_caught():
    from tests.schemas import release_values_errors

    values = specs.helm_values(cluster_name="c", queue_name="q", replicas=2, node_overlay=True, node_repair=True)
    inputs = {"chart": specs.CHART, "version": "1.14.1", "values": values}
    assert release_values_errors(inputs) == []
    values["settings"]["interruptionQueu"] = "q"
    assert release_values_errors(inputs) == [
        "karpenter-1.14.1: values key 'settings.interruptionQueu' is not in the chart's values.yaml (Helm would ignore it)"
    ]


def test_the_quota_counts_the_largest_allowed_type_at_max_nodes():
    from rlinf_eks.quotas import needed

    s = settings(gpuNodes={"provisioner": "karpenter", "nodeCount": 2, "maxNodes": 4, "fallbackInstanceTypes": ["p5e.48xlarge"]})
    gpu = needed(s)[0]
    assert gpu.code == "L-417A185B" and gpu.vcpus == 4 * 192 and "p5.48xlarge or p5e.48xlarge" in gpu.what
