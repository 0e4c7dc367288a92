"""Who may reach the Ray pods: a NetworkPolicy ``rlinf-training`` over the training pods.

The Ray head listens on every interface (``--dashboard-host=0.0.0.0``, the GCS on 6379, the client
server on 10001) with Ray's token authentication off, so anything that reaches a training pod can
submit jobs that run as the training service account (IRSA: the checkpoint bucket). The policy
admits:

- the training pods from each other, on every port and protocol: Ray's GCS, raylet, object
  manager and worker ports, and NCCL's and Gloo's bootstrap and socket transports all use
  ephemeral ports (field notes, section 3);
- the dashboard (8265, Ray's job submission API too) from any pod in the cluster: the KubeRay
  operator (in its own namespace) and the RayJob's submitter pod use it, and so may people.

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

from typing import Mapping

import pulumi_kubernetes as k8s

from .manual import RAY_DASHBOARD_PORT

NAME = "rlinf-training"

net = k8s.networking.v1
meta = k8s.meta.v1


def training_network_policy_spec(pod_labels: Mapping[str, str]) -> net.NetworkPolicySpecArgs:
    """The policy over the pods with ``pod_labels`` (the training pods, and only those)."""
    training_pods = meta.LabelSelectorArgs(match_labels=dict(pod_labels))
    return net.NetworkPolicySpecArgs(
        pod_selector=training_pods,
        policy_types=["Ingress"],
        ingress=[
            # no ports: every port and protocol
            net.NetworkPolicyIngressRuleArgs(from_=[net.NetworkPolicyPeerArgs(pod_selector=training_pods)]),
            # an empty namespaceSelector: every pod of every namespace, nothing outside the cluster
            net.NetworkPolicyIngressRuleArgs(
                from_=[net.NetworkPolicyPeerArgs(namespace_selector=meta.LabelSelectorArgs())],
                ports=[net.NetworkPolicyPortArgs(protocol="TCP", port=RAY_DASHBOARD_PORT)],
            ),
        ],
    )
