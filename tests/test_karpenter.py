"""Karpenter for the GPU nodes (gpuNodes.provisioner: karpenter): the EC2NodeClass and NodePool
against the v1.14.1 CRDs (CEL rules included), the EFA layout from the catalog, the settings that
cannot work together, and the plans of the multi-node and capacity-block stacks with it."""

from __future__ import annotations

import json
import re

import pytest

from rlinf_eks import catalog, karpenter_specs as specs
from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError, GpuNodeSettings
from rlinf_eks.kueue import gpu_flavor_names
from rlinf_eks.quota import queue_plan
from rlinf_eks.scheduling import DO_NOT_DISRUPT_ANNOTATION, GPU_TAINT, NODE_POOL_LABEL
from tests.harness import ROOT, manifests, plan_stack, settings
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
    assert specs.efa_devices(gpu) == len(template) == min(gpu.instance.network_cards, gpu.instance.max_efa)
    # one ENA primary, then one efa-only on every card the template wires
    assert interfaces[0] == specs.NodeClassInterface(0, 0, "interface")
    assert sorted(n.network_card_index for n in interfaces if n.interface_type == "efa-only") == [n.network_card_index for n in template]
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
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20251120"}]
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
        ({"autoscaler": {"enabled": True}}, "autoscaler.enabled=True", "two autoscalers"),
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
        ((KARPENTER, "autoscaler.enabled=true"), "autoscaler.enabled=True"),
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


# --- end to end: the plans --------------------------------------------------------------------------


def _karpenter_objects(plan) -> tuple[dict, dict]:
    files = manifests(plan)
    return files["ec2nodeclass-cluster-rlinf-gpu.yaml"], files["nodepool-cluster-rlinf-gpu.yaml"]


@pytest.mark.parametrize("stack", ["multi-node", "capacity-block"])
def test_the_stack_plans_a_node_pool_and_node_class_that_pass_the_crds(stack):
    plan = plan_stack(stack, KARPENTER)
    node_class, pool = _karpenter_objects(plan)
    assert karpenter_errors(node_class) == [] and karpenter_errors(pool) == []
    instance = catalog.lookup(pool["spec"]["template"]["spec"]["requirements"][0]["values"][0])
    interfaces = node_class["spec"]["networkInterfaces"]
    assert sum(1 for n in interfaces if n["interfaceType"] == "efa-only") == len(catalog.efa_interfaces_for(instance)) == instance.max_efa
    assert pool["spec"]["template"]["spec"]["taints"] == [GPU_TAINT.as_dict()]
    types = {r["type"] for r in plan.resources}
    assert "aws:ec2/launchTemplate:LaunchTemplate" not in types
    assert not [r for r in plan.resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"] == "gpu-nodes"]  # only the system nodes' group
    assert {"aws:sqs/queue:Queue", "aws:eks/accessEntry:AccessEntry", "aws:eks/podIdentityAssociation:PodIdentityAssociation"} <= types
    assert plan.outputs["gpuNodeGroup"] is None and plan.outputs["gpuNodePool"] == "rlinf-gpu"


def test_multi_node_on_p5_plans_32_efa_devices_and_the_placement_group():
    node_class, pool = _karpenter_objects(plan_stack("multi-node", KARPENTER))
    assert sum(1 for n in node_class["spec"]["networkInterfaces"] if n["interfaceType"] == "efa-only") == 32
    assert node_class["spec"]["placementGroupSelector"]["name"]
    assert pool["spec"]["template"]["spec"]["requirements"][0]["values"] == ["p5.48xlarge"]


def test_the_capacity_block_stack_launches_into_its_block_only_without_a_placement_group():
    node_class, pool = _karpenter_objects(plan_stack("capacity-block", KARPENTER))
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert "placementGroupSelector" not in node_class["spec"]
    requirements = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["reserved"]


def test_training_pods_cannot_be_disrupted_and_the_flavor_selects_the_pool():
    files = manifests(plan_stack("multi-node", KARPENTER))
    text = json.dumps(files["jobset-rlinf-training.yaml"])
    key, value = next(iter(DO_NOT_DISRUPT_ANNOTATION.items()))
    assert f'"{key}": "{value}"' in text
    assert files["resourceflavor-cluster-rlinf-gpu.yaml"]["spec"]["nodeLabels"][NODE_POOL_LABEL] == "rlinf-gpu"
    # the managed stack's pods carry no Karpenter annotation
    assert key not in json.dumps(manifests(plan_stack("multi-node"))["jobset-rlinf-training.yaml"])


def test_the_controller_release_is_pinned_on_the_system_nodes_with_its_queue():
    plan = plan_stack("multi-node", KARPENTER)
    release = next(r for r in plan.resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == specs.CHART)
    assert release["inputs"]["version"] == "1.14.1"
    values = release["inputs"]["values"]
    assert values["nodeSelector"]["role"] == "system" and values["settings"]["clusterName"] == "rlinf-multi-node"
    assert values["settings"]["interruptionQueue"]
    rules = [r for r in plan.resources if r["type"] == "aws:cloudwatch/eventRule:EventRule"]
    assert sorted(json.loads(r["inputs"]["eventPattern"])["detail-type"][0] for r in rules) == sorted(
        p["detail-type"][0] for p in specs.INTERRUPTION_EVENTS.values()
    )


def test_the_deployer_policy_covers_the_controllers_aws_resources():
    from rlinf_eks.offline.plan import deployer_policy_of_plan

    policy = deployer_policy_of_plan(plan_stack("multi-node", KARPENTER))
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    assert {"sqs:CreateQueue", "sqs:SetQueueAttributes", "events:PutRule", "events:PutTargets", "eks:CreateAccessEntry",
            "eks:CreatePodIdentityAssociation"} <= actions  # fmt: skip
    # and no managed node group or launch template: nothing of theirs is asked for
    assert "eks:CreateNodegroup" in actions  # the system nodes' group (pulumi-eks) stays
    assert "ec2:CreateLaunchTemplateVersion" not in actions


# --- the policies hold for the EC2NodeClass path -----------------------------------------------------


def test_the_karpenter_plans_pass_every_policy():
    from rlinf_eks import policies

    for stack in ("multi-node", "capacity-block"):
        plan = plan_stack(stack, KARPENTER)
        assert policies.evaluate(plan.resources) == [], stack


def _break(plan, edit) -> list:
    import copy

    from rlinf_eks import policies

    resources = copy.deepcopy(plan.resources)
    node_class = next(r for r in resources if r["type"] == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    edit(node_class["inputs"]["spec"], resources)
    return [(v.policy, v.message) for v in policies.evaluate(resources)]


@pytest.mark.parametrize(
    "edit, policy, says",
    [
        (lambda spec, _: spec["metadataOptions"].update(httpTokens="optional"), "imdsv2-required", "IMDSv2"),
        (lambda spec, _: spec["blockDeviceMappings"][0]["ebs"].update(encrypted=False), "ebs-encrypted", "not encrypted"),
        (lambda spec, _: spec.pop("placementGroupSelector"), "efa-node-class", "placement group"),
        (lambda spec, _: spec["subnetSelectorTerms"].append({"id": "subnet-0other"}), "efa-node-class", "exactly one subnet"),
        (
            lambda spec, resources: resources.remove(next(r for r in resources if r["type"] == "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")),
            "efa-node-class",
            "from and to itself",
        ),
    ],
)
def test_a_node_class_that_breaks_a_rule_is_reported(edit, policy, says):
    found = _break(plan_stack("multi-node", KARPENTER), edit)
    assert any(p == policy and says in message for p, message in found), found


def test_the_quota_counts_the_largest_allowed_type_at_max_nodes():
    from rlinf_eks.quotas import needed

    s = settings(gpuNodes={"provisioner": "karpenter", "nodeCount": 2, "maxNodes": 4, "fallbackInstanceTypes": ["p5e.48xlarge"]})
    gpu = needed(s)[0]
    assert gpu.code == "L-417A185B" and gpu.vcpus == 4 * 192 and "p5.48xlarge or p5e.48xlarge" in gpu.what


# --- idle costs nothing -------------------------------------------------------------------------------


def test_idle_no_gpu_node_exists_and_the_report_and_cost_say_so():
    from rlinf_eks.offline.efficiency import efficiency_report

    plan = plan_stack("multi-node", KARPENTER, "gpuNodes.maxNodes=4")
    report = efficiency_report(plan, plan.settings, on_date="2026-06-01")
    assert report["nodeGroups"] == ["gpu-node-pool"]
    assert report["nodes"]["min"] == 0 and report["nodes"]["max"] == 4 and report["nodes"]["whileTraining"] == 2
    cost = report["cost"]
    assert cost["perHourIdle"] == 0 and cost["perHourWhileTraining"] == 2 * cost["onDemandPerNodeHour"]
    gpu_items = {i["item"]: i for i in cost["items"] if i["item"] in ("gpuNodes", "gpuNodeVolumes")}
    assert gpu_items["gpuNodes"]["perHourIdle"] == 0 and gpu_items["gpuNodeVolumes"]["perHourIdle"] == 0
    assert report["efaInterfaces"]["perNode"] == 32 and report["placement"]["oneAvailabilityZone"]
    # the managed group of the same stack bills its nodes while idle
    managed = efficiency_report(plan_stack("multi-node"), plan_stack("multi-node").settings, on_date="2026-06-01")
    assert managed["cost"]["perHourIdle"] == cost["perHourWhileTraining"]


# --- hugepages: Karpenter must know the nodes have them ------------------------------------------------


def test_the_hugepages_the_pods_ask_for_are_declared_to_karpenter_by_a_node_overlay():
    plan = plan_stack("multi-node", KARPENTER)
    files = manifests(plan)
    overlay = files["nodeoverlay-cluster-rlinf-gpu-hugepages.yaml"]
    asked = {c["resources"]["requests"].get("hugepages-2Mi") for c in _training_containers(files["jobset-rlinf-training.yaml"])} - {None}
    assert overlay["spec"]["capacity"] == {"hugepages-2Mi": "5Gi"} and asked == {"5Gi"}
    assert overlay["spec"]["requirements"] == [{"key": NODE_POOL_LABEL, "operator": "In", "values": ["rlinf-gpu"]}]
    # NodeOverlay is alpha: the release turns its feature gate on
    release = next(r for r in plan.resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == specs.CHART)
    assert release["inputs"]["values"]["settings"]["featureGates"] == {"nodeOverlay": True, "nodeRepair": True}  # autoRepair on
    assert specs.node_overlay_spec(_gpu(hugepagesGib=0)) is None


def _training_containers(obj: dict) -> list[dict]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "containers" in node:
                found.extend(node["containers"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(obj)
    return [c for c in found if "nvidia.com/gpu" in ((c.get("resources") or {}).get("requests") or {})]


def test_with_a_fallback_type_each_flavor_pins_its_type_and_the_queue_objects_pass_the_kueue_crds():
    from tests.schemas import kueue_errors

    plan = plan_stack("multi-node", KARPENTER, "gpuNodes.fallbackInstanceTypes[0]=p5e.48xlarge", "gpuNodes.maxNodes=4")
    files = manifests(plan)
    flavors = {name: obj for name, obj in files.items() if obj["kind"] == "ResourceFlavor"}
    labels = {obj["metadata"]["name"]: obj["spec"]["nodeLabels"] for obj in flavors.values()}
    assert labels["rlinf-gpu"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert labels["rlinf-gpu-p5e-48xlarge"]["node.kubernetes.io/instance-type"] == "p5e.48xlarge"
    assert all(v[NODE_POOL_LABEL] == "rlinf-gpu" for v in labels.values())
    queue = next(obj for obj in files.values() if obj["kind"] == "ClusterQueue")
    assert [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]] == ["rlinf-gpu", "rlinf-gpu-p5e-48xlarge"]
    for obj in [*flavors.values(), queue]:
        assert kueue_errors(obj) == [], obj["metadata"]["name"]
    _, pool = _karpenter_objects(plan)
    assert karpenter_errors(pool) == [] and pool["spec"]["limits"] == {"nvidia.com/gpu": "32"}


def test_verify_expects_the_controller_its_crds_and_no_gpu_node_at_rest():
    from rlinf_eks.verify.expect import expectation_of

    expected = expectation_of(plan_stack("multi-node", KARPENTER).settings, "multi-node")
    assert {c.name for c in expected.crds} >= {"nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws", "nodeoverlays.karpenter.sh"}
    assert ("kube-system", "karpenter") in {(c.namespace, c.name) for c in expected.controllers}
    assert expected.gpu.min_count == 0 and "NodePool rlinf-gpu" in expected.gpu.zero_reason
    assert "gpuNodePool" in expected.gpu.node_group
    managed = expectation_of(plan_stack("multi-node").settings, "multi-node")
    assert managed.gpu.min_count == 2 and not any("karpenter" in c.name for c in managed.crds)


def test_the_release_values_are_keys_of_the_charts_values_yaml_and_a_typo_is_caught():
    from tests.schemas import release_values_errors

    values = specs.helm_values(cluster_name="c", queue_name="q", replicas=2, node_overlay=True, node_repair=True)
    inputs = {"chart": specs.CHART, "version": "1.14.1", "values": values}
    assert release_values_errors(inputs) == []
    values["settings"]["interruptionQueu"] = "q"
    assert release_values_errors(inputs) == [
        "karpenter-1.14.1: values key 'settings.interruptionQueu' is not in the chart's values.yaml (Helm would ignore it)"
    ]


# --- the component under mocks ------------------------------------------------------------------------


def _run_component(**gpu):
    import pulumi

    from rlinf_eks.karpenter import KarpenterGpuNodes
    from tests.harness import run_component

    def build():
        provider = pulumi.ProviderResource("kubernetes", "k8s", {})
        KarpenterGpuNodes(
            "gpu",
            settings={"provisioner": "karpenter", **gpu},
            cluster_name="rlinf-test",
            cluster_security_group_id="sg-0cluster",
            subnet_id="subnet-0abc",
            zone="us-west-2b",
            region="us-west-2",
            system_nodes=1,
            tags={"project": "rlinf-eks"},
            opts=pulumi.ResourceOptions(provider=provider),
        )

    return run_component(build)


def test_the_component_wires_the_queue_the_identity_the_access_entry_and_the_node_class_by_id():
    from rlinf_eks.testing import one

    run = _run_component(capacityReservationId="cr-0123456789abcdef0")
    entry = one(run, "aws:eks/accessEntry:AccessEntry")["inputs"]
    assert entry["type"] == "EC2_LINUX" and entry["clusterName"] == "rlinf-test"
    association = one(run, "aws:eks/podIdentityAssociation:PodIdentityAssociation")["inputs"]
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", "karpenter")
    trust = json.loads(one(run, "aws:iam/role:Role", "gpu-controller")["inputs"]["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    queue = one(run, "aws:sqs/queue:Queue")["inputs"]
    assert queue["sqsManagedSseEnabled"] is True and queue["messageRetentionSeconds"] == 300
    policy = json.loads(one(run, "aws:iam/rolePolicy:RolePolicy")["inputs"]["policy"])
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert re.fullmatch(r"arn:aws:sqs:[a-z0-9-]+:\d{12}:gpu-interruption-[0-9a-f]{7}", by_sid["InterruptionQueue"]["Resource"])
    assert by_sid["DescribeOwnCluster"]["Resource"].endswith(":cluster/rlinf-test")
    assert by_sid["DeleteOwned"]["Condition"]["StringEquals"] == {"aws:ResourceTag/kubernetes.io/cluster/rlinf-test": "owned"}
    queue_policy = json.loads(one(run, "aws:sqs/queuePolicy:QueuePolicy")["inputs"]["policy"])
    assert queue_policy["Statement"][0]["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    assert len(run.of_type("aws:cloudwatch/eventRule:EventRule")) == len(run.of_type("aws:cloudwatch/eventTarget:EventTarget")) == 5
    node_class = one(run, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")["inputs"]
    assert node_class["spec"]["subnetSelectorTerms"] == [{"id": "subnet-0abc"}]
    assert node_class["spec"]["securityGroupSelectorTerms"][0] == {"id": "sg-0cluster"} and len(node_class["spec"]["securityGroupSelectorTerms"]) == 2
    assert "placementGroupSelector" not in node_class["spec"]  # a reservation places the nodes
    assert not run.of_type("aws:ec2/placementGroup:PlacementGroup")
    release = one(run, "kubernetes:helm.sh/v3:Release")["inputs"]
    assert release["values"]["replicas"] == 1  # one system node: one controller
    pool = one(run, "kubernetes:karpenter.sh/v1:NodePool")["inputs"]
    assert pool["spec"]["template"]["spec"]["requirements"][2] == {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]}


def test_the_component_refuses_a_managed_provisioner():
    with pytest.raises(Exception, match="provisioner: karpenter"):
        _run_component(provisioner="managed")
