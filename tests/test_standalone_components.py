"""Every public component is usable alone, with only its own settings: RlinfTraining from
TrainingSettings (the sections it reads) builds exactly the stack's training run, and states the
shared-filesystem choice instead of inferring it."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pulumi
import pydantic
import pytest

import rlinf_eks
from rlinf_eks import JobSetController, KubeRayOperator, RlinfTraining
from rlinf_eks.config import ConfigError, StackSettings
from rlinf_eks.workload import TrainingSettings
from rlinf_eks.workload.standalone import STANDALONE_RULES
from tests.harness import one, plan_stack, run_component

IMAGE = "example.com/rlinf:test"
TRAINING = "rlinf-eks:index:RlinfTraining"


@pytest.mark.parametrize("name", rlinf_eks.__all__)
def test_no_public_component_needs_the_whole_stack_settings(name):
    cls = getattr(rlinf_eks, name)
    module = inspect.getmodule(cls)
    for parameter in inspect.signature(cls.__init__).parameters.values():
        annotation = str(parameter.annotation)  # the source text (from __future__ import annotations)
        models = {getattr(module, word) for word in re.findall(r"\b(\w+Settings)\b", annotation)}
        assert all(issubclass(model, pydantic.BaseModel) for model in models)
        if StackSettings in models:
            # a smaller model of the component's own sections is accepted beside it
            assert models - {StackSettings}, f"{name}({parameter.name}: {annotation}) accepts only the whole StackSettings"


def test_training_settings_reuse_the_stacks_sections_and_write_no_default_twice():
    stack_fields = StackSettings.model_fields
    for field_name, field in TrainingSettings.model_fields.items():
        theirs = stack_fields[field_name]
        assert field.annotation is theirs.annotation and field.alias == theirs.alias, field_name
        if not field.is_required():
            assert field.default_factory is theirs.default_factory and field.description == theirs.description, field_name
    # the stack's rules over these sections run; those about creating a cluster or a network do not
    sections = {section for rule in STANDALONE_RULES for section in rule.sections}
    assert {"workload", "gpuNodes", "storage", "preflight", "kuberay"} >= sections >= {"workload", "gpuNodes", "storage"}


def _first(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        if key in node:
            return node[key]
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            found = _first(item, key)
            if found is not None:
                return found
    return None


def _training_objects(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    training = one(resources, TRAINING)["urn"]
    return {r["name"]: r["inputs"] for r in resources if r["parent"] == training}


@pytest.mark.parametrize("stack", ["single-node", "multi-node", "multi-node-kuberay", "capacity-block"])
def test_training_alone_from_its_own_sections_builds_the_stacks_training_run(stack):
    plan = plan_stack(stack)
    s = plan.settings
    assert s is not None
    fs = s.storage.shared_filesystem.model_copy(update={"enabled": s.shared_filesystem})
    alone = TrainingSettings(
        workload=s.workload,
        gpu_nodes=s.gpu_nodes,
        storage={"sharedFilesystem": fs.model_dump(by_alias=True)},
        preflight=s.preflight,
        cluster={"kubernetesVersion": s.cluster.kubernetes_version},
        kuberay=s.kuberay,
        observability={"backend": s.observability_backend},
    )
    in_plan = _training_objects(plan.resources)
    training_pods = [inputs for name, inputs in in_plan.items() if "watchdog" not in name]
    claim = _first(training_pods, "claimName")
    assert (claim is not None) == s.shared_filesystem

    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=alone,
            service_account_name=_first(training_pods, "serviceAccountName"),
            bucket_name=plan.outputs["checkpointBucket"],
            shared_volume_claim=claim,
            # the stack's FSx exports new files to the checkpoint bucket (its data repository association)
            shared_volume_exported=claim is not None,
            operator=KubeRayOperator("kuberay", settings=s.kuberay) if s.kuberay.enabled else None,
            jobset=JobSetController("jobset", settings=s.workload.restart) if s.workload.uses_jobset else None,
        )

    assert _training_objects(run_component(program, stack=stack)) == in_plan


def _build(alone: TrainingSettings, claim: str | None = None) -> None:
    def program() -> None:
        RlinfTraining("rlinf", settings=alone, service_account_name="training-sa", bucket_name="ckpt", shared_volume_claim=claim)

    run_component(program)


def _alone(nodes: int = 1, shared: bool | None = None, **extra: Any) -> TrainingSettings:
    storage = {"sharedFilesystem": {} if shared is None else {"enabled": shared}}
    return TrainingSettings(workload={"image": IMAGE}, gpu_nodes={"nodeCount": nodes}, storage=storage, **extra)


@pytest.mark.parametrize("nodes", [1, 2])
def test_training_alone_must_be_told_whether_the_run_has_a_shared_filesystem(nodes):
    with pytest.raises(ConfigError, match=r"storage\.sharedFilesystem\.enabled=null: RlinfTraining alone must be told"):
        _build(_alone(nodes), claim="fsx-claim" if nodes > 1 else None)


def test_training_alone_needs_its_gpu_nodes_and_storage_choice_given():
    with pytest.raises(pydantic.ValidationError) as err:
        TrainingSettings(workload={"image": IMAGE})
    assert {e["loc"][0] for e in err.value.errors()} == {"gpuNodes", "storage"}


def test_training_alone_on_two_nodes_without_the_shared_filesystem_is_refused():
    with pytest.raises(ConfigError, match=r"storage\.sharedFilesystem\.enabled=false: 2 nodes .* needs the shared filesystem"):
        _build(_alone(2, shared=False))


@pytest.mark.parametrize(
    "alone, claim, message",
    [
        (_alone(2, shared=True), None, r"the settings use the shared filesystem .* but no shared_volume_claim was given"),
        (_alone(1, shared=False), "fsx-claim", r"a shared_volume_claim was given but the settings do not use the shared filesystem"),
    ],
)
def test_training_alone_with_a_claim_that_disagrees_is_refused(alone, claim, message):
    with pytest.raises(ValueError, match=message):
        _build(alone, claim)


def test_training_alone_runs_the_stacks_rules_over_its_sections_only():
    # the cluster's rules (a new cluster's reachable endpoint) do not apply to yours
    _build(_alone(1, shared=False))
    problems = [
        (dict(workload={"image": IMAGE, "rollout": {"backend": "vllm", "tensorParallelSize": 3}}), r"tensorParallelSize=3: must divide"),
        (dict(workload={"image": IMAGE, "launcher": "kuberay"}), r"workload\.launcher='kuberay': needs the KubeRay operator"),
    ]
    for sections, message in problems:
        alone = TrainingSettings(gpu_nodes={}, storage={"sharedFilesystem": {"enabled": False}}, **sections)
        with pytest.raises(ConfigError, match=message):
            _build(alone)


def test_training_alone_takes_the_bucket_as_an_argument_not_a_setting():
    alone = TrainingSettings(workload={"image": IMAGE}, gpu_nodes={}, storage={"bucketName": "my-bucket", "sharedFilesystem": {"enabled": False}})
    with pytest.raises(ConfigError, match=r"storage\.bucketName='my-bucket': RlinfTraining takes the checkpoint bucket as bucket_name="):
        _build(alone)


def test_training_alone_on_two_nodes_with_the_claim_mounts_it():
    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=_alone(2, shared=True),
            service_account_name="training-sa",
            bucket_name="ckpt",
            shared_volume_claim=pulumi.Output.from_input("fsx-claim"),
        )

    job = one(run_component(program), "kubernetes:batch/v1:Job", "rlinf-job")["inputs"]
    assert job["spec"]["parallelism"] == 2
    assert _first(job, "claimName") == "fsx-claim"
