"""The example program planned offline through the library's public testing API, as a user tests
their own program: no Pulumi CLI, no credentials, no network (`pytest examples/own-cluster`)."""

from pathlib import Path

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.testing import has_inputs, one, plan_project, violations

HERE = Path(__file__).resolve().parent


def test_the_dev_stack_plans_gpu_nodes_and_the_training_run_onto_the_existing_cluster():
    plan = plan_project(HERE, "dev")

    # the node group joins the cluster of the stack file, in its GPU subnet, with EFA on every card
    node_group = one(plan, "aws:eks/nodeGroup:NodeGroup")
    assert has_inputs(node_group, {"clusterName": "research", "subnetIds": ["subnet-0123456789abcdef0"], "scalingConfig": {"desiredSize": 1}})
    interfaces = one(plan, "aws:ec2/launchTemplate:LaunchTemplate")["inputs"]["networkInterfaces"]
    assert len(interfaces) == 32 and {i["interfaceType"] for i in interfaces} == {"efa", "efa-only"}

    # the training run, one pod per node, on the cluster's provider
    job = plan.manifests()["job-rlinf-training.yaml"]
    assert job["spec"]["parallelism"] == 1 and job["spec"]["template"]["spec"]["serviceAccountName"] == "training-sa"
    provider = one(plan, "pulumi:providers:kubernetes")
    assert one(plan, "kubernetes:batch/v1:Job", "rlinf-job")["provider"] == provider["urn"]
    assert provider["inputs"]["kubeconfig"] == "[secret]"  # the stack file's secure value stays secret

    # the GPU nodes come last: they depend on the training run and everything before it
    depends = set(one(plan, "rlinf-eks:index:EfaGpuNodeGroup")["options"]["dependsOn"])
    assert one(plan, "kubernetes:batch/v1:Job", "rlinf-job")["urn"] in depends

    assert plan.outputs["trainingEntrypoint"].startswith("python examples/reasoning/main_grpo.py")
    assert set(plan.outputs) == {"gpuNodeGroup", "checkpointBucket", "trainingEntrypoint"}
    assert violations(plan) == []


def test_two_nodes_with_a_shared_claim_mount_it_on_every_pod():
    plan = plan_project(HERE, "dev", sets=["gpuNodes.nodeCount=2", "sharedFilesystemClaim=research-fsx"])
    job = plan.manifests()["job-rlinf-training.yaml"]
    assert job["spec"]["parallelism"] == 2
    claims = [v["persistentVolumeClaim"]["claimName"] for v in job["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claims == ["research-fsx"]


def test_two_nodes_without_a_shared_claim_are_refused_not_run_on_per_node_storage():
    with pytest.raises(ConfigError, match=r"storage\.sharedFilesystem\.enabled=false: 2 nodes .* needs the shared filesystem"):
        plan_project(HERE, "dev", sets=["gpuNodes.nodeCount=2"])
