"""workload.mode eval: settings, the evaluation script run for real against a fake trainer, and the
plans of the example stacks in eval mode (queue, pod shape, checkpoint path, names)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.trainers import launch_for
from rlinf_eks.trainers.base import COMPLETE_MARKER
from rlinf_eks.trainers.evaluation import MODEL_FILE_MISSING, NO_CHECKPOINT, RUN_MISMATCH, EvalLaunch
from rlinf_eks.workload import exit_codes
from tests.harness import plan_stack, settings
from tests.test_trainers import reference_trainers  # noqa: F401 (the fixture)

BASH = shutil.which("bash")


def test_eval_checkpoint_must_be_a_step_name_or_an_absolute_step_path():
    assert settings(workload={"image": "x.io/r:1", "mode": "eval", "eval": {"checkpoint": "global_step_49"}}).workload.eval.checkpoint_name == "global_step_49"
    assert settings(workload={"image": "x.io/r:1", "mode": "eval", "eval": {"checkpoint": "/fsx/a/global_step_7/"}}).workload.eval.checkpoint_name == "global_step_7"
    with pytest.raises(ConfigError) as err:
        settings(workload={"image": "x.io/r:1", "mode": "eval", "eval": {"checkpoint": "latest"}})
    assert "workload.eval.checkpoint" in str(err.value) and "'latest'" in str(err.value)


def test_a_dialect_without_upstream_evaluation_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as err:
        settings(workload={"image": "x.io/r:1", "mode": "eval", "trainer": {"dialect": "rlinf-reasoning"}, "rollout": {"backend": "vllm"}})
    text = str(err.value)
    assert "workload.mode" in text and "eval" in text and "no evaluation entry point" in text


def _verl_eval(checkpoint: str | None = None, run_dir: str = "/fsx/s", identity: str = "verl-ppo ppo_trainer model=m", model: str = "/fsx/sft") -> EvalLaunch:
    # model: the model input the run trained from (an absolute path: not staged)
    wl = {"image": "x.io/r:1", "mode": "eval", "trainer": {"experimentName": "exp1"}, "inputs": {"model": model}}
    if checkpoint:
        wl["eval"] = {"checkpoint": checkpoint}
    s = settings(workload=wl)
    launch = launch_for(s, nnodes=1, gpus_per_node=8, log_dir=f"{run_dir}/logs", checkpoint_dir=f"{run_dir}/checkpoints", inputs_root="/m", run_dir=run_dir, identity=identity)
    assert isinstance(launch, EvalLaunch)
    return launch


def test_verl_eval_runs_validation_only_and_never_points_the_trainer_at_the_checkpoint_dir():
    launch = _verl_eval()
    argv = launch.argv
    assert argv[:3] == ["python", "-m", "verl.trainer.main_ppo"]
    # upstream's validation-only switches (ray_trainer.py:490-496), saving off
    for item in ("trainer.val_before_train=True", "trainer.val_only=True", "trainer.save_freq=-1"):
        assert item in argv
    assert "trainer.save_freq=25" not in argv and "trainer.val_only=False" not in argv
    # nothing the trainer is told to write to lies in the training run's checkpoint directory
    assert not [a for a in argv if "/fsx/s/checkpoints" in a]
    keys = dict(launch.runtime_keys)
    assert keys["trainer.default_local_dir"] == "{eval_dir}"
    assert keys["actor_rollout_ref.model.path"] == "{checkpoint}"
    # each attempt's own directory, and where a run trained before attempts were kept apart wrote
    assert launch.checkpoint_globs == ("/fsx/s/checkpoints/attempt-*/*/global_step_*", "/fsx/s/checkpoints/*/global_step_*")
    assert launch.checkpoint_patterns == ()  # the launcher marks nothing in eval mode
    assert launch.videos == "rollouts/exp1"


FAKE_TRAINER = """#!/bin/bash
# a fake `python` for trainer.sh: records its argv, writes what veRL writes where it is told
printf '%s\\n' "$@" > "$ARGV_OUT"
for a in "$@"; do
  case "$a" in
    # veRL's AutoProcessor.from_pretrained(pretrained_checkpoint) opens preprocessor_config.json there
    actor_rollout_ref.rollout.pretrained_checkpoint=*) p="${a#*=}"
      [ -f "$p/preprocessor_config.json" ] || { echo "OSError: $p does not appear to have a file named preprocessor_config.json" >&2; exit 1; } ;;
    actor_rollout_ref.model.path=*) m="${a#*=}"; echo '{"auto_map": "rewritten"}' > "$m/config.json"; ls "$m" > "$ARGV_OUT.model" ;;
    trainer.default_local_dir=*) d="${a#*=}"; mkdir -p "$d"
      printf '# Log started\\n2026-01-01T00:00:00\\t0\\t{"val/test_score/all": 0.75, "val/test_score/libero_10": 0.75}\\n' > "$d/run_20260101_000000.log" ;;
  esac
done
mkdir -p rollouts/exp1 && echo video > rollouts/exp1/step=0--task=t--success=True--ran=1.mp4
exit "${FAKE_STATUS:-0}"
"""


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(launch: EvalLaunch, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    # the recipe's prepare step (SimpleVLA-RL's checkout has it; it touches the staged model only)
    (Path(launch.workdir) / "examples").mkdir(exist_ok=True)
    (Path(launch.workdir) / "examples" / "overwrite_vla_ckpt_utils.sh").write_text('touch "$1/modeling_prismatic.py"\n')
    fake = bin_dir / "python"
    fake.write_text(FAKE_TRAINER)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "trainer.sh").write_text(launch.script())
    environ = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_OUT": str(tmp_path / "argv"), **env}
    return subprocess.run([BASH, str(tmp_path / "trainer.sh")], env=environ, text=True, capture_output=True, timeout=60)


@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
def test_the_eval_script_takes_the_newest_complete_checkpoint_and_leaves_the_checkpoints_untouched(tmp_path):
    run = tmp_path / "run"
    work = tmp_path / "work"
    work.mkdir()
    for step, complete in ((10, True), (20, True), (30, False)):
        step_dir = run / "checkpoints" / "actor" / f"global_step_{step}"
        step_dir.mkdir(parents=True)
        (step_dir / "model.safetensors").write_text(f"weights {step}")
        if complete:
            (step_dir / COMPLETE_MARKER).write_text(f"{step}\n")
    before = _tree(run / "checkpoints")
    # the model the run trained from: save_checkpoint wrote no processor config into the checkpoints
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "preprocessor_config.json").write_text('{"image_processor_type": "PrismaticImageProcessor"}')
    (tmp_path / "sft" / "dataset_statistics.json").write_text('{"libero_10_no_noops": {}}')
    launch = _verl_eval(run_dir=str(run), model=str(tmp_path / "sft"))
    launch = EvalLaunch(**{**launch.__dict__, "workdir": str(work)})
    result = _run(launch, tmp_path)
    assert result.returncode == 0, result.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    newest = str(run / "checkpoints" / "actor" / "global_step_20")  # 30 is not complete
    # veRL rewrites its model folder's config.json and upstream's prepare step copies code into it:
    # both happen to a copy of the checkpoint (the prepare step ran on it), removed afterwards
    assert f"actor_rollout_ref.model.path={run}/eval/step-20/model/global_step_20" in argv
    assert (tmp_path / "argv.model").read_text().split() == ["config.json", "dataset_statistics.json", "model.safetensors", "modeling_prismatic.py", "preprocessor_config.json"]
    assert not (run / "eval" / "step-20" / "model").exists()
    assert f"trainer.default_local_dir={run}/eval/step-20" in argv
    assert _tree(run / "checkpoints") == before
    summary = json.loads((run / "eval" / "step-20" / "eval.json").read_text())
    assert summary["step"] == 20 and summary["status"] == 0 and summary["checkpoint"] == newest
    assert summary["metrics"]["val/test_score/all"] == 0.75
    assert summary["videos"] == ["videos/step=0--task=t--success=True--ran=1.mp4"]


@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
def test_the_eval_script_takes_the_newest_attempts_newest_checkpoint_not_a_higher_step_of_an_earlier_attempt(tmp_path):
    run = tmp_path / "run"
    (tmp_path / "work").mkdir()
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "preprocessor_config.json").write_text("{}")
    for folder in ("actor/global_step_75", "attempt-1/actor/global_step_50", "attempt-2/actor/global_step_25", "attempt-2/actor/global_step_30"):
        d = run / "checkpoints" / folder
        d.mkdir(parents=True)
        (d / COMPLETE_MARKER).write_text("x")
    (run / "checkpoints" / "attempt-2" / "actor" / "global_step_30" / COMPLETE_MARKER).unlink()  # cut off
    launch = _verl_eval(run_dir=str(run), model=str(tmp_path / "sft"))
    result = _run(EvalLaunch(**{**launch.__dict__, "workdir": str(tmp_path / "work")}), tmp_path)
    assert result.returncode == 0, result.stderr
    # its own folder: an earlier attempt's step 25 would be another model
    assert json.loads((run / "eval" / "attempt-2-step-25" / "eval.json").read_text())["checkpoint"] == f"{run}/checkpoints/attempt-2/actor/global_step_25"
    # a name: that step of the newest attempt holding it (here the one trained before attempts)
    named = _verl_eval("global_step_75", run_dir=str(run), model=str(tmp_path / "sft"))
    result = _run(EvalLaunch(**{**named.__dict__, "workdir": str(tmp_path / "work")}), tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((run / "eval" / "step-75" / "eval.json").read_text())["checkpoint"] == f"{run}/checkpoints/actor/global_step_75"


@pytest.mark.skipif(BASH is None, reason="bash runs the rendered script")
def test_the_eval_script_takes_the_named_checkpoint_and_fails_clearly_without_one(tmp_path):
    run = tmp_path / "run"
    (tmp_path / "work").mkdir()
    for step in (10, 20):
        d = run / "checkpoints" / "actor" / f"global_step_{step}"
        d.mkdir(parents=True)
        (d / COMPLETE_MARKER).write_text("x")
    (tmp_path / "sft").mkdir()
    launch = _verl_eval("global_step_10", run_dir=str(run), model=str(tmp_path / "sft"))
    # neither the checkpoint nor the model the run trained from holds the processor's config
    result = _run(EvalLaunch(**{**launch.__dict__, "workdir": str(tmp_path / "work")}), tmp_path)
    assert result.returncode == MODEL_FILE_MISSING == exit_codes.MODEL_FILE_MISSING == 97, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "has no preprocessor_config.json, which the evaluation loads from it" in line and line.endswith("(exit 97)")
    assert not (tmp_path / "argv").exists()  # the trainer never started
    (tmp_path / "sft" / "preprocessor_config.json").write_text("{}")
    result = _run(EvalLaunch(**{**launch.__dict__, "workdir": str(tmp_path / "work")}), tmp_path, FAKE_STATUS="3")
    assert result.returncode == 3  # the trainer's status
    assert json.loads((run / "eval" / "step-10" / "eval.json").read_text())["status"] == 3
    missing = _verl_eval("global_step_99", run_dir=str(run))
    result = _run(EvalLaunch(**{**missing.__dict__, "workdir": str(tmp_path / "work")}), tmp_path)
    assert result.returncode == NO_CHECKPOINT == exit_codes.NO_CHECKPOINT
    assert "no complete checkpoint named global_step_99" in result.stderr
    # checkpoints recorded for another model are not evaluated
    (run / ".rlinf-eks").mkdir()
    (run / ".rlinf-eks" / "run-identity").write_text("verl-ppo ppo_trainer model=hf://Other/Model\n")
    result = _run(EvalLaunch(**{**launch.__dict__, "workdir": str(tmp_path / "work")}), tmp_path)
    assert result.returncode == RUN_MISMATCH == exit_codes.RUN_MISMATCH
    assert "holds the checkpoints of another run (verl-ppo ppo_trainer model=hf://Other/Model)" in result.stderr
    (run / ".rlinf-eks" / "run-identity").write_text("verl-ppo ppo_trainer model=m\n")
    assert _run(EvalLaunch(**{**launch.__dict__, "workdir": str(tmp_path / "work")}), tmp_path, FAKE_STATUS="0").returncode == 0


def _objects(plan, kind: str) -> list[dict]:
    return [m for m in plan.manifests().values() if m.get("kind") == kind]


def _pod_spec(obj: dict) -> dict:
    if obj["kind"] == "JobSet":
        return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def test_multi_node_eval_plan_renders_an_evaluation_jobset_on_the_newest_complete_checkpoint():
    train, evaluation = plan_stack("multi-node"), plan_stack("multi-node", "workload.mode=eval")
    (train_run,) = _objects(train, "JobSet")
    (eval_run,) = _objects(evaluation, "JobSet")
    assert train_run["metadata"]["name"] == "training" and eval_run["metadata"]["name"] == "evaluation"
    # the same Kueue queue and priority, the same pods (shape, image, resources)
    queue = "kueue.x-k8s.io/queue-name"
    assert eval_run["metadata"]["labels"][queue] == train_run["metadata"]["labels"][queue]
    assert eval_run["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == train_run["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    train_ray = next(c for c in _pod_spec(train_run)["containers"] if c["name"] == "ray")
    eval_ray = next(c for c in _pod_spec(eval_run)["containers"] if c["name"] == "ray")
    assert eval_ray["resources"] == train_ray["resources"] and eval_ray["image"] == train_ray["image"]
    assert _pod_spec(eval_run)["nodeSelector"] == _pod_spec(train_run)["nodeSelector"]
    assert eval_run["spec"]["replicatedJobs"][0]["replicas"] == train_run["spec"]["replicatedJobs"][0]["replicas"]
    assert eval_run["metadata"]["annotations"]["rlinf-eks/eval-checkpoint"] == "newest-complete-checkpoint"
    (config_map,) = [m for m in _objects(evaluation, "ConfigMap") if m["metadata"]["name"] == "rlinf-launch"]
    script = config_map["data"]["trainer.sh"]
    # RLinf's evaluation entry point on the actor weights of the newest complete checkpoint
    assert "python evaluations/eval_embodied_agent.py" in script
    assert 'runner.ckpt_path="${model}/actor/model_state_dict/full_weights.pt"' in script
    assert 'model="$ckpt"' in script and "cp -R" not in script  # RLinf only reads the checkpoint
    assert "for d in /fsx/multi-node/logs/rlinf/checkpoints/global_step_*;" in script
    assert "EVAL_DIR=/fsx/multi-node/eval/\"$attempt\"step-" in script and 'runner.logger.log_path="${EVAL_DIR}"' in script
    assert "runner.logger.log_path=/fsx/multi-node/logs" not in script
    # the launcher marks no checkpoint in eval mode (its final pass would mark partial saves), and
    # keeps its own state (run identity, last failure) beside the evaluations
    assert "CHECKPOINT_PATTERNS=''" in config_map["data"]["launch.sh"]
    assert "\nRUN_DIR=/fsx/multi-node/eval\n" in config_map["data"]["launch.sh"]
    # the training run's identity is checked, read only
    assert "if [ -f /fsx/multi-node/.rlinf-eks/run-identity ] && [ \"$(cat /fsx/multi-node/.rlinf-eks/run-identity)\" != 'rlinf-embodied maniskill_ppo_openvlaoft" in script


def test_kuberay_eval_plan_names_its_rayjob_and_keeps_the_queue():
    train, evaluation = plan_stack("multi-node-kuberay"), plan_stack("multi-node-kuberay", "workload.mode=eval", "workload.eval.checkpoint=global_step_39")
    (train_job,) = _objects(train, "RayJob")
    (eval_job,) = _objects(evaluation, "RayJob")
    assert eval_job["metadata"]["name"] == "rlinf-evaluation"
    assert eval_job["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") == train_job["metadata"]["labels"].get("kueue.x-k8s.io/queue-name")
    assert eval_job["metadata"]["annotations"]["rlinf-eks/eval-checkpoint"] == "global_step_39"


def test_the_evaluation_scripts_pass_shellcheck(tmp_path):
    from tests.test_shellcheck import shellcheck

    files = {}
    for stack, sets in (("single-node", ()), ("multi-node", ()), ("multi-node-kuberay", ("workload.eval.checkpoint=/fsx/x/global_step_3",))):
        plan = plan_stack(stack, "workload.mode=eval", *sets)
        (config_map,) = [m for m in _objects(plan, "ConfigMap") if m["metadata"]["name"] == "rlinf-launch"]
        files[f"{stack}/trainer.sh"] = ("sh", config_map["data"]["trainer.sh"])
    assert "python -m verl.trainer.main_ppo" in files["single-node/trainer.sh"][1]
    assert shellcheck(files, tmp_path) == []


def test_the_plan_faults_section_describes_the_evaluation():
    from rlinf_eks.offline.outputs.resilience import render

    s = settings(workload={"image": "x.io/r:1", "mode": "eval", "eval": {"checkpoint": "global_step_24"}})
    text = render(s, "solo")
    assert "evaluation (workload.mode eval): the dialect's upstream evaluation of checkpoint global_step_24, read only" in text
    assert "resume:" not in text
    assert "no complete checkpoint: exit 95" in text
    # veRL-PPO's evaluation loads preprocessor_config.json from the checkpoint, which has none
    assert "evaluation: preprocessor_config.json, which the evaluation loads from the checkpoint, is copied from the model" in text
    assert "when neither has it, the pod stops before the trainer starts (exit 97, one line naming it)" in text
    assert "resume: none" in render(settings(), "solo")
    embodied = render(settings(workload={"image": "x.io/r:1", "mode": "eval", "trainer": {"dialect": "rlinf-embodied"}}), "solo")
    assert "no complete checkpoint: exit 95" in embodied and "exit 97" not in embodied  # it loads nothing beside the checkpoint


@pytest.mark.filterwarnings("ignore:.*Defaults list is missing `_self_`")
@pytest.mark.filterwarnings("ignore::hydra.errors.Hydra14MigrationWarning")
@pytest.mark.parametrize(
    "dialect, config_name",
    [("verl-ppo", "ppo_trainer"), ("rlinf-embodied", "maniskill_ppo_openvlaoft"), ("rlinf-embodied", "libero_10_grpo_openvlaoft")],
)
def test_the_evaluation_command_composes_against_the_upstream_config(dialect, config_name, monkeypatch, reference_trainers):
    """Every key the evaluation sets exists in the upstream config (Hydra refuses an unknown key),
    and the composed config evaluates only: no saving, the checkpoint and the eval directory."""
    from tests.test_trainers import EMBODIED_DIR, VERL_DIR, _compose, overrides_of

    s = settings(workload={"image": "x.io/r:1", "mode": "eval", "trainer": {"dialect": dialect, "configName": config_name}}, gpuNodes={"nodeCount": 1})
    launch = launch_for(s, nnodes=1, gpus_per_node=8, log_dir="/fsx/s/logs", checkpoint_dir="/fsx/s/checkpoints", inputs_root="/m", run_dir="/fsx/s")
    assert isinstance(launch, EvalLaunch)
    runtime = [f"{key}={value.replace('{checkpoint}', '/fsx/s/logs/checkpoints/global_step_9').replace('{eval_dir}', '/fsx/s/eval/step-9')}" for key, value in launch.runtime_keys]
    where = {"verl-ppo": (VERL_DIR, None), "rlinf-embodied": (EMBODIED_DIR / "config", "1.1")}
    cfg = _compose(*where[dialect][:1], config_name, overrides_of(launch.argv) + runtime, where[dialect][1], monkeypatch)
    if dialect == "verl-ppo":
        assert cfg.trainer.val_only is True and cfg.trainer.val_before_train is True and cfg.trainer.save_freq == -1
        assert cfg.trainer.default_local_dir == "/fsx/s/eval/step-9"
        assert cfg.actor_rollout_ref.model.path == "/fsx/s/logs/checkpoints/global_step_9"
    else:
        assert launch.argv[1] == "evaluations/eval_embodied_agent.py"
        assert cfg.runner.only_eval is True and cfg.runner.save_interval == -1
        assert cfg.runner.ckpt_path == "/fsx/s/logs/checkpoints/global_step_9/actor/model_state_dict/full_weights.pt"
        assert cfg.runner.logger.log_path == "/fsx/s/eval/step-9"
        assert cfg.env.eval.video_cfg.save_video is True and cfg.env.eval.video_cfg.video_base_dir == "/fsx/s/eval/step-9/video/eval"
