"""The rlinf-eks CrossGuard policy pack: ``pulumi preview --policy-pack policy``.

Each policy of :mod:`rlinf_eks.policies` becomes a ResourceValidationPolicy (rules about one
resource) or a StackValidationPolicy (rules that follow references between resources), whose
``validate`` adapts pulumi-policy's arguments to the plan.json shape and calls the same pure
function the offline plan runs. Building the PolicyPack starts the analyzer's gRPC server, so
tests never import this module; they test :func:`rlinf_eks.policies_crossguard.validate_with` instead.

Policy config (``pulumi preview --policy-pack policy --policy-pack-config config.json``):
``{"eks-endpoint-not-public": {"allowPublicEndpointFromAnywhere": true}}`` accepts a public API
endpoint open to 0.0.0.0/0 (the stack can also say so with the cluster tag
``rlinf-eks/public-endpoint-from-anywhere: "true"``); ``{"gpu-pods-tolerate-gpu-taint":
{"gpuTaintKey": "..."}}`` names another GPU taint.
"""

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

from rlinf_eks.policies import POLICIES
from rlinf_eks.policies_crossguard import validate_with
from rlinf_eks.scheduling import GPU_TAINT

CONFIG = {
    "eks-endpoint-not-public": PolicyConfigSchema(
        properties={"allowPublicEndpointFromAnywhere": {"type": "boolean", "default": False}},
    ),
    "gpu-pods-tolerate-gpu-taint": PolicyConfigSchema(
        properties={"gpuTaintKey": {"type": "string", "default": GPU_TAINT.key}},
    ),
}


def crossguard_policies():
    for policy in POLICIES:
        kind = ResourceValidationPolicy if policy.scope == "resource" else StackValidationPolicy
        yield kind(
            name=policy.name,
            description=" ".join(policy.description.split()),
            validate=validate_with(policy),
            config_schema=CONFIG.get(policy.name),
        )


PolicyPack(
    name="rlinf-eks",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=list(crossguard_policies()),
)
