"""The RBAC verify needs, for a user who is not a cluster admin: a ClusterRole that reads what the
checks look at (nodes, pods, the add-ons' DaemonSets and Deployments, CRDs, Kueue's queues and
priority classes, namespaces) and a Role, in the verify namespace and in the training namespace (the
all-reduce across nodes runs there, beside the shared filesystem's claim), that creates and deletes
the verify Jobs, their ConfigMaps, Services and NetworkPolicies and reads their pods' logs. A
SelfSubjectReview needs no grant. A non-admin user needs the verify namespace created for them
(the dry run's Namespace manifest): verify creates it only where it may. Bind them to the user's group (``--dry-run --out DIR`` writes
them; docs/deploying.md, Verify)."""

from __future__ import annotations

from typing import Any

from .expect import Expectation
from .smoke import MANAGED_BY

NAME = "rlinf-eks-verify"
LABELS = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/part-of": "rlinf-eks"}
READ = ["get", "list", "watch"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def rbac_objects(expect: Expectation, verify_namespace: str) -> list[dict[str, Any]]:
    """The ClusterRole and the two Roles (bind them to your group with a ClusterRoleBinding and
    RoleBindings)."""
    cluster_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME, "labels": dict(LABELS)},
        "rules": [
            _rule([""], ["nodes", "pods", "namespaces", "serviceaccounts", "persistentvolumeclaims"], READ),
            _rule(["apps"], ["daemonsets", "deployments"], READ),
            _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], READ),
            _rule(["kueue.x-k8s.io"], ["clusterqueues", "localqueues", "workloadpriorityclasses"], READ),
        ],
    }
    namespaced = [
        _rule(["batch"], ["jobs"], ["create", "delete", "get", "list"]),
        _rule(["batch"], ["jobs/status"], ["get"]),
        _rule([""], ["configmaps", "services"], ["create", "delete", "get"]),
        _rule(["networking.k8s.io"], ["networkpolicies"], ["create", "delete", "get"]),
        _rule([""], ["pods", "pods/log"], READ),
    ]
    roles = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": NAME, "namespace": ns, "labels": dict(LABELS)}, "rules": namespaced}
        for ns in dict.fromkeys([verify_namespace, expect.training_namespace])
    ]
    return [cluster_role, *roles]
