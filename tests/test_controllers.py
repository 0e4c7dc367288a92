"""tests/controllers.py, offline: the objects the JobSet, Job, KubeRay and Kueue controllers would
create from the stacks' objects are named, counted and labelled as those controllers do (the real
API server's tier sends them: tests/test_real_apiserver_plans.py)."""

from __future__ import annotations

import copy

from tests.controllers import JOBSET_LABELS, WAIT_GCS_READY, daemonset_pods, derived, job_pods, jobset_children, raycluster_pods, rayjob_children, workloads
from tests.harness import manifests, plan_stack


def only(objects: list[dict], kind: str) -> dict:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_given_a_jobset_then_one_job_per_replica_named_as_the_controller_names_it_with_its_headless_service():
    # GIVEN the multi-node stack's JobSet, with three replicas of its one replicatedJob
    jobset = copy.deepcopy(only(list(manifests(plan_stack("multi-node")).values()), "JobSet"))
    rjob = jobset["spec"]["replicatedJobs"][0]
    rjob["replicas"] = 3
    # WHEN the JobSet controller's children are built
    children = jobset_children(jobset)
    jobs = [c for c in children if c["kind"] == "Job"]
    # THEN <jobset>-<replicatedJob>-<index>, labelled, pods on the JobSet's subdomain, one Service
    assert [j["metadata"]["name"] for j in jobs] == [f"training-{rjob['name']}-{i}" for i in range(3)]
    for i, job in enumerate(jobs):
        for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
            assert labels[f"{JOBSET_LABELS}jobset-name"] == "training" and labels[f"{JOBSET_LABELS}job-index"] == str(i)
        assert job["spec"]["template"]["spec"]["subdomain"] == "training"
        assert job["spec"]["parallelism"] == rjob["template"]["spec"]["parallelism"]
    service = only(children, "Service")
    assert service["metadata"]["name"] == "training" and service["spec"]["clusterIP"] == "None"


def test_given_an_indexed_job_then_its_first_and_last_pods_carry_their_index_and_hostname():
    # GIVEN the first Job of the multi-node JobSet (Indexed, 2 completions)
    job = jobset_children(only(list(manifests(plan_stack("multi-node")).values()), "JobSet"))[0]
    # WHEN the Job controller's pods are built THEN pod i is <job>-<i>-<suffix>, hostname <job>-<i>
    pods = job_pods(job)
    assert [p["spec"]["hostname"] for p in pods] == ["training-training-0-0", "training-training-0-1"]
    assert [p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods] == ["0", "1"]
    assert all(p["metadata"]["name"].startswith(p["spec"]["hostname"] + "-") for p in pods)


def test_given_a_rayjob_then_its_raycluster_and_submitter_job_and_the_clusters_pods():
    # GIVEN the multi-node-kuberay stack's RayJob (K8sJobMode, its own cluster)
    rayjob = only(list(manifests(plan_stack("multi-node-kuberay")).values()), "RayJob")
    # WHEN KubeRay's children are built
    cluster, submitter = rayjob_children(rayjob)
    # THEN a RayCluster of the RayJob's cluster spec, and the submitter Job named as the RayJob
    assert cluster["kind"] == "RayCluster" and cluster["spec"] == rayjob["spec"]["rayClusterSpec"]
    assert cluster["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "rlinf-training"
    assert submitter["kind"] == "Job" and submitter["metadata"]["name"] == "rlinf-training"
    assert submitter["spec"]["template"]["spec"]["containers"] == rayjob["spec"]["submitterPodTemplate"]["spec"]["containers"]
    # AND the head and worker pods: ray labels, ray start before the command, the workers' init
    head, worker = raycluster_pods(cluster)
    assert head["metadata"]["labels"]["ray.io/node-type"] == "head" and worker["metadata"]["labels"]["ray.io/group"] == "gpu-workers"
    assert head["spec"]["containers"][0]["args"][0].startswith("ulimit -n 65536; ray start --head")
    assert worker["spec"]["initContainers"][-1]["name"] == WAIT_GCS_READY
    assert WAIT_GCS_READY not in [c["name"] for c in head["spec"].get("initContainers", [])]
    # the template mounts its own /dev/shm: KubeRay adds no second one
    assert "shared-mem" not in [v["name"] for v in head["spec"]["volumes"]]


def test_given_a_rayjob_on_an_existing_cluster_then_kuberay_makes_no_raycluster_of_it():
    objects = list(manifests(plan_stack("multi-node-kuberay", "workload.rayjob.cluster=selector")).values())
    assert [c["kind"] for c in rayjob_children(only(objects, "RayJob"))] == ["Job"]
    # the queued one is then the RayCluster the plan renders
    assert [w["metadata"]["name"].split("-")[0] for w in workloads(objects)] == ["raycluster"]


def test_given_queued_objects_then_kueues_workloads_count_their_pods_and_carry_queue_and_priority():
    # GIVEN the multi-node stack (a JobSet in a queue) and the kuberay one (a RayJob in a queue)
    jobset_objects = list(manifests(plan_stack("multi-node")).values())
    ray_objects = list(manifests(plan_stack("multi-node-kuberay")).values())
    # WHEN Kueue's Workloads are built
    (of_jobset,) = workloads(jobset_objects)
    (of_rayjob,) = workloads(ray_objects)
    # THEN one pod set per replicatedJob of parallelism x replicas pods, in the object's queue, at
    # its WorkloadPriorityClass's value
    jobset = only(jobset_objects, "JobSet")
    rjob = jobset["spec"]["replicatedJobs"][0]
    assert [(p["name"], p["count"]) for p in of_jobset["spec"]["podSets"]] == [(rjob["name"], rjob["template"]["spec"]["parallelism"] * rjob["replicas"])]
    assert of_jobset["spec"]["queueName"] == jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    priority = jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    (klass,) = [o for o in jobset_objects if o["kind"] == "WorkloadPriorityClass" and o["metadata"]["name"] == priority]
    assert of_jobset["spec"]["priorityClassRef"]["name"] == priority and of_jobset["spec"]["priority"] == klass["value"]
    # a RayJob: the head, each worker group, the submitter
    assert [p["name"] for p in of_rayjob["spec"]["podSets"]] == ["head", "gpu-workers", "submitter"]
    # and derived() holds them, with everything the other controllers make
    kinds = [o["kind"] for o in derived(ray_objects)]
    assert kinds.count("Workload") == 1 and kinds.count("RayCluster") == 1 and kinds.count("Pod") == 3


def test_given_a_daemonset_then_its_pod_is_pinned_to_one_node_by_name_in_every_term():
    # GIVEN a DaemonSet of the multi-node stack (prometheus backend: the exporters), one term made two
    daemonset = copy.deepcopy(only(list(manifests(plan_stack("multi-node")).values()), "DaemonSet"))
    affinity = daemonset["spec"]["template"]["spec"].setdefault("affinity", {})
    terms = [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["gpu-training"]}]}, {"matchExpressions": []}]
    affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    # WHEN the DaemonSet controller's pod for a node is built
    (pod,) = daemonset_pods(daemonset, "node-a")
    # THEN each term keeps its expressions and gets the node's name as its one field requirement
    built = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t.get("matchExpressions") for t in built] == [t["matchExpressions"] for t in terms]
    assert all(t["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}] for t in built)
