"""Bad input from another language fails as a bad stack file does: the config loader's lines, one
per problem, all at once, before anything is registered; as Pulumi's invalid-input error, each
line with the path of the property it names."""

from __future__ import annotations

import copy

import pulumi
import pytest
from pulumi.errors import InputPropertiesError, InputPropertyError

from rlinf_eks.config import ConfigError
from rlinf_eks.hosted.provider import property_path
from rlinf_eks.loading import parse
from rlinf_eks.testing import register
from tests.harness import MINIMAL
from tests.hosted_harness import construct

REFS = {"clusterName": "c", "clusterSecurityGroupId": "sg-0123456789abcdef0", "subnetId": "subnet-0123456789abcdef0"}


def _failure(component: str, values: dict, opts=None) -> InputPropertiesError:
    """The error of constructing ``component`` from ``values``; nothing was registered before it."""
    with pytest.raises(InputPropertiesError) as err:
        register(lambda: construct(component, "x", values, opts), project="rlinf-eks")
    return err.value


def _loader_problems(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse(data, "test")
    return err.value.problems


BAD_GPU_NODES = {"instanceType": "p5.48xl", "nodeCount": 2.5, "efa": "yes", "rootVolumeGib": 50}
# (an unknown key never reaches the component: the SDKs are typed by the schema, and the provider
# maps only the schema's properties)


def test_efa_gpu_node_group_reports_every_problem_as_the_loader_does():
    error = _failure("EfaGpuNodeGroup", {**REFS, "gpuNodes": BAD_GPU_NODES})
    lines = [e["reason"] for e in error.errors]
    loader = _loader_problems({**MINIMAL, "gpuNodes": BAD_GPU_NODES})
    assert lines == [p for p in loader if p.startswith("gpuNodes")]
    assert len(lines) == 4
    assert error.message == str(ConfigError(lines))
    assert [e["property_path"] for e in error.errors] == [
        "gpuNodes.instanceType", "gpuNodes.nodeCount", "gpuNodes.efa", "gpuNodes.rootVolumeGib",
    ]  # fmt: skip
    assert "did you mean p5.48xlarge?" in lines[0]


def test_tags_follow_the_stacks_tag_rules():
    error = _failure("EfaGpuNodeGroup", {**REFS, "tags": {"aws:owner": "me"}, "gpuNodes": {"nodeCount": 0}})
    assert [e["property_path"] for e in error.errors] == ['tags["aws:owner"]', "gpuNodes.nodeCount"]  # the bad tag itself, as a Pulumi property path


def test_a_whole_number_is_an_integer_and_a_fraction_is_not():
    # the wire has no integers: 2 arrives as 2.0 and is read as 2; 2.5 is refused as a stack file's would be
    error = _failure("EfaGpuNodeGroup", {**REFS, "gpuNodes": {"nodeCount": 2, "rootVolumeGib": 100.5}})
    assert [e["reason"] for e in error.errors] == ["gpuNodes.rootVolumeGib=100.5: must be an integer (unquoted, no decimal point)"]


def test_a_setting_from_another_resources_output_is_refused_by_name():
    def program():
        construct("KubeRayOperator", "x", {"kuberay": {"version": "1.7.0", "namespace": "ray"}})

    register(program, project="rlinf-eks")  # plain values are fine

    values = {"kuberay": {"version": pulumi.Output.secret("1.7.0"), "namespace": "Bad_NS"}}
    with pytest.raises(InputPropertiesError) as err:
        register(lambda: construct_raw("KubeRayOperator", values), project="rlinf-eks")
    assert [e["property_path"] for e in err.value.errors] == ["kuberay.version", "kuberay.namespace"]
    assert "must be a plain value" in err.value.errors[0]["reason"]


def construct_raw(component: str, values: dict):
    from rlinf_eks.hosted.provider import provider

    return provider().construct("x", f"rlinf-eks:index:{component}", values, pulumi.ResourceOptions())


def test_rlinf_training_runs_the_stacks_rules_over_its_sections():
    values = {
        "serviceAccountName": "sa", "bucketName": "b",
        "workload": {"image": "i", "trainer": {"dialect": "rlinf-embodied"}, "rollout": {"backend": "vllm"}},
        "gpuNodes": {"nodeCount": 2},
        "storage": {"sharedFilesystem": {}},
    }  # fmt: skip
    error = _failure("RlinfTraining", values)
    assert [e["property_path"] for e in error.errors] == ["storage.sharedFilesystem.enabled", "workload.rollout.backend"]
    assert error.errors[1]["reason"] == "workload.rollout.backend='vllm': RLinf embodied training rolls out with HuggingFace only: use hf"


def test_rlinf_training_names_a_claim_that_disagrees_with_the_settings():
    values = {"serviceAccountName": "sa", "bucketName": "b", "workload": {"image": "i"}, "gpuNodes": {}, "storage": {"sharedFilesystem": {"enabled": False}},
              "sharedVolumeClaim": "shared-fs"}  # fmt: skip
    error = _failure("RlinfTraining", values)
    assert [e["property_path"] for e in error.errors] == ["sharedVolumeClaim"]


@pytest.mark.parametrize(
    "sections",
    [
        {"gpuNodes": {"nodeCount": 0}, "workload": {"image": ""}, "queue": {"topologyLayer": 7}},
        {"workload": {"image": "i", "launcher": "kuberay"}, "cluster": {"deployFromVpc": True}},  # kuberay off
        {"workload": {"image": "i", "trainer": {"batch": {"actor.global_batch_size": 7}}}, "cluster": {}, "region": "us-east-1a"},
        {"cluster": {"deployFromVpc": True}},  # workload missing
    ],
)
def test_rlinf_stack_fails_with_exactly_the_loaders_error(sections):
    expected = _loader_problems(copy.deepcopy(sections))
    error = _failure("RlinfStack", sections)
    assert error.message == str(ConfigError(expected))
    assert [e["reason"] for e in error.errors] == expected
    assert all(e["property_path"] and not e["property_path"].startswith("aws:") for e in error.errors)


def test_a_missing_reference_is_the_sdks_own_error():
    with pytest.raises(InputPropertyError) as err:
        register(lambda: construct("EfaGpuNodeGroup", "x", {"gpuNodes": {}}), project="rlinf-eks")
    assert err.value.property_path == "clusterName"


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("gpuNodes.nodeCount=0: must be at least 1", "gpuNodes.nodeCount"),
        ('workload.trainer.batch["actor.global_batch_size"]=7: not a multiple: 8', 'workload.trainer.batch["actor.global_batch_size"]'),
        ("aws:region='us-east-1a': an Availability Zone, not a region: use us-east-1", "region"),
        ("workload: required key is missing; an object with at least: image", "workload"),
        ('gpuNodes.labels["a=b"]=\'x\': bad', 'gpuNodes.labels["a=b"]'),
    ],
)
def test_the_property_path_is_the_key_path_a_line_starts_with(line, path):
    assert property_path(line) == path
