"""The offline plan: ``python -m rlinf_eks plan [STACK] [--out DIR] [--set KEY=VALUE ...]``.

Writes ``DIR/plan.json`` and ``DIR/manifests/`` (a public contract read by tools outside this
repository: extend, never rename) and prints a preview-like tree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import yaml

from ... import config as config_mod
from ...loading import settings_from_config
from ..deployer import deployer_policy
from ..engine import engine
from .output import REPORT_FOLDER, OutputError, OutputFolder, check_output as _check_output, commit, staged
from ..engine.stack_config import StackConfig, StackConfigError
from ...plan_reader import HELM_PREFIX, KUBERNETES_PREFIX, PROVIDER_PREFIX

if TYPE_CHECKING:
    from ...placeholders import Placeholder
    from ...policies import Violation

PLAN_FILE = "plan.json"
FIRST_STEP = "firstStep"
STORAGE_BUDGET = "storageBudget"
GPU_MEMORY = "gpuMemory"
MANIFESTS = "manifests"
EFFICIENCY_FILE = "efficiency.json"
EFFICIENCY_PICTURE = "efficiency.svg"
WRITTEN_FILE = ".rlinf-eks-manifests"
"""In DIR: the manifest files the last plan wrote, one a line: the only files a plan removes."""
_MANIFEST_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\.yaml")
PLAN_OUTPUTS = (PLAN_FILE, WRITTEN_FILE, MANIFESTS, EFFICIENCY_FILE, EFFICIENCY_PICTURE, deployer_policy.POLICY_FILE,
                deployer_policy.NOTES_FILE, deployer_policy.PART_FILES, REPORT_FOLDER)
"""What a plan writes at the top of its folder (names or patterns), and the report's default folder
inside it: a folder with files must hold one of them to be planned into."""
PLAN_FOLDER = OutputFolder("plan", (MANIFESTS,), PLAN_OUTPUTS)


# Kubernetes types that are not objects in the cluster's API (Helm releases are in plan.json only).
_NOT_MANIFESTS = (HELM_PREFIX, PROVIDER_PREFIX)


@dataclass
class Plan:
    project: str
    stack: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    warnings: list[str]
    settings: config_mod.StackSettings | None = None
    """The validated settings the plan ran with (not part of plan.json); feeds the efficiency report."""
    placeholders: list[Placeholder] = field(default_factory=list)
    """Example values to replace before ``pulumi up`` (``rlinf_eks.placeholders``; not part of plan.json)."""
    region: str | None = None
    """The AWS region of the stack (aws:region): plan.json's ``region``, where every AWS resource lives."""
    unchecked: list[str] = field(default_factory=list)
    """The values only the account, the registry or the network can judge (rlinf_eks.config.unchecked):
    plan.json's ``unchecked``, printed under "Not checked offline"."""

    @property
    def not_planned(self) -> list[dict[str, Any]]:
        """What component providers (pulumi-eks) create out of the plan's sight (offline/engine/eks_children.py)."""
        from ..engine.eks_children import not_planned

        return not_planned(self.resources)

    def to_json(self) -> dict[str, Any]:
        data = {
            "project": self.project, "stack": self.stack, "resources": self.resources, "outputs": self.outputs,
            "notPlanned": self.not_planned,
        }
        if self.region is not None:
            # where every AWS resource of the stack lives (aws:region): a change moves them all
            data["region"] = self.region
        if self.unchecked:
            data["unchecked"] = self.unchecked
        estimate = self.first_step
        if estimate is not None:
            # the wait from node Ready to the first step, on paper (offline/outputs/first_step.py)
            data[FIRST_STEP] = estimate
        if self.settings is not None:
            # checkpoints, inputs and image against the run directory's storage (rlinf_eks.storage_budget);
            # the trainer's per-GPU memory against the GPU type's (rlinf_eks.gpu_memory)
            from ...gpu_memory import gpu_memory
            from ...storage_budget import storage_budget

            for key, section in ((STORAGE_BUDGET, storage_budget), (GPU_MEMORY, gpu_memory)):
                if (value := section(self.settings)) is not None:
                    data[key] = value
        return data

    @property
    def first_step(self) -> dict[str, Any] | None:
        from .first_step import first_step

        return first_step(self.settings, self.stack)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_]

    def manifests(self) -> dict[str, dict[str, Any]]:
        """Every Kubernetes object, by its file name."""
        files: dict[str, dict[str, Any]] = {}
        for resource in self.resources:
            if is_manifest(resource):
                files[manifest_file_name(resource["inputs"])] = resource["inputs"]
        return dict(sorted(files.items()))


def is_manifest(resource: dict[str, Any]) -> bool:
    return resource["type"].startswith(KUBERNETES_PREFIX) and not resource["type"].startswith(_NOT_MANIFESTS)


def manifest_file_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    scope = meta.get("namespace") or "cluster"
    return f"{obj['kind']}-{scope}-{meta['name']}.yaml".lower()


@dataclass(frozen=True)
class PlatformPlan:
    """A platform stack's offline plan (``--platform DIR``): its outputs answer an experiment's
    StackReference under the mocks. plan.json masks secrets, so the kubeconfig read offline is a
    stand-in for the platform's cluster (``pulumi up`` reads the real one); ``notes`` says so."""

    source: Path
    project: str
    stack: str
    outputs: dict[str, Any]
    notes: tuple[str, ...] = ()

    def outputs_for(self, qualified: str) -> dict[str, Any]:
        """The outputs, when this plan is the stack ``<org>/<project>/<stack>`` names (the org is
        not in a plan), else StackConfigError naming both."""
        _org, project, stack = qualified.split("/")
        if (project, stack) != (self.project, self.stack):
            raise StackConfigError(
                f"--platform {self.source}: its plan is stack {self.project}/{self.stack}, but platform.stack={qualified!r} "
                f"names {project}/{stack}: plan that platform (python -m rlinf_eks plan {stack}) and pass its folder"
            )
        return self.outputs


def load_platform(folder: Path) -> PlatformPlan:
    """A platform's plan.json (``folder`` or the file itself), or StackConfigError."""
    path = folder / PLAN_FILE if folder.is_dir() else folder
    first = "plan the platform first: python -m rlinf_eks plan <platform stack>"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        missing = f"no {PLAN_FILE} there" if folder.is_dir() else "no such folder or file"
        raise StackConfigError(f"--platform {folder}: {missing}; {first}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise StackConfigError(f"--platform {folder}: cannot read {path}: {getattr(err, 'strerror', None) or err}; {first}") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise StackConfigError(f"--platform {folder}: {path} is not JSON ({err}); {first}") from None
    if not isinstance(data, dict) or not isinstance(data.get("outputs"), dict):
        raise StackConfigError(f"--platform {folder}: {path} is not an offline plan (no outputs); {first}")
    try:
        return platform_plan(data, folder)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise StackConfigError(f"--platform {folder}: {path} is not a platform's offline plan ({err}); {first}") from None


def platform_plan(data: dict[str, Any], source: Path) -> PlatformPlan:
    """A platform from its plan.json's content, the masked kubeconfig replaced by a stand-in."""
    from ...plan_reader import SECRET
    from ..engine.fake_cloud import fake_kubeconfig

    outputs = dict(data["outputs"])
    notes = []
    if outputs.get("kubeconfig") == SECRET:
        region = (outputs.get("platformConfig") or {}).get("region") or "us-east-1"
        outputs["kubeconfig"] = fake_kubeconfig(str(outputs.get("clusterName")), region)
        notes.append(
            f"platform output kubeconfig: the plan of {data['project']}/{data['stack']} ({source}) masks it ({SECRET}); this offline "
            f"plan's Kubernetes provider uses a stand-in kubeconfig of cluster {outputs.get('clusterName')} (pulumi up reads the "
            "platform's real one through the StackReference)"
        )
    return PlatformPlan(source, data["project"], data["stack"], outputs, tuple(notes))


def default_platform_folder(stack_config: StackConfig, out: Path) -> Path | None:
    """An experiment's platform plan by default: the folder beside ``out`` named after the
    platform's stack (build/<platform> beside build/<experiment>); None for other stacks."""
    from ... import experiment

    if experiment.role_of(stack_config.values) != "experiment":
        return None
    return out.parent / experiment.platform_stack(stack_config.values).rsplit("/", 1)[-1]


def platform_for(stack_config: StackConfig, given: str | None, out: Path) -> PlatformPlan | None:
    """The platform plan an experiment reads: the folder ``given`` (``--platform``), else the
    default one beside ``out`` when it exists; None for other stacks. ``--platform`` given for a stack
    that is not an experiment is refused (StackConfigError): it would be ignored."""
    if given is not None:
        from ... import experiment

        role = experiment.role_of(stack_config.values)
        if role != "experiment":
            raise StackConfigError(
                f"--platform {given}: stack {stack_config.stack} is not an experiment (platform.role: {role}), so it reads no "
                "platform's plan; --platform is for an experiment stack (platform.role: experiment): leave it out"
            )
    folder = Path(given) if given else default_platform_folder(stack_config, out)
    return load_platform(folder) if folder is not None and (given or folder.exists()) else None


def settings_of(stack_config: StackConfig, platform: PlatformPlan | None = None) -> config_mod.StackSettings:
    """Validate the stack's config exactly as the program will (raises ConfigError); an
    experiment's with its platform's outputs (StackConfigError without them)."""
    if not stack_config.problems:
        return _settings_of(stack_config, platform)
    # the edits that could not be applied, with every problem of the rest: one round of fixes
    try:
        _settings_of(stack_config, platform)
    except config_mod.ConfigError as err:
        raise config_mod.ConfigError([*stack_config.problems, *err.problems]) from None
    except StackConfigError as err:
        raise config_mod.ConfigError([*stack_config.problems, str(err)]) from None
    raise config_mod.ConfigError(stack_config.problems)


def _settings_of(stack_config: StackConfig, platform: PlatformPlan | None) -> config_mod.StackSettings:
    from ... import experiment
    from ...loading import RULES

    if experiment.role_of(stack_config.values) != "experiment":
        return settings_from_config(stack_config.values, stack_config.stack)
    view = experiment_platform(stack_config, platform)
    return experiment.experiment_settings(stack_config.values, stack_config.stack, view, RULES)


def experiment_platform(stack_config: StackConfig, platform: PlatformPlan | None) -> Any:
    """The experiment's platform (rlinf_eks.experiment.Platform) from its plan, or StackConfigError."""
    from ... import experiment

    name = experiment.platform_stack(stack_config.values)
    if platform is None:
        stack = name.rsplit("/", 1)[-1]
        raise StackConfigError(
            f"stack {stack_config.stack} is an experiment on platform.stack={name!r}: plan the platform first "
            f"(python -m rlinf_eks plan {stack}) and pass its plan, --platform build/{stack}"
        )
    return experiment.Platform(name, platform.outputs_for(name))


def make_plan(stack_config: StackConfig, platform: PlatformPlan | None = None) -> Plan:
    """Validate, then run the program under mocks and collect the plan. An experiment needs its
    platform's plan: the mocks answer its StackReference with the platform's outputs."""
    from ...program import run_program

    settings = settings_of(stack_config, platform)
    references = {}
    if settings.platform.role == "experiment":
        view = experiment_platform(stack_config, platform)
        references[view.stack] = view.values
    run = engine.run(
        run_program,
        project=stack_config.project,
        stack=stack_config.stack,
        config=stack_config.flat(),
        secret_keys=stack_config.secret_keys,
        region=settings.region,
        stack_references=references,
        vpc_id=settings.network.vpc_id,
    )
    notes = platform.notes if platform is not None and references else ()
    return plan_of_run(run, settings, notes)


def plan_of_run(run: engine.Run, settings: config_mod.StackSettings | None = None, notes: Sequence[str] = ()) -> Plan:
    """The plan of a recorded run: resources sorted by URN, outputs by name (what plan.json holds);
    with this project's ``settings``, the example values to replace too. (rlinf_eks.testing plans
    any other Pulumi program through it.)"""
    from ... import loading
    from ...config.unchecked import unchecked
    from ...placeholders import find_placeholders

    from ...storage_budget import storage_warnings

    resources = sorted((r.to_json() for r in run.registrations), key=lambda r: r["urn"])
    placeholders = find_placeholders(settings) if settings is not None else []
    budget_warnings = storage_warnings(settings) if settings is not None else []
    return Plan(
        run.project, run.stack, resources, dict(sorted(run.outputs.items())), [*notes, *run.warnings, *budget_warnings], settings, placeholders, run.region,
        unchecked(settings, loading.clock()) if settings is not None else [],
    )


def check_output(out: Path) -> None:
    """Raise OutputError unless the plan can be written into ``out`` (rlinf_eks.offline.outputs.output, the
    check of every command's output folder): run before the plan, so a bad --out costs nothing."""
    _check_output(out, PLAN_FOLDER)


def _cluster(data: dict[str, Any]) -> tuple[Any, Any]:
    """(name, version) of the plan's EKS cluster, (None, None) without one."""
    from ...plan_reader import EKS_CLUSTERS

    inputs = next((r["inputs"] for r in data.get("resources") or () if r.get("type") in EKS_CLUSTERS and r.get("inputs")), {})
    return inputs.get("name"), inputs.get("version")


def downgrade_problems(plan: Plan, out: Path) -> list[str]:
    """The previous plan of the same stack in ``out`` (the one reviewed last, which a plan-first
    workflow deploys): a Kubernetes minor below its cluster's is refused (EKS moves only forward;
    ``pulumi up`` would fail at the cluster after changing everything before it), unless the
    cluster itself is a new one (another name). One problem line, or none."""
    try:
        previous = json.loads((out / PLAN_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    if not isinstance(previous, dict) or (previous.get("project"), previous.get("stack")) != (plan.project, plan.stack):
        return []
    from ..diff.verdicts import minor

    (old_name, old), (new_name, new) = _cluster(previous), _cluster(plan.to_json())
    if old_name != new_name or minor(old) is None or minor(new) is None or minor(new) >= minor(old):
        return []
    return [
        config_mod.errors.problem_line(
            "cluster.kubernetesVersion", new,
            f"the last plan of this stack in {out} has {old}, and EKS cannot downgrade a cluster: keep {old} or later "
            "(if that plan was never deployed, plan into another --out or remove it; or build a new cluster, cluster.name)",
        )
    ]


def _previously_written(out: Path) -> set[str]:
    try:
        lines = (out / WRITTEN_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    # Only plain manifest names: the list never lets a plan reach outside manifests/.
    return {line for line in lines if _MANIFEST_NAME.fullmatch(line)}


def write(plan: Plan, out: Path) -> list[str]:
    """Write plan.json, manifests/ and efficiency.json into ``out``; return warnings.

    Everything is written into a folder beside ``out`` first and moved into place at the end
    (rlinf_eks.offline.outputs.output): an interrupted plan leaves ``out`` as it was. A file in manifests/
    is removed only when the previous plan wrote it (listed in ``.rlinf-eks-manifests``) and this
    plan does not; any other file there is left alone and named in a warning. Raises OutputError
    when ``out`` cannot be written.
    """
    files = plan.manifests()
    try:
        with staged(out, PLAN_FOLDER) as folder:
            manifests = folder / MANIFESTS
            manifests.mkdir()
            (folder / PLAN_FILE).write_text(plan.dumps())
            for file_name, obj in files.items():
                (manifests / file_name).write_text(yaml.safe_dump(obj, sort_keys=True, default_flow_style=False))
            (folder / WRITTEN_FILE).write_text("".join(f"{name}\n" for name in files))
            report = efficiency_of_plan(plan)
            if report is not None:
                (folder / EFFICIENCY_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
                from .efficiency_svg import efficiency_svg

                (folder / EFFICIENCY_PICTURE).write_text(efficiency_svg(report))
            policy_files = deployer_policy.files(deployer_policy_of_plan(plan), plan.stack)
            for file_name, text in policy_files.items():
                (folder / file_name).write_text(text)
            stale = [f"{MANIFESTS}/{name}" for name in sorted(_previously_written(out) - set(files))]
            stale += [p.name for p in out.glob("deployer-policy-*.json") if p.name not in policy_files]
            commit(folder, out, stale)
    except OSError as err:
        raise OutputError(f"cannot write in {out}: {err.strerror or err} ({getattr(err, 'filename', '') or out})") from None
    foreign = sorted(p.name for p in (out / MANIFESTS).iterdir() if p.name not in files)
    return [f"{out / MANIFESTS / name}: not written by this plan, left in place" for name in foreign]


def deployer_policy_of_plan(plan: Plan) -> dict[str, Any]:
    """The policy of the identity that runs ``pulumi up`` (offline/deployer/deployer_policy.py), scoped to the
    stack's region, cluster, names and tag, with the lookups an existing cluster or VPC makes."""
    invokes: list[str] = []
    if plan.settings is not None and plan.settings.cluster.existing:
        invokes += ["aws:eks/getCluster:getCluster", "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider"]
    if plan.settings is not None and plan.settings.network.vpc_id:
        invokes += ["aws:ec2/getVpc:getVpc", "aws:ec2/getSubnet:getSubnet"]
    # the roles pulumi-eks creates inside the cluster component are the stack's too
    resources = [*plan.resources, *plan.not_planned]
    target = deployer_policy.target_of(resources, stack=plan.stack, region=plan.region or "us-east-1", cluster=_cluster_name(plan))
    return deployer_policy.deployer_policy(plan.resources, invokes, target)


def _cluster_name(plan: Plan) -> str:
    """The cluster the stack creates or joins: the planned cluster's name, else the one its EKS
    resources name (an experiment's platform cluster), else the setting's default."""
    for r in plan.resources:
        inputs = r.get("inputs") or {}
        if r["type"] == "eks:index:Cluster" and isinstance(inputs.get("name"), str):
            return inputs["name"]
    for r in plan.resources:
        name = (r.get("inputs") or {}).get("clusterName")
        if r["type"].startswith("aws:eks/") and isinstance(name, str):
            return name
    settings = plan.settings
    return (settings.cluster.name if settings is not None else None) or f"rlinf-{plan.stack}"


def efficiency_of_plan(plan: Plan) -> dict[str, Any] | None:
    """The plan's efficiency report (offline/outputs/efficiency.py), or None for a plan without settings
    and for an experiment's (its nodes and their cost are its platform's: that plan's report)."""
    from .efficiency import efficiency_report

    if plan.settings is None or plan.settings.platform.role == "experiment":
        return None
    return efficiency_report(plan, plan.settings)


def violations_of_plan(plan: Plan) -> list[Violation]:
    """The policies (rlinf_eks.policies, the same functions as the CrossGuard pack) over the plan."""
    from ... import policies

    return policies.evaluate(plan.resources, policies.options_from_settings(plan.settings))
