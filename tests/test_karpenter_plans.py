"""Karpenter for the GPU nodes, end to end: the multi-node and capacity-block stacks planned with
gpuNodes.provisioner=karpenter (the NodePool, EC2NodeClass and NodeOverlay against the v1.14.1
CRDs, the controller, its AWS resources and policies), the policies on the EC2NodeClass path, the
efficiency report at idle, verify's expectations, and the component under mocks."""

from __future__ import annotations

import json
import re

import pytest

from rlinf_eks import catalog, karpenter_specs as specs
from rlinf_eks.config import GpuNodeSettings
from rlinf_eks.scheduling import DO_NOT_DISRUPT_ANNOTATION, GPU_TAINT, NODE_POOL_LABEL
from tests.harness import manifests, plan_stack
from tests.schemas import karpenter_errors

KARPENTER = "gpuNodes.provisioner=karpenter"


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
    from rlinf_eks.offline.outputs.plan import deployer_policy_of_plan

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


# --- idle costs nothing -------------------------------------------------------------------------------


def test_idle_no_gpu_node_exists_and_the_report_and_cost_say_so():
    from rlinf_eks.offline.outputs.efficiency import efficiency_report

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
    assert specs.node_overlay_spec(GpuNodeSettings.model_validate({"provisioner": "karpenter", "hugepagesGib": 0})) is None


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


# --- the diff of a change ---------------------------------------------------------------------------


def test_a_node_class_change_is_drift_that_waits_for_the_run_and_turning_karpenter_off_says_what_goes():
    from rlinf_eks.offline.diff.diff import diff_plans

    base = plan_stack("multi-node", KARPENTER).to_json()
    bigger = diff_plans(base, plan_stack("multi-node", KARPENTER, "gpuNodes.rootVolumeGib=300").to_json())
    drift = [w for w in bigger.gpu_or_cluster_warnings if "EC2NodeClass" in w]
    assert drift and "drifted" in drift[0] and "do-not-disrupt" in drift[0]
    back = diff_plans(base, plan_stack("multi-node").to_json())
    assert any("NodePool" in w and "terminates every GPU node" in w for w in back.gpu_or_cluster_warnings)
