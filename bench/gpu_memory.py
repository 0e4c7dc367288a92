"""GPU memory of one actor training step, measured with the trainer's own code.

Not a test (CI has no GPU): three steps, two machines, like ``bench/gpu_proof.py``.

1. ``python bench/gpu_memory.py render`` (here, with the project installed): plans each stack whose
   recipe family is measured here (``STACKS``) and writes ``build/gpu-memory/cases.json``: the
   trainer's config and its rendered Hydra overrides (read from the stack's own config check), the
   pod's allocator setting, the actor's GPU count, the model's shape (``MODEL_SHAPES``, by the
   stack's ``workload.model.source``), and the cases: the rendered sequence length and
   ``LOWER_SEQ_LENGTH``, each with and without gradient checkpointing.
2. ``python bench/gpu_memory.py run --cases build/gpu-memory/cases.json --rlinf DIR --out OUT`` (on
   a GPU machine with the rlinf-gpu-kit installed, RLinf's source at DIR): each case in a process of
   its own, one GPU, random weights. The step is RLinf's: its ``FSDPActor`` (the Ray ``Worker``
   base's constructor replaced by one that sets rank 0 of 1), its ``FSDPModelManager`` building
   the FSDP model, AdamW, grad scaler and autocast context from the composed config, and its
   ``training_step`` (forward, log-probs and entropy from the logits, the GRPO policy loss,
   backward, the optimizer step) over a mini-batch of two micro-batches (the second accumulates
   gradients as the others of a real mini-batch do). What differs from the trainer, each said in
   the record: weights drawn at random from the model's config instead of read from the checkpoint;
   attention through PyTorch SDPA instead of flash-attn 2 (not installed on the GPU machine; both
   keep attention's memory linear in the sequence); flash-attn's log-prob kernel from its own
   source file (``flash_attn/ops/triton/cross_entropy.py``, Triton, carried without the package's
   CUDA extension); the actor alone on the GPU (the trainer offloads it while the rollout runs).
   Peak memory is ``torch.cuda.max_memory_allocated`` over the step; the model's own state
   (fp32 weights, gradients, Adam's two moments) is what stays allocated after it.
3. ``python bench/gpu_memory.py record OUT --date D --machine M`` (here): the figures into
   ``bench/RESULTS-gpu.md`` (its memory section) and ``components/trainers/gpu_memory.yaml``.

One GPU holds the whole model state (FSDP runs a world of one unsharded); a GPU of the stack's
FSDP group holds 1/N of it. So the figures are recorded as activations (``activationsOnly``: the
peak less the model state measured on this GPU) and the plan's memory rule adds the stack's share
of the model state; ``RESULTS-gpu.md`` also gives the per-GPU sum for each stack's GPU count.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS-gpu.md"
FIGURES = ROOT / "components" / "trainers" / "gpu_memory.yaml"
GIB = 2**30

# the stacks whose actor is measured: the reasoning family (RLinf's FSDP actor). The embodied
# family's quickstart MLP is trained whole by bench/gpu_proof.py; its OpenVLA-OFT 7B needs more
# than one GPU's memory for its state alone; veRL's actor is not in the kit.
STACKS = ("autoscaled", "vllm-rollout")
LOWER_SEQ_LENGTH = 8192
CASE_KEYS = ("runner.seq_length", "actor.fsdp_config.gradient_checkpointing")  # what the cases set
MICRO_BATCHES = 2  # a mini-batch of two micro-batches: the first under no_sync, the second syncs
CASE_TIMEOUT = 150  # seconds for one case's process
# carried to the GPU machine beside the kit: flash_attn/{__init__,ops/__init__,ops/triton/__init__}.py
# (empty) and flash_attn/ops/triton/cross_entropy.py, the file of github Dao-AILab/flash-attention
# (BSD-3-Clause), and RLinf's examples/reasoning/config at the recipe's commit (`git archive`)
MEMKIT = ROOT / "build" / "memkit"

# the shape of each model a measured stack trains (its config.json), by workload.model.source
MODEL_SHAPES = {
    "hf://deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": {
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 131072,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
    },
}
SHAPE_WORDS = "Qwen2-1.5B shape: 28 layers, hidden 1536, 12 heads, 2 KV heads, intermediate 8960, vocab 151936"


# --- 1. render (here) ----------------------------------------------------------------------------


def _config_check_spec(plan: Path) -> dict:
    """The trainer's config and overrides as the stack's own config check composes them."""
    import yaml

    for path in sorted((plan / "manifests").glob("configmap-*.yaml")):
        data = (yaml.safe_load(path.read_text()) or {}).get("data") or {}
        script = data.get("config-check.sh")
        if script:
            match = re.search(r"^CHECK='(.*)'$", script, re.M)
            if match:
                return json.loads(match.group(1).replace("'\"'\"'", "'"))
    raise SystemExit(f"gpu_memory: no config check in {plan}/manifests")


def _pod_allocator(plan: Path) -> str | None:
    import yaml

    for doc in yaml.safe_load_all((plan / "manifests" / "job-rlinf-training.yaml").read_text()):
        for container in (doc or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            if container["name"] == "ray":
                for item in container.get("env", []):
                    if item["name"] == "PYTORCH_CUDA_ALLOC_CONF":
                        return item.get("value")
    return None


def render(out: Path) -> int:
    import yaml

    from rlinf_eks import catalog

    stacks = []
    for stack in STACKS:
        plan = out / stack
        argv = [sys.executable, "-m", "rlinf_eks", "plan", stack, "--quiet", "--out", str(plan)]
        if subprocess.call(argv, cwd=ROOT, stdout=subprocess.DEVNULL) != 0:
            print(f"gpu_memory: plan {stack} failed", file=sys.stderr)
            return 1
        config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
        nodes = config["rlinf-eks:gpuNodes"]
        workload = config["rlinf-eks:workload"]
        instance = catalog.lookup(nodes["instanceType"])
        source = workload["model"]["source"]
        spec = _config_check_spec(plan)
        stacks.append({
            "stack": stack,
            "recipe": f"{workload['trainer']['dialect']}/{spec['config_name']}",
            "config_dir": spec["config_dir"],
            "config_name": spec["config_name"],
            "version_base": spec["version_base"],
            "overrides": spec["overrides"],
            "allocator": _pod_allocator(plan),
            "gpus": instance.gpus * int(nodes.get("nodeCount", 1)),
            "gpu": f"{instance.gpu_model} {instance.gpu_memory_gib} GB ({nodes['instanceType']})",
            "model_source": source,
            "shape": MODEL_SHAPES[source],
        })
    # one measurement serves every stack whose actor settings are the same: the recipe, the model
    # and the overrides that reach the actor (the rest set the cluster and the rollout); the keys the
    # cases set are taken out of the stack's overrides (Hydra takes a key once) and noted per stack
    cases = []
    groups: dict[str, dict] = {}
    for entry in stacks:
        rendered = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in entry["overrides"] if o.split("=", 1)[0] in CASE_KEYS}
        base = [o for o in entry["overrides"] if o.split("=", 1)[0] not in CASE_KEYS]
        actor = [o for o in base if o.split("=", 1)[0].lstrip("+").split(".")[0] in ("actor", "runner", "algorithm", "data")
                 and not re.search(r"path|tokenizer_model", o.split("=", 1)[0]) and not o.startswith(("runner.logger", "runner.output_dir", "runner.experiment_name"))]
        key = json.dumps([entry["recipe"], entry["model_source"], actor])
        group = groups.setdefault(key, {**entry, "overrides": base, "stacks": []})
        group["stacks"].append({"stack": entry["stack"], "gpus": entry["gpus"], "gpu": entry["gpu"], "rendered": rendered})
    for group in groups.values():
        for seq in (None, LOWER_SEQ_LENGTH):  # None: the recipe's own runner.seq_length
            for checkpointing in (False, True):
                extra = [f"actor.fsdp_config.gradient_checkpointing={checkpointing}"] + ([f"runner.seq_length={seq}"] if seq else [])
                cases.append({
                    "id": f"{group['recipe'].split('/')[-1]}-{seq or 'default'}-{'gc' if checkpointing else 'nogc'}",
                    "recipe": group["recipe"], "stacks": group["stacks"], "config_dir": group["config_dir"],
                    "config_name": group["config_name"], "version_base": group["version_base"],
                    "overrides": group["overrides"] + extra, "extra": extra, "allocator": group["allocator"],
                    "shape": group["shape"], "model_source": group["model_source"], "gradient_checkpointing": checkpointing,
                })
    out.mkdir(parents=True, exist_ok=True)
    (out / "cases.json").write_text(json.dumps(cases, indent=2))
    print(f"wrote {out / 'cases.json'}: {len(cases)} cases for {', '.join(STACKS)}")
    return 0


# --- 2. run (the GPU machine) --------------------------------------------------------------------


def _gib(n: float) -> float:
    return round(n / GIB, 2)


def step(case: dict, rlinf_dir: Path, result: Path) -> None:
    """One case, in this process: RLinf's actor, one training step. Writes ``result`` (JSON)."""
    record: dict = {"id": case["id"], "phase": "import"}

    def save(**more):
        record.update(more)
        result.write_text(json.dumps(record, indent=2))

    save()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    sys.path.insert(0, str(rlinf_dir))
    import torch
    import torch.distributed as dist
    from types import SimpleNamespace

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    import rlinf  # noqa: F401  (registers RLinf's OmegaConf resolvers)
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict
    from rlinf.config import validate_fsdp_cfg, validate_reasoning_cfg
    from rlinf.scheduler import Worker
    from rlinf.workers.actor.fsdp_actor_worker import FSDPActor
    from transformers import AutoConfig, AutoModelForCausalLM

    save(phase="compose")
    # the config folder as the image has it at /workspace (RLinf's checkout): the kit carries RLinf's
    # embodied examples only, so the reasoning configs come from build/memkit (same commit)
    relative = case["config_dir"].split("/workspace/", 1)[-1]
    config_dir = next(p for p in (rlinf_dir / relative, MEMKIT / relative) if p.is_dir())
    with initialize_config_dir(config_dir=str(config_dir), version_base=case["version_base"]):
        cfg = compose(config_name=case["config_name"], overrides=case["overrides"])
    try:  # what RLinf's validate_cfg does for this task type first (actor.micro_batch_size from it)
        cfg = validate_reasoning_cfg(cfg)
        reasoning = "passes"
    except Exception as error:  # noqa: BLE001 - recorded; the sizes it sets are set as it sets them
        reasoning = f"{type(error).__name__}: {error}"
        with open_dict(cfg):
            cfg.actor.micro_batch_size = cfg.algorithm.get("training_batch_size_per_gpu", 1)
    try:  # RLinf's own FSDP config validation, as the trainer runs it after placing the actor
        validate_fsdp_cfg(copy.deepcopy(cfg.actor))
        refusal = None
    except AssertionError as error:
        refusal = f"AssertionError: {error}"
    with open_dict(cfg):
        cfg.actor.tokenizer.tokenizer_model = None  # random weights: no tokenizer files
    seq = int(cfg.runner.seq_length)
    mbs = int(cfg.actor.micro_batch_size)
    settings = {
        "seq_length": seq, "max_prompt_length": int(cfg.data.max_prompt_length), "micro_batch": mbs,
        "gradient_checkpointing": bool(cfg.actor.fsdp_config.gradient_checkpointing),
        "precision": str(cfg.actor.model.precision), "mixed_precision": dict(cfg.actor.fsdp_config.mixed_precision),
        "amp_autocast": dict(cfg.actor.fsdp_config.amp_autocast), "grad_scaler": bool(cfg.actor.fsdp_config.grad_scaler.enabled),
        "sharding_strategy": str(cfg.actor.fsdp_config.sharding_strategy), "enable_gradient_accumulation": bool(cfg.actor.fsdp_config.enable_gradient_accumulation),
        "entropy_op_type": str(cfg.algorithm.get("entropy_op_type", "flash_attn")), "loss_type": str(cfg.algorithm.loss_type),
        "validate_fsdp_cfg": refusal or "passes", "validate_reasoning_cfg": reasoning,
    }
    save(phase="build", settings=settings)
    shape = dict(case["shape"])

    def no_ray(self, *args, **kwargs):  # rank 0 of a world of one, without a Ray cluster
        self._rank, self._world_size = 0, 1

    Worker.__init__ = no_ray

    class RandomWeightsActor(FSDPActor):
        def model_provider_func(self):
            config = AutoConfig.for_model(**shape)
            with torch.device("cuda", 0):
                model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
            return model.to(self.torch_dtype)

    actor = RandomWeightsActor(cfg, SimpleNamespace(is_disaggregated=False))
    actor.setup_model_and_optimizer()
    params = sum(p.numel() for p in actor.model.parameters())
    torch.cuda.synchronize()
    setup_allocated = torch.cuda.memory_allocated()
    response = actor.response_len
    rows = mbs * MICRO_BATCHES
    gen = torch.Generator(device="cuda").manual_seed(0)
    batch = {
        "input_ids": torch.randint(0, shape["vocab_size"], (rows, seq), device="cuda", generator=gen),
        "attention_mask": torch.ones(rows, seq, dtype=torch.long, device="cuda"),
        "position_ids": torch.arange(seq, device="cuda").expand(rows, seq).contiguous(),
        "response_mask": torch.ones(rows, response, dtype=torch.bool, device="cuda"),
        "recomputed_logprobs": -torch.rand(rows, response, device="cuda", generator=gen) * 5,
        "advantages": torch.randn(rows, response, device="cuda", generator=gen),
    }
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    save(phase="step", parameters=params, setup_allocated_gib=_gib(setup_allocated))
    actor.model.train()
    began = time.monotonic()
    try:
        metrics = actor.training_step(batch)
        torch.cuda.synchronize()
        seconds = time.monotonic() - began
    except torch.OutOfMemoryError as error:
        save(phase="done", oom=True, error=" ".join(str(error).split())[:600],
             peak_allocated_gib=_gib(torch.cuda.max_memory_allocated()), peak_reserved_gib=_gib(torch.cuda.max_memory_reserved()),
             batch_gib=_gib(before - setup_allocated), total_gib=_gib(torch.cuda.get_device_properties(0).total_memory))
        return
    del batch
    torch.cuda.synchronize()
    after = torch.cuda.memory_allocated()
    # the model's state on this GPU: what setup left (weights, Adam's moments) and the gradients
    grads = sum(p.grad.numel() * p.grad.element_size() for p in actor.model.parameters() if p.grad is not None and p.grad.is_cuda)
    state = setup_allocated + grads
    peak = torch.cuda.max_memory_allocated()
    save(phase="done", oom=False, seconds=round(seconds, 2),
         peak_allocated_gib=_gib(peak), peak_reserved_gib=_gib(torch.cuda.max_memory_reserved()),
         state_gib=_gib(state), activations_gib=_gib(peak - state), allocated_after_gib=_gib(after),
         loss=float(metrics.get("actor/final_loss", float("nan"))), grad_norm=float(metrics.get("actor/grad_norm", float("nan"))),
         total_gib=_gib(torch.cuda.get_device_properties(0).total_memory))
    dist.destroy_process_group()


def run(cases_path: Path, rlinf_dir: Path, out: Path, only: list[str], offload: bool = False) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cases = json.loads(cases_path.read_text())
    machine = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    results = []
    for case in cases:
        if only and case["id"] not in only:
            continue
        if offload:  # the weights, gradients and Adam's moments in host memory (RLinf's fsdp_config.cpu_offload):
            # what the GPU then holds at the peak is the activations, for a case whose state with them does not fit
            extra = ["actor.fsdp_config.cpu_offload=True"]
            case = {**case, "id": case["id"] + "-offload", "overrides": case["overrides"] + extra, "extra": case["extra"] + extra}
        case_file = out / f"case-{case['id']}.json"
        result = out / f"result-{case['id']}.json"
        case_file.write_text(json.dumps(case))
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if case["allocator"]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = case["allocator"]  # the pod's own setting, else none
        # flash-attn's Triton log-prob kernel, without the package's CUDA extension
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(MEMKIT), env.get("PYTHONPATH", "")) if p)
        began = time.monotonic()
        with (out / f"log-{case['id']}.txt").open("w") as log:
            try:
                code = subprocess.run([sys.executable, __file__, "step", str(case_file), "--rlinf", str(rlinf_dir), "--result", str(result)],
                                      env=env, stdout=log, stderr=subprocess.STDOUT, timeout=CASE_TIMEOUT).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        record = json.loads(result.read_text()) if result.exists() else {"id": case["id"], "phase": "not started"}
        record.update(exit=code, wall_s=round(time.monotonic() - began, 1), recipe=case["recipe"], stacks=case["stacks"],
                      extra=case["extra"], allocator=case["allocator"], model_source=case["model_source"])
        if code != 0 and "oom" not in record:
            tail = (out / f"log-{case['id']}.txt").read_text(errors="replace").strip().splitlines()[-8:]
            record["error_tail"] = tail
        results.append(record)
        print(json.dumps({k: record.get(k) for k in ("id", "exit", "phase", "oom", "peak_allocated_gib", "state_gib", "activations_gib", "seconds", "wall_s")}), flush=True)
    (out / "memory.json").write_text(json.dumps({"machine": machine, "results": results}, indent=2))
    return 0 if all(r.get("phase") == "done" for r in results) else 1


# --- 3. record (here) ----------------------------------------------------------------------------

HOW = ("RLinf v0.3's FSDPActor.training_step (bench/gpu_memory.py): {config} composed with the stack's rendered overrides, "
       "random weights, SDPA attention (flash-attn 2 in the image), flash-attn's Triton log-prob kernel, a mini-batch of "
       "{micro} micro-batches of {mbs} sequence(s) of {seq} tokens; one GPU ({gpu}), FSDP world of one: peak allocated "
       "{peak} GiB less the model state {state} GiB (fp32 weights, gradients, Adam) = the activations and transients{extra}")


def _normalised(r: dict) -> dict:
    """A result of this script before it recorded the gradients' bytes: its state_gib was what stayed
    allocated after the step; the model state is setup's (weights, Adam's moments) plus one fp32
    gradient per weight (actor.model.precision fp32), the rest stays in the activations' side."""
    if r.get("phase") == "done" and not r.get("oom") and "allocated_after_gib" not in r:
        r["allocated_after_gib"] = r["state_gib"]
        r["state_gib"] = round(r["setup_allocated_gib"] + r["parameters"] * 4 / GIB, 2)
        r["activations_gib"] = round(r["peak_allocated_gib"] - r["state_gib"], 2)
    return r


def _merged(folders: list[Path]) -> dict:
    machines, results = [], []
    for folder in folders:
        memory = json.loads((folder / "memory.json").read_text())
        machines.append(memory["machine"])
        results += [_normalised(r) for r in memory["results"]]
    return {"machine": "; ".join(sorted(set(machines))), "results": results}


def _oom_state(r: dict) -> float:
    """What of the model state a case that ran out of memory held on the GPU: setup's, and one fp32
    gradient per weight unless the state was offloaded."""
    return r["setup_allocated_gib"] + (0 if r["id"].endswith("-offload") else r["parameters"] * 4 / GIB)


def _oom_bound(r: dict) -> str:
    """The activations' lower bound from the error: allocated + asked for, less the state held."""
    held = re.search(r"([\d.]+) GiB is allocated by PyTorch", r["error"])
    asked = re.search(r"Tried to allocate ([\d.]+) GiB", r["error"])
    return f": its activations need more than {float(held.group(1)) + float(asked.group(1)) - _oom_state(r):.1f} GiB" if held and asked else ""


def _figure_entries(memory: dict, date: str) -> list[dict]:
    gpu = memory["machine"].split(",")[0].strip()
    entries = []
    done = {r["id"]: r for r in memory["results"] if r.get("phase") == "done"}
    for r in memory["results"]:
        s = r.get("settings") or {}
        if r.get("phase") != "done" or not s or r["id"].endswith("-offload"):
            continue
        offloaded = done.get(r["id"] + "-offload")
        if r["oom"] and offloaded is not None and not offloaded["oom"]:
            r = {**offloaded, "offload_of": r}
        if r["oom"]:
            how = (f"RLinf v0.3's FSDPActor.training_step (bench/gpu_memory.py) ran out of memory on one GPU ({gpu}) holding the whole "
                   f"model state ({_oom_state(r):.2f} GiB) at a world of one: {r['error'][:120]}{_oom_bound(r)}")
            if offloaded is not None and offloaded["oom"]:
                how += (f"; with RLinf's fsdp_config.cpu_offload=True ({_oom_state(offloaded):.2f} GiB of the state left on the GPU) it ran "
                        f"out of memory too{_oom_bound(offloaded)}")
            peak = None
        else:
            extra = f"; RLinf's validate_fsdp_cfg refuses this config: {s['validate_fsdp_cfg']}" if s["validate_fsdp_cfg"] != "passes" else ""
            if "offload_of" in r:
                extra = (f"; with fsdp_config.cpu_offload=True (weights, gradients, Adam in host memory): without it the whole state "
                         f"on one GPU ran out of memory ({r['offload_of']['error'][:120]})") + extra
            how = HOW.format(config=r["recipe"], micro=MICRO_BATCHES, mbs=s["micro_batch"], seq=s["seq_length"], gpu=gpu,
                             peak=r["peak_allocated_gib"], state=r["state_gib"], extra=extra)
            peak = r["activations_gib"]
        entries.append({
            "recipe": r["recipe"], "model": SHAPE_WORDS, "seqLength": s["seq_length"], "microBatch": s["micro_batch"],
            "gradientCheckpointing": s["gradient_checkpointing"], "peakGiB": peak, "oom": bool(r["oom"]),
            "activationsOnly": True, "trainerCode": True, "gpu": gpu, "date": date, "how": how, "source": "bench/RESULTS-gpu.md",
        })
    return entries


def _append_figures(entries: list[dict]) -> None:
    """Entries appended to gpu_memory.yaml as text (the file's comments and other entries kept); an
    earlier entry of this script (its ``how`` names it) for the same recipe and settings goes."""
    import yaml

    text = FIGURES.read_text() if FIGURES.exists() else "# GPU memory figures the plan's memory rule reads (rlinf_eks.gpu_memory).\nfigures:\n"
    if not re.search(r"^figures:", text, re.M):
        text = text.rstrip("\n") + "\nfigures:\n"
    text = re.sub(r"^figures:\s*(\[\]|null)?\s*$", "figures:", text, flags=re.M)
    keys = {(e["recipe"], e["seqLength"], e["microBatch"], e["gradientCheckpointing"]) for e in entries}
    # the list's items, each from its "- " line to the next item or the end of the list
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if re.match(r"^\s*- recipe:", line)]
    drop: set[int] = set()
    for n, first in enumerate(starts):
        last = starts[n + 1] if n + 1 < len(starts) else len(lines)
        while last > first + 1 and not lines[last - 1].startswith((" ", "-")):
            last -= 1
        item = (yaml.safe_load("".join(lines[first:last])) or [{}])[0]
        if "bench/gpu_memory.py" in str(item.get("how", "")) and (item.get("recipe"), item.get("seqLength"), item.get("microBatch"), item.get("gradientCheckpointing")) in keys:
            drop.update(range(first, last))
    kept = len(((yaml.safe_load(text) or {}).get("figures") or ())) - sum(1 for i in starts if i in drop)
    text = "".join(line for i, line in enumerate(lines) if i not in drop)
    for entry in entries:
        block = yaml.safe_dump([entry], sort_keys=False, width=10_000, allow_unicode=True)
        text = text.rstrip("\n") + "\n" + "".join("  " + line + "\n" for line in block.splitlines())
    check = yaml.safe_load(text)
    assert len(check["figures"]) == kept + len(entries), "gpu_memory.yaml did not parse back"
    FIGURES.write_text(text)


def record(results: list[Path], date: str, machine: str) -> int:
    memory = _merged(results)
    lines = [
        "## GPU memory of one actor training step (`bench/gpu_memory.py`)",
        "",
        "Written by `python bench/gpu_memory.py record` from what `bench/gpu_memory.py run` brought back; not edited by hand.",
        "",
        f"- date: {date}; machine: {machine} ({memory['machine']})",
        "- how: RLinf v0.3's own `FSDPActor.training_step` (`rlinf/workers/actor/fsdp_actor_worker.py`) on its own "
        "`FSDPModelManager` (FSDP wrap, AdamW, grad scaler, autocast) built from the recipe's config composed with the stack's "
        f"rendered overrides; random weights of the model's shape; a mini-batch of {MICRO_BATCHES} micro-batches; one GPU, so FSDP "
        "runs a world of one and holds the whole model state. Differences from the trainer: SDPA attention instead of flash-attn 2 "
        "(not installed there), flash-attn's Triton log-prob kernel carried as its source file, random weights, the actor alone on the GPU.",
        "- per GPU of the stack: activations (peak less the model state measured here) + the model state / the actor's GPU count "
        "(FSDP full_shard); FSDP's gathered fp16 weights and the unsharded gradients of `no_sync` stay in the activations, so this "
        "errs high by at most their size (about 3.3 GiB each for this model).",
        "",
        "| case | seq | micro | grad. ckpt | peak allocated GiB | peak reserved GiB | model state GiB | activations GiB | step s | per GPU of the stack | RLinf's validate_fsdp_cfg |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in memory["results"]:
        s = r.get("settings") or {}
        if r.get("phase") != "done":
            lines.append(f"| {r['id']} | {s.get('seq_length', '-')} | {s.get('micro_batch', '-')} | {s.get('gradient_checkpointing', '-')} | "
                         f"did not finish (phase {r.get('phase')}, exit {r.get('exit')}): {' '.join(r.get('error_tail', [])[-2:])[:300]} | | | | | | |")
            continue
        if r["oom"]:
            per_gpu = "out of memory here" + _oom_bound(r)
            cells = [f"{r['peak_allocated_gib']} at the failure", str(r["peak_reserved_gib"]), "-", "-", "-"]
        else:
            cells = [str(r["peak_allocated_gib"]), str(r["peak_reserved_gib"]), str(r["state_gib"]), str(r["activations_gib"]), str(r["seconds"])]
            per_gpu = "; ".join(f"{st['stack']} ({st['gpus']} x {st['gpu']}): {r['activations_gib'] + r['state_gib'] / st['gpus']:.1f} GiB" for st in r["stacks"])
        lines.append(f"| {r['id']} | {s['seq_length']} | {s['micro_batch']} | {s['gradient_checkpointing']} | " + " | ".join(cells) + f" | {per_gpu} | {s['validate_fsdp_cfg'][:200]} |")
    first = next((r for r in memory["results"] if r.get("settings")), None)
    if first:
        s = first["settings"]
        lines += ["", f"- the composed config's actor settings: precision {s['precision']}, FSDP mixed precision {s['mixed_precision']}, "
                  f"autocast {s['amp_autocast']}, grad scaler {s['grad_scaler']}, {s['sharding_strategy']}, gradient accumulation "
                  f"{s['enable_gradient_accumulation']}, log-probs by {s['entropy_op_type']}, loss {s['loss_type']}; the pod's "
                  f"PYTORCH_CUDA_ALLOC_CONF: {first.get('allocator') or 'not set'}"]
    section = "\n".join(lines) + "\n"
    text = RESULTS.read_text() if RESULTS.exists() else ""
    start = text.find(lines[0])
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
    entries = _figure_entries(memory, date)
    _append_figures(entries)
    print(f"wrote {RESULTS} and {len(entries)} figures into {FIGURES}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("render")
    r.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-memory")
    g = sub.add_parser("run")
    g.add_argument("--cases", type=Path, required=True)
    g.add_argument("--rlinf", type=Path, required=True, help="RLinf's source (the kit's RLINF_DIR)")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--only", nargs="*", default=[])
    g.add_argument("--offload", action="store_true", help="with RLinf's fsdp_config.cpu_offload (ids get -offload)")
    s = sub.add_parser("step")
    s.add_argument("case", type=Path)
    s.add_argument("--rlinf", type=Path, required=True)
    s.add_argument("--result", type=Path, required=True)
    c = sub.add_parser("record")
    c.add_argument("results", type=Path, nargs="+", help="run's --out folders (memory.json each)")
    c.add_argument("--date", required=True)
    c.add_argument("--machine", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "render":
        return render(args.out)
    if args.cmd == "run":
        return run(args.cases, args.rlinf, args.out, args.only, args.offload)
    if args.cmd == "step":
        step(json.loads(args.case.read_text()), args.rlinf, args.result)
        return 0
    return record(args.results, args.date, args.machine)


if __name__ == "__main__":
    sys.exit(main())
