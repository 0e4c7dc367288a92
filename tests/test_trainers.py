"""Trainer dialects: the command line and env of each, derived values, world-size rules, and every
generated override composed against the real trainer configs with Hydra."""

from __future__ import annotations

import dataclasses
import glob
import os
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rlinf_eks.config import ConfigError, StackSettings
from rlinf_eks.trainers import DIALECTS, check_world_size, launch_for, recipe_of, rlinf_embodied, rlinf_reasoning, rlinf_runner, verl_ppo
from rlinf_eks.trainers.base import COMPLETE_MARKER, config_name_of
from tests.harness import pending_shared, require_shared, settings
from tests.reference_trainers import REFERENCE

# the reference configs are upstream's: their Hydra 1.1-era warnings are not ours to fix
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*Defaults list is missing `_self_`"),
    pytest.mark.filterwarnings("ignore::hydra.errors.Hydra14MigrationWarning"),
]

VERL_DIR = REFERENCE / "SimpleVLA-RL" / "verl" / "trainer" / "config"
EMBODIED_DIR = REFERENCE / "RLinf" / "examples" / "embodiment"
REASONING_DIR = REFERENCE / "RLinf" / "examples" / "reasoning" / "config" / "math"


@pytest.fixture
def reference_trainers() -> Path:
    return require_shared(REFERENCE, "reference trainer configs")


needs_reference = pytest.mark.usefixtures("reference_trainers")

GPUS = 8  # p5.48xlarge, the default instance type
ROLLOUT = {"hf": {"backend": "hf"}, "vllm": {"backend": "vllm", "tensorParallelSize": 2}, "sglang": {"backend": "sglang", "tensorParallelSize": 2}}


def stack(dialect: str, backend: str, nnodes: int = 1, **trainer: Any) -> StackSettings:
    return settings(
        gpuNodes={"nodeCount": nnodes},
        workload={"image": "example.com/t:1", "trainer": {"dialect": dialect, **trainer}, "rollout": ROLLOUT[backend]},
    )


def unchecked(s: StackSettings, **trainer: Any) -> StackSettings:
    """``s`` with trainer fields replaced without validation: sizes the stack validation would
    already reject, to test the rules themselves."""
    new_trainer = s.workload.trainer.model_copy(update=trainer)
    return s.model_copy(update={"workload": s.workload.model_copy(update={"trainer": new_trainer})})


def launch(s: StackSettings, nnodes: int | None = None, **kw: Any):
    nodes = nnodes or s.gpu_nodes.node_count
    return launch_for(s, nnodes=nodes, gpus_per_node=GPUS, log_dir="/fsx/logs/run", checkpoint_dir="/fsx/ckpt/run", inputs_root="/fsx/models", **kw)


def overrides_of(argv: list[str]) -> list[str]:
    """The Hydra overrides: everything after the --config-name value, or the module without one."""
    if "--config-name" in argv:
        return argv[argv.index("--config-name") + 2 :]
    return argv[3:]


def as_dict(overrides: list[str]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in overrides if "=" in o)


# --- command lines ------------------------------------------------------------------------------


@pytest.mark.parametrize("nnodes", [1, 2, 4])
def test_verl_ppo_command_sets_the_world_and_derives_the_micro_batch(nnodes):
    s = stack("verl-ppo", "hf", nnodes, modelPath="/fsx/models/sft", experimentName="libero")
    run = launch(s)
    assert run.argv[:3] == ["python", "-m", "verl.trainer.main_ppo"]
    o = as_dict(overrides_of(run.argv))
    assert o["trainer.nnodes"] == str(nnodes)
    assert o["trainer.n_gpus_per_node"] == str(GPUS)
    assert o["actor_rollout_ref.actor.ppo_micro_batch_size"] == str(nnodes * GPUS)
    assert o["actor_rollout_ref.rollout.name"] == "hf"
    assert o["actor_rollout_ref.model.path"] == o["actor_rollout_ref.rollout.pretrained_checkpoint"] == "/fsx/models/sft"
    assert o["trainer.default_local_dir"] == "/fsx/ckpt/run"
    assert o["trainer.experiment_name"] == "libero"
    # the stack's vLLM knobs stay off for hf (the LIBERO script's own gpu_memory_utilization=0.9, which
    # hf ignores, is the recipe's)
    assert "actor_rollout_ref.rollout.max_num_batched_tokens" not in o and "actor_rollout_ref.rollout.enforce_eager" not in o
    assert o["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.9"
    assert run.workdir == s.workload.trainer.workdir and run.env["PYTHONPATH"] == s.workload.trainer.workdir
    assert run.warnings == [] and run.resume is None


def test_verl_ppo_sets_ray_address_only_when_the_driver_must_join_other_nodes():
    assert "RAY_ADDRESS" not in launch(stack("verl-ppo", "hf", 1)).env
    assert launch(stack("verl-ppo", "hf", 2)).env["RAY_ADDRESS"] == "auto"


def test_verl_ppo_with_vllm_passes_the_seed_knobs_and_warns_about_the_vla_worker():
    s = settings(
        workload={
            "image": "i",
            "trainer": {"dialect": "verl-ppo"},
            "rollout": {"backend": "vllm", "tensorParallelSize": 2, "gpuMemoryUtilization": 0.5, "maxNumBatchedTokens": 8192, "enforceEager": True},
        }
    )
    run = launch(s)
    o = as_dict(overrides_of(run.argv))
    rollout = s.workload.rollout
    assert o["actor_rollout_ref.rollout.name"] == "vllm"
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == str(rollout.tensor_parallel_size)
    assert o["actor_rollout_ref.rollout.gpu_memory_utilization"] == str(rollout.gpu_memory_utilization)
    assert o["actor_rollout_ref.rollout.max_num_batched_tokens"] == str(rollout.max_num_batched_tokens)
    assert o["actor_rollout_ref.rollout.enforce_eager"] == "True"
    assert any("RobActorRolloutRefWorker" in w and "ValueError" in w for w in run.warnings)


def test_verl_ppo_logs_to_wandb_only_when_asked():
    s = stack("verl-ppo", "hf")
    assert as_dict(overrides_of(launch(s).argv))["trainer.logger"] == "[console]"
    assert as_dict(overrides_of(launch(s, wandb=True).argv))["trainer.logger"] == "[console,wandb]"


@pytest.mark.parametrize("nnodes", [1, 2])
def test_rlinf_embodied_command_and_env(nnodes):
    s = stack("rlinf-embodied", "hf", nnodes, workdir="/opt/RLinf", experimentName="mani")
    run = launch(s)
    path = "/opt/RLinf/examples/embodiment"
    assert run.argv[:2] == ["python", "examples/embodiment/train_embodied_agent.py"]
    assert run.argv[run.argv.index("--config-path") + 1] == f"{path}/config"
    assert run.argv[run.argv.index("--config-name") + 1] == "maniskill_ppo_openvlaoft"
    o = as_dict(overrides_of(run.argv))
    assert o["cluster.num_nodes"] == str(nnodes)
    assert o["runner.logger.log_path"] == "/fsx/logs/run"
    world = nnodes * GPUS
    assert o["+cluster.component_placement"] == f"{{actor:0-{world - 1},env:0-{world // 2 - 1},rollout:{world // 2}-{world - 1}}}"
    assert run.env == {
        "PYTHONPATH": "/opt/RLinf", "HYDRA_FULL_ERROR": "1", "EMBODIED_PATH": path, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl",
        # run_embodiment.sh's, and the ManiSkill assets staged below the inputs root
        "ROBOT_PLATFORM": "LIBERO", "LIBERO_TYPE": "standard", "MANISKILL_ASSET_DIR": "/fsx/models/hf/datasets/RLinf/maniskill_assets",
    }  # fmt: skip
    assert run.workdir == "/opt/RLinf"
    assert run.resume is not None and run.resume.key == "runner.resume_dir"


def test_rlinf_embodied_collocated_config_keeps_its_all_placement():
    run = launch(stack("rlinf-embodied", "hf", 2, configName="libero_10_grpo_openvlaoft"))
    assert not any("component_placement" in o for o in run.argv)


def test_rlinf_embodied_rejects_vllm_before_anything_is_created():
    with pytest.raises(ConfigError) as err:
        stack("rlinf-embodied", "vllm")
    assert any(p.startswith("workload.rollout.backend='vllm'") and "HuggingFace only" in p for p in err.value.problems)


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
@pytest.mark.parametrize("nnodes", [1, 2])
def test_rlinf_reasoning_command_carries_the_rollout_backend(backend, nnodes):
    s = stack("rlinf-reasoning", backend, nnodes, modelPath="/fsx/models/qwen")
    run = launch(s)
    assert run.argv[:2] == ["python", "examples/reasoning/main_grpo.py"]
    assert run.argv[run.argv.index("--config-path") + 1] == "/workspace/examples/reasoning/config/math"
    o = as_dict(overrides_of(run.argv))
    assert o["cluster.num_nodes"] == str(nnodes)
    assert o["rollout.rollout_backend"] == backend
    assert o["rollout.tensor_parallel_size"] == str(s.workload.rollout.tensor_parallel_size)
    assert o["rollout.gpu_memory_utilization"] == str(s.workload.rollout.gpu_memory_utilization)
    assert ("++rollout.vllm.max_num_batched_tokens" in o) == (backend == "vllm")
    assert o["rollout.model.model_path"] == o["actor.model.model_path"] == "/fsx/models/qwen"
    assert "RAY_ADDRESS" not in run.env  # the driver itself calls ray.init("auto"): launch.sh starts the head on every run


def test_batch_then_user_overrides_come_last_in_order():
    s = stack("verl-ppo", "hf", batch={"actor_rollout_ref.actor.ppo_mini_batch_size": 64}, overrides=["trainer.save_freq=25", "data.n_samples=8"])
    argv = launch(s).argv
    assert argv[-3:] == ["actor_rollout_ref.actor.ppo_mini_batch_size=64", "trainer.save_freq=25", "data.n_samples=8"]


def test_shell_quotes_every_argument_safely():
    # (a model path Hydra would misread is refused at load time: test_recipes)
    s = stack("rlinf-embodied", "hf", experimentName="it's mine", overrides=["runner.logger.project_name=a b"])
    run = launch(s)
    assert shlex.split(run.shell()) == run.argv
    assert "'~cluster.component_placement'" in run.shell()  # ~ would be expanded by the shell


# --- resume -------------------------------------------------------------------------------------


def _run_script(script: str, tmp_path: Path) -> list[str]:
    """Run a launch script with a fake `python` that prints its arguments, one per line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return out.stdout.splitlines()


def test_script_resumes_from_the_newest_complete_checkpoint_of_either_layout(tmp_path):
    logs = tmp_path / "logs dir"
    for step in ("checkpoints/global_step_5", "checkpoints/global_step_40", "exp/checkpoints/global_step_120", "exp/checkpoints/global_step_80"):
        (logs / step).mkdir(parents=True)
        # global_step_120 is a save that was cut off: no completeness marker
        if not step.endswith("_120"):
            (logs / step / COMPLETE_MARKER).write_text("done\n")
    s = stack("rlinf-reasoning", "vllm", workdir=str(tmp_path), experimentName="exp")
    run = launch_for(s, nnodes=1, gpus_per_node=GPUS, log_dir=str(logs), checkpoint_dir="/unused", inputs_root="/fsx/models")
    printed = _run_script(run.script(), tmp_path)
    assert printed[-1] == f"runner.resume_dir={logs}/exp/checkpoints/global_step_80"
    assert printed[1:-1] == run.argv[1:]
    (logs / "exp/checkpoints/global_step_120" / COMPLETE_MARKER).write_text("done\n")
    assert _run_script(run.script(), tmp_path)[-1] == f"runner.resume_dir={logs}/exp/checkpoints/global_step_120"


@pytest.mark.parametrize("dialect, backend", [("rlinf-embodied", "hf"), ("rlinf-reasoning", "vllm")])
def test_rlinf_checkpoint_patterns_find_where_the_trainer_writes_and_escape_the_log_dir(tmp_path, dialect, backend):
    """RLinf v0.3 writes <log_path>/<experiment>/checkpoints/global_step_N (embodied_runner.py:643-652;
    the reasoning runner below output_dir, which the stack sets to the log path,
    reasoning_runner.py:359-364); nothing else is a checkpoint of the run."""
    logs = tmp_path / "logs [1]"
    for step in ("checkpoints/global_step_5", "exp/checkpoints/global_step_7", "other/checkpoints/global_step_9"):
        (logs / step).mkdir(parents=True)
    s = stack(dialect, backend, experimentName="exp")
    run = launch_for(s, nnodes=1, gpus_per_node=GPUS, log_dir=str(logs), checkpoint_dir="/unused", inputs_root="/fsx/models")
    found = sorted(p for pattern in run.checkpoint_patterns for p in glob.glob(pattern))
    assert found == [str(logs / "exp/checkpoints/global_step_7")]


def test_verl_ppo_says_it_cannot_resume_and_still_names_its_checkpoints():
    run = launch(stack("verl-ppo", "hf"))
    assert run.resume is None and "cannot resume" in run.resume_note
    assert run.checkpoint_patterns and all(p.endswith("/*/global_step_*") for p in run.checkpoint_patterns)


def test_script_starts_fresh_without_a_checkpoint(tmp_path):
    s = stack("rlinf-embodied", "hf", workdir=str(tmp_path))
    run = launch_for(s, nnodes=1, gpus_per_node=GPUS, log_dir=str(tmp_path / "empty"), checkpoint_dir="/unused", inputs_root="/fsx/models")
    assert _run_script(run.script(), tmp_path) == run.argv[1:]


def test_an_explicit_resume_dir_from_the_user_turns_auto_resume_off():
    run = launch(stack("rlinf-embodied", "hf", overrides=["runner.resume_dir=/fsx/keep/global_step_10"]))
    assert run.resume is None and "resume_dir" not in run.script().split("exec", 1)[0]


# --- world-size rules ---------------------------------------------------------------------------


def test_verl_micro_batch_is_derived_so_setting_it_is_reported():
    s = stack("verl-ppo", "hf", batch={"actor_rollout_ref.actor.ppo_micro_batch_size": GPUS})
    problems = check_world_size(s, 2, GPUS)
    assert len(problems) == 1
    assert problems[0].startswith(f'workload.trainer.batch["actor_rollout_ref.actor.ppo_micro_batch_size"]={GPUS}:')
    assert f"= {2 * GPUS}" in problems[0]


def test_verl_sizes_below_the_world_size_fail_and_non_multiples_warn():
    s = stack("verl-ppo", "hf", batch={"actor_rollout_ref.actor.ppo_mini_batch_size": 12})
    assert check_world_size(s, 1, GPUS) == []
    assert any('ppo_mini_batch_size"]=12' in w and "1 per GPU" in w for w in launch(s).warnings)
    problems = check_world_size(s, 2, GPUS)
    assert problems == [
        p for p in problems if p.startswith('workload.trainer.batch["actor_rollout_ref.actor.ppo_mini_batch_size"]=12:')
    ] and "use at least 16" in problems[0]


def test_verl_recipe_sizes_fail_on_a_world_larger_than_the_libero_scripts_log_prob_batch():
    # the LIBERO script's 32, not ppo_trainer.yaml's 128, is what the trainer sees
    recipe = recipe_of("verl-ppo").configs["ppo_trainer"]
    nodes = int(recipe.settings["actor_rollout_ref.rollout.log_prob_micro_batch_size"]) // GPUS + 1
    problems = check_world_size(stack("verl-ppo", "hf"), nodes, GPUS)
    assert any('log_prob_micro_batch_size"]=32 (the recipe\'s, from examples/run_openvla_oft_rl_libero.sh)' in p for p in problems)
    assert not check_world_size(stack("verl-ppo", "hf"), nodes - 1, GPUS)


def test_embodied_env_count_must_divide_over_env_ranks_and_pipeline_stages():
    s = unchecked(stack("rlinf-embodied", "hf"), batch={"env.train.total_num_envs": 90})
    (line,) = check_world_size(s, 1, GPUS)
    assert line.startswith('workload.trainer.batch["env.train.total_num_envs"]=90:') and f"env world size {GPUS // 2}" in line
    staged = unchecked(stack("rlinf-embodied", "hf", configName="maniskill_ppo_openvla"), batch={"env.train.total_num_envs": 4 * 3})
    (line,) = check_world_size(staged, 1, GPUS)
    assert "rollout.pipeline_stage_num=2" in line and "multiple of 8" in line


def test_embodied_actor_batch_rule_uses_the_config_default_and_names_it():
    s = stack("rlinf-embodied", "hf", configName="maniskill_ppo_openvla")
    assert check_world_size(s, 1, GPUS) == []
    problems = check_world_size(s, 2, GPUS)
    assert problems == [
        'workload.trainer.batch["actor.global_batch_size"]=640 (the default of maniskill_ppo_openvla): must be divisible by '
        "actor.micro_batch_size x actor world size = 80 x 16 = 1280: a positive multiple of 1280"
    ]
    fixed = stack("rlinf-embodied", "hf", configName="maniskill_ppo_openvla", overrides=["actor.micro_batch_size=40"])
    assert check_world_size(fixed, 2, GPUS) == []


def test_split_placement_needs_an_even_gpu_count():
    s = settings(gpuNodes={"instanceType": "g6e.48xlarge"}, workload={"image": "i", "trainer": {"dialect": "rlinf-embodied"}})
    (line,) = check_world_size(s, 1, 1)
    assert line.startswith("workload.trainer.configName='maniskill_ppo_openvlaoft':") and "= 1" in line


def test_reasoning_rule_reads_the_derived_actor_batch():
    s = unchecked(stack("rlinf-reasoning", "vllm"), batch={"algorithm.n_minibatches": 1024})
    assert check_world_size(s, 1, GPUS // 2) == []  # 512 x 8 // 1024 = 4 fits 4 GPUs
    (line,) = check_world_size(s, 1, GPUS)
    assert line.startswith('workload.trainer.batch["algorithm.n_minibatches"]=1024:') and "= 4 must be divisible" in line


def test_unknown_rlinf_config_is_not_checked_but_warned():
    s = stack("rlinf-embodied", "hf", configName="my_own_config", batch={"env.train.total_num_envs": 7})
    assert check_world_size(s, 2, GPUS) == []
    assert any("my_own_config" in w for w in launch(s, nnodes=2).warnings)


def test_launch_for_raises_config_error_for_a_world_the_sizes_do_not_fit():
    s = stack("rlinf-embodied", "hf", batch={"env.train.total_num_envs": 4})  # fits 1 node: 4 env ranks
    launch(s)
    with pytest.raises(ConfigError) as err:
        launch(s, nnodes=2)
    assert err.value.problems[0].startswith('workload.trainer.batch["env.train.total_num_envs"]=4:')


def test_stack_validation_rejects_world_size_violations_with_the_key_named():
    with pytest.raises(ConfigError) as err:
        stack("verl-ppo", "hf", 2, batch={"actor_rollout_ref.ref.log_prob_micro_batch_size": 8})
    assert any(p.startswith('workload.trainer.batch["actor_rollout_ref.ref.log_prob_micro_batch_size"]=8:') for p in err.value.problems)


# --- Hydra: every generated key exists in the real configs --------------------------------------


def pending_upstream_config(config_dir: Path, name: str) -> None:
    """Skip, naming what belongs in the reference data, where a stack runs an upstream config the
    reference holds no copy of yet (quickstart's maniskill_ppo_mlp): see harness.pending_shared."""
    pending_shared(config_dir / f"{name}.yaml", f"the upstream config {name}",
                   f"{name}.yaml and the files its defaults list name, of the pinned upstream commit")


def _compose(config_dir: Path, name: str, overrides: list[str], version_base: str | None, monkeypatch) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    pending_upstream_config(config_dir, name)
    if config_dir.is_relative_to(EMBODIED_DIR):
        monkeypatch.setenv("EMBODIED_PATH", str(EMBODIED_DIR))  # read by hydra.searchpath
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=version_base):
            return compose(config_name=name, overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def _compose_launch(run, s: StackSettings, monkeypatch):
    dialect = s.workload.trainer.dialect
    name = config_name_of(s.workload.trainer)
    where = {"verl-ppo": (VERL_DIR, None), "rlinf-embodied": (EMBODIED_DIR / "config", "1.1"), "rlinf-reasoning": (REASONING_DIR, "1.1")}
    config_dir, version_base = where[dialect]
    overrides = overrides_of(run.argv)
    if run.resume is not None:
        overrides.append(run.resume.override("/fsx/logs/run/checkpoints/global_step_10"))
    return _compose(config_dir, name, overrides, version_base, monkeypatch)


CASES = [
    ("verl-ppo", "hf", "ppo_trainer"),
    ("verl-ppo", "vllm", "ppo_trainer"),
    ("rlinf-embodied", "hf", "maniskill_ppo_openvlaoft"),
    ("rlinf-embodied", "hf", "maniskill_ppo_openvla"),  # batched below to fit 16 GPUs
    ("rlinf-embodied", "hf", "libero_10_grpo_openvlaoft"),
    ("rlinf-reasoning", "vllm", "qwen2.5-1.5b-grpo-fsdp"),
    ("rlinf-reasoning", "sglang", "qwen2.5-1.5b-grpo-fsdp"),
]


@needs_reference
@pytest.mark.parametrize("nnodes", [1, 2])
@pytest.mark.parametrize("dialect,backend,config_name", CASES)
def test_every_generated_override_composes_against_the_real_config(dialect, backend, config_name, nnodes, monkeypatch):
    from omegaconf import OmegaConf

    # 640 % (80 x 16) fails on 2 nodes: halve the micro batch, a batch key that must compose too
    batch = {"actor.micro_batch_size": 40} if config_name == "maniskill_ppo_openvla" else {}
    s = stack(dialect, backend, configName=config_name, modelPath="/fsx/models/m", experimentName="exp", batch=batch)
    run = launch(s, nnodes=nnodes, wandb=True)
    cfg = _compose_launch(run, s, monkeypatch)
    world = nnodes * GPUS
    if dialect == "verl-ppo":
        assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (nnodes, GPUS)
        assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size == world
        assert cfg.actor_rollout_ref.rollout.name == backend
        assert list(cfg.trainer.logger) == ["console", "wandb"]
    else:
        assert cfg.cluster.num_nodes == nnodes
        assert cfg.runner.logger.log_path == "/fsx/logs/run"
        assert cfg.runner.resume_dir == "/fsx/logs/run/checkpoints/global_step_10"
        if dialect == "rlinf-reasoning":
            assert cfg.rollout.rollout_backend == backend
            assert cfg.rollout.tensor_parallel_size == s.workload.rollout.tensor_parallel_size
            OmegaConf.to_container(cfg, resolve=True)  # subtract/not are registered below
        else:
            assert cfg.actor.model.model_path == cfg.rollout.model.model_path == "/fsx/models/m"
            placement = dict(cfg.cluster.component_placement)
            if rlinf_embodied.REFERENCE[config_name].placement == "split":
                assert placement == {"actor": f"0-{world - 1}", "env": f"0-{world // 2 - 1}", "rollout": f"{world // 2}-{world - 1}"}
            else:
                assert placement == {"actor,env,rollout": "all"}


@pytest.fixture(autouse=True, scope="module")
def _rlinf_resolvers():
    """rlinf/__init__.py registers these; only resolving the reasoning config needs them."""
    from omegaconf import OmegaConf

    added = []
    for name, fn in (("subtract", lambda x, y: x - y), ("not", lambda x: not bool(x))):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
            added.append(name)
    yield
    for name in added:
        OmegaConf.clear_resolver(name)


@needs_reference
@pytest.mark.parametrize("dialect,backend,config_name", [CASES[0], CASES[2], CASES[5]])
def test_a_user_override_naming_an_unknown_key_fails_composition(dialect, backend, config_name, monkeypatch):
    """Hydra refuses it; so does the plan first (rlinf_eks.trainers.override_keys), from its key data."""
    from hydra.errors import ConfigCompositionException as HydraCompositionError

    override = "trainer.no_such_key=1" if dialect == "verl-ppo" else "runner.no_such_key=1"
    with pytest.raises(ConfigError, match=r"no_such_key is not a key of the"):
        stack(dialect, backend, configName=config_name, overrides=[override])
    s = stack(dialect, backend, configName=config_name)
    run = launch(s)
    with pytest.raises(HydraCompositionError, match="no_such_key"):
        _compose_launch(dataclasses.replace(run, argv=[*run.argv, override]), s, monkeypatch)


@needs_reference
def test_reference_size_tables_match_the_real_configs(monkeypatch):
    tables = [
        (VERL_DIR, None, verl_ppo.DIVIDED_BY_WORLD, None),
        (EMBODIED_DIR / "config", "1.1", {k: r.sizes for k, r in rlinf_embodied.REFERENCE.items()}, rlinf_embodied.REFERENCE),
        (REASONING_DIR, "1.1", {k: r.sizes for k, r in rlinf_reasoning.REFERENCE.items()}, rlinf_reasoning.REFERENCE),
        # the runner rules' defaults (rlinf_runner.DEFAULTS) beyond those sizes
        (EMBODIED_DIR / "config", "1.1", {k: v for k, v in rlinf_runner.DEFAULTS.items() if k != "qwen2.5-1.5b-grpo-fsdp"}, None),
        (REASONING_DIR, "1.1", {"qwen2.5-1.5b-grpo-fsdp": rlinf_runner.DEFAULTS["qwen2.5-1.5b-grpo-fsdp"]}, None),
    ]
    from omegaconf import OmegaConf

    for config_dir, version_base, sizes, references in tables:
        for name, expected in sizes.items():
            cfg = _compose(config_dir, name, [], version_base, monkeypatch)
            assert {key: OmegaConf.select(cfg, key) for key in expected} == dict(expected), name
            if references:
                placement = dict(cfg.cluster.component_placement)
                shape = "all" if set(placement.values()) == {"all"} else "split"
                assert references[name].placement == shape, name
                if shape == "split":
                    assert placement == {"actor": "0-7", "env": "0-3", "rollout": "4-7"}, name


def test_every_dialect_is_registered():
    from rlinf_eks.config import Dialect
    from typing import get_args

    assert set(DIALECTS) == set(get_args(Dialect))


def test_each_dialect_owns_its_default_config_name_and_rollout_backends():
    from typing import get_args

    from rlinf_eks.config import RolloutBackend, TrainerSettings

    documented = TrainerSettings.model_fields["config_name"].description or ""
    for name, dialect in DIALECTS.items():
        assert dialect.name == name and dialect.default_config_name in documented  # the config reference names it
        assert dialect.rollout_backends and set(dialect.rollout_backends) <= set(get_args(RolloutBackend))
        assert config_name_of(stack(name, dialect.rollout_backends[-1]).workload.trainer) == dialect.default_config_name

