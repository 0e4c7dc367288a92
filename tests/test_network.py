"""Network: subnets in two AZs, the GPU subnet in the GPU AZ, NAT gateways as configured, or an
existing VPC that creates nothing."""

from __future__ import annotations

import ipaddress

import pytest

from hypothesis import given
from hypothesis import strategies as st

from rlinf_eks.config import PROJECT, ConfigError
from rlinf_eks.network import Network, default_availability_zones, region_of_zone, subnet_plan
from rlinf_eks.offline.engine import engine
from tests.harness import ALL_STACKS, ROLES, has_inputs, one, plan_stack, run_component, settings

SUBNET = "aws:ec2/subnet:Subnet"
NAT = "aws:ec2/natGateway:NatGateway"


def _build(sections, tags):
    stack = settings(**sections)
    return Network("rlinf", settings=stack.network, gpu_az=stack.gpu_az, cluster_name="demo", tags=tags)


def _network(**sections):
    return run_component(lambda: _build(sections, {"project": "t"}))


def _outputs(**sections):
    def program():
        net = _build(sections, {})
        return {"vpc": net.vpc_id, "cidr": net.vpc_cidr, "private": net.private_subnet_ids, "gpu": net.gpu_subnet_id}

    run = engine.run(program, project=PROJECT, stack="test", config={})
    return run, run.outputs


def _private(resources):
    return [r for r in resources.of_type(SUBNET) if "-private-" in r["name"]]


def test_given_defaults_when_network_built_then_private_subnets_span_two_azs_with_eks_tags():
    resources = _network()
    private = _private(resources)
    assert sorted(r["inputs"]["availabilityZone"] for r in private) == ["us-east-1a", "us-east-1b"]
    for subnet in private:
        assert has_inputs(subnet, {"tags": {"kubernetes.io/role/internal-elb": "1", "kubernetes.io/cluster/demo": "shared"}})
    vpc = one(resources, "aws:ec2/vpc:Vpc")
    assert has_inputs(vpc, {"cidrBlock": "10.0.0.0/16", "enableDnsHostnames": True, "enableDnsSupport": True})


def test_given_gpu_az_c_when_network_built_then_gpu_subnet_output_is_the_private_subnet_in_that_az():
    run, outputs = _outputs(availabilityZone="us-east-1c")
    by_id = {r.id: r for r in run.registrations if r.type == SUBNET}
    gpu = by_id[outputs["gpu"]]
    assert gpu.inputs["availabilityZone"] == "us-east-1c" and "-private-" in gpu.name
    assert outputs["gpu"] in outputs["private"] and len(outputs["private"]) == 2
    assert {by_id[s].inputs["availabilityZone"] for s in outputs["private"]} == {"us-east-1c", "us-east-1d"}


def test_given_single_nat_when_network_built_then_one_nat_gateway_in_the_gpu_az_serves_every_private_route():
    resources = _network(network={"availabilityZones": ["us-east-1a", "us-east-1b", "us-east-1c"]}, availabilityZone="us-east-1b")
    nat = one(resources, NAT)
    assert nat["name"] == "rlinf-nat-us-east-1b"
    routes = [r for r in resources.of_type("aws:ec2/route:Route") if "private-default" in r["name"]]
    assert len(routes) == 3 and len({r["inputs"]["natGatewayId"] for r in routes}) == 1


def test_given_one_nat_per_az_when_network_built_then_each_az_routes_through_its_own_nat():
    resources = _network(network={"natGateways": "one-per-az", "availabilityZones": ["us-east-1a", "us-east-1b", "us-east-1c"]})
    assert len(resources.of_type(NAT)) == 3
    routes = [r for r in resources.of_type("aws:ec2/route:Route") if "private-default" in r["name"]]
    assert len({r["inputs"]["natGatewayId"] for r in routes}) == 3
    assert all(has_inputs(e, {"domain": "vpc"}) for e in resources.of_type("aws:ec2/eip:Eip"))


def test_given_public_subnets_when_network_built_then_they_carry_the_elb_tag_and_route_to_the_internet_gateway():
    resources = _network()
    public = [r for r in resources.of_type(SUBNET) if "-public-" in r["name"]]
    assert len(public) == 2
    assert all(has_inputs(s, {"tags": {"kubernetes.io/role/elb": "1"}, "mapPublicIpOnLaunch": False}) for s in public)
    route = one(resources, "aws:ec2/route:Route", "rlinf-public-default")
    assert route["inputs"]["destinationCidrBlock"] == "0.0.0.0/0" and "gatewayId" in route["inputs"]


def test_given_a_new_vpc_when_network_built_then_s3_gateway_endpoint_serves_every_private_route_table():
    """S3 traffic (image layers, staged inputs, checkpoints) leaves by the free gateway endpoint,
    not the NAT gateway: the endpoint is on each private route table and on no public one."""
    sections = {"network": {"availabilityZones": ["us-east-1a", "us-east-1b", "us-east-1c"]}}
    run = engine.run(lambda: _build(sections, {"project": "t"}) and {}, project=PROJECT, stack="test", config={})
    endpoints = [r for r in run.registrations if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"]
    assert len(endpoints) == 1
    endpoint = endpoints[0].inputs
    assert endpoint["vpcEndpointType"] == "Gateway" and endpoint["serviceName"] == "com.amazonaws.us-east-1.s3"
    tables = {r.id: r.name for r in run.registrations if r.type == "aws:ec2/routeTable:RouteTable"}
    assert sorted(tables[i] for i in endpoint["routeTableIds"]) == [f"rlinf-private-rt-us-east-1{x}" for x in "abc"]
    assert endpoint["tags"] == {"project": "t", "Name": "demo-s3"}
    vpc = next(r for r in run.registrations if r.type == "aws:ec2/vpc:Vpc")
    assert endpoint["vpcId"] == vpc.id


def test_given_interface_endpoints_when_network_built_then_ecr_sts_and_logs_sit_in_every_private_subnet():
    sections = {"network": {"interfaceEndpoints": True}}
    run = engine.run(lambda: _build(sections, {"project": "t"}) and {}, project=PROJECT, stack="test", config={})
    endpoints = {r.inputs["serviceName"]: r.inputs for r in run.registrations if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"}
    services = ["ecr.api", "ecr.dkr", "logs", "sts"]
    assert sorted(endpoints) == sorted(["com.amazonaws.us-east-1.s3", *(f"com.amazonaws.us-east-1.{s}" for s in services)])
    private = {r.id for r in run.registrations if r.type == SUBNET and "-private-" in r.name}
    group = next(r for r in run.registrations if r.type == "aws:ec2/securityGroup:SecurityGroup")
    for service in services:
        endpoint = endpoints[f"com.amazonaws.us-east-1.{service}"]
        assert endpoint["vpcEndpointType"] == "Interface" and endpoint["privateDnsEnabled"] is True
        assert set(endpoint["subnetIds"]) == private and endpoint["securityGroupIds"] == [group.id]
    rule = next(r for r in run.registrations if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert rule.inputs["securityGroupId"] == group.id
    assert (rule.inputs["fromPort"], rule.inputs["toPort"], rule.inputs["cidrIpv4"]) == (443, 443, "10.0.0.0/16")


def test_interface_endpoints_are_off_by_default_and_refused_with_an_existing_vpc():
    resources = _network()
    assert [r["inputs"]["vpcEndpointType"] for r in resources.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")] == ["Gateway"]
    existing = {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"],
                "gpuSubnetId": "subnet-0123456789abcdef1", "interfaceEndpoints": True}
    with pytest.raises(ConfigError, match=r"network.interfaceEndpoints=true: only a new VPC gets them"):
        settings(network=existing)


def test_region_of_a_zone_or_local_zone():
    assert region_of_zone("us-east-1a") == "us-east-1"
    assert region_of_zone("us-west-2-lax-1a") == "us-west-2"
    assert region_of_zone("ap-southeast-2b") == "ap-southeast-2"


def test_given_existing_vpc_when_network_built_then_nothing_is_created_and_outputs_come_from_config():
    vpc, one_, two = "vpc-0123456789abcdef0", "subnet-0123456789abcdef1", "subnet-0123456789abcdef2"
    existing = {"vpcId": vpc, "privateSubnetIds": [one_, two], "gpuSubnetId": one_}
    run, outputs = _outputs(network=existing)
    assert [r.type for r in run.registrations] == ["rlinf-eks:index:Network"]
    assert outputs == {"vpc": vpc, "cidr": "10.0.0.0/16", "private": [one_, two], "gpu": one_}


def test_default_availability_zones_pair_the_gpu_az_with_the_next_letter():
    assert default_availability_zones("eu-west-1a") == ["eu-west-1a", "eu-west-1b"]
    assert default_availability_zones("us-west-2c") == ["us-west-2c", "us-west-2d"]


@given(
    prefix=st.integers(min_value=16, max_value=20),
    az_count=st.integers(min_value=2, max_value=6),
)
def test_subnet_plan_never_overlaps_and_stays_inside_the_vpc(prefix, az_count):
    vpc = ipaddress.ip_network(f"10.0.0.0/{prefix}")
    plans = subnet_plan(str(vpc), [f"us-east-1{chr(97 + i)}" for i in range(az_count)])
    blocks = [ipaddress.ip_network(c) for p in plans for c in (p.private_cidr, p.public_cidr)]
    assert len(plans) == az_count
    assert all(b.subnet_of(vpc) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    # private subnets hold the pods (one VPC IP each): they must dwarf the NAT-only public ones
    assert all(ipaddress.ip_network(p.private_cidr).num_addresses >= 4 * ipaddress.ip_network(p.public_cidr).num_addresses for p in plans)


# --- every stack that creates its VPC (issue 55) ----------------------------------------------------


@pytest.mark.parametrize("stack", [s for s in ALL_STACKS if ROLES[s] != "experiment"])
def test_every_stack_that_creates_its_vpc_has_the_s3_gateway_endpoint_on_each_private_route_table(stack):
    plan = plan_stack(stack)
    endpoints = [r for r in plan.resources if r["type"] == "aws:ec2/vpcEndpoint:VpcEndpoint"]
    gateway = [e for e in endpoints if e["inputs"]["vpcEndpointType"] == "Gateway"]
    assert len(gateway) == 1 and gateway[0]["inputs"]["serviceName"] == f"com.amazonaws.{plan.settings.region}.s3"
    tables = {r["id"]: r["name"] for r in plan.resources if r["type"] == "aws:ec2/routeTable:RouteTable"}
    private = sorted(i for i, name in tables.items() if "-private-rt-" in name)
    assert private and sorted(gateway[0]["inputs"]["routeTableIds"]) == private


def test_a_stack_in_an_existing_vpc_creates_no_endpoint():
    existing = ("network.vpcId=vpc-0123456789abcdef0", "network.privateSubnetIds[0]=subnet-0123456789abcdef0",
                "network.privateSubnetIds[1]=subnet-0123456789abcdef1", "network.gpuSubnetId=subnet-0123456789abcdef0")
    plan = plan_stack("single-node", *existing)
    assert not [r for r in plan.resources if r["type"] == "aws:ec2/vpcEndpoint:VpcEndpoint"]
