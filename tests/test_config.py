"""The typed stack config: defaults, derived values, and bad input rejected with the key named."""

import pytest

from rlinf_eks import catalog
from rlinf_eks.config import ConfigError, StackSettings
from rlinf_eks.loading import parse
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
    # no instance store the catalog knows: the run directory is on the root volume (the storage budget)
    s = settings(gpuNodes={"instanceType": "g6.12xlarge", "instanceOverrides": figures, "rootVolumeGib": 400})
    assert s.gpu_nodes.instance.max_efa == 16 and s.gpu_nodes.instance.source == "stack config"


def test_overrides_correct_a_known_type():
    s = settings(gpuNodes={"instanceType": "p6-b200.48xlarge", "instanceOverrides": {"memoryGib": 2016}})
    assert s.gpu_nodes.instance.memory_gib == 2016
    assert s.gpu_nodes.instance.gpus == catalog.CATALOG["p6-b200.48xlarge"].gpus


# Each row: sections (camelCase, merged over a minimal valid config), then text every message must name.
BAD = [
    ("node count zero", {"gpuNodes": {"nodeCount": 0}}, ["gpuNodes.nodeCount=0", "at least 1", "gpuNodes.scaleToZero"]),
    ("node count not a number", {"gpuNodes": {"nodeCount": "two"}}, ["gpuNodes.nodeCount='two'"]),
    ("not an EC2 instance type", {"gpuNodes": {"instanceType": "p9.huge"}}, ["gpuNodes.instanceType='p9.huge'", "not an EC2 instance type"]),
    ("EC2 instance type misspelt", {"gpuNodes": {"instanceType": "p5.48xlarg"}}, ["gpuNodes.instanceType='p5.48xlarg'", "did you mean p5.48xlarge?"]),
    ("EC2 type the catalog lacks", {"gpuNodes": {"instanceType": "g6.12xlarge"}}, ["gpuNodes.instanceType='g6.12xlarge'", "p5.48xlarge", "instanceOverrides"]),
    ("unknown type, partial figures", {"gpuNodes": {"instanceType": "g6.12xlarge", "instanceOverrides": {"gpus": 8}}}, ["gpuNodes.instanceOverrides={'gpus': 8}", "every figure", "missing: gpuModel"]),
    ("system node type not in EC2", {"cluster": {"systemNodes": {"instanceType": "m6i.huge"}}}, ["cluster.systemNodes.instanceType='m6i.huge'", "not an EC2 instance type"]),
    ("EFA on a type without EFA", {"gpuNodes": {"instanceType": "g5.2xlarge"}}, ["gpuNodes.efa=true", "g5.2xlarge has no EFA"]),
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
    ("multi-node without shared filesystem", {"gpuNodes": {"nodeCount": 2}, "storage": {"sharedFilesystem": {"enabled": False}}}, ["storage.sharedFilesystem.enabled=false", "shard per rank"]),
    ("FSx capacity", {"storage": {"sharedFilesystem": {"storageCapacityGib": 3000}}}, ["storage.sharedFilesystem.storageCapacityGib=3000", "2400"]),
    ("FSx throughput", {"storage": {"sharedFilesystem": {"throughputMbpsPerTib": 200}}}, ["storage.sharedFilesystem.throughputMbpsPerTib=200"]),
    ("region", {"region": "mars-1"}, ["region='mars-1'", "us-east-1"]),
    ("AZ outside the region", {"availabilityZone": "us-west-2a"}, ["availabilityZone='us-west-2a'", "us-east-1"]),
    ("one control-plane AZ", {"network": {"availabilityZones": ["us-east-1a"]}}, ["network.availabilityZones", "two AZs"]),
    ("GPU AZ missing from VPC AZs", {"network": {"availabilityZones": ["us-east-1b", "us-east-1c"]}}, ["network.availabilityZones", "us-east-1a"]),
    ("VPC CIDR", {"network": {"cidr": "10.0.0.0/24"}}, ["network.cidr='10.0.0.0/24'", "/20"]),
    ("VPC CIDR shape", {"network": {"cidr": "ten"}}, ["network.cidr='ten'", "CIDR"]),
    ("NAT gateways", {"network": {"natGateways": "two"}}, ["network.natGateways='two'", "'single' or 'one-per-az'"]),
    ("existing VPC without subnets", {"network": {"vpcId": "vpc-0123456789abcdef0"}}, ["network.privateSubnetIds", "network.gpuSubnetId"]),
    ("subnets without existing VPC", {"network": {"privateSubnetIds": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]}}, ["network.privateSubnetIds", "network.vpcId"]),
    ("existing cluster without a name", {"cluster": {"existing": True}}, ["cluster.name", "must be named"]),
    ("existing cluster in a new VPC", {"cluster": {"existing": True, "name": "c"}}, ["network.vpcId", "existing cluster"]),
    ("public endpoint open to the world", {"cluster": {"endpointPublicAccessCidrs": ["0.0.0.0/0"]}}, ["cluster.endpointPublicAccessCidrs", "allowPublicEndpointFromAnywhere"]),
    ("endpoint CIDR shape", {"cluster": {"endpointPublicAccessCidrs": ["my-office"]}}, ["cluster.endpointPublicAccessCidrs", "[0]='my-office': not a CIDR block"]),
    ("kubernetes version", {"cluster": {"kubernetesVersion": "1.20"}}, ["cluster.kubernetesVersion='1.20'", "1.35", "quoted in YAML"]),
    ("VPC CNI too old for efa-only", {"cluster": {"vpcCniVersion": "v1.18.1-eksbuild.1"}}, ["cluster.vpcCniVersion", "v1.18.5"]),
    ("log type", {"cluster": {"logTypes": ["everything"]}}, ["cluster.logTypes[0]='everything'"]),
    ("preflight without EFA", {"gpuNodes": {"efa": False}, "preflight": {"enabled": True}}, ["preflight.enabled", "efa"]),
    ("admin role not an ARN", {"cluster": {"adminRoleArns": ["admin"]}}, ["cluster.adminRoleArns=['admin']", "'admin' is not an IAM role ARN", "arn:aws:iam::123456789012:role/Admin"]),
    ("image is a pair of quotes (shell slip)", {"workload": {"image": '""'}}, ["workload.image='\"\"'", "container image reference"]),
    ("image with a blank", {"workload": {"image": "rlinf v0.3"}}, ["workload.image='rlinf v0.3'", "container image reference"]),
    ("workload missing", {"workload": None}, ["workload=null"]),
    ("tags not a mapping", {"tags": "team=robotics"}, ["tags='team=robotics'", "must be an object"]),
    ("misspelt rollout key", {"workload": {"image": "i", "rollout": {"backnd": "vllm"}}}, ["workload.rollout.backnd", "did you mean backend?"]),
    # S3 bucket naming rules
    ("bucket name too short", {"storage": {"bucketName": "ab"}}, ["storage.bucketName='ab'", "3 to 63"]),
    ("bucket name uppercase", {"storage": {"bucketName": "My-Checkpoints"}}, ["storage.bucketName='My-Checkpoints'", "lowercase"]),
    ("bucket name too long", {"storage": {"bucketName": "a" * 64}}, ["storage.bucketName='" + "a" * 64 + "'", "3 to 63"]),
    ("bucket name with adjacent periods", {"storage": {"bucketName": "my..bucket"}}, ["storage.bucketName='my..bucket'", "adjacent periods"]),
    ("bucket name an IP address", {"storage": {"bucketName": "192.168.5.4"}}, ["storage.bucketName='192.168.5.4'", "IP address"]),
    ("bucket name xn-- prefix", {"storage": {"bucketName": "xn--checkpoints"}}, ["storage.bucketName='xn--checkpoints'", "starting with xn--"]),
    ("bucket name sthree- prefix", {"storage": {"bucketName": "sthree-checkpoints"}}, ["storage.bucketName='sthree-checkpoints'", "sthree-"]),
    ("bucket name -s3alias suffix", {"storage": {"bucketName": "ckpt-s3alias"}}, ["storage.bucketName='ckpt-s3alias'", "ending with -s3alias"]),
    ("bucket name --ol-s3 suffix", {"storage": {"bucketName": "ckpt--ol-s3"}}, ["storage.bucketName='ckpt--ol-s3'", "ending with --ol-s3"]),
    ("bucket name ends with a hyphen", {"storage": {"bucketName": "ckpt-"}}, ["storage.bucketName='ckpt-'", "ending with a letter or digit"]),
    # node labels
    ("label with kubernetes.io prefix", {"gpuNodes": {"labels": {"kubernetes.io/role": "gpu"}}}, ["gpuNodes.labels[\"kubernetes.io/role\"]='gpu'", "reserved"]),
    ("label with a kubernetes.io subdomain", {"gpuNodes": {"labels": {"topology.kubernetes.io/zone": "z"}}}, ["gpuNodes.labels[\"topology.kubernetes.io/zone\"]", "reserved"]),
    ("label with k8s.io prefix", {"gpuNodes": {"labels": {"k8s.io/team": "ml"}}}, ["gpuNodes.labels[\"k8s.io/team\"]='ml'", "reserved"]),
    ("label overriding role", {"gpuNodes": {"labels": {"role": "training"}}}, ["gpuNodes.labels.role='training'", "role=gpu-training", "never schedule"]),
    ("label overriding the EFA label", {"gpuNodes": {"labels": {"vpc.amazonaws.com/efa.present": "false"}}}, ["gpuNodes.labels[\"vpc.amazonaws.com/efa.present\"]='false'", "EFA device plugin"]),
    ("label key syntax", {"gpuNodes": {"labels": {"team name": "ml"}}}, ["gpuNodes.labels[\"team name\"]", "not a Kubernetes label key"]),
    ("label key too long for EKS", {"gpuNodes": {"labels": {"example.com/" + "k" * 60: "v"}}}, ["gpuNodes.labels[\"example.com/" + "k" * 60 + "\"]", "at most 63"]),
    ("label value syntax", {"gpuNodes": {"labels": {"team": "ml/rl"}}}, ["gpuNodes.labels.team='ml/rl'", "label value"]),
    ("label value empty (EKS needs 1)", {"gpuNodes": {"labels": {"team": ""}}}, ["gpuNodes.labels.team=''", "1 to 63"]),
    # AWS tags
    ("tag key with aws: prefix", {"tags": {"aws:team": "ml"}}, ["tags[\"aws:team\"]='ml': tag keys starting with aws: are reserved for AWS"]),
    ("tag value over 256", {"tags": {"team": "x" * 257}}, ["tags.team='" + "x" * 257 + "': a tag value is at most 256 characters (257)"]),
    ("tag key over 128", {"tags": {"k" * 129: "v"}}, ["tags." + "k" * 129 + "='v': a tag key is 1 to 128 characters (129)"]),
    # EKS names
    ("cluster name with a dot", {"cluster": {"name": "rlinf.prod"}}, ["cluster.name='rlinf.prod'", "EKS cluster name"]),
    ("cluster name starting with a hyphen", {"cluster": {"name": "-rlinf"}}, ["cluster.name='-rlinf'", "starting with a letter or digit"]),
    ("new cluster name too long for <cluster>-system", {"cluster": {"name": "c" * 57}}, ["cluster.name='" + "c" * 57 + "'", "-system", "at most 56"]),
    ("existing cluster name over 100", {"cluster": {"existing": True, "name": "c" * 101}, "network": {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"], "gpuSubnetId": "subnet-0123456789abcdef1"}}, ["cluster.name='" + "c" * 101 + "'", "1 to 100"]),
    # VPC CIDR
    ("VPC CIDR larger than /16", {"network": {"cidr": "10.0.0.0/8"}}, ["network.cidr='10.0.0.0/8'", "/16", "/28"]),
    ("VPC CIDR beyond /28", {"network": {"cidr": "10.0.0.0/30"}}, ["network.cidr='10.0.0.0/30'", "/16", "/28"]),
    ("VPC CIDR with host bits", {"network": {"cidr": "10.0.1.0/16"}}, ["network.cidr='10.0.1.0/16'", "10.0.0.0/16"]),
    ("VPC CIDR IPv6", {"network": {"cidr": "fd00::/56"}}, ["network.cidr='fd00::/56'", "IPv4"]),
    ("VPC CIDR too small for the AZs", {"region": "us-east-1", "network": {"cidr": "10.0.0.0/20", "availabilityZones": [f"us-east-1{c}" for c in "abcdefghijklmnopqrstuvwxyz"] * 10}}, ["network.cidr='10.0.0.0/20'", "cannot hold"]),
    ("VPC AZ listed twice", {"network": {"availabilityZones": ["us-east-1a", "us-east-1b", "us-east-1a"]}}, ["network.availabilityZones", "twice"]),
    # regions and AZs
    ("unknown region", {"region": "us-east-9"}, ["region='us-east-9'", "not an AWS region", "us-east-1"]),
    ("region misspelt", {"region": "eu-wset-1"}, ["region='eu-wset-1'", "did you mean eu-west-1?"]),
    ("region given as an AZ", {"region": "us-west-2a"}, ["region='us-west-2a'", "Availability Zone, not a region: use us-west-2"]),
    ("AZ given as a region", {"availabilityZone": "us-east-1"}, ["availabilityZone='us-east-1'", "a region, not an Availability Zone", "us-east-1a"]),
    ("AZ of the wrong shape", {"availabilityZone": "us-east-1-a"}, ["availabilityZone='us-east-1-a'", "us-east-1a"]),
    ("VPC AZ outside the region", {"network": {"availabilityZones": ["us-east-1a", "us-west-2b"]}}, ["network.availabilityZones[1]='us-west-2b'", "region us-east-1"]),
    # ids of the wrong kind
    ("vpcId is a subnet id", {"network": {"vpcId": "subnet-0123456789abcdef0"}}, ["network.vpcId='subnet-0123456789abcdef0'", "vpc-0123456789abcdef0"]),
    ("vpcId empty", {"network": {"vpcId": ""}}, ["network.vpcId=''", "VPC id"]),
    ("subnet id is a security group id", {"network": {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["sg-0123456789abcdef0", "subnet-0123456789abcdef1"], "gpuSubnetId": "subnet-0123456789abcdef1"}}, ["network.privateSubnetIds[0]='sg-0123456789abcdef0'", "subnet-0123456789abcdef0"]),
    ("GPU subnet id is a VPC id", {"network": {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"], "gpuSubnetId": "vpc-0123456789abcdef0"}}, ["network.gpuSubnetId='vpc-0123456789abcdef0'", "subnet id"]),
    # Capacity Blocks
    ("Capacity Block of a type EC2 does not sell so", {"gpuNodes": {"instanceType": "g6e.48xlarge", "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}}, ["gpuNodes.capacityType='CAPACITY_BLOCK'", "no Capacity Blocks of g6e.48xlarge", "p5en.48xlarge"]),
    # chart versions
    ("kuberay version not a version", {"kuberay": {"version": "latest"}}, ["kuberay.version='latest'", "MAJOR.MINOR.PATCH"]),
    ("kuberay version with a v", {"kuberay": {"version": "v1.7.0"}}, ["kuberay.version='v1.7.0'", "such as 1.7.0"]),
    ("nvidia plugin version", {"devicePlugins": {"nvidiaVersion": "0.18"}}, ["devicePlugins.nvidiaVersion='0.18'", "MAJOR.MINOR.PATCH"]),
    ("EFA plugin version without its v", {"devicePlugins": {"efaVersion": "0.5.20"}}, ["devicePlugins.efaVersion='0.5.20'", "vMAJOR.MINOR.PATCH"]),
    ("autoscaler chart version", {"autoscaler": {"version": "9.x"}}, ["autoscaler.version='9.x'", "MAJOR.MINOR.PATCH"]),
    ("kuberay namespace", {"kuberay": {"namespace": "Ray_System"}}, ["kuberay.namespace='Ray_System'", "namespace"]),
    # booleans where integers go, and vice versa
    ("node count true", {"gpuNodes": {"nodeCount": True}}, ["gpuNodes.nodeCount=true", "must be an integer"]),
    ("max nodes false", {"gpuNodes": {"maxNodes": False}}, ["gpuNodes.maxNodes=false", "must be an integer"]),
    ("node count a float", {"gpuNodes": {"nodeCount": 2.0}}, ["gpuNodes.nodeCount=2.0", "must be an integer"]),
    ("node count a numeric string", {"gpuNodes": {"nodeCount": "2"}}, ["gpuNodes.nodeCount='2'", "must be an integer"]),
    ("batch size true", {"workload": {"image": "i", "trainer": {"batch": {"data.train_batch_size": True}}}}, ['workload.trainer.batch["data.train_batch_size"]=true', "must be an integer"]),
    ("efa a string", {"gpuNodes": {"efa": "yes"}}, ["gpuNodes.efa='yes'", "true or false"]),
    ("efa an integer", {"gpuNodes": {"efa": 1}}, ["gpuNodes.efa=1", "true or false"]),
    ("GPU memory utilization true", {"workload": {"image": "i", "rollout": {"gpuMemoryUtilization": True}}}, ["workload.rollout.gpuMemoryUtilization=true", "not a boolean"]),
    # paths inside pods
    ("relative mount path", {"storage": {"sharedFilesystem": {"mountPath": "fsx"}}}, ["storage.sharedFilesystem.mountPath='fsx'", "absolute path"]),
    ("mount path with ..", {"storage": {"sharedFilesystem": {"mountPath": "/fsx/../etc"}}}, ["storage.sharedFilesystem.mountPath='/fsx/../etc'", "'..'"]),
    ("mount path /", {"storage": {"sharedFilesystem": {"mountPath": "/"}}}, ["storage.sharedFilesystem.mountPath='/'", "below /"]),
    ("env name with a blank", {"workload": {"image": "i", "env": {"NCCL DEBUG": "INFO"}}}, ["workload.env=", "'NCCL DEBUG'", "environment variable names"]),
    ("env name starting with a digit", {"workload": {"image": "i", "env": {"1X": "y"}}}, ["'1X'", "not starting with a digit"]),
    ("relative trainer workdir", {"workload": {"image": "i", "trainer": {"workdir": "workspace"}}}, ["workload.trainer.workdir='workspace'", "absolute path"]),
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


@pytest.mark.parametrize(
    "good",
    [
        {"gpuNodes": {"labels": {"team": "ml", "example.com/run": "a.b_c-1", "node.kubernetes.io/pool": "gpu", "role": "gpu-training"}}},
        {"tags": {"team": "ml", "cost-center": "x" * 256, "k" * 128: ""}},
        {"storage": {"bucketName": "my.checkpoints-2026"}},
        {"cluster": {"name": "c" * 56}},
        {"availabilityZone": "us-east-1-bos-1a", "network": {"availabilityZones": ["us-east-1-bos-1a", "us-east-1b"]}},
        {"region": "eu-west-1"},
        {"network": {"cidr": "10.0.0.0/20"}},
        {"workload": {"image": "i", "rollout": {"gpuMemoryUtilization": 1}}},
        {"gpuNodes": {"instanceType": "p4d.24xlarge", "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}},
        {"kuberay": {"enabled": True, "version": "1.7.0-rc.1"}},
    ],
)
def test_values_at_the_edge_of_the_rules_are_accepted(good):
    parse(_data(good))


@pytest.mark.parametrize(
    "stack, sections, expected",
    [
        ("my.stack", {}, ["cluster.name=null", "'rlinf-my.stack'", "set cluster.name"]),
        ("s" * 51, {}, ["cluster.name=null", "-system", "at most 56"]),
        ("s" * 257, {"cluster": {"name": "rlinf"}}, ["every resource is tagged with the stack name", "at most 256"]),
    ],
)
def test_names_derived_from_the_stack_name_are_checked(stack, sections, expected):
    with pytest.raises(ConfigError) as err:
        parse(_data(sections), stack=stack)
    for text in expected:
        assert text in str(err.value), f"{text!r} not in:\n{err.value}"
    parse(_data(sections), stack="dev")
    parse(_data({"cluster": {"name": "rlinf"}}), stack="s" * 51)  # a named cluster does not derive from the stack


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
    from rlinf_eks.loading import settings_from_config

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


def test_every_stack_rule_reads_top_level_sections_only():
    from rlinf_eks import loading

    keys = {field.alias or name for name, field in StackSettings.model_fields.items()}
    assert loading.RULES and all(rule.sections and set(rule.sections) <= keys for rule in loading.RULES)
