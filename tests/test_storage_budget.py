"""The storage budget (issue 52, item 1): one save from the recipe's model facts and the dialect's
checkpoint layout, saves per run as the command sets them, keepLocal + 1 saves kept in the run
directory, against the run directory's storage (FSx, the NVMe RAID0 the GPU types with instance
storage now get by default, or the root volume). A run that cannot fit is refused at plan time,
one near the limit warned of; the node-local run directory's emptyDir takes the budget's size."""

from __future__ import annotations

import math
import re

import pytest

from rlinf_eks import catalog
from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError
from rlinf_eks.config.gpu_nodes import GpuNodeSettings
from rlinf_eks.storage_budget import (
    WRITABLE_GIB,
    kept_saves,
    render,
    run_directory_gib,
    save_of,
    saves_per_run,
    storage_budget,
    storage_of,
    storage_warnings,
)
from rlinf_eks.trainers.recipe import recipe_of
from rlinf_eks.workload.run import resolve_run
from tests.harness import ALL_STACKS, ROLES, plan_stack, settings

GB = 1e9
VERL = {"image": "x/y:1", "trainer": {"dialect": "verl-ppo"}, "rollout": {"backend": "hf"}}
EMBODIED = {"image": "x/y:1", "trainer": {"dialect": "rlinf-embodied"}, "rollout": {"backend": "hf"}}
REASONING = {"image": "x/y:1", "trainer": {"dialect": "rlinf-reasoning"}, "rollout": {"backend": "vllm", "tensorParallelSize": 2}}


# --- one save ----------------------------------------------------------------------------------


def test_a_save_is_the_size_the_issue_measured_for_verl_and_rlinf_reasoning():
    # issue 52: "a veRL save is about 30 GB (fp32 actor, save_pretrained), an RLinf reasoning save
    # about 28 GB (DCP with Adam state plus full_weights.pt)"
    verl = save_of(settings(workload=VERL))
    reasoning = save_of(settings(workload={**REASONING, "trainer": {**REASONING["trainer"], "overrides": ["actor.fsdp_config.gradient_checkpointing=True"]}}))
    assert verl is not None and reasoning is not None
    assert verl.gib * 2**30 / GB == pytest.approx(30.2, abs=0.5)
    assert reasoning.gib * 2**30 / GB == pytest.approx(28.4, abs=0.5)
    # RLinf: the DCP model shards, Adam's two moments and full_weights.pt, each fp32
    assert [part for part, _ in reasoning.parts] == [
        "actor/dcp_checkpoint (the model's shards)", "actor/dcp_checkpoint (Adam's exp_avg and exp_avg_sq)", "actor/model_state_dict/full_weights.pt",
    ]
    assert reasoning.parts[1][1] == pytest.approx(2 * reasoning.parts[0][1])


def test_a_lora_save_holds_the_frozen_base_twice_and_the_adapter_s_optimizer_only():
    lora = save_of(settings(workload=EMBODIED))  # the dialect's default config: OpenVLA-OFT with a LoRA, bf16
    full = save_of(settings(workload={**EMBODIED, "trainer": {"dialect": "rlinf-embodied", "configName": "libero_10_grpo_openvlaoft"}}))
    assert lora is not None and full is not None
    assert lora.parts[1][1] < 0.05 * lora.gib  # Adam over the LoRA only
    assert full.gib == pytest.approx(2 * lora.parts[0][1] * 2, rel=0.01)  # bf16 weights + 2 bf16 moments + full weights: 4 x the shards


@pytest.mark.parametrize("dialect", ["rlinf-embodied", "rlinf-reasoning", "verl-ppo"])
def test_every_config_a_recipe_knows_has_its_model_facts_and_each_part_its_upstream_line(dialect):
    recipe = recipe_of(dialect)
    assert set(recipe.configs) | set(recipe.other_configs) <= set(recipe.models)
    assert recipe.checkpoint_layout and all(re.search(r"\.py:\d+", part.source) for part in recipe.checkpoint_layout)
    for name, model in recipe.models.items():
        assert 0 < model.trainable <= model.parameters and model.bytes_per_value in (2, 4), name
        assert model.steps is not None and re.search(r":\d+", model.steps.source), name


def test_an_unknown_config_has_no_save_size_and_is_never_refused_for_it():
    s = settings(workload={**EMBODIED, "trainer": {"dialect": "rlinf-embodied", "configName": "my_own_config"}})
    assert save_of(s) is None
    budget = storage_budget(s)
    assert budget["verdict"] == "unknown" and budget["save"]["gib"] is None and "my_own_config" in budget["save"]["reason"]
    assert "unknown" in render(budget)


# --- saves per run -----------------------------------------------------------------------------


def test_saves_per_run_follow_the_rendered_steps_and_interval():
    default = saves_per_run(settings(workload=EMBODIED))  # maniskill_ppo_openvlaoft: 1000 epochs of one step, a save every 40
    assert (default.count, default.steps, default.interval.value) == (25, 1000, 40)
    short = saves_per_run(settings(workload={**EMBODIED, "trainer": {"dialect": "rlinf-embodied", "overrides": ["runner.max_steps=100", "runner.save_interval=10"]}}))
    assert (short.count, short.steps) == (10, 100) and short.interval.path == "workload.trainer.overrides[1]"
    none = saves_per_run(settings(workload={**EMBODIED, "trainer": {"dialect": "rlinf-embodied", "overrides": ["runner.save_interval=-1"]}}))
    assert none.count == 0
    # veRL's steps are len(train_dataloader) x total_epochs: the dataset decides, unknown offline
    verl = saves_per_run(settings(workload=VERL))
    assert verl.count is None and verl.interval.value == 25 and "total_epochs" in verl.reason


def test_the_run_directory_keeps_the_retention_s_bound_never_more_than_the_run_makes():
    # max(keepLocal, 2) + 1: the newest complete save, the one before it until S3 holds the newest,
    # and the one being written (the launcher's retention, docs/what-a-stack-deploys.md)
    s = settings(workload={**EMBODIED, "checkpoints": {"keepLocal": 4}})
    assert kept_saves(s, saves_per_run(s)) == 5
    one = settings(workload={**EMBODIED, "checkpoints": {"keepLocal": 1}})
    assert kept_saves(one, saves_per_run(one)) == 3
    # an evaluation keeps the checkpoint it evaluates, and veRL's copy of it (it writes into what it loads)
    verl_eval = settings(workload={**VERL, "mode": "eval"})
    assert kept_saves(verl_eval, saves_per_run(verl_eval)) == 2
    few = settings(workload={**EMBODIED, "checkpoints": {"keepLocal": 4}, "trainer": {"dialect": "rlinf-embodied", "overrides": ["runner.max_steps=80"]}})
    assert kept_saves(few, saves_per_run(few)) == 2


# --- where it lives ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gpu, raid",
    [
        ({}, True),  # p5.48xlarge: 8 x 3800 GB
        ({"instanceType": "p4d.24xlarge"}, True),
        ({"instanceType": "g5.2xlarge", "efa": False, "hugepagesGib": 0, "placementGroup": {"strategy": "none"}}, True),
        ({"localNvmeRaid0": False}, False),  # explicit false still honoured
        ({"amiType": "BOTTLEROCKET_x86_64_NVIDIA"}, False),  # nodeadm sets the RAID up, AL2023 only
    ],
)
def test_nvme_raid0_is_on_by_default_where_the_type_has_instance_storage(gpu, raid):
    assert GpuNodeSettings.model_validate(gpu).nvme_raid0 is raid


def test_karpenter_asks_for_the_raid0_by_default_and_not_when_it_is_turned_off():
    from rlinf_eks import karpenter_specs

    def spec(**gpu):
        return karpenter_specs.node_class_spec(
            GpuNodeSettings.model_validate({"provisioner": "karpenter", **gpu}), role_name="r", subnet_id="subnet-0abc",
            security_group_ids=["sg-0abc"], placement_group=None, tags={},
        )

    assert spec()["instanceStorePolicy"] == "RAID0"
    assert "instanceStorePolicy" not in spec(localNvmeRaid0=False)


def test_the_run_directory_lives_on_fsx_the_raid_or_the_root_volume():
    assert storage_of(settings()).name == "NVMe RAID0 (8 x 3800 GB)"
    assert storage_of(settings()).capacity_gib == pytest.approx(30400 * GB / 2**30)
    root = storage_of(settings(gpuNodes={"localNvmeRaid0": False, "rootVolumeGib": 900}))
    assert (root.key, root.capacity_gib) == ("gpuNodes.rootVolumeGib", 900)
    fsx = storage_of(settings(gpuNodes={"nodeCount": 2}))
    assert (fsx.key, fsx.capacity_gib) == ("storage.sharedFilesystem.storageCapacityGib", 1200)


def test_the_kubelet_offers_its_filesystem_less_kube_reserved_and_the_eviction_threshold():
    # karpenter-provider-aws types.go: 1Gi kube-reserved ephemeral-storage, nodefs.available 10%
    assert catalog.ephemeral_allocatable_gib(200) == pytest.approx(200 - 1 - 20)


# --- refused, warned, fits ---------------------------------------------------------------------


def test_a_root_volume_the_saves_cannot_fit_is_refused_naming_the_keys_that_fix_it():
    with pytest.raises(ConfigError) as err:
        settings(gpuNodes={"localNvmeRaid0": False}, workload=VERL)
    (line,) = [p for p in err.value.problems if p.startswith("gpuNodes.rootVolumeGib")]
    assert line.startswith("gpuNodes.rootVolumeGib=200: the run needs ")
    for fix in ("3 kept at most with workload.checkpoints.keepLocal=2", "raise gpuNodes.rootVolumeGib to at least 249",
                "set gpuNodes.localNvmeRaid0: true", "storage.sharedFilesystem.enabled: true"):
        assert fix in line, fix
    settings(gpuNodes={"localNvmeRaid0": False, "rootVolumeGib": 300}, workload=VERL)  # the fix it names fits


def test_a_node_local_model_too_big_for_the_root_volume_is_the_budget_s_refusal_too():
    with pytest.raises(ConfigError, match=r"gpuNodes\.rootVolumeGib=200: .*staged inputs \(workload\.model\.sizeGib\) 150 GiB"):
        settings(gpuNodes={"localNvmeRaid0": False}, workload={"image": "x/y:1", "model": {"source": "hf://a/b", "sizeGib": 150}})
    settings(workload={"image": "x/y:1", "model": {"source": "hf://a/b", "sizeGib": 150}})  # on the NVMe RAID0


def test_fsx_that_the_kept_saves_fill_is_refused_naming_its_capacity():
    big = {**EMBODIED, "trainer": {"dialect": "rlinf-embodied", "configName": "libero_10_grpo_openvlaoft"}, "checkpoints": {"keepLocal": 20}}
    with pytest.raises(ConfigError, match=r"storage\.sharedFilesystem\.storageCapacityGib=1200: .*raise storage\.sharedFilesystem\.storageCapacityGib to 2400"):
        settings(gpuNodes={"nodeCount": 2}, workload=big)
    settings(gpuNodes={"nodeCount": 2}, workload=big, storage={"sharedFilesystem": {"storageCapacityGib": 2400}})


def test_a_budget_near_its_storage_s_limit_is_warned_of_not_refused():
    s = settings(gpuNodes={"localNvmeRaid0": False, "rootVolumeGib": 270}, workload=VERL)
    (warning,) = storage_warnings(s)
    assert "storage budget: the run needs 223.3 of the 243 GiB its root volume offers (92%)" in warning
    assert storage_warnings(settings(workload=VERL)) == []


@pytest.mark.parametrize("stack", [s for s in ALL_STACKS if ROLES[s] != "platform"])
def test_every_stack_s_budget_fits_by_default_and_plan_json_carries_it(stack):
    budget = plan_stack(stack).to_json()["storageBudget"]
    assert budget["verdict"] == "fits", budget
    assert budget["needGiB"] <= budget["storage"]["roomGiB"] * 0.85


def test_plan_refuses_a_run_that_cannot_fit_with_exit_2_naming_the_key(tmp_path, capsys):
    assert main(["plan", "single-node", "--quiet", "--out", str(tmp_path / "a"), "--set", "gpuNodes.localNvmeRaid0=false"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "gpuNodes.rootVolumeGib=200: the run needs" in err
    assert not (tmp_path / "a").exists()


def test_plan_prints_the_budget_and_warns_near_the_limit(tmp_path, capsys):
    argv = ["plan", "single-node", "--out", str(tmp_path / "b"), "--set", "gpuNodes.localNvmeRaid0=false", "--set", "gpuNodes.rootVolumeGib=270"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Storage budget (near the limit):" in captured.out and "on root volume: 223.3 of 243 GiB" in captured.out
    assert "warning: storage budget: the run needs 223.3 of the 243 GiB" in captured.err


# --- the run pod -------------------------------------------------------------------------------


def test_the_node_local_run_directory_is_limited_by_what_the_node_offers_not_by_the_kept_saves_estimate():
    # A pod over its emptyDir's sizeLimit is evicted with a 1 s grace period (the kubelet's
    # immediateEvictionGracePeriodSeconds): the sync sidecar's last upload never runs and the saves
    # not yet in S3 are lost with the emptyDir. Saves outpace the retention whenever the uploads lag
    # (a save more often than the sync interval), and one save's size is an estimate: so the limit is
    # the room the node's disk leaves the run directory, never max(keepLocal, 2) + 1 estimated saves.
    s = settings(workload=VERL)
    run = resolve_run(s, "t")
    storage = storage_of(s)
    others = sum(g for _, g in storage.shares) + WRITABLE_GIB + (float(s.workload.model.size_gib) if _staged(s) else 0.0)
    assert run.run_dir_gib == run_directory_gib(s) == math.floor(storage.room_gib - others)
    assert run.run_dir_gib > math.ceil(kept_saves(s, saves_per_run(s)) * save_of(s).gib + 5) + 2 * save_of(s).gib
    budget = storage_budget(s)
    pod = budget["podEphemeralStorage"]
    assert pod["emptyDirGiB"] <= pod["allocatableGiB"]
    assert resolve_run(settings(gpuNodes={"nodeCount": 2}), "t").run_dir_gib is None  # on FSx: no node-local run directory


def _staged(s) -> bool:
    from rlinf_eks.trainers import chosen_inputs

    return any(item.source is not None for item in chosen_inputs(s))


@pytest.mark.parametrize("stack", ["single-node", "vllm-rollout", "quickstart"])
def test_the_planned_pod_s_disk_volumes_fit_what_its_node_offers(stack):
    plan = plan_stack(stack)
    job = next(r["inputs"] for r in plan.resources if (r["inputs"] or {}).get("kind") == "Job" and r["inputs"]["metadata"]["name"] == "training")
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    run = volumes["run"]["emptyDir"]["sizeLimit"]
    assert run == f"{run_directory_gib(plan.settings)}Gi"
    disk = sum(int(v["emptyDir"]["sizeLimit"].removesuffix("Gi")) for v in volumes.values()
               if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory" and v["emptyDir"].get("sizeLimit", "").endswith("Gi"))
    assert disk <= catalog.ephemeral_allocatable_gib(storage_of(plan.settings).capacity_gib)
