"""Issue 18, "Config accepted that a real deploy refuses, or that crashes": each bad input, typed
the way a user types it (a stack file, `python -m rlinf_eks plan STACK --set ...`), exits 2 with
one clear line naming the key, the value as written and what is valid, and never a traceback."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from rlinf_eks import loading
from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError
from rlinf_eks.offline.engine.stack_config import StackConfigError, load
from tests.harness import MINIMAL, ROOT, plan_stack

BASE = """\
config:
  rlinf-eks:cluster:
    endpointPublicAccessCidrs: [203.0.113.0/24]
  rlinf-eks:workload:
    image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/rlinf:v1
"""

BLOCK = """\
  rlinf-eks:gpuNodes:
    instanceType: p5en.48xlarge
    nodeCount: 2
    capacityType: CAPACITY_BLOCK
    capacityReservationId: cr-0123456789abcdef0
    capacityBlock:
      startTime: {start}
      endTime: {end}
  rlinf-eks:storage:
    sharedFilesystem: {{enabled: true}}
"""


_OUT: list = []


@pytest.fixture(autouse=True)
def _out_folder(tmp_path_factory):
    _OUT[:] = [tmp_path_factory.mktemp("out")]


def _project(tmp_path, stack_file: str):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text(stack_file)
    return tmp_path


def _plan(monkeypatch, capsys, folder, stack: str, *sets: str) -> tuple[int, str]:
    monkeypatch.chdir(folder)
    argv = ["plan", stack, "--quiet", "--out", str(_OUT[0])]
    status = main([*argv, *(arg for s in sets for arg in ("--set", s))])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err


def _refused(monkeypatch, capsys, folder, stack: str, *sets: str) -> list[str]:
    status, err = _plan(monkeypatch, capsys, folder, stack, *sets)
    assert status == 2, err
    assert err.startswith("error: ")
    return [line.strip() for line in err.splitlines()]


# --- 1. every YAML type a stack file can hold ---------------------------------------------------


def test_an_unquoted_capacity_block_timestamp_plans_as_the_text_it_is(monkeypatch, capsys, tmp_path):
    text = BASE + BLOCK.format(start="2031-01-13T11:30:00Z", end="2031-01-20T11:30:00Z")
    cfg = load(_project(tmp_path, text), "s")
    assert cfg.values["rlinf-eks:gpuNodes"]["capacityBlock"] == {"startTime": "2031-01-13T11:30:00Z", "endTime": "2031-01-20T11:30:00Z"}
    status, err = _plan(monkeypatch, capsys, tmp_path, "s")
    assert status == 0, err


@pytest.mark.parametrize(
    "value, accepted",
    [
        ("2026-01-01", "2026-01-01"),  # a YAML date: the text as written, as the Pulumi CLI reads it
        ("2026-01-01 10:00:00", "2026-01-01 10:00:00"),
        ("12", None),
        ("1.5", None),
        ("true", None),
        ("null", None),
        ("[a, b]", None),
        ("{a: b}", None),
    ],
)
def test_a_tag_of_any_yaml_type_is_accepted_as_written_or_refused_with_the_value_as_written(
    monkeypatch, capsys, tmp_path, value, accepted
):
    text = BASE + f"  rlinf-eks:tags:\n    built: {value}\n"
    status, err = _plan(monkeypatch, capsys, _project(tmp_path, text), "s")
    if accepted is not None:
        assert status == 0, err
        assert load(tmp_path, "s").values["rlinf-eks:tags"] == {"built": accepted}
    else:
        assert status == 2 and err.startswith("error: ")
        assert "tags.built=" in err and "datetime" not in err


@pytest.mark.parametrize(
    "value, written",
    [
        ("!!binary aGVsbG8=", "!!binary aGVsbG8="),
        (".nan", ".nan"),
        (".inf", ".inf"),
        ("-.Inf", "-.Inf"),
        ("!!set {a, b}", "!!set"),
        ("!!omap [a: 1]", "!!omap"),
    ],
)
def test_a_yaml_value_pulumi_config_cannot_hold_is_refused_with_its_line_and_text(monkeypatch, capsys, tmp_path, value, written):
    text = BASE + f"  rlinf-eks:tags:\n    built: {value}\n"
    lines = _refused(monkeypatch, capsys, _project(tmp_path, text), "s")
    assert len(lines) == 1
    assert "stacks/Pulumi.s.yaml line 7: config.rlinf-eks:tags.built=" in lines[0] and written in lines[0]


def test_a_date_given_from_python_prints_as_written_not_as_its_repr():
    from datetime import date

    with pytest.raises(ConfigError) as err:
        loading.parse({**MINIMAL, "tags": {"built": date(2026, 1, 1)}})
    assert "tags.built=2026-01-01:" in str(err.value) and "datetime" not in str(err.value)


# --- 2. a Capacity Block already past ------------------------------------------------------------

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=timezone.utc)


def _block(start: str | None, end: str) -> dict:
    block = {"endTime": end, **({"startTime": start} if start else {})}
    gpu = {"instanceType": "p5en.48xlarge", "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0", "capacityBlock": block}
    return {**MINIMAL, "gpuNodes": gpu}


@pytest.mark.parametrize(
    "start, end, expected",
    [
        (
            "2030-05-01T11:30:00Z", "2030-07-01T11:30:00Z",
            "gpuNodes.capacityBlock.startTime='2030-05-01T11:30:00Z': is past (now 2030-06-01T12:00:00Z), and Auto Scaling "
            "refuses a scheduled action in the past; the block has started: leave startTime out",
        ),
        (
            "2030-05-01T11:30:00Z", "2030-05-08T11:30:00Z",
            "gpuNodes.capacityBlock.endTime='2030-05-08T11:30:00Z': is past (now 2030-06-01T12:00:00Z): the Capacity Block has ended",
        ),
        (None, "2030-05-08T11:30:00Z", "gpuNodes.capacityBlock.endTime='2030-05-08T11:30:00Z': is past"),
    ],
)
def test_a_capacity_block_already_past_is_a_config_error(start, end, expected):
    with pytest.raises(ConfigError) as err:
        loading.parse(_block(start, end), now=NOW)
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith(expected)


def test_a_capacity_block_ahead_passes_and_the_default_clock_is_the_real_one():
    loading.parse(_block("2030-06-02T11:30:00Z", "2030-06-09T11:30:00Z"), now=NOW)
    assert abs(loading.utc_now() - datetime.now(timezone.utc)) < timedelta(minutes=1)  # the CLI's and pulumi up's clock
    with pytest.raises(ConfigError, match="is past"):  # 2020 stays past on the real clock
        loading.parse(_block("2020-01-06T11:30:00Z", "2020-01-13T11:30:00Z"), now=loading.utc_now())


def test_a_past_capacity_block_fails_the_plan_with_exit_2(monkeypatch, capsys):
    lines = _refused(
        monkeypatch, capsys, ROOT, "capacity-block",
        "gpuNodes.capacityBlock.startTime=2020-01-06T11:30:00Z", "gpuNodes.capacityBlock.endTime=2020-01-13T11:30:00Z",
    )
    assert any(line.startswith("- gpuNodes.capacityBlock.endTime='2020-01-13T11:30:00Z': is past") for line in lines)


def test_the_example_capacity_block_stays_ahead_for_at_least_a_year():
    """The capacity-block stack plans in CI with the real clock: its block must stay ahead. When this
    fails, move stacks/Pulumi.capacity-block.yaml's dates on (and re-record the golden plans)."""
    block = plan_stack("capacity-block").settings.gpu_nodes.capacity_block
    assert block.start_time - datetime.now(timezone.utc) > timedelta(days=365), "move the example block's dates on"


# --- 3. deployFromVpc with public CIDRs -----------------------------------------------------------


def test_deploy_from_vpc_with_public_cidrs_is_refused_naming_both(monkeypatch, capsys):
    lines = _refused(monkeypatch, capsys, ROOT, "single-node", "cluster.deployFromVpc=true")
    problems = [line for line in lines if line.startswith("- ")]
    assert len(problems) == 1
    assert problems[0].startswith("- cluster.deployFromVpc=true: means a private endpoint only, but cluster.endpointPublicAccessCidrs=")
    assert "203.0.113.0/24" in problems[0]


# --- 4. a key given twice ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        (BASE + "  rlinf-eks:workload:\n    image: x\n", "config.rlinf-eks:workload is given twice, at lines 4 and 6"),
        (BASE + "  rlinf-eks:gpuNodes:\n    nodeCount: 2\n    nodeCount: 4\n", "config.rlinf-eks:gpuNodes.nodeCount is given twice, at lines 7 and 8"),
    ],
)
def test_a_duplicate_key_is_refused_with_the_file_path_and_both_lines(monkeypatch, capsys, tmp_path, text, message):
    with pytest.raises(StackConfigError, match="stacks/Pulumi.s.yaml: " + message):
        load(_project(tmp_path, text), "s")
    lines = _refused(monkeypatch, capsys, tmp_path, "s")
    assert len(lines) == 1 and message in lines[0]


def test_merge_keys_still_override_without_counting_as_duplicates(tmp_path):
    text = BASE + "  rlinf-eks:gpuNodes:\n    <<: {nodeCount: 1, efa: true}\n    nodeCount: 2\n"
    assert load(_project(tmp_path, text), "s").values["rlinf-eks:gpuNodes"] == {"nodeCount": 2, "efa": True}


# --- 5. a secret in clear text --------------------------------------------------------------------


def test_a_plain_secret_by_set_warns_how_to_set_it_as_a_secret(monkeypatch, capsys):
    status, err = _plan(monkeypatch, capsys, ROOT, "single-node", "hfToken=hf_plainvalue")
    assert status == 0
    warnings = [line for line in err.splitlines() if "hfToken" in line]
    assert warnings == [
        "warning: rlinf-eks:hfToken is a plain value: it lands in clear text in the stack file; set it as a secret: "
        "pulumi config set --secret rlinf-eks:hfToken <value>"
    ]
    assert "hf_plainvalue" not in err


def test_a_plain_secret_in_the_stack_file_warns_and_an_encrypted_one_does_not(monkeypatch, capsys, tmp_path):
    _project(tmp_path, BASE + "  rlinf-eks:wandbApiKey: abc123\n  rlinf-eks:hfToken:\n    secure: v1:abc\n")
    status, err = _plan(monkeypatch, capsys, tmp_path, "s")
    assert status == 0
    assert "warning: rlinf-eks:wandbApiKey is a plain value" in err and "hfToken is a plain" not in err


def test_under_pulumi_up_the_secret_keys_the_engine_passes_in_the_environment_count(monkeypatch):
    from rlinf_eks.config import pulumi_config

    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", '["rlinf-eks:hfToken"]')
    secret = pulumi_config.running_secret_keys()
    assert "rlinf-eks:hfToken" in secret
    assert pulumi_config.plain_secret_warnings({"rlinf-eks:hfToken": "x", "rlinf-eks:kubeconfig": "y"}, secret.__contains__) == [
        "rlinf-eks:kubeconfig is a plain value: it lands in clear text in the stack file; set it as a secret: "
        "pulumi config set --secret rlinf-eks:kubeconfig <value>"
    ]


# --- 6. workload.trainer.configName with every dialect -------------------------------------------


def test_verl_ppo_runs_the_config_name_it_is_given():
    plan = plan_stack("single-node", "workload.trainer.configName=ppo_trainer_libero")
    assert "--config-name ppo_trainer_libero" in plan.outputs["trainingEntrypoint"]
    assert "--config-name" not in plan_stack("single-node").outputs["trainingEntrypoint"]


def test_switching_dialect_refuses_the_other_dialects_config_name(monkeypatch, capsys):
    lines = _refused(monkeypatch, capsys, ROOT, "capacity-block", "workload.trainer.dialect=verl-ppo", "workload.rollout.backend=hf")
    assert "- workload.trainer.configName='maniskill_ppo_openvlaoft': a config of the rlinf-embodied dialect; the verl-ppo dialect " in "\n".join(lines)


def test_every_dialect_knows_its_default_config_and_where_its_configs_live():
    from rlinf_eks.trainers import DIALECTS

    for dialect in DIALECTS.values():
        assert dialect.default_config_name in dialect.config_names and dialect.config_dir


# --- 7. instance-type typos -----------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["p5.48xl", "P5.48XLARGE"])
def test_an_instance_type_typo_gets_the_close_type(monkeypatch, capsys, typed):
    lines = _refused(monkeypatch, capsys, ROOT, "single-node", f"gpuNodes.instanceType={typed}")
    assert f"- gpuNodes.instanceType='{typed}': not an EC2 instance type (did you mean p5.48xlarge?)" in "\n".join(lines)


# --- 8. nodeCount 0 -------------------------------------------------------------------------------


def test_node_count_zero_points_to_scale_to_zero(monkeypatch, capsys):
    lines = _refused(monkeypatch, capsys, ROOT, "single-node", "gpuNodes.nodeCount=0")
    problem = next(line for line in lines if line.startswith("- gpuNodes.nodeCount=0"))
    assert "greater than or equal" not in problem
    assert "gpuNodes.scaleToZero: true" in problem and "autoscaler.enabled: true" in problem and "gpuNodes.maxNodes" in problem


# --- 9. keys that contain dots, printed the way --set reads them ----------------------------------


def test_a_dotted_batch_key_prints_as_set_accepts_it_and_feeding_it_back_works(monkeypatch, capsys):
    lines = _refused(monkeypatch, capsys, ROOT, "multi-node", "gpuNodes.nodeCount=4")
    path = 'workload.trainer.batch["actor.global_batch_size"]'
    problem = next(line for line in lines if line.startswith("- workload.trainer.batch"))
    assert problem.startswith(f"- {path}=640")
    status, err = _plan(monkeypatch, capsys, ROOT, "multi-node", "gpuNodes.nodeCount=4", f"{path}=1280")
    assert status == 0, err


def test_a_dotted_key_in_a_pydantic_error_prints_quoted():
    with pytest.raises(ConfigError) as err:
        loading.parse({**MINIMAL, "workload": {**MINIMAL["workload"], "trainer": {"batch": {"actor.global_batch_size": "x"}}}})
    assert 'workload.trainer.batch["actor.global_batch_size"]=' in str(err.value)

