"""Issue 55, item 4: ``workload.trainer.overrides`` checked at plan time against the keys of the
trainer's upstream config (components/trainers/data/<dialect>-keys.json, derived by
tests/trainer_keys.py from the pinned configs), with the near miss; Hydra's + and ++ may add keys."""

from __future__ import annotations

import json

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.trainers import recipe_of
from rlinf_eks.trainers.override_keys import checked_key, config_keys, data_path, key_data
from tests import trainer_keys
from tests.harness import cli_plan, require_shared, settings
from tests.reference_trainers import REFERENCE

DIALECTS = ("verl-ppo", "rlinf-embodied", "rlinf-reasoning")


def _plan(monkeypatch, capsys, tmp_path, *sets: str) -> tuple[int, str]:
    return cli_plan(monkeypatch, capsys, tmp_path, "vllm-rollout", *sets)


def test_a_mistyped_override_key_is_refused_with_the_near_miss_before_anything(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, "workload.trainer.overrides=runner.max_stepz=100")
    assert status == 2 and not (tmp_path / "out").exists()
    line = next(x for x in err.splitlines() if "overrides[0]" in x)
    assert line.strip().startswith("- workload.trainer.overrides[0]='runner.max_stepz=100': runner.max_stepz is not a key of")
    assert "qwen2.5-1.5b-grpo-fsdp" in line and "(did you mean runner.max_steps?)" in line and "+runner.max_stepz=100" in line


@pytest.mark.parametrize("override", ["+runner.max_stepz=100", "++runner.max_stepz=100"])
def test_hydra_append_and_force_prefixes_may_add_a_key(monkeypatch, capsys, tmp_path, override):
    status, err = _plan(monkeypatch, capsys, tmp_path, f"workload.trainer.overrides={override}")
    assert "is not a key of" not in err


def test_deleting_a_key_the_config_lacks_is_refused():
    with pytest.raises(ConfigError, match=r"overrides\[0\]='~trainer.total_epochz': trainer.total_epochz is not a key of the verl-ppo config ppo_trainer .*\(did you mean trainer.total_epochs\?\)"):
        settings(workload={"image": "x/y:1", "trainer": {"overrides": ["~trainer.total_epochz"]}})


def test_keys_the_config_has_pass_at_any_depth():
    overrides = ["trainer.total_epochs=2", "actor_rollout_ref.actor.optim.lr=1e-6", "data.train_batch_size=8", "~trainer.val_before_train"]
    settings(workload={"image": "x/y:1", "trainer": {"overrides": overrides}})


def test_a_wrong_parent_gets_the_whole_path_hinted():
    with pytest.raises(ConfigError, match=r"trainr.total_epochs is not a key .*\(did you mean trainer.total_epochs\?\)"):
        settings(workload={"image": "x/y:1", "trainer": {"overrides": ["trainr.total_epochs=2"]}})


def test_a_config_the_data_does_not_list_is_not_checked():
    assert config_keys("verl-ppo", "my_own_trainer") is None
    settings(workload={"image": "x/y:1", "trainer": {"configName": "my_own_trainer", "overrides": ["anything.at_all=1"]}})


@pytest.mark.parametrize(
    "item, key",
    [
        ("runner.max_steps=3", "runner.max_steps"),
        ("~runner.max_steps", "runner.max_steps"),
        ("+runner.new=3", None),
        ("++runner.new=3", None),
        ("model@actor.model=openvla", None),  # a config group's option
        ("env/train=libero_10", None),
        ("hydra.run.dir=/tmp", None),  # Hydra's own settings
    ],
)
def test_which_overrides_name_a_key_that_must_exist(item, key):
    assert checked_key(item) == key


def test_the_data_covers_every_config_the_recipes_know_and_says_where_it_came_from():
    for dialect in DIALECTS:
        data = key_data(dialect)
        recipe = recipe_of(dialect)
        assert set(data["configs"]) == {*recipe.configs, *recipe.other_configs}, dialect
        assert data["provenance"]["commit"] == trainer_keys.UPSTREAM[dialect]["commit"]
        assert all(len(keys) > 100 for keys in data["configs"].values())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_data_is_what_the_script_derives_from_the_pinned_configs(dialect):
    require_shared(REFERENCE / trainer_keys.UPSTREAM[dialect]["configDir"], "the reference trainer configs")
    derived = trainer_keys.derive(dialect)
    shipped = json.loads(data_path(dialect).read_text())
    assert shipped["configs"] == derived["configs"], "the trainer keys changed: python -m tests.trainer_keys"
    assert {k: v for k, v in shipped["provenance"].items() if k != "composedWith"} == {
        k: v for k, v in derived["provenance"].items() if k != "composedWith"
    }
