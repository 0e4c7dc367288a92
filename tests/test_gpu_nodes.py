"""EFA GPU node group: interfaces per instance type, EFA security group, placement, capacity,
IMDSv2, volumes, user data, labels, taints, autoscaler hand-off."""

from __future__ import annotations

import base64
import email
from typing import Any

import pytest

from rlinf_eks import catalog
from rlinf_eks.config import ConfigError
from rlinf_eks.gpu_nodes import CAPACITY_BLOCK_START_ACTION, EfaGpuNodeGroup, hugepages_count, scale_from_zero_tags
from rlinf_eks.scheduling import EFA_LABEL, GPU_TAINT, gpu_toleration, node_labels
from tests import aws_models
from tests.harness import has_inputs, one, run_component, settings

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
SG = "aws:ec2/securityGroup:SecurityGroup"
PG = "aws:ec2/placementGroup:PlacementGroup"
CLUSTER_SG = "sg-0cluster0000000001"


def gpu_settings(**gpu_nodes: Any):
    # the autoscaler where something must scale (scale to zero, or a maxNodes above nodeCount,
    # which would have no effect without it: refused)
    scales = bool(gpu_nodes.get("scaleToZero")) or gpu_nodes.get("maxNodes", 0) > gpu_nodes.get("nodeCount", 1)
    autoscaler = {"enabled": scales}
    return settings(gpuNodes=gpu_nodes, autoscaler=autoscaler).gpu_nodes


def run_group(autoscaled: bool = False, **gpu_nodes: Any):
    s = gpu_settings(**gpu_nodes)
    return run_component(
        lambda: EfaGpuNodeGroup(
            "gpu",
            settings=s,
            cluster_name="rlinf-test",
            cluster_security_group_id=CLUSTER_SG,
            subnet_id="subnet-0gpu",
            autoscaled=autoscaled,
            tags={"project": "rlinf-eks"},
        )
    )


def efa_sg_id(run) -> str:
    return one(run, SG, "gpu-efa")["id"]


# --- interfaces ---------------------------------------------------------------------------------

# (instance type, network cards as stated in the field notes)
LAYOUTS = [("p4d.24xlarge", 4), ("p5.48xlarge", 32), ("p5en.48xlarge", 16), ("g6e.48xlarge", 4), ("g5.48xlarge", 1)]


@pytest.mark.parametrize("instance_type,cards", LAYOUTS)
def test_given_efa_instance_when_built_then_one_interface_per_card_efa_first_then_efa_only(instance_type, cards):
    row = catalog.CATALOG[instance_type]
    assert min(row.network_cards, row.max_efa) == cards  # the catalog agrees with the literal count

    run = run_group(instanceType=instance_type)
    nics = one(run, LT)["inputs"]["networkInterfaces"]

    assert len(nics) == cards
    assert (nics[0]["networkCardIndex"], nics[0]["deviceIndex"], nics[0]["interfaceType"]) == (0, 0, "efa")
    assert [(n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in nics[1:]] == [
        (card, 1, "efa-only") for card in range(1, cards)
    ]
    sg = efa_sg_id(run)
    for nic in nics:
        assert nic["securityGroups"] == [CLUSTER_SG, sg]
        assert "subnetId" not in nic
        assert "associatePublicIpAddress" not in nic
    assert "vpcSecurityGroupIds" not in one(run, LT)["inputs"]


def test_given_p6_b300_when_built_then_card_0_is_ena_only_and_cards_1_to_16_carry_efa():
    # EC2 User Guide, P6-B300: network card 0 has no EFA; vpc-cni lists 17 cards, Karpenter 16 EFA devices
    run = run_group(instanceType="p6-b300.48xlarge")
    nics = one(run, LT)["inputs"]["networkInterfaces"]
    assert [(n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in nics] == [(0, 0, "interface")] + [
        (card, 1, "efa-only") for card in range(1, 17)
    ]
    assert aws_models.plan_problems(run.of_type(LT)) == []


def test_given_efa_off_when_built_then_no_interfaces_no_efa_group_and_cluster_sg_on_template():
    run = run_group(instanceType="g5.2xlarge", efa=False)
    lt = one(run, LT)["inputs"]
    assert "networkInterfaces" not in lt
    assert lt["vpcSecurityGroupIds"] == [CLUSTER_SG]
    assert not run.of_type(SG)
    assert EFA_LABEL not in one(run, NG)["inputs"]["labels"]


# --- EFA security group -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule_type", ["aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"]
)
def test_given_efa_when_built_then_group_allows_all_traffic_from_and_to_itself(rule_type):
    run = run_group()
    sg = one(run, SG, "gpu-efa")
    rule = one(run, rule_type)
    assert has_inputs(rule, {"securityGroupId": sg["id"], "referencedSecurityGroupId": sg["id"], "ipProtocol": "-1"})
    assert "cidrIpv4" not in rule["inputs"] and "fromPort" not in rule["inputs"]


def test_given_subnet_when_built_then_efa_group_is_in_the_subnets_vpc():
    run = run_group()
    vpc = one(run, SG, "gpu-efa")["inputs"]["vpcId"]
    assert vpc.startswith("vpc-")


# --- placement and capacity ---------------------------------------------------------------------


def test_given_auto_placement_without_reservation_when_built_then_cluster_group_is_used():
    run = run_group()
    group = one(run, PG)
    assert group["inputs"]["strategy"] == "cluster"
    assert one(run, LT)["inputs"]["placement"]["groupName"] == group["id"]


@pytest.mark.parametrize(
    "gpu_nodes",
    [
        {"capacityReservationId": "cr-0123456789abcdef0"},
        {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"},
        {"placementGroup": {"strategy": "none"}},
    ],
    ids=["odcr-auto", "capacity-block-auto", "strategy-none"],
)
def test_given_reservation_or_none_when_built_then_no_placement_group(gpu_nodes):
    run = run_group(**gpu_nodes)
    assert not run.of_type(PG)
    assert "placement" not in one(run, LT)["inputs"]


def test_given_existing_placement_group_when_built_then_template_uses_it_by_name_and_creates_none():
    run = run_group(placementGroup={"strategy": "existing", "name": "my-pg"})
    assert not run.of_type(PG)
    assert one(run, LT)["inputs"]["placement"] == {"groupName": "my-pg"}


def test_given_capacity_block_when_built_then_market_type_reservation_target_and_node_group_type():
    run = run_group(capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0")
    lt = one(run, LT)
    assert has_inputs(lt, {"instanceMarketOptions": {"marketType": "capacity-block"}})
    assert has_inputs(
        lt, {"capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}}
    )
    assert one(run, NG)["inputs"]["capacityType"] == "CAPACITY_BLOCK"


BLOCK = {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}
SCHEDULE = "aws:autoscaling/schedule:Schedule"


def test_given_capacity_block_not_yet_started_when_built_then_zero_nodes_until_a_scheduled_start():
    # EKS guide: create the group at desired size 0 before the reservation is active and scale it
    # up with a scheduled action on its Auto Scaling group at the block's start
    run = run_group(nodeCount=4, capacityBlock={"startTime": "2027-01-11T12:30:00+01:00", "endTime": "2027-01-18T11:30:00Z"}, **BLOCK)
    group = one(run, NG)
    assert group["inputs"]["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 4}
    assert group["options"]["ignoreChanges"] == ["scalingConfig.desiredSize"]
    schedule = one(run, SCHEDULE)["inputs"]
    assert schedule == {
        "autoscalingGroupName": schedule["autoscalingGroupName"],
        "scheduledActionName": CAPACITY_BLOCK_START_ACTION,
        "startTime": "2027-01-11T11:30:00Z",
        "minSize": 0,
        "desiredCapacity": 4,
        "maxSize": 4,
    }
    assert schedule["autoscalingGroupName"].startswith("eks-")  # the group EKS created, not a name of ours
    assert aws_models.plan_problems(of_all(run, SCHEDULE, NG)) == []


def of_all(run: list, *types: str) -> list:
    return [r for r in run if r["type"] in types]


def test_given_capacity_block_without_start_time_when_built_then_nodes_at_once_and_no_schedule():
    run = run_group(nodeCount=2, **BLOCK)
    assert one(run, NG)["inputs"]["scalingConfig"]["desiredSize"] == 2
    assert run.of_type(SCHEDULE) == []


@pytest.mark.parametrize(
    "gpu,expected",
    [
        ({**BLOCK, "capacityBlock": {"startTime": "2027-01-11T11:30:00"}}, "gpuNodes.capacityBlock.startTime='2027-01-11T11:30:00': needs a UTC offset"),
        ({**BLOCK, "capacityBlock": {"startTime": "next monday"}}, "gpuNodes.capacityBlock.startTime='next monday': an ISO-8601 time"),
        ({**BLOCK, "capacityBlock": {"startTime": 1700000000}}, "gpuNodes.capacityBlock.startTime=1700000000: an ISO-8601 time"),
        (
            {**BLOCK, "capacityBlock": {"startTime": "2027-01-11T11:30:00Z", "endTime": "2027-01-10T11:30:00Z"}},
            "gpuNodes.capacityBlock.endTime='2027-01-10T11:30:00Z': must be after startTime 2027-01-11T11:30:00Z",
        ),
        ({**BLOCK, "capacityBlock": {"endTime": "2027-01-18T12:00:00Z"}}, "every Capacity Block ends at 11:30:00 UTC"),
        ({**BLOCK, "capacityBlock": {"startTime": "2027-01-11T11:30:00Z", "endTime": "2027-08-02T11:30:00Z"}}, "at most 182 days"),
        ({"capacityBlock": {"startTime": "2027-01-11T11:30:00Z"}}, "gpuNodes.capacityBlock={'startTime': '2027-01-11T11:30:00Z'}: only with capacityType CAPACITY_BLOCK"),
        ({**BLOCK, "nodeCount": 65}, "gpuNodes.nodeCount=65: a Capacity Block holds at most 64 instances"),
        ({**BLOCK, "nodeCount": 2, "maxNodes": 80}, "gpuNodes.maxNodes=80: a Capacity Block holds at most 64"),
    ],
)
def test_capacity_block_config_errors_name_key_value_and_rule(gpu: dict, expected: str):
    with pytest.raises(ConfigError) as err:
        settings(gpuNodes=gpu)
    assert any(expected in problem for problem in err.value.problems), err.value.problems


def test_given_on_demand_reservation_when_built_then_targets_it_without_market_options():
    run = run_group(capacityReservationId="cr-0123456789abcdef0")
    lt = one(run, LT)["inputs"]
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == "cr-0123456789abcdef0"
    assert "instanceMarketOptions" not in lt
    assert one(run, NG)["inputs"]["capacityType"] == "ON_DEMAND"


def test_given_spot_when_built_then_node_group_is_spot_and_template_has_no_reservation():
    run = run_group(capacityType="SPOT")
    assert one(run, NG)["inputs"]["capacityType"] == "SPOT"
    assert "capacityReservationSpecification" not in one(run, LT)["inputs"]


# --- node group ---------------------------------------------------------------------------------


def test_given_defaults_when_built_then_one_subnet_scaling_from_config_and_one_node_at_a_time():
    run = run_group(nodeCount=4, maxNodes=6)
    ng = one(run, NG)
    assert ng["inputs"]["subnetIds"] == ["subnet-0gpu"]
    assert ng["inputs"]["scalingConfig"] == {"minSize": 4, "desiredSize": 4, "maxSize": 6}
    assert ng["inputs"]["updateConfig"] == {"maxUnavailable": 1}
    assert ng["inputs"]["launchTemplate"]["id"] == one(run, LT)["id"]
    # the instance type is set in exactly one place: the launch template
    assert one(run, LT)["inputs"]["instanceType"] == "p5.48xlarge"
    assert "instanceTypes" not in ng["inputs"]


def test_given_node_group_when_built_then_gpu_taint_and_labels():
    run = run_group(labels={"team": "rl"})
    ng = one(run, NG)["inputs"]
    assert ng["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert ng["labels"] == {"role": "gpu-training", "vpc.amazonaws.com/efa.present": "true", "team": "rl"}


def test_given_public_constants_then_taint_and_toleration_match_exactly():
    assert (GPU_TAINT.key, GPU_TAINT.value, GPU_TAINT.effect) == ("nvidia.com/gpu", "true", "NoSchedule")
    assert gpu_toleration() == {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert node_labels(gpu_settings())["role"] == "gpu-training"


def test_given_node_role_when_built_then_ec2_trusts_it_and_four_managed_policies_attached():
    run = run_group()
    role = one(run, "aws:iam/role:Role")
    assert '"ec2.amazonaws.com"' in role["inputs"]["assumeRolePolicy"]
    arns = sorted(r["inputs"]["policyArn"] for r in run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"))
    assert arns == sorted(
        f"arn:aws:iam::aws:policy/{p}"
        for p in ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonEKS_CNI_Policy", "AmazonSSMManagedInstanceCore")
    )
    ng = one(run, NG)
    assert ng["inputs"]["nodeRoleArn"].endswith(f":role/{role['id']}")
    assert len(ng["options"]["dependsOn"]) == 4


# --- autoscaler hand-off ------------------------------------------------------------------------


def test_given_autoscaled_when_built_then_desired_size_ignored_and_scale_from_zero_tags_set():
    run = run_group(autoscaled=True, scaleToZero=True, maxNodes=4, nodeCount=2)
    ng = one(run, NG)
    assert ng["options"]["ignoreChanges"] == ["scalingConfig.desiredSize"]
    assert ng["inputs"]["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 4}
    row = catalog.CATALOG["p5.48xlarge"]
    prefix = "k8s.io/cluster-autoscaler/node-template/resources/"
    assert has_inputs(
        ng,
        {
            "tags": {
                prefix + "nvidia.com/gpu": str(row.gpus),
                prefix + "vpc.amazonaws.com/efa": str(row.max_efa),
                prefix + "hugepages-2Mi": "5Gi",
                "project": "rlinf-eks",
            }
        },
    )


def test_given_not_autoscaled_when_built_then_desired_size_is_managed_and_no_template_tags():
    ng = one(run_group(), NG)
    assert ng["options"]["ignoreChanges"] == []
    assert not any(k.startswith("k8s.io/cluster-autoscaler") for k in ng["inputs"]["tags"])


def test_given_autoscaled_when_built_then_nodes_carry_the_autoscaler_gpu_label():
    # Without k8s.amazonaws.com/accelerator the autoscaler treats a GPU node whose device plugin
    # has not registered yet as ready-but-too-small and launches another GPU node.
    ng = one(run_group(autoscaled=True, scaleToZero=True, maxNodes=2, instanceType="p4d.24xlarge"), NG)
    assert ng["inputs"]["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia-a100"


def test_given_not_autoscaled_when_built_then_no_autoscaler_gpu_label():
    assert "k8s.amazonaws.com/accelerator" not in one(run_group(), NG)["inputs"]["labels"]


def test_given_no_efa_and_no_hugepages_then_scale_from_zero_tags_carry_only_gpus():
    tags = scale_from_zero_tags(gpu_settings(instanceType="g5.2xlarge", efa=False, hugepagesGib=0))
    assert tags == {"k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1"}


# --- IMDS, volumes, user data -------------------------------------------------------------------


def test_given_any_node_when_built_then_imdsv2_required_with_hop_limit_two():
    lt = one(run_group(), LT)
    assert lt["inputs"]["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 2}


def test_given_al2023_when_built_then_encrypted_gp3_root_of_configured_size():
    lt = one(run_group(rootVolumeGib=500), LT)
    assert lt["inputs"]["blockDeviceMappings"] == [
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": 500, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"}}
    ]


def test_given_bottlerocket_when_built_then_size_on_data_volume_both_encrypted_and_sysctl_toml():
    run = run_group(amiType="BOTTLEROCKET_x86_64_NVIDIA", rootVolumeGib=300, hugepagesGib=4)
    lt = one(run, LT)["inputs"]
    devices = {d["deviceName"]: d["ebs"] for d in lt["blockDeviceMappings"]}
    assert devices["/dev/xvdb"]["volumeSize"] == 300
    assert "volumeSize" not in devices["/dev/xvda"]
    assert all(d["encrypted"] == "true" and d["volumeType"] == "gp3" for d in devices.values())
    text = base64.b64decode(lt["userData"]).decode()
    assert '"vm.nr_hugepages" = "2048"' in text and "[settings.kernel.sysctl]" in text
    assert one(run, NG)["inputs"]["amiType"] == "BOTTLEROCKET_x86_64_NVIDIA"


def _mime_parts(lt_inputs: dict) -> dict[str, str]:
    message = email.message_from_string(base64.b64decode(lt_inputs["userData"]).decode())
    assert message.is_multipart()
    return {part.get_content_type(): part.get_payload() for part in message.get_payload()}


def test_given_al2023_with_raid0_when_built_then_mime_nodeconfig_and_hugepages_script():
    lt = one(run_group(localNvmeRaid0=True, hugepagesGib=5), LT)["inputs"]
    parts = _mime_parts(lt)
    assert '"strategy": "RAID0"' in parts["application/node.eks.aws"]
    assert "kind" in parts["application/node.eks.aws"] and "NodeConfig" in parts["application/node.eks.aws"]
    assert f"vm.nr_hugepages = {5 * 512}" in parts["text/x-shellscript"]


def test_given_al2023_without_raid0_then_no_nodeconfig_part():
    parts = _mime_parts(one(run_group(localNvmeRaid0=False, rootVolumeGib=400), LT)["inputs"])
    assert "application/node.eks.aws" not in parts
    assert "text/x-shellscript" in parts


def test_given_nothing_to_add_when_built_then_no_user_data_at_all():
    assert "userData" not in one(run_group(hugepagesGib=0, localNvmeRaid0=False, rootVolumeGib=400), LT)["inputs"]
    assert "userData" not in one(run_group(hugepagesGib=0, amiType="BOTTLEROCKET_x86_64_NVIDIA", rootVolumeGib=400), LT)["inputs"]


def test_given_a_type_with_instance_storage_then_its_nvme_is_a_raid0_by_default():
    # p5.48xlarge: 8 x 3800 GB of instance-store NVMe (catalog.INSTANCE_STORE); the run directory,
    # the staged inputs and containerd's root then live on the array, not the root volume
    parts = _mime_parts(one(run_group(), LT)["inputs"])
    assert '"strategy": "RAID0"' in parts["application/node.eks.aws"]


def test_hugepages_count_is_gib_times_512():
    assert hugepages_count(gpu_settings(hugepagesGib=5)) == 2560
    assert hugepages_count(gpu_settings(hugepagesGib=0)) == 0


def test_given_component_when_built_then_outputs_are_plain_labels_and_taints():
    s = gpu_settings()
    holder: dict[str, EfaGpuNodeGroup] = {}

    def build():
        holder["g"] = EfaGpuNodeGroup(
            "gpu", settings=s.model_dump(by_alias=True), cluster_name="c", cluster_security_group_id="sg-1", subnet_id="subnet-1", autoscaled=False
        )

    run = run_component(build)
    group = holder["g"]
    assert group.taints == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert group.labels == one(run, NG)["inputs"]["labels"]
    assert one(run, "rlinf-eks:index:EfaGpuNodeGroup")["name"] == "gpu"
