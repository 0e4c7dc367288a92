"""The training pods' NetworkPolicy: only training pods reach them, on every port; the dashboard
is reachable from inside the cluster; nothing else (the GCS and the Ray client port included).

The rules are read back from what the component registers and evaluated with NetworkPolicy's
semantics (a peer matches by podSelector in the policy's namespace or by namespaceSelector; a rule
without ports admits every port), against the labels of the pods the launcher really renders."""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pytest

from rlinf_eks.workload import RlinfTraining
from tests.harness import STACKS, of_type, one, plan_stack, run_component, settings
from tests.schemas import builtin_errors

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "rlinf"
# NCCL's and Gloo's bootstrap and socket ports are ephemeral; 29500 is torch's default rendezvous
TRAINING_PORTS = [6379, 8265, 10001, 29500, 45678, 52365]


def render(launcher: str, cluster: str = "embedded") -> list[dict[str, Any]]:
    s = settings(
        gpuNodes={"nodeCount": 2},
        kuberay={"enabled": launcher == "kuberay"},
        # rayjob only for the kuberay launcher: it would have no effect on another (refused)
        workload={"launcher": launcher, "namespace": NAMESPACE, **({"rayjob": {"cluster": cluster}} if launcher == "kuberay" else {})},
    )

    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="bkt",
            shared_volume_claim=pulumi.Output.from_input("fsx-claim"),
        )

    return run_component(program)


def training_pod_labels(resources: list[dict[str, Any]], launcher: str, cluster: str) -> list[dict[str, str]]:
    """The labels of every pod the launcher creates, from the rendered templates."""
    if launcher == "manual":
        return [one(resources, "kubernetes:batch/v1:Job", "rlinf-job")["inputs"]["spec"]["template"]["metadata"]["labels"]]
    kind = "RayJob" if cluster == "embedded" else "RayCluster"
    (resource,) = [r for r in of_type(resources, "kubernetes:ray.io/v1:" + kind)]
    spec = resource["inputs"]["spec"]
    spec = spec["rayClusterSpec"] if kind == "RayJob" else spec
    return [spec["headGroupSpec"]["template"]["metadata"]["labels"]] + [
        g["template"]["metadata"]["labels"] for g in spec["workerGroupSpecs"]
    ]


def selects(selector: Optional[dict[str, Any]], labels: dict[str, str]) -> bool:
    assert set(selector or {}) <= {"matchLabels"}, f"not evaluated here: {selector}"
    return all(labels.get(k) == v for k, v in (selector or {}).get("matchLabels", {}).items())


def admitted(policies: list[dict[str, Any]], to: dict[str, str], *, labels: dict[str, str], namespace: str, port: int, protocol: str = "TCP") -> bool:
    """Whether ingress to a pod of the training namespace with labels ``to`` from a pod with
    ``labels`` in ``namespace`` on ``port`` is allowed: NetworkPolicies add up, and a pod that no
    policy selects admits everything."""
    selecting = [p["spec"] for p in policies if selects(p["spec"]["podSelector"], to)]
    if not selecting:
        return True
    return any(_rule_admits(spec, labels=labels, namespace=namespace, port=port, protocol=protocol) for spec in selecting)


def _rule_admits(spec: dict[str, Any], *, labels: dict[str, str], namespace: str, port: int, protocol: str) -> bool:
    for rule in spec.get("ingress", []):
        ports = rule.get("ports")
        if ports and not any(p.get("protocol", "TCP") == protocol and p["port"] == port for p in ports):
            continue
        for peer in rule.get("from", []):
            assert "ipBlock" not in peer
            if "namespaceSelector" in peer:
                # the cluster's namespaces carry only kubernetes.io/metadata.name
                ns_ok = selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": namespace})
                if ns_ok and ("podSelector" not in peer or selects(peer["podSelector"], labels)):
                    return True
            elif namespace == NAMESPACE and selects(peer.get("podSelector"), labels):
                return True
    return False


CASES = [("manual", "embedded"), ("kuberay", "embedded"), ("kuberay", "selector")]


def policies(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["inputs"] for r in of_type(resources, POLICY)]


@pytest.mark.parametrize("launcher,cluster", CASES)
def test_given_a_launcher_when_rendered_then_the_policies_cover_every_training_pod_and_validate(launcher, cluster):
    resources = render(launcher, cluster)
    assert sorted(p["metadata"]["name"] for p in policies(resources)) == ["rlinf-deny-ingress", "rlinf-training"]
    for policy in policies(resources):
        assert policy["metadata"]["namespace"] == NAMESPACE
        assert builtin_errors(policy, "1.35") == []
        assert policy["spec"]["policyTypes"] == ["Ingress"], "egress (DNS, S3, Hugging Face) must stay open"
    training = one(resources, POLICY, "rlinf-network-policy")["inputs"]
    for labels in training_pod_labels(resources, launcher, cluster):
        assert selects(training["spec"]["podSelector"], labels), labels


@pytest.mark.parametrize("launcher,cluster", CASES)
def test_given_the_policies_when_training_pods_talk_then_every_port_is_admitted(launcher, cluster):
    resources = render(launcher, cluster)
    pods = training_pod_labels(resources, launcher, cluster)
    for to in pods:
        for labels in pods:
            for port in TRAINING_PORTS:
                for protocol in ("TCP", "UDP"):
                    assert admitted(policies(resources), to, labels=labels, namespace=NAMESPACE, port=port, protocol=protocol), (labels, port, protocol)


@pytest.mark.parametrize("launcher,cluster", CASES)
def test_given_the_policies_when_another_pod_connects_then_only_the_dashboard_is_admitted(launcher, cluster):
    resources = render(launcher, cluster)
    others = [({"app": "notebook"}, NAMESPACE), ({"app.kubernetes.io/name": "kuberay-operator"}, "ray-system"), ({}, "default")]
    for to in training_pod_labels(resources, launcher, cluster):
        for labels, namespace in others:
            assert admitted(policies(resources), to, labels=labels, namespace=namespace, port=8265)
            for port in (6379, 10001, 52365, 29500):
                assert not admitted(policies(resources), to, labels=labels, namespace=namespace, port=port), (labels, namespace, port)
            assert not admitted(policies(resources), to, labels=labels, namespace=namespace, port=8265, protocol="UDP")


def test_given_the_watchdog_when_rendered_then_it_admits_nothing():
    resources = render("manual")
    watchdog = one(resources, "kubernetes:batch/v1:Job", "rlinf-watchdog")["inputs"]["spec"]["template"]["metadata"]["labels"]
    training = training_pod_labels(resources, "manual", "embedded")[0]
    for labels, namespace in ((training, NAMESPACE), ({}, "default")):
        for port in (8265, 6379, 8080):
            assert not admitted(policies(resources), watchdog, labels=labels, namespace=namespace, port=port)


@pytest.mark.parametrize("stack", STACKS)
def test_given_a_stack_with_network_policies_when_planned_then_the_vpc_cni_enforces_them(stack):
    # EKS stores NetworkPolicies without enforcing them unless the vpc-cni add-on runs its network
    # policy agent (enableNetworkPolicy): without it the policies above would be decoration.
    plan = plan_stack(stack)
    assert of_type(plan, POLICY), "every stack's run renders its NetworkPolicies"
    (cluster,) = of_type(plan, "eks:index:Cluster")
    assert cluster["inputs"]["vpcCniOptions"]["enableNetworkPolicy"] is True
