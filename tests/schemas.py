"""Validation helpers: built-in Kubernetes objects against the cluster version's OpenAPI schema
(kubernetes-validate, strict), KubeRay custom resources against the v1.7.0 CRDs in
/work/shared/schemas/kuberay/ and JobSets against tests/data/, with unknown fields rejected."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.harness import SHARED, require_shared

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
def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    """A Draft 7 validator of ``kind``'s v1 openAPIV3Schema; skips (fails under
    RLINF_EKS_REQUIRE_SHARED=1) when the schemas are absent."""
    path = require_shared(KUBERAY_SCHEMAS / CRD_FILES[kind], "KubeRay CRD schemas")
    crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = closed(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    return jsonschema.Draft7Validator(schema)


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
