"""The EKS cluster: a new ``pulumi_eks.Cluster`` hardened for a training platform, or an existing
cluster attached by name and kubeconfig.

A new cluster has API authentication with access entries, an IAM OIDC provider (IRSA) and the Pod
Identity agent, a private endpoint (public only for listed CIDRs), control-plane logs, KMS
envelope encryption of Secrets, no default node group, and a small on-demand system node group
for operators, CoreDNS and device-plugin controllers.

The stack config requires a choice of how `pulumi up` reaches the endpoint (public CIDRs or
``deployFromVpc``): the same run creates Kubernetes objects through it (a rule of the config
package, ``rlinf_eks.config``).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from .config import ClusterSettings, ConfigError
from .node_role import WORKER_NODE_POLICIES, eks_node_role
from .scheduling import SYSTEM_NODE_LABELS

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
SYSTEM_NODE_POLICIES = WORKER_NODE_POLICIES
# EKS's node health agent (EKS User Guide, "Detect node health issues and enable automatic node repair")
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"


def access_entries_for(admin_role_arns: Sequence[str]) -> dict[str, eks.AccessEntryArgs]:
    """One cluster-scoped AmazonEKSClusterAdminPolicy access entry per admin role, keyed by the
    role's name (stable across reorderings of the config list). The policy ARN takes the role
    ARN's partition, so GovCloud and China work too."""
    entries: dict[str, eks.AccessEntryArgs] = {}
    for arn in admin_role_arns:
        partition = arn.split(":")[1]
        key = "admin-" + re.sub(r"[^a-zA-Z0-9-]", "-", arn.rsplit("/", 1)[-1]).lower()
        entries[key] = eks.AccessEntryArgs(
            principal_arn=arn,
            access_policies={
                "cluster-admin": eks.AccessPolicyAssociationArgs(
                    policy_arn=f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}",
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                )
            },
        )
    return entries


def endpoint_access(settings: ClusterSettings) -> str:
    """How `pulumi up` and kubectl reach the API endpoint, in one sentence."""
    if settings.existing:
        return "existing cluster: reached as its kubeconfig (rlinf-eks:kubeconfig) says"
    if settings.endpoint_public_access_cidrs:
        return f"public endpoint from {', '.join(settings.endpoint_public_access_cidrs)} only, and the private endpoint from inside the VPC"
    return "private endpoint only, from inside the VPC (cluster.deployFromVpc: VPN, bastion, CodeBuild)"


def missing_kubeconfig_error(cluster_name: str) -> ConfigError:
    return ConfigError(
        [
            f"kubeconfig: the existing cluster {cluster_name!r} needs its kubeconfig: "
            "pulumi config set --secret rlinf-eks:kubeconfig \"$(aws eks update-kubeconfig --dry-run --name "
            f"{cluster_name})\""
        ]
    )


class Cluster(pulumi.ComponentResource):
    """A new EKS cluster, or an existing one (``cluster.existing``) attached by name.

    Args:
        settings: ``ClusterSettings`` (or a mapping with its camelCase keys).
        cluster_name: the EKS cluster's name (new or existing).
        vpc_id: the VPC of a new cluster.
        subnet_ids: the private subnets of a new cluster and its system nodes (at least two AZs).
        existing_kubeconfig: the kubeconfig of an existing cluster (secret); None for a new one.
            An existing cluster without it raises ``ConfigError`` before anything is registered.
        tags: AWS tags of every resource.
        node_monitoring_agent: install EKS's node monitoring agent add-on (node auto repair acts
            on its conditions). Defaults to False.

    Outputs: ``cluster_name`` (resolves once the system node group exists), ``kubeconfig`` (secret), ``cluster_security_group_id`` (the
    EKS-created cluster security group that managed nodes carry), ``oidc_provider_arn``,
    ``oidc_issuer`` (issuer URL without ``https://``) and ``provider`` (a Kubernetes provider).
    """

    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    provider: k8s.Provider
    endpoint_access: str
    """How the API endpoint is reached (plain text, for the plan and the stack outputs)."""

    def __init__(
        self,
        name: str,
        *,
        settings: ClusterSettings | Mapping[str, Any],
        cluster_name: str,
        vpc_id: pulumi.Input[str],
        subnet_ids: pulumi.Input[Sequence[str]],
        existing_kubeconfig: Optional[pulumi.Input[str]],
        tags: Mapping[str, str],
        node_monitoring_agent: bool = False,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        if not isinstance(settings, ClusterSettings):
            settings = ClusterSettings.model_validate(settings)
        # before anything is registered: a half-built stack is worse than a clear error
        if settings.existing and existing_kubeconfig is None:
            raise missing_kubeconfig_error(cluster_name)
        super().__init__("rlinf-eks:index:Cluster", name, None, opts)
        self.endpoint_access = endpoint_access(settings)
        self._system_nodes: list[pulumi.Resource] = []
        if settings.existing:
            self._attach(name, cluster_name, existing_kubeconfig)  # type: ignore[arg-type]
        else:
            self._create(name, settings, cluster_name, vpc_id, subnet_ids, dict(tags), node_monitoring_agent)
        # A new cluster's Kubernetes objects wait for its system nodes: the Helm releases install
        # atomically and wait for their controllers' pods (helm_releases.py), which run there; a
        # release begun while the nodes are still launching counts their start against its timeout
        # and is purged when it runs out. Destroy then deletes the objects before the nodes.
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self._system_nodes),
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "clusterSecurityGroupId": self.cluster_security_group_id,
                "oidcProviderArn": self.oidc_provider_arn,
                "oidcIssuer": self.oidc_issuer,
            }
        )

    # -- a new cluster -----------------------------------------------------------------------

    def _create(
        self,
        name: str,
        settings: ClusterSettings,
        cluster_name: str,
        vpc_id: pulumi.Input[str],
        subnet_ids: pulumi.Input[Sequence[str]],
        tags: dict[str, str],
        node_monitoring_agent: bool = False,
    ) -> None:
        child = pulumi.ResourceOptions(parent=self)
        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"EKS envelope encryption of Kubernetes Secrets in {cluster_name}",
            enable_key_rotation=True,
            # the longest window: a mistaken key deletion makes every Secret of the cluster unreadable
            deletion_window_in_days=30,
            tags=tags,
            opts=child,
        )
        public = bool(settings.endpoint_public_access_cidrs)
        cluster = eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=settings.kubernetes_version,
            vpc_id=vpc_id,
            private_subnet_ids=subnet_ids,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries_for(settings.admin_role_arns) if settings.admin_role_arns else None,
            create_oidc_provider=True,
            endpoint_private_access=True,
            endpoint_public_access=public,
            public_access_cidrs=list(settings.endpoint_public_access_cidrs) if public else None,
            enabled_cluster_log_types=list(settings.log_types),
            encryption_config_key_arn=secrets_key.arn,
            skip_default_node_group=True,
            # Managed node groups carry the EKS-created cluster security group; pulumi-eks' extra
            # cluster/node groups are for self-managed nodes only.
            skip_default_security_groups=True,
            # efa-only interfaces need VPC CNI >= 1.18.5 (field notes section 1); pulumi-eks runs the
            # CNI as the vpc-cni EKS add-on at this version.
            # enable_network_policy: the CNI's network policy agent enforces the run's NetworkPolicies
            # (workload/network_policy.py); without it EKS accepts them and enforces nothing. It filters
            # pod IP traffic only, so EFA's OS-bypass traffic is untouched.
            vpc_cni_options=eks.VpcCniOptionsArgs(addon_version=settings.vpc_cni_version, enable_network_policy=True),
            # CoreDNS is a Deployment: as an add-on created before any node exists it stays DEGRADED
            # and the add-on create waits out its timeout. It is added below, after the system nodes.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            tags=tags,
            opts=child,
        )
        # the name is known now, but the node group and add-ons below must wait for the cluster
        created_name = cluster.urn.apply(lambda _: cluster_name)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.cluster_security_group_id = cluster.cluster_security_group_id
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer.apply(lambda url: (url or "").removeprefix("https://"))

        node_role = eks_node_role(
            f"{name}-system-nodes", attachment_prefix=f"{name}-system-nodes", policies=SYSTEM_NODE_POLICIES, parent=self, tags=tags
        )
        role, attachments = node_role.role, node_role.attachments
        count = settings.system_nodes.count
        system_nodes = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=created_name,
            node_group_name=f"{cluster_name}-system",
            node_role_arn=role.arn,
            subnet_ids=subnet_ids,
            capacity_type="ON_DEMAND",
            ami_type="AL2023_x86_64_STANDARD",
            instance_types=[settings.system_nodes.instance_type],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=count, min_size=count, max_size=count),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            labels=dict(SYSTEM_NODE_LABELS),
            tags=tags,
            # the role's policies must be attached before nodes try to join
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )
        # Consumers get the name once the system nodes exist: an EKS add-on that runs a Deployment
        # (CoreDNS, the FSx CSI controller) and is created before any node can run it turns
        # DEGRADED, and the add-on create fails waiting for ACTIVE.
        self.cluster_name = system_nodes.node_group_name.apply(lambda _: cluster_name)
        self._system_nodes = [system_nodes]
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=[system_nodes])
        addons = ["coredns", "eks-pod-identity-agent"]
        if node_monitoring_agent:
            # node conditions (AcceleratedHardwareReady for GPU XID errors, NetworkingReady, ...) that
            # node auto repair acts on; it needs no IAM role, and its agent DaemonSet tolerates
            # every taint (chart values: tolerations operator Exists), so it runs on the GPU nodes
            addons.append(NODE_MONITORING_AGENT)
        for addon in addons:
            aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=created_name,
                addon_name=addon,
                # take over the self-managed CoreDNS EKS bootstraps
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=after_nodes,
            )

    # -- an existing cluster -----------------------------------------------------------------

    def _attach(self, name: str, cluster_name: str, kubeconfig: pulumi.Input[str]) -> None:
        invoke = pulumi.InvokeOptions(parent=self)
        found = aws.eks.get_cluster_output(name=cluster_name, opts=invoke)
        self.cluster_name = found.name
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.cluster_security_group_id = found.vpc_config.cluster_security_group_id
        issuer_url = found.identities.apply(lambda ids: ids[0].oidcs[0].issuer)
        self.oidc_provider_arn = aws.iam.get_open_id_connect_provider_output(url=issuer_url, opts=invoke).arn
        self.oidc_issuer = issuer_url.apply(lambda url: url.removeprefix("https://"))
