"""The AWS force-new table (rlinf_eks.offline.diff.aws_force_new) against the record of reading
terraform-provider-aws (../shared/reference/terraform-provider-aws/force-new.json), every AWS type
the stacks plan covered by it, and the diff applying it."""

from __future__ import annotations

import json

import pytest

from rlinf_eks.offline.diff.aws_force_new import FORCE_NEW, READ_BEYOND_RECORD
from rlinf_eks.offline.diff.diff import diff_plans
from tests.harness import ALL_STACKS, SHARED, plan_stack, require_shared

FORCE_NEW_JSON = SHARED / "reference" / "terraform-provider-aws" / "force-new.json"

# Stacks with the optional parts on, so that every AWS type any stack can create is planned.
VARIANTS = [
    ("multi-node", "observability.backend=cloudwatch"),
    ("single-node", "storage.sharedFilesystem.enabled=true"),
    ("single-node", "workload.model.source=s3://acme-models/openvla"),
    ("single-node", "network.interfaceEndpoints=true"),
    ("multi-node", "gpuNodes.provisioner=karpenter"),
    ("single-node", "images.build=true", "images.dockerHubCache.credentialArn="
     "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"),
]


@pytest.fixture(scope="module")
def upstream() -> dict:
    return json.loads(require_shared(FORCE_NEW_JSON, "terraform-provider-aws force-new facts").read_text())


def test_the_table_holds_exactly_what_was_read_from_the_provider_source(upstream):
    assert set(FORCE_NEW) - READ_BEYOND_RECORD == set(upstream["types"])
    assert not READ_BEYOND_RECORD & set(upstream["types"]), "a type the record holds is checked against it"
    for type_, spec in FORCE_NEW.items():
        if type_ in READ_BEYOND_RECORD:
            # read here after the record: its source file and commit are in the table itself
            path, _, commit = spec.source.partition("@")
            assert path.startswith("internal/service/") and len(commit) == 40 and spec.regional, type_
            continue
        read = upstream["types"][type_]
        assert spec.terraform == read["terraform_resource"], type_
        assert set(spec.paths) == {f["pulumi"].replace("[]", "[*]") for f in read["force_new"]}, type_
        # alternatives ("a | b") are one entry each
        conditional = {p.strip().replace("[]", "[*]") for c in read["conditional"] if c["pulumi"] != "region" for p in c["pulumi"].split("|")}
        assert spec.regional == any(c["pulumi"] == "region" for c in read["conditional"]), type_
        assert {path for path, _ in spec.conditional} == conditional, type_
        path, _, version = spec.source.partition("@")
        files = [(f["path"], f.get("commit") or f"copy:{f.get('copy_id')}") for f in read["files"]]
        assert (path, version) in files, type_


def test_every_aws_type_a_stack_plans_is_in_the_table():
    planned = set()
    for stack, *sets in [(s,) for s in ALL_STACKS] + VARIANTS:
        planned |= {r["type"] for r in plan_stack(stack, *sets).resources if r["type"].startswith("aws:")}
    missing = sorted(planned - set(FORCE_NEW))
    assert not missing, f"AWS types the stacks plan that the force-new table lacks (read their schema): {missing}"
    assert len(planned) >= 29


def _plan(resources: list[dict]) -> dict:
    return {"project": "p", "stack": "s", "resources": resources, "outputs": {}}


def _resource(type_: str, inputs: dict, **options) -> dict:
    return {"urn": f"urn:pulumi:s::p::{type_}::r", "type": type_, "name": "r", "inputs": inputs, "options": options}


@pytest.mark.parametrize(
    "type_, old, new, kind",
    [
        ("aws:ec2/subnet:Subnet", {"cidrBlock": "10.0.0.0/20"}, {"cidrBlock": "10.0.16.0/20"}, "replace"),
        ("aws:ec2/subnet:Subnet", {"tags": {"a": "1"}}, {"tags": {"a": "2"}}, "update"),
        ("aws:eks/nodeGroup:NodeGroup", {"version": "1.34"}, {"version": "1.35"}, "update"),
        ("aws:ec2/launchTemplate:LaunchTemplate", {"networkInterfaces": [{"networkCardIndex": 0}]}, {"networkInterfaces": [{"networkCardIndex": 1}]}, "update"),
        ("aws:fsx/lustreFileSystem:LustreFileSystem", {"storageCapacity": 2400}, {"storageCapacity": 4800}, "update"),
        ("aws:fsx/lustreFileSystem:LustreFileSystem", {"storageCapacity": 4800}, {"storageCapacity": 2400}, "replace"),
        ("aws:fsx/lustreFileSystem:LustreFileSystem", {"subnetIds": "subnet-a"}, {"subnetIds": "subnet-b"}, "replace"),
        ("aws:s3/bucket:Bucket", {"forceDestroy": False}, {"forceDestroy": True}, "update"),
        ("aws:iam/role:Role", {"name": "a"}, {"name": "b"}, "replace"),
        # a security group rule's source kind (ModifyPlan): another CIDR is in place, a CIDR becoming a group replaces
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", {"cidrIpv4": "10.0.0.0/16"}, {"cidrIpv4": "10.1.0.0/16"}, "update"),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", {"cidrIpv4": "10.0.0.0/16"}, {"referencedSecurityGroupId": "sg-1"}, "replace"),
    ],
)
def test_the_diff_replaces_exactly_on_the_providers_force_new_inputs(type_, old, new, kind):
    diff = diff_plans(_plan([_resource(type_, old)]), _plan([_resource(type_, new)]))
    assert [rc.kind for rc in diff.updated] == [kind]


def test_a_replaced_protected_store_is_data_at_risk_at_the_top_and_counted_as_a_replacement():
    from rlinf_eks.offline.diff.diff import render_markdown

    old = _resource("aws:fsx/lustreFileSystem:LustreFileSystem", {"subnetIds": "subnet-a"}, protect=True, retainOnDelete=True)
    new = _resource("aws:fsx/lustreFileSystem:LustreFileSystem", {"subnetIds": "subnet-b"}, protect=True, retainOnDelete=True)
    diff = diff_plans(_plan([old]), _plan([new]))
    (risk,) = diff.data_risks
    assert "every file on the FSx for Lustre file system" in risk and "`pulumi up` stops at it" in risk
    text = render_markdown(diff)
    assert text.index("Data at risk") < text.index("#### +- replace")
    assert "0 to update in place, 1 to replace" in text
