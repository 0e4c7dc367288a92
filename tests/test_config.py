"""The typed stack config: defaults, derived values, and bad input rejected with the key named."""

import pytest

from rlinf_eks import catalog
from rlinf_eks.config import ConfigError, StackSettings, parse
from tests.harness import MINIMAL, settings


def test_defaults_are_a_deployable_single_p5_node():
    s = settings()
    assert s.gpu_nodes.instance.name == "p5.48xlarge"
    assert s.gpu_nodes.node_count == 1
    assert s.gpu_az == "us-east-1a"
    assert s.workload.launcher == "manual" and s.workload.rollout.backend == "hf"
    assert s.kuberay.enabled is False and s.kuberay.version == "1.7.0"
    assert s.shared_filesystem is False


def test_settings_are_frozen():
    s = settings()
    with pytest.raises(Exception):
        s.gpu_nodes.node_count = 3  # type: ignore[misc]


def test_shared_filesystem_defaults_on_for_multi_node():
    assert settings(gpuNodes={"nodeCount": 2}).shared_filesystem is True
    assert settings(gpuNodes={"nodeCount": 2}, storage={"sharedFilesystem": {"enabled": True}}).shared_filesystem


@pytest.mark.parametrize(
    "gpu, expected",
    [
        ({}, True),
        ({"capacityReservationId": "cr-0123456789abcdef0"}, False),
        ({"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}, False),
        ({"placementGroup": {"strategy": "none"}}, False),
        ({"placementGroup": {"strategy": "existing", "name": "pg"}}, True),
    ],
)
def test_placement_group_unless_capacity_is_reserved(gpu, expected):
    assert settings(gpuNodes=gpu).gpu_nodes.wants_placement_group is expected


def test_unknown_type_with_every_figure_given_is_accepted():
    figures = {"gpus": 8, "gpuModel": "X", "gpuMemoryGib": 96, "vcpu": 192, "memoryGib": 2048,
               "networkCards": 16, "maxEfa": 16, "bandwidthGbps": 3200, "gpudirectRdma": True}
    s = settings(gpuNodes={"instanceType": "p9.48xlarge", "instanceOverrides": figures})
    assert s.gpu_nodes.instance.max_efa == 16 and s.gpu_nodes.instance.source == "stack config"


def test_overrides_correct_a_known_type():
    s = settings(gpuNodes={"instanceType": "p6-b200.48xlarge", "instanceOverrides": {"memoryGib": 2016}})
    assert s.gpu_nodes.instance.memory_gib == 2016
    assert s.gpu_nodes.instance.gpus == catalog.CATALOG["p6-b200.48xlarge"].gpus


# Each row: sections (camelCase, merged over a minimal valid config), then text every message must name.
BAD = [
    ("node count zero", {"gpuNodes": {"nodeCount": 0}}, ["gpuNodes.nodeCount=0", "greater than or equal to 1"]),
    ("node count not a number", {"gpuNodes": {"nodeCount": "two"}}, ["gpuNodes.nodeCount='two'"]),
    ("unknown instance type", {"gpuNodes": {"instanceType": "p9.huge"}}, ["gpuNodes.instanceType='p9.huge'", "p5.48xlarge"]),
    ("unknown type, partial figures", {"gpuNodes": {"instanceType": "p9.huge", "instanceOverrides": {"gpus": 8}}}, ["gpuNodes.instanceOverrides", "every figure"]),
    ("EFA on a type without EFA", {"gpuNodes": {"instanceType": "g5.2xlarge"}}, ["gpuNodes.efa=True", "g5.2xlarge has no EFA"]),
    ("misspelt node key", {"gpuNodes": {"nodecount": 2}}, ["gpuNodes.nodecount", "unknown key (did you mean nodeCount?)", "maxNodes"]),
    ("misspelt top-level key", {"gpuNode": {"nodeCount": 2}}, ["gpuNode", "unknown key", "gpuNodes"]),
    ("capacity type", {"gpuNodes": {"capacityType": "RESERVED"}}, ["gpuNodes.capacityType='RESERVED'", "ON_DEMAND"]),
    ("capacity block without reservation", {"gpuNodes": {"capacityType": "CAPACITY_BLOCK"}}, ["gpuNodes.capacityReservationId", "Capacity Block"]),
    ("reservation id shape", {"gpuNodes": {"capacityReservationId": "res-1"}}, ["gpuNodes.capacityReservationId='res-1'", "cr-0123456789abcdef0"]),
    ("spot with reservation", {"gpuNodes": {"capacityType": "SPOT", "capacityReservationId": "cr-0123456789abcdef0"}}, ["gpuNodes.capacityReservationId", "SPOT"]),
    ("reservation with forced placement group", {"gpuNodes": {"capacityReservationId": "cr-0123456789abcdef0", "placementGroup": {"strategy": "create"}}}, ["gpuNodes.placementGroup.strategy='create'", "InsufficientInstanceCapacity"]),
    ("existing placement group without name", {"gpuNodes": {"placementGroup": {"strategy": "existing"}}}, ["gpuNodes.placementGroup.name", "existing"]),
    ("placement group name without existing", {"gpuNodes": {"placementGroup": {"name": "pg"}}}, ["gpuNodes.placementGroup.name='pg'"]),
    ("max below node count", {"gpuNodes": {"nodeCount": 4, "maxNodes": 2}}, ["gpuNodes.maxNodes=2", "at least nodeCount (4)"]),
    ("root volume too small", {"gpuNodes": {"rootVolumeGib": 20}}, ["gpuNodes.rootVolumeGib=20"]),
    ("nvme raid on bottlerocket", {"gpuNodes": {"amiType": "BOTTLEROCKET_x86_64_NVIDIA", "localNvmeRaid0": True}}, ["gpuNodes.localNvmeRaid0", "AL2023"]),
    ("ami type", {"gpuNodes": {"amiType": "AL2_x86_64_GPU"}}, ["gpuNodes.amiType='AL2_x86_64_GPU'", "AL2023_x86_64_NVIDIA"]),
    ("scale to zero without autoscaler", {"gpuNodes": {"scaleToZero": True}}, ["gpuNodes.scaleToZero", "autoscaler.enabled"]),
    ("vLLM TP not dividing GPUs", {"workload": {"image": "i", "rollout": {"backend": "vllm", "tensorParallelSize": 3}}}, ["workload.rollout.tensorParallelSize=3", "1, 2, 4, 8"]),
    ("vLLM TP larger than the node", {"gpuNodes": {"instanceType": "g5.8xlarge"}, "workload": {"image": "i", "rollout": {"backend": "vllm", "tensorParallelSize": 2}}}, ["workload.rollout.tensorParallelSize=2", "1 on g5.8xlarge"]),
    ("GPU memory utilization above 1", {"workload": {"image": "i", "rollout": {"gpuMemoryUtilization": 1.5}}}, ["workload.rollout.gpuMemoryUtilization=1.5"]),
    ("rollout backend", {"workload": {"image": "i", "rollout": {"backend": "trt"}}}, ["workload.rollout.backend='trt'", "'hf', 'vllm' or 'sglang'"]),
    ("embodied with vLLM", {"workload": {"image": "i", "trainer": {"dialect": "rlinf-embodied"}, "rollout": {"backend": "vllm"}}}, ["workload.rollout.backend='vllm'", "HuggingFace only"]),
    ("reasoning with hf", {"workload": {"image": "i", "trainer": {"dialect": "rlinf-reasoning"}}}, ["workload.rollout.backend='hf'", "vllm or sglang"]),
    ("verl with sglang", {"workload": {"image": "i", "rollout": {"backend": "sglang"}}}, ["workload.rollout.backend='sglang'", "hf or vllm"]),
    ("dialect", {"workload": {"image": "i", "trainer": {"dialect": "openrlhf"}}}, ["workload.trainer.dialect='openrlhf'", "verl-ppo"]),
    ("kuberay launcher with KubeRay off", {"workload": {"image": "i", "launcher": "kuberay"}}, ["workload.launcher='kuberay'", "kuberay.enabled: true"]),
    ("launcher", {"workload": {"image": "i", "launcher": "slurm"}}, ["workload.launcher='slurm'", "'manual' or 'kuberay'"]),
    ("image missing", {"workload": {}}, ["workload.image", "missing"]),
    ("image empty", {"workload": {"image": ""}}, ["workload.image=''"]),
    ("ray version in the bad range", {"workload": {"image": "i", "rayVersion": "2.20.0"}}, ["workload.rayVersion='2.20.0'", "2.38.0 or newer"]),
    ("ray version shape", {"workload": {"image": "i", "rayVersion": "latest"}}, ["workload.rayVersion='latest'", "2.49.2"]),
    ("namespace not DNS-1035", {"workload": {"image": "i", "namespace": "RLinf_ns"}}, ["workload.namespace='RLinf_ns'", "DNS-1035"]),
    ("override without =", {"workload": {"image": "i", "trainer": {"overrides": ["trainer.nnodes"]}}}, ["workload.trainer.overrides", "key=value"]),
    ("shm fraction", {"workload": {"image": "i", "shmFraction": 1.2}}, ["workload.shmFraction=1.2"]),
    ("join timeout too short", {"workload": {"image": "i", "joinTimeoutSeconds": 5}}, ["workload.joinTimeoutSeconds=5"]),
    ("multi-node without shared filesystem", {"gpuNodes": {"nodeCount": 2}, "storage": {"sharedFilesystem": {"enabled": False}}}, ["storage.sharedFilesystem.enabled=False", "shard per rank"]),
    ("FSx capacity", {"storage": {"sharedFilesystem": {"storageCapacityGib": 3000}}}, ["storage.sharedFilesystem.storageCapacityGib=3000", "2400"]),
    ("FSx throughput", {"storage": {"sharedFilesystem": {"throughputMbpsPerTib": 200}}}, ["storage.sharedFilesystem.throughputMbpsPerTib=200"]),
    ("region", {"region": "mars-1"}, ["region='mars-1'", "us-east-1"]),
    ("AZ outside the region", {"availabilityZone": "us-west-2a"}, ["availabilityZone='us-west-2a'", "us-east-1"]),
    ("one control-plane AZ", {"network": {"availabilityZones": ["us-east-1a"]}}, ["network.availabilityZones", "two AZs"]),
    ("GPU AZ missing from VPC AZs", {"network": {"availabilityZones": ["us-east-1b", "us-east-1c"]}}, ["network.availabilityZones", "us-east-1a"]),
    ("VPC CIDR", {"network": {"cidr": "10.0.0.0/24"}}, ["network.cidr='10.0.0.0/24'", "/20"]),
    ("VPC CIDR shape", {"network": {"cidr": "ten"}}, ["network.cidr='ten'", "CIDR"]),
    ("NAT gateways", {"network": {"natGateways": "two"}}, ["network.natGateways='two'", "'single' or 'one-per-az'"]),
    ("existing VPC without subnets", {"network": {"vpcId": "vpc-1"}}, ["network.privateSubnetIds", "network.gpuSubnetId"]),
    ("subnets without existing VPC", {"network": {"privateSubnetIds": ["subnet-1", "subnet-2"]}}, ["network.privateSubnetIds", "network.vpcId"]),
    ("existing cluster without a name", {"cluster": {"existing": True}}, ["cluster.name", "must be named"]),
    ("existing cluster in a new VPC", {"cluster": {"existing": True, "name": "c"}}, ["network.vpcId", "existing cluster"]),
    ("public endpoint open to the world", {"cluster": {"endpointPublicAccessCidrs": ["0.0.0.0/0"]}}, ["cluster.endpointPublicAccessCidrs", "allowPublicEndpointFromAnywhere"]),
    ("endpoint CIDR shape", {"cluster": {"endpointPublicAccessCidrs": ["my-office"]}}, ["cluster.endpointPublicAccessCidrs", "'my-office' is not a CIDR"]),
    ("kubernetes version", {"cluster": {"kubernetesVersion": "1.20"}}, ["cluster.kubernetesVersion='1.20'", "1.34"]),
    ("VPC CNI too old for efa-only", {"cluster": {"vpcCniVersion": "v1.18.1-eksbuild.1"}}, ["cluster.vpcCniVersion", "v1.18.5"]),
    ("log type", {"cluster": {"logTypes": ["everything"]}}, ["cluster.logTypes[0]='everything'"]),
    ("preflight without EFA", {"gpuNodes": {"efa": False}, "preflight": {"enabled": True}}, ["preflight.enabled", "efa"]),
    ("admin role not an ARN", {"cluster": {"adminRoleArns": ["admin"]}}, ["cluster.adminRoleArns=['admin']", "'admin' is not an IAM role ARN", "arn:aws:iam::123456789012:role/Admin"]),
    ("image is a pair of quotes (shell slip)", {"workload": {"image": '""'}}, ["workload.image='\"\"'", "container image reference"]),
    ("image with a blank", {"workload": {"image": "rlinf v0.3"}}, ["workload.image='rlinf v0.3'", "container image reference"]),
    ("workload missing", {"workload": None}, ["workload=None"]),
    ("tags not a mapping", {"tags": "team=robotics"}, ["tags='team=robotics'", "dictionary"]),
    ("misspelt rollout key", {"workload": {"image": "i", "rollout": {"backnd": "vllm"}}}, ["workload.rollout.backnd", "did you mean backend?"]),
]


def _data(sections):
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in MINIMAL.items()}
    data.update(sections)
    if isinstance(sections.get("cluster"), dict):
        # a case's cluster section keeps the endpoint choice every new cluster needs
        data["cluster"] = {**MINIMAL["cluster"], **sections["cluster"]}
    return data


@pytest.mark.parametrize("sections, expected", [pytest.param(s, e, id=i) for i, s, e in BAD])
def test_bad_config_is_rejected_naming_the_key_and_what_is_valid(sections, expected):
    with pytest.raises(ConfigError) as err:
        parse(_data(sections))
    message = str(err.value)
    for text in expected:
        assert text in message, f"{text!r} not in:\n{message}"
    assert "Traceback" not in message


def test_the_bad_input_table_is_large():
    assert len(BAD) >= 30


def test_every_problem_of_a_section_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        parse(_data({"gpuNodes": {"instanceType": "g5.2xlarge", "capacityType": "CAPACITY_BLOCK", "maxNodes": 0}}))
    assert len(err.value.problems) >= 1
    with pytest.raises(ConfigError) as err:
        parse(_data({"gpuNodes": {"instanceType": "g5.2xlarge", "capacityType": "CAPACITY_BLOCK"}}))
    assert {"gpuNodes.efa", "gpuNodes.capacityReservationId"} <= {p.split("=")[0] for p in err.value.problems}


def test_a_missing_workload_names_the_keys_it_needs():
    with pytest.raises(ConfigError) as err:
        parse({"gpuNodes": {"nodeCount": 1}, "cluster": {"deployFromVpc": True}})
    assert err.value.problems == ["workload: required key is missing; an object with at least: image"]


def test_rules_between_valid_sections_are_reported_with_a_field_error_elsewhere():
    """GIVEN a field error in gpuNodes and, separately, launcher kuberay with KubeRay off and an
    AZ outside the region WHEN parsed THEN all three are reported in one run."""
    data = _data({
        "gpuNodes": {"nodeCount": 0},
        "region": "eu-west-1",
        "availabilityZone": "us-east-1a",
        "workload": {"image": "i", "launcher": "kuberay"},
    })
    with pytest.raises(ConfigError) as err:
        parse(data)
    keys = [p.split("=")[0] for p in err.value.problems]
    assert keys == ["gpuNodes.nodeCount", "availabilityZone", "workload.launcher"]


def test_rules_reading_a_failed_section_are_skipped_not_guessed():
    """GIVEN a bad gpuNodes section WHEN parsed THEN rules that need its GPUs per node (vLLM TP)
    or its node count (shared filesystem) are not judged against the default node type (TP 3
    would be reported as not dividing the 8 GPUs of p5.48xlarge)."""
    data = _data({
        "gpuNodes": {"instanceType": "g5.8xlarge", "nodeCount": 2, "efa": "maybe"},
        "workload": {"image": "i", "rollout": {"backend": "vllm", "tensorParallelSize": 3}},
        "storage": {"sharedFilesystem": {"enabled": False}},
    })
    with pytest.raises(ConfigError) as err:
        parse(data)
    assert [p.split("=")[0] for p in err.value.problems] == ["gpuNodes.efa"]


def test_valid_settings_round_trip_through_camel_case():
    s = settings(gpuNodes={"nodeCount": 3}, workload={"image": "i", "rollout": {"backend": "vllm", "tensorParallelSize": 4}})
    again = StackSettings.model_validate(s.model_dump(by_alias=True))
    assert again == s


def test_whole_pulumi_config_rejects_an_unknown_project_key_and_ignores_other_namespaces():
    """GIVEN the config `pulumi up` hands the program (objects as JSON text) WHEN a top-level key
    of this project is misspelt THEN it is rejected with a hint, while provider keys pass."""
    from rlinf_eks.config import settings_from_config

    values = {
        "aws:region": "us-east-1",
        "aws:profile": "training",
        "kubernetes:context": "other",
        "rlinf-eks:workload": '{"image": "i"}',
        "rlinf-eks:cluster": '{"deployFromVpc": true}',
        "rlinf-eks:hfToken": "[secret]",
        "rlinf-eks:gpuNode": '{"nodeCount": 2}',
    }
    with pytest.raises(ConfigError) as err:
        settings_from_config(values)
    assert len(err.value.problems) == 1
    assert err.value.problems[0].startswith("rlinf-eks:gpuNode: unknown key (did you mean gpuNodes?); valid keys: ")
    del values["rlinf-eks:gpuNode"]
    assert settings_from_config(values).workload.image == "i"
