"""Every run starts, and its checkpoints land where they are found: for every stack (and the
variants other tests plan), the trainer's Hydra config is composed from the RENDERED command (the
launch ConfigMap's trainer.sh) against the upstream configs (../shared/reference/trainers), and
what the trainer does at startup is read from the composed config the way the upstream code reads
it (file:line below): where it writes its checkpoints and logs, and whether its rollout refuses the
environment the pods give it.

Upstream, at the pinned commits (RLinf 0505431, SimpleVLA-RL 7c51662, vLLM 0.8.5):
- RLinf reasoning ``_save_checkpoint``: ``join(runner.output_dir, runner.experiment_name,
  "checkpoints/global_step_N")`` (rlinf/runners/reasoning_runner.py:359-364);
- RLinf embodied ``_save_checkpoint``: ``join(runner.logger.log_path, runner.logger.experiment_name,
  "checkpoints/global_step_N")`` (rlinf/runners/embodied_runner.py:643-652);
- veRL (SimpleVLA-RL): ``join(trainer.default_local_dir, "actor", "global_step_N")``
  (verl/trainer/ppo/ray_trainer.py:689-693);
- RLinf starts vLLM with ``enable_sleep_mode=True`` whatever the config says
  (rlinf/workers/rollout/vllm/vllm_worker.py:349); vLLM 0.8.5 then loads the model through
  ``CuMemAllocator`` (vllm/v1/worker/gpu_worker.py:151-157), whose constructor asserts
  ``"expandable_segments:True" not in PYTORCH_CUDA_ALLOC_CONF`` (vllm/device_allocator/cumem.py:144-149).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
import yaml

from rlinf_eks.__main__ import main
from tests.harness import EXPERIMENT_STACKS, STACKS, manifests, plan_stack, settings
from tests.test_trainers import EMBODIED_DIR, REASONING_DIR, VERL_DIR, _compose, needs_reference, overrides_of
from tests.test_trainers import reference_trainers  # noqa: F401 (the fixture needs_reference uses)

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*Defaults list is missing `_self_`"),
    pytest.mark.filterwarnings("ignore::hydra.errors.Hydra14MigrationWarning"),
]

VARIANTS = [
    *[(stack,) for stack in STACKS + EXPERIMENT_STACKS],
    # variants other tests plan: another run directory, the launchers' other forms, a user's input
    ("vllm-rollout", "workload.runName=second"),
    ("vllm-rollout", "workload.inputs.dataset=s3://acme-data/math/train.jsonl"),
    ("multi-node", "workload.restart.maxRestarts=0"),
    ("multi-node-kuberay", "workload.rayjob.cluster=selector"),
    ("single-node", "storage.bucketName=rlinf-checkpoints-0123"),
]
IDS = ["+".join(v) for v in VARIANTS]

ALLOC = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"
STEP = 7


@dataclass
class Rendered:
    """What the plan's manifests say about the run."""

    entry: str
    config_name: str
    overrides: list[str]
    run_dir: str
    patterns: list[str]
    """The launcher's completeness-marker patterns (CHECKPOINT_PATTERNS of launch.sh or driver.sh)."""
    resume_globs: list[str]
    """trainer.sh's ``for d in ...`` list, as the shell splits it (empty: the trainer cannot resume)."""
    resume_key: str


def _launch_data(docs: dict[str, dict[str, Any]]) -> dict[str, str]:
    found = [doc["data"] for name, doc in docs.items() if name.startswith("configmap-") and "trainer.sh" in (doc.get("data") or {})]
    assert len(found) == 1, "one launch ConfigMap with trainer.sh"
    return found[0]


def rendered(plan: Any) -> Rendered:
    docs = manifests(plan)
    data = _launch_data(docs)
    trainer = data["trainer.sh"]
    exec_line = next(line for line in trainer.splitlines() if line.startswith("exec "))
    argv = [word for word in shlex.split(exec_line)[1:] if word != "$@"]
    launcher = data.get("launch.sh") or data["driver.sh"]
    match = re.search(r"^CHECKPOINT_PATTERNS=('[^']*'|\S+)$", launcher, re.M)
    assert match, "the launcher names the checkpoint patterns it marks"
    patterns = shlex.split(match.group(1))[0].split("\n")
    # the resume's search for the newest complete checkpoint (not verl-ppo's search for its next attempt)
    loop = re.search(r"latest=\$\(for d in (.*?); do", trainer)
    resume = re.search(r"set -- (\S+?)=", trainer)
    run_dirs = {value for name, value in env_settings(docs) if name == "RLINF_RUN_DIR"}
    assert len(run_dirs) == 1, run_dirs
    return Rendered(
        entry=argv[1] if argv[1] != "-m" else argv[2],
        # verl's main_ppo defaults to ppo_trainer (its @hydra.main)
        config_name=argv[argv.index("--config-name") + 1] if "--config-name" in argv else "ppo_trainer",
        overrides=overrides_of(argv),
        run_dir=run_dirs.pop(),
        patterns=patterns,
        resume_globs=shlex.split(loop.group(1)) if loop else [],
        resume_key=shlex.split(resume.group(1))[0] if resume else "",
    )


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def env_settings(docs: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Every (name, value) a pod or a Ray job is given: containers' env lists (every pod template of
    every object) and the RayJob's runtime env."""
    found = []
    for doc in docs.values():
        for node in _walk(doc):
            if isinstance(node, dict) and isinstance(node.get("env"), list):
                found += [(item["name"], item.get("value")) for item in node["env"] if isinstance(item, dict) and "name" in item]
            if isinstance(node, dict) and isinstance(node.get("runtimeEnvYAML"), str):
                env_vars = (yaml.safe_load(node["runtimeEnvYAML"]) or {}).get("env_vars") or {}
                found += [(str(k), str(v)) for k, v in env_vars.items()]
    return found


def exported(docs: dict[str, dict[str, Any]], name: str) -> list[str]:
    """Every script line (ConfigMap data, a container's command or args, a RayJob's entrypoint)
    that assigns ``name``."""
    assign = re.compile(rf"(^|[\s;&|(]){name}=")
    return [line for doc in docs.values() for node in _walk(doc) if isinstance(node, str) for line in node.splitlines() if assign.search(line)]


def compose(r: Rendered, monkeypatch, overrides: list[str] | None = None) -> Any:
    """The trainer's config as Hydra composes it from the rendered command (``overrides``: instead
    of the rendered ones)."""
    if r.entry.endswith("main_grpo.py"):
        where, version_base = REASONING_DIR, "1.1"
    elif r.entry.endswith("train_embodied_agent.py"):
        where, version_base = EMBODIED_DIR / "config", "1.1"
    else:
        where, version_base = VERL_DIR, None
    return _compose(where, r.config_name, r.overrides if overrides is None else overrides, version_base, monkeypatch)


def written_checkpoint(r: Rendered, cfg: Any) -> str:
    """Where the trainer writes checkpoint STEP, as its upstream code joins the path (module doc)."""
    if r.entry.endswith("main_grpo.py"):
        return os.path.join(cfg.runner.output_dir, cfg.runner.experiment_name, f"checkpoints/global_step_{STEP}")
    if r.entry.endswith("train_embodied_agent.py"):
        return os.path.join(cfg.runner.logger.log_path, cfg.runner.logger.experiment_name, f"checkpoints/global_step_{STEP}")
    return os.path.join(cfg.trainer.default_local_dir, "actor", f"global_step_{STEP}")


def written_logs(r: Rendered, cfg: Any) -> str:
    """Where the trainer's metric logger writes (RLinf: logger.log_path, metric_logger.py:41-46;
    veRL's LocalLogger: default_local_dir, ray_trainer.py:476-480)."""
    if r.entry.endswith(("main_grpo.py", "train_embodied_agent.py")):
        return cfg.runner.logger.log_path
    return cfg.trainer.default_local_dir


def matches(path: str, pattern: str) -> bool:
    """``glob.glob(pattern)`` would find ``path``: segment by segment, ``*`` never crossing a ``/``."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted))


def _plan(variant: tuple[str, ...]) -> Any:
    return plan_stack(*variant)


@needs_reference
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_the_trainer_writes_its_checkpoints_in_the_run_directory_where_the_launcher_marks_and_resumes_them(variant, monkeypatch):
    r = rendered(_plan(variant))
    cfg = compose(r, monkeypatch)
    checkpoint = written_checkpoint(r, cfg)
    assert os.path.isabs(checkpoint), f"{checkpoint}: relative to each writing process's working directory, on no shared volume"
    assert checkpoint.startswith(r.run_dir.rstrip("/") + "/"), f"{checkpoint} is outside the run directory {r.run_dir} (synced, restored, evaluated)"
    assert [p for p in r.patterns if matches(checkpoint, p)], f"{checkpoint}: no completeness-marker pattern finds it ({r.patterns})"
    if r.resume_globs:  # the trainer can resume: the launcher looks where it writes, and the key takes it
        assert [g for g in r.resume_globs if matches(checkpoint, g)], f"{checkpoint}: resume looks in {r.resume_globs}"
        assert all([p for p in r.patterns if matches(g, p)] for g in r.resume_globs), "resume looks only where the launcher marks"
        resumed = compose(r, monkeypatch, [*r.overrides, f"{r.resume_key}={checkpoint}"])
        assert os.path.basename(str(_get(resumed, r.resume_key))) == f"global_step_{STEP}"
    logs = written_logs(r, cfg)
    assert os.path.isabs(logs) and logs.startswith(r.run_dir.rstrip("/") + "/"), f"logs at {logs}, outside {r.run_dir}"


def _get(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = cfg[part]
    return cfg


@needs_reference
@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_a_vllm_rollout_in_sleep_mode_gets_no_expandable_segments_from_anywhere(variant, monkeypatch):
    """RLinf's vLLM rollout always runs in sleep mode, and vLLM 0.8.5's allocator asserts
    expandable segments are off: the variable is absent from the pods, the RayJob's runtime env and
    every script. Elsewhere the pods set it only where upstream's run script does (SimpleVLA-RL's;
    RLinf's embodied scripts set none, and its same-GPU CUDA IPC would need CAP_SYS_PTRACE with it)."""
    plan = _plan(variant)
    r = rendered(plan)
    cfg = compose(r, monkeypatch)
    docs = manifests(plan)
    given = [value for name, value in env_settings(docs) if name == ALLOC]
    sleep_mode = r.entry.endswith("main_grpo.py") and cfg.rollout.rollout_backend == "vllm"
    if sleep_mode:
        assert not [v for v in given if EXPANDABLE in (v or "")], f"{ALLOC}={given}: vLLM's CuMemAllocator asserts at the rollout's start"
        assert not [line for line in exported(docs, ALLOC) if EXPANDABLE in line], "a script sets it"
        assert not [v for k, v in plan.settings.workload.env.items() if k == ALLOC and EXPANDABLE in v]
    elif r.entry.endswith("train_embodied_agent.py"):
        assert not given, f"{ALLOC}={given}: run_embodiment.sh sets none"
    else:
        assert given and all(v == EXPANDABLE for v in given), f"{ALLOC}: the upstream run script's setting ({given})"


# --- refused at plan time -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [EXPANDABLE, f"max_split_size_mb:512,{EXPANDABLE}"])
def test_a_users_expandable_segments_on_a_vllm_stack_is_refused_at_plan_time(tmp_path, capsys, value):
    out = tmp_path / "out"
    assert main(["plan", "vllm-rollout", "--quiet", "--out", str(out), "--set", f"workload.env.{ALLOC}={value}"]) == 2
    err = capsys.readouterr().err
    assert f"workload.env.{ALLOC}={value!r}" in err or f"workload.env.{ALLOC}={value}" in err, err
    assert "enable_sleep_mode=True" in err and "vllm/device_allocator/cumem.py:144-149" in err and "vllm_worker.py:349" in err
    assert "Traceback" not in err and not out.exists()


def test_the_same_setting_is_accepted_where_nothing_allocates_through_vllms_pool():
    for dialect, backend in (("rlinf-embodied", "hf"), ("verl-ppo", "hf"), ("rlinf-reasoning", "sglang")):
        s = settings(
            workload={"image": "x/y:1", "trainer": {"dialect": dialect}, "rollout": {"backend": backend, "tensorParallelSize": 1}, "env": {ALLOC: EXPANDABLE}}
        )
        assert s.workload.env[ALLOC] == EXPANDABLE
    # and without it a vLLM stack plans
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-reasoning"}, "rollout": {"backend": "vllm"}, "env": {ALLOC: "max_split_size_mb:512"}})
    assert s.workload.env[ALLOC] == "max_split_size_mb:512"


def test_the_startup_facts_cite_their_upstream_file_and_line():
    from rlinf_eks.trainers import DIALECTS, recipe_of

    cited = re.compile(r"[\w./-]+\.(py|sh|yaml):\d+(-\d+)?")
    for name in DIALECTS:
        facts = recipe_of(name).startup
        for what in (facts.checkpoints, facts.logs, *([facts.resume] if facts.resume else []), *([facts.logged_step] if facts.logged_step.offset else [])):
            assert cited.search(what.source), f"{name}: {what}"
        for sets, refuses in facts.environment.values():
            for item in (*sets, *refuses):
                assert cited.search(item.source), f"{name}: {item}"


@pytest.mark.parametrize(
    "stack, override, setting",
    [
        ("vllm-rollout", "runner.output_dir=../results", "workload.runName"),
        ("vllm-rollout", "runner.output_dir=/fsx/elsewhere", "workload.runName"),
        ("multi-node", "runner.logger.log_path=logs", "workload.runName"),
        ("single-node", "trainer.default_local_dir=checkpoints/libero", "workload.runName"),
        ("multi-node", "runner.logger.experiment_name=other", "workload.trainer.experimentName"),
    ],
)
def test_an_override_of_where_the_trainer_writes_is_refused_at_plan_time_naming_the_setting(tmp_path, capsys, stack, override, setting):
    """The keys the recipe's startup facts set (runner.output_dir included, which decides where the
    reasoning runner writes its checkpoints) are the stack's: an override would send the
    checkpoints where no marker, resume, sync or evaluation looks."""
    out = tmp_path / "out"
    assert main(["plan", stack, "--quiet", "--out", str(out), "--set", f"workload.trainer.overrides[0]={override}"]) == 2
    err = capsys.readouterr().err
    key = override.split("=", 1)[0]
    assert f"workload.trainer.overrides[0]='{override}': {key} is generated from {setting}" in err, err
    assert "Traceback" not in err and not out.exists()
