"""Models: workload.model.source validated, staged by an init container (FSx once behind a lock and
a completion marker, else a node-local emptyDir), the trainer's model path derived from it, the
training role allowed to read an S3 source; and the stage script run for real against a fake
``aws`` and a fake ``huggingface_hub``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pulumi
import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.identity import model_read_policy, partition_of
from rlinf_eks.workload import RlinfTraining
from rlinf_eks.workload.staging import MARKER, STAGE_CONTAINER, stage_script
from tests.harness import one, plan_stack, run_component, settings

BASH = shutil.which("bash")
HF = "hf://RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Main"


def with_model(source: str | None = HF, nodes: int = 1, **workload):
    model = {"source": source} if source else {}
    return settings(gpuNodes={"nodeCount": nodes}, workload={"image": "x/y:1", "model": model, **workload})


def render(s, *, shared: bool, hf_token: bool = False):
    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="ckpt",
            shared_volume_claim=pulumi.Output.from_input("fsx-claim") if shared else None,
            hf_token=pulumi.Output.secret("hf_x") if hf_token else None,
        )

    return run_component(program)


def pod_spec(resources):
    return one(resources, "kubernetes:batch/v1:Job", "rlinf-job")["inputs"]["spec"]["template"]["spec"]


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --- config -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, kind, relative",
    [
        ("hf://Qwen/Qwen2.5-1.5B-Instruct", "hf", "hf/Qwen/Qwen2.5-1.5B-Instruct"),
        ("hf://RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Main@a1b2c3d", "hf", "hf/RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Main@a1b2c3d"),
        ("hf://org/model@refs/pr/1", "hf", "hf/org/model@refs_pr_1"),
        ("s3://acme-models/openvla/libero10/", "s3", "s3/acme-models/openvla/libero10"),
        ("s3://acme-models", "s3", "s3/acme-models"),
    ],
)
def test_given_a_valid_source_when_parsed_then_it_has_its_own_folder(source, kind, relative):
    parsed = with_model(source).workload.model.parsed
    assert parsed.kind == kind and parsed.relative_dir == relative


@pytest.mark.parametrize(
    "source, says",
    [
        ("Qwen/Qwen2.5-1.5B", "did you mean hf://Qwen/Qwen2.5-1.5B?"),
        ("https://huggingface.co/Qwen/Qwen2.5-1.5B", "did you mean hf://Qwen/Qwen2.5-1.5B?"),
        ("/fsx/models/x", "workload.trainer.modelPath"),
        ("s3://Acme_Models/x", "lowercase letters"),
        ("s3://acme-models/a/../b", "not a plain S3 prefix"),
        ("hf://org--x/model", "not a Hugging Face repo id"),
        ("gs://bucket/model", "not a model source"),
    ],
)
def test_given_a_bad_source_when_validated_then_the_error_names_key_value_and_valid_forms(source, says):
    with pytest.raises(ConfigError) as err:
        with_model(source)
    (line,) = err.value.problems
    assert line.startswith(f"workload.model.source={source!r}: ") and says in line
    assert "hf://Org/Name" in line and "s3://bucket/prefix" in line


def test_given_a_source_and_a_model_path_when_validated_then_one_must_go():
    with pytest.raises(ConfigError, match=r"workload\.model\.source=.*trainer\.modelPath \('/opt/model'\) must not be given too"):
        with_model(trainer={"modelPath": "/opt/model"})


def test_given_a_node_local_model_too_big_for_the_root_volume_when_validated_then_it_says_what_fits():
    # the storage budget counts the staged inputs beside the image and the kept checkpoints
    with pytest.raises(ConfigError, match=r"gpuNodes\.rootVolumeGib=200: .*staged inputs \(workload\.model\.sizeGib\) 150 GiB.*raise gpuNodes\.rootVolumeGib"):
        settings(gpuNodes={"localNvmeRaid0": False}, workload={"image": "x/y:1", "model": {"source": HF, "sizeGib": 150}})
    # on the NVMe RAID0 (p5.48xlarge's default) or on FSx the root volume does not hold it
    settings(workload={"image": "x/y:1", "model": {"source": HF, "sizeGib": 150}})
    settings(storage={"sharedFilesystem": {"enabled": True}}, workload={"image": "x/y:1", "model": {"source": HF, "sizeGib": 150}})


# --- rendering ----------------------------------------------------------------------------------


def test_given_fsx_when_rendered_then_an_init_container_stages_into_the_shared_models_folder_and_the_trainer_reads_it():
    s = with_model(nodes=2)
    res = render(s, shared=True, hf_token=True)
    spec = pod_spec(res)
    stage = next(c for c in spec["initContainers"] if c["name"] == STAGE_CONTAINER)
    model_dir = "/fsx/models/hf/RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Main"
    env = env_of(stage)
    assert env["MODEL_DIR"] == model_dir and env["MODEL_KIND"] == "hf" and env["HF_REPO"] == "RLinf/RLinf-OpenVLAOFT-ManiSkill-Base-Main"
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "rlinf-training-secrets", "key": "HF_TOKEN"}}
    assert stage["image"] == "x/y:1"  # the training image has huggingface_hub
    assert {"name": "shared", "mountPath": "/fsx"} in stage["volumeMounts"]
    assert not any(v["name"] == "models" for v in spec["volumes"])
    files = one(res, "kubernetes:core/v1:ConfigMap")["inputs"]["data"]
    assert "stage-model.sh" in files
    trainer = files["trainer.sh"]
    # verl-ppo (the default dialect) points both of its keys at the staged model
    assert f"actor_rollout_ref.model.path={model_dir}" in trainer and f"actor_rollout_ref.rollout.pretrained_checkpoint={model_dir}" in trainer


def test_given_one_node_without_fsx_when_rendered_then_the_model_goes_to_a_sized_emptydir_both_containers_mount():
    s = with_model("s3://acme-models/openvla/libero10")
    spec = pod_spec(render(s, shared=False))
    assert {"name": "models", "emptyDir": {"sizeLimit": "64Gi"}} in spec["volumes"]
    stage = next(c for c in spec["initContainers"] if c["name"] == STAGE_CONTAINER)
    assert stage["image"] == s.workload.checkpoint_sync_image  # the AWS CLI image of the restore
    env = env_of(stage)
    assert env["S3_URI"] == "s3://acme-models/openvla/libero10" and "HF_TOKEN" not in env
    assert {"name": "models", "mountPath": "/rlinf-models"} in stage["volumeMounts"]
    assert {"name": "models", "mountPath": "/rlinf-models"} in spec["containers"][0]["volumeMounts"]
    # before the checkpoint restore and the trainer; requests = limits (Guaranteed QoS)
    names = [c["name"] for c in spec["initContainers"]]
    assert names.index(STAGE_CONTAINER) < names.index("restore-checkpoints")
    assert stage["resources"]["requests"] == stage["resources"]["limits"]


def test_given_preflight_when_rendered_then_the_model_is_staged_only_after_the_checks():
    s = settings(gpuNodes={"nodeCount": 2}, preflight={"enabled": True}, workload={"image": "x/y:1", "model": {"source": HF}})
    names = [c["name"] for c in pod_spec(render(s, shared=True))["initContainers"]]
    assert names.index("preflight") < names.index(STAGE_CONTAINER)


def test_given_no_source_when_rendered_then_nothing_is_staged_and_model_path_still_works():
    s = settings(workload={"image": "x/y:1", "trainer": {"modelPath": "/opt/baked"}})
    res = render(s, shared=False)
    spec = pod_spec(res)
    assert STAGE_CONTAINER not in [c["name"] for c in spec.get("initContainers", [])]
    files = one(res, "kubernetes:core/v1:ConfigMap")["inputs"]["data"]
    assert "stage-model.sh" not in files and "actor_rollout_ref.model.path=/opt/baked" in files["trainer.sh"]


def test_given_kuberay_when_rendered_then_head_and_workers_stage_the_model():
    s = settings(
        gpuNodes={"nodeCount": 2}, kuberay={"enabled": True}, workload={"image": "x/y:1", "launcher": "kuberay", "model": {"source": HF}}
    )
    job = one(render(s, shared=True), "kubernetes:ray.io/v1:RayJob")["inputs"]["spec"]["rayClusterSpec"]
    for template in (job["headGroupSpec"]["template"], job["workerGroupSpecs"][0]["template"]):
        assert STAGE_CONTAINER in [c["name"] for c in template["spec"]["initContainers"]]


def test_every_stack_names_a_public_model_source_and_no_typed_model_path():
    for stack in ("single-node", "multi-node", "vllm-rollout", "multi-node-kuberay", "capacity-block", "autoscaled"):
        trainer_sh = next(
            r["inputs"]["data"]["trainer.sh"] for r in plan_stack(stack).resources if r["type"] == "kubernetes:core/v1:ConfigMap" and "trainer.sh" in r["inputs"].get("data", {})
        )
        assert "models/hf/" in trainer_sh, stack
        assert "modelPath" not in (Path(__file__).parents[1] / "stacks" / f"Pulumi.{stack}.yaml").read_text(), stack


# --- the training role --------------------------------------------------------------------------


def test_given_an_s3_model_in_another_bucket_when_planned_then_the_role_may_read_that_prefix_only():
    plan = plan_stack("single-node", "workload.model.source=s3://acme-models/openvla/libero10")
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "training-model-read")["inputs"]["policy"])
    assert policy == model_read_policy("acme-models", "openvla/libero10")
    statements = {st["Sid"]: st for st in policy["Statement"]}
    assert statements["ReadModel"] == {"Sid": "ReadModel", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::acme-models/openvla/libero10/*"}
    assert statements["ListModel"]["Condition"] == {"StringLike": {"s3:prefix": ["openvla/libero10", "openvla/libero10/*"]}}
    assert not any("Put" in str(st["Action"]) or "Delete" in str(st["Action"]) for st in policy["Statement"])


def test_given_a_hf_model_when_planned_then_the_role_gets_no_extra_grant():
    names = [r["name"] for r in plan_stack("single-node").resources if r["type"] == "aws:iam/rolePolicy:RolePolicy"]
    assert "training-model-read" not in names


def test_partitions_follow_the_region():
    assert (partition_of("us-east-1"), partition_of("cn-north-1"), partition_of("us-gov-west-1")) == ("aws", "aws-cn", "aws-us-gov")
    assert model_read_policy("b", "", "aws-cn")["Statement"][2]["Resource"] == "arn:aws-cn:s3:::b/*"


# --- the stage script, run -----------------------------------------------------------------------

FAKE_AWS = """#!/bin/bash
echo "$HOSTNAME $*" >> "$FAKE_LOG"
sleep "${FAKE_SLEEP:-0}"
[ -n "${FAKE_FAIL:-}" ] && exit 1
dest="${4%/}"
mkdir -p "$dest" && echo weights > "$dest/model.safetensors"
"""

FAKE_HF = """
import json, os
def snapshot_download(repo_id, revision=None, local_dir=None, local_dir_use_symlinks="auto", repo_type=None, allow_patterns=None):
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps({"repo_id": repo_id, "revision": revision, "local_dir": local_dir, "symlinks": local_dir_use_symlinks,
                              "repo_type": repo_type, "allow_patterns": allow_patterns}) + "\\n")
    os.makedirs(local_dir, exist_ok=True)
    # the repository holds config.json and train.jsonl: only what allow_patterns lets through lands
    for name in ("config.json", "train.jsonl"):
        if allow_patterns is None or name in allow_patterns:
            open(os.path.join(local_dir, name), "w").write("{}")
"""


@pytest.fixture
def stage(tmp_path: Path):
    if BASH is None:
        pytest.skip("bash is needed to run the stage script")
    bin_dir, py_dir = tmp_path / "bin", tmp_path / "py" / "huggingface_hub"
    bin_dir.mkdir()
    py_dir.mkdir(parents=True)
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    (py_dir / "__init__.py").write_text(FAKE_HF)
    script = tmp_path / "stage-model.sh"
    fast = stage_script()
    for key, value in (("POLL_SECONDS", 1), ("RETRY_SECONDS", 0), ("LOCK_STALE_SECONDS", 3), ("HEARTBEAT_SECONDS", 1)):
        fast = fast.replace(f"\n{key}=", f"\n{key}={value}\n_{key}=", 1)
    script.write_text(fast)
    log = tmp_path / "downloads.log"
    base = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp_path / "py"),
        "FAKE_LOG": str(log),
        "MODEL_SOURCE": "s3://acme-models/openvla",
        "MODEL_KIND": "s3",
        "S3_URI": "s3://acme-models/openvla",
        "MODEL_DIR": str(tmp_path / "fsx" / "models" / "s3" / "acme-models" / "openvla"),
    }

    def start(host: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen([BASH, str(script)], env={**base, "HOSTNAME": host, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(host: str = "training-0", **env: str) -> subprocess.CompletedProcess:
        proc = start(host, **env)
        out, err = proc.communicate(timeout=60)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    return {"start": start, "run": run, "log": log, "dir": Path(base["MODEL_DIR"])}


def downloads(stage) -> list[str]:
    return stage["log"].read_text().splitlines() if stage["log"].exists() else []


def test_given_two_pods_at_once_when_staging_on_fsx_then_one_downloads_and_both_find_the_model(stage):
    first, second = stage["start"]("training-0", FAKE_SLEEP="3"), stage["start"]("training-1", FAKE_SLEEP="3")
    results = [p.communicate(timeout=60) + (p.returncode,) for p in (first, second)]
    assert [rc for _, _, rc in results] == [0, 0], results
    assert len(downloads(stage)) == 1
    assert (stage["dir"] / MARKER).read_text().strip() == "s3://acme-models/openvla"
    assert (stage["dir"] / "model.safetensors").exists()
    assert not Path(f"{stage['dir']}.lock").exists()
    assert any("waiting for training-" in err for _, err, _ in results)


def test_given_a_staged_model_when_a_later_run_starts_then_it_is_reused(stage):
    assert stage["run"]().returncode == 0
    again = stage["run"]("training-1")
    assert again.returncode == 0 and len(downloads(stage)) == 1 and "is ready at" in again.stderr


def test_given_a_stager_that_died_when_its_lock_goes_stale_then_another_pod_takes_over(stage):
    lock = Path(f"{stage['dir']}.lock")
    lock.mkdir(parents=True)
    (lock / "owner").write_text("training-9\n")
    (lock / "heartbeat").touch()
    old = time.time() - 60
    os.utime(lock / "heartbeat", (old, old))
    result = stage["run"]()
    assert result.returncode == 0, result.stderr
    assert "the staging lock of training-9 has not moved" in result.stderr and len(downloads(stage)) == 1


def test_given_a_failing_download_when_staging_then_it_fails_and_releases_the_lock(stage):
    result = stage["run"](FAKE_FAIL="1")
    assert result.returncode != 0 and "could not stage s3://acme-models/openvla" in result.stderr
    assert len(downloads(stage)) == 3  # retried
    assert not (stage["dir"] / MARKER).exists() and not Path(f"{stage['dir']}.lock").exists()


def test_given_a_hf_source_when_staging_then_snapshot_download_fills_the_model_dir_without_symlinks(stage):
    result = stage["run"](MODEL_SOURCE="hf://Org/Name@v1", MODEL_KIND="hf", HF_REPO="Org/Name", HF_REVISION="v1")
    assert result.returncode == 0, result.stderr
    (call,) = [json.loads(line) for line in downloads(stage)]
    # a model: the whole repository, of the default type
    assert call == {"repo_id": "Org/Name", "revision": "v1", "local_dir": str(stage["dir"]), "symlinks": False, "repo_type": None, "allow_patterns": None}
    assert (stage["dir"] / MARKER).read_text().strip() == "hf://Org/Name@v1"


def test_given_a_lock_taken_over_while_downloading_when_the_first_stager_ends_then_it_leaves_the_new_lock(stage):
    lock = Path(f"{stage['dir']}.lock")
    first = stage["start"]("training-0", FAKE_SLEEP="3")
    deadline = time.time() + 20
    while not (lock / "owner").exists() and time.time() < deadline:
        time.sleep(0.1)
    assert (lock / "owner").read_text().startswith("training-0:")
    # what a waiter does when training-0's heartbeat stalls: moves the lock away and takes its own
    lock.rename(f"{lock}.stale")
    lock.mkdir()
    (lock / "owner").write_text("training-1:42:7\n")
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert (lock / "owner").read_text() == "training-1:42:7\n", "training-0 removed the lock it no longer held"


def test_given_a_dataset_file_when_staging_then_only_that_file_of_the_dataset_repository_lands(stage):
    uri = "hf://datasets/inclusionAI/AReaL-boba-Data/train.jsonl"
    result = stage["run"](INPUT_NAME="dataset", MODEL_SOURCE=uri, MODEL_KIND="hf", HF_REPO="inclusionAI/AReaL-boba-Data", HF_REPO_TYPE="dataset", HF_PATH="train.jsonl")
    assert result.returncode == 0, result.stderr
    (call,) = [json.loads(line) for line in downloads(stage)]
    assert call["repo_type"] == "dataset" and call["allow_patterns"] == ["train.jsonl", "train.jsonl/*"]
    assert (stage["dir"] / "train.jsonl").is_file() and not (stage["dir"] / "config.json").exists()
    assert "input dataset (hf://datasets/inclusionAI/AReaL-boba-Data/train.jsonl) is ready" in result.stderr


def test_given_a_dataset_file_the_repository_lacks_when_staging_then_the_input_fails_naming_it(stage):
    uri = "hf://datasets/inclusionAI/AReaL-boba-Data/missing.jsonl"
    result = stage["run"](INPUT_NAME="dataset", MODEL_SOURCE=uri, MODEL_KIND="hf", HF_REPO="inclusionAI/AReaL-boba-Data", HF_REPO_TYPE="dataset", HF_PATH="missing.jsonl")
    assert result.returncode == 1
    assert "the repository has no missing.jsonl" in result.stderr
    assert f"rlinf-eks: FAILED: input dataset: could not stage {uri}" in result.stderr and "workload.inputs.dataset" in result.stderr


def test_given_an_s3_object_input_when_staging_then_it_is_copied_not_synced(stage):
    result = stage["run"](INPUT_NAME="dataset", MODEL_SOURCE="s3://acme-data/math/train.jsonl", S3_URI="s3://acme-data/math/train.jsonl", S3_OBJECT="1")
    assert result.returncode == 0, result.stderr
    (call,) = downloads(stage)
    assert call.split()[1:] == ["s3", "cp", "s3://acme-data/math/train.jsonl", f"{stage['dir']}/train.jsonl", "--only-show-errors"]


def test_given_an_unreachable_input_when_staging_then_its_init_container_fails_with_one_line_naming_it(stage):
    result = stage["run"](INPUT_NAME="lora", FAKE_FAIL="1")
    assert result.returncode == 1
    (failed,) = [line for line in result.stderr.splitlines() if "FAILED" in line]
    assert failed.startswith("rlinf-eks: FAILED: input lora: could not stage s3://acme-models/openvla") and "workload.inputs.lora" in failed


def test_given_inputs_of_a_recipe_when_rendered_then_each_has_its_own_init_container_in_order():
    s = settings(gpuNodes={"nodeCount": 2}, workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-embodied"}})
    spec = pod_spec(render(s, shared=True))
    stages = [c for c in spec["initContainers"] if c["name"].startswith("stage-")]
    assert [c["name"] for c in stages] == ["stage-model", "stage-lora", "stage-assets"]
    assets = env_of(stages[2])
    assert assets["HF_REPO"] == "RLinf/maniskill_assets" and assets["HF_REPO_TYPE"] == "dataset" and assets["INPUT_NAME"] == "assets"
    assert assets["MODEL_DIR"] == "/fsx/models/hf/datasets/RLinf/maniskill_assets"


def test_given_an_s3_dataset_in_another_bucket_when_planned_then_the_role_may_read_it():
    plan = plan_stack("vllm-rollout", "workload.inputs.dataset=s3://acme-data/math/train.jsonl")
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "training-input-dataset-read")["inputs"]["policy"])
    statements = {st["Sid"]: st for st in policy["Statement"]}
    # the dataset is one object: `aws s3 cp` reads that key itself, not keys below it
    assert statements["ReadInput"]["Resource"] == "arn:aws:s3:::acme-data/math/train.jsonl"
    assert statements["ListInput"]["Condition"] == {"StringLike": {"s3:prefix": ["math/train.jsonl", "math/train.jsonl/*"]}}


def test_given_two_files_of_one_dataset_when_staged_one_after_the_other_then_each_keeps_its_own_marker(stage):
    base = {"MODEL_KIND": "hf", "HF_REPO": "org/data", "HF_REPO_TYPE": "dataset", "INPUT_NAME": "dataset"}
    first = stage["run"](MODEL_SOURCE="hf://datasets/org/data/train.jsonl", HF_PATH="train.jsonl", **base)
    second = stage["run"](MODEL_SOURCE="hf://datasets/org/data/config.json", HF_PATH="config.json", **base)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    again = stage["run"](MODEL_SOURCE="hf://datasets/org/data/train.jsonl", HF_PATH="train.jsonl", **base)
    assert again.returncode == 0 and len(downloads(stage)) == 2  # the third run found its marker
    assert (stage["dir"] / f"{MARKER}.train.jsonl").read_text().strip() == "hf://datasets/org/data/train.jsonl"
