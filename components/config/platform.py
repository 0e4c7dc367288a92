"""The platform section: a stack's role and, for an experiment, the platform stack it runs on.

``both`` (the default) is one cluster with one run, as every stack was before roles. A ``platform``
stack is everything but a run (network, cluster, GPU node group, device plugins, operators,
storage, the platform's namespace) and exports what an experiment needs. An ``experiment`` stack
is one run on a platform: it names the platform's stack (``<org>/<project>/<stack>``) and reads the
cluster, node shape and storage from that stack's outputs (a Pulumi StackReference), so nothing of
the platform is typed twice."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import field_validator, model_validator
from pydantic_core import PydanticCustomError

from .errors import rule_error
from .types import SettingsModel

Role = Literal["both", "platform", "experiment"]

PLATFORM_SECTIONS: tuple[str, ...] = (
    "availabilityZone", "network", "cluster", "gpuNodes", "devicePlugins", "kuberay", "autoscaler", "storage",
    "observability", "images",
)  # fmt: skip
"""Top-level keys only a platform (or a ``both`` stack) sets: an experiment reads them from its platform."""

_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


class PlatformSettings(SettingsModel):
    """What the stack is: a cluster with its run (both), a platform, or an experiment on one."""

    role: Role = "both"
    """both: the cluster and one run in one stack (the default); platform: network, cluster, GPU
    nodes, plugins, operators and storage, no run, exporting what experiments read; experiment: one
    run on the platform named by platform.stack."""
    stack: Optional[str] = None
    """role experiment: the platform's fully qualified stack name, ``<org>/<project>/<stack>`` (the
    Pulumi StackReference: ``organization/rlinf-eks/platform`` with the self-managed backend)."""

    @field_validator("stack")
    @classmethod
    def _stack(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not _STACK_NAME.fullmatch(value):
            raise PydanticCustomError(
                "stack_name", "{text}", {"text": "a fully qualified stack name <org>/<project>/<stack>, such as organization/rlinf-eks/platform"}
            )
        return value

    @model_validator(mode="after")
    def _stack_for_experiment(self) -> "PlatformSettings":
        if self.role == "experiment" and self.stack is None:
            raise rule_error("stack", None, "role experiment runs on a platform: name its stack, <org>/<project>/<stack>")
        if self.role != "experiment" and self.stack is not None:
            raise rule_error("stack", self.stack, f"only an experiment names a platform stack (role is {self.role})")
        return self
