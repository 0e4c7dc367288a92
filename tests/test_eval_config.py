"""The evaluation of every stack (``--set workload.mode=eval``) composed from its rendered command
against the upstream configs, beside the training it evaluates: the keys the trainer's validation
and model loading read in evaluation exist, the evaluated model is the trained one (the same model
section, adapter, action chunks, unnorm_key), and the checkpoint loaded is one the run wrote."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from rlinf_eks.trainers import config_name_of, recipe_of
from rlinf_eks.trainers.base import ATTEMPT_PREFIX
from rlinf_eks.workload.run import resolve_run
from tests.harness import EXPERIMENT_STACKS, STACKS, dialect_of, plan_stack
from tests.test_recipes import WHERE
from tests.test_trainers import _compose, needs_reference, overrides_of
from tests.test_trainers import reference_trainers  # noqa: F401 (the fixture needs_reference uses)

EVAL_STACKS = [s for s in STACKS + EXPERIMENT_STACKS if not recipe_of(dialect_of(s)).evaluation.unsupported]
STEP = 24


def _container(node: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True)


def _select(cfg: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, throw_on_missing=True, default=KeyError)


def _written_checkpoint(dialect: str, train_cfg: Any) -> str:
    """Where the training run writes its step-24 checkpoint, read from its composed config:
    veRL's ``<default_local_dir>/actor/global_step_N`` (ray_trainer.py save), RLinf's
    ``<log_path>/<experiment_name>/checkpoints/global_step_N`` (embodied_runner.py:645-649).
    veRL cannot resume: its trainer.sh appends the attempt's own ``attempt-<K>`` to
    default_local_dir when it starts (trainers/base.py ATTEMPT_PREFIX), here the first attempt's."""
    if dialect == "verl-ppo":
        return f"{train_cfg.trainer.default_local_dir}/{ATTEMPT_PREFIX}1/actor/global_step_{STEP}"
    return f"{train_cfg.runner.logger.log_path}/{train_cfg.runner.logger.experiment_name}/checkpoints/global_step_{STEP}"


def _compose_pair(stack: str, monkeypatch) -> tuple[str, Any, Any, Any, str]:
    train_s = plan_stack(stack).settings
    eval_s = plan_stack(stack, "workload.mode=eval").settings
    dialect = train_s.workload.trainer.dialect
    config_dir, version_base = WHERE[dialect]
    name = config_name_of(train_s.workload.trainer)
    train = resolve_run(train_s, stack).launch
    evaluation = resolve_run(eval_s, stack).launch
    train_cfg = _compose(config_dir, name, overrides_of(train.argv), version_base, monkeypatch)
    written = _written_checkpoint(dialect, train_cfg)
    # the evaluation picks it up: a directory its globs find (the training's own marker patterns)
    assert any(fnmatch.fnmatchcase(written, glob) for glob in evaluation.checkpoint_globs), (written, evaluation.checkpoint_globs)
    assert any(fnmatch.fnmatchcase(written, pattern) for pattern in train.checkpoint_patterns)
    eval_dir = f"{evaluation.eval_root}/step-{STEP}"
    model = f"{eval_dir}/model/global_step_{STEP}" if evaluation.copy_checkpoint else written
    runtime = [f"{key}={value.replace('{checkpoint}', model).replace('{eval_dir}', eval_dir)}" for key, value in evaluation.runtime_keys]
    eval_cfg = _compose(config_dir, name, overrides_of(evaluation.argv) + runtime, version_base, monkeypatch)
    return dialect, train_cfg, eval_cfg, written, model


@needs_reference
@pytest.mark.filterwarnings("ignore:.*Defaults list is missing `_self_`")
@pytest.mark.filterwarnings("ignore::hydra.errors.Hydra14MigrationWarning")
@pytest.mark.parametrize("stack", EVAL_STACKS)
def test_the_evaluation_reads_its_keys_builds_the_trained_model_and_loads_a_checkpoint_the_run_wrote(stack, monkeypatch):
    dialect, train_cfg, eval_cfg, written, model = _compose_pair(stack, monkeypatch)
    loads = recipe_of(dialect).startup.evaluation
    # every key the trainer's validation and model loading read in evaluation (the recipe cites each)
    missing = [key for key in loads.reads if _select(eval_cfg, key) is KeyError]
    assert not missing, f"the evaluation's config lacks {missing}"
    if dialect == "rlinf-embodied":
        # eval_embodied_agent.py sets task_type embodied_eval: validate_embodied_cfg and the HF
        # rollout worker build the model from rollout.model (config.py:816-822,
        # huggingface_worker.py:46); in training the rollout model is actor.model with
        # rollout.model's precision and model_path (huggingface_worker.py:133-136)
        trained = _container(train_cfg.actor.model)
        trained.update(precision=_select(train_cfg, "rollout.model.precision"), model_path=_select(train_cfg, "rollout.model.model_path"))
        evaluated = _container(eval_cfg.rollout.model)
        evaluated.update(precision=_select(eval_cfg, "rollout.model.precision"), model_path=_select(eval_cfg, "rollout.model.model_path"))
        assert evaluated == trained
        for key in ("is_lora", "lora_path", "num_action_chunks", "unnorm_key", "add_value_head", "model_type"):
            assert evaluated.get(key) == trained.get(key), key
        assert eval_cfg.runner.ckpt_path == f"{written}/actor/model_state_dict/full_weights.pt"
        assert eval_cfg.runner.only_eval is True and eval_cfg.runner.save_interval == -1
    else:
        # veRL builds the evaluated model from actor_rollout_ref (model, rollout): the training's,
        # but for the two keys that take the checkpoint (a copy of it)
        trained, evaluated = _container(train_cfg.actor_rollout_ref), _container(eval_cfg.actor_rollout_ref)
        assert evaluated["model"].pop("path") == evaluated["rollout"].pop("pretrained_checkpoint") == model
        trained["model"].pop("path"), trained["rollout"].pop("pretrained_checkpoint")
        assert evaluated == trained
        assert model.endswith(f"/global_step_{STEP}") and written.endswith(f"/actor/global_step_{STEP}")
        assert eval_cfg.trainer.val_only is True and eval_cfg.trainer.save_freq == -1


@needs_reference
@pytest.mark.filterwarnings("ignore:.*Defaults list is missing `_self_`")
@pytest.mark.filterwarnings("ignore::hydra.errors.Hydra14MigrationWarning")
def test_a_users_rollout_precision_reaches_the_evaluated_model_as_it_reached_the_trained_one(monkeypatch):
    """The training's rollout model takes rollout.model.precision; so does the evaluated one."""
    from omegaconf import OmegaConf

    sets = ("workload.trainer.overrides[0]=rollout.model.precision=fp16",)
    train_s, eval_s = plan_stack("multi-node", *sets).settings, plan_stack("multi-node", "workload.mode=eval", *sets).settings
    config_dir, version_base = WHERE["rlinf-embodied"]
    train = _compose(config_dir, "maniskill_ppo_openvlaoft", overrides_of(resolve_run(train_s, "multi-node").launch.argv), version_base, monkeypatch)
    evaluation = _compose(config_dir, "maniskill_ppo_openvlaoft", overrides_of(resolve_run(eval_s, "multi-node").launch.argv), version_base, monkeypatch)
    assert train.rollout.model.precision == "fp16" and train.actor.model.precision == "bf16"
    assert OmegaConf.select(evaluation, "rollout.model.precision") == "fp16"
    assert OmegaConf.select(evaluation, "rollout.model.lora_path") == train.actor.model.lora_path


def test_an_override_of_the_evaluated_section_the_trained_rollout_never_read_is_named_not_passed():
    sets = ("workload.mode=eval", "workload.trainer.overrides[0]=+rollout.model.foo=1")
    launch = resolve_run(plan_stack("multi-node", *sets).settings, "multi-node").launch
    assert not [a for a in launch.argv if "rollout.model.foo" in a or "actor.model.foo" in a]
    assert "rollout.model=${actor.model}" in launch.argv
    (warning,) = [w for w in launch.warnings if "+rollout.model.foo=1" in w]
    assert "is not passed to the evaluation: its model is rollout.model=${actor.model}" in warning
