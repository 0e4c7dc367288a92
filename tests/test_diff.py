"""The offline diff (``python -m rlinf_eks diff BASE NEW``): pure comparison, warnings, CLI exits."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.diff.diff import MISSING, Change, changed_paths, diff_plans, load_plan, PlanError, render_markdown

STACK = "urn:pulumi:single-node::rlinf-eks::"


def resource(type_: str, name: str, inputs: dict, **options) -> dict:
    return {
        "urn": f"{STACK}{type_}::{name}",
        "type": type_,
        "name": name,
        "id": f"{name}-id",
        "parent": None,
        "custom": True,
        "provider": None,
        "inputs": inputs,
        "options": {"protect": False, "retainOnDelete": False, "dependsOn": [], "ignoreChanges": [],
                    "deleteBeforeReplace": False, **options},
    }


NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
BUCKET = "aws:s3/bucket:Bucket"


def base_plan() -> dict:
    return {
        "project": "rlinf-eks",
        "stack": "single-node",
        "resources": [
            resource(NODE_GROUP, "gpu-nodes", {
                "instanceTypes": ["p5.48xlarge"], "amiType": "AL2023_x86_64_NVIDIA", "subnetIds": ["subnet-a"],
                "launchTemplate": {"id": "lt-1", "version": "1"}, "scalingConfig": {"desiredSize": 1, "minSize": 1, "maxSize": 1},
                # what tells the GPU node group from the system one (as the stacks render them)
                "labels": {"role": "gpu-training"}, "taints": [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "true"}],
            }),
            resource(LAUNCH_TEMPLATE, "gpu-launch-template", {"metadataOptions": {"httpTokens": "required"}}),
            resource(BUCKET, "checkpoints-bucket", {"forceDestroy": False}, protect=True),
            resource("kubernetes:core/v1:Secret", "rlinf-hf-token", {"stringData": {"token": "[secret]"}}),
            resource("kubernetes:batch/v1:Job", "rlinf-job", {"spec": {"template": {"spec": {"containers": [
                {"name": "trainer", "image": "img:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            ]}}}}),
        ],
        "outputs": {"clusterName": "rlinf-single-node", "kubeconfig": "[secret]"},
    }


def edited(plan: dict, name: str, edit) -> dict:
    new = copy.deepcopy(plan)
    edit(next(r for r in new["resources"] if r["name"] == name))
    return new


# --- changed_paths -----------------------------------------------------------------------------


def test_given_nested_dicts_when_one_leaf_changes_then_only_its_path_is_reported():
    assert changed_paths({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == [Change("a.c", 2, 3)]


def test_given_named_list_items_when_one_is_inserted_then_it_reads_as_one_addition_not_a_shift():
    old = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    new = [{"name": "A", "value": "1"}, {"name": "NEW", "value": "x"}, {"name": "B", "value": "2"}]
    assert changed_paths(old, new, "env") == [Change("env[name=NEW]", MISSING, {"name": "NEW", "value": "x"})]


def test_given_keys_with_dots_and_slashes_then_they_are_quoted_in_the_path():
    old = {"limits": {"vpc.amazonaws.com/efa": 16}}
    new = {"limits": {"vpc.amazonaws.com/efa": 32}}
    assert changed_paths(old, new, "r") == [Change('r.limits["vpc.amazonaws.com/efa"]', 16, 32)]


def test_given_plain_lists_when_one_grows_then_the_new_index_is_reported():
    assert changed_paths(["a"], ["a", "b"], "x") == [Change("x[1]", MISSING, "b")]


# --- diff_plans --------------------------------------------------------------------------------


def test_given_identical_plans_when_diffed_then_equal():
    diff = diff_plans(base_plan(), base_plan())
    assert diff.equal and not diff.warnings
    assert "No changes." in render_markdown(diff)


def test_given_scaling_change_when_diffed_then_one_update_with_old_and_new_and_no_replacement_warning():
    new = edited(base_plan(), "gpu-nodes", lambda r: r["inputs"]["scalingConfig"].update(desiredSize=2))
    diff = diff_plans(base_plan(), new)
    assert [rc.name for rc in diff.updated] == ["gpu-nodes"]
    assert diff.updated[0].changes == [Change("inputs.scalingConfig.desiredSize", 1, 2)]
    assert diff.warnings == []


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda i: i.update(instanceTypes=["p5en.48xlarge"]), "replaces the GPU node group"),
        (lambda i: i.update(amiType="BOTTLEROCKET_x86_64_NVIDIA"), "replaces the GPU node group"),
        (lambda i: i.update(subnetIds=["subnet-b"]), "replaces the GPU node group"),
        (lambda i: i["launchTemplate"].update(id="lt-2"), "replaces the GPU node group"),
        (lambda i: i["launchTemplate"].update(version="2"), "rolls every GPU node"),
        (lambda i: i.update(capacityType="CAPACITY_BLOCK"), "replaces the GPU node group"),
    ],
)
def test_given_a_node_group_change_that_recreates_nodes_when_diffed_then_warned(edit, reason):
    new = edited(base_plan(), "gpu-nodes", lambda r: edit(r["inputs"]))
    diff = diff_plans(base_plan(), new)
    assert len(diff.warnings) == 1 and reason in diff.warnings[0]
    assert "gpu-nodes" in diff.warnings[0]


def test_given_a_training_job_spec_change_when_diffed_then_the_restart_of_the_run_is_warned():
    new = edited(base_plan(), "rlinf-job", lambda r: r["inputs"]["spec"]["template"]["spec"]["containers"][0].update(image="img:2"))
    warnings = diff_plans(base_plan(), new).warnings
    assert len(warnings) == 1 and "replaces the training run" in warnings[0] and "rlinf-job" in warnings[0]


def test_given_a_launch_template_change_when_diffed_then_the_node_roll_is_warned():
    new = edited(base_plan(), "gpu-launch-template", lambda r: r["inputs"]["metadataOptions"].update(httpPutResponseHopLimit=2))
    assert any("launch template version" in w for w in diff_plans(base_plan(), new).warnings)


@pytest.mark.parametrize("key, value, reason", [("name", "other", "replaces the EKS cluster"), ("version", "1.35", "upgrades the control plane")])
def test_given_cluster_name_or_version_change_when_diffed_then_warned(key, value, reason):
    cluster = resource("eks:index:Cluster", "rlinf-cluster", {"name": "rlinf-single-node", "version": "1.34"})
    base = base_plan()
    base["resources"].append(cluster)
    new = edited(base, "rlinf-cluster", lambda r: r["inputs"].update({key: value}))
    diff = diff_plans(base, new)
    cluster_warnings = [w for w in diff.warnings if "rlinf-cluster:" in w]
    assert len(cluster_warnings) == 1 and reason in cluster_warnings[0]
    if key == "name":
        # a new cluster: a new kubeconfig, so every Kubernetes object is replaced with it
        assert {rc.name for rc in diff.replaced} >= {"rlinf-cluster", "rlinf-job", "rlinf-hf-token"}
        assert any("rlinf-job: replaces the training run" in w for w in diff.warnings)
    else:
        assert diff.warnings == cluster_warnings


def test_given_resources_added_and_removed_when_diffed_then_created_and_deleted_are_listed_with_delete_warning():
    new = base_plan()
    new["resources"] = [r for r in new["resources"] if r["name"] != "gpu-nodes"]
    new["resources"].append(resource("aws:ec2/placementGroup:PlacementGroup", "gpu-placement", {"strategy": "cluster"}))
    diff = diff_plans(base_plan(), new)
    assert [r.name for r in diff.created] == ["gpu-placement"]
    assert [r.name for r in diff.deleted] == ["gpu-nodes"]
    assert diff.warnings == ["aws:eks/nodeGroup:NodeGroup gpu-nodes: deletes the GPU node group (every GPU node is terminated)"]


def test_given_an_option_change_when_diffed_then_the_options_path_is_reported():
    new = edited(base_plan(), "checkpoints-bucket", lambda r: r["options"].update(protect=False))
    diff = diff_plans(base_plan(), new)
    assert diff.updated[0].changes == [Change("options.protect", True, False)]


def test_given_a_secret_when_rendered_then_it_stays_masked_and_the_change_of_the_plain_value_shows():
    new = edited(base_plan(), "rlinf-job", lambda r: r["inputs"]["spec"]["template"]["spec"]["containers"][0].update(image="img:2"))
    new["outputs"]["clusterName"] = "renamed"
    text = render_markdown(diff_plans(base_plan(), new, "base", "new"))
    assert '`inputs.spec.template.spec.containers[name=trainer].image`: `"img:1"` → `"img:2"`' in text
    assert "`outputs.clusterName`" in text
    assert "[secret]" not in text  # unchanged secret values are not shown at all
    # a Job's pod template is force-new (pulumi-kubernetes): a replacement, counted apart from updates
    assert "**0 to create, 0 to update in place, 1 to replace (delete, then create), 0 to delete**" in text


# --- loading and the CLI -----------------------------------------------------------------------


def write_plan(folder: Path, plan: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text(json.dumps(plan))
    return folder


def test_given_plan_folders_when_equal_then_exit_0(tmp_path, capsys):
    a = write_plan(tmp_path / "a", base_plan())
    b = write_plan(tmp_path / "b", base_plan())
    assert main(["diff", str(a), str(b / "plan.json")]) == 0
    assert "No changes." in capsys.readouterr().out


def test_given_different_plans_when_diffed_then_exit_1_and_markdown_on_stdout(tmp_path, capsys):
    a = write_plan(tmp_path / "a", base_plan())
    b = write_plan(tmp_path / "b", edited(base_plan(), "gpu-nodes", lambda r: r["inputs"].update(instanceTypes=["p4d.24xlarge"])))
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "> [!WARNING]" in out and "instanceTypes" in out


@pytest.mark.parametrize(
    "content, message",
    [(None, "no such plan"), ("{not json", "not JSON"), ('{"stack": "x"}', "not an offline plan"),
     ('{"resources": [{"urn": "u"}]}', "lacks urn, type or name"),
     ('{"resources": [{"urn": 1, "type": "t", "name": "n"}]}', "resources[0].urn is 1, not a string"),
     ('{"resources": [{"urn": "u", "type": null, "name": "n"}]}', "resources[0].type is null, not a string"),
     ('{"resources": [{"urn": "u", "type": "t", "name": ["n"]}]}', "resources[0].name is [\"n\"], not a string"),
     ('{"resources": [{"urn": "u", "type": "t", "name": "n", "inputs": []}]}', "resources[0].inputs is list, not an object"),
     ('{"resources": [], "outputs": 3}', "outputs is int, not an object"),
     (b"\xff\xfe{}", "not JSON")],
)
def test_given_bad_input_when_diffed_then_exit_2_naming_the_problem(tmp_path, capsys, content, message):
    good = write_plan(tmp_path / "good", base_plan())
    bad = tmp_path / "bad.json"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    elif content is not None:
        bad.write_text(content)
    assert main(["diff", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    with pytest.raises(PlanError):
        load_plan(bad)


CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def _script(nnodes: int) -> str:
    return "#!/bin/bash\n# Rendered by rlinf-eks. Do not edit in the cluster.\n" + f"NNODES={nnodes}\n" + "echo start\n" * 50


def test_given_a_script_change_when_rendered_then_the_changed_lines_show_not_the_common_head():
    old = {"project": "p", "stack": "s", "resources": [resource(CONFIG_MAP, "launch", {"data": {"launch.sh": _script(1)}})], "outputs": {}}
    new = copy.deepcopy(old)
    new["resources"][0]["inputs"]["data"]["launch.sh"] = _script(2)
    text = render_markdown(diff_plans(old, new))
    assert "`inputs.data[\"launch.sh\"]`: text changed" in text
    block = text.split("```diff\n", 1)[1].split("```", 1)[0]
    assert [line.strip() for line in block.rstrip().splitlines()] == ["@@ -3 +3 @@", "-NNODES=1", "+NNODES=2"]
    assert "Rendered by rlinf-eks" not in text


def test_given_a_long_command_line_change_when_rendered_then_the_changed_words_show():
    words = " ".join(f"key{i}=v" for i in range(40))
    old = {"project": "p", "stack": "s", "resources": [], "outputs": {"entrypoint": f"python -m train nnodes=1 {words}"}}
    new = {**old, "outputs": {"entrypoint": f"python -m train nnodes=2 {words}"}}
    text = render_markdown(diff_plans(old, new))
    block = text.split("```diff\n", 1)[1].split("```", 1)[0]
    assert block.rstrip().splitlines() == ["  -nnodes=1", "  +nnodes=2"]


def test_given_text_with_backticks_when_rendered_then_the_fence_is_longer_than_any_backtick_run():
    old = {"project": "p", "stack": "s", "resources": [], "outputs": {"s": "a\n```b"}}
    new = {**old, "outputs": {"s": "a\n```c"}}
    text = render_markdown(diff_plans(old, new))
    assert "````diff" in text
