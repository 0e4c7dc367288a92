"""Settings given in a stack that would have no effect: a section configured while its switch is
off, a maximum with nothing that scales, a platform's run settings (it has no run). Each is a
problem line naming the key, so that a stack never plans with a value that silently does nothing.

A key counts as given when the stack file or ``--set`` wrote it (pydantic's ``model_fields_set``),
not when it holds its default.
"""

from __future__ import annotations

from typing import Iterable, Optional

from pydantic import BaseModel

from .errors import problem_line
from .stack import StackSettings

PLATFORM_WORKLOAD_KEYS = frozenset({"namespace", "ray_version", "restart"})
"""What a platform reads of ``workload``: the runs' namespace, the Ray version its KubeRay operator
serves, and the JobSet controller's version (workload.restart.jobsetVersion)."""


def given(model: BaseModel, *, besides: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(key as the stack writes it, field name) of every key a stack gave in ``model``, less
    ``besides`` (field names)."""
    skip, fields = set(besides), type(model).model_fields
    return [(fields[name].alias or name, name) for name in fields if name in model.model_fields_set and name not in skip]


def _off(section: str, model: BaseModel, switch: str, why: str) -> list[str]:
    return [
        problem_line(f"{section}.{key}", getattr(model, name), f"has no effect: {why}; remove it")
        for key, name in given(model, besides=[switch])
    ]


def no_effect_problems(s: StackSettings, stack: Optional[str]) -> list[str]:
    """Every given setting that would have no effect on this stack."""
    problems: list[str] = []
    if s.platform.role == "platform":
        problems += [
            problem_line(f"workload.{key}", getattr(s.workload, name),
                         "a platform runs no training, so this is ignored: give it to an experiment stack on this platform")
            for key, name in given(s.workload, besides=PLATFORM_WORKLOAD_KEYS)
        ]  # fmt: skip
    return problems + _sections(s)


def _sections(s: StackSettings) -> list[str]:
    problems: list[str] = []
    gpu = s.gpu_nodes
    if gpu.max_nodes is not None and gpu.max_nodes > gpu.node_count and not s.gpu_nodes_grow:
        problems.append(
            problem_line("gpuNodes.maxNodes", gpu.max_nodes,
                         f"has no effect: nothing scales the GPU node group (autoscaler.enabled is false, provisioner managed), "
                         f"so it stays at nodeCount {gpu.node_count}; enable the autoscaler, use provisioner karpenter, or remove maxNodes")
        )  # fmt: skip
    if not s.autoscaler.enabled:
        problems += _off("autoscaler", s.autoscaler, "enabled", "autoscaler.enabled is false")
    if not s.kuberay.enabled:
        problems += _off("kuberay", s.kuberay, "enabled", "kuberay.enabled is false")
    if not s.preflight.enabled:
        problems += _off("preflight", s.preflight, "enabled", "preflight.enabled is false")
    if not s.queue.enabled:
        problems += _off("queue", s.queue, "enabled", "queue.enabled is false")
    if s.observability_backend != "prometheus" and "prometheus" in s.observability.model_fields_set:
        problems += _off("observability.prometheus", s.observability.prometheus, "",
                         f"the observability backend is {s.observability_backend}, not prometheus")  # fmt: skip
    if s.workload.enabled and s.workload.launcher != "kuberay" and "rayjob" in s.workload.model_fields_set:
        problems += _off("workload.rayjob", s.workload.rayjob, "", f"workload.launcher is {s.workload.launcher}, not kuberay")
    if s.workload.enabled and s.workload.mode != "eval" and "eval" in s.workload.model_fields_set:
        problems += _off("workload.eval", s.workload.eval, "", "workload.mode is train, not eval")
    if s.workload.enabled and s.workload.launcher != "manual" and "manual" in s.workload.model_fields_set:
        problems += _off("workload.manual", s.workload.manual, "", f"workload.launcher is {s.workload.launcher}, not manual")
    if s.workload.enabled and s.shared_filesystem and s.workload.checkpoints.keep_in_bucket is not None:
        problems.append(
            problem_line("workload.checkpoints.keepInBucket", s.workload.checkpoints.keep_in_bucket,
                         "has no effect with the shared filesystem: FSx exports new and changed files to the bucket, never a deletion, "
                         "and no sync sidecar runs to delete there; remove it (the bucket keeps every checkpoint)")
        )  # fmt: skip
    return problems
