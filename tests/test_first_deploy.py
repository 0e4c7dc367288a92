"""Issue 9, the first deploy: the path from `pulumi up` to a running trainer has no trap.

- a new cluster's API endpoint is reachable by the `pulumi up` that creates the Kubernetes objects;
- the GPU nodes are created last and destroyed first;
- placeholder values are flagged and `--strict` fails on them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rlinf_eks.config import ConfigError
from rlinf_eks.loading import parse
from tests.harness import MINIMAL, STACKS, plan_stack

GPU_COMPONENT = "rlinf-eks:index:EfaGpuNodeGroup"
GPU_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def _without_cluster(**cluster: Any) -> dict[str, Any]:
    data = {k: v for k, v in MINIMAL.items() if k != "cluster"}
    if cluster:
        data["cluster"] = cluster
    return data


# --- the API endpoint ---------------------------------------------------------------------------


def test_given_a_new_cluster_without_an_endpoint_choice_when_parsed_then_both_keys_are_named():
    with pytest.raises(ConfigError) as err:
        parse(_without_cluster())
    (problem,) = err.value.problems
    assert problem.startswith("cluster.endpointPublicAccessCidrs=[]: ")
    assert "cluster.deployFromVpc: true" in problem and "pulumi up" in problem


@pytest.mark.parametrize(
    "cluster",
    [{"deployFromVpc": True}, {"endpointPublicAccessCidrs": ["198.51.100.7/32"]}],
    ids=["deploy-from-vpc", "public-cidrs"],
)
def test_given_an_explicit_endpoint_choice_when_parsed_then_it_is_accepted(cluster):
    assert parse(_without_cluster(**cluster)).cluster.endpoint_public_access_cidrs == cluster.get("endpointPublicAccessCidrs", [])


def test_given_an_existing_cluster_when_parsed_then_no_endpoint_choice_is_needed():
    data = _without_cluster(existing=True, name="shared")
    data["network"] = {
        "vpcId": "vpc-0a1b2c3d4e5f60718",
        "privateSubnetIds": ["subnet-0a1b2c3d4e5f60711", "subnet-0a1b2c3d4e5f60712"],
        "gpuSubnetId": "subnet-0a1b2c3d4e5f60711",
    }
    assert parse(data).cluster.existing


def stack_dir(tmp_path, monkeypatch, stack: str, **config: Any):
    """A project folder holding ``stack``'s file with top-level project keys replaced (None:
    removed); the working directory moves there, as `pulumi up` would run in it."""
    import yaml

    from tests.harness import ROOT

    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    data = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    for key, value in config.items():
        data["config"].pop(f"rlinf-eks:{key}", None)
        if value is not None:
            data["config"][f"rlinf-eks:{key}"] = value
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_given_no_endpoint_choice_when_planned_then_exit_2_before_anything_is_written(tmp_path, monkeypatch, capsys):
    from rlinf_eks.__main__ import main

    stack_dir(tmp_path, monkeypatch, "single-node", cluster=None)
    status = main(["plan", "single-node", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "cluster.endpointPublicAccessCidrs=[]" in err and "cluster.deployFromVpc" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "plan.json").exists()


def _plan_with_cluster(cluster: dict[str, Any]):
    from rlinf_eks.offline.outputs.plan import make_plan
    from rlinf_eks.offline.engine.stack_config import load
    from tests.harness import ROOT

    config = load(ROOT, "single-node")
    config.values["rlinf-eks:cluster"] = cluster
    return make_plan(config)


@pytest.mark.parametrize(
    "cluster, public, access",
    [
        (None, True, "public endpoint from 203.0.113.0/24 only, and the private endpoint from inside the VPC"),
        ({"deployFromVpc": True}, False, "private endpoint only, from inside the VPC (cluster.deployFromVpc"),
    ],
    ids=["stack-file", "deploy-from-vpc"],
)
def test_the_plan_states_how_the_endpoint_is_reached_and_deploys_it_so(cluster, public, access):
    plan = plan_stack("single-node") if cluster is None else _plan_with_cluster(cluster)
    assert plan.outputs["apiEndpointAccess"].startswith(access)
    (eks,) = plan.of_type("eks:index:Cluster")
    assert eks["inputs"]["endpointPrivateAccess"] is True
    assert eks["inputs"]["endpointPublicAccess"] is public
    assert eks["inputs"].get("publicAccessCidrs") == (["203.0.113.0/24"] if public else None)


# --- the GPU nodes come last --------------------------------------------------------------------


def _under(resource: dict[str, Any], by_urn: dict[str, dict[str, Any]], type_: str) -> bool:
    """True when ``resource`` is of ``type_`` or has an ancestor of it."""
    while resource is not None:
        if resource["type"] == type_:
            return True
        resource = by_urn.get(resource["parent"])
    return False


def _waits_for(urn: str, by_urn: dict[str, dict[str, Any]]) -> set[str]:
    """Everything the resource at ``urn`` transitively waits for: its dependsOn, and its parent
    (a child is registered only once its parent is, and a component with dependsOn registers only
    once those are created)."""
    seen: set[str] = set()
    todo = [urn]
    while todo:
        resource = by_urn.get(todo.pop())
        if resource is None:
            continue
        for dep in [*resource["options"]["dependsOn"], resource["parent"]]:
            if dep and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def ordering_problems(resources: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(custom resources the GPU node group does not wait for, resources that depend on it)."""
    by_urn = {r["urn"]: r for r in resources}
    (group,) = [r for r in resources if r["type"] == GPU_NODE_GROUP and _under(r, by_urn, GPU_COMPONENT)]
    waits = _waits_for(group["urn"], by_urn)
    gpu_urns = {r["urn"] for r in resources if _under(r, by_urn, GPU_COMPONENT)}
    missing = sorted(r["name"] for r in resources if r["custom"] and r["urn"] not in gpu_urns and r["urn"] not in waits)
    dependents = sorted(r["name"] for r in resources if r["urn"] not in gpu_urns and gpu_urns & set(r["options"]["dependsOn"]))
    return missing, dependents


@pytest.mark.parametrize("stack", STACKS)
def test_the_gpu_node_group_waits_for_every_other_resource_and_nothing_waits_for_it(stack):
    """Created last, destroyed first: Kubernetes access, Helm releases, storage, identity and the
    workload objects all exist before a GPU node bills, and `pulumi destroy` removes the nodes first."""
    plan = plan_stack(stack)
    assert sum(r["custom"] for r in plan.resources) > 20
    missing, dependents = ordering_problems(plan.resources)
    assert missing == [], f"{stack}: created in parallel with (or after) the GPU nodes: {missing}"
    assert dependents == [], f"{stack}: destroyed after the GPU nodes (or waiting for them): {dependents}"


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_the_gpu_nodes_wait_for_waits_for_a_gpu_pod(stack):
    """The node group waits for the workload objects, so none may wait for its pods to run:
    pulumi-kubernetes awaits a Job until it completes and a Service until its selected pods are
    ready, except with pulumi.com/skipAwait or, for a Service, when it is headless
    (pulumi-kubernetes#2475). Helm releases wait for their DaemonSets, which are ready with zero
    GPU nodes (no pod desired), and for Deployments, which run on the system nodes."""
    plan = plan_stack(stack)
    for resource in plan.resources:
        obj = resource["inputs"]
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if obj.get("kind") in ("Job", "RayJob"):
            assert annotations.get("pulumi.com/skipAwait") == "true", resource["name"]
        if obj.get("kind") == "Service" and (obj.get("spec") or {}).get("selector"):
            assert obj["spec"].get("clusterIP") == "None" or annotations.get("pulumi.com/skipAwait") == "true", resource["name"]
    for release in plan.of_type("kubernetes:helm.sh/v3:Release"):
        values = json.dumps(release["inputs"].get("values") or {})
        if release["inputs"]["chart"] in ("kuberay-operator", "cluster-autoscaler"):
            assert "nvidia.com/gpu" not in values, f"{release['name']} would wait for a GPU node"


def test_the_ordering_check_names_what_the_gpu_nodes_do_not_wait_for_and_what_waits_for_them():
    """The check can fail: cut the node group's edge to the workload, add an edge from the
    workload to the node group, and it names both."""
    import copy

    resources = copy.deepcopy(plan_stack("single-node").resources)
    by_urn = {r["urn"]: r for r in resources}
    workload = {u for u, r in by_urn.items() if _under(r, by_urn, "rlinf-eks:index:RlinfTraining")}
    (component,) = [r for r in resources if r["type"] == GPU_COMPONENT]
    component["options"]["dependsOn"] = [d for d in component["options"]["dependsOn"] if d not in workload]
    (group,) = [r for r in resources if r["type"] == GPU_NODE_GROUP and _under(r, by_urn, GPU_COMPONENT)]
    (job,) = [r for r in resources if r["type"] == "kubernetes:batch/v1:Job" and r["inputs"]["metadata"]["name"] == "training"]
    job["options"]["dependsOn"] = [group["urn"]]
    missing, dependents = ordering_problems(resources)
    assert "rlinf-job" in missing and dependents == ["rlinf-job"]


# --- placeholders -------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_example_stack_flags_its_placeholder_image_and_cidr(stack):
    found = {p.path: p for p in plan_stack(stack).placeholders}
    assert found["workload.image"].value.startswith("123456789012.dkr.ecr.")
    assert "push it to an ECR repository of your account" in found["workload.image"].what_to_set
    assert found["cluster.endpointPublicAccessCidrs[0]"].value == "203.0.113.0/24"
    assert "cluster.deployFromVpc: true" in found["cluster.endpointPublicAccessCidrs[0]"].what_to_set


def test_the_capacity_block_stack_flags_its_example_reservation_id():
    found = {p.path: p.value for p in plan_stack("capacity-block").placeholders}
    assert found["gpuNodes.capacityReservationId"] == "cr-0123456789abcdef0"


@pytest.mark.parametrize(
    "cluster, image, flagged",
    [
        # (an IPv6 documentation block is refused outright: EKS takes IPv4 public CIDRs)
        ({"endpointPublicAccessCidrs": ["198.51.100.7/32", "192.0.2.0/24"]}, "example.com/rlinf:1",
         ["cluster.endpointPublicAccessCidrs[0]", "cluster.endpointPublicAccessCidrs[1]"]),
        ({"endpointPublicAccessCidrs": ["52.94.76.0/24"], "adminRoleArns": ["arn:aws:iam::123456789012:role/Admin"]},
         "210987654321.dkr.ecr.us-east-1.amazonaws.com/rlinf:v0.3", ["cluster.adminRoleArns[0]"]),
        # 203.0.112.0/23 is wider than the documentation block: a real range, not flagged
        ({"endpointPublicAccessCidrs": ["203.0.112.0/23"]}, "ghcr.io/rlinf/rlinf:1234567890120", []),
        ({"deployFromVpc": True}, "123456789012.dkr.ecr.eu-west-1.amazonaws.com/x:1", ["workload.image"]),
    ],
)
def test_placeholders_are_found_by_value_wherever_they_are(cluster, image, flagged):
    from rlinf_eks.placeholders import find_placeholders

    settings = parse({"cluster": cluster, "workload": {"image": image}})
    found = find_placeholders(settings)
    assert [p.path for p in found] == flagged
    for p in found:
        assert str(p).startswith(f"{p.path}={p.value!r}: ")


@pytest.mark.parametrize(
    "flags, status",
    [([], 0), (["--strict"], 1), (["--strict", "--allow-placeholders"], 0)],
    ids=["lenient", "strict", "strict-allowing-placeholders"],
)
def test_placeholders_are_warned_and_strict_fails_on_them(flags, status, tmp_path, capsys):
    from rlinf_eks.__main__ import main

    assert main(["plan", "single-node", "--quiet", "--out", str(tmp_path), *flags]) == status
    err = capsys.readouterr().err
    assert "placeholder: workload.image='123456789012.dkr.ecr." in err
    assert "placeholder: cluster.endpointPublicAccessCidrs[0]='203.0.113.0/24'" in err
    assert "policy violation" not in err  # the status is the placeholders' alone
    assert ("--strict: failing" in err) is (status == 1)


def test_a_stack_with_real_values_passes_strict(tmp_path, monkeypatch, capsys):
    from rlinf_eks.__main__ import main

    workload = {
        "launcher": "manual",
        "image": "210987654321.dkr.ecr.us-east-1.amazonaws.com/rlinf-on-eks/simplevla-rl:0.2",
        "trainer": {"dialect": "verl-ppo", "modelPath": "/fsx/models/openvla-oft-libero10-sft"},
        "rollout": {"backend": "hf"},
    }
    stack_dir(tmp_path, monkeypatch, "single-node", cluster={"deployFromVpc": True}, workload=workload)
    assert main(["plan", "single-node", "--quiet", "--strict", "--out", str(tmp_path / "out")]) == 0
    assert "placeholder" not in capsys.readouterr().err


# --- the day-2 commands (docs/deploying.md) name real things -------------------------------------


def _day2_commands() -> str:
    from tests import docs_text

    body = docs_text.section(docs_text.DOCS / "deploying.md", "## Day-2 operations")
    return "\n".join(docs_text.fenced(body, "bash"))


def test_the_day2_commands_read_real_stack_outputs():
    import re

    commands = _day2_commands()
    outputs = set(re.findall(r"pulumi stack output (?:--show-secrets )?(\w+)", commands))
    assert {"kubeconfig", "clusterName", "checkpointBucket", "sharedFilesystem"} <= outputs
    for stack in ("single-node", "multi-node"):
        assert outputs <= set(plan_stack(stack).outputs), stack


@pytest.mark.parametrize(
    "stack, kind, name",
    [
        ("single-node", "Job", "training"),
        ("multi-node", "JobSet", "training"),
        ("multi-node-kuberay", "RayJob", "rlinf-training"),
    ],
)
def test_the_day2_commands_name_the_workload_objects_the_stacks_create(stack, kind, name):
    commands = _day2_commands()
    objects = [r["inputs"] for r in plan_stack(stack).resources if r["inputs"].get("kind") == kind]
    (obj,) = [o for o in objects if o["metadata"]["name"] == name]
    assert obj["metadata"]["namespace"] == "rlinf"
    assert f"-n {obj['metadata']['namespace']}" in commands
    if kind in ("Job", "JobSet"):
        job = obj["spec"] if kind == "Job" else obj["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert f"delete {kind.lower()} {name}" in commands
        assert job["completionMode"] == "Indexed"  # batch.kubernetes.io/job-completion-index
        pod = job["template"]
        # the commands select the head by its pod labels, which the Job and the JobSet's Job share
        selector = ",".join(f"{k}={v}" for k, v in pod["metadata"]["labels"].items() if k == "app.kubernetes.io/component")
        assert selector and f"-l {selector},batch.kubernetes.io/job-completion-index=0" in commands
        containers = [c["name"] for c in pod["spec"]["containers"]]
        assert "ray" in containers and "-c ray" in commands
    else:
        assert f"rayjob {name}" in commands and f"job/{name}" in commands
        assert obj["spec"]["submissionMode"] == "K8sJobMode"  # the submitter Job has the RayJob's name
        assert obj["spec"]["shutdownAfterJobFinishes"] is True  # needed to suspend


def test_the_day2_destroy_unprotects_the_resources_that_are_protected():
    commands = _day2_commands()
    protected = {r["name"] for r in plan_stack("multi-node").resources if r["options"]["protect"]}
    assert protected == {"checkpoints-bucket", "shared-fs-lustre"}
    assert all(name in commands for name in protected)
    assert all(r["options"]["retainOnDelete"] for r in plan_stack("multi-node").resources if r["options"]["protect"])
