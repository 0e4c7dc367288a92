"""What the verify ladder speaks in: the levels, one check's result, and what is observed.

Pure data, no client: the checks (one module per level) are functions from an
:class:`~.expect.Expectation` (what the stack's settings say the cluster holds) and an
:class:`Observed` (plain API objects as ``dict``, the JSON the API server returns) to a list of
:class:`CheckResult`. The client (:mod:`.client`) is the only module that talks to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

LEVELS: dict[int, str] = {
    0: "control plane",
    1: "nodes",
    2: "add-ons",
    3: "node smoke",
    4: "fabric across nodes",
    5: "admission",
}
"""The ladder, in order: a level runs only when every level below it passed (unless --keep-going)."""

Outcome = Literal["pass", "fail", "skip"]

Reason = Literal["refused", "timeout", "dns", "tls", "credentials", "unauthorized", "forbidden", "error"]
"""Why an API call got no answer, or a refusal: nothing listens at the endpoint, no answer within
the client's timeout, the name does not resolve, the server's certificate is not trusted, the
kubeconfig's credential plugin (``aws eks get-token``) failed so none were sent, the credentials
are refused (401), the user may not do it (403), anything else the server answered."""


@dataclass(frozen=True)
class ApiFailure:
    """An API call that failed: the endpoint (``https://....eks.amazonaws.com``), the request
    (``GET /version``, ``list nodes``), why, and the OS's or the server's own words (one line)."""

    endpoint: str
    request: str
    reason: Reason
    message: str


@dataclass(frozen=True)
class CheckResult:
    """One check: its level, a short name (``gpu-nodes.count``), whether it passed, what was seen
    (``detail``, one line), what to do when it failed (``remedy``, one line) and its time."""

    level: int
    name: str
    outcome: Outcome
    detail: str
    remedy: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome != "fail"

    def as_json(self) -> dict[str, Any]:
        return {
            "level": self.level, "levelName": LEVELS[self.level], "check": self.name, "result": self.outcome,
            "detail": self.detail, "remedy": self.remedy, "seconds": round(self.seconds, 2),
        }


def passed(level: int, name: str, detail: str) -> CheckResult:
    return CheckResult(level, name, "pass", detail)


def failed(level: int, name: str, detail: str, remedy: str) -> CheckResult:
    return CheckResult(level, name, "fail", detail, remedy)


def skipped(level: int, name: str, detail: str) -> CheckResult:
    return CheckResult(level, name, "skip", detail)


@dataclass
class Observed:
    """What the client read from the cluster, as the API server's JSON (camelCase ``dict``s, the
    shape of ``kubectl get -o json``'s items). A field left None was not read (a level above)."""

    server_version: Optional[dict[str, Any]] = None
    """/version: ``{"major": "1", "minor": "35+", "gitVersion": "v1.35.2-eks-..."}``."""
    identity: Optional[dict[str, Any]] = None
    """A SelfSubjectReview's ``status.userInfo`` (``username``, ``groups``)."""
    crds: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    deployments: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    local_queues: list[dict[str, Any]] = field(default_factory=list)
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    service_accounts: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    api_failure: Optional[ApiFailure] = None
    """The control plane's first failed call (L0), when one failed."""
