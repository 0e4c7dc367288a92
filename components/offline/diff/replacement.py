"""Which changed inputs make Pulumi replace an object instead of updating it in place.

Three sources decide, and the offline diff applies them all:

- the resource's ``replaceOnChanges`` option (plan.json ``options.replaceOnChanges``): fields the
  program marks because the API server or an admission webhook refuses to change them (a JobSet's
  ``spec.replicatedJobs``, a Job's ``podFailurePolicy``, ...); the engine replaces on any change at
  or below such a path (pulumi ``applyReplaceOnChanges``: ``PropertyPath.Contains``);
- the force-new fields pulumi-kubernetes itself replaces on, :data:`FORCE_NEW` below;
- the force-new inputs of each AWS type, from terraform-provider-aws (:mod:`.aws_force_new`), and
  those it replaces on under a condition (:func:`conditional`).

:data:`FORCE_NEW` holds the kinds the stacks render, copied from pulumi-kubernetes
``provider/pkg/provider/diff.go`` (``forceNew``, ``core``, ``job``, ``roleBinding``,
``metadataForceNewProperties``) at commit 94977969d64112b04e19945818a7d5d5f38f631d (v4.32.0 and
27 commits, July 2026; the table's content is unchanged since #3164, August 2024, v4.17), and
``provider/pkg/provider/helm_release.go`` (a Release's ``.name`` and ``.namespace``). A ConfigMap's
and a Secret's data are force-new because the stacks' Kubernetes provider leaves
``enableConfigMapMutable`` and ``enableSecretMutable`` off.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ...plan_reader import HELM_PREFIX, KUBERNETES_PREFIX, PROVIDER_PREFIX
from .aws_force_new import FORCE_NEW as AWS_FORCE_NEW

_METADATA = ("metadata.name", "metadata.namespace")
_SELECTOR = ("matchExpressions", "matchExpressions.key", "matchExpressions.operator", "matchExpressions.values", "matchLabels")
_PV_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
    "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk", "portworxVolume",
    "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
)

FORCE_NEW: dict[str, tuple[str, ...]] = {
    "kubernetes:batch/v1:Job": (
        "spec.completions", "spec.parallelism", "spec.selector", "spec.template", *(f"spec.selector.{s}" for s in _SELECTOR),
    ),
    "kubernetes:core/v1:PersistentVolume": tuple(f"spec.{source}" for source in _PV_SOURCES),
    "kubernetes:core/v1:PersistentVolumeClaim": (
        "spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName",
        *(f"spec.selector.{s}" for s in _SELECTOR),
    ),
    "kubernetes:core/v1:Secret": ("type", "stringData", "data"),
    "kubernetes:core/v1:ConfigMap": ("binaryData", "data"),
    "kubernetes:core/v1:Service": ("spec.clusterIP",),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("roleRef",),
    "kubernetes:helm.sh/v3:Release": ("name", "namespace"),
}
"""pulumi-kubernetes' built-in force-new input paths by resource type (besides metadata.name and
metadata.namespace, which replace every Kubernetes object)."""

_TOKEN = re.compile(r'\.?([A-Za-z0-9_$-]+|\*)|\[(\d+|\*|"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.-]+=[^\]]*)\]')


def segments(path: str) -> list[str]:
    """``spec.replicatedJobs[0].template`` -> ``["spec", "replicatedJobs", "0", "template"]``;
    ``data["launch.sh"]`` -> ``["data", "launch.sh"]``; ``containers[name=ray]`` keeps ``name=ray``
    (it matches a ``*`` like an index does)."""
    out: list[str] = []
    for match in _TOKEN.finditer(path):
        key, index = match.groups()
        if key is not None:
            out.append(key)
        elif index.startswith('"'):
            out.append(index[1:-1].replace('\\"', '"'))
        else:
            out.append(index)
    return out


def contains(prefix: str, path: str) -> bool:
    """Whether ``path`` is ``prefix`` or below it (``*`` in ``prefix`` matches any one key or index)."""
    want, have = segments(prefix), segments(path)
    return len(have) >= len(want) and all(w in ("*", h) for w, h in zip(want, have))


def replacement_paths(resource: dict[str, Any]) -> tuple[str, ...]:
    """Every input path of ``resource`` (plan.json shape) whose change replaces it."""
    type_ = resource.get("type", "")
    built_in: Iterable[str] = FORCE_NEW.get(type_, ())
    if type_ in AWS_FORCE_NEW:
        built_in = AWS_FORCE_NEW[type_].paths
    if type_.startswith(KUBERNETES_PREFIX) and not type_.startswith((HELM_PREFIX, PROVIDER_PREFIX)):
        built_in = (*_METADATA, *built_in)
    explicit = (resource.get("options") or {}).get("replaceOnChanges") or ()
    return (*built_in, *explicit)


def forced(resource: dict[str, Any], input_paths: Iterable[str]) -> list[str]:
    """The changed input paths (relative to ``inputs``) that replace ``resource``."""
    rules = replacement_paths(resource)
    return sorted({p for p in input_paths if any(contains(rule, p) for rule in rules)})


_RULE_SOURCES = ("cidrIpv4", "cidrIpv6", "prefixListId", "referencedSecurityGroupId")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def conditional(resource: dict[str, Any], old_inputs: dict[str, Any], changed: Iterable[str]) -> tuple[list[str], list[str]]:
    """The changed paths of an AWS resource that its provider replaces on only under a condition:
    (those whose condition holds, ``path: condition`` lines of those this diff cannot judge). FSx
    for Lustre's storage capacity is judged (it replaces when it shrinks, or on any change of a
    SCRATCH_1 file system), and so is a security group rule's source kind (a CIDR becoming a
    referenced group replaces the rule; a new CIDR does not); the others are named with their
    condition."""
    spec = AWS_FORCE_NEW.get(resource.get("type", ""))
    if spec is None:
        return [], []
    inputs = resource.get("inputs") or {}
    holds: list[str] = []
    unknown: list[str] = []
    for path, condition in spec.conditional:
        hits = [p for p in changed if contains(path, p)]
        if not hits:
            continue
        if path == "storageCapacity":
            old, new = _number(old_inputs.get(path)), _number(inputs.get(path))
            if inputs.get("deploymentType") == "SCRATCH_1" or (old is not None and new is not None and new < old):
                holds += hits
            continue
        if path in _RULE_SOURCES:
            # a security group rule's source kind: which of its alternatives is set
            if {k for k in _RULE_SOURCES if old_inputs.get(k)} != {k for k in _RULE_SOURCES if inputs.get(k)}:
                holds += hits
            continue
        unknown.append(f"{path}: {condition}")
    return holds, unknown
