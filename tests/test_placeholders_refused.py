"""The Pulumi program itself refuses placeholders (issue 54, item 4): `pulumi preview` and `pulumi up`
stop before the first resource on the documentation CIDR or the example account's image, unless the
stack sets allowPlaceholders: true, while the offline plan reports them as before. The program runs
here under the mocks as the real engine runs it (engine.run(offline=False): the plan's report of
placeholders is what only the offline engine adds)."""

from __future__ import annotations

import runpy
from typing import Callable

import pulumi
import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.engine import engine
from rlinf_eks.offline.engine.stack_config import load
from tests.harness import ROOT

OWN_VALUES = [
    "cluster.endpointPublicAccessCidrs[0]=198.18.0.7/32",
    "workload.image=210987654321.dkr.ecr.us-east-1.amazonaws.com/rlinf-on-eks/rlinf-embodied:v0.3",
]


def _program_file() -> None:
    """__main__.py, what `pulumi up` runs, as the language host runs it."""
    runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")


def _deploy(stack: str, sets: list[str], monkeypatch) -> list[str]:
    """Run the program file as `pulumi preview` / `pulumi up` would; the types it registered."""
    registered: list[str] = []
    original = engine.RecordingMonitor.RegisterResource

    def spy(self, request):
        registered.append(request.type)
        return original(self, request)

    monkeypatch.setattr(engine.RecordingMonitor, "RegisterResource", spy)
    config = load(ROOT, stack, sets)
    engine.run(_program_file, project="rlinf-eks", stack=stack, config=config.flat(), offline=False)
    return [t for t in registered if t != "pulumi:pulumi:Stack"]


def test_pulumi_up_of_an_example_stack_is_refused_before_any_resource(monkeypatch):
    registered: list[str] = []
    with pytest.raises(pulumi.RunError) as refused:
        registered = _deploy("quickstart", [], monkeypatch)
    lines = str(refused.value).splitlines()
    assert lines[0] == "invalid stack configuration:"
    assert lines[1].startswith("  - cluster.endpointPublicAccessCidrs[0]='203.0.113.0/24': a documentation address range")
    assert lines[2].startswith("  - workload.image='123456789012.dkr.ecr.us-east-1.amazonaws.com/rlinf-on-eks/rlinf-embodied:v0.3': ")
    assert all(line.endswith("; or set allowPlaceholders: true to deploy this example value as it is") for line in lines[1:])
    assert len(lines) == 3 and "Traceback" not in str(refused.value)
    assert registered == []


def test_allow_placeholders_deploys_them_as_they_are(monkeypatch):
    assert "aws:ec2/vpc:Vpc" in _deploy("quickstart", ["allowPlaceholders=true"], monkeypatch)


def test_a_stack_with_its_own_values_deploys(monkeypatch):
    assert "aws:ec2/vpc:Vpc" in _deploy("quickstart", OWN_VALUES, monkeypatch)


def test_one_placeholder_left_is_refused_naming_it(monkeypatch):
    with pytest.raises(pulumi.RunError) as refused:
        _deploy("quickstart", OWN_VALUES[:1], monkeypatch)
    (line,) = str(refused.value).splitlines()[1:]
    assert line.startswith("  - workload.image='123456789012.")


def test_the_offline_plan_still_plans_and_reports_them(tmp_path, capsys):
    assert main(["plan", "quickstart", "--quiet", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "placeholder: cluster.endpointPublicAccessCidrs[0]='203.0.113.0/24'" in err
    assert "2 placeholders to replace: pulumi up refuses them unless the stack sets allowPlaceholders: true" in err


@pytest.mark.parametrize(("sets", "status"), [([], 1), (["allowPlaceholders=true"], 0)], ids=["refused", "allowed"])
def test_strict_follows_the_stacks_allow_placeholders(sets, status, tmp_path, capsys):
    argv = ["plan", "quickstart", "--quiet", "--strict", "--out", str(tmp_path)]
    assert main([*argv, *(a for s in sets for a in ("--set", s))]) == status
    last = capsys.readouterr().err.strip().splitlines()[-1]
    if status:
        assert last.endswith("(--strict: failing; --allow-placeholders to plan example stacks)")
    else:
        assert last == "2 placeholders, deployed as they are (allowPlaceholders: true)"


def test_the_hosted_rlinf_stack_refuses_them_as_the_program_does():
    """RlinfStack from another language's program: the same refusal, as the invalid-input error
    naming the key, under the real engine; the offline plan of that program still plans."""
    from pulumi.errors import InputPropertiesError

    from tests.hosted_harness import construct

    workload = {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1", "launcher": "manual",
                "trainer": {"dialect": "rlinf-embodied", "configName": "maniskill_ppo_mlp"}, "rollout": {"backend": "hf"}}  # fmt: skip
    values = {"workload": workload, "cluster": {"deployFromVpc": True}, "gpuNodes": {"instanceType": "g5.2xlarge", "efa": False,
              "hugepagesGib": 0, "placementGroup": {"strategy": "none"}}}  # fmt: skip
    def stack(values: dict) -> Callable[[], dict]:
        return lambda: (construct("RlinfStack", "s", values), {})[1]

    with pytest.raises(InputPropertiesError) as refused:
        engine.run(stack(values), project="rlinf-eks", stack="s", config={}, offline=False)
    assert [e["property_path"] for e in refused.value.errors] == ["workload.image"]
    assert "123456789012 is the AWS documentation's example account" in refused.value.errors[0]["reason"]
    allowed = engine.run(stack({**values, "allowPlaceholders": True}), project="rlinf-eks", stack="s", config={}, offline=False)
    assert any(r.type == "aws:ec2/vpc:Vpc" for r in allowed.registrations)
    assert engine.run(stack(values), project="rlinf-eks", stack="s", config={}).registrations
