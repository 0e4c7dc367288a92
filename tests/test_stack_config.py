"""Reading stack files and `--set` edits the way the Pulumi CLI would."""

import json
from pathlib import Path

import re

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError
from rlinf_eks.loading import settings_from_config
from rlinf_eks.offline.outputs.plan import Plan, write
from rlinf_eks.offline.engine.stack_config import StackConfigError, load, parse_scalar, set_path
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
    [
        ("true", True), ("false", False), ("8", 8), ("-1", -1), ("+3", 3), ("0", 0),
        # the CLI types nothing else: floats, versions, zero-padded numbers and huge integers stay strings
        ("0.5", "0.5"), ("1.30", "1.30"), ("0123", "0123"), (str(2**63), str(2**63)),
        ("True", "True"), ("null", "null"), ("p5.48xlarge", "p5.48xlarge"), ("", ""),
        # Go's strconv reads ASCII digits only: other scripts' digits are text (Python's int() would take them)
        ("\u0663", "\u0663"), ("\uff18", "\uff18"),
    ],
)
def test_set_values_are_typed_like_the_cli(raw, value):
    assert parse_scalar(raw) == value
    assert type(parse_scalar(raw)) is type(value)


def test_set_of_a_version_or_a_fraction_plans_as_the_cli_would_store_it():
    cfg = load(ROOT, "vllm-rollout", ["cluster.kubernetesVersion=1.30", "cluster.existing=true", "cluster.name=c",
                                      "network.vpcId=vpc-0123456789abcdef0", "network.privateSubnetIds[0]=subnet-0123456789abcdef0",
                                      "network.privateSubnetIds[1]=subnet-0123456789abcdef1", "network.gpuSubnetId=subnet-0123456789abcdef0", "workload.rollout.gpuMemoryUtilization=0.6"])
    s = settings_from_config(cfg.values, "vllm-rollout")
    assert s.cluster.kubernetes_version == "1.30"
    assert s.workload.rollout.gpu_memory_utilization == 0.6


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
    assert message in _set_problem(sets)


def _set_problem(sets: list[str]) -> str:
    """The one problem line of edits that cannot be applied (reported with the settings' own)."""
    problems = load(ROOT, "single-node", sets).problems
    assert len(problems) == 1, problems
    return problems[0]


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


# --- bad input: no traceback, nothing lost -------------------------------------------------------


def _project(tmp_path, stack_file: bytes | str, name: str = "s"):
    (tmp_path / "Pulumi.yaml").write_text("name: rlinf-eks\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / f"Pulumi.{name}.yaml"
    path.write_bytes(stack_file if isinstance(stack_file, bytes) else stack_file.encode())
    return tmp_path


@pytest.mark.parametrize(
    "text, message",
    [
        ("config:\n  1: x\n", "config: key 1 is a int, not a string; quote it ('1':)"),
        ("config:\n  rlinf-eks:gpuNodes:\n    true: 2\n", "config.rlinf-eks:gpuNodes: key true is a bool"),
        ("config:\n  rlinf-eks:workload:\n    env:\n      null: x\n", "config.rlinf-eks:workload.env: key null"),
        ("config:\n  rlinf-eks:network:\n    availabilityZones:\n      - {1.5: a}\n", "config.rlinf-eks:network.availabilityZones[0]: key 1.5"),
        ("encryptionsalt: v1:abc\n", "has no config: key (keys: encryptionsalt)"),
        ("config:\n", "has no config: key"),
        ("", "has no config: key (keys: none)"),
    ],
)
def test_a_stack_file_with_bad_keys_or_no_config_is_explained(tmp_path, text, message):
    with pytest.raises(StackConfigError) as err:
        load(_project(tmp_path, text), "s")
    assert message in str(err.value) and "stacks/Pulumi.s.yaml" in str(err.value)


def test_a_stack_file_that_is_not_utf8_names_the_line_and_byte(tmp_path):
    with pytest.raises(StackConfigError, match=r"Pulumi.s.yaml line 2: not UTF-8 text \(byte 0xe9 at offset 25\)"):
        load(_project(tmp_path, "config:\n  aws:region: caf\xe9\n".encode("latin-1")), "s")


@pytest.mark.parametrize("path", ["a..b", "gpuNodes[", 'workload.trainer.batch["x.y', "gpuNodes.", ".gpuNodes", "gpuNodes]", "a[0]b", "a[x]"])
def test_a_malformed_set_path_is_reported_as_such(path):
    problem = _set_problem([f"{path}=1"])
    assert problem.startswith(f"--set '{path}=1'") and "malformed key path" in problem


def test_a_quoted_key_may_hold_dots_and_brackets():
    values = {}
    set_path(values, 'ns:w.batch["a.b[0]"]', 1)
    assert values == {"ns:w": {"batch": {"a.b[0]": 1}}}


@pytest.mark.parametrize("key", ["rlinf:gpuNodes.nodeCount", "rlinf-ek:kuberay.enabled", "other:workload.image", "rlinfeks:anything"])
def test_set_with_a_wrong_project_namespace_is_an_error(key):
    assert re.search(r"is not this project's \(rlinf-eks\).*use rlinf-eks:", _set_problem([f"{key}=2"]))


def test_provider_namespaces_stay_free_even_where_a_name_matches_a_project_key():
    cfg = load(ROOT, "single-node", ["kubernetes:cluster=arn:aws:eks:us-east-1:1:cluster/x", "aws:profile=dev", "kubernetes:kubeconfig=x"])
    assert cfg.values["kubernetes:cluster"].startswith("arn:")
    settings_from_config(cfg.values, cfg.stack)


def test_a_wrong_project_namespace_in_a_stack_file_is_an_error():
    cfg = load(ROOT, "single-node")
    with pytest.raises(ConfigError, match=r"rlinf:gpuNodes: namespace 'rlinf' is not this project's"):
        settings_from_config({**cfg.values, "rlinf:gpuNodes": {"nodeCount": 2}}, cfg.stack)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["plan", "nope"], "unknown stack 'nope'"),
        (["plan", "--set", "gpuNodes..nodeCount=2"], "malformed key path"),
        (["plan", "--set", "rlinf:gpuNodes.nodeCount=2"], "is not this project's"),
        (["plan", "--set", "gpuNodes.nodeCount=true"], "gpuNodes.nodeCount=true: must be an integer, not a boolean"),
        (["plan", "--set", "network.vpcId="], "network.vpcId='': not a VPC id"),
    ],
)
def test_bad_input_exits_2_with_a_clear_line_and_no_traceback(monkeypatch, capsys, tmp_path, argv, message):
    monkeypatch.chdir(ROOT)
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("error: ")
    assert not (tmp_path / "out").exists()  # nothing is written for a bad input


def test_out_that_is_a_file_exits_2_and_leaves_it(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    out.write_text("mine")
    assert main(["plan", "--quiet", "--out", str(out)]) == 2
    assert f"error: --out: {out} is a file, not a folder" in capsys.readouterr().err
    assert out.read_text() == "mine"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "manifests").write_text("mine")
    assert main(["plan", "--quiet", "--out", str(tmp_path / "d")]) == 2
    assert "manifests is a file, not a folder" in capsys.readouterr().err


def test_out_that_cannot_be_written_exits_2(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    (tmp_path / "file").write_text("")
    assert main(["plan", "--quiet", "--out", str(tmp_path / "file" / "under")]) == 2
    assert f"error: --out: cannot create {tmp_path}/file/under: {tmp_path}/file is a file" in capsys.readouterr().err
    try:
        Path("/sys/rlinf-eks-probe").mkdir()
    except OSError:  # /sys refuses even root: a real unwritable folder
        assert main(["plan", "--quiet", "--out", "/sys/rlinf-eks-out"]) == 2
        assert "error: --out: cannot create /sys/rlinf-eks-out in /sys: " in capsys.readouterr().err
        assert not Path("/sys/rlinf-eks-out").exists()
    else:
        Path("/sys/rlinf-eks-probe").rmdir()


def _plan_with(*names: str) -> Plan:
    resources = [
        {"urn": f"urn:{n}", "type": "kubernetes:core/v1:ConfigMap", "name": n, "inputs": {"kind": "ConfigMap", "metadata": {"name": n, "namespace": "rlinf"}}}
        for n in names
    ]
    return Plan("rlinf-eks", "t", resources, {}, [])


def test_out_removes_only_manifests_a_previous_plan_wrote(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "configmap-rlinf-old.yaml").write_text("written by hand before any plan")
    (manifests / "notes.txt").write_text("mine")
    assert write(_plan_with("a", "b"), tmp_path) == [
        f"{manifests}/configmap-rlinf-old.yaml: not written by this plan, left in place",
        f"{manifests}/notes.txt: not written by this plan, left in place",
    ]
    assert sorted(p.name for p in manifests.iterdir()) == ["configmap-rlinf-a.yaml", "configmap-rlinf-b.yaml", "configmap-rlinf-old.yaml", "notes.txt"]
    write(_plan_with("a"), tmp_path)  # b was this tool's: it goes; the user's files stay
    assert sorted(p.name for p in manifests.iterdir()) == ["configmap-rlinf-a.yaml", "configmap-rlinf-old.yaml", "notes.txt"]
    assert (manifests / "notes.txt").read_text() == "mine"


def test_the_record_of_written_files_cannot_reach_outside_manifests(tmp_path):
    (tmp_path / "keep.yaml").write_text("mine")
    (tmp_path / "plan.json.bak").write_text("mine")
    (tmp_path / ".rlinf-eks-manifests").write_text("../keep.yaml\n/etc/passwd\nplan.json.bak\n")
    write(_plan_with("a"), tmp_path)
    assert (tmp_path / "keep.yaml").read_text() == "mine" and (tmp_path / "plan.json.bak").exists()
