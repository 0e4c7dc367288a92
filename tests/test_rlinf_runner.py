"""RLinf v0.3's runner and ManiSkill refuse some settings only once a run has started (after the
image pull, Ray and the trainer's start-up): the plan refuses them first (exit 2, the keys named
with their values and what is valid) or warns (rlinf_eks.trainers.rlinf_runner)."""

from __future__ import annotations

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.trainers import launch_for
from rlinf_eks.trainers.rlinf_runner import runner_problems, runner_warnings
from tests.harness import settings
from tests.test_trainers import unchecked


def _settings(config: str = "maniskill_ppo_mlp", overrides: tuple[str, ...] = (), batch: dict | None = None, dialect: str = "rlinf-embodied", **workload):
    """Valid settings of ``dialect``/``config`` with the trainer's overrides and batch put in
    unchecked (the stack rules under test would refuse them at parse time)."""
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": dialect, "configName": config}, **workload})
    return unchecked(s, overrides=list(overrides), batch=dict(batch or {}))


@pytest.mark.parametrize(
    "overrides, says",
    [
        (("runner.save_interval=5",), ["workload.trainer.overrides[0]=5 (runner.save_interval)", '"runner.val_check_interval"]=50 (the default of maniskill_ppo_mlp)', "a multiple of 50"]),
        (("runner.val_check_interval=3", "runner.save_interval=10"), ["workload.trainer.overrides[1]=10 (runner.save_interval)", "workload.trainer.overrides[0]=3 (runner.val_check_interval)", "a multiple of 3"]),
    ],
)
def test_a_save_interval_that_is_no_multiple_of_the_val_check_interval_is_refused_naming_both(overrides, says):
    (problem,) = runner_problems(_settings(overrides=overrides))
    assert all(text in problem for text in says), problem


@pytest.mark.parametrize(
    "overrides",
    [("runner.save_interval=100",), ("runner.val_check_interval=-1", "runner.save_interval=7"), ("runner.save_interval=-1", "runner.val_check_interval=3")],
)
def test_multiples_no_evaluation_and_no_saving_pass(overrides):
    assert runner_problems(_settings(overrides=overrides)) == []


def test_the_rule_reads_each_configs_upstream_defaults_and_both_rlinf_dialects():
    # maniskill_ppo_openvlaoft: val_check_interval -1 upstream, so any save_interval passes until evaluation is on
    assert runner_problems(_settings("maniskill_ppo_openvlaoft", ("runner.val_check_interval=3",)))[0].startswith(
        'workload.trainer.batch["runner.save_interval"]=40 (the default of maniskill_ppo_openvlaoft)'
    )
    assert runner_problems(_settings("maniskill_ppo_openvlaoft", ("runner.save_interval=41",))) == []
    reasoning = _settings("qwen2.5-1.5b-grpo-fsdp", ("runner.save_interval=45",), dialect="rlinf-reasoning", rollout={"backend": "vllm"})
    assert runner_problems(reasoning) == []  # val_check_interval 1 upstream: every save_interval is a multiple
    assert runner_problems(_settings("maniskill_ppo_mlp", ("runner.save_interval=7",), dialect="verl-ppo")) == []


@pytest.mark.parametrize("backend", ["physx_cpu", "cpu"])
def test_cpu_physics_with_more_than_one_env_is_refused_and_one_env_passes(backend):
    (problem,) = runner_problems(_settings(overrides=(f"env.train.init_params.sim_backend={backend}",)))
    assert problem.startswith('workload.trainer.batch["env.train.total_num_envs"]=1024 (the default of maniskill_ppo_mlp)')
    assert f"env.train.init_params.sim_backend={backend}" in problem and "set env.train.total_num_envs to 1" in problem
    assert runner_problems(_settings(overrides=(f"env.train.init_params.sim_backend={backend}",), batch={"env.train.total_num_envs": 1})) == []
    eval_problem = runner_problems(_settings(overrides=(f"env.eval.init_params.sim_backend={backend}",), batch={"env.eval.total_num_envs": 4}))
    assert len(eval_problem) == 1 and eval_problem[0].startswith('workload.trainer.batch["env.eval.total_num_envs"]=4:')
    assert runner_problems(_settings(overrides=("env.train.init_params.sim_backend=gpu",))) == []


def test_the_plan_exits_2_naming_the_keys(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["plan", "quickstart", "--quiet", "--out", str(out), "--set", "workload.trainer.overrides[2]=runner.save_interval=15"]) == 2
    err = capsys.readouterr().err
    assert "workload.trainer.overrides[2]=15 (runner.save_interval)" in err and "workload.trainer.overrides[1]=10 (runner.val_check_interval)" in err
    assert "Traceback" not in err and not out.exists()


def test_no_checkpoint_and_another_home_under_gpu_physics_are_warned_of():
    launch = lambda s: launch_for(s, nnodes=1, gpus_per_node=1, log_dir="/run/logs", checkpoint_dir="/run/ckpt", inputs_root="/models")  # noqa: E731
    (warning,) = [w for w in launch(_settings()).warnings if "saves no checkpoint" in w]
    assert warning.startswith('workload.trainer.batch["runner.save_interval"]=-1 (the default of maniskill_ppo_mlp)')
    assert not [w for w in launch(_settings(overrides=("runner.save_interval=50",))).warnings if "saves no checkpoint" in w]
    assert [w for w in runner_warnings(_settings(overrides=("runner.save_interval=50",), env={"HOME": "/home/ray"})) if "workload.env.HOME='/home/ray'" in w]
    cpu_only = ("runner.save_interval=50", "env.train.init_params.sim_backend=cpu", "env.eval.init_params.sim_backend=cpu")
    assert runner_warnings(_settings(overrides=cpu_only, batch={"env.train.total_num_envs": 1, "env.eval.total_num_envs": 1}, env={"HOME": "/home/ray"})) == []
    assert runner_warnings(_settings(overrides=("runner.save_interval=50",), env={"HOME": "/root"})) == []
