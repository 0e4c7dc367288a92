"""Every stack end to end under mocks, against a golden plan per stack.

A pull request that changes infrastructure changes tests/snapshots/<stack>.plan.json, so the
change shows in review. Re-record with:  RLINF_EKS_UPDATE_SNAPSHOTS=1 pytest tests/test_stacks.py
"""

import json
import os

import pytest

from rlinf_eks.__main__ import main
from tests.harness import ALL_STACKS, PLATFORM_STACKS, ROOT, STACKS, one, plan_stack

SNAPSHOTS = ROOT / "tests" / "snapshots"
UPDATE = os.environ.get("RLINF_EKS_UPDATE_SNAPSHOTS") == "1"


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_plan_matches_its_golden_snapshot(stack):
    text = plan_stack(stack).dumps()
    golden = SNAPSHOTS / f"{stack}.plan.json"
    if UPDATE:
        golden.write_text(text)
    # a test never writes into the repository unasked: a new stack's golden plan is recorded on purpose
    assert golden.exists(), f"no golden plan for {stack}: record it with RLINF_EKS_UPDATE_SNAPSHOTS=1, review and commit it"
    assert text == golden.read_text(), (
        f"{stack}'s infrastructure changed; if intended, re-record with RLINF_EKS_UPDATE_SNAPSHOTS=1 "
        f"and review `python -m rlinf_eks diff tests/snapshots/{stack}.plan.json build/{stack}`"
    )


@pytest.mark.parametrize("stack", STACKS + PLATFORM_STACKS)
def test_every_stack_has_one_gpu_node_group_in_one_subnet(stack):
    plan = plan_stack(stack)
    group = one(plan, "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")
    assert len(group["inputs"]["subnetIds"]) == 1


def test_two_runs_give_identical_bytes():
    from rlinf_eks.offline.outputs.plan import make_plan
    from rlinf_eks.offline.engine.stack_config import load

    assert make_plan(load(ROOT, "multi-node")).dumps() == make_plan(load(ROOT, "multi-node")).dumps()


def test_plan_json_has_the_public_shape():
    plan = json.loads(plan_stack("single-node").dumps())
    # region: extended in 0.3 (where every AWS resource lives; the diff reads a change of it);
    # unchecked: extended in 0.3 (what only `pulumi up` can judge; left out when nothing is);
    # firstStep: extended by issue 35 (the wait from node Ready to the first step, a stack that trains)
    # storageBudget, gpuMemory: extended by issue 52 (the run directory's storage, the trainer's GPU memory)
    assert set(plan) == {"project", "stack", "resources", "outputs", "notPlanned", "region", "unchecked", "firstStep", "storageBudget", "gpuMemory"}
    assert plan["storageBudget"]["verdict"] == "fits" and plan["storageBudget"]["storage"]["key"] == "gpuNodes.localNvmeRaid0"
    assert set(plan["gpuMemory"]) >= {"recipe", "gpu", "usableGiB", "verdict"}
    assert all(isinstance(line, str) and "=" in line for line in plan["unchecked"])
    assert set(plan["firstStep"]) == {"imagePull", "inputStaging", "rayJoin", "trainerStart", "totalSeconds", "cuts"}
    assert plan["project"] == "rlinf-eks" and plan["stack"] == "single-node" and plan["region"] == "us-east-1"
    for resource in plan["resources"]:
        assert set(resource) == {"urn", "type", "name", "id", "parent", "custom", "provider", "inputs", "options"}
        assert set(resource["options"]) == {"protect", "retainOnDelete", "dependsOn", "ignoreChanges", "deleteBeforeReplace", "replaceOnChanges"}
    assert [r["urn"] for r in plan["resources"]] == sorted(r["urn"] for r in plan["resources"])
    assert plan["outputs"]["kubeconfig"] == "[secret]"


def test_cli_writes_plan_and_one_manifest_per_kubernetes_object(tmp_path, capsys):
    assert main(["plan", "multi-node", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "Resources:" in printed and "aws:eks/nodeGroup:NodeGroup" in printed
    # sections of the printed report are separated by a blank line
    assert "\n\nEfficiency (" in printed and "\n\nOutputs:\n" in printed
    written = json.loads((tmp_path / "plan.json").read_text())
    kinds = [r for r in written["resources"] if r["type"].startswith("kubernetes:") and not r["type"].startswith(("kubernetes:helm.sh", "pulumi:"))]
    files = sorted(p.name for p in (tmp_path / "manifests").iterdir())
    assert len(files) == len(kinds) > 0
    assert all(name == name.lower() and name.endswith(".yaml") for name in files)


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "single-node", "--set", "gpuNodes.nodeCount=0"], "gpuNodes.nodeCount=0"),
        (["plan", "single-node", "--set", "workload.rollout.tensorParallelSize=3", "--set", "workload.rollout.backend=vllm"], "tensorParallelSize=3"),
        (["plan", "single-node", "--set", "gpuNodes.instanceType=p9.huge"], "not an EC2 instance type"),
        (["plan", "single-node", "--set", "gpuNodes.instanceType=g6.12xlarge"], "known types"),
        (["plan", "single-node", "--set", "gpuNodez.nodeCount=2"], "rlinf-eks:gpuNodez: unknown key"),
        (["plan", "no-such-stack"], "unknown stack"),
        (["plan", "single-node", "--set", "gpuNode.nodeCount=2"], "rlinf-eks:gpuNode: unknown key (did you mean gpuNodes?)"),
        (["plan", "single-node", "--set", "workload.image="], "workload.image=''"),
        (["plan", "single-node", "--set", 'workload.image=""'], "container image reference"),
        (["plan", "single-node", "--set", "cluster.adminRoleArns[2]=x"], "use [0] to append"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(args, message, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "plan.json").exists()


@pytest.mark.parametrize(
    "stack_file, message",
    [
        ("config: [a\n", "stacks/Pulumi.s.yaml line 2: not valid YAML"),
        ("config:\n  - rlinf-eks:gpuNodes\n", "config must map keys to values"),
        ("- config\n", "must be a mapping with a config: key"),
        ("config:\n  aws:region: us-east-1\n  nodeCount: 2\n  rlinf-eks:workload: {image: i}\n", "rlinf-eks:nodeCount: unknown key"),
    ],
)
def test_a_broken_stack_file_exits_2_naming_the_file(stack_file, message, tmp_path, monkeypatch, capsys):
    """GIVEN a stack file that is not YAML, not a mapping, or has a key outside the model WHEN
    planned THEN exit 2 with the file (and line) named, never a traceback."""
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text(stack_file)
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "s", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_misspelt_top_level_key_stops_pulumi_up_too():
    import pulumi

    with pytest.raises(pulumi.RunError, match="rlinf-eks:gpuNode: unknown key"):
        _program_file_run({"rlinf-eks:gpuNode": {"nodeCount": 2}})


def _program_file_run(values):
    """Run the project's own __main__.py (what `pulumi up` runs) under mocks."""
    import runpy

    from rlinf_eks.offline.engine import engine
    from rlinf_eks.offline.engine.stack_config import load

    config = load(ROOT, "single-node")
    config.values.update(values)
    exported = {}

    def program():
        import pulumi

        original = pulumi.export
        pulumi.export = lambda key, value: exported.__setitem__(key, value)
        try:
            runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        finally:
            pulumi.export = original
        return exported

    return engine.run(program, project="rlinf-eks", stack="single-node", config=config.flat())


def test_the_pulumi_program_file_builds_and_exports_the_stack_outputs():
    run = _program_file_run({})
    assert {"clusterName", "kubeconfig", "gpuNodeGroup", "placementGroup", "checkpointBucket", "sharedFilesystem"} <= set(run.outputs)
    assert run.outputs["kubeconfig"] == "[secret]"
    assert len(run.registrations) == len(plan_stack("single-node").resources)


def test_a_bad_config_stops_pulumi_up_cleanly_before_any_resource_is_registered():
    import pulumi

    from rlinf_eks.offline.engine import engine

    registered = []
    original = engine.RecordingMonitor.RegisterResource

    def spy(self, request):
        registered.append(request.type)
        return original(self, request)

    engine.RecordingMonitor.RegisterResource = spy
    try:
        with pytest.raises(pulumi.RunError) as err:
            _program_file_run({"rlinf-eks:gpuNodes": {"instanceType": "p9.huge", "nodeCount": 0}})
    finally:
        engine.RecordingMonitor.RegisterResource = original
    assert "gpuNodes.nodeCount=0" in str(err.value) or "gpuNodes.instanceType='p9.huge'" in str(err.value)
    assert [t for t in registered if t != "pulumi:pulumi:Stack"] == []  # the root stack exists before the program runs
