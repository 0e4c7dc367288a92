"""The real API server's tier (tests/kube_apiserver.py): what the schemas and the hand-written CEL
evaluator cannot say, a kube-apiserver v1.35.3 with the stacks' CRDs does. Each object goes in as a
server-side apply with dryRun=All and fieldValidation=Strict, into namespaces created for real.
Skips with one line when no binaries are configured (RLINF_EKS_KUBE_ASSETS or KUBEBUILDER_ASSETS).

Here: the server itself refuses what it must (planted faults), and verify's fabric Job is accepted
for 2, 4 and 16 nodes. tests/test_real_apiserver_plans.py sends every stack's objects."""

from __future__ import annotations

import copy

import pytest

from rlinf_eks.scheduling import EFA_RESOURCE, GPU_RESOURCE
from rlinf_eks.verify.fabric import fabric_nodes, fabric_objects
from rlinf_eks.workload.run import resolve_run
from tests.controllers import derived, job_pods, workloads
from tests.harness import manifests, plan_stack
from tests.kube_apiserver import CRD_FILES

NAMESPACE = "rlinf"


def a_config_map(name: str = "probe") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NAMESPACE}, "data": {"k": "v"}}


def job_nodes(job: dict) -> list[str]:
    return fabric_nodes([job])


def fabric_job(nodes: int) -> tuple[list[dict], dict]:
    names = [f"ip-10-0-{i // 250}-{i % 250 + 4}.ec2.internal" for i in range(nodes)]
    objects = fabric_objects(resolve_run(plan_stack("multi-node").settings, "multi-node"), names, namespace=NAMESPACE, run_id="a1b2c3")
    return objects, next(o for o in objects if o["kind"] == "Job")


@pytest.fixture(scope="module")
def api(kube_api):
    kube_api.ensure_namespace(NAMESPACE)
    return kube_api


def test_given_the_server_then_every_crd_the_stacks_use_is_established(kube_apiserver_session):
    # GIVEN the session's server WHEN it started THEN it installed every pinned CRD file's definitions
    assert len(kube_apiserver_session.crds) >= len(CRD_FILES)
    listing = kube_apiserver_session.server.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    established = {
        c["metadata"]["name"]
        for c in listing["items"]
        if any(k["type"] == "Established" and k["status"] == "True" for k in c["status"]["conditions"])
    }
    assert set(kube_apiserver_session.crds) <= established
    assert {"rayjobs.ray.io", "jobsets.jobset.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "podmonitors.monitoring.coreos.com",
            "nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"} <= established  # fmt: skip


def test_given_a_valid_object_then_the_dry_run_accepts_it_and_stores_nothing(api):
    # GIVEN a valid ConfigMap WHEN applied with dryRun=All THEN accepted, and nothing is created
    assert api.apply(a_config_map("dry")) is None
    with pytest.raises(Exception, match="404"):
        api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/dry")


@pytest.mark.parametrize(
    "fault,expected",
    [
        ("unknown field", '.spec.template.spec.containers[name="preflight"].bogus: field not declared in schema'),
        ("bad name", "metadata.name: Invalid value"),
        ("two values under matchFields", "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"),
    ],
)
def test_given_a_planted_fault_then_the_server_refuses_it(api, fault, expected):
    # GIVEN verify's fabric Job for two nodes (accepted as rendered: test below) with one planted fault
    _, job = fabric_job(2)
    job = copy.deepcopy(job)
    spec = job["spec"]["template"]["spec"]
    if fault == "unknown field":
        spec["containers"][0]["bogus"] = True
    elif fault == "bad name":
        job["metadata"]["name"] = "Not_A_Name"
    else:
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a", "node-b"]}]}
        ]
    # WHEN sent THEN the server refuses it, saying why
    error = api.apply(job)
    assert error is not None and expected in error, error


def test_given_a_custom_resource_with_an_unknown_field_then_the_server_refuses_it(api):
    # GIVEN a RayJob (the CRD's structural schema prunes unknown fields; Strict refuses them)
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "probe", "namespace": NAMESPACE},
              "spec": {"entrypoint": "true", "notAField": 1}}  # fmt: skip
    # WHEN sent THEN refused, naming the field
    error = api.apply(rayjob)
    assert error is not None and "notAField" in error, error


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_given_n_gpu_nodes_then_verifys_fabric_objects_are_accepted_by_the_api_server(api, nodes):
    # GIVEN the fabric test's objects for N nodes WHEN each is sent to the real API server
    objects, job = fabric_job(nodes)
    pods = job_pods(job)  # what the Job controller creates: index 0 and the last
    refused = {f"{o['kind']}/{o['metadata']['name']}": api.apply(o) for o in objects + pods}
    # THEN every one is accepted, the Job runs one pod per node, each pinned to any of the N nodes
    # by name (one term each) and kept apart by anti-affinity, with every GPU and EFA device
    assert {k: v for k, v in refused.items() if v} == {}
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == nodes
    affinity = job["spec"]["template"]["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchFields"] for t in terms] == [[{"key": "metadata.name", "operator": "In", "values": [n]}] for n in job_nodes(job)]
    assert len(terms) == nodes
    (apart,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == "kubernetes.io/hostname"
    run = resolve_run(plan_stack("multi-node").settings, "multi-node")
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits[GPU_RESOURCE] == str(run.shape.pod.gpus) and limits[EFA_RESOURCE] == str(run.shape.efa) and run.shape.efa > 0


def test_given_a_plans_cluster_queue_that_breaks_a_cel_rule_of_its_crd_then_the_server_refuses_it(api):
    # GIVEN the single-node stack's ClusterQueue with one resource left out of a flavor
    (queue,) = [o for o in manifests(plan_stack("single-node")).values() if o["kind"] == "ClusterQueue"]
    assert api.apply(queue) is None
    queue = copy.deepcopy(queue)
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    # WHEN sent THEN the CRD's CEL rule refuses it (the server evaluates x-kubernetes-validations)
    error = api.apply(queue)
    assert error is not None and "flavors must have the same number of resources as the coveredResources" in error, error


def test_given_a_jobset_with_an_unknown_field_in_its_job_template_then_the_server_refuses_it(api):
    # GIVEN the multi-node stack's JobSet with a field its CRD does not declare
    (jobset,) = [o for o in manifests(plan_stack("multi-node")).values() if o["kind"] == "JobSet"]
    assert api.apply(jobset) is None
    jobset = copy.deepcopy(jobset)
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["notAField"] = 1
    # WHEN sent THEN refused, naming it
    error = api.apply(jobset)
    assert error is not None and "notAField" in error, error


def test_given_a_jobset_whose_jobs_names_are_too_long_then_the_jobset_is_accepted_and_its_jobs_refused(api):
    # GIVEN the multi-node stack's JobSet with a 60-character replicatedJob name: the JobSet is
    # valid to its CRD, but the Jobs its controller creates, <jobset>-<replicatedJob>-<index>, are not
    (jobset,) = [o for o in manifests(plan_stack("multi-node")).values() if o["kind"] == "JobSet"]
    jobset = copy.deepcopy(jobset)
    jobset["spec"]["replicatedJobs"][0]["name"] = "r" * 60
    jobset["spec"]["successPolicy"]["targetReplicatedJobs"] = ["r" * 60]
    # WHEN the JobSet and what the controllers make of it are sent
    children = derived([jobset])
    # THEN the JobSet is accepted and each Job refused for its name (what the tier sends them for)
    assert api.apply(jobset) is None
    jobs = [c for c in children if c["kind"] == "Job"]
    errors = [api.apply(j) for j in jobs]
    assert jobs and all(e is not None and "metadata.name" in e for e in errors), errors


def test_given_kueues_workload_of_a_plans_jobset_with_a_broken_pod_set_then_the_server_refuses_it(api):
    # GIVEN the Workload Kueue makes of the multi-node stack's JobSet (accepted as built)
    (workload,) = workloads(manifests(plan_stack("multi-node")).values())
    assert workload["spec"]["podSets"][0]["count"] == 2 and workload["spec"]["priority"] > 0
    assert api.apply(workload) is None
    # WHEN its pod set asks for more pods at least than it has THEN the CRD's CEL rule refuses it
    workload = copy.deepcopy(workload)
    workload["spec"]["podSets"][0]["minCount"] = 3
    error = api.apply(workload)
    assert error is not None and "minCount should be positive and less or equal to count" in error, error


def test_given_the_server_then_its_kubeconfig_and_api_client_reach_it_as_admin(api):
    # GIVEN the session's server WHEN the kubernetes package reaches it through the kubeconfig file
    # and through api_client() THEN both list the namespace made above, as a cluster admin
    from kubernetes import client, config

    from_file = config.new_client_from_config(config_file=api.kubeconfig)
    names = {n.metadata.name for n in client.CoreV1Api(from_file).list_namespace().items}
    assert NAMESPACE in names
    review = client.AuthorizationV1Api(api.api_client()).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "*", "resource": "*", "group": "*"}}}
    )
    assert review.status.allowed
