"""RlinfTraining's own settings, for a program that brings its own cluster: only the sections the
training run reads, each the stack's own model (:mod:`rlinf_eks.config`), checked by the stack's
rules over those sections (:mod:`rlinf_eks.loading`'s table), not a whole ``StackSettings``.

    from rlinf_eks.workload import TrainingSettings

    TrainingSettings(
        workload={"image": "...", "trainer": {"dialect": "rlinf-embodied"}},
        gpu_nodes={"instanceType": "p5.48xlarge", "nodeCount": 2},          # the nodes as they are
        storage={"sharedFilesystem": {"enabled": True}},                     # the choice, stated
    )

The shared filesystem is a choice the program states: ``storage.sharedFilesystem.enabled`` true
(pass the claim of your ReadWriteMany volume as ``shared_volume_claim``) or false (each node keeps
its run directory and syncs checkpoints to S3: one node only), never inferred from the node count.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from ..config import ClusterSettings, ConfigError, GpuNodeSettings, KubeRaySettings, ObservabilitySettings, PreflightSettings, Sections
from ..config import SettingsModel
from ..config import StackSettings, StorageSettings, WorkloadSettings, broken_rules
from ..config.errors import problem_line
from ..loading import RULES


def _stack_field(name: str) -> Any:
    """StackSettings' own field (type, default and description), so that nothing is written twice."""
    return copy.copy(StackSettings.model_fields[name])


class TrainingSettings(SettingsModel):
    """What :class:`RlinfTraining` reads, and nothing else: the stack's sections of the same names."""

    workload: WorkloadSettings = _stack_field("workload")
    gpu_nodes: GpuNodeSettings
    """The GPU nodes the run fills, as they are (required): instance type (the catalog gives each pod
    every GPU and EFA interface of its node, and the CPU and memory it can spare), node count (one
    Ray pod per node), efa, localNvmeRaid0, capacityBlock (the stop before the block ends)."""
    storage: StorageSettings
    """Whether the run has a shared filesystem (required): ``sharedFilesystem.enabled`` true, with its
    claim passed as ``shared_volume_claim`` (and its ``mountPath``), or false (node-local run
    directory synced to S3; one node only). The bucket is RlinfTraining's ``bucket_name``."""
    preflight: PreflightSettings = _stack_field("preflight")
    cluster: ClusterSettings = _stack_field("cluster")
    """Your cluster: only ``kubernetesVersion`` is read (the Job's features, the watchdog's kubectl)."""
    kuberay: KubeRaySettings = _stack_field("kuberay")
    """The KubeRay operator of launcher kuberay: ``enabled`` says it is installed, ``version`` which."""
    observability: ObservabilitySettings = _stack_field("observability")
    """Your cluster's metrics backend: its GPU-node DaemonSets take CPU and memory from the training
    pod (catalog.daemonset_budget), and with ``prometheus`` the Ray pods name its Prometheus and
    Grafana and admit its scrapers. Unset, it follows ``cluster.existing`` (cloudwatch on a cluster this
    project makes, none on an existing one)."""

    def stack_settings(self, stack: Optional[str] = None) -> StackSettings:
        """These sections as the StackSettings the run is resolved from (the others at their
        defaults, never read), or ConfigError: the shared-filesystem choice unstated, a bucket
        name given here, or any of the stack's rules over these sections broken (rollout backend,
        tensor parallelism, world sizes, a multi-node run without the shared filesystem, ...)."""
        problems: list[str] = []
        shared = self.storage.shared_filesystem
        if shared.enabled is None:
            problems.append(
                problem_line(
                    "storage.sharedFilesystem.enabled",
                    None,
                    "RlinfTraining alone must be told whether the run has a shared filesystem: true (pass its claim as "
                    "shared_volume_claim) or false (each node's run directory synced to S3; one node only)",
                )
            )
        if self.storage.bucket_name is not None:
            problems.append(
                problem_line("storage.bucketName", self.storage.bucket_name, "RlinfTraining takes the checkpoint bucket as bucket_name=")
            )
        settings = StackSettings.model_construct(**{name: getattr(self, name) for name in type(self).model_fields})
        problems += broken_rules(STANDALONE_RULES, Sections(settings, [], frozenset()), stack)
        if problems:
            raise ConfigError(problems)
        return settings


_READ = frozenset(field.alias or name for name, field in TrainingSettings.model_fields.items()) - {"cluster"}
STANDALONE_RULES = tuple(rule for rule in RULES if _READ.issuperset(rule.sections))
"""The stack's rules that read only the training's sections (the cluster's are about creating one)."""
