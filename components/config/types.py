"""Field types every section shares, and the base model of the settings tree.

Strict numbers and booleans (a YAML slip fails instead of being coerced), EC2 ids and instance
types, chart versions, absolute paths inside a pod and Kubernetes namespaces."""

from __future__ import annotations

import re
from typing import Annotated, Any

from annotated_types import Gt
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict, StrictBool
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from .. import aws_names, catalog
from .errors import did_you_mean


# Pydantic's lax mode reads `nodeCount: true` as 1 and `efa: "yes"` as true; a YAML slip must
# fail instead. YAML integers stay valid for floats (gpuMemoryUtilization: 1).
def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "must be a number, not a boolean")
    return value


Int = Annotated[int, Strict()]
Bool = StrictBool
Float = Annotated[float, BeforeValidator(_no_bool)]
PositiveFloat = Annotated[float, Gt(0), BeforeValidator(_no_bool)]
"""A number above 0; the bound before the validator, so that Optional[PositiveFloat]'s JSON schema has it."""


def _aws_id(kind: str, what: str, hint: str = "") -> Any:
    """An EC2 resource id of one kind: ``<kind>-`` and 8 or 17 hex digits (the EC2 API's id forms)."""

    def check(value: str) -> str:
        if not re.fullmatch(rf"{kind}-([0-9a-f]{{8}}|[0-9a-f]{{17}})", value):
            raise PydanticCustomError("id", "{text}", {"text": f"not {what} id such as {kind}-0123456789abcdef0{hint}"})
        return value

    return AfterValidator(check)


VpcId = Annotated[str, _aws_id("vpc", "a VPC", "; leave vpcId out to create a new VPC")]
SubnetId = Annotated[str, _aws_id("subnet", "a subnet")]


def _ec2_type(value: str) -> str:
    # a type the catalog refuses says why there (p6e-gb300 is newer than botocore's list)
    if value not in aws_names.EC2_INSTANCE_TYPES and value not in catalog.REFUSED:
        # EC2 names are lowercase: P5.48XLARGE and a shortened p5.48xl both mean p5.48xlarge
        hint = did_you_mean(value, aws_names.EC2_INSTANCE_TYPES, cutoff=0.75)
        raise PydanticCustomError(
            "instance_type", "{text}", {"text": f"not an EC2 instance type{hint} (botocore {aws_names.BOTOCORE_VERSION}'s list)"}
        )
    return value


Ec2InstanceType = Annotated[str, AfterValidator(_ec2_type)]

# A chart version is SemVer 2 (Helm requires it: helm.sh/docs/topics/charts "Charts and Versioning").
_SEMVER = r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?"


def chart_version(prefix: str = "") -> Any:
    def check(value: str) -> str:
        if not re.fullmatch(re.escape(prefix) + _SEMVER, value):
            raise PydanticCustomError("version", "{text}", {"text": f"not a chart version: {prefix}MAJOR.MINOR.PATCH, such as {prefix}1.7.0"})
        return value

    return AfterValidator(check)


ChartVersion = Annotated[str, chart_version()]


def _absolute_path(value: str) -> str:
    # Kubernetes rejects a relative volumeMount.mountPath and one with ':' (ValidateVolumeMounts);
    # '..' would leave the mount, and '/' would hide the image's root.
    if not value.startswith("/") or ".." in value.split("/") or ":" in value or value.rstrip("/") == "":
        raise PydanticCustomError("path", "an absolute path inside the pod below /, without '..' or ':', such as /fsx")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]

_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def dns_label(what: str) -> Any:
    """A DNS-1035 label (a Kubernetes namespace's form); the error names it as ``what``."""

    def check(value: str) -> str:
        if not _DNS_1035.match(value) or len(value) > 63:
            raise PydanticCustomError("dns", "{text}", {"text": f"{what}: lowercase letters, digits and '-', at most 63"})
        return value

    return AfterValidator(check)


Namespace = Annotated[str, dns_label("a Kubernetes namespace")]
"""The namespace of an operator or controller release (kuberay, JobSet)."""


class SettingsModel(BaseModel):
    """The base of every settings model: frozen, unknown keys rejected, camelCase keys, each
    field's docstring its description (the config reference is generated from them)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
        use_attribute_docstrings=True,
    )
