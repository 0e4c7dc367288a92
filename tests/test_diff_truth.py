"""The diff's truths beyond one resource: what a replacement drags along, what `pulumi up`
refuses, the plan-time refusal of a downgrade, and mocks that never invent a change."""

from __future__ import annotations

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.diff.diff import diff_plans
from tests.harness import plan_stack


def _plan(*resources: dict, region: str = "us-east-1") -> dict:
    return {"project": "p", "stack": "s", "region": region, "resources": list(resources), "outputs": {}}


def _r(type_: str, name: str, inputs: dict, id_: str = "", **options) -> dict:
    return {"urn": f"urn:pulumi:s::p::{type_}::{name}", "type": type_, "name": name, "id": id_ or f"{name}-id", "inputs": inputs, "options": options}


def test_a_resource_that_reads_a_replaced_ones_id_is_replaced_when_that_input_is_force_new():
    fsx = "aws:fsx/lustreFileSystem:LustreFileSystem"
    dra = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
    base = _plan(_r(fsx, "fs", {"subnetIds": "subnet-a"}, "fs-1", protect=True), _r(dra, "link", {"fileSystemId": "fs-1", "dataRepositoryPath": "s3://b"}))
    new = _plan(_r(fsx, "fs", {"subnetIds": "subnet-b"}, "fs-1", protect=True), _r(dra, "link", {"fileSystemId": "fs-1", "dataRepositoryPath": "s3://b"}))
    diff = diff_plans(base, new)
    assert {rc.name: rc.kind for rc in diff.updated} == {"fs": "replace", "link": "replace"}
    link = next(rc for rc in diff.updated if rc.name == "link")
    assert link.replaced_by == [f"fileSystemId (the new id of {fsx} fs)"]


def test_a_new_launch_template_version_rolls_the_node_group_that_follows_it():
    lt = _r("aws:ec2/launchTemplate:LaunchTemplate", "gpu-template", {"instanceType": "p5.48xlarge"}, "lt-1")
    group = _r("aws:eks/nodeGroup:NodeGroup", "gpu-nodes", {"launchTemplate": {"id": "lt-1", "version": "1"}, "labels": {"role": "gpu-training"}})
    new_lt = _r("aws:ec2/launchTemplate:LaunchTemplate", "gpu-template", {"instanceType": "p5en.48xlarge"}, "lt-1")
    diff = diff_plans(_plan(lt, group), _plan(new_lt, group))
    assert {rc.name: rc.kind for rc in diff.updated} == {"gpu-nodes": "update", "gpu-template": "update"}
    assert any("gpu-nodes: rolls every GPU node" in w for w in diff.warnings)


@pytest.mark.parametrize(
    "old, new, says",
    [("1.35", "1.34", "EKS cannot downgrade a cluster"), ("1.33", "1.35", "EKS upgrades a cluster one minor at a time")],
)
def test_eks_version_moves_pulumi_up_would_fail_on_are_refused(old, new, says):
    base = _plan(_r("eks:index:Cluster", "rlinf-eks", {"name": "c", "version": old}))
    changed = _plan(_r("eks:index:Cluster", "rlinf-eks", {"name": "c", "version": new}))
    (refusal,) = diff_plans(base, changed).refused
    assert says in refusal


def test_a_new_cluster_at_a_lower_minor_is_no_downgrade():
    base = _plan(_r("eks:index:Cluster", "rlinf-eks", {"name": "c", "version": "1.35"}))
    changed = _plan(_r("eks:index:Cluster", "rlinf-eks", {"name": "d", "version": "1.34"}))
    diff = diff_plans(base, changed)
    assert diff.refused == [] and [rc.kind for rc in diff.updated] == ["replace"]


def test_a_downgrade_against_the_last_plan_in_out_is_refused_at_plan_time(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["plan", "single-node", "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["plan", "single-node", "--quiet", "--out", str(out), "--set", "cluster.kubernetesVersion=1.34"]) == 2
    err = capsys.readouterr().err
    assert "cluster.kubernetesVersion='1.34': the last plan of this stack in" in err and "EKS cannot downgrade" in err
    assert "Traceback" not in err
    # a new cluster (another name) may start lower
    assert main(["plan", "single-node", "--quiet", "--out", str(out), "--set", "cluster.kubernetesVersion=1.34", "--set", "cluster.name=rlinf-other"]) == 0


def test_a_looked_up_subnet_lies_in_the_vpc_the_stack_names():
    sets = (
        "network.vpcId=vpc-0123456789abcdef0",
        "network.privateSubnetIds[0]=subnet-0123456789abcdef0",
        "network.privateSubnetIds[1]=subnet-0123456789abcdef1",
        "network.gpuSubnetId=subnet-0123456789abcdef0",
    )
    plan = plan_stack("single-node", *sets)
    groups = [r for r in plan.resources if r["type"] == "aws:ec2/securityGroup:SecurityGroup" and r["name"].endswith("-efa")]
    assert groups and all(g["inputs"]["vpcId"] == "vpc-0123456789abcdef0" for g in groups)


def test_two_plans_of_an_az_move_never_move_the_efa_security_group_to_another_vpc():
    base = plan_stack("multi-node").to_json()
    moved = plan_stack("multi-node", "availabilityZone=us-east-1c").to_json()
    diff = diff_plans(base, moved)
    assert not [c for rc in diff.updated if rc.name.endswith("-efa") for c in rc.changes if c.path == "inputs.vpcId"]
