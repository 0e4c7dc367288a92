"""Placeholder values: example values a stack file carries so that it plans, which must be replaced
before ``pulumi up`` (the example AWS account's image, a documentation CIDR, an example resource id).

The offline plan warns about each (key path, value, what to set) and ``plan --strict`` fails on
them unless ``--allow-placeholders`` is given (CI plans the example stacks as they are). The
program itself refuses them (:func:`refusal`): ``pulumi preview`` and ``pulumi up`` stop before the
first resource, where a documentation CIDR would otherwise create the VPC and the cluster and then
leave the deployer outside its API endpoint. The stack opts out with ``allowPlaceholders: true``.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from .config import StackSettings

# The account id the AWS documentation uses in examples ("123456789012"); never a real account
# (AWS General Reference, "AWS account identifiers" examples).
EXAMPLE_ACCOUNT = "123456789012"
_ACCOUNT = re.compile(rf"(?<![0-9]){EXAMPLE_ACCOUNT}(?![0-9])")
# The resource-id suffixes of the EC2 API reference's examples (i-1234567890abcdef0,
# cr-0123456789abcdef0, ...).
_EXAMPLE_ID = re.compile(r"\b[a-z]+-(?:1234567890abcdef0|0123456789abcdef0)\b")
# Address blocks reserved for documentation: RFC 5737 (IPv4) and RFC 3849 (IPv6).
DOCUMENTATION_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)

_WHAT_TO_SET = {
    "workload.image": "build the training image (images/<dialect family>/Dockerfile), push it to an ECR repository of your "
    "account and set workload.image to it (docs/training-images-and-recipes.md)",
    "cluster.endpointPublicAccessCidrs": "set the public CIDRs `pulumi up` and kubectl run from (your address as /32: "
    "curl -s https://checkip.amazonaws.com), or remove the list and set cluster.deployFromVpc: true when "
    "pulumi up runs inside the VPC",
    "gpuNodes.capacityReservationId": "set the id of your Capacity Block or capacity reservation "
    "(aws ec2 describe-capacity-reservations)",
    "cluster.adminRoleArns": "set the ARN of an IAM role of your account",
}


@dataclass(frozen=True)
class Placeholder:
    path: str
    """camelCase key path, as in the stack file (``workload.image``, ``cluster.adminRoleArns[0]``)."""
    value: str
    why: str
    what_to_set: str

    def __str__(self) -> str:
        return f"{self.path}={self.value!r}: {self.why}; {self.what_to_set}"


def _is_documentation_cidr(text: str) -> bool:
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return any(net.version == doc.version and net.subnet_of(doc) for doc in DOCUMENTATION_NETWORKS)  # type: ignore[arg-type]


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _what_to_set(path: str) -> str:
    base = re.sub(r"\[\d+\]$", "", path)
    return _WHAT_TO_SET.get(base, "set a value of your own")


def find_placeholders(settings: StackSettings) -> list[Placeholder]:
    """Every placeholder in validated ``StackSettings``, in key order."""
    found: list[Placeholder] = []
    data = settings.model_dump(by_alias=True, mode="json", exclude_none=True)
    for path, text in _strings(data, ""):
        if _ACCOUNT.search(text):
            why = f"{EXAMPLE_ACCOUNT} is the AWS documentation's example account"
        elif _EXAMPLE_ID.search(text):
            why = "an example resource id from the AWS documentation"
        elif path.startswith("cluster.endpointPublicAccessCidrs") and _is_documentation_cidr(text):
            why = "a documentation address range (RFC 5737/3849) that no deployer has"
        else:
            continue
        found.append(Placeholder(path, text, why, _what_to_set(path)))
    return found


OPT_OUT = "allowPlaceholders"
"""The stack's key that deploys placeholders as they are (StackSettings.allow_placeholders)."""

_planned_offline: contextvars.ContextVar[bool] = contextvars.ContextVar("rlinf_eks.placeholders.planned_offline", default=False)


@contextlib.contextmanager
def planned_offline() -> Iterator[None]:
    """Within the block the program runs under the offline plan's engine (rlinf_eks.offline.engine.engine),
    which reports each placeholder itself (a ``placeholder:`` line; ``--strict`` fails on them), so
    the program plans them instead of refusing them. ``pulumi preview`` and ``pulumi up`` never
    enter it."""
    token = _planned_offline.set(True)
    try:
        yield
    finally:
        _planned_offline.reset(token)


def refusal(settings: StackSettings) -> list[str]:
    """The problems (one line per placeholder: key path, value, why, what to set) for which the
    program refuses the stack before any resource is registered; none when the stack sets
    ``allowPlaceholders: true`` or the offline plan runs the program (:func:`planned_offline`)."""
    if settings.allow_placeholders or _planned_offline.get():
        return []
    return [f"{p}; or set {OPT_OUT}: true to deploy this example value as it is" for p in find_placeholders(settings)]


def refused(settings: StackSettings) -> StackSettings:
    """``settings``, or ConfigError naming its placeholders (:func:`refusal`): what the program runs
    before its first resource (rlinf_eks.program.run_program)."""
    problems = refusal(settings)
    if problems:
        from .config import ConfigError

        raise ConfigError(problems)
    return settings
