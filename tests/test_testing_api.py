"""rlinf_eks.testing: a user's own Pulumi program planned offline, and the plan is the one the CLI
writes (resources, outputs, manifests, policy results)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest

from rlinf_eks import policies, testing
from rlinf_eks.offline.outputs.plan import violations_of_plan
from tests import harness
from tests.harness import ROOT, plan_stack
from tests.test_readme import SECTION

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

EXAMPLE = ROOT / "examples" / "own-cluster"


def test_a_projects_folder_plans_to_exactly_the_plan_the_cli_writes():
    """plan_project reads Pulumi.yaml and the stack file and runs __main__.py as pulumi up does:
    run on this project's own folder, it gives the CLI's plan, byte for byte."""
    ours = testing.plan_project(ROOT, "multi-node", sets=["gpuNodes.rootVolumeGib=300"])
    cli = plan_stack("multi-node", "gpuNodes.rootVolumeGib=300")
    assert ours.dumps() == cli.dumps()
    assert ours.manifests() == cli.manifests() and len(ours.manifests()) > 10
    assert ours.outputs["trainingEntrypoint"] == cli.outputs["trainingEntrypoint"]  # pulumi.export'ed by __main__.py
    assert testing.violations(ours) == violations_of_plan(cli)


def _bucket_program():
    config = pulumi.Config()
    bucket = aws.s3.Bucket("data", tags=config.require_object("tags"))
    k8s.Provider("k8s", kubeconfig=config.require_secret("kubeconfig"))
    pulumi.export("exported", bucket.id)
    return {"returned": config.require("greeting"), "token": config.require_secret("kubeconfig")}


def test_a_program_function_plans_with_its_config_secrets_and_both_kinds_of_outputs():
    plan = testing.plan_program(
        _bucket_program,
        project="my-infra",
        stack="dev",
        config={"tags": {"team": "robotics"}, "greeting": "hello", "my-infra:kubeconfig": "apiVersion: v1", "aws:region": "us-west-2"},
        secret_keys=["kubeconfig"],
    )
    bucket = testing.one(plan, "aws:s3/bucket:Bucket", "data")
    assert bucket["urn"] == "urn:pulumi:dev::my-infra::aws:s3/bucket:Bucket::data"
    assert testing.has_inputs(bucket, {"tags": {"team": "robotics"}})
    assert testing.one(plan, "pulumi:providers:kubernetes")["inputs"]["kubeconfig"] == "[secret]"
    assert plan.outputs == {"exported": bucket["id"], "returned": "hello", "token": "[secret]"}
    assert "apiVersion: v1" not in plan.dumps()
    assert [r["urn"] for r in plan.resources] == sorted(r["urn"] for r in plan.resources)


def test_runs_do_not_leak_into_each_other():
    first = testing.plan_program(_bucket_program, project="a", config={"tags": {}, "greeting": "1", "kubeconfig": "x"})
    second = testing.plan_program(lambda: {"only": "this"}, project="b")
    assert first.outputs["returned"] == "1"
    assert second.resources == [] and second.outputs == {"only": "this"}


def test_register_keeps_the_registration_order():
    def program():
        # (siblings reach the engine in any order; a dependency orders them, as in a real deployment)
        first = aws.s3.Bucket("z-first")
        aws.s3.Bucket("a-second", opts=pulumi.ResourceOptions(depends_on=[first]))

    assert [r["name"] for r in testing.register(program)] == ["z-first", "a-second"]


def test_violations_are_the_policies_over_the_plan_with_optional_opt_ins():
    def program():
        aws.eks.Cluster(
            "open",
            role_arn="arn:aws:iam::123456789012:role/eks",
            vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=["subnet-1"], public_access_cidrs=["0.0.0.0/0"]),
        )

    plan = testing.plan_program(program, project="p")
    found = testing.violations(plan)
    assert found and found == policies.evaluate(plan.resources)
    assert len(testing.violations(plan, policies.PolicyOptions(allow_public_endpoint_from_anywhere=True))) < len(found)


def test_write_plan_writes_what_the_cli_writes(tmp_path):
    plan = testing.plan_project(EXAMPLE, "dev")
    assert testing.write_plan(plan, tmp_path) == []
    assert json.loads((tmp_path / "plan.json").read_text()) == plan.to_json()
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == sorted(plan.manifests())
    assert not (tmp_path / "efficiency.json").exists()  # a report of this project's stacks only


def test_the_root_stack_keeps_exports_as_the_engine_internals_used_here_expect():
    """plan_program reads pulumi.export's values from the root stack resource (the SDK keeps them in
    Stack.outputs until the program ends); fails naming the change on a new SDK."""
    from pulumi.runtime.stack import Stack

    assert "outputs" in Stack.__init__.__code__.co_names, "pulumi.runtime.stack.Stack no longer keeps .outputs"


def test_the_test_harness_is_built_on_the_public_api():
    assert harness.one is testing.one and harness.of_type is testing.of_type and harness.has_inputs is testing.has_inputs
    source = (ROOT / "tests" / "harness.py").read_text()
    assert "rlinf_eks.offline.engine import engine" not in source and "engine.run(" not in source


def test_the_repositorys_test_command_collects_the_examples_tests():
    testpaths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
    example_tests = sorted((ROOT / "examples").glob("*/test_*.py"))
    assert example_tests, "no example test"
    for path in example_tests:
        assert any(path.is_relative_to(ROOT / folder) for folder in testpaths), f"{path} is outside testpaths {testpaths}"
    # .ci/run and the workflow run pytest without paths, so testpaths decides what they collect
    for runner in (ROOT / ".ci" / "run", ROOT / ".github" / "workflows" / "ci.yml"):
        for command in re.findall(r"python -m pytest([^\n&|;]*)", runner.read_text()):
            args = re.sub(r"(-n|--numprocesses|--dist)[ =]\S+", "", command).split()  # options and their values
            assert not [arg for arg in args if not arg.startswith("-")], command


def test_the_components_guide_documents_the_api_and_its_test_block_passes_on_the_example():
    from tests import docs_text

    body = docs_text.section(docs_text.DOCS / "components.md", SECTION)
    for name in ("plan_project", "plan_program", "violations", "write_plan", "one", "of_type", "has_inputs"):
        assert f"`{name}" in body and name in testing.__all__, name
    assert "examples/own-cluster/" in body
    (block,) = re.findall(r"```py\n(.*?)```", body, flags=re.S)
    namespace = {"__name__": "test_readme_block", "__file__": str(EXAMPLE / "test_readme_block.py")}
    exec(compile(block, "docs/components.md", "exec"), namespace)
    tests = [value for key, value in namespace.items() if key.startswith("test_")]
    assert tests
    for test in tests:
        test()


def test_a_missing_stack_file_names_the_stacks_there_are():
    from rlinf_eks.offline.engine.stack_config import StackConfigError

    with pytest.raises(StackConfigError, match=r"unknown stack 'prod'.*stacks: dev"):
        testing.plan_project(EXAMPLE, "prod")


def test_the_example_program_is_its_own_project(tmp_path):
    project = (EXAMPLE / "Pulumi.yaml").read_text()
    assert "name: gpu-training" in project
    main = (EXAMPLE / "__main__.py").read_text()
    assert "from rlinf_eks import" in main and "tests" not in re.findall(r"^from (\S+)", main, flags=re.M)
    assert Path(EXAMPLE / "test_own_cluster.py").read_text().count("from rlinf_eks.testing import") == 1
