"""Issue 34, a newcomer's afternoon (round 2): each case typed the way a user types it, read the
way a user reads it. Bad input exits 2 before anything is written, with every problem at once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.engine.stack_config import StackConfigError, Unset, load, split_assignment

ROOT = Path(__file__).resolve().parents[1]


def _run(monkeypatch, capsys, argv: list[str], out: Path) -> tuple[int, str, str]:
    monkeypatch.chdir(ROOT)
    status = main([*argv, "--out", str(out)]) if argv[0] in ("plan",) else main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out, captured.err


def _refused(monkeypatch, capsys, tmp_path, argv: list[str]) -> list[str]:
    status, _, err = _run(monkeypatch, capsys, argv, tmp_path / "out")
    assert status == 2, err
    assert err.startswith("error: ") and not (tmp_path / "out").exists()
    return [line.strip() for line in err.splitlines()[1:]]


# --- plan PATH/TO/Pulumi.x.yaml ------------------------------------------------------------------


def test_a_stack_file_outside_stacks_plans_as_its_stack(monkeypatch, capsys, tmp_path):
    mine = tmp_path / "elsewhere" / "Pulumi.my-run.yaml"
    mine.parent.mkdir()
    shutil.copy(ROOT / "stacks" / "Pulumi.single-node.yaml", mine)
    status, out, err = _run(monkeypatch, capsys, ["plan", str(mine), "--quiet"], tmp_path / "out")
    assert status == 0, err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["stack"] == "my-run"
    assert load(ROOT, str(mine)).values == load(ROOT, "single-node").values


@pytest.mark.parametrize(
    "given, message",
    [
        ("elsewhere/mine.yaml", "a stack file is named Pulumi.<stack>.yaml"),
        ("elsewhere/Pulumi.gone.yaml", "no such stack file"),
    ],
)
def test_a_stack_file_path_that_cannot_be_read_says_why(monkeypatch, capsys, tmp_path, given, message):
    status, _, err = _run(monkeypatch, capsys, ["plan", str(tmp_path / given)], tmp_path / "out")
    assert status == 2 and message in err and err.startswith("error: ")


def test_image_contract_and_verify_take_a_stack_file_path(monkeypatch, capsys, tmp_path):
    mine = tmp_path / "Pulumi.my-run.yaml"
    shutil.copy(ROOT / "stacks" / "Pulumi.single-node.yaml", mine)
    status, out, err = _run(monkeypatch, capsys, ["image-contract", str(mine)], tmp_path)
    assert status == 0 and "EFA" in out, err
    status, out, err = _run(monkeypatch, capsys, ["verify", str(mine), "--dry-run", "--out", str(tmp_path / "v")], tmp_path)
    assert status == 0, err
    assert (tmp_path / "v" / "manifests").is_dir()


# --- --set takes every key a stack file can hold ---------------------------------------------------


@pytest.mark.parametrize(
    "item, key, value",
    [
        ('tags["team:owner"]=ml', 'tags["team:owner"]', "ml"),
        ('tags["a=b"]=c=d', 'tags["a=b"]', "c=d"),
        ('gpuNodes.labels["example.com/team"]=ml', 'gpuNodes.labels["example.com/team"]', "ml"),
        ("workload.env.X=", "workload.env.X", ""),
    ],
)
def test_the_first_equals_sign_outside_a_quoted_key_ends_the_key(item, key, value):
    assert split_assignment(item) == (key, value)


def test_tag_keys_with_colons_dots_and_equals_signs_are_set(tmp_path):
    cfg = load(ROOT, "single-node", ['tags["team:owner"]=ml', 'tags["cost.center=x"]=42', 'gpuNodes.labels["example.com/team"]=ml'])
    assert not cfg.problems
    assert cfg.values["rlinf-eks:tags"]["team:owner"] == "ml"
    assert cfg.values["rlinf-eks:tags"]["cost.center=x"] == 42
    assert cfg.values["rlinf-eks:gpuNodes"]["labels"]["example.com/team"] == "ml"


def test_unset_removes_a_key_so_its_default_applies():
    cfg = load(ROOT, "single-node", ["workload.env.NCCL_DEBUG=INFO", Unset("workload.env.NCCL_DEBUG"), Unset("gpuNodes.nodeCount")])
    assert "NCCL_DEBUG" not in cfg.values["rlinf-eks:workload"].get("env", {})
    assert "nodeCount" not in cfg.values["rlinf-eks:gpuNodes"]
    # a setting's key that is not set is no error (as `pulumi config rm`), an index of a list is removed
    cfg = load(ROOT, "single-node", [Unset("workload.env.NEVER_SET"), "cluster.adminRoleArns[0]=a", Unset("cluster.adminRoleArns[0]")])
    assert not cfg.problems and cfg.values["rlinf-eks:cluster"]["adminRoleArns"] == []


def test_unset_on_the_command_line_names_the_required_key_it_removed(monkeypatch, capsys, tmp_path):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", "--unset", "workload.image"])
    assert lines == ["- workload.image: required key is missing"]


# --- every problem at once -----------------------------------------------------------------------


def test_every_problem_of_the_edits_and_the_settings_is_reported_at_once(monkeypatch, capsys, tmp_path):
    lines = _refused(
        monkeypatch, capsys, tmp_path,
        ["plan", "--set", "gpuNodes..x=1", "--set", "gpuNodes.instanceType=p9", "--unset", "tags.a[x",
         "--set", "cluster.kubernetesVersion=1.2"],
    )  # fmt: skip
    assert len(lines) == 4, lines
    assert lines[0].startswith("- --set 'gpuNodes..x=1': 'gpuNodes..x' is a malformed key path")
    assert lines[1].startswith("- --unset 'tags.a[x': 'tags.a[x' is a malformed key path")
    assert any(line.startswith("- gpuNodes.instanceType='p9'") for line in lines[2:])
    assert any(line.startswith("- cluster.kubernetesVersion='1.2'") for line in lines[2:])


def test_a_set_without_an_equals_sign_says_how_to_unset(monkeypatch, capsys, tmp_path):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", "--set", "gpuNodes.nodeCount"])
    assert lines == ["- --set 'gpuNodes.nodeCount': expected KEY=VALUE, such as gpuNodes.nodeCount=2 (--unset KEY removes a key)"]
    with pytest.raises(StackConfigError):
        split_assignment('tags["a=b"]')


# --- a YAML number or boolean where text is meant ------------------------------------------------


def _stack_file(tmp_path: Path, extra: str) -> Path:
    """single-node's stack file with ``extra`` lines put under its ``rlinf-eks:workload:``."""
    text = (ROOT / "stacks" / "Pulumi.single-node.yaml").read_text()
    assert "  rlinf-eks:workload:\n" in text
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(text.replace("  rlinf-eks:workload:\n", "  rlinf-eks:workload:\n" + extra, 1))
    return path


def test_a_yaml_number_where_text_is_meant_says_to_quote_the_text_as_written(monkeypatch, capsys, tmp_path):
    mine = _stack_file(tmp_path, "    runName: 007\n    env:\n      RATIO: 1.50\n      SEED: 1234\n")
    status, _, err = _run(monkeypatch, capsys, ["plan", str(mine)], tmp_path / "out")
    assert status == 2
    assert 'workload.runName=7: text is meant here, but YAML reads 007 as a number: quote it in the stack file (runName: "007")' in err
    assert 'workload.env.RATIO=1.5: text is meant here, but YAML reads 1.50 as a number: quote it in the stack file (RATIO: "1.50")' in err
    assert 'workload.env.SEED=1234: text is meant here, but YAML reads 1234 as a number: quote it in the stack file (SEED: "1234")' in err


def test_yes_no_on_off_are_text_as_the_pulumi_cli_reads_them(tmp_path):
    mine = _stack_file(tmp_path, "    env:\n      A: yes\n      B: off\n      C: true\n")
    env = load(ROOT, str(mine)).values["rlinf-eks:workload"]["env"]
    assert env == {"A": "yes", "B": "off", "C": True}


def test_a_nested_batch_key_from_set_says_to_quote_the_whole_hydra_key(monkeypatch, capsys, tmp_path):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", "--set", "workload.trainer.batch.actor.global_batch_size=64"])
    assert lines == [
        "- workload.trainer.batch.actor={'global_batch_size': 64}: a batch key is the whole Hydra key, such as "
        "actor.global_batch_size: quote it on the command line, --set 'workload.trainer.batch[\"actor.global_batch_size\"]=64' "
        "(a stack file may write it unquoted: batch: {actor.global_batch_size: 64})"
    ]


# --- values that planned and then failed on AWS ----------------------------------------------------


@pytest.mark.parametrize(
    "version, refused",
    [("1.28", True), ("1.31", True), ("1.32", False), ("1.34", False), ("1.35", False)],
)
def test_a_new_cluster_of_a_version_past_extended_support_is_refused(monkeypatch, capsys, tmp_path, version, refused):
    # tests load stacks at TEST_NOW, 2026-12-01: 1.31's extended support ended 2026-11-26
    status, _, err = _run(monkeypatch, capsys, ["plan", "--quiet", "--set", f"cluster.kubernetesVersion={version}"], tmp_path / "out")
    if refused:
        assert status == 2
        assert f"cluster.kubernetesVersion='{version}': EKS no longer creates {version} clusters: its extended support ended" in err
        assert "use 1.36 (EKS creates 1.32, 1.33, 1.34, 1.35, 1.36 on 2026-12-01" in err
    else:
        assert status == 0, err


def test_extended_support_ends_a_year_after_standard_support():
    from rlinf_eks.config.eks_versions import creatable, extended_support_ends

    assert extended_support_ends("1.31") == "2026-11-26" and extended_support_ends("1.99") is None
    assert creatable("2026-11-26") == ["1.32", "1.33", "1.34", "1.35", "1.36"]
    assert creatable("2026-11-25")[0] == "1.31"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("availabilityZone", "us-east-1z", "us-east-1 has no zone 'z': its zones are us-east-1a, us-east-1b, us-east-1c, us-east-1d, us-east-1e, us-east-1f"),
        ("network.availabilityZones[0]", "us-east-1g", "us-east-1 has no zone 'g'"),
    ],
)
def test_a_zone_the_region_does_not_have_is_refused(monkeypatch, capsys, tmp_path, key, value, message):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", "--set", f"{key}={value}"])
    assert any(line.startswith(f"- {key}='{value}': {message}") for line in lines), lines


def test_the_zone_table_knows_the_gpu_regions_and_their_newest_zones():
    from rlinf_eks.config.aws_zones import AZ_LETTERS, zone_problem

    assert zone_problem("eu-west-2d", "eu-west-2") is None  # euw2-az4, opened 2026-08
    assert zone_problem("eu-north-1d", "eu-north-1") is not None
    assert {"us-east-1", "us-east-2", "us-west-2", "eu-north-1", "ap-northeast-1", "eu-west-2"} <= set(AZ_LETTERS)


@pytest.mark.parametrize(
    "cidr, message",
    [
        ("10.0.0.0/8", "inside 10.0.0.0/8, which no internet address has"),
        ("192.168.1.0/24", "inside 192.168.0.0/16"),
        ("100.64.0.0/16", "inside 100.64.0.0/10"),
        ("198.51.100.7/24", "has host bits set: the block is 198.51.100.0/24, or 198.51.100.7/32 for that one address"),
        ("8.8.8.8", "an address, not a CIDR block: write 8.8.8.8/32"),
        ("2001:db8::/32", "an IPv6 block"),
        ("nope", "not a CIDR block"),
    ],
)
def test_a_public_endpoint_cidr_that_cannot_match_is_refused(monkeypatch, capsys, tmp_path, cidr, message):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", "--set", f"cluster.endpointPublicAccessCidrs[0]={cidr}"])
    assert lines[0].startswith(f"- cluster.endpointPublicAccessCidrs[0]='{cidr}': {message}"), lines


def test_halves_of_the_internet_need_the_same_opt_in_as_the_whole(monkeypatch, capsys, tmp_path):
    sets = ["--set", "cluster.endpointPublicAccessCidrs[0]=0.0.0.0/1", "--set", "cluster.endpointPublicAccessCidrs[1]=128.0.0.0/1"]
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", *sets])
    assert "0.0.0.0/1, 128.0.0.0/1 opens the API endpoint to the internet" in lines[0]
    status, _, err = _run(monkeypatch, capsys, ["plan", "--quiet", *sets, "--set", "cluster.allowPublicEndpointFromAnywhere=true"], tmp_path / "o2")
    assert status == 0, err


# --- what cannot be judged offline is said --------------------------------------------------------


def test_the_plan_says_what_it_could_not_check(monkeypatch, capsys, tmp_path):
    status, out, err = _run(monkeypatch, capsys, ["plan", "--set", "cluster.kubernetesVersion=1.37"], tmp_path / "out")
    assert status == 0, err
    section = out.split("Not checked offline (`pulumi up` is the first to test them):\n", 1)[1].split("\n\n", 1)[0]
    assert "  cluster.kubernetesVersion='1.37': not in the EKS release calendar this project carries" in section
    assert "  workload.image='123456789012.dkr.ecr.us-east-1.amazonaws.com/" in section
    unchecked = json.loads((tmp_path / "out" / "plan.json").read_text())["unchecked"]
    assert [line.split("=", 1)[0] for line in unchecked] == ["cluster.kubernetesVersion", "cluster.endpointPublicAccessCidrs", "gpuNodes.instanceType", "workload.image"]


def test_a_region_missing_from_the_zone_table_is_said_not_checked():
    from rlinf_eks.config.unchecked import unchecked
    from tests.harness import settings
    from tests.conftest import TEST_NOW

    lines = unchecked(settings(region="us-gov-west-1", availabilityZone="us-gov-west-1a"), TEST_NOW)
    assert any(line.startswith("availabilityZone=us-gov-west-1a: region us-gov-west-1 is not in the zone table") for line in lines), lines


# --- settings that plan but cannot work, or have no effect --------------------------------------------


@pytest.mark.parametrize(
    "sets, line",
    [
        (["workload.env.NCCL_NET=Socket"], "- workload.env.NCCL_NET='Socket': pinned on EFA nodes so that NCCL runs over EFA or fails"),
        (["workload.env.FI_EFA_USE_DEVICE_RDMA=no"], "- workload.env.FI_EFA_USE_DEVICE_RDMA='no': libfabric's EFA settings are pinned"),
        (["workload.env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=60"], "- workload.env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC="),
        (["workload.env.HF_TOKEN=hf_x"], "- workload.env.HF_TOKEN='hf_x': a secret: pulumi config set --secret rlinf-eks:hfToken"),
        (["workload.trainer.overrides[0]=trainer.nnodes=2"],
         "- workload.trainer.overrides[0]='trainer.nnodes=2': trainer.nnodes is generated from gpuNodes.nodeCount: set that instead"),
        (["workload.trainer.overrides[0]=trainer.default_local_dir=/tmp/x"],
         "- workload.trainer.overrides[0]='trainer.default_local_dir=/tmp/x': trainer.default_local_dir is generated from workload.runName"),
        (["workload.trainer.overrides[0]=~actor_rollout_ref.rollout"],
         "- workload.trainer.overrides[0]='~actor_rollout_ref.rollout': actor_rollout_ref.rollout.name is generated from workload.rollout.backend"),
        (["gpuNodes.maxNodes=4"], "- gpuNodes.maxNodes=4: has no effect: nothing scales the GPU node group (autoscaler.enabled is false, provisioner managed)"),
        (["autoscaler.imageTag=v1.35.0"], "- autoscaler.imageTag='v1.35.0': has no effect: autoscaler.enabled is false; remove it"),
        (["workload.rayjob.cluster=selector"], "- workload.rayjob.cluster='selector': has no effect: workload.launcher is manual, not kuberay"),
        (["workload.eval.checkpoint=global_step_50"], "- workload.eval.checkpoint='global_step_50': has no effect: workload.mode is train, not eval"),
        (["observability.prometheus.retentionDays=30"], "- observability.prometheus.retentionDays=30: has no effect: the observability backend is cloudwatch"),
        (["storage.sharedFilesystem.enabled=true", "workload.checkpoints.keepInBucket=3"],
         "- workload.checkpoints.keepInBucket=3: has no effect with the shared filesystem: FSx exports new and changed files"),
        (["workload.checkpoints.keepLocal=3", "workload.checkpoints.keepInBucket=2"],
         "- workload.checkpoints.keepInBucket=2: at least keepLocal (3): the sync would upload again the checkpoints the node keeps"),
    ],
)
def test_a_setting_that_cannot_work_or_has_no_effect_is_refused(monkeypatch, capsys, tmp_path, sets, line):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", *(a for s in sets for a in ("--set", s))])
    assert any(got.startswith(line) for got in lines), lines


def test_a_platform_refuses_run_settings_it_would_ignore_and_keeps_what_it_reads(monkeypatch, capsys, tmp_path):
    lines = _refused(monkeypatch, capsys, tmp_path, ["plan", "platform", "--set", "workload.image=x/y:1", "--set", "workload.namespace=ml"])
    assert lines == ["- workload.image='x/y:1': a platform runs no training, so this is ignored: give it to an experiment stack on this platform"]


def test_every_variable_the_run_sets_itself_is_pinned():
    from rlinf_eks.config.workload import PINNED_ENV
    from rlinf_eks.workload.env import network_env, nccl_timeout_env
    from tests.harness import settings

    s = settings(gpuNodes={"instanceType": "p5.48xlarge"})
    for name in [*network_env(s), *nccl_timeout_env(s)]:
        assert name in PINNED_ENV or name.startswith("FI_EFA_"), name


@pytest.mark.parametrize("dialect", ["verl-ppo", "rlinf-embodied", "rlinf-reasoning"])
def test_every_pinned_trainer_key_is_one_the_launch_generates(dialect):
    from rlinf_eks.trainers import launch_for
    from rlinf_eks.trainers.pinned import PINNED, override_key
    from tests.harness import settings

    backend = {"verl-ppo": "vllm", "rlinf-embodied": "hf", "rlinf-reasoning": "vllm"}[dialect]
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": dialect}, "rollout": {"backend": backend}})
    launch = launch_for(s, nnodes=1, gpus_per_node=8, log_dir="/l", checkpoint_dir="/c", inputs_root="/i")
    generated = {override_key(item) for item in launch.argv if "=" in item}
    assert set(PINNED[dialect]) <= generated, set(PINNED[dialect]) - generated


def test_report_of_a_platform_says_why_there_is_no_run(monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(ROOT)
    assert main(["report", "platform", "--run-dir", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "a platform (platform.role: platform) runs no training, so it has no run to report" in err and "Traceback" not in err


def test_a_karpenter_stack_says_its_ami_alias_is_not_checked_only_past_the_release_data():
    """An alias up to the release data's newest is checked by the plan (tests/test_karpenter_ami.py);
    a newer one cannot be, and says so."""
    from rlinf_eks.config.unchecked import unchecked
    from tests.conftest import TEST_NOW
    from tests.harness import settings

    newer = settings(gpuNodes={"provisioner": "karpenter", "karpenter": {"amiAlias": "al2023@v20990101"}})
    assert any(line.startswith("gpuNodes.karpenter.amiAlias='al2023@v20990101'") for line in unchecked(newer, TEST_NOW))
    assert not any("amiAlias" in line for line in unchecked(settings(gpuNodes={"provisioner": "karpenter"}), TEST_NOW))
    assert not any("amiAlias" in line for line in unchecked(settings(), TEST_NOW))
