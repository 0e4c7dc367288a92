"""Issue 19, platform and experiment stacks: a platform is the cluster without a run and exports
what an experiment reads; an experiment is one run on it, read through a StackReference that the
offline plan's mocks answer from the platform's plan.json. (The golden plans of the three example
stacks are in tests/test_stacks.py, with every other stack's.)"""

from __future__ import annotations

import copy
import json
import re
import shlex

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.config import ConfigError
from rlinf_eks.experiment import PLATFORM_OUTPUTS, QUEUE_NAME, Platform, experiment_settings
from rlinf_eks.loading import RULES
from rlinf_eks.offline.engine import engine
from rlinf_eks.offline.outputs.plan import make_plan, platform_plan
from rlinf_eks.offline.engine.stack_config import load
from tests.harness import EXPERIMENT_STACKS, PLATFORM_STACKS, ROOT, STACKS, of_type, plan_stack

PLATFORM = "organization/rlinf-eks/platform"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
# what only a platform (or a both stack) may create
PLATFORM_TYPES = re.compile(
    r"^(aws:ec2/|aws:eks/|eks:|aws:fsx/|aws:s3/|aws:kms/|kubernetes:helm\.sh/|rlinf-eks:index:(Network|Cluster|EfaGpuNodeGroup|"
    r"DevicePlugins|ClusterAutoscaler|CheckpointStorage|SharedFilesystem|KubeRayOperator|JobSetController)$)"
)


def test_the_example_stacks_have_one_platform_and_two_experiments_on_it():
    assert PLATFORM_STACKS == ["platform"]
    assert sorted(EXPERIMENT_STACKS) == ["experiment-embodied", "experiment-reasoning"]
    for stack in EXPERIMENT_STACKS:
        assert load(ROOT, stack).values["rlinf-eks:platform"] == {"role": "experiment", "stack": PLATFORM}


# --- the platform -------------------------------------------------------------------------------


def test_the_platform_exports_every_output_an_experiment_reads_and_runs_nothing():
    plan = plan_stack("platform")
    assert set(PLATFORM_OUTPUTS) <= set(plan.outputs)
    assert plan.outputs["kubeconfig"] == "[secret]"
    shape = {k: plan.outputs[k] for k in ("gpuInstanceType", "gpusPerNode", "efaPerNode", "gpuNodeCount", "gpuMaxNodes")}
    assert shape == {"gpuInstanceType": "p5.48xlarge", "gpusPerNode": 8, "efaPerNode": 32, "gpuNodeCount": 2, "gpuMaxNodes": 2}
    assert plan.outputs["kuberayVersion"] == "1.7.0" and plan.outputs["jobsetVersion"] == "0.12.0"
    assert plan.outputs["platformConfig"]["storage"]["sharedFilesystem"]["enabled"] is True
    kinds = {r["inputs"].get("kind") for r in plan.resources}
    assert not kinds & {"Job", "JobSet", "RayJob", "RayCluster", "ConfigMap", "NetworkPolicy"}
    charts = {r["inputs"]["chart"].rsplit("/", 1)[-1] for r in of_type(plan, "kubernetes:helm.sh/v3:Release")}
    assert {"kuberay-operator", "jobset"} <= charts  # the operators every experiment may need


def test_a_both_stack_keeps_its_outputs_and_adds_none_of_the_platform_ones():
    """Today's stacks stay byte-identical (their golden plans): the new outputs are a platform's."""
    for stack in STACKS:
        assert not (set(plan_stack(stack).outputs) & (set(PLATFORM_OUTPUTS) - {"clusterName", "kubeconfig", "checkpointBucket", "sharedFilesystem"}))


# --- the experiments ----------------------------------------------------------------------------


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_an_experiment_has_no_network_cluster_node_group_plugin_or_operator(stack):
    plan = plan_stack(stack)
    platform_owned = sorted(r["type"] for r in plan.resources if PLATFORM_TYPES.match(r["type"]))
    assert platform_owned == []
    assert {r["type"] for r in plan.resources if r["type"].startswith("aws:")} == {"aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"}
    (reference,) = of_type(plan, STACK_REFERENCE)
    assert reference["inputs"] == {"name": PLATFORM} and reference["id"] == PLATFORM


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_an_experiment_reaches_the_platform_cluster_through_the_platform_kubeconfig(stack):
    plan = plan_stack(stack)
    (provider,) = of_type(plan, "pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    kubernetes = [r for r in plan.resources if r["type"].startswith("kubernetes:")]
    assert kubernetes and all(r["provider"] == provider["urn"] for r in kubernetes)
    assert plan.outputs["clusterName"] == plan_stack("platform").outputs["clusterName"]
    assert any("stand-in kubeconfig" in w for w in plan.warnings)  # the plan says what it used


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_an_experiment_runs_on_the_platform_nodes_bucket_and_filesystem(stack):
    plan, platform = plan_stack(stack), plan_stack("platform").outputs
    assert plan.settings.gpu_nodes.instance_type == platform["gpuInstanceType"]
    assert plan.settings.gpu_nodes.node_count == platform["gpuNodeCount"]
    assert plan.outputs["checkpointBucket"] == platform["checkpointBucket"]
    (volume,) = [r["inputs"] for r in plan.resources if r["inputs"].get("kind") == "PersistentVolume"]
    assert volume["spec"]["csi"]["volumeHandle"] == platform["sharedFilesystem"]
    assert volume["spec"]["csi"]["volumeAttributes"] == {
        "dnsname": platform["sharedFilesystemDnsName"], "mountname": platform["sharedFilesystemMountName"],
    }
    namespace = plan.outputs["namespace"]
    assert namespace != platform["namespace"] and volume["metadata"]["name"] == f"{namespace}-shared-fs"
    pods = [r["inputs"] for r in plan.resources if r["inputs"].get("kind") in ("JobSet", "RayJob")]
    assert pods and all(p["metadata"]["namespace"] == namespace for p in pods)
    text = json.dumps(pods)
    assert '"nvidia.com/gpu": "8"' in text or '"nvidia.com/gpu": 8' in text
    assert f"/fsx/{stack}" in text  # its own run directory on the platform's filesystem


def test_two_experiments_on_one_platform_share_no_object():
    names = []
    for stack in EXPERIMENT_STACKS:
        for resource in plan_stack(stack).resources:
            meta = resource["inputs"].get("metadata") or {}
            if resource["type"].startswith("kubernetes:") and "name" in meta:
                names.append((resource["inputs"]["kind"], meta.get("namespace"), meta["name"]))
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_the_experiment_restart_and_kuberay_use_the_platform_operators():
    embodied = plan_stack("experiment-embodied")
    (jobset,) = [r for r in embodied.resources if r["inputs"].get("kind") == "JobSet"]
    assert jobset["options"]["dependsOn"] == []  # the controller is the platform's, already there
    reasoning = plan_stack("experiment-reasoning")
    assert [r["inputs"]["kind"] for r in reasoning.resources if r["inputs"].get("kind") == "RayJob"] == ["RayJob"]


# --- validation on the platform's outputs --------------------------------------------------------


def _platform(**changes) -> Platform:
    outputs = copy.deepcopy(platform_plan(plan_stack("platform").to_json(), ROOT / "build" / "platform").outputs)
    for key, value in changes.items():
        if value is _DROP:
            del outputs[key]
        else:
            outputs[key] = value
    return Platform(PLATFORM, outputs)


_DROP = object()


def _experiment(*sets: str) -> dict:
    return load(ROOT, "experiment-embodied", list(sets)).values


def test_a_missing_platform_output_is_a_config_error_naming_it():
    with pytest.raises(ConfigError) as err:
        experiment_settings(_experiment(), "experiment-embodied", _platform(gpuInstanceType=_DROP), RULES)
    (problem,) = err.value.problems
    assert problem.startswith(f"platform.stack={PLATFORM!r}: the platform's output gpuInstanceType (its value: None) is missing")
    assert "platform.role: platform" in problem


def test_a_mismatched_platform_output_is_a_config_error_naming_it_and_the_valid_value():
    with pytest.raises(ConfigError) as err:
        experiment_settings(_experiment(), "experiment-embodied", _platform(gpusPerNode=4), RULES)
    (problem,) = err.value.problems
    assert "output gpusPerNode=4" in problem and "gpusPerNode 8 for p5.48xlarge" in problem


def test_an_experiment_that_does_not_fit_the_platform_nodes_is_rejected_by_the_same_rules():
    values = load(ROOT, "experiment-reasoning", ["workload.rollout.tensorParallelSize=3"]).values
    with pytest.raises(ConfigError) as err:
        experiment_settings(values, "experiment-reasoning", _platform(), RULES)
    assert any(p.startswith("workload.rollout.tensorParallelSize=3: must divide the GPUs per node (8 on p5.48xlarge)") for p in err.value.problems)


def test_kuberay_on_a_platform_without_it_is_rejected():
    platform = _platform(kuberayVersion=None)
    platform.values["platformConfig"] = {**platform.values["platformConfig"], "kuberay": {"enabled": False}}
    values = load(ROOT, "experiment-reasoning").values
    with pytest.raises(ConfigError, match=r"workload.launcher='kuberay': needs the KubeRay operator"):
        experiment_settings(values, "experiment-reasoning", platform, RULES)


@pytest.mark.parametrize(
    "sets, message",
    [
        (["gpuNodes.nodeCount=4"], "gpuNodes: an experiment reads it from its platform organization/rlinf-eks/platform"),
        (["workload.namespace=rlinf"], "workload.namespace='rlinf': the platform's own namespace"),
        (["platform.stack=platform"], "platform.stack='platform': a fully qualified stack name <org>/<project>/<stack>"),
    ],
)
def test_an_experiment_config_problem_is_named(sets, message):
    with pytest.raises(ConfigError) as err:
        experiment_settings(_experiment(*sets), "experiment-embodied", _platform(), RULES)
    assert any(message in p for p in err.value.problems), err.value.problems


def test_an_experiment_takes_its_platforms_observability_backend_and_the_pod_shape_that_follows():
    """The platform's GPU-node DaemonSets take CPU and memory from the training pod; the experiment
    sizes its pods to them: the platform states its resolved backend (its default follows
    cluster.existing, which an experiment does not read)."""
    platform = _platform()
    assert platform.values["platformConfig"]["observability"]["backend"] == plan_stack("platform").settings.observability_backend
    for backend in ("none", "prometheus", "cloudwatch"):
        platform.values["platformConfig"] = {**platform.values["platformConfig"], "observability": {"backend": backend}}
        settings = experiment_settings(_experiment(), "experiment-embodied", platform, RULES)
        assert settings.observability_backend == backend
    with pytest.raises(ConfigError) as err:
        experiment_settings(_experiment("observability.backend=none"), "experiment-embodied", _platform(), RULES)
    assert any(p.startswith("observability: an experiment reads it from its platform") for p in err.value.problems), err.value.problems


def test_the_program_itself_validates_before_creating_anything_when_the_stack_reference_lacks_an_output():
    """The StackReference path, not only the offline pre-check: the mocks answer the read with a
    platform lacking an output and the program raises before registering anything but the read."""
    from rlinf_eks.program import run_program

    config = load(ROOT, "experiment-embodied")
    outputs = _platform(gpuNodeCount=_DROP).values
    registered = []
    original = engine.RecordingMonitor.RegisterResource

    def spy(self, request):
        registered.append(request.type)
        return original(self, request)

    engine.RecordingMonitor.RegisterResource = spy
    try:
        with pytest.raises(ConfigError, match="the platform's output gpuNodeCount"):
            engine.run(run_program, project="rlinf-eks", stack="experiment-embodied", config=config.flat(),
                       stack_references={PLATFORM: outputs})
    finally:
        engine.RecordingMonitor.RegisterResource = original
    assert [t for t in registered if t != "pulumi:pulumi:Stack"] == []


def test_the_program_reads_numbers_and_the_queue_name_through_the_stack_reference():
    """Stack outputs cross the wire as doubles (2 -> 2.0); the experiment still validates, and a
    platform's queue name, when it has one, is passed on."""
    from rlinf_eks.program import run_program

    config = load(ROOT, "experiment-embodied")
    outputs = {**_platform().values, QUEUE_NAME: "rlinf-gpu"}
    run = engine.run(run_program, project="rlinf-eks", stack="experiment-embodied", config=config.flat(),
                     stack_references={PLATFORM: outputs})
    assert run.outputs[QUEUE_NAME] == "rlinf-gpu"
    assert run.outputs["namespace"] == "exp-embodied"


# --- the command line ---------------------------------------------------------------------------


def test_planning_the_platform_then_an_experiment_with_platform(tmp_path, capsys):
    assert main(["plan", "platform", "--quiet", "--out", str(tmp_path / "platform")]) == 0
    assert main(["plan", "experiment-embodied", "--quiet", "--out", str(tmp_path / "x"), "--platform", str(tmp_path / "platform")]) == 0
    # by default, the platform's plan beside --out
    assert main(["plan", "experiment-reasoning", "--quiet", "--out", str(tmp_path / "experiment-reasoning")]) == 0
    written = json.loads((tmp_path / "x" / "plan.json").read_text())
    assert written == json.loads(plan_stack("experiment-embodied").dumps())
    assert "stand-in kubeconfig of cluster rlinf-platform" in capsys.readouterr().err


def test_a_platform_plan_lacking_an_output_exits_2_with_one_line_naming_it(tmp_path, capsys):
    assert main(["plan", "platform", "--quiet", "--out", str(tmp_path / "platform")]) == 0
    path = tmp_path / "platform" / "plan.json"
    data = json.loads(path.read_text())
    del data["outputs"]["efaPerNode"]
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["plan", "experiment-embodied", "--quiet", "--out", str(tmp_path / "x"), "--platform", str(tmp_path / "platform")]) == 2
    err = capsys.readouterr().err
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1 and "the platform's output efaPerNode (its value: None) is missing" in problems[0]
    assert "Traceback" not in err and not (tmp_path / "x" / "plan.json").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "is an experiment on platform.stack='organization/rlinf-eks/platform': plan the platform first"),
        (["--platform", "{tmp}/nothing"], "--platform {tmp}/nothing: no such folder or file; plan the platform first"),
        (["--platform", "{tmp}/empty"], "--platform {tmp}/empty: no plan.json there; plan the platform first"),
        (["--platform", "{tmp}/not-json"], "--platform {tmp}/not-json: {tmp}/not-json/plan.json is not JSON (Expecting value"),
        (["--platform", "{tmp}/no-outputs"], "--platform {tmp}/no-outputs: {tmp}/no-outputs/plan.json is not an offline plan (no outputs)"),
        (["--platform", "{tmp}/single-node"], "its plan is stack rlinf-eks/single-node, but platform.stack="),
    ],
)
def test_an_experiment_without_its_platform_plan_exits_2(args, message, tmp_path, capsys):
    assert main(["plan", "single-node", "--quiet", "--out", str(tmp_path / "single-node")]) == 0
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    (tmp_path / "not-json").mkdir()
    (tmp_path / "not-json" / "plan.json").write_text("x")
    (tmp_path / "no-outputs").mkdir()
    (tmp_path / "no-outputs" / "plan.json").write_text('{"resources": 5}')
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["plan", "experiment-embodied", "--quiet", "--out", str(tmp_path / "x"), *args]) == 2
    err = capsys.readouterr().err
    assert message.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err and "Error:" not in err, err


# --- the experiment lifecycle (docs/platform-and-experiments.md) ---------------------------------


def _lifecycle() -> str:
    from tests import docs_text

    body = docs_text.section(docs_text.DOCS / "platform-and-experiments.md", "## Platform and experiment stacks")
    (block,) = docs_text.fenced(body, "bash")
    return block


def _commands() -> list[tuple[str, str]]:
    """(the stack selected when it runs, the command) for every pulumi/kubectl/plan command."""
    selected, found = "", []
    for line in _lifecycle().splitlines():
        line = line.split("#", 1)[0].strip()
        for command in filter(None, (c.strip() for c in line.split("&&"))):
            match = re.match(r"pulumi stack (?:init|select) (\S+)", command)
            if match:
                selected = match.group(1)
            found.append((selected, command))
    return found


def test_the_lifecycle_plans_the_platform_and_both_experiments(tmp_path):
    plans = [shlex.split(c)[4:] for _, c in _commands() if c.startswith("python -m rlinf_eks plan")]
    assert [p[0] for p in plans] == ["platform", "experiment-embodied", "experiment-reasoning"]
    for argv in plans:
        argv = [a.replace("build/", f"{tmp_path}/") for a in argv]
        assert main(["plan", *argv, "--quiet", "--out", str(tmp_path / argv[0])]) == 0, argv


def test_the_lifecycle_destroys_and_updates_only_experiment_stacks_after_the_platform_exists():
    commands = _commands()
    destroys = [stack for stack, c in commands if c.startswith("pulumi destroy")]
    assert destroys and all(stack in EXPERIMENT_STACKS for stack in destroys)
    ups = [stack for stack, c in commands if c.startswith("pulumi up")]
    assert ups[0] == "platform" and set(ups[1:]) <= set(EXPERIMENT_STACKS) and len(ups) > 2
    # stopping and resuming: destroy, then up, on the same experiment stack
    sequence = [(stack, c.split()[1]) for stack, c in commands if c.startswith(("pulumi destroy", "pulumi up"))]
    stop = sequence.index(("experiment-embodied", "destroy"))
    assert ("experiment-embodied", "up") in sequence[stop + 1 :]


def test_the_lifecycle_reads_real_outputs_and_names_real_objects():
    for stack, command in _commands():
        match = re.match(r"pulumi stack output (?:--show-secrets )?(\w+)", command)
        if match:
            assert match.group(1) in plan_stack(stack).outputs, (stack, command)
        match = re.match(r"kubectl -n (\S+) (?:get|delete) (\w+) ?(\S*)", command)
        if match:
            namespace, kind, name = match.groups()
            owner = {plan_stack(s).outputs["namespace"]: s for s in EXPERIMENT_STACKS}[namespace]
            if name and not name.startswith("-"):
                objects = {(r["inputs"].get("kind", "").lower(), r["inputs"]["metadata"]["name"])
                           for r in plan_stack(owner).resources if (r["inputs"].get("metadata") or {}).get("namespace") == namespace}
                assert (kind, name) in objects, (command, owner)
    config_sets = [c for _, c in _commands() if c.startswith("pulumi config set")]
    assert config_sets == ['pulumi config set --path rlinf-eks:platform.stack "$(pulumi org get-default)/rlinf-eks/platform"']


# --- what every stack's objects pass, for the experiments ----------------------------------------


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_every_kubernetes_object_of_an_experiment_validates(stack):
    from tests.schemas import builtin_errors, crd_errors, jobset_errors, kueue_errors

    plan = plan_stack(stack)
    version = plan.settings.cluster.kubernetes_version
    assert version == plan_stack("platform").outputs["kubernetesVersion"]
    objects = [r for r in plan.resources if r["type"].startswith("kubernetes:") and "inputs" in r and r["inputs"].get("kind")]
    assert len(objects) >= 9  # namespace, service account, volume, claim, config map, network policies, local queue, the run
    for resource in objects:
        obj = resource["inputs"]
        if resource["type"].startswith("kubernetes:ray.io/"):
            assert crd_errors(obj) == [], resource["name"]
        elif resource["type"].startswith("kubernetes:jobset.x-k8s.io/"):
            assert jobset_errors(obj, version) == [], resource["name"]
        elif resource["type"].startswith("kubernetes:kueue.x-k8s.io/"):
            assert kueue_errors(obj) == [], resource["name"]
        elif obj["kind"] != "Secret":
            assert builtin_errors(obj, version) == [], resource["name"]


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_an_experiment_pods_land_on_the_platform_gpu_node_group(stack):
    from tests.harness import one
    from tests.test_workload_stacks import EKS_EFFECT, pod_templates

    group = one(plan_stack("platform"), "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")["inputs"]
    templates = pod_templates(plan_stack(stack))
    assert templates
    for template in templates:
        spec = template["spec"]
        for taint in group["taints"]:
            assert any(t["key"] == taint["key"] and t["effect"] == EKS_EFFECT[taint["effect"]] for t in spec["tolerations"]), taint
        assert spec["nodeSelector"] and spec["nodeSelector"].items() <= group["labels"].items()


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_no_secret_of_the_experiment_or_of_the_platform_kubeconfig_is_in_clear(stack, tmp_path):
    from rlinf_eks.offline.outputs import plan as plan_mod
    from tests.harness import platform_of
    from tests.test_secrets import CLEARTEXT, rendered, with_secrets

    config = with_secrets(stack, CLEARTEXT)
    platform = platform_of(config)
    token = "kubeCLEARTEXTbearer0123456789"
    platform = plan_mod.PlatformPlan(platform.source, platform.project, platform.stack,
                                      {**platform.outputs, "kubeconfig": f"apiVersion: v1\nusers:\n- user: {{token: {token}}}\n"})
    plan = make_plan(config, platform)
    text = rendered(plan, tmp_path)
    assert token not in text
    for key, secret in CLEARTEXT.items():
        assert secret not in text, f"{key} leaked in clear"
    assert any("[secret]" in json.dumps(r["inputs"]) for r in plan.resources if r["type"].startswith("kubernetes:core/v1:Secret"))


@pytest.mark.parametrize("stack", EXPERIMENT_STACKS)
def test_an_experiment_run_is_queued_on_its_platforms_cluster_queue(stack):
    # the run's queue-name label names a LocalQueue of the experiment's own namespace, which sends
    # it to the platform's ClusterQueue: without it Kueue would keep the run suspended for ever
    plan = plan_stack(stack)
    platform_queue = plan_stack("platform").outputs["queueName"]
    queues = [r["inputs"] for r in plan.resources if r["type"] == "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"]
    assert len(queues) == 1
    local = queues[0]
    assert local["spec"]["clusterQueue"] == platform_queue
    assert local["metadata"]["namespace"] == plan.settings.workload.namespace
    runs = [r["inputs"] for r in plan.resources if r["inputs"].get("kind") in ("JobSet", "Job", "RayJob") and r["inputs"]["metadata"].get("name") != "training-watchdog"]
    assert runs and all(run["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local["metadata"]["name"] for run in runs)


def test_an_experiment_on_a_platform_without_a_queue_must_turn_its_own_off():
    with pytest.raises(ConfigError, match=f"queue.enabled=true: the platform {PLATFORM} exports no queueName"):
        experiment_settings(_experiment(), "experiment-embodied", _platform(queueName=_DROP), RULES)
    assert not experiment_settings(_experiment("queue.enabled=false"), "experiment-embodied", _platform(queueName=_DROP), RULES).queue.enabled
