"""The CrossGuard glue of the policies: pulumi-policy's arguments as plan.json-shaped resources,
and a CrossGuard ``validate`` for each :class:`rlinf_eks.policies.Policy`.

The pack in ``policy/`` (``pulumi preview --policy-pack policy``) builds its PolicyPack from
:func:`validate_with`; the offline plan never imports this module. pulumi-policy itself is not
imported here (it is not a runtime dependency of rlinf_eks): its arguments are read by attribute.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .plan_reader import SECRET, UNKNOWN
from .scheduling import GPU_TAINT
from .policies import Policy, PolicyOptions

# pulumi-policy marks values unknown during preview with these sentinels (pulumi_policy.proxy).
_UNKNOWN_SENTINELS = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421", "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2", "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
})


def plain(value: Any) -> Any:
    """pulumi-policy's props (proxies that raise on unknown values) as plain JSON-like data,
    unknowns as :data:`UNKNOWN`; whole floats as integers, as in plan.json."""
    if isinstance(value, Mapping):
        try:
            target = value["__target"]  # the proxy's own dict, read without the unknown check
        except (KeyError, TypeError):
            target = value
        return {str(k): plain(target[k]) for k in target}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, (str, bytes))):
        try:
            items = value["__target"]
        except (KeyError, TypeError, IndexError):
            items = value
        return [plain(v) for v in items]
    if isinstance(value, str) and value in _UNKNOWN_SENTINELS:
        return UNKNOWN
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "value") and type(value).__name__ == "Secret":
        return SECRET
    return value


def resource_from_policy_args(args: Any) -> dict[str, Any]:
    """One resource in plan.json shape from pulumi_policy's ResourceValidationArgs or PolicyResource."""
    opts = getattr(args, "opts", None)
    parent = getattr(args, "parent", None)
    property_dependencies = getattr(args, "property_dependencies", None) or {}
    return {
        "urn": args.urn,
        "type": args.resource_type,
        "name": args.name,
        "parent": getattr(parent, "urn", None) or getattr(opts, "parent", None),
        "inputs": plain(args.props),
        "options": {
            "protect": bool(getattr(opts, "protect", False)),
            # CrossGuard does not see retainOnDelete; protect is what the pack can check.
            "retainOnDelete": False,
            "ignoreChanges": list(getattr(opts, "ignore_changes", None) or []),
            "deleteBeforeReplace": bool(getattr(opts, "delete_before_replace", False)),
            "replaceOnChanges": sorted(getattr(opts, "replace_on_changes", None) or []),
            "dependsOn": sorted(d.urn for d in getattr(args, "dependencies", None) or []),
        },
        "propertyDependencies": {k: sorted(d.urn for d in v) for k, v in property_dependencies.items()},
    }


def resources_from_policy_args(args: Any) -> list[dict[str, Any]]:
    """The plan.json-shaped resources of a CrossGuard call: StackValidationArgs (all resources)
    or ResourceValidationArgs (one)."""
    if hasattr(args, "resources"):
        return [resource_from_policy_args(r) for r in args.resources]
    return [resource_from_policy_args(args)]


def options_from_policy_config(config: Mapping[str, Any] | None) -> PolicyOptions:
    config = config or {}
    return PolicyOptions(
        allow_public_endpoint_from_anywhere=bool(config.get("allowPublicEndpointFromAnywhere", False)),
        gpu_taint_key=str(config.get("gpuTaintKey", GPU_TAINT.key)),
    )


def validate_with(policy: Policy) -> Callable[[Any, Callable[..., None]], None]:
    """A CrossGuard ``validate(args, report_violation)`` that runs ``policy`` on the plan.json
    shape of its arguments."""

    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        getter = getattr(args, "get_config", None)
        options = options_from_policy_config(getter() if getter else None)
        for violation in policy.check(resources_from_policy_args(args), options):
            report_violation(violation.message, violation.urn or None)

    return validate
