"""Every stack trains as rendered: each dialect's recipe (trainers/recipes/*.yaml) against the
upstream configs (../shared/reference/trainers) and the run scripts it transcribes, every stack's
rendered command composed with Hydra and walked for upstream placeholder paths, the inputs staged
and pointed at, and bad inputs refused with the key named before anything is created."""

from __future__ import annotations

import re
import shlex
from typing import Any, Iterator

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError
from rlinf_eks.trainers import DIALECTS, chosen_inputs, config_name_of, recipe_of
from rlinf_eks.trainers.recipe import PLACEHOLDER
from rlinf_eks.workload.run import resolve_run
from tests.harness import EXPERIMENT_STACKS, STACKS, pending_shared, plan_stack, settings
from tests.test_trainers import CASES, EMBODIED_DIR, REASONING_DIR, VERL_DIR, _compose, needs_reference, overrides_of
from tests.test_trainers import reference_trainers  # noqa: F401 (the fixture needs_reference uses)

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*Defaults list is missing `_self_`"),
    pytest.mark.filterwarnings("ignore::hydra.errors.Hydra14MigrationWarning"),
]

WHERE = {"verl-ppo": (VERL_DIR, None), "rlinf-embodied": (EMBODIED_DIR / "config", "1.1"), "rlinf-reasoning": (REASONING_DIR, "1.1")}
WORKLOAD_STACKS = STACKS + EXPERIMENT_STACKS


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (dotted key, value) of a composed config, interpolations unresolved (a placeholder
    behind ``${...}`` shows at the key that holds it)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig):
        for key in node.keys():
            child = node._get_node(key)
            yield from leaves(child if isinstance(child, (DictConfig, ListConfig)) else OmegaConf.to_container(node, resolve=False)[key], f"{prefix}{key}.")
    elif isinstance(node, ListConfig):
        for item in OmegaConf.to_container(node, resolve=False):
            yield from leaves(item, prefix)
    elif isinstance(node, (list, tuple)):
        for item in node:
            yield from leaves(item, prefix)
    else:
        yield prefix.rstrip("."), node


def placeholders(cfg: Any) -> dict[str, str]:
    """The keys whose value is one of upstream's example paths."""
    return {key: value for key, value in leaves(cfg) if isinstance(value, str) and PLACEHOLDER.match(value)}


def compose_run(s, stack: str, monkeypatch) -> Any:
    run = resolve_run(s, stack)
    config_dir, version_base = WHERE[s.workload.trainer.dialect]
    return _compose(config_dir, config_name_of(s.workload.trainer), overrides_of(run.launch.argv), version_base, monkeypatch)


# --- the recipes ---------------------------------------------------------------------------------


def test_every_dialect_has_a_recipe_for_each_of_its_reference_configs_and_nothing_else():
    for name, dialect in DIALECTS.items():
        recipe = recipe_of(name)
        assert set(recipe.configs) == set(dialect.config_names), name
        assert re.fullmatch(r"[0-9a-f]{40}", recipe.commit), name
        for config in recipe.configs.values():
            assert config.inputs and config.inputs[0].name == "model" and config.inputs[0].keys == recipe.model_keys
            assert config.imports, f"{name} {config.name}: what the trainer imports first"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_each_recipe_covers_every_override_of_its_upstream_run_script(dialect):
    """settings (passed as they are) + the run script's generated keys (``upstream -> ours``) +
    the leftOut overrides are the run script's Hydra overrides, each once."""
    for config in recipe_of(dialect).configs.values():
        upstream_generated = [key for key, text in config.generated.items() if "->" in text]
        left_out = [key.split("=", 1)[0] for key in config.left_out if re.fullmatch(r"[a-z_]+(\.[A-Za-z0-9_]+)+", key.split("=", 1)[0])]
        keys = [*config.settings, *upstream_generated, *left_out]
        assert len(keys) == len(set(keys)) == config.override_count, config.name


@pytest.mark.parametrize("dialect, backend, config_name", CASES)
def test_the_rendered_command_carries_each_upstream_setting_and_no_left_out_one(dialect, backend, config_name):
    s = settings(
        workload={"image": "x/y:1", "trainer": {"dialect": dialect, "configName": config_name}, "rollout": {"backend": backend, "tensorParallelSize": 1}},
        gpuNodes={"nodeCount": 1},
    )
    run = resolve_run(s, "t")
    config = recipe_of(dialect).configs[config_name]
    overrides = overrides_of(run.launch.argv)
    given = dict(o.split("=", 1) for o in overrides if "=" in o)
    for key, value in config.settings.items():
        assert given.get(key) == value or key in config.generated, f"{config_name}: {key}={value} (the upstream run script's) is not on the command line"
    for key, text in config.generated.items():
        assert key in given or f"+{key}" in given, f"{config_name}: {key} ({text}) is not generated"
    for key in config.left_out:
        name, _, value = key.partition("=")
        if "." in name:  # a Hydra key
            assert name not in given, f"{config_name}: {name} is left out on purpose"
        else:  # a variable: not set, or not to the run script's value
            assert not value or value not in run.launch.env.get(name, ""), f"{config_name}: {key} is left out on purpose"
    for name, value in config.env.items():
        assert run.launch.env[name] == value
    keys = [o.split("=", 1)[0] for o in overrides if "=" in o]
    assert len(keys) == len(set(keys)), f"{config_name}: a key twice on the command line"


@pytest.mark.parametrize("dialect, backend, config_name", CASES)
def test_the_recipe_s_fixes_to_upstream_s_config_are_on_the_command_line_before_the_user_s(dialect, backend, config_name):
    """Each override the stack adds to fix upstream's config: on the rendered command with its
    value, with why and the upstream file:line, not the run script's (settings) nor generated; a
    user's override of the same key comes after it and wins."""
    config = recipe_of(dialect).configs[config_name]
    for key, fix in config.fixes.items():
        assert fix.why and re.search(r"\.(py|yaml):\d+", fix.source), f"{config_name}: {key}"
        assert key not in config.settings and key not in config.generated, f"{config_name}: {key}"
        s = settings(
            workload={"image": "x/y:1", "trainer": {"dialect": dialect, "configName": config_name, "overrides": [f"{key}=mine"]},
                      "rollout": {"backend": backend, "tensorParallelSize": 1}},
            gpuNodes={"nodeCount": 1},
        )
        overrides = overrides_of(resolve_run(s, "t").launch.argv)
        assert overrides.index(f"{key}={fix.value}") < overrides.index(f"{key}=mine"), f"{config_name}: {key}"


def test_the_reasoning_config_turns_off_amp_autocast_and_keeps_fsdp_mixed_precision_and_the_grad_scaler():
    """qwen2.5-1.5b-grpo-fsdp enables FSDP mixed precision and amp_autocast together, which RLinf's
    validate_fsdp_cfg refuses: the stack turns autocast off and sets nothing else of the FSDP config."""
    fixes = recipe_of("rlinf-reasoning").configs["qwen2.5-1.5b-grpo-fsdp"].fixes
    assert {key: fix.value for key, fix in fixes.items()} == {"actor.fsdp_config.amp_autocast.enabled": "False"}
    overrides = overrides_of(resolve_run(plan_stack("vllm-rollout").settings, "vllm-rollout").launch.argv)
    assert "actor.fsdp_config.amp_autocast.enabled=False" in overrides
    assert not [o for o in overrides if "mixed_precision" in o or "grad_scaler" in o]
    from rlinf_eks.offline.outputs.inputs import input_lines

    (line,) = [x for x in input_lines(plan_stack("vllm-rollout").settings, "vllm-rollout") if x.startswith("added to upstream's config: ")]
    assert line.startswith("added to upstream's config: actor.fsdp_config.amp_autocast.enabled=False: the config enables FSDP mixed precision")
    assert line.endswith("(rlinf/config.py:377-420 (validate_fsdp_cfg), run by validate_cfg for an FSDP actor (config.py:1372-1382); qwen2.5-1.5b-grpo-fsdp.yaml:218-228)")


@needs_reference
@pytest.mark.parametrize("dialect, backend, config_name", CASES)
def test_each_recipe_names_every_placeholder_of_its_upstream_config(dialect, backend, config_name, monkeypatch):
    """The upstream config, composed as it ships: each placeholder path is an input's key or
    ``unread`` (with its reason), and each ``unread`` key really holds one."""
    config_dir, version_base = WHERE[dialect]
    found = placeholders(_compose(config_dir, config_name, [], version_base, monkeypatch))
    config = recipe_of(dialect).configs[config_name]
    read_by_inputs = {key for item in config.inputs for key in item.hydra_keys}
    assert found, "the walk finds upstream's placeholders"
    assert set(found) - read_by_inputs - set(config.unread) == set(), f"placeholders no input stages: {found}"
    assert set(config.unread) <= set(found), "an unread key that holds no placeholder (stale)"
    # the values the loading step refuses are exactly the config's
    assert set(config.placeholders) == set(found.values())


@needs_reference
@pytest.mark.parametrize("nnodes", [1, 2])
@pytest.mark.parametrize("dialect, backend, config_name", CASES)
def test_every_config_a_stack_may_choose_reads_no_unstaged_placeholder(dialect, backend, config_name, nnodes, monkeypatch):
    batch = {"actor.micro_batch_size": 40} if config_name == "maniskill_ppo_openvla" else {}
    s = settings(
        gpuNodes={"nodeCount": nnodes},
        storage={"sharedFilesystem": {"enabled": nnodes > 1}},
        workload={"image": "x/y:1", "trainer": {"dialect": dialect, "configName": config_name, "batch": batch}, "rollout": {"backend": backend}},
    )
    left = placeholders(compose_run(s, "t", monkeypatch))
    assert set(left) <= set(recipe_of(dialect).configs[config_name].unread), left


@needs_reference
@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_every_stack_composes_with_no_placeholder_left_but_the_unread(stack, monkeypatch):
    s = plan_stack(stack).settings
    name = config_name_of(s.workload.trainer)
    # a config the reference holds no copy of yet (quickstart's maniskill_ppo_mlp)
    pending_shared(WHERE[s.workload.trainer.dialect][0] / f"{name}.yaml", f"the upstream config {name}", f"{name}.yaml and the files its defaults list name, of the pinned upstream commit")
    cfg = compose_run(s, stack, monkeypatch)
    config = recipe_of(s.workload.trainer.dialect).configs.get(name)
    left = placeholders(cfg)
    assert set(left) <= set(config.unread if config else ()), left
    # and every input's keys point at where it is staged or given
    run = resolve_run(s, stack)
    root = run.staging.root if run.staging else ""
    for item in run.inputs:
        for key in item.spec.keys:
            value = cfg
            for part in key.removesuffix("[]").split("."):
                value = value[part]
            assert (list(value) if key.endswith("[]") else value) == ([item.path(root)] if key.endswith("[]") else item.path(root))


# --- inputs: staged, swapped, refused -------------------------------------------------------------


def test_a_user_input_replaces_the_recipes_and_an_absolute_path_is_not_staged():
    s = settings(
        workload={
            "image": "x/y:1",
            "trainer": {"dialect": "rlinf-reasoning"},
            "rollout": {"backend": "vllm"},
            "inputs": {"dataset": "s3://acme-data/math/train.jsonl", "model": "/opt/models/qwen"},
        }
    )
    run = resolve_run(s, "t")
    argv = run.launch.argv
    assert "data.train_data_paths=[/rlinf-models/s3/acme-data/math/train.jsonl/train.jsonl]" in argv
    assert "actor.model.model_path=/opt/models/qwen" in argv
    assert [item.name for item in run.staging.inputs] == ["dataset"]  # the model is in the image already


@pytest.mark.parametrize(
    "stack, setting, says",
    [
        ("vllm-rollout", "workload.inputs.dataset=hf://datasets/inclusionAI", "workload.inputs.dataset='hf://datasets/inclusionAI': not an input source"),
        ("vllm-rollout", "workload.inputs.dataset=hf://datasets/inclusionAI/AReaL-boba-Data", "the trainer opens one file here"),
        ("vllm-rollout", "workload.inputs.lora=hf://RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Lora", "workload.inputs.lora='hf://RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Lora': no such input: the qwen2.5-1.5b-grpo-fsdp recipe's inputs are model, dataset"),
        ("multi-node", "workload.inputs.lora=/path/to/model/RLinf-OpenVLAOFT-ManiSkill-Base-Lora", "an upstream placeholder path, which no pod has"),
        ("vllm-rollout", "workload.inputs.dataset=gs://bucket/boba.jsonl", "valid forms: hf://Org/Name[@revision] (a model)"),
        ("vllm-rollout", "workload.inputs.datasets=hf://datasets/a/b/c.jsonl", "no such input: the qwen2.5-1.5b-grpo-fsdp recipe's inputs are model, dataset (did you mean dataset?)"),
        ("vllm-rollout", "workload.inputs.dataset=/dataset/boba/AReaL-boba-106k.jsonl", "an upstream placeholder path, which no pod has"),
        ("vllm-rollout", "workload.inputs.dataset=s3://acme-data/a,b/train.jsonl", "which Hydra would misread"),
        ("vllm-rollout", "workload.inputs.dataset=s3://acme-data", "the trainer opens one file here (data.train_data_paths, data.val_data_paths): name the file"),
        ("vllm-rollout", "workload.inputs.dataset=hf://datasets/inclusionAI/AReaL-boba-Data/data", "name the file, hf://datasets/Org/Name/file.jsonl"),
        ("multi-node", "workload.inputs.lora=~/lora", "no trainer expands '~': give an absolute path"),
    ],
    ids=[
        "dataset-without-repo", "dataset-without-file", "input-of-another-config", "placeholder-path", "wrong-scheme", "misspelt-name",
        "the-configs-own-placeholder", "comma-in-a-path", "s3-bucket-for-a-file", "dataset-folder-for-a-file", "tilde",
    ],
)
def test_a_bad_input_is_an_exit_2_error_naming_the_key_before_anything_is_created(tmp_path, capsys, stack, setting, says):
    assert main(["plan", stack, "--quiet", "--out", str(tmp_path / "out"), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_real_path_that_merely_starts_like_an_upstream_example_is_accepted():
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-embodied"}, "inputs": {"lora": "/home/ray/lora", "assets": "/dataset/maniskill"}})
    run = resolve_run(s, "t")
    assert "actor.model.lora_path=/home/ray/lora" in run.launch.argv and run.launch.env["MANISKILL_ASSET_DIR"] == "/dataset/maniskill"
    assert [item.name for item in run.staging.inputs] == ["model"]


def test_overrides_of_every_key_of_an_input_point_the_trainer_at_the_users_files_and_nothing_is_staged_for_it():
    overrides = ["actor.model.model_path=/fsx/mine/m", "rollout.model.model_path=/fsx/mine/m", "actor.tokenizer.tokenizer_model=/fsx/mine/m"]
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-reasoning", "overrides": overrides}, "rollout": {"backend": "vllm"}})
    run = resolve_run(s, "t")
    assert [item.name for item in run.staging.inputs] == ["dataset"]
    model = run.inputs[0]
    # named by the override of the recipe's first key of the model (rollout.model.model_path)
    assert model.by_override and model.origin == "workload.trainer.overrides[1]" and model.value == "/fsx/mine/m"
    # the user's overrides only, each once
    assert [a for a in run.launch.argv if a.startswith(("actor.model.model_path=", "rollout.model.model_path="))] == overrides[:2]
    # one key of three is not the whole input: the recipe's model is still staged for the others
    partial = settings(workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-reasoning", "overrides": overrides[:1]}, "rollout": {"backend": "vllm"}})
    assert [item.name for item in resolve_run(partial, "t").staging.inputs] == ["model", "dataset"]


def test_an_override_that_points_a_staged_key_back_at_a_placeholder_is_refused():
    with pytest.raises(ConfigError, match=r"workload\.trainer\.overrides\[0\]=.*actor\.model\.lora_path is an upstream placeholder"):
        settings(
            workload={
                "image": "x/y:1",
                "trainer": {"dialect": "rlinf-embodied", "overrides": ["actor.model.lora_path=/path/to/model/lora"]},
            }
        )


def test_every_workload_stack_plans_its_inputs_and_stages_each_in_its_own_init_container():
    for stack in WORKLOAD_STACKS:
        s = plan_stack(stack).settings
        names = [item.name for item in chosen_inputs(s)]
        config = recipe_of(s.workload.trainer.dialect).configs.get(config_name_of(s.workload.trainer))
        # a config without a recipe (quickstart's maniskill_ppo_mlp: no model, nothing to stage) stages what the stack names
        assert names == ([i.name for i in config.inputs] if config else [n for n in ("model",) if s.workload.model.source]), stack
        text = "\n".join(str(r["inputs"]) for r in plan_stack(stack).resources if r["type"].startswith("kubernetes:"))
        for name in names:
            assert f"'name': 'stage-{name}'" in text, (stack, name)


def test_the_printed_plan_lists_each_input_its_source_destination_and_keys(capsys, tmp_path):
    assert main(["plan", "vllm-rollout", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Inputs:") :].split("\n\n", 1)[0]
    assert "recipe: rlinf-reasoning qwen2.5-1.5b-grpo-fsdp, as examples/reasoning/run_main_grpo_math.sh" in section
    assert (
        "input dataset: hf://datasets/inclusionAI/AReaL-boba-Data/AReaL-boba-106k.jsonl (the recipe's) -> "
        "/rlinf-models/hf/datasets/inclusionAI/AReaL-boba-Data/AReaL-boba-106k.jsonl" in section
    )
    assert "read by data.train_data_paths, data.val_data_paths" in section
    assert "the image check imports first: torch vllm" in section


def test_multi_node_rlinf_runs_set_the_node_rank_from_the_pod_index_before_ray_start():
    files = next(
        r["inputs"]["data"] for r in plan_stack("multi-node").resources if r["type"] == "kubernetes:core/v1:ConfigMap" and "launch.sh" in r["inputs"].get("data", {})
    )
    launch = files["launch.sh"]
    assert "\nNODE_RANK_ENV=RLINF_NODE_RANK\n" in launch
    export = launch.index('export "${NODE_RANK_ENV}=${index}"')
    assert export < launch.index("ray start --head") and export < launch.index("ray start --address")
    # one node, or veRL: no rank (RLinf forces 0 on one node)
    single = next(
        r["inputs"]["data"]["launch.sh"] for r in plan_stack("vllm-rollout").resources if r["type"] == "kubernetes:core/v1:ConfigMap" and "launch.sh" in r["inputs"].get("data", {})
    )
    assert "\nNODE_RANK_ENV=''\n" in single or "\nNODE_RANK_ENV=\n" in single


def test_the_verl_run_prepares_the_model_as_the_libero_script_does_and_fails_if_it_cannot():
    run = resolve_run(plan_stack("single-node").settings, "single-node")
    script = run.launch.script()
    model = run.inputs[0].path(run.staging.root)
    line = f"bash examples/overwrite_vla_ckpt_utils.sh {shlex.quote(model)} || exit"
    assert line in script.splitlines() and script.index(line) < script.index("exec python")
    assert run.launch.env["ROBOT_PLATFORM"] == "LIBERO"


def test_the_readme_table_names_each_stacks_config_inputs_and_image_family():
    from rlinf_eks.workload.image_contract import DOCKERFILES
    from tests.test_readme import readme_section

    rows = [line for line in readme_section("## What each stack trains").splitlines() if line.startswith("| `")]
    covered = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        stacks = re.findall(r"`([a-z-]+)`", cells[0])
        for stack in stacks:
            s = plan_stack(stack).settings
            config = config_name_of(s.workload.trainer)
            assert f"`{config}`" in cells[1] or f"{recipe_of(s.workload.trainer.dialect).configs[config].script.split()[0].rsplit('/', 1)[-1]}" in cells[1], (stack, config)
            for item in chosen_inputs(s):
                assert f"`{item.value}`" in cells[2], (stack, item.value)
            assert f"`{DOCKERFILES[s.workload.trainer.dialect].rsplit('/', 1)[0]}`" == cells[3], stack
            covered.add(stack)
    assert covered == set(WORKLOAD_STACKS)
