"""Validation helpers: built-in Kubernetes objects against the cluster version's OpenAPI schema
(kubernetes-validate, strict), KubeRay custom resources against the v1.7.0 CRDs in
/work/shared/schemas/kuberay/ and JobSets against tests/data/, with unknown fields rejected; Helm
values against the pinned charts' own values.yaml in ../shared/schemas/helm/."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from rlinf_eks import pins
from tests.harness import SHARED, require_shared
from tests.reference import reference

KUBERAY_SCHEMAS = SHARED / "schemas" / "kuberay"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}


def closed(schema: Any) -> Any:
    """``additionalProperties: false`` on every object schema that lists ``properties`` and says
    nothing about additional ones: plain jsonschema accepts unknown fields that the API server
    would silently prune, so a typo would pass (field notes, section 2)."""
    if isinstance(schema, dict):
        out = {k: closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [closed(v) for v in schema]
    return schema


@lru_cache(maxsize=None)
def _parsed(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=yaml.CSafeLoader)


def crd_schema(path: Path, version: str, what: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``version`` in the CRD file ``path``; skips (fails under
    RLINF_EKS_REQUIRE_SHARED=1) naming ``what`` when the file is absent. Each file is parsed once per
    process, with libyaml (the CRDs are up to 1.4 MB): the result is shared, copy it to change it."""
    crd = _parsed(require_shared(path, what))
    return next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]


@lru_cache(maxsize=None)
def closed_crd_validator(path: Path, version: str, what: str) -> jsonschema.Draft7Validator:
    """A Draft 7 validator of :func:`crd_schema`'s schema with unknown fields rejected (built once
    per process: the schemas are large)."""
    return jsonschema.Draft7Validator(closed(copy.deepcopy(crd_schema(path, version, what))))


def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    """A Draft 7 validator of ``kind``'s v1 openAPIV3Schema; skips (fails under
    RLINF_EKS_REQUIRE_SHARED=1) when the schemas are absent."""
    return closed_crd_validator(KUBERAY_SCHEMAS / CRD_FILES[kind], "v1", "KubeRay CRD schemas")


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every schema violation of a RayCluster / RayJob, as 'path: message' lines."""
    validator = crd_validator(obj["kind"])
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


def builtin_errors(obj: dict[str, Any], kubernetes_version: str) -> list[str]:
    """kubernetes-validate's strict verdict on a built-in object (unknown fields rejected)."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as err:
        return [str(err)]
    return []


JOBSET_SCHEMA = Path(__file__).parent / "data" / "jobset-v1alpha2-spec.yaml"


@lru_cache(maxsize=None)
def _jobset_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(closed(yaml.safe_load(JOBSET_SCHEMA.read_text())))


def jobset_errors(obj: dict[str, Any], kubernetes_version: str) -> list[str]:
    """A JobSet against the JobSet-level part of its CRD schema (tests/data, unknown fields
    rejected), and each replicatedJob's Job template as a batch/v1 Job (kubernetes-validate)."""
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _jobset_validator().iter_errors(obj)]
    for rjob in (obj.get("spec") or {}).get("replicatedJobs") or []:
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{obj['metadata']['name']}-{rjob['name']}-0"},
               "spec": rjob["template"]["spec"]}
        errors += [f"replicatedJobs[{rjob['name']}]: {e}" for e in builtin_errors(job, kubernetes_version)]
    return errors


# --- Kueue (v0.19.2 CRDs in ../shared/schemas/kueue): structure and CEL rules ---------------------

KUEUE_SCHEMAS = SHARED / "schemas" / "kueue"
KUEUE_CRD_FILES = {
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "Topology": "kueue.x-k8s.io_topologies.yaml",
    "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
}


def _kueue_crd(kind: str, version: str) -> tuple[Path, str, str]:
    return KUEUE_SCHEMAS / KUEUE_CRD_FILES[kind], version, "Kueue CRD schemas"


def kueue_schema(kind: str, version: str) -> dict[str, Any]:
    """``kind``'s openAPIV3Schema at ``version`` (v1beta2, v1beta1), as released."""
    return crd_schema(*_kueue_crd(kind, version))


def cel_rules(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every ``x-kubernetes-validations`` rule of a schema, with the path of the node it sits on."""
    found = [(path or ".", rule) for rule in (schema.get("x-kubernetes-validations") or [])]
    for key, child in (schema.get("properties") or {}).items():
        found += cel_rules(child, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        found += cel_rules(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += cel_rules(schema["additionalProperties"], f"{path}{{}}")
    return found


def is_transition_rule(rule: dict[str, Any]) -> bool:
    """A rule that reads ``oldSelf`` runs on updates only (Kubernetes: transition rules)."""
    return "oldSelf" in rule["rule"]


def _kubernetes_cel_functions() -> dict[str, Any]:
    """The Kubernetes CEL string extensions the CRDs use that cel-python lacks (Karpenter's rules
    call ``split`` and ``find``): ``s.split(sep)`` (all parts) and ``s.find(regex)`` (the first
    match, or "" without one), as k8s.io/apiserver's cel library defines them."""
    import re

    from celpy import celtypes

    def split(text: Any, sep: Any) -> Any:
        return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(sep))])

    def find(text: Any, pattern: Any) -> Any:
        match = re.search(str(pattern), str(text))
        return celtypes.StringType(match.group(0) if match else "")

    return {"split": split, "find": find}


@lru_cache(maxsize=None)
def _cel_program(rule: str) -> Any:
    """One compiled program per rule text (Karpenter's CRDs repeat rules over 30-entry lists)."""
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(rule), functions=_kubernetes_cel_functions())


@lru_cache(maxsize=65536)
def _cel_holds(rule: str, value: str) -> bool:
    """One rule on one value (its JSON): CEL is a pure function of ``self``, and the same values recur
    across the objects under test (a NodePool's requirements, an EC2NodeClass's interfaces), so each
    pair is evaluated once per process; cel-python evaluates a rule in about 10 ms."""
    import celpy

    verdict = _cel_program(rule).evaluate({"self": celpy.json_to_cel(json.loads(value))})
    return verdict is True or (isinstance(verdict, celpy.celtypes.BoolType) and bool(verdict))


def cel_errors(schema: dict[str, Any], obj: Any, path: str = "") -> list[str]:
    """Evaluate every create-time CEL rule of ``schema`` on ``obj`` as the API server would: each
    rule on the value at its node (absent values are not checked), ``self`` bound to it; a rule
    that is false reports its message."""
    errors: list[str] = []
    rules = [rule for rule in schema.get("x-kubernetes-validations") or [] if not is_transition_rule(rule)]
    value = json.dumps(obj, sort_keys=True) if rules else ""
    for rule in rules:
        if not _cel_holds(rule["rule"], value):
            errors.append(f"{path or '.'}: {rule.get('message') or rule['rule']} (rule: {rule['rule']})")
    if isinstance(obj, dict):
        for key, child in (schema.get("properties") or {}).items():
            if key in obj:
                errors += cel_errors(child, obj[key], f"{path}.{key}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in obj.items():
                errors += cel_errors(extra, value, f"{path}.{key}")
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            errors += cel_errors(schema["items"], item, f"{path}[{i}]")
    return errors


def kueue_errors(obj: dict[str, Any]) -> list[str]:
    """A Kueue object against its CRD at its apiVersion: the structural schema (unknown fields
    rejected) and the CEL rules a create would run."""
    kind, version = obj["kind"], obj["apiVersion"].split("/")[1]
    validator = closed_crd_validator(*_kueue_crd(kind, version))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    return errors + cel_errors(kueue_schema(kind, version), obj)


# --- Karpenter (v1.14.1 CRDs and chart values in ../shared/schemas/karpenter) ---------------------

KARPENTER_SCHEMAS = SHARED / "schemas" / "karpenter"
KARPENTER_CRD_FILES = {
    "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml",
    "NodePool": "karpenter.sh_nodepools.yaml",
    "NodeClaim": "karpenter.sh_nodeclaims.yaml",
}
KARPENTER_CHART = f"karpenter-{pins.version('karpenter')}"
"""The chart whose values.yaml is ../shared/schemas/karpenter/values.yaml (not under schemas/helm)."""
KARPENTER_PASSTHROUGH = frozenset({"nodeSelector"})
"""Its keys rendered with toYaml whatever they hold (no meta.json for it in ../shared): the chart's
templates/deployment.yaml at v1.14.1 renders ``{{- with .Values.nodeSelector }} nodeSelector:
{{- toYaml . }}``; values.yaml's default ``{kubernetes.io/os: linux}`` is an example, not a schema."""


def _karpenter_crd(kind: str, version: str) -> tuple[Path, str, str]:
    return KARPENTER_SCHEMAS / KARPENTER_CRD_FILES[kind], version, "Karpenter CRD schemas"


def karpenter_schema(kind: str, version: str = "v1") -> dict[str, Any]:
    return crd_schema(*_karpenter_crd(kind, version))


def karpenter_errors(obj: dict[str, Any]) -> list[str]:
    """A NodePool / EC2NodeClass against the v1.14.1 CRD: the structural schema (unknown fields
    rejected) and every create-time CEL rule."""
    kind, version = obj["kind"], obj["apiVersion"].split("/")[1]
    validator = closed_crd_validator(*_karpenter_crd(kind, version))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    return errors + cel_errors(karpenter_schema(kind, version), obj)


JOBSET_CRD = reference("schemas/jobset/jobset.x-k8s.io_jobsets.yaml")


def jobset_crd_errors(obj: dict[str, Any]) -> list[str]:
    """A JobSet against the released CRD of the pinned version (tests/reference.py), unknown fields rejected."""
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in closed_crd_validator(JOBSET_CRD, "v1alpha2", "the JobSet CRD").iter_errors(obj)]


# --- Helm values against the pinned charts ------------------------------------------------------------
#
# Helm renders a chart with whatever values it is given and silently ignores a key the chart does not
# read: a misspelt or moved key installs the chart's default instead. So every key a release sets must
# be one the chart's own values.yaml has, or one its meta.json (shared data, read from the chart's
# templates) lists as passed through (``passthrough``: rendered with toYaml, any content) or read by a
# template without a default in values.yaml (``template_keys``).

HELM_CHARTS = SHARED / "schemas" / "helm"

# Keys below a subchart of kube-prometheus-stack, whose own values.yaml is not in ../shared (the
# chart's meta.json says their keys are passed through); each is a documented key of that subchart.
SUBCHART_KEYS = {
    "kube-prometheus-stack": frozenset(
        {
            "grafana.nodeSelector",  # grafana chart: nodeSelector
            "grafana.grafana.ini",  # grafana chart: grafana.ini (rendered into grafana.ini)
            "kube-state-metrics.nodeSelector",  # kube-state-metrics chart: nodeSelector
            "prometheus-node-exporter.tolerations",  # prometheus-node-exporter chart: tolerations
            "prometheus-node-exporter.resources",  # prometheus-node-exporter chart: resources
        }
    ),
}


def chart_values(chart: str) -> dict[str, Any]:
    """The values.yaml of ``chart`` (a folder of ../shared/schemas/helm: name-version; Karpenter's in
    ../shared/schemas/karpenter), parsed once per process with libyaml (kube-prometheus-stack's is
    200 KB): shared, copy it to change it."""
    if chart == KARPENTER_CHART:
        return _parsed(require_shared(KARPENTER_SCHEMAS / "values.yaml", "the karpenter chart's values"))
    return _parsed(require_shared(reference(f"schemas/helm/{chart}/values.yaml"), f"the {chart} chart's values"))


@lru_cache(maxsize=None)
def chart_passthrough(chart: str) -> frozenset[str]:
    """The key paths of ``chart`` that take values its values.yaml does not list (meta.json's
    passthrough and template_keys, and the subcharts' keys above)."""
    if chart == KARPENTER_CHART:  # no meta.json in ../shared: its toYaml keys, read from its templates
        return KARPENTER_PASSTHROUGH
    meta = json.loads(require_shared(reference(f"schemas/helm/{chart}/meta.json"), f"the {chart} chart's metadata").read_text())
    name = chart.rsplit("-", 1)[0]
    return frozenset(meta.get("passthrough") or {}) | frozenset(meta.get("template_keys") or {}) | SUBCHART_KEYS.get(name, frozenset())


def unknown_keys(values: Any, chart: Any, path: str = "", passthrough: frozenset[str] = frozenset()) -> list[str]:
    """Key paths of ``values`` that the chart's values.yaml does not have. A key the chart sets to
    null, a list, a scalar or an empty map (nodeSelector: {}) takes any value; below a ``passthrough``
    path nothing is checked."""
    if path in passthrough or not isinstance(values, dict) or not isinstance(chart, dict) or chart == {}:
        return []
    problems = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in chart:
            if where not in passthrough:
                problems.append(where)
            continue
        problems += unknown_keys(value, chart[key], where, passthrough)
    return problems


def release_chart(inputs: dict[str, Any]) -> str:
    """The ../shared/schemas/helm folder of a helm.sh/v3 Release's chart: its name (the last part of
    an OCI reference) and version, as the chart's Chart.yaml spells them."""
    return f"{inputs['chart'].rstrip('/').rsplit('/', 1)[-1]}-{inputs['version']}"


def release_values_errors(inputs: dict[str, Any]) -> list[str]:
    """Every key a Release's values set that its pinned chart would ignore, each named with the chart."""
    chart = release_chart(inputs)
    keys = unknown_keys(inputs.get("values") or {}, chart_values(chart), passthrough=chart_passthrough(chart))
    return [f"{chart}: values key {key!r} is not in the chart's values.yaml (Helm would ignore it)" for key in keys]
