"""rlinf_eks.plan_reader: the one reader of plan resources that the policies and the efficiency
report share, so both see the same node groups, launch templates and pods."""

from __future__ import annotations

import re

import pytest

from rlinf_eks import catalog, plan_reader as R, policies
from rlinf_eks.offline.outputs.efficiency import efficiency_of
from tests.harness import ROOT

P5 = catalog.CATALOG["p5.48xlarge"]


def res(type_: str, name: str, inputs: dict, id_: str | None = None, **extra) -> dict:
    return {"urn": f"urn:pulumi:t::p::{type_}::{name}", "type": type_, "name": name, "id": id_ or f"{name}-id",
            "inputs": inputs, "options": {}, **extra}


def efa_template(placement: str | None = None) -> dict:
    inputs = {"instanceType": "p5.48xlarge", "networkInterfaces": [
        {"deviceIndex": 0, "networkCardIndex": 0, "interfaceType": "efa", "securityGroups": []},
        {"deviceIndex": 1, "networkCardIndex": 1, "interfaceType": "efa-only", "securityGroups": []},
        {"deviceIndex": 2, "networkCardIndex": 2, "interfaceType": "interface", "securityGroups": []},
    ], "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 500}}]}
    if placement:
        inputs["placement"] = {"groupName": placement}
    return res(R.LAUNCH_TEMPLATE, "gpu-lt", inputs, id_="lt-1")


@pytest.mark.parametrize("type_", R.NODE_GROUP_TYPES)
@pytest.mark.parametrize("ref", [{"id": "lt-1"}, {"name": "gpu-lt-name"}])
def test_a_node_group_of_either_type_finds_its_launch_template_by_id_or_name(type_, ref):
    template = efa_template()
    template["inputs"]["name"] = "gpu-lt-name"
    group = res(type_, "gpu", {"launchTemplate": {**ref, "version": "1"}, "scalingConfig": {"minSize": 0, "desiredSize": 2, "maxSize": 4}})
    [found] = R.node_groups([group, template])
    assert found.template is not None and found.template.resource is template
    assert (found.instance_type, found.min_size, found.desired_size, found.max_size) == ("p5.48xlarge", 0, 2, 4)
    assert len(found.efa_interfaces) == 2 and found.template.volume_gib == 500
    assert found.capacity_type == "ON_DEMAND"


def test_an_unknown_launch_template_id_is_followed_through_property_dependencies():
    template = efa_template()
    group = res(R.NODE_GROUP, "gpu", {"launchTemplate": {"id": R.UNKNOWN}}, propertyDependencies={"launchTemplate": [template["urn"]]})
    assert R.node_groups([group, template])[0].template.resource is template
    missing = res(R.NODE_GROUP, "gpu", {"launchTemplate": {"id": "lt-elsewhere"}})
    [found] = R.node_groups([missing, template])
    assert found.template is None and found.template_ref == ["lt-elsewhere"]


def test_instance_types_on_the_node_group_win_over_the_launch_template():
    group = res(R.NODE_GROUP, "gpu", {"instanceTypes": ["p5en.48xlarge"], "launchTemplate": {"id": "lt-1"}})
    assert R.node_groups([group, efa_template()])[0].instance_type == "p5en.48xlarge"


def test_a_managed_node_group_of_pulumi_eks_is_checked_by_the_policies_and_counted_by_the_report():
    # GIVEN an eks:index:ManagedNodeGroup with EFA and no placement group
    group = res(R.MANAGED_NODE_GROUP, "gpu", {"launchTemplate": {"id": "lt-1"}, "subnetIds": ["subnet-a"],
                                              "scalingConfig": {"minSize": 1, "desiredSize": 1, "maxSize": 1}})
    resources = [group, efa_template(), res(R.SUBNET, "a", {"availabilityZone": "us-east-1a"}, id_="subnet-a")]
    violations = policies.check_efa_node_groups(resources)
    assert [v.name for v in violations if "placement group" in v.message] == ["gpu"]
    report = efficiency_of(resources, instance=P5, region="us-east-1", on_date="2026-12-01")
    assert report["nodeGroups"] == ["gpu"] and report["efaInterfaces"]["perNode"] == 2
    assert report["placement"]["availabilityZones"] == ["us-east-1a"]


def _spec(gpus: int | str = 0) -> dict:
    return {"containers": [{"name": "c", "resources": {"limits": {R.GPU: gpus}} if gpus else {}}]}


@pytest.mark.parametrize("obj, expected", [
    ({"kind": "Pod", "spec": _spec()}, [("spec", "pod", 1)]),
    ({"kind": "Deployment", "spec": {"replicas": 3, "template": {"spec": _spec()}}}, [("spec.template.spec", "replicas", 3)]),
    ({"kind": "Deployment", "spec": {"template": {"spec": _spec()}}}, [("spec.template.spec", "replicas", 1)]),
    ({"kind": "DaemonSet", "spec": {"template": {"spec": _spec()}}}, [("spec.template.spec", "daemon", None)]),
    ({"kind": "Job", "spec": {"completions": 4, "template": {"spec": _spec()}}}, [("spec.template.spec", "job", 4)]),
    ({"kind": "Job", "spec": {"parallelism": 2, "completions": 4, "template": {"spec": _spec()}}}, [("spec.template.spec", "job", 2)]),
    ({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": _spec()}}}}},
     [("spec.jobTemplate.spec.template.spec", "job", 1)]),
    ({"kind": "RayJob", "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": _spec()}},
                                                    "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "template": {"spec": _spec(8)}}]},
                                 "submitterPodTemplate": {"spec": _spec()}}},
     [("spec.rayClusterSpec.headGroupSpec.template.spec", "head", 1),
      ("spec.rayClusterSpec.workerGroupSpecs[0].template.spec", "gpu", 3),
      ("spec.submitterPodTemplate.spec", "submitter", 1)]),
    ({"kind": "RayService", "spec": {"rayClusterConfig": {"workerGroupSpecs": [{"minReplicas": 2, "template": {"spec": _spec()}}]}}},
     [("spec.rayClusterConfig.workerGroupSpecs[0].template.spec", "worker", 2)]),
    ({"kind": "ConfigMap", "data": {}}, []),
])
def test_pod_templates_of_every_kind_with_their_replicas(obj, expected):
    assert [(t.path, t.role, t.replicas) for t in R.pod_templates(obj)] == expected


def test_unknown_requests_are_refused_unless_skipped():
    container = {"resources": {"limits": {R.GPU: R.UNKNOWN, "cpu": "2"}}}
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        R.container_requests(container)
    assert R.container_requests(container, skip_unknown=True) == {"cpu": 2.0}


def test_the_masks_are_defined_once():
    copies = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "components").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"""["'](\[secret\]|\[unknown\])["']""", line)
    ]
    assert [c.split(":")[0] for c in copies] == ["components/plan_reader.py"] * 2, copies


def test_the_crossguard_unknown_sentinels_are_pulumi_policys():
    from pulumi_policy import proxy

    from rlinf_eks.policies_crossguard import _UNKNOWN_SENTINELS

    assert _UNKNOWN_SENTINELS == {v for k, v in vars(proxy).items() if k.startswith("UNKNOWN_") and k.endswith("_VALUE")}
