"""Policies (rlinf_eks.policies): a passing and a failing case each, on small hand-built resources;
the CrossGuard adapter; and every stack's offline plan free of violations."""

from __future__ import annotations

import copy

import pytest

from rlinf_eks import policies as P
from rlinf_eks import policies_crossguard as CG

PREFIX = "urn:pulumi:test::rlinf-eks::"


def res(type_: str, name: str, inputs: dict, id_: str | None = None, parent_type: str | None = None, **options) -> dict:
    chain = f"{parent_type}${type_}" if parent_type else type_
    return {
        "urn": f"{PREFIX}{chain}::{name}",
        "type": type_,
        "name": name,
        "id": id_ or f"{name}-id",
        "inputs": inputs,
        "options": {"protect": False, "retainOnDelete": False, **options},
    }


def names(violations) -> list[str]:
    return sorted(v.name for v in violations)


# --- EFA node groups ---------------------------------------------------------------------------


def efa_stack(*, subnets=("subnet-a",), placement="gpu-pg", reservation=None, capacity_type="ON_DEMAND",
              self_rules=("ingress", "egress"), rule_style="vpc") -> list[dict]:
    interfaces = [
        {"deviceIndex": 0, "networkCardIndex": 0, "interfaceType": "efa", "securityGroups": ["sg-cluster", "sg-efa"]},
        {"deviceIndex": 1, "networkCardIndex": 1, "interfaceType": "efa-only", "securityGroups": ["sg-cluster", "sg-efa"]},
    ]
    lt = {"networkInterfaces": interfaces, "metadataOptions": {"httpTokens": "required"}}
    if placement:
        lt["placement"] = {"groupName": placement}
    if reservation:
        lt["capacityReservationSpecification"] = {"capacityReservationTarget": {"capacityReservationId": reservation}}
    resources = [
        res(P.NODE_GROUP, "gpu-nodes", {"subnetIds": list(subnets), "capacityType": capacity_type,
                                        "launchTemplate": {"id": "lt-1", "version": "1"}}),
        res(P.LAUNCH_TEMPLATE, "gpu-lt", lt, id_="lt-1"),
        res(P.SECURITY_GROUP, "gpu-efa", {"description": "EFA"}, id_="sg-efa"),
        res(P.SECURITY_GROUP, "cluster", {}, id_="sg-cluster"),
        res(P.SUBNET, "a", {"availabilityZone": "us-east-1a"}, id_="subnet-a"),
        res(P.SUBNET, "a2", {"availabilityZone": "us-east-1a"}, id_="subnet-a2"),
        res(P.SUBNET, "b", {"availabilityZone": "us-east-1b"}, id_="subnet-b"),
    ]
    for direction in self_rules:
        if rule_style == "vpc":
            type_ = P.INGRESS_RULE if direction == "ingress" else P.EGRESS_RULE
            resources.append(res(type_, f"efa-self-{direction}", {"securityGroupId": "sg-efa", "referencedSecurityGroupId": "sg-efa", "ipProtocol": "-1"}))
        elif rule_style == "ec2":
            resources.append(res(P.SECURITY_GROUP_RULE, f"efa-self-{direction}", {"type": direction, "securityGroupId": "sg-efa", "self": True,
                                                                              "protocol": "-1", "fromPort": 0, "toPort": 0}))
        else:  # inline
            resources[2]["inputs"].setdefault(direction, []).append({"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True})
    return resources


@pytest.mark.parametrize("rule_style", ["vpc", "ec2", "inline"])
def test_given_efa_node_group_in_one_subnet_with_placement_and_self_sg_then_no_violation(rule_style):
    assert P.check_efa_node_groups(efa_stack(rule_style=rule_style)) == []


def test_given_efa_node_group_in_two_subnets_of_one_az_then_no_violation():
    assert P.check_efa_node_groups(efa_stack(subnets=("subnet-a", "subnet-a2"))) == []


def test_given_efa_node_group_across_two_azs_then_violation():
    violations = P.check_efa_node_groups(efa_stack(subnets=("subnet-a", "subnet-b")))
    assert names(violations) == ["gpu-nodes"] and "2 subnets" in violations[0].message


def test_given_efa_node_group_without_placement_group_or_reservation_then_violation():
    violations = P.check_efa_node_groups(efa_stack(placement=None))
    assert names(violations) == ["gpu-nodes"] and "placement group" in violations[0].message


@pytest.mark.parametrize("kwargs", [{"reservation": "cr-0123456789abcdef0"}, {"reservation": "cr-0123456789abcdef0", "capacity_type": "CAPACITY_BLOCK"}])
def test_given_efa_node_group_with_a_reservation_and_no_placement_group_then_no_violation(kwargs):
    assert P.check_efa_node_groups(efa_stack(placement=None, **kwargs)) == []


@pytest.mark.parametrize("self_rules", [(), ("ingress",), ("egress",)])
def test_given_efa_interfaces_without_a_two_way_self_referencing_sg_then_one_violation_per_interface(self_rules):
    violations = P.check_efa_node_groups(efa_stack(self_rules=self_rules))
    assert names(violations) == ["gpu-lt", "gpu-lt"] and "itself" in violations[0].message


def test_given_a_self_rule_for_one_port_only_then_violation():
    resources = efa_stack()
    next(r for r in resources if r["name"] == "efa-self-ingress")["inputs"]["ipProtocol"] = "tcp"
    assert names(P.check_efa_node_groups(resources)) == ["gpu-lt", "gpu-lt"]


def test_given_a_node_group_without_efa_interfaces_then_efa_rules_do_not_apply():
    resources = efa_stack(subnets=("subnet-a", "subnet-b"), placement=None, self_rules=())
    for interface in resources[1]["inputs"]["networkInterfaces"]:
        interface["interfaceType"] = "interface"
    assert P.check_efa_node_groups(resources) == []


def test_given_preview_unknown_ids_then_references_follow_property_dependencies():
    resources = efa_stack(self_rules=())
    node_group, lt, sg = resources[0], resources[1], resources[2]
    node_group["inputs"]["launchTemplate"]["id"] = P.UNKNOWN
    node_group["propertyDependencies"] = {"launchTemplate": [lt["urn"]]}
    for interface in lt["inputs"]["networkInterfaces"]:
        interface["securityGroups"] = [P.UNKNOWN]
    lt["propertyDependencies"] = {"networkInterfaces": [sg["urn"]]}
    # GIVEN unknown ids, the SG is still found through the property dependencies: no self rules, so a violation
    assert names(P.check_efa_node_groups(resources)) == ["gpu-lt", "gpu-lt"]
    for direction, type_ in (("ingress", P.INGRESS_RULE), ("egress", P.EGRESS_RULE)):
        resources.append({**res(type_, f"self-{direction}", {"securityGroupId": P.UNKNOWN, "referencedSecurityGroupId": P.UNKNOWN, "ipProtocol": "-1"}),
                          "propertyDependencies": {"securityGroupId": [sg["urn"]], "referencedSecurityGroupId": [sg["urn"]]}})
    assert P.check_efa_node_groups(resources) == []


# --- launch templates --------------------------------------------------------------------------


def test_given_imdsv2_required_then_no_violation_and_optional_then_violation():
    good = res(P.LAUNCH_TEMPLATE, "good", {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}})
    bad = res(P.LAUNCH_TEMPLATE, "bad", {"metadataOptions": {"httpTokens": "optional"}})
    missing = res(P.LAUNCH_TEMPLATE, "missing", {})
    assert names(P.check_imdsv2([good, bad, missing])) == ["bad", "missing"]


def test_given_launch_template_volumes_then_only_unencrypted_ones_violate():
    good = res(P.LAUNCH_TEMPLATE, "good", {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true", "volumeType": "gp3"}}]})
    bad = res(P.LAUNCH_TEMPLATE, "bad", {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 200}}]})
    violations = P.check_ebs_encrypted([good, bad])
    assert names(violations) == ["bad"] and "/dev/xvda" in violations[0].message


# --- S3 ----------------------------------------------------------------------------------------


def bucket_stack(*, versioned=True, blocked=True, encrypted=True, protect=True, retain=False) -> list[dict]:
    bucket = res("aws:s3/bucket:Bucket", "checkpoints-bucket", {"forceDestroy": False}, id_="ckpt-1234",
                 parent_type=P.CHECKPOINT_STORAGE, protect=protect, retainOnDelete=retain)
    resources = [bucket]
    if versioned:
        resources.append(res(P.BUCKET_VERSIONING[0], "v", {"bucket": "ckpt-1234", "versioningConfiguration": {"status": "Enabled"}}))
    if blocked:
        resources.append(res(P.BUCKET_PUBLIC_ACCESS_BLOCK, "pab", {"bucket": "ckpt-1234", "blockPublicAcls": True, "blockPublicPolicy": True,
                                                                  "ignorePublicAcls": True, "restrictPublicBuckets": True}))
    if encrypted:
        resources.append(res(P.BUCKET_ENCRYPTION[0], "sse", {"bucket": "ckpt-1234", "rules": [
            {"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}, "bucketKeyEnabled": True}]}))
    return resources


def test_given_encrypted_bucket_then_no_violation_and_without_sse_config_then_violation():
    assert P.check_s3_encrypted(bucket_stack()) == []
    assert names(P.check_s3_encrypted(bucket_stack(encrypted=False))) == ["checkpoints-bucket"]


@pytest.mark.parametrize("protect, retain", [(True, False), (False, True)])
def test_given_versioned_private_protected_checkpoint_bucket_then_no_violation(protect, retain):
    assert P.check_checkpoint_bucket(bucket_stack(protect=protect, retain=retain)) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [({"versioned": False}, "not versioned"), ({"blocked": False}, "public access"), ({"protect": False}, "retainOnDelete")],
)
def test_given_checkpoint_bucket_missing_a_safeguard_then_violation(kwargs, message):
    violations = P.check_checkpoint_bucket(bucket_stack(**kwargs))
    assert len(violations) == 1 and message in violations[0].message


def test_given_partial_public_access_block_then_violation():
    resources = bucket_stack()
    next(r for r in resources if r["type"] == P.BUCKET_PUBLIC_ACCESS_BLOCK)["inputs"]["restrictPublicBuckets"] = False
    assert names(P.check_checkpoint_bucket(resources)) == ["checkpoints-bucket"]


def test_given_a_bucket_outside_checkpoint_storage_then_checkpoint_rules_do_not_apply():
    other = res("aws:s3/bucket:Bucket", "logs", {})
    assert P.check_checkpoint_bucket([other]) == []


# --- Kubernetes --------------------------------------------------------------------------------


def k8s(kind: str, name: str, spec: dict, api: str = "v1") -> dict:
    type_ = f"kubernetes:{api if '/' in api else 'core/' + api}:{kind}"
    return res(type_, name, {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "rlinf"}, "spec": spec})


def service(name: str, type_: str, ports: list[dict]) -> dict:
    return k8s("Service", name, {"type": type_, "ports": ports, "selector": {"app": "ray"}})


@pytest.mark.parametrize(
    "port", [{"port": 8265}, {"port": 80, "targetPort": 6379}, {"port": 443, "targetPort": "client"}, {"port": 1, "name": "dashboard"}]
)
@pytest.mark.parametrize("type_", ["LoadBalancer", "NodePort"])
def test_given_ray_port_through_loadbalancer_or_nodeport_then_violation(port, type_):
    assert names(P.check_ray_ports_not_exposed([service("ray", type_, [port])])) == ["ray"]


def test_given_ray_ports_on_clusterip_or_other_ports_on_loadbalancer_then_no_violation():
    internal = service("ray-head", "ClusterIP", [{"port": 8265}, {"port": 6379}, {"port": 10001}])
    headless = k8s("Service", "headless", {"clusterIP": "None", "ports": [{"port": 6379}]})
    web = service("web", "LoadBalancer", [{"port": 443, "targetPort": 8443}])
    assert P.check_ray_ports_not_exposed([internal, headless, web]) == []


def ray_cluster(head: dict, worker_pod: dict, kind: str = "RayCluster") -> dict:
    cluster = {"headGroupSpec": {"rayStartParams": {}, **head, "template": {"spec": {"containers": [{"name": "ray-head", "image": "i"}]}}},
               "workerGroupSpecs": [{"groupName": "gpu", "template": {"spec": worker_pod}}]}
    spec = cluster if kind == "RayCluster" else {"rayClusterSpec": cluster, "entrypoint": "python x.py"}
    return k8s(kind, "rlinf", spec, api="ray.io/v1")


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_given_ray_head_service_type_loadbalancer_then_violation_and_clusterip_then_none(kind):
    pod = {"containers": [{"name": "w", "image": "i"}]}
    assert names(P.check_ray_ports_not_exposed([ray_cluster({"serviceType": "LoadBalancer"}, pod, kind)])) == ["rlinf"]
    assert P.check_ray_ports_not_exposed([ray_cluster({"serviceType": "ClusterIP"}, pod, kind)]) == []


GPU_CONTAINER = {"name": "trainer", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 8}}}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def job(pod: dict) -> dict:
    return k8s("Job", "rlinf-train", {"completionMode": "Indexed", "template": {"spec": pod}}, api="batch/v1")


@pytest.mark.parametrize("wrap", [job, lambda pod: ray_cluster({}, pod), lambda pod: ray_cluster({}, pod, "RayJob"),
                                  lambda pod: k8s("Deployment", "d", {"template": {"spec": pod}}, api="apps/v1")])
def test_given_privileged_container_in_any_pod_template_then_violation(wrap):
    privileged = {"containers": [{**GPU_CONTAINER, "securityContext": {"privileged": True}}], "tolerations": [GPU_TOLERATION]}
    capabilities = {"containers": [{**GPU_CONTAINER, "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}], "tolerations": [GPU_TOLERATION]}
    violations = P.check_no_privileged_containers([wrap(privileged)])
    assert len(violations) == 1 and "privileged" in violations[0].message
    assert P.check_no_privileged_containers([wrap(capabilities)]) == []


def test_given_privileged_init_container_then_violation():
    pod = {"initContainers": [{"name": "setup", "image": "i", "securityContext": {"privileged": True}}], "containers": [{"name": "c", "image": "i"}]}
    assert "initContainers[name=setup]" in P.check_no_privileged_containers([job(pod)])[0].message


@pytest.mark.parametrize("wrap", [job, lambda pod: ray_cluster({}, pod), lambda pod: ray_cluster({}, pod, "RayJob")])
def test_given_gpu_pod_then_it_must_tolerate_the_gpu_taint(wrap):
    assert names(P.check_gpu_pods_tolerate_gpu_taint([wrap({"containers": [GPU_CONTAINER]})])) != []
    assert P.check_gpu_pods_tolerate_gpu_taint([wrap({"containers": [GPU_CONTAINER], "tolerations": [GPU_TOLERATION]})]) == []


@pytest.mark.parametrize(
    "toleration, ok",
    [({"operator": "Exists"}, True), ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, True),
     ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False), ({"key": "other", "operator": "Exists"}, False)],
)
def test_given_toleration_variants_then_only_ones_covering_the_noschedule_gpu_taint_pass(toleration, ok):
    violations = P.check_gpu_pods_tolerate_gpu_taint([job({"containers": [GPU_CONTAINER], "tolerations": [toleration]})])
    assert (violations == []) is ok


def test_given_cpu_pod_without_tolerations_then_gpu_taint_rule_does_not_apply():
    assert P.check_gpu_pods_tolerate_gpu_taint([job({"containers": [{"name": "c", "image": "i"}]})]) == []


# --- EKS endpoint ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inputs, violates",
    [
        ({"endpointPublicAccess": False, "endpointPrivateAccess": True}, False),
        ({"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}, False),
        ({"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}, True),
        ({"endpointPublicAccess": True}, True),  # pulumi-eks and AWS default to 0.0.0.0/0
        ({}, True),  # and to a public endpoint
        ({"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"], "tags": {P.PUBLIC_ENDPOINT_OPT_IN_TAG: "true"}}, False),
    ],
)
def test_given_eks_cluster_endpoint_settings_then_open_to_anywhere_violates_without_opt_in(inputs, violates):
    cluster = res("eks:index:Cluster", "rlinf", inputs)
    assert bool(P.check_eks_endpoint_private([cluster])) is violates


def test_given_opt_in_option_then_open_endpoint_passes_and_aws_cluster_shape_is_read_too():
    raw = res("aws:eks/cluster:Cluster", "raw", {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}})
    assert names(P.check_eks_endpoint_private([raw])) == ["raw"]
    assert P.check_eks_endpoint_private([raw], P.PolicyOptions(allow_public_endpoint_from_anywhere=True)) == []


# --- every policy, together --------------------------------------------------------------------


def test_given_a_compliant_stack_then_evaluate_finds_nothing_and_one_fault_is_named_by_its_policy():
    resources = efa_stack() + bucket_stack() + [job({"containers": [GPU_CONTAINER], "tolerations": [GPU_TOLERATION]})]
    assert P.evaluate(resources) == []
    broken = copy.deepcopy(resources)
    broken[1]["inputs"]["metadataOptions"]["httpTokens"] = "optional"
    assert [v.policy for v in P.evaluate(broken)] == ["imdsv2-required"]


def test_every_policy_has_a_unique_name_and_a_description():
    assert len({p.name for p in P.POLICIES}) == len(P.POLICIES)
    assert all(p.description.strip() for p in P.POLICIES)


# --- CrossGuard adapter ------------------------------------------------------------------------


def policy_resource(resource: dict, deps: dict | None = None, proxied: bool = True):
    from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
    from pulumi_policy.proxy import unknown_checking_proxy

    props = copy.deepcopy(resource["inputs"])
    opts = PolicyResourceOptions(resource["options"]["protect"], [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    return PolicyResource(resource["type"], unknown_checking_proxy(props) if proxied else props, resource["urn"], resource["name"],
                          opts, None, None, [], deps or {})


def test_given_policy_resources_with_unknowns_then_the_adapter_yields_plan_shaped_dicts():
    from pulumi_policy import StackValidationArgs
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    sg = res(P.SECURITY_GROUP, "efa", {"vpcId": UNKNOWN_STRING_VALUE, "ingress": [{"protocol": "-1", "self": True, "fromPort": 0.0}]})
    lt = res(P.LAUNCH_TEMPLATE, "lt", {"networkInterfaces": [{"interfaceType": "efa", "securityGroups": [UNKNOWN_STRING_VALUE]}]})
    sg_resource = policy_resource(sg)
    args = StackValidationArgs([sg_resource, policy_resource(lt, {"networkInterfaces": [sg_resource]})])
    converted = CG.resources_from_policy_args(args)
    assert converted[0]["inputs"] == {"vpcId": "[unknown]", "ingress": [{"protocol": "-1", "self": True, "fromPort": 0}]}
    assert converted[0]["options"]["protect"] is False and converted[0]["urn"] == sg["urn"]
    assert converted[1]["propertyDependencies"] == {"networkInterfaces": [sg["urn"]]}


def test_given_resource_validation_args_then_validate_with_reports_each_violation_with_its_urn():
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
    from pulumi_policy.proxy import unknown_checking_proxy

    lt = res(P.LAUNCH_TEMPLATE, "lt", {"metadataOptions": {"httpTokens": "optional"}})
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    args = ResourceValidationArgs(lt["type"], unknown_checking_proxy(copy.deepcopy(lt["inputs"])), lt["urn"], lt["name"], opts, None)
    reported: list[tuple] = []
    imds = next(p for p in P.POLICIES if p.name == "imdsv2-required")
    CG.validate_with(imds)(args, lambda message, urn=None: reported.append((message, urn)))
    assert reported == [(P.check_imdsv2([lt])[0].message, lt["urn"])]
    reported.clear()
    args.props["metadataOptions"]["httpTokens"] = "required"
    CG.validate_with(imds)(args, lambda message, urn=None: reported.append((message, urn)))
    assert reported == []


def test_given_policy_config_then_the_endpoint_opt_in_reaches_the_check():
    assert CG.options_from_policy_config({"allowPublicEndpointFromAnywhere": True}).allow_public_endpoint_from_anywhere
    assert not CG.options_from_policy_config(None).allow_public_endpoint_from_anywhere


# --- every stack -------------------------------------------------------------------------------


def _stacks() -> list[str]:
    from tests.harness import STACKS

    return STACKS


@pytest.mark.parametrize("stack", _stacks())
def test_given_each_stack_when_planned_then_no_policy_violation(stack):
    from tests.harness import plan_stack

    plan = plan_stack(stack)
    violations = P.evaluate(plan.resources, P.options_from_settings(plan.settings))
    assert violations == [], "\n".join(map(str, violations))


@pytest.mark.parametrize(
    "sets, policy",
    [
        (["gpuNodes.placementGroup.strategy=none"], "efa-node-group"),
        (["gpuNodes.capacityReservationId=cr-0123456789abcdef0"], None),  # auto: no placement group, none needed
        (["cluster.endpointPublicAccessCidrs[0]=0.0.0.0/0", "cluster.allowPublicEndpointFromAnywhere=true"], None),
        (["cluster.endpointPublicAccessCidrs[0]=203.0.113.0/24"], None),
    ],
)
def test_given_a_stack_variant_when_planned_then_policies_report_exactly_what_it_breaks(sets, policy):
    from tests.harness import plan_stack

    plan = plan_stack("single-node", *sets)
    violations = P.evaluate(plan.resources, P.options_from_settings(plan.settings))
    assert [v.policy for v in violations] == ([policy] if policy else []), "\n".join(map(str, violations))


def test_given_an_open_endpoint_with_opt_in_when_the_opt_in_is_not_passed_then_the_cluster_violates():
    from tests.harness import plan_stack

    plan = plan_stack("single-node", "cluster.endpointPublicAccessCidrs[0]=0.0.0.0/0", "cluster.allowPublicEndpointFromAnywhere=true")
    cluster = next(r for r in plan.resources if r["type"] in P.EKS_CLUSTERS)
    cluster["inputs"].pop("tags", None), cluster["inputs"].pop("clusterTags", None)  # no opt-in tag either
    assert [v.policy for v in P.evaluate(plan.resources)] == ["eks-endpoint-not-public"]


@pytest.mark.parametrize("strict, status", [(False, 0), (True, 1)])
def test_given_a_violating_stack_when_planned_then_violations_are_reported_and_strict_fails(tmp_path, capsys, strict, status):
    from rlinf_eks.__main__ import main

    # placeholders allowed: the exit status is the policy violation's alone
    argv = ["plan", "single-node", "--quiet", "--allow-placeholders", "--out", str(tmp_path), "--set", "gpuNodes.placementGroup.strategy=none"]
    assert main(argv + (["--strict"] if strict else [])) == status
    err = capsys.readouterr().err
    assert "policy violation: [efa-node-group] gpu-nodes" in err
    assert (tmp_path / "plan.json").is_file()  # the plan is written either way, for review


def test_the_crossguard_pack_builds_one_policy_of_the_right_kind_per_rule(monkeypatch):
    """policy/__main__.py as `pulumi preview --policy-pack policy` runs it, with PolicyPack (which
    would start the analyzer's gRPC server) replaced by a recorder."""
    import runpy

    import pulumi_policy

    from tests.harness import ROOT

    built: dict = {}
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda **kwargs: built.update(kwargs))
    runpy.run_path(str(ROOT / "policy" / "__main__.py"), run_name="__main__")
    kinds = {p.name: type(p).__name__ for p in built["policies"]}
    assert kinds == {p.name: "ResourceValidationPolicy" if p.scope == "resource" else "StackValidationPolicy" for p in P.POLICIES}
