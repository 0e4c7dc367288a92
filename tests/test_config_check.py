"""The pods' config check (workload/config_check.py, sh/config-check.sh, programs/config_check.py),
run for real with hydra-core against the reference trainer configs: every stack's training and
evaluation config passes; a planted bad override, a key the evaluation reads that is gone, and a
config the trainer's validation refuses each fail with exit CONFIG_INVALID and one line, written to
the termination message too. RLinf itself (torch, Ray) is not installed here: a stand-in package
``rlinf`` with the shape of v0.3's ``rlinf.config.validate_cfg`` (it constructs ``Cluster`` first,
which would ray.init, checks the model type, then places the components on the cluster and checks
the sizes against their world size, then an FSDP actor's config with RLinf's own
``validate_fsdp_cfg``, read from the unmodified upstream copy) shows that the check replaces the
cluster, answers the placement from the run's GPUs, and refuses what RLinf refuses."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlinf_eks.trainers import recipe_of
from rlinf_eks.workload import exit_codes
from rlinf_eks.workload.config_check import CONTAINER, check_spec, config_check_script
from rlinf_eks.workload.run import resolve_run
from tests.harness import EXPERIMENT_STACKS, STACKS, dialect_of, plan_stack
from tests.reference_trainers import UPSTREAM_OVERLAY
from tests.test_trainers import EMBODIED_DIR, REFERENCE, needs_reference, pending_upstream_config
from tests.test_trainers import reference_trainers  # noqa: F401 (the fixture needs_reference uses)

BASH = shutil.which("bash")
CHECKOUTS = {"verl-ppo": REFERENCE / "SimpleVLA-RL", "rlinf-embodied": REFERENCE / "RLinf", "rlinf-reasoning": REFERENCE / "RLinf"}
WORKLOAD_STACKS = STACKS + EXPERIMENT_STACKS
EVAL_STACKS = [s for s in WORKLOAD_STACKS if not recipe_of(dialect_of(s)).evaluation.unsupported]

# The shape of rlinf/config.py at 0505431, for what the check relies on: validate_cfg constructs
# Cluster(cluster_cfg=...) first (config.py:1313-1317; the real one ray.init()s), then the task's
# validation (the model type from rollout.model in evaluation, config.py:816-826; the reasoning
# batch sizes, config.py:1197-1210), then places the components on the cluster and checks the
# sizes against a component's world size (config.py:922-924, 970-972, 1372-1381), then an FSDP
# actor's config: RLinf's own validate_fsdp_cfg (config.py:377-475), its source read from the
# unmodified copy (tests/data/upstream-trainers/README.md). rlinf/__init__.py registers the
# resolvers the reasoning config uses (rlinf/utils/omega_resolver.py).
UPSTREAM_CONFIG = UPSTREAM_OVERLAY / "RLinf" / "rlinf" / "config.py"


def upstream_function(name: str) -> str:
    """The source of one top-level function of RLinf's rlinf/config.py at 0505431, as it is."""
    source = UPSTREAM_CONFIG.read_text()
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name]
    return ast.get_source_segment(source, node)


RLINF_INIT = """
from omegaconf import OmegaConf
OmegaConf.register_new_resolver("subtract", lambda x, y: x - y, replace=True)
OmegaConf.register_new_resolver("not", lambda x: not bool(x), replace=True)
"""
RLINF_CONFIG = """
import logging
from omegaconf import OmegaConf, open_dict
from omegaconf.dictconfig import DictConfig

class Cluster:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("ray.init() would run here: the check must stand in for Cluster")

class HybridComponentPlacement:
    def __init__(self, cfg, cluster):
        cluster.num_nodes  # the real placement asks the cluster for its nodes and GPUs

# rlinf/config.py:110-131 at 0505431 (EMBODIED_MODEL)
EMBODIED = {"openvla", "openvla_oft", "openpi", "starvla", "mlp_policy", "gr00t", "dexbotic_pi", "dexbotic_dm0", "dreamzero",
            "cnn_policy", "flow_policy", "cma", "lingbotvla", "abot_m0", "resnet", "gr00t_n1d6", "gr00t_n1d7", "cfg_model", "value_model"}

def validate_cfg(cfg):
    Cluster(cluster_cfg=cfg.cluster)
    if cfg.runner.task_type.startswith("embodied"):
        only_eval = cfg.runner.get("only_eval", False) or cfg.runner.task_type == "embodied_eval"
        model = cfg.rollout.model if only_eval else cfg.actor.model
        assert model.model_type in EMBODIED, f"Model type: '{model.model_type}' is not an embodied model."
        env_world_size = HybridComponentPlacement(cfg, Cluster()).get_world_size("env")
        if not only_eval:
            assert cfg.env.train.total_num_envs % env_world_size == 0, (
                "Total number of parallel environments for training must be divisible by the number of environment processes"
            )
        return cfg
    with open_dict(cfg):
        cfg.actor.micro_batch_size = cfg.algorithm.get("training_batch_size_per_gpu", 1)
        cfg.actor.global_batch_size = cfg.data.rollout_batch_size * cfg.algorithm.group_size // cfg.algorithm.get("n_minibatches", 1)
    if cfg.actor.training_backend == "fsdp":
        component_placement = HybridComponentPlacement(cfg, Cluster())
        actor_world_size = component_placement.get_world_size("actor")
        assert cfg.actor.global_batch_size % (cfg.actor.micro_batch_size * actor_world_size) == 0, (
            f"actor.global_batch_size ({cfg.actor.global_batch_size}) must be divisible by (actor.micro_batch_size ({cfg.actor.micro_batch_size}) * actor_world_size ({actor_world_size}))"
        )
        cfg.actor = validate_fsdp_cfg(cfg.actor)
    return cfg
"""


@pytest.fixture
def rlinf_stand_in(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "rlinf"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(RLINF_INIT)
    (package / "config.py").write_text(RLINF_CONFIG + "\n\n" + upstream_function("validate_fsdp_cfg") + "\n")
    return tmp_path / "site"


def _pod_env(site: Path) -> dict[str, str]:
    # python3 is the test's own interpreter (hydra-core is a test dependency), first on PATH as the
    # image's venv is in the pod, whether or not the virtualenv that runs the tests is activated
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "PYTHONPATH": str(site), "EMBODIED_PATH": str(EMBODIED_DIR)}


_CHECKED: dict[tuple, tuple[subprocess.CompletedProcess[str], str]] = {}
"""The checks this process has run, by (stack, edits, extra): a stack's own check is asked for by two
tests (every stack's passes; the reasoning stacks' pass where upstream's value is refused), and the
same rendered script, config and stand-in give the same outcome, so it runs once."""


def _check(stack: str, sets: tuple[str, ...], tmp_path: Path, site: Path, extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], str]:
    """``extra``: overrides appended to the rendered command (for what the stack itself refuses)."""
    key = (stack, sets, extra)
    if key not in _CHECKED:
        _CHECKED[key] = _run_check(stack, sets, tmp_path, site, extra)
    return _CHECKED[key]


def _run_check(stack: str, sets: tuple[str, ...], tmp_path: Path, site: Path, extra: tuple[str, ...]) -> tuple[subprocess.CompletedProcess[str], str]:
    run = resolve_run(plan_stack(stack, *sets).settings, stack)
    if extra:
        run = dataclasses.replace(run, launch=dataclasses.replace(run.launch, argv=[*run.launch.argv, *extra]))
    checkout = CHECKOUTS[run.settings.workload.trainer.dialect]
    log = tmp_path / "termination-log"
    log.unlink(missing_ok=True)
    script = tmp_path / "config-check.sh"
    script.write_text(config_check_script(run, termination_log=str(log), checkout=str(checkout), timeout_seconds=120))
    quoted = re.search(r"^CHECK='(.*)'$", script.read_text(), re.M).group(1)
    check = json.loads(quoted.replace("'\"'\"'", "'"))  # the shell's quoting of a single quote
    pending_upstream_config(Path(check["config_dir"]), check["config_name"])
    # the pod's environment: the trainer's variables (EMBODIED_PATH for RLinf's searchpath) as the
    # checkout in the image has them, here the reference's
    env = {**_pod_env(site), "HYDRA_FULL_ERROR": "1"}
    result = subprocess.run([BASH, str(script)], env=env, text=True, capture_output=True, timeout=180)
    return result, log.read_text() if log.exists() else ""


@needs_reference
@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
@pytest.mark.parametrize("stack,sets", [(s, ()) for s in WORKLOAD_STACKS] + [(s, ("workload.mode=eval",)) for s in EVAL_STACKS])
def test_every_stack_s_training_and_evaluation_config_passes_the_check(stack, sets, tmp_path, rlinf_stand_in):
    result, log = _check(stack, sets, tmp_path, rlinf_stand_in)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("rlinf-eks config-check: OK:")
    dialect = plan_stack(stack, *sets).settings.workload.trainer.dialect
    if dialect.startswith("rlinf"):
        # the placement is answered from the run's GPUs: the validation runs to its end
        assert "rlinf.config:validate_cfg passes the whole validation" in result.stderr
    assert log == ""


@needs_reference
@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
@pytest.mark.parametrize(
    "stack, sets, extra, says",
    [
        # a key the trainer's config does not have: Hydra refuses it in struct mode (the plan refuses it
        # first, rlinf_eks.trainers.override_keys: appended to the rendered command here, as an image's
        # own config the plan does not know would pass it)
        ("single-node", (), ("actor_rollout_ref.rollout.unnorm_keys=libero_10",), "Hydra cannot compose ppo_trainer (", ),
        ("multi-node", (), ("actor.model.lora_pth=/x",), "Could not override 'actor.model.lora_pth'"),
        # the evaluation reads the model's policy_setup from rollout.model (the trained actor.model)
        ("multi-node", ("workload.mode=eval", "workload.trainer.overrides[0]=~actor.model.policy_setup"), (),
         "rollout.model.policy_setup is not in the composed config; the evaluation (rlinf/config.py:1040-1046"),
        # a model the trainer's validation refuses, before it needs the cluster
        ("multi-node", ("workload.mode=eval", "workload.trainer.overrides[0]=actor.model.model_type=gpt2"), (),
         "rlinf.config:validate_cfg refuses the composed config: AssertionError: Model type: 'gpt2' is not an embodied model."),
        # an interpolation that does not resolve
        ("vllm-rollout", ("workload.trainer.overrides[0]=runner.seq_length=${runner.no_such_key}",), (), "the composed config does not resolve"),
    ],
)
def test_a_config_the_trainer_would_refuse_fails_with_its_exit_code_and_one_line(stack, sets, extra, says, tmp_path, rlinf_stand_in):
    result, log = _check(stack, sets, tmp_path, rlinf_stand_in, extra)
    assert result.returncode == exit_codes.CONFIG_INVALID == 96, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("rlinf-eks config-check: FAILED: ") and line.endswith(f"(exit {exit_codes.CONFIG_INVALID})")
    assert says in line, line
    assert log == line  # the termination message is the same one line
    assert "Traceback" not in result.stderr


REASONING_STACKS = [s for s in WORKLOAD_STACKS if dialect_of(s) == "rlinf-reasoning"]
AMP_REFUSED = ("rlinf.config:validate_cfg refuses the composed config: AssertionError: "
               "amp_autocast should not be enabled when fsdp mixed_precision is enabled")


@needs_reference
@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
@pytest.mark.parametrize("stack", REASONING_STACKS)
def test_the_reasoning_config_as_upstream_ships_it_is_refused_with_rlinf_s_own_message_and_the_stack_s_passes(stack, tmp_path, rlinf_stand_in):
    """qwen2.5-1.5b-grpo-fsdp.yaml:218-228 enables FSDP mixed precision and amp_autocast together,
    which RLinf's validate_fsdp_cfg refuses (config.py:377-420) once the actor is placed: upstream's
    value (amp_autocast.enabled True, put back over the stack's fix) fails the pod's check with
    RLinf's message before staging and Ray; the stack's rendered command passes it."""
    assert REASONING_STACKS
    result, log = _check(stack, ("workload.trainer.overrides[0]=actor.fsdp_config.amp_autocast.enabled=True",), tmp_path, rlinf_stand_in)
    assert result.returncode == exit_codes.CONFIG_INVALID == 96, result.stderr
    assert AMP_REFUSED in log and log == result.stderr.strip().splitlines()[-1]
    result, log = _check(stack, (), tmp_path, rlinf_stand_in)
    assert result.returncode == 0 and log == "", result.stderr
    assert "rlinf.config:validate_cfg passes the whole validation" in result.stderr


@needs_reference
@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
@pytest.mark.parametrize("stack, gpus", [("vllm-rollout", 8), ("autoscaled", 16)])
def test_the_placement_s_world_size_is_the_run_s_gpus_where_the_config_places_the_actor_on_all(stack, gpus, tmp_path, rlinf_stand_in):
    """cluster.component_placement "actor,rollout,reward: all": the actor's world size is every GPU
    of the run (nodes x GPUs a node). The stack's own size rule refuses such a batch at plan time, so
    the overrides are appended to the rendered command here, as an image's older rule would let through."""
    extra = ("data.rollout_batch_size=1", "algorithm.group_size=4", "algorithm.n_minibatches=1")
    result, log = _check(stack, (), tmp_path, rlinf_stand_in, extra)
    assert result.returncode == exit_codes.CONFIG_INVALID, result.stderr
    assert f"actor.global_batch_size (4) must be divisible by (actor.micro_batch_size (1) * actor_world_size ({gpus}))" in log


def test_the_check_runs_after_the_image_check_and_before_staging_fabric_and_ray_in_every_pod():
    for stack in ("multi-node", "single-node", "multi-node-kuberay"):
        plan = plan_stack(stack)
        text = json.dumps([r["inputs"] for r in plan.resources if r["type"].startswith("kubernetes:")])
        assert f'"name": "{CONTAINER}"' in text, stack
        for obj in plan.manifests().values():
            spec = obj.get("spec", {})
            templates = [spec.get("template"), *(j.get("template", {}).get("spec", {}).get("template") for j in spec.get("replicatedJobs", []))]
            templates += [spec.get("rayClusterSpec", {}).get("headGroupSpec", {}).get("template")]
            for template in filter(None, templates):
                names = [c["name"] for c in template["spec"].get("initContainers", [])]
                if "image-check" in names:
                    assert names[names.index("image-check") + 1] == CONTAINER, names
                    container = template["spec"]["initContainers"][names.index(CONTAINER)]
                    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
                    assert container["command"] == ["/bin/bash", "/etc/rlinf/config-check.sh"]


def test_the_job_and_the_jobset_do_not_retry_a_config_the_trainer_refuses():
    from rlinf_eks.workload.manual import failure_policy, pod_failure_policy

    rules = pod_failure_policy().rules
    index = next(i for i, r in enumerate(rules) if r.on_exit_codes and r.on_exit_codes.container_name == CONTAINER)
    assert rules[index].action == "FailJob" and rules[index].on_exit_codes.values == [exit_codes.CONFIG_INVALID]
    (rule,) = [r for r in failure_policy(3)["rules"] if r["name"] == "ConfigInvalid"]
    assert rule["action"] == "FailJobSet" and rule["onJobFailureMessagePatterns"] == [f"matching FailJob rule at index {index}$"]


def test_the_plan_faults_section_names_the_check_and_its_exit_code():
    from rlinf_eks.offline.outputs.resilience import render

    text = render(plan_stack("multi-node").settings, "multi-node")
    assert f"config: a config-check init container composes the trainer's Hydra config" in text
    assert f"(exit {exit_codes.CONFIG_INVALID}, one line, also the container's termination message)" in text
    assert "config: the JobSet fails at once on it (rule ConfigInvalid)" in text


def test_the_evaluation_check_requires_what_the_evaluation_reads_and_stands_in_for_the_run_time_keys():
    run = resolve_run(plan_stack("multi-node", "workload.mode=eval").settings, "multi-node")
    spec = check_spec(run)
    assert set(spec["requires"]) == set(recipe_of("rlinf-embodied").startup.evaluation.reads)
    assert "runner.ckpt_path=/fsx/multi-node/eval/global_step_0/actor/model_state_dict/full_weights.pt" in spec["overrides"]
    assert spec["validate"] == "rlinf.config:validate_cfg" and spec["version_base"] == "1.1"
    assert spec["overrides"][-1].startswith("runner.logger.log_path=") or "rollout.model=${actor.model}" in spec["overrides"]


@needs_reference
@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
def test_the_check_fails_the_evaluation_rendered_without_the_trained_model_s_section_in_seconds(tmp_path, rlinf_stand_in):
    """The evaluation as it was rendered before the evaluated model was derived (issue 43, part 2):
    rollout.model held only model_path and precision, and validate_cfg died on model_type after the
    cluster formed. The check ends it before anything is staged."""

    run = resolve_run(plan_stack("multi-node", "workload.mode=eval").settings, "multi-node")
    argv = [a for a in run.launch.argv if a != "rollout.model=${actor.model}"]
    assert len(argv) == len(run.launch.argv) - 1
    run = dataclasses.replace(run, launch=dataclasses.replace(run.launch, argv=argv))
    log = tmp_path / "termination-log"
    script = tmp_path / "config-check.sh"
    script.write_text(config_check_script(run, termination_log=str(log), checkout=str(CHECKOUTS["rlinf-embodied"])))
    env = _pod_env(rlinf_stand_in)
    result = subprocess.run([BASH, str(script)], env=env, text=True, capture_output=True, timeout=180)
    assert result.returncode == exit_codes.CONFIG_INVALID
    assert "rollout.model.model_type is not in the composed config; the evaluation (rlinf/config.py:820-822" in log.read_text()


def test_verify_s_node_smoke_runs_the_check_and_names_a_refused_config():
    from rlinf_eks.verify.smoke import smoke_scripts, smoke_verdict

    run = resolve_run(plan_stack("multi-node").settings, "multi-node")
    files = smoke_scripts(run)
    assert files["config-check.sh"] == config_check_script(run)
    assert files["smoke.sh"].index('bash "${SCRIPTS_DIR}/image-check.sh"') < files["smoke.sh"].index('bash "${SCRIPTS_DIR}/config-check.sh"')
    line = "rlinf-eks config-check: FAILED: the rlinf-embodied trainer's config maniskill_ppo_openvlaoft: Hydra cannot compose ... (exit 96)"
    verdict = smoke_verdict("n1", exit_codes.CONFIG_INVALID, "rlinf-eks image-check: OK: ray 2.49.2\n" + line + "\n")
    assert verdict.outcome == "fail" and "trainer config refused (exit 96): " + line in verdict.detail
