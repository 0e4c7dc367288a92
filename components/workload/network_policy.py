"""Who may reach the Ray pods: a NetworkPolicy ``rlinf-training`` over the training pods, and
``rlinf-deny-ingress`` over every pod of the workload (the watchdog serves nothing).

The Ray head listens on every interface (``--dashboard-host=0.0.0.0``, the GCS on 6379, the client
server on 10001) with Ray's token authentication off, so anything that reaches a training pod can
submit jobs that run as the training service account (IRSA: the checkpoint bucket). The policy
admits:

- the training pods from each other, on every port and protocol: Ray's GCS, raylet, object
  manager and worker ports, and NCCL's and Gloo's bootstrap and socket transports all use
  ephemeral ports (field notes, section 3);
- the dashboard (8265, Ray's job submission API too) from any pod in the cluster: the KubeRay
  operator (in its own namespace) and the RayJob's submitter pod use it, and so may people;
- with ``observability.backend: prometheus``, Ray's metrics port (8080) and the progress
  supervisor's (9121) from the Prometheus pods of the monitoring namespace, and from nothing else.

Only ingress is restricted. Egress stays open: the trainer pulls models from Hugging Face, the
checkpoint sync reaches S3, MLflow / W&B are wherever the stack points, and DNS must resolve; a
NetworkPolicy can only name such endpoints by IP block. Not affected by any NetworkPolicy (they do
not pass the pod's veth): EFA traffic (the libfabric SRD protocol on the EFA devices, not IP),
FSx for Lustre (the node's kernel client), ``kubectl port-forward`` (entered in the pod's network
namespace by the kubelet), exec probes (KubeRay's).

Enforcement: the VPC CNI enforces NetworkPolicy only when its network policy agent is enabled
(the vpc-cni add-on's ``enableNetworkPolicy``; pulumi-eks ``VpcCniOptionsArgs(enable_network_policy=True)``)
or when another enforcing CNI (Calico, Cilium) runs. Elsewhere the object is stored and inert.
"""

from __future__ import annotations

from typing import Mapping, Optional

import pulumi_kubernetes as k8s

from .kube import PROGRESS_METRICS_PORT, RAY_METRICS_PORT
from .manual import RAY_DASHBOARD_PORT

NAME = "rlinf-training"
# NetworkPolicies add up (a pod admits what any policy that selects it admits): this one isolates
# every pod of the workload, so one that needs no ingress (the watchdog) or one added later admits
# nothing until a policy says what it serves.
DENY_NAME = "rlinf-deny-ingress"

net = k8s.networking.v1
meta = k8s.meta.v1


# the Prometheus pods of kube-prometheus-stack (prometheus-operator labels them so)
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}


def scraper_rule(namespace: str) -> net.NetworkPolicyIngressRuleArgs:
    """Ray's and the progress supervisor's metrics ports from the Prometheus pods of ``namespace`` only."""
    return net.NetworkPolicyIngressRuleArgs(
        from_=[
            net.NetworkPolicyPeerArgs(
                namespace_selector=meta.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": namespace}),
                pod_selector=meta.LabelSelectorArgs(match_labels=dict(PROMETHEUS_POD_LABELS)),
            )
        ],
        ports=[net.NetworkPolicyPortArgs(protocol="TCP", port=port) for port in (RAY_METRICS_PORT, PROGRESS_METRICS_PORT)],
    )


def training_network_policy_spec(pod_labels: Mapping[str, str], scraper_namespace: Optional[str] = None) -> net.NetworkPolicySpecArgs:
    """The policy over the pods with ``pod_labels`` (the training pods, and only those);
    ``scraper_namespace``: the namespace whose Prometheus may scrape Ray's metrics (None: none)."""
    training_pods = meta.LabelSelectorArgs(match_labels=dict(pod_labels))
    scrapers = [scraper_rule(scraper_namespace)] if scraper_namespace else []
    return net.NetworkPolicySpecArgs(
        pod_selector=training_pods,
        policy_types=["Ingress"],
        ingress=[
            *scrapers,
            # no ports: every port and protocol
            net.NetworkPolicyIngressRuleArgs(from_=[net.NetworkPolicyPeerArgs(pod_selector=training_pods)]),
            # an empty namespaceSelector: every pod of every namespace, nothing outside the cluster
            net.NetworkPolicyIngressRuleArgs(
                from_=[net.NetworkPolicyPeerArgs(namespace_selector=meta.LabelSelectorArgs())],
                ports=[net.NetworkPolicyPortArgs(protocol="TCP", port=RAY_DASHBOARD_PORT)],
            ),
        ],
    )


def deny_ingress_spec(workload_labels: Mapping[str, str]) -> net.NetworkPolicySpecArgs:
    """Every pod with ``workload_labels`` admits no ingress beyond what other policies admit."""
    return net.NetworkPolicySpecArgs(
        pod_selector=meta.LabelSelectorArgs(match_labels=dict(workload_labels)),
        policy_types=["Ingress"],
    )
