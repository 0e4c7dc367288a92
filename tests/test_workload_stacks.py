"""Per stack (whole offline plan): the training pods land on the GPU node group the plan creates
(its taints tolerated, its labels selected), fit its allocatable capacity, and every Ray object
validates (built-in kinds for the cluster's version, Ray kinds against the KubeRay CRDs)."""

from __future__ import annotations

from typing import Any

import pytest

from rlinf_eks import catalog
from rlinf_eks.offline.outputs.plan import settings_of
from rlinf_eks.offline.engine.stack_config import load
from tests.harness import ROOT, STACKS, of_type, one, plan_stack
from tests.schemas import builtin_errors, crd_errors, jobset_errors

EKS_EFFECT = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def pod_templates(plan) -> list[dict[str, Any]]:
    templates = [job["inputs"]["spec"]["template"] for job in of_type(plan, "kubernetes:batch/v1:Job") if job["name"] != "rlinf-watchdog"]
    templates += [r["template"]["spec"]["template"] for js in of_type(plan, "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
                  for r in js["inputs"]["spec"]["replicatedJobs"]]
    clusters = [c["inputs"]["spec"] for c in of_type(plan, "kubernetes:ray.io/v1:RayCluster")]
    clusters += [j["inputs"]["spec"]["rayClusterSpec"] for j in of_type(plan, "kubernetes:ray.io/v1:RayJob") if "rayClusterSpec" in j["inputs"]["spec"]]
    for spec in clusters:
        templates.append(spec["headGroupSpec"]["template"])
        templates.extend(group["template"] for group in spec.get("workerGroupSpecs", []))
    return templates


def _mib(q: str) -> int:
    return int(q[:-2]) * (1024 if q.endswith("Gi") else 1)


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(q) * 1000


@pytest.mark.parametrize("stack", STACKS)
def test_given_a_stack_when_planned_then_its_training_pods_fit_and_land_on_its_gpu_node_group(stack):
    plan = plan_stack(stack)
    settings = settings_of(load(ROOT, stack, []))
    group = one(plan, "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")["inputs"]
    templates = pod_templates(plan)
    assert templates, "no training pods"
    alloc_cpu, alloc_mem = catalog.allocatable(settings.gpu_nodes.instance, settings.gpu_nodes.hugepages_gib * 1024)
    for template in templates:
        spec = template["spec"]
        for taint in group["taints"]:
            assert any(
                t["key"] == taint["key"] and t["effect"] == EKS_EFFECT[taint["effect"]] and (t["operator"] == "Exists" or t["value"] == taint["value"])
                for t in spec["tolerations"]
            ), taint
        assert spec["nodeSelector"] and spec["nodeSelector"].items() <= group["labels"].items()
        # app containers and sidecars (init containers with restartPolicy Always) run side by side
        running = spec["containers"] + [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
        cpu = sum(_milli(c["resources"]["requests"]["cpu"]) for c in running)
        mem = sum(_mib(c["resources"]["requests"]["memory"]) for c in running)
        assert cpu <= alloc_cpu - catalog.DAEMONSET_MILLICPU and mem <= alloc_mem - catalog.DAEMONSET_MEMORY_MIB
        assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == str(settings.gpu_nodes.instance.gpus)


@pytest.mark.parametrize("stack", STACKS)
def test_given_a_stack_when_planned_then_every_workload_object_validates(stack):
    plan = plan_stack(stack)
    settings = settings_of(load(ROOT, stack, []))
    workload = [r for r in plan.resources if "RlinfTraining" in r["urn"] and r["type"].startswith("kubernetes:")]
    assert workload
    for resource in workload:
        obj = resource["inputs"]
        if resource["type"].startswith("kubernetes:ray.io/"):
            assert crd_errors(obj) == [], resource["name"]
        elif resource["type"].startswith("kubernetes:jobset.x-k8s.io/"):
            assert jobset_errors(obj, settings.cluster.kubernetes_version) == [], resource["name"]
        elif obj["kind"] != "Secret":
            assert builtin_errors(obj, settings.cluster.kubernetes_version) == [], resource["name"]
