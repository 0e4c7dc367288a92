"""Reading stack files and `--set` edits the way the Pulumi CLI would."""

import json

import pytest

from rlinf_eks.offline.stack_config import StackConfigError, load, parse_scalar, set_path
from tests.harness import ROOT, STACKS


def test_every_design_card_stack_exists():
    assert {"single-node", "multi-node", "vllm-rollout", "multi-node-kuberay"} <= set(STACKS)


def test_project_values_are_defaults_that_stack_files_override():
    cfg = load(ROOT, "single-node")
    assert cfg.values["aws:region"] == "us-east-1"
    assert cfg.values["rlinf-eks:availabilityZone"] == "us-east-1a"  # Pulumi.yaml default is ""


def test_objects_reach_the_program_as_json_strings():
    flat = load(ROOT, "multi-node").flat()
    assert json.loads(flat["rlinf-eks:gpuNodes"])["nodeCount"] == 2


def test_set_follows_pulumi_config_set_path_and_leaves_the_stack_file_alone():
    cfg = load(ROOT, "single-node", ["gpuNodes.nodeCount=4", "workload.trainer.overrides[0]=trainer.save_freq=10"])
    assert cfg.values["rlinf-eks:gpuNodes"]["nodeCount"] == 4
    assert cfg.values["rlinf-eks:gpuNodes"]["instanceType"] == "p5.48xlarge"
    assert cfg.values["rlinf-eks:workload"]["trainer"]["overrides"] == ["trainer.save_freq=10"]
    assert load(ROOT, "single-node").values["rlinf-eks:gpuNodes"]["nodeCount"] == 1


def test_set_accepts_the_project_namespace_and_other_namespaces():
    cfg = load(ROOT, "single-node", ["rlinf-eks:kuberay.enabled=true", "aws:region=us-west-2"])
    assert cfg.values["rlinf-eks:kuberay"] == {"enabled": True}
    assert cfg.values["aws:region"] == "us-west-2"


@pytest.mark.parametrize(
    "raw, value",
    [("true", True), ("false", False), ("8", 8), ("-1", -1), ("0.5", 0.5), ("p5.48xlarge", "p5.48xlarge"), ("1.34", 1.34), ("", "")],
)
def test_set_values_are_typed_like_the_cli(raw, value):
    assert parse_scalar(raw) == value


def test_set_path_quotes_keys_that_contain_dots():
    values = {}
    set_path(values, 'ns:workload.trainer.batch["actor.global_batch_size"]', 512)
    assert values == {"ns:workload": {"trainer": {"batch": {"actor.global_batch_size": 512}}}}


def test_set_path_builds_missing_objects_and_lists():
    values = {}
    set_path(values, "ns:a.b[0].c", 1)
    assert values == {"ns:a": {"b": [{"c": 1}]}}


@pytest.mark.parametrize(
    "sets, message",
    [
        (["gpuNodes.nodeCount"], "expected KEY=VALUE"),
        (["workload.trainer.overrides[3]=x"], "past the end"),
        (["gpuNodes[0]=1"], "indexes an object"),
    ],
)
def test_bad_set_is_explained(sets, message):
    with pytest.raises(StackConfigError, match=message):
        load(ROOT, "single-node", sets)


def test_unknown_stack_lists_the_known_ones():
    with pytest.raises(StackConfigError, match="stacks: .*single-node"):
        load(ROOT, "nope")


def test_encrypted_secrets_are_placeholders_never_decrypted(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text("name: rlinf-eks\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text("config:\n  rlinf-eks:hfToken:\n    secure: v1:abc\n")
    cfg = load(tmp_path, "s")
    assert cfg.values["rlinf-eks:hfToken"] == "[secret]"
    assert cfg.secret_keys == {"rlinf-eks:hfToken"}
