"""The real API server's tier (tests/kube_apiserver.py): what the schemas and the hand-written CEL
evaluator cannot say, a kube-apiserver v1.35.3 with the stacks' CRDs does. Each object goes in as a
server-side apply with dryRun=All and fieldValidation=Strict, into namespaces created for real.
Skips with one line when no binaries are configured (RLINF_EKS_KUBE_ASSETS or KUBEBUILDER_ASSETS).

Here: the server itself refuses what it must (planted faults), and verify's fabric Job is accepted
for 2, 4 and 16 nodes. tests/test_real_apiserver_plans.py sends every stack's objects."""

from __future__ import annotations

import copy

import pytest

from rlinf_eks.verify.fabric import fabric_objects
from rlinf_eks.workload.run import resolve_run
from tests.harness import plan_stack
from tests.kube_apiserver import CRD_FILES

NAMESPACE = "rlinf"


def a_config_map(name: str = "probe") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NAMESPACE}, "data": {"k": "v"}}


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
    refused = {f"{o['kind']}/{o['metadata']['name']}": api.apply(o) for o in objects}
    # THEN every one is accepted, the Job runs one pod per node
    assert {k: v for k, v in refused.items() if v} == {}
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == nodes
