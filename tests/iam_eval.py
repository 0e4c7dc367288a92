"""A small IAM evaluator for identity policies made of Allow statements: is one request allowed?

It follows the IAM User Guide ("Policy evaluation logic", "IAM JSON policy elements: Condition
operators", "Action", "Resource"): a request is allowed when some statement's Action matches the
action (case-insensitive, ``*`` and ``?`` wildcards), its Resource matches the resource's ARN
(case-sensitive, ``*`` matches any run of characters, colons and slashes included, ``?`` one), and
every condition operator of its Condition holds; within an operator every key must hold, a key
holds when the request's value matches any of the listed values; a key absent from the request
fails every operator here (none used is ``...IfExists`` or ``Null``); a multivalued key (a list in
the request, ``kms:ResourceAliases``) is for the ``ForAnyValue:`` operators, which hold when any of
its values matches. Deny statements, NotAction and NotResource are refused rather than
half-evaluated.

:func:`as_iam_sees_it` turns a request written from the plan (the action, the ARN of the resource
the call acts on, the tags and keys the call carries) into the authorizations IAM evaluates, by the
AWS Service Authorization Reference (``tests/iam_reference.py``): for an action without a resource
type the resource is ``"*"``, whatever the call names; for one with resource types the ARN must be
one of them (else the request is wrong, and it raises); only the condition keys the reference lists
for the action on that resource type stay in the context. :func:`authorized` evaluates that.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tests import iam_reference


@functools.lru_cache(maxsize=None)
def _glob(pattern: str, ignore_case: bool) -> "re.Pattern[str]":
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def like(pattern: str, value: str, ignore_case: bool = False) -> bool:
    return _glob(pattern, ignore_case).fullmatch(value) is not None


@dataclass(frozen=True)
class Request:
    """One authorization: the IAM action, the resource's ARN (or ``*`` for actions without a
    resource type) and the request's condition keys."""

    action: str
    resource: str
    context: Mapping[str, str | Sequence[str]] = field(default_factory=dict)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_OPERATORS = {
    "StringEquals": lambda want, got: want == got,
    "StringLike": lambda want, got: like(want, got),
    "ArnEquals": lambda want, got: want == got,
    "ArnLike": lambda want, got: like(want, got),
}


def _condition_holds(condition: Mapping[str, Mapping[str, Any]], context: Mapping[str, Any]) -> bool:
    keys = {k.lower(): v for k, v in context.items()}  # condition key names are case-insensitive
    for operator, clauses in condition.items():
        any_value = operator.startswith("ForAnyValue:")
        base = operator.removeprefix("ForAnyValue:")
        if base not in _OPERATORS:
            raise ValueError(f"the evaluator does not know condition operator {operator!r}")
        for key, wanted in clauses.items():
            got = keys.get(key.lower())
            if got is None:
                return False
            if isinstance(got, (list, tuple)) != any_value:
                raise ValueError(f"{key}: a multivalued key goes with ForAnyValue:, a single value without ({operator})")
            values = list(got) if any_value else [got]
            if not any(_OPERATORS[base](w, v) for w in _as_list(wanted) for v in values):
                return False
    return True


def allowing(policy: Mapping[str, Any], request: Request) -> list[str]:
    """The Sids of the statements that allow the request (empty: implicitly denied)."""
    sids = []
    for statement in _as_list(policy["Statement"]):
        if statement["Effect"] != "Allow" or {"NotAction", "NotResource", "NotPrincipal"} & set(statement):
            raise ValueError(f"the evaluator handles Allow statements with Action and Resource only: {statement.get('Sid')}")
        if not any(like(a, request.action, ignore_case=True) for a in _as_list(statement["Action"])):
            continue
        if not any(like(r, request.resource) for r in _as_list(statement["Resource"])):
            continue
        if _condition_holds(statement.get("Condition", {}), request.context):
            sids.append(statement.get("Sid", "?"))
    return sids


def allowed(policy: Mapping[str, Any], request: Request) -> bool:
    return bool(allowing(policy, request))


class NotItsResource(AssertionError):
    """A request names a resource that is none of its action's resource types (by the reference)."""


def as_iam_sees_it(request: Request) -> Request:
    """The authorization IAM evaluates for a request written from the plan (see the module's doc)."""
    ref = iam_reference.action(request.action)
    if ref is None:
        raise NotItsResource(f"{request.action} is not an action in the Service Authorization Reference")
    if not ref.types:
        keys = ref.keys
        resource = "*"
    else:
        types = [t for t in ref.types if t.names(request.resource)]
        if not types:
            formats = ", ".join(f"{t.name} {t.arn}" for t in ref.types)
            raise NotItsResource(f"{request.action} on {request.resource}: the reference's resource types for it are {formats}")
        keys = ref.keys_on(types)
        resource = request.resource
    context = {k: v for k, v in request.context.items() if iam_reference.key_listed(k, keys)}
    return Request(ref.full, resource, context)


def authorized(policy: Mapping[str, Any], request: Request) -> bool:
    """Whether IAM allows the request: :func:`as_iam_sees_it`, then :func:`allowed`."""
    return allowed(policy, as_iam_sees_it(request))
