"""Kueue: the release against the chart's real values, the queue objects of every stack against
the real v0.19.2 CRDs (structure and CEL rules), every run queued, ordered after the queue."""

from __future__ import annotations

import copy

import pytest
import yaml

from rlinf_eks import kueue
from rlinf_eks.kueue import chart_values, frameworks, manager_config
from rlinf_eks.offline.outputs.queue import render as render_queue
from rlinf_eks.quota import HOSTNAME_LABEL, NETWORK_LAYER_LABELS, queue_plan
from tests import schemas
from tests.harness import STACKS, manifests, one, plan_stack
from tests.schemas import KUEUE_CRD_FILES, cel_errors, cel_rules, is_transition_rule, jobset_crd_errors, kueue_errors, kueue_schema

RELEASE = "kubernetes:helm.sh/v3:Release"
VARIANTS = [
    ("multi-node-kuberay", "workload.rayjob.cluster=selector"),
    ("multi-node-kuberay", "workload.rayjob.submissionMode=HTTPMode"),
    ("single-node", "queue.topology=off"),
    ("single-node", "queue.topology=required"),
    ("single-node", "gpuNodes.instanceType=g6e.48xlarge"),
    ("multi-node", "queue.preemption=Never"),
]


def kueue_objects(plan) -> list[dict]:
    return [obj for obj in manifests(plan).values() if obj["apiVersion"].startswith("kueue.x-k8s.io/")]


def chart_defaults() -> dict:
    return schemas.chart_values("kueue-0.19.2")


# --- the queue objects against the real CRDs -------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_kueue_object_of_every_stack_validates_against_the_crds_and_their_cel_rules(stack):
    objects = kueue_objects(plan_stack(stack))
    kinds = {o["kind"] for o in objects}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"} <= kinds
    for obj in objects:
        assert kueue_errors(obj) == [], (obj["kind"], obj["metadata"]["name"])


@pytest.mark.parametrize(("stack", "edit"), VARIANTS)
def test_every_kueue_object_of_the_variants_validates(stack, edit):
    for obj in kueue_objects(plan_stack(stack, edit)):
        assert kueue_errors(obj) == [], (edit, obj["kind"], obj["metadata"]["name"])


def test_the_cel_rules_are_evaluated_not_skipped():
    objects = {o["kind"]: o for o in kueue_objects(plan_stack("multi-node-kuberay")) if o["metadata"]["name"] != kueue.SYSTEM_FLAVOR}
    queue = copy.deepcopy(objects["ClusterQueue"])
    queue["spec"]["resourceGroups"][0]["flavors"][1]["resources"].pop()
    assert any("flavors must have the same number of resources as the coveredResources" in e for e in kueue_errors(queue))
    topology = copy.deepcopy(objects["Topology"])
    topology["spec"]["levels"].reverse()
    assert any("kubernetes.io/hostname label can only be used at the lowest level" in e for e in kueue_errors(topology))
    flavor = copy.deepcopy(objects["ResourceFlavor"])
    flavor["spec"]["nodeLabels"] = {}
    assert any("at least one nodeLabel is required when topology is set" in e for e in kueue_errors(flavor))
    flavor["spec"]["nodeLabels"] = {"role": "gpu-training"}
    flavor["spec"]["nodeTaints"][0]["effect"] = "NoEvict"
    assert any("supported taint effect values" in e for e in kueue_errors(flavor))


@pytest.mark.parametrize("kind", sorted(KUEUE_CRD_FILES))
def test_every_create_time_cel_rule_of_the_kinds_used_compiles_and_runs(kind):
    """A rule cel-python could not evaluate would report itself as failed on a valid object; the
    transition rules (oldSelf) run only on updates, which the plan never makes."""
    import celpy

    schema = kueue_schema(kind, "v1beta2")
    for path, rule in cel_rules(schema):
        env = celpy.Environment()
        env.program(env.compile(rule["rule"]))  # raises on a rule it cannot read
        if is_transition_rule(rule):
            assert "oldSelf" in rule["rule"], path
    assert cel_errors(schema, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": "x"}}) == []


# --- the chart ------------------------------------------------------------------------------------


def test_the_release_values_are_keys_the_chart_knows():
    defaults = chart_defaults()
    values = chart_values(plan_stack("multi-node").settings)
    assert schemas.unknown_keys(values, defaults) == []
    assert set(values["controllerManager"]["manager"]["image"]) == set(defaults["controllerManager"]["manager"]["image"])
    assert set(values["managerConfig"]) == set(defaults["managerConfig"])


def test_the_manager_config_is_the_charts_own_with_only_the_integrations_the_stack_uses():
    chart = yaml.safe_load(chart_defaults()["managerConfig"]["controllerManagerConfigYaml"])
    for stack in STACKS:
        settings = plan_stack(stack).settings
        ours = yaml.safe_load(chart_values(settings)["managerConfig"]["controllerManagerConfigYaml"])
        assert ours == manager_config(settings)
        assert {k: v for k, v in ours.items() if k != "integrations"} == {k: v for k, v in chart.items() if k != "integrations"}
        assert set(ours["integrations"]["frameworks"]) <= set(chart["integrations"]["frameworks"])
        # the chart enables pod, deployment, statefulset, ...: their webhooks would see every pod
        assert "pod" in chart["integrations"]["frameworks"] and "pod" not in ours["integrations"]["frameworks"]
    assert frameworks(plan_stack("single-node").settings) == ["batch/job"]
    assert frameworks(plan_stack("multi-node").settings) == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert frameworks(plan_stack("multi-node-kuberay").settings) == ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]


def test_the_release_is_pinned_on_the_system_nodes_with_the_release_image():
    release = one(plan_stack("single-node"), RELEASE, "kueue-controller")["inputs"]
    assert release["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and release["version"] == "0.19.2"
    assert release["namespace"] == "kueue-system" and release["createNamespace"] is True
    manager = release["values"]["controllerManager"]
    assert manager["nodeSelector"] == {"role": "system"}
    # the chart's values.yaml in git names a staging image (release-0.19, pullPolicy Always)
    assert chart_defaults()["controllerManager"]["manager"]["image"]["tag"] != "v0.19.2"
    assert manager["manager"]["image"] == {"repository": "registry.k8s.io/kueue/kueue", "tag": "v0.19.2", "pullPolicy": "IfNotPresent"}


# --- derived from the node group ------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_the_flavor_is_the_gpu_nodes_and_the_quota_the_pool(stack):
    plan = plan_stack(stack)
    settings = plan.settings
    objects = {(o["kind"], o["metadata"]["name"]): o for o in kueue_objects(plan)}
    group = next(
        r for r in plan.resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and (r["inputs"].get("labels") or {}).get("role") == "gpu-training"
    )["inputs"]
    flavor = objects[("ResourceFlavor", kueue.GPU_FLAVOR)]["spec"]
    assert flavor["nodeLabels"] == group["labels"]
    assert flavor["nodeTaints"] == [{"key": t["key"], "value": t["value"], "effect": "NoSchedule"} for t in group["taints"]]
    expected = queue_plan(settings)
    queue = objects[("ClusterQueue", "rlinf")]["spec"]
    gpu = {r["name"]: r["nominalQuota"] for r in queue["resourceGroups"][0]["flavors"][0]["resources"]}
    assert gpu == expected.quota.quantities()
    assert int(gpu["nvidia.com/gpu"]) == settings.gpu_nodes.instance.gpus * expected.nodes
    assert expected.nodes == (group["scalingConfig"]["maxSize"] if settings.autoscaler.enabled else settings.gpu_nodes.node_count)
    local = objects[("LocalQueue", "rlinf")]
    assert local["metadata"]["namespace"] == settings.workload.namespace and local["spec"] == {"clusterQueue": "rlinf"}


def _pod_requests(template: dict) -> dict[str, int]:
    """A pod's requests as Kueue counts them: the larger of (containers + sidecars) and each init
    container (with the sidecars started before it); in MiB / millicores / units."""

    def amount(name: str, value: str) -> int:
        value = str(value)
        if name == "cpu":
            return int(value[:-1]) if value.endswith("m") else int(value) * 1000
        if value.endswith("Gi"):
            return int(value[:-2]) * 1024
        if value.endswith("Mi"):
            return int(value[:-2])
        return int(value)

    def requests(container: dict) -> dict[str, int]:
        return {k: amount(k, v) for k, v in ((container.get("resources") or {}).get("requests") or {}).items()}

    def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}

    spec = template["spec"]
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":
            sidecars = add(sidecars, requests(init))
        else:
            for k, v in add(sidecars, requests(init)).items():
                peak[k] = max(peak.get(k, 0), v)
    total = sidecars
    for container in spec["containers"]:
        total = add(total, requests(container))
    return {k: max(total.get(k, 0), peak.get(k, 0)) for k in {*total, *peak}}


def _run_pod_templates(plan) -> list[tuple[dict, dict, int]]:
    """(the queued object, a pod template, its pod count) of the run."""
    found = []
    for obj in manifests(plan).values():
        if obj["kind"] == "Job" and obj["metadata"]["name"] == "training":
            found.append((obj, obj["spec"]["template"], obj["spec"]["parallelism"]))
        elif obj["kind"] == "JobSet":
            job = obj["spec"]["replicatedJobs"][0]["template"]["spec"]
            found.append((obj, job["template"], job["parallelism"]))
        elif obj["kind"] == "RayJob" and "rayClusterSpec" in obj["spec"]:
            cluster = obj["spec"]["rayClusterSpec"]
            found.append((obj, cluster["headGroupSpec"]["template"], 1))
            found += [(obj, g["template"], g["replicas"]) for g in cluster.get("workerGroupSpecs", [])]
        elif obj["kind"] == "RayCluster":
            found.append((obj, obj["spec"]["headGroupSpec"]["template"], 1))
            found += [(obj, g["template"], g["replicas"]) for g in obj["spec"].get("workerGroupSpecs", [])]
    return found


@pytest.mark.parametrize(("stack", "edit"), [(s, None) for s in STACKS] + VARIANTS)
def test_every_run_is_queued_and_each_pod_asks_exactly_one_nodes_share(stack, edit):
    plan = plan_stack(stack, *([edit] if edit else []))
    settings = plan.settings
    expected = queue_plan(settings)
    templates = _run_pod_templates(plan)
    assert templates
    share = expected.per_node.by_name()
    for obj, template, _count in templates:
        assert obj["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == "rlinf"
        assert obj["metadata"]["labels"][kueue.PRIORITY_CLASS_LABEL] == settings.queue.priority
        # created without spec.suspend: Kueue's webhook suspends it, and Pulumi never sets it back
        assert "suspend" not in obj["spec"]
        assert _pod_requests(template) == share
        annotations = template["metadata"].get("annotations") or {}
        topology = {k: v for k, v in annotations.items() if k.startswith("kueue.x-k8s.io/podset-")}
        assert topology == ({expected.topology.annotation: expected.topology.label} if expected.topology.on else {})
    assert sum(count for _, _, count in templates) == expected.run_nodes
    # every resource a run's pod requests is one the ClusterQueue covers (else Kueue never admits it)
    queue = next(o for o in kueue_objects(plan) if o["kind"] == "ClusterQueue")
    assert set(share) == set(queue["spec"]["resourceGroups"][0]["coveredResources"])


def test_a_rayjob_with_a_long_lived_cluster_queues_the_cluster():
    plan = plan_stack("multi-node-kuberay", "workload.rayjob.cluster=selector")
    found = {o["kind"]: o for o in manifests(plan).values() if o["kind"] in ("RayJob", "RayCluster")}
    # Kueue ignores a RayJob with a clusterSelector ("not managed by Kueue"): the cluster holds the GPUs
    assert kueue.QUEUE_NAME_LABEL not in found["RayJob"]["metadata"]["labels"]
    assert found["RayCluster"]["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == "rlinf"
    assert queue_plan(plan.settings).submitter is None
    assert not [o for o in kueue_objects(plan) if o["metadata"]["name"] == kueue.SYSTEM_FLAVOR]


def test_the_rayjob_submitter_gets_the_system_flavor():
    plan = plan_stack("multi-node-kuberay")
    objects = {(o["kind"], o["metadata"]["name"]): o for o in kueue_objects(plan)}
    assert objects[("ResourceFlavor", kueue.SYSTEM_FLAVOR)]["spec"] == {"nodeLabels": {"role": "system"}}
    job = next(o for o in manifests(plan).values() if o["kind"] == "RayJob")
    submitter = job["spec"]["submitterPodTemplate"]
    system = objects[("ClusterQueue", "rlinf")]["spec"]["resourceGroups"][0]["flavors"][1]
    quota = {r["name"]: r["nominalQuota"] for r in system["resources"]}
    assert quota["cpu"] == submitter["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    assert quota["memory"] == submitter["spec"]["containers"][0]["resources"]["requests"]["memory"]
    assert quota["nvidia.com/gpu"] == "0"


def test_the_topology_is_the_network_layers_then_the_node():
    plan = plan_stack("multi-node")
    topology = next(o for o in kueue_objects(plan) if o["kind"] == "Topology")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [*NETWORK_LAYER_LABELS, HOSTNAME_LABEL]
    flavor = next(o for o in kueue_objects(plan) if o["kind"] == "ResourceFlavor")
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    autoscaled = plan_stack("autoscaled")
    assert not [o for o in kueue_objects(autoscaled) if o["kind"] == "Topology"]
    assert "topologyName" not in next(o for o in kueue_objects(autoscaled) if o["kind"] == "ResourceFlavor")["spec"]


def test_the_queue_can_be_turned_off():
    plan = plan_stack("multi-node", "queue.enabled=false")
    assert kueue_objects(plan) == []
    assert not [r for r in plan.resources if r["type"] == RELEASE and r["name"] == "kueue-controller"]
    jobset = next(o for o in manifests(plan).values() if o["kind"] == "JobSet")
    assert kueue.QUEUE_NAME_LABEL not in jobset["metadata"]["labels"]
    assert "Queue:\n  off" in render_queue(plan.settings, "multi-node")


# --- order ----------------------------------------------------------------------------------------


def _urn(plan, type_, name):
    return one(plan, type_, name)["urn"]


@pytest.mark.parametrize("stack", ["multi-node", "multi-node-kuberay"])
def test_the_release_waits_for_the_controllers_and_the_run_for_the_queue(stack):
    plan = plan_stack(stack)
    release = one(plan, RELEASE, "kueue-controller")
    controller = "jobset-controller" if stack == "multi-node" else "kuberay-operator"
    assert _urn(plan, RELEASE, controller) in release["options"]["dependsOn"]
    training = one(plan, "rlinf-eks:index:RlinfTraining")
    queue_urns = {r["urn"] for r in plan.resources if r["type"].startswith("kubernetes:kueue.x-k8s.io/")}
    assert queue_urns and queue_urns <= set(training["options"]["dependsOn"])
    for resource in plan.resources:
        if resource["type"].startswith("kubernetes:kueue.x-k8s.io/"):
            assert release["urn"] in resource["options"]["dependsOn"]


# --- the JobSet still validates against the released CRD ------------------------------------------


def test_the_queued_jobset_validates_against_the_released_crd():
    jobset = next(o for o in manifests(plan_stack("multi-node")).values() if o["kind"] == "JobSet")
    assert jobset_crd_errors(jobset) == []


# --- the plan -------------------------------------------------------------------------------------


def test_the_plan_says_the_queue_the_asks_the_fit_the_layer_and_what_preemption_costs():
    text = render_queue(plan_stack("multi-node").settings, "multi-node")
    assert "LocalQueue rlinf (namespace rlinf) -> ClusterQueue rlinf" in text
    assert "quota: 2 x node = cpu 380, memory 3766Gi, nvidia.com/gpu 16, vpc.amazonaws.com/efa 64, hugepages-2Mi 10Gi" in text
    assert "can ever fit: yes" in text
    assert "topology: preferred layer 3 (topology.k8s.aws/network-node-layer-3)" in text
    assert "preemption within the queue: LowerPriority" in text
    assert "loses nothing past that checkpoint" in text
    # verl-ppo cannot resume: the plan says a preempted run starts over
    assert "starts over" in render_queue(plan_stack("single-node").settings, "single-node")
    assert "topology: none (the Cluster Autoscaler" in render_queue(plan_stack("autoscaled").settings, "autoscaled")


def test_kueue_queue_alone_from_its_own_sections_builds_the_stacks_queue():
    # a program with its own cluster and node group gives KueueQueue only the sections it reads
    from rlinf_eks.kueue import KueueQueue, KueueSettings
    from tests.harness import run_component, settings as stack_settings

    base = stack_settings(gpuNodes={"nodeCount": 2, "maxNodes": 4}, autoscaler={"enabled": True})
    own = KueueSettings(gpu_nodes=base.gpu_nodes, autoscaler=base.autoscaler, workload=base.workload)

    def objects(s):
        run = run_component(lambda: KueueQueue("q", settings=s, namespace="rlinf"))
        return sorted((r["type"], r["name"], repr(r.get("inputs"))) for r in run if r["type"] != "rlinf-eks:index:KueueQueue")

    assert objects(own) == objects(base)
    assert queue_plan(own.stack_settings()) == queue_plan(base)
