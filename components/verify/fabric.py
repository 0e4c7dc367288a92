"""L4 of the verify ladder, the fabric across nodes: NCCL's all-reduce over the GPU pool, measured as
the run's preflight measures it (:mod:`rlinf_eks.workload.preflight`), judged by its pass mark.

With more than one node: an Indexed Job of one pod per node (``completionMode: Indexed``,
``parallelism = completions = len(nodes)``) in ``preflight.image`` (nccl-tests, Open MPI, sshd,
libfabric, aws-ofi-nccl), each pod the run's own preflight container running the run's own
``preflight.sh`` (:func:`~rlinf_eks.workload.preflight.preflight_script`) rendered for these nodes:
every pod checks its GPUs and EFA devices and runs sshd on port 2222; pod 0 writes a one-run ssh key
under ``<sharedFilesystem.mountPath>/.preflight/<Job uid>`` (the shared-fs claim; a multi-node stack
always has the shared filesystem), waits for every worker's sshd through a headless Service, runs
``mpirun ... all_reduce_perf -b 8M -e 8G -f 2 -g 1 -c 0 -n 20`` with NCCL's INFO lines on INIT and
NET, and writes PASS/FAIL for the workers. Pod 0's log carries the table and NCCL's lines: the verdict
(:func:`fabric_verdict`) re-reads them (:func:`.nccl.parse_all_reduce`) and reports the figure.

With one node: a single pod runs ``sh/all-reduce-local.sh``, the same all_reduce_perf with the same
flags over the node's GPUs (one rank per GPU, mpirun without ssh). NCCL then crosses NVLink, not the
network, but it still loads its network (``Using network`` and, on EFA nodes, aws-ofi-nccl's
provider line are printed for every communicator), so a missing or broken plugin still shows.
One node with one GPU has nothing to all-reduce: no objects, and the verdict is a skip.

The pods are pinned to the nodes (a required node affinity on their names, one ``matchFields``
term per node as the API server requires, one pod per node by pod anti-affinity), tolerate the GPU taint, ask for every GPU, EFA device and the hugepages of the node
as the run's pod does, and carry the labels of :func:`.smoke.verify_labels`. A NetworkPolicy admits
the pods only from each other (ssh, Open MPI's and NCCL's TCP bootstrap; EFA traffic is no IP
traffic and passes no policy).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from ..config import StackSettings
from ..scheduling import GPU_RESOURCE, gpu_toleration
from ..storage import SHARED_CLAIM
from ..workload import scripts
from ..workload.kube import SCRIPTS_DIR, core, guaranteed, meta, mi, to_manifest
from ..workload.preflight import PREFLIGHT_SCRIPT, SSH_PORT, min_bus_bandwidth_gbps, preflight_container, preflight_script
from ..workload.run import Run, efa_enabled, pod_shape
from .model import CheckResult, failed, passed, skipped
from .nccl import NcclResult, parse_all_reduce
from .smoke import (
    NODE_ANNOTATION,
    NODE_ENV,
    RUN_LABEL,
    TTL_SECONDS_AFTER_FINISHED,
    body,
    capped_quantities,
    check_nodes,
    config_map,
    last_meaningful_line,
    object_name,
    pinned_to,
    scripts_volume,
    verify_labels,
)

LEVEL = 4
LAUNCHER_INDEX = 0
"""The pod whose log holds the all_reduce_perf table (pod 0 runs mpirun)."""
LOCAL_SCRIPT = "all-reduce-local.sh"
EXCHANGE_SUBDIR = ".preflight"
"""Below the shared filesystem's mount path: where the run's preflight exchanges its key (the same)."""
FABRIC_MILLICPU_PER_GPU = 2000
FABRIC_MEMORY_MIB_PER_GPU = 8 * 1024
SHM_MIB_PER_GPU = 2 * 1024
"""NCCL's shared-memory segments between the ranks of a node (/dev/shm; the container default is 64 MiB)."""
EXTRA_DEADLINE_SECONDS = 900
"""Beyond ``workload.joinTimeoutSeconds`` (the pods' wait for each other): the image pull and the run."""


def deadline_seconds(settings: StackSettings) -> int:
    return settings.workload.join_timeout_seconds + EXTRA_DEADLINE_SECONDS


def measures(gpus: int, nodes: int) -> bool:
    """An all-reduce needs two ranks: more than one node, or one node with several GPUs."""
    return nodes > 1 or gpus > 1


def local_script(run: Run) -> str:
    """all-reduce-local.sh: the single-node all_reduce_perf (preflight.sh's flags)."""
    settings = run.settings
    instance = settings.gpu_nodes.instance
    return scripts.render(
        {
            "INSTANCE_TYPE": instance.name,
            "GPUS_PER_NODE": run.shape.pod.gpus,
            "EFA_PER_NODE": run.shape.efa,
            "GPUDIRECT_RDMA": int(bool(run.shape.efa and instance.gpudirect_rdma)),
        },
        body(LOCAL_SCRIPT),
    )


def exchange_dir(settings: StackSettings) -> str:
    return f"{settings.storage.shared_filesystem.mount_path.rstrip('/')}/{EXCHANGE_SUBDIR}"


def fabric_objects(run: Run, nodes: list[str], *, namespace: str, run_id: str) -> list[dict]:
    """The ConfigMap of the script, with more than one node the headless Service and the
    NetworkPolicy, and the Indexed Job ``rlinf-verify-fabric-<run_id>`` (pod ``i`` is host
    ``rlinf-verify-fabric-<run_id>-<i>.rlinf-verify-fabric-<run_id>``). ``namespace``: with more than
    one node, the workload's (``workload.namespace``), where the ``shared-fs`` claim is. Raises
    ValueError for more than one node on a stack without the shared filesystem (no place to
    exchange the one-run ssh key); returns [] for one node with one GPU (nothing to all-reduce)."""
    nodes = check_nodes(nodes)
    settings = run.settings
    shape = run.shape
    count = len(nodes)
    if not measures(shape.pod.gpus, count):
        return []
    multi = count > 1
    if multi and not settings.shared_filesystem:
        raise ValueError(
            f"the all-reduce across {count} nodes exchanges its one-run ssh key on the shared filesystem "
            "(as the run's preflight does), and this stack has none (storage.sharedFilesystem)"
        )
    # pod hostnames are <job>-<index>: the index must fit in the DNS label too
    name = object_name("fabric", run_id, reserve=1 + len(str(count - 1)))
    labels = verify_labels(run_id, LEVEL, "verify-fabric")
    volume, mount = scripts_volume(name)
    gpus = shape.pod.gpus
    resources = guaranteed(
        capped_quantities(run, millicpu=FABRIC_MILLICPU_PER_GPU * gpus, memory_mib=FABRIC_MEMORY_MIB_PER_GPU * gpus)
    )
    shm = core.VolumeArgs(
        name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=mi(min(SHM_MIB_PER_GPU * gpus, shape.pod.shm_mib)))
    )
    volumes = [volume, shm]
    mounts = [mount, core.VolumeMountArgs(name="dshm", mount_path="/dev/shm")]
    if multi:
        volumes.append(core.VolumeArgs(name="shared", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(claim_name=SHARED_CLAIM)))
        mounts.append(core.VolumeMountArgs(name="shared", mount_path=settings.storage.shared_filesystem.mount_path))
        files = {
            PREFLIGHT_SCRIPT: preflight_script(
                settings, shape=shape, nnodes=count, host_prefix=name, service=name, exchange_dir=exchange_dir(settings)
            )
        }
        # the run's preflight container itself: preflight.image, RUN_ID from the Job's uid, IPC_LOCK
        container = preflight_container(settings, resources=resources, mounts=mounts)
    else:
        files = {LOCAL_SCRIPT: local_script(run)}
        preflight = preflight_container(settings, resources=resources, mounts=mounts)
        # the same container, running the single-node all-reduce instead
        container = core.ContainerArgs(
            name=preflight.name,
            image=preflight.image,
            command=["/bin/bash", f"{SCRIPTS_DIR}/{LOCAL_SCRIPT}"],
            env=[core.EnvVarArgs(name=NODE_ENV, value=nodes[0])],
            resources=preflight.resources,
            volume_mounts=preflight.volume_mounts,
            security_context=preflight.security_context,
        )
    peers = core.PodAffinityTermArgs(
        label_selector=meta.LabelSelectorArgs(match_labels=dict(labels)), topology_key="kubernetes.io/hostname"
    )
    affinity = pinned_to(nodes)
    affinity = core.AffinityArgs(
        node_affinity=affinity.node_affinity,
        pod_anti_affinity=core.PodAntiAffinityArgs(required_during_scheduling_ignored_during_execution=[peers]),
    )
    spec = core.PodSpecArgs(
        restart_policy="Never",
        subdomain=name if multi else None,
        affinity=affinity,
        tolerations=[core.TolerationArgs(**gpu_toleration())],
        automount_service_account_token=False,
        enable_service_links=False,
        termination_grace_period_seconds=10,
        containers=[container],
        volumes=volumes,
    )
    annotations = {NODE_ANNOTATION: ",".join(nodes)}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": to_manifest(meta.ObjectMetaArgs(name=name, namespace=namespace, labels=dict(labels), annotations=annotations)),
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds(settings),
            "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
            "template": {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": to_manifest(spec)},
        },
    }
    objects: list[dict[str, Any]] = [config_map(name, namespace, labels, files)]
    if multi:
        objects.append(_service(name, namespace, labels))
        objects.append(_network_policy(name, namespace, labels))
    objects.append(job)
    return objects


def _service(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """Headless, publishing not-ready pods: pod 0 resolves each worker as soon as it has an IP."""
    spec = core.ServiceSpecArgs(
        cluster_ip="None",
        publish_not_ready_addresses=True,
        selector=dict(labels),
        ports=[core.ServicePortArgs(name="ssh", port=SSH_PORT, target_port=SSH_PORT, protocol="TCP")],
    )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": to_manifest(meta.ObjectMetaArgs(name=name, namespace=namespace, labels=dict(labels))),
        "spec": to_manifest(spec),
    }


def _network_policy(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The fabric pods admit each other on every port (sshd, Open MPI, NCCL's bootstrap) and nothing else."""
    pods = {"matchLabels": dict(labels)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": to_manifest(meta.ObjectMetaArgs(name=name, namespace=namespace, labels=dict(labels))),
        "spec": {"podSelector": pods, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": pods}]}]},
    }


# --- the verdict -----------------------------------------------------------------------------------


def _gib(size: int) -> str:
    return f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB"


def _why(result: Optional[NcclResult], log_line: str = "") -> str:
    """What the log says went wrong: the project's verdict line, NCCL's first warning, or the line."""
    if result is not None and result.verdict and ": PASS" not in result.verdict:
        return result.verdict
    if result is not None and result.warnings:
        return f"NCCL WARN {result.warnings[0]}"
    return log_line


def fabric_verdict(
    settings: StackSettings, result: Optional[NcclResult], exit_code: Optional[int], *, nodes: Optional[int] = None
) -> list[CheckResult]:
    """The verdict on pod 0's log (``result``, :func:`.nccl.parse_all_reduce`) and exit status:

    - ``fabric.all-reduce``: the test ran to its summary (exit 0, every size measured);
    - ``fabric.network`` (EFA stacks): NCCL used aws-ofi-nccl with libfabric's ``efa`` provider, no
      TCP-socket fallback (any stack: a fallback where the stack has EFA fails);
    - ``fabric.bus-bandwidth``: the out-of-place bus bandwidth at the largest size against
      :func:`~rlinf_eks.workload.preflight.min_bus_bandwidth_gbps`, the figure reported either way.

    ``nodes``: how many nodes the Job spanned (default ``gpuNodes.nodeCount``). ``exit_code`` None:
    the Job did not finish (deadline, unschedulable)."""
    nodes = settings.gpu_nodes.node_count if nodes is None else nodes
    gpus = pod_shape(settings, sync=False).pod.gpus
    mark = min_bus_bandwidth_gbps(settings)
    instance = settings.gpu_nodes.instance.name
    efa = efa_enabled(settings)
    where = f"across {nodes} {instance} nodes" if nodes > 1 else f"over the {gpus} GPUs of one {instance} node (NVLink, no network hop)"
    if not measures(gpus, nodes):
        return [skipped(LEVEL, "fabric.all-reduce", f"one {instance} node with one GPU: nothing to all-reduce")]
    not_measured = "not measured: the all-reduce did not run to its end"
    results: list[CheckResult] = []

    # 1. did it run?
    ran = result is not None and bool(result.rows)
    if exit_code is None:
        results.append(
            failed(
                LEVEL, "fabric.all-reduce",
                f"the all-reduce {where} did not finish within {deadline_seconds(settings)}s (unschedulable, a pod that never joined, or a hang)"
                + (f"; its table stops at {_gib(result.rows[-1].size)}" if ran and result is not None else "")
                + (f"; last: {_why(result)}" if _why(result) else ""),
                f"kubectl describe pods -l {RUN_LABEL}=<run id> (Insufficient {GPU_RESOURCE}, ImagePull of preflight.image); "
                "kubectl logs the pods: a worker whose sshd pod 0 never reached, or NCCL hung in init",
            )
        )  # fmt: skip
    elif result is None or not result.rows:
        results.append(
            failed(
                LEVEL, "fabric.all-reduce",
                f"the all-reduce {where} printed no all_reduce_perf table (exit {exit_code})" + (f": {_why(result)}" if _why(result) else ""),
                "kubectl logs pod 0 of the fabric Job: a node check that failed, ssh between the pods, or NCCL's init",
            )
        )  # fmt: skip
    elif result.truncated:
        last = result.rows[-1].size
        expected = f" of {_gib(result.max_bytes)}" if result.max_bytes else ""
        results.append(
            failed(
                LEVEL, "fabric.all-reduce",
                f"the all_reduce_perf table {where} stops at {_gib(last)}{expected}, with no summary (exit {exit_code}): "
                f"the test crashed, hung or was cut" + (f"; {_why(result)}" if _why(result) else ""),
                "kubectl logs pod 0 of the fabric Job for NCCL WARN lines; run verify again to tell a hang from a flake",
            )
        )  # fmt: skip
    elif exit_code != 0:
        results.append(
            failed(
                LEVEL, "fabric.all-reduce",
                f"the all-reduce {where} ran to its end but exited {exit_code}" + (f": {_why(result)}" if _why(result) else ""),
                "kubectl logs the fabric Job's pods: the verdict line says why",
            )
        )  # fmt: skip
    else:
        results.append(passed(LEVEL, "fabric.all-reduce", f"all_reduce_perf {where}: {len(result.rows)} sizes up to {_gib(result.rows[-1].size)}"))

    # 2. which network
    if result is None or not (result.networks or result.provider or result.socket_fallback):
        results.append(
            failed(LEVEL, "fabric.network", "no NCCL INFO line named the network (NCCL never initialised, or the log was cut)",
                   "kubectl logs pod 0 of the fabric Job")
            if efa else skipped(LEVEL, "fabric.network", "no NCCL INFO line named the network")
        )  # fmt: skip
    elif efa and result.socket_fallback:
        results.append(
            failed(
                LEVEL, "fabric.network",
                f"NCCL fell back to TCP sockets (networks: {', '.join(result.networks) or 'NET/Socket'}; provider: {result.provider or 'none'})"
                + (f"; {_why(result)}" if result.warnings else ""),
                "check the EFA security group's self rule, the EFA device plugin, and aws-ofi-nccl in preflight.image (fi_info -p efa in the pod)",
            )
        )  # fmt: skip
    elif efa and not (result.provider or "").startswith("efa"):
        seen = f"provider {result.provider}" if result.provider else "no 'NET/OFI Selected Provider is efa' line"
        results.append(
            failed(
                LEVEL, "fabric.network",
                f"NCCL used {result.network or 'an unnamed network'} with {seen}: not libfabric's efa provider",
                "aws-ofi-nccl found no EFA device: check the EFA device plugin on these nodes and FI_PROVIDER=efa; "
                "NCCL_DEBUG_SUBSYS must include INIT or NET for the line to show",
            )
        )  # fmt: skip
    else:
        extra = f", provider {result.provider}" if result.provider else ""
        extra += ", GPUDirect RDMA" if result.gdrdma else ""
        if not efa and result.socket_fallback:
            results.append(passed(LEVEL, "fabric.network", f"NCCL over TCP sockets (this stack has no EFA){extra}"))
        else:
            results.append(passed(LEVEL, "fabric.network", f"NCCL over {result.network or 'the network'}{extra}"))

    # 3. how fast
    if not ran or result is None or result.max_size_busbw is None:
        results.append(skipped(LEVEL, "fabric.bus-bandwidth", f"{not_measured} (minimum {mark:g} GB/s)"))
    elif result.truncated:
        # a cut table's last size is not the largest: its figure is no verdict either way
        results.append(
            skipped(
                LEVEL, "fabric.bus-bandwidth",
                f"{not_measured}: {result.max_size_busbw:g} GB/s at {_gib(result.rows[-1].size)}, the last size printed (minimum {mark:g} GB/s)",
            )
        )  # fmt: skip
    else:
        size = _gib(result.rows[-1].size)
        figure = f"{result.max_size_busbw:g} GB/s bus bandwidth at {size} {where} (minimum {mark:g} GB/s"
        figure += f", {settings.preflight.min_bus_bandwidth_fraction:g} of {settings.gpu_nodes.instance.bandwidth_gbps} Gbps)"
        if result.avg_busbw is not None:
            figure += f"; average {result.avg_busbw:g} GB/s over every size"
        if result.max_size_busbw >= mark:
            results.append(passed(LEVEL, "fabric.bus-bandwidth", figure))
        else:
            results.append(
                failed(
                    LEVEL, "fabric.bus-bandwidth", figure,
                    "a slow node or link: run verify on pairs of nodes to find it; check that every EFA interface is up (smoke) "
                    "and that the nodes share a placement group; preflight.minBusBandwidthFraction sets the mark",
                )
            )  # fmt: skip
    return results


def fabric_results(settings: StackSettings, pods: Mapping[int, tuple[Optional[int], str]]) -> list[CheckResult]:
    """The verdict from every pod of the fabric Job (index -> (exit status, log)), as the client reads
    them: pod 0's log and status through :func:`fabric_verdict`, plus one failure per other pod
    that failed its own node check (preflight.sh's ``FAILED`` line: its GPUs or EFA devices)."""
    exit_code, log = pods.get(LAUNCHER_INDEX, (None, ""))
    results = fabric_verdict(settings, parse_all_reduce(log), exit_code, nodes=max(len(pods), 1))
    for index in sorted(i for i in pods if i != LAUNCHER_INDEX):
        code, text = pods[index]
        line = last_meaningful_line(text)
        if code not in (0, None) and "FAILED" in line:
            results.append(
                failed(LEVEL, f"fabric.pod-{index}", f"pod {index} failed its node check (exit {code}): {line}",
                       "the node of that pod: check its NVIDIA and EFA device plugins (verify's node smoke names it too)")
            )  # fmt: skip
    return results


def fabric_nodes(objects: Sequence[dict]) -> list[str]:
    """The nodes a fabric Job spans, read back from its annotation (for the client's messages)."""
    for obj in objects:
        if obj.get("kind") == "Job":
            return [n for n in obj["metadata"].get("annotations", {}).get(NODE_ANNOTATION, "").split(",") if n]
    return []
