"""GPU memory fits (issue 52, item 5): the per-GPU need of a recipe config at the rendered sequence
length, micro batch and gradient checkpointing, from the figures in trainers/gpu_memory.yaml; a GPU
type a figure says the run does not fit is refused at plan time naming the keys that fix it; a run
no figure covers says "not measured"; autoscaled (p4d.24xlarge, A100 40 GB) is made to fit."""

from __future__ import annotations

import pytest

from rlinf_eks import catalog
from rlinf_eks.__main__ import main
from rlinf_eks import gpu_memory as gpu_memory_module
from rlinf_eks.gpu_memory import Figure, figures, gpu_memory, gpu_memory_problems, model_state_gib, render
from rlinf_eks.trainers import DIALECTS
from rlinf_eks.trainers.recipe import recipe_of
from tests.harness import plan_stack, settings

GC = "actor.fsdp_config.gradient_checkpointing"


def reasoning(*overrides: str, **gpu):
    workload = {"image": "x/y:1", "trainer": {"dialect": "rlinf-reasoning", "overrides": list(overrides)},
                "rollout": {"backend": "vllm", "tensorParallelSize": 2}}
    return settings(gpuNodes=gpu, workload=workload)


def test_every_figure_names_a_known_recipe_config_and_its_settings():
    assert figures(), "trainers/gpu_memory.yaml holds the issue's measurements"
    for figure in figures():
        dialect, _, config = figure.recipe.partition("/")
        assert dialect in DIALECTS and config in recipe_of(dialect).models, figure.recipe
        assert figure.oom == (figure.peak_gib is None), figure
        assert figure.seq_length > 0 and figure.micro_batch > 0 and figure.gpu and figure.source


def test_the_fsdp_share_of_the_model_state_is_weights_gradients_and_adam_over_the_actor_s_gpus():
    model = recipe_of("rlinf-reasoning").models["qwen2.5-1.5b-grpo-fsdp"]
    # fp32: 4 bytes of weight, 4 of gradient, 8 of Adam moments a parameter, over 16 GPUs
    assert model_state_gib(model, 16) == pytest.approx(16 * 1777088000 / 16 / 2**30)


def test_the_nearest_figure_at_or_above_the_run_s_sequence_length_bounds_its_need():
    at_8192 = gpu_memory(reasoning(f"{GC}=True", "runner.seq_length=8192"))
    # RLinf's own FSDPActor.training_step measured 14.05 GiB (bench/RESULTS-gpu.md), issue 52's plain model 19.3
    assert at_8192["figure"]["seqLength"] == 8192 and at_8192["figure"]["peakGiB"] == 14.05
    assert at_8192["needGiB"] == pytest.approx(14.05 + 16 * 1777088000 / 8 / 2**30, abs=0.1)
    at_10000 = gpu_memory(reasoning(f"{GC}=True", "runner.seq_length=10000"))
    assert at_10000["figure"]["seqLength"] == 18432 and at_10000["verdict"] == "fits"
    longer = gpu_memory(reasoning(f"{GC}=True", "runner.seq_length=32768"))
    assert longer["verdict"] == "not measured" and "sequence length >= 32768" in longer["reason"]


def test_an_out_of_memory_figure_refuses_gpus_no_larger_and_leaves_larger_ones_not_measured():
    (line,) = gpu_memory_problems(reasoning())  # p5.48xlarge, 18432 tokens, gradient checkpointing off: OOM on an 80 GB H100
    assert line.startswith("gpuNodes.instanceType='p5.48xlarge': rlinf-reasoning/qwen2.5-1.5b-grpo-fsdp at runner.seq_length=18432")
    assert f"turn on gradient checkpointing ({GC}=true in workload.trainer.overrides)" in line
    assert "lower the sequence length (runner.seq_length=18432, the default of qwen2.5-1.5b-grpo-fsdp)" in line
    h200 = gpu_memory(reasoning(instanceType="p5en.48xlarge"))
    assert h200["verdict"] == "not measured" and gpu_memory_problems(reasoning(instanceType="p5en.48xlarge")) == []
    assert "not measured" in render(h200)


def test_an_out_of_memory_figure_at_a_longer_sequence_never_refuses_a_shorter_run():
    # 18432 tokens without gradient checkpointing ran out of memory on an H100; 8192 needed 35.5 GiB.
    # At 12000 tokens nothing was measured: running out at a longer sequence says nothing of it.
    s = reasoning("runner.seq_length=12000")
    report = gpu_memory(s)
    assert report["verdict"] == "not measured" and "sequence length >= 12000" in report["reason"]
    assert gpu_memory_problems(s) == []


def test_a_measured_need_above_the_gpu_names_the_types_that_hold_it():
    (line,) = gpu_memory_problems(reasoning(f"{GC}=True", instanceType="p4d.24xlarge", nodeCount=2))
    assert "needs 39.8 GiB a GPU (38.18 GiB measured at 18432 tokens + 1.66 GiB of model state over 16 GPUs)" in line
    assert "(trainers/gpu_memory.yaml, bench/RESULTS-gpu.md)" in line
    # the 8-GPU types whose GPUs hold it, the catalog's newer ones among them (L40S 48 GB, RTX PRO 6000, B300)
    assert "gpuNodes.instanceType: g6e.48xlarge, g7e.48xlarge, p4de.24xlarge, p5.48xlarge" in line and "p6-b300.48xlarge" in line
    assert "turn on gradient checkpointing" not in line  # already on


def test_a_config_without_memory_keys_is_not_measured_never_guessed():
    report = gpu_memory(settings())  # verl-ppo
    assert report["verdict"] == "not measured" and "needGiB" not in report and gpu_memory_problems(settings()) == []


def test_autoscaled_fits_its_a100s_by_the_recorded_measurement():
    report = plan_stack("autoscaled").to_json()["gpuMemory"]
    assert report["verdict"] == "fits"
    assert report["settings"]["gradientCheckpointing"]["value"] is True and report["settings"]["seqLength"]["value"] == 8192
    assert report["needGiB"] <= catalog.CATALOG["p4d.24xlarge"].gpu_memory_gib * 0.92


def test_plan_refuses_autoscaled_without_its_memory_overrides_naming_the_keys(tmp_path, capsys):
    assert main(["plan", "autoscaled", "--quiet", "--out", str(tmp_path / "a"), "--unset", "workload.trainer.overrides"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "gpuNodes.instanceType='p4d.24xlarge'" in err and GC in err and "runner.seq_length=18432" in err
    assert not (tmp_path / "a").exists()  # refused before anything is written


def test_plan_refuses_the_reasoning_config_s_default_on_h100_and_accepts_it_with_gradient_checkpointing(tmp_path, capsys):
    argv = ["plan", "vllm-rollout", "--out", str(tmp_path / "v")]
    assert main([*argv, "--quiet", "--unset", "workload.trainer.overrides"]) == 2
    assert "ran out of memory on an NVIDIA H100 80GB HBM3 at 18432 tokens (trainers/gpu_memory.yaml, bench/RESULTS-gpu.md)" in capsys.readouterr().err
    # the plan's GPU memory lines (without --quiet, which prints the five-line summary only)
    assert main(argv) == 0
    assert "GPU memory (fits, rlinf-reasoning/qwen2.5-1.5b-grpo-fsdp on H100 80 GiB (p5.48xlarge)):" in capsys.readouterr().out


@pytest.mark.parametrize("stack, peak", [("vllm-rollout", 38.18), ("autoscaled", 14.05)])
def test_the_printed_plan_names_the_figure_rlinf_s_own_code_measured(stack, peak, tmp_path, capsys):
    assert main(["plan", stack, "--out", str(tmp_path / stack)]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("GPU memory ("):].splitlines()[:4]
    assert f"measured {peak:g} GiB at " in lines[2], lines
    assert lines[3] == "  figure bench/RESULTS-gpu.md, 2026-12-06, measured with the trainer's own code on an NVIDIA H100 80GB HBM3", lines


def _figure(peak: float, *, trainer_code: bool, date: str) -> Figure:
    return Figure("rlinf-reasoning/qwen2.5-1.5b-grpo-fsdp", 8192, 1, True, peak, False, "NVIDIA H100 80GB HBM3",
                  "here", "", True, trainer_code=trainer_code, date=date)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_a_figure_of_the_trainer_s_own_code_is_preferred_then_the_newest(order, monkeypatch):
    """At the same settings: the trainer's own code's figure over a newer one that is not, and of
    two alike the newest, whatever their order in the file."""
    candidates = [_figure(10.0, trainer_code=True, date="2026-12-06"), _figure(20.0, trainer_code=False, date="2026-12-07"),
                  _figure(30.0, trainer_code=True, date="2026-12-01")]
    monkeypatch.setattr(gpu_memory_module, "figures", lambda: tuple(candidates[i] for i in order))
    report = gpu_memory(reasoning(f"{GC}=True", "runner.seq_length=8192"))
    assert report["figure"]["peakGiB"] == 10.0 and report["figure"]["trainerCode"] is True and report["figure"]["date"] == "2026-12-06"
    candidates[0] = _figure(10.0, trainer_code=False, date="2026-12-06")
    assert gpu_memory(reasoning(f"{GC}=True", "runner.seq_length=8192"))["figure"]["peakGiB"] == 30.0
