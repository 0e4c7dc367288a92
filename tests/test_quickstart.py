"""The quickstart stack, the first run the README offers: one small single-GPU node without EFA,
RLinf's smallest embodied example with nothing to stage, checkpoints that resume, and a plan that
prints what it costs (the README quotes those figures)."""

from __future__ import annotations

import re

from rlinf_eks.__main__ import main
from tests.harness import ROOT, manifests, plan_stack


def _printed_plan(tmp_path, capsys) -> str:
    assert main(["plan", "quickstart", "--out", str(tmp_path / "out")]) == 0
    return capsys.readouterr().out


def test_the_readme_offers_quickstart_first_with_the_costs_its_plan_prints(tmp_path, capsys):
    out = _printed_plan(tmp_path, capsys)
    hourly = re.search(r"stack cost +(\$[\d.,]+/h) while training", out).group(1)
    half_hour = re.search(r"a 30-minute run: (\$[\d.,]+)", out).group(1)
    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("**The first run to try is `quickstart`**") :].split("\n\n", 1)[0]
    assert f"{hourly} for\neverything the stack bills by the hour" in paragraph or f"{hourly} for everything" in paragraph.replace("\n", " ")
    assert f"{half_hour} for a 30-minute run" in paragraph.replace("\n", " ")
    # before the p5 stacks: the first stack the README names, and the first row of its table
    assert readme.index("`quickstart`") < readme.index("p5.48xlarge")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `quickstart`")
    # every other place that quotes the figure quotes the plan's
    assert f"{half_hour} for 30 minutes" in rows[0]
    assert f"`a 30-minute run: {half_hour}`" in (ROOT / "docs" / "deploying.md").read_text().replace("\n", " ")


def test_quickstart_is_one_small_node_without_efa_and_the_plan_says_no_fabric_is_checked(tmp_path, capsys):
    plan = plan_stack("quickstart")
    gpu = plan.settings.gpu_nodes
    assert (gpu.node_count, gpu.instance.gpus, gpu.efa, gpu.instance.max_efa, gpu.hugepages_gib) == (1, 1, False, 0, 0)
    assert gpu.instance.gpu_model in {"L40S", "L4", "A10G"}
    out = _printed_plan(tmp_path, capsys)
    assert "fabric: no EFA on these nodes: NCCL uses TCP sockets (nothing pinned, no fabric check)" in out
    assert "input staging  0 s: nothing to stage" in out
    assert "nothing is staged (no workload.model.source)" in out
    # on one GPU every RLinf component has one rank whatever the config places: nothing to warn of
    assert not [line for line in out.splitlines() if line.startswith("warning:")], out
    job = manifests(plan)["job-rlinf-training.yaml"]
    pod = job["spec"]["template"]["spec"]
    containers = [c["name"] for c in pod.get("initContainers", []) + pod["containers"]]
    assert not [name for name in containers if name.startswith(("stage-", "fabric", "preflight"))], containers
    ray = next(c for c in pod["containers"] if c["name"] == "ray")
    assert "vpc.amazonaws.com/efa" not in ray["resources"]["limits"] and "hugepages-2Mi" not in ray["resources"]["limits"]
    # the pods run as the image's root user, with its HOME: where RLinf's image linked SAPIEN's PhysX GPU library
    assert "runAsUser" not in str(pod) and "HOME" not in {e["name"] for e in ray.get("env", [])}


def test_quickstart_trains_upstream_maniskill_ppo_mlp_on_gpu_physics_with_checkpoints_that_resume():
    plan = plan_stack("quickstart")
    launch = manifests(plan)["configmap-rlinf-rlinf-launch.yaml"]["data"]
    command = launch["trainer.sh"].splitlines()[-1]
    assert "--config-name maniskill_ppo_mlp" in command and "sim_backend" not in command  # upstream's GPU physics
    sizes = dict(re.findall(r"runner\.(save_interval|val_check_interval|max_steps)=(-?\d+)", command))
    assert int(sizes["save_interval"]) > 0 and int(sizes["save_interval"]) % int(sizes["val_check_interval"]) == 0
    assert "runner.resume_dir=" in launch["trainer.sh"]
    patterns = re.search(r"^CHECKPOINT_PATTERNS='([^']*)'", launch["launch.sh"], re.M).group(1).split("\n")
    assert "/rlinf-run/logs/rlinf/checkpoints/global_step_*" in patterns  # <log_path>/<experiment_name>/checkpoints


def test_the_gpu_proof_plans_the_stack_with_its_settings_and_reads_the_rendered_launcher(tmp_path, capsys):
    """bench/gpu_proof.py (run by hand on a GPU machine, never by the suite) reads the ConfigMap's
    scripts and the Job's environment from the plan: what it reads is checked here, offline."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_proof", ROOT / "bench" / "gpu_proof.py")
    proof = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(proof)  # type: ignore[union-attr]
    sets = [arg for setting in proof.proof_settings() for arg in ("--set", setting)]
    assert main(["plan", "quickstart", "--quiet", "--out", str(tmp_path / "plan"), *sets]) == 0
    capsys.readouterr()
    pod = proof.pod_of(tmp_path / "plan")
    # every container in the kubelet's order: the checks and the restore to their end, the upload
    # sidecar (restartPolicy Always) left running, then the launcher
    kinds = [(c["name"], c["kind"]) for c in pod["containers"]]
    assert kinds[-1] == ("ray", "main") and ("restore-checkpoints", "init") in kinds and ("sync-checkpoints", "sidecar") in kinds
    assert kinds.index(("image-check", "init")) < kinds.index(("config-check", "init")) < kinds.index(("restore-checkpoints", "init"))
    ray = pod["containers"][-1]
    assert ray["command"] == ["/bin/bash", "/etc/rlinf/launch.sh"]
    assert {"/etc/rlinf/launch.sh", "/etc/rlinf/trainer.sh", "/etc/rlinf/progress.sh", "/etc/rlinf/restore.sh", "/etc/rlinf/sync.sh"} <= set(pod["files"])
    assert set(pod["dirs"]) == {"/rlinf-run", "/var/run/rlinf"}
    assert ray["env"]["EMBODIED_PATH"] == "/workspace/examples/embodiment"
    restore = next(c for c in pod["containers"] if c["name"] == "restore-checkpoints")
    assert restore["env"]["S3_URI"].startswith("s3://") and restore["env"]["RUN_DIR"] == "/rlinf-run"
    # as the pod's processes: no capability a pod lacks (CAP_SYS_PTRACE never), none where all are dropped
    wrapped = proof.as_pod(ray, ray["command"])
    assert wrapped[0] == "setpriv" and "--inh-caps=-all" in wrapped and wrapped[-2:] == ray["command"]
    assert "sys_ptrace" not in proof.capabilities(ray["securityContext"]) and "ipc_lock" in proof.capabilities(ray["securityContext"])
    assert proof.capabilities(restore["securityContext"]) == [] and "--bounding-set=-all" in proof.as_pod(restore, ["true"])
    trainer = pod["files"]["/etc/rlinf/trainer.sh"][0]
    # the proof's Hydra keys replace the stack's own (Hydra takes a key once)
    for key in ("runner.save_interval=", "runner.val_check_interval=", "runner.max_steps=", "sim_backend=physx_cpu"):
        assert trainer.count(f"env.train.init_params.{key}" if key.startswith("sim") else key) == 1, key
    launch = pod["files"]["/etc/rlinf/launch.sh"][0]
    assert proof._launch_value(launch, "GRACE_SECONDS") == "60"
    assert "/rlinf-run/logs/rlinf/checkpoints/global_step_*" in proof._launch_value(launch, "CHECKPOINT_PATTERNS").split("\n")


def test_on_one_gpu_the_world_size_rules_check_an_unknown_configs_batch_with_one_rank_each(tmp_path, capsys):
    sets = ["--set", 'workload.trainer.batch["actor.global_batch_size"]=50', "--set", 'workload.trainer.batch["actor.micro_batch_size"]=40']
    assert main(["plan", "quickstart", "--quiet", "--out", str(tmp_path / "out"), *sets]) == 2
    err = capsys.readouterr().err
    assert 'workload.trainer.batch["actor.global_batch_size"]=50: must be divisible by actor.micro_batch_size x actor world size = 40 x 1 = 40' in err


def test_the_deploying_guide_quotes_single_nodes_cost_line_as_its_plan_prints_it(tmp_path, capsys):
    assert main(["plan", "single-node", "--out", str(tmp_path / "single")]) == 0
    quoted = re.search(r"for `single-node`: `(stack cost [^`]+)`", (ROOT / "docs" / "deploying.md").read_text().replace("\n", " ")).group(1)
    assert quoted in capsys.readouterr().out
