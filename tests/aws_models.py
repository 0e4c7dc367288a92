"""Check a plan against the AWS APIs' own rules: botocore's service models.

Every AWS resource in ``plan.json`` is translated into the API requests that the AWS provider
(Terraform's, under pulumi-aws) sends for it, in the API's own shape: member names, EC2's nested
lists and tag specifications, booleans where the provider keeps them as "true"/"false" strings.
Each request is then validated three ways:

1. ``botocore.validate.ParamValidator``: required members, types, minimum lengths and values
   (botocore checks minimums only);
2. the rest of the model's metadata, which botocore leaves to the server: ``enum``, ``pattern``,
   ``max`` (lengths of strings, lists and maps; values of numbers);
3. rules the API documents but the model does not carry (``DOCUMENTED``), each with its source.

A translator reads its resource's inputs through ``Inputs``, which fails when an input is left
unread: an input added to a component later cannot slip past unvalidated. A resource type with no
translator fails ``calls_for`` unless it is listed in ``NOT_AWS_CALLS`` with the reason.

IAM policy documents (role trust policies, inline policies, bucket policies) are checked for
grammar and for action names that exist (``policy_problems``): in botocore's models (or the
exceptions below) and in the Service Authorization Reference (``tests/iam_reference.py``).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import botocore.session
import botocore.validate
import regex

from tests import iam_reference

# --- requests and their validation --------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One API request: ``service`` is botocore's service name, ``operation`` the API's."""

    service: str
    operation: str
    params: dict[str, Any]


@functools.lru_cache(maxsize=None)
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


@functools.lru_cache(maxsize=None)
def service_model(service: str) -> Any:
    return _session().get_service_model(service)


def input_shape(service: str, operation: str) -> Any:
    return service_model(service).operation_model(operation).input_shape


# Java's UTF-16 spelling of "any supplementary character" (AWS patterns are Java regexes): the
# `regex` module wants the code points instead.
_JAVA_SUPPLEMENTARY = "\\uD800\\uDC00-\\uDBFF\\uDFFF"


@functools.lru_cache(maxsize=None)
def _pattern(text: str) -> "regex.Pattern[str]":
    return regex.compile(text.replace(_JAVA_SUPPLEMENTARY, "\\U00010000-\\U0010FFFF"))


def _constraints(value: Any, shape: Any, path: str) -> Iterator[str]:
    """What botocore's validator leaves out: enum, pattern and max (and it walks nested shapes)."""
    meta = shape.metadata
    kind = shape.type_name
    if kind == "structure" and isinstance(value, Mapping):
        for key, item in value.items():
            if key in shape.members:
                yield from _constraints(item, shape.members[key], f"{path}.{key}")
        return
    if kind == "list" and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            yield f"{path}: {len(value)} items, at most {meta['max']} allowed"
        for index, item in enumerate(value):
            yield from _constraints(item, shape.member, f"{path}[{index}]")
        return
    if kind == "map" and isinstance(value, Mapping):
        if "max" in meta and len(value) > meta["max"]:
            yield f"{path}: {len(value)} entries, at most {meta['max']} allowed"
        for key, item in value.items():
            yield from _constraints(key, shape.key, f"{path} key {key!r}")
            yield from _constraints(item, shape.value, f"{path}[{key!r}]")
        return
    if kind == "string" and isinstance(value, str):
        if shape.enum and value not in shape.enum:
            shown = ", ".join(shape.enum[:30]) + (" ..." if len(shape.enum) > 30 else "")
            yield f"{path}={value!r}: not one of the API's values ({shown})"
        if "max" in meta and len(value) > meta["max"]:
            yield f"{path}={value[:60]!r}...: {len(value)} characters, at most {meta['max']} allowed"
        if "pattern" in meta and not _pattern(meta["pattern"]).fullmatch(value):
            # the whole value must match, as the API reference reads them ([\w+=,.@-]+ for IAM names
            # rejects "has space"); anchors in a pattern change nothing then
            yield f"{path}={value!r}: does not match the API's pattern {meta['pattern']}"
        return
    if kind in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool):
        if "max" in meta and value > meta["max"]:
            yield f"{path}={value}: at most {meta['max']} allowed"


def validate(call: Call) -> list[str]:
    """Every problem of one request, each naming operation, member path and value."""
    shape = input_shape(call.service, call.operation)
    problems: list[str] = []
    report = botocore.validate.ParamValidator().validate(call.params, shape)
    if report.has_errors():
        problems += [line.strip() for line in report.generate_report().splitlines() if line.strip()]
    problems += list(_constraints(call.params, shape, call.operation))
    for rule in DOCUMENTED.get((call.service, call.operation), ()):
        problems += rule(call.params)
    return [p if p.startswith(call.operation) else f"{call.operation}: {p}" for p in problems]


# --- rules the API documents but the model does not carry ---------------------------------------

# EC2 API reference, CreateSecurityGroup (GroupDescription/GroupName) and IpRange/UserIdGroupPair
# Description: "Constraints: Up to 255 characters in length. Valid characters: a-z, A-Z, 0-9,
# spaces, and ._-:/()#,@[]+=&;{}!$*" (for VPC security groups). The model has no pattern for them.
SECURITY_GROUP_TEXT = re.compile(r"[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]{0,255}")


def _sg_text(path: str, value: Any) -> list[str]:
    if isinstance(value, str) and not SECURITY_GROUP_TEXT.fullmatch(value):
        bad = sorted({c for c in value if not SECURITY_GROUP_TEXT.fullmatch(c)})
        return [f"{path}={value!r}: EC2 allows only a-zA-Z0-9, spaces and ._-:/()#,@[]+=&;{{}}!$* (up to 255), not {bad}"]
    return []


def _create_security_group(params: Mapping[str, Any]) -> list[str]:
    problems = _sg_text("Description", params.get("Description")) + _sg_text("GroupName", params.get("GroupName"))
    # same reference: "Constraints: ... Cannot start with sg-."
    if str(params.get("GroupName", "")).startswith("sg-"):
        problems.append(f"GroupName={params['GroupName']!r}: cannot start with sg-")
    return problems


def _rule_descriptions(params: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for i, perm in enumerate(params.get("IpPermissions", [])):
        for kind in ("IpRanges", "Ipv6Ranges", "UserIdGroupPairs", "PrefixListIds"):
            for j, item in enumerate(perm.get(kind, [])):
                problems += _sg_text(f"IpPermissions[{i}].{kind}[{j}].Description", item.get("Description"))
    return problems


# EC2 User Guide, "Run commands when you launch an EC2 instance with user data input": "User data is
# limited to 16 KB, in raw form, before it is base64-encoded."
USER_DATA_MAX_BYTES = 16 * 1024


# EC2 API reference, CreateLaunchTemplate: "LaunchTemplateName ... Length Constraints: Minimum
# length of 3. Maximum length of 128. Pattern: [a-zA-Z0-9\(\)\.\-/_]+" (absent from the model).
_LAUNCH_TEMPLATE_NAME = re.compile(r"[a-zA-Z0-9().\-/_]{3,128}")
# EC2 API reference, LaunchTemplateInstanceMetadataOptionsRequest: "HttpPutResponseHopLimit ...
# Possible values: Integers from 1 to 64".
_HOP_LIMIT = range(1, 65)


def _launch_template(params: Mapping[str, Any]) -> list[str]:
    import base64
    import binascii

    problems: list[str] = []
    name = params.get("LaunchTemplateName", "")
    if not _LAUNCH_TEMPLATE_NAME.fullmatch(name):
        problems.append(f"LaunchTemplateName={name!r}: 3-128 characters of a-zA-Z0-9()./_-")
    hops = params.get("LaunchTemplateData", {}).get("MetadataOptions", {}).get("HttpPutResponseHopLimit")
    if hops is not None and hops not in _HOP_LIMIT:
        problems.append(f"LaunchTemplateData.MetadataOptions.HttpPutResponseHopLimit={hops}: 1 to 64")
    data = params.get("LaunchTemplateData", {}).get("UserData")
    if data is None:
        return problems
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return problems + ["LaunchTemplateData.UserData: must be base64 (the API stores it as given)"]
    if len(raw) > USER_DATA_MAX_BYTES:
        problems.append(f"LaunchTemplateData.UserData: {len(raw)} bytes, user data is limited to 16 KB")
    return problems


# S3 User Guide, "General purpose bucket naming rules": 3-63 characters; lowercase letters,
# numbers, dots and hyphens; begin and end with a letter or number; not an IP address; no "..";
# not starting with xn-- / sthree- / amzn-s3-demo-, not ending with -s3alias / --ol-s3 / .mrap /
# --x-s3 / --table-s3.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _bucket_name(params: Mapping[str, Any]) -> list[str]:
    name = params.get("Bucket", "")
    if (
        not _BUCKET.fullmatch(name)
        or ".." in name
        or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name)
        or name.startswith(_BUCKET_PREFIXES)
        or name.endswith(_BUCKET_SUFFIXES)
    ):
        return [f"Bucket={name!r}: not a valid S3 bucket name (3-63 lowercase letters, digits, dots, hyphens; S3 naming rules)"]
    return []


# EC2 Auto Scaling API reference, PutScheduledUpdateGroupAction: "If you try to schedule your
# action in the past, Amazon EC2 Auto Scaling returns an error message", and "You must specify at
# least one of the following properties: MaxSize, MinSize, or DesiredCapacity".
def _scheduled_action(params: Mapping[str, Any]) -> list[str]:
    problems = []
    if not any(k in params for k in ("MaxSize", "MinSize", "DesiredCapacity")):
        problems.append("needs at least one of MaxSize, MinSize, DesiredCapacity")
    sizes = [params.get(k) for k in ("MinSize", "DesiredCapacity", "MaxSize")]
    known = [s for s in sizes if s is not None]
    if known != sorted(known):
        problems.append(f"MinSize <= DesiredCapacity <= MaxSize is violated: {sizes}")
    return problems


# IAM User Guide, "IAM identifiers" (ARNs): a managed policy is arn:<partition>:iam::aws:policy/<path><name>
# (AWS managed) or arn:<partition>:iam::<account>:policy/<path><name>; the model only bounds the length.
_POLICY_ARN = re.compile(r"arn:aws(-cn|-us-gov)?:iam::(aws|\d{12}):policy/([\w+=,.@-]+/)*[\w+=,.@-]{1,128}")


def _attach_role_policy(params: Mapping[str, Any]) -> list[str]:
    arn = params.get("PolicyArn", "")
    return [] if _POLICY_ARN.fullmatch(arn) else [f"PolicyArn={arn!r}: not a managed policy ARN (arn:aws:iam::aws|<account>:policy/<name>)"]


def _node_group_instance_types(params: Mapping[str, Any]) -> list[str]:
    # EKS launches the node group's instance types through EC2, whose model enumerates them (the
    # EKS model types them as free strings): a misspelt type fails only when the group is created
    known = set(input_shape("ec2", "CreateLaunchTemplate").members["LaunchTemplateData"].members["InstanceType"].enum)
    return [f"instanceTypes[{n}]={t!r}: not an EC2 instance type" for n, t in enumerate(params.get("instanceTypes", [])) if t not in known]


def _addon_configuration(params: Mapping[str, Any]) -> list[str]:
    # EKS API reference, CreateAddon configurationValues: "The set of configuration values for the
    # add-on that's created. The values that you provide are validated against the schema returned
    # by DescribeAddonConfiguration": a JSON (or YAML) object; the schema itself needs AWS
    # (tests/test_observability.py checks the keys against the chart behind the add-on)
    text = params.get("configurationValues")
    if text is None:
        return []
    try:
        value = json.loads(text)
    except ValueError as err:
        return [f"configurationValues: not JSON ({err})"]
    return [] if isinstance(value, dict) else ["configurationValues: not a JSON object"]


def _pod_identity_names(params: Mapping[str, Any]) -> list[str]:
    # EKS API reference, CreatePodIdentityAssociation: namespace and serviceAccount name Kubernetes
    # objects (RFC 1123 labels / subdomains); the model types them as free strings
    problems = []
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", params.get("namespace", "")):
        problems.append(f"namespace={params.get('namespace')!r}: not a Kubernetes namespace name")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", params.get("serviceAccount", "")):
        problems.append(f"serviceAccount={params.get('serviceAccount')!r}: not a Kubernetes service account name")
    return problems


# CloudWatch Logs API reference, PutRetentionPolicy: "retentionInDays ... Possible values are: 1, 3,
# 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, and
# 3653" (the model types it as any integer).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)


def _log_retention(params: Mapping[str, Any]) -> list[str]:
    days = params.get("retentionInDays")
    return [] if days in LOG_RETENTION_DAYS else [f"retentionInDays={days}: one of {', '.join(map(str, LOG_RETENTION_DAYS))}"]


DOCUMENTED: dict[tuple[str, str], tuple[Callable[[Mapping[str, Any]], list[str]], ...]] = {
    ("ec2", "CreateSecurityGroup"): (_create_security_group,),
    ("ec2", "AuthorizeSecurityGroupIngress"): (_rule_descriptions,),
    ("ec2", "AuthorizeSecurityGroupEgress"): (_rule_descriptions,),
    ("ec2", "CreateLaunchTemplate"): (_launch_template,),
    ("s3", "CreateBucket"): (_bucket_name,),
    ("iam", "AttachRolePolicy"): (_attach_role_policy,),
    ("eks", "CreateNodegroup"): (_node_group_instance_types,),
    ("eks", "CreateAddon"): (_addon_configuration,),
    ("eks", "CreatePodIdentityAssociation"): (_pod_identity_names,),
    ("autoscaling", "PutScheduledUpdateGroupAction"): (_scheduled_action,),
    ("logs", "PutRetentionPolicy"): (_log_retention,),
}


# --- reading a resource's inputs ----------------------------------------------------------------


class Inputs:
    """A resource's inputs; remembers which were read, so none is left unvalidated."""

    def __init__(self, resource: Mapping[str, Any], region: str = "us-east-1"):
        self.resource = resource
        self.region = region
        self._data: Mapping[str, Any] = resource["inputs"]
        self._read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self._read.add(key)
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._read.add(key)
        return self._data.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def unread(self) -> list[str]:
        return sorted(set(self._data) - self._read)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _bool(value: Any) -> Any:
    """The provider's tri-state booleans are strings ("true"/"false"); the API takes booleans."""
    return {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value


def _int(value: Any) -> Any:
    """Mocks (and JSON) hand numbers back as floats; the API's integers are whole."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def autoname(resource: Mapping[str, Any]) -> str:
    """The physical name Pulumi's autonaming gives a resource without a name input: the logical
    name plus a dash and 7 random hex characters (the mocks skip autonaming)."""
    return f"{resource['name']}-0a1b2c3"


def _tag_list(tags: Mapping[str, str] | None, key: str = "Key", value: str = "Value") -> list[dict[str, str]]:
    return [{key: k, value: v} for k, v in sorted((tags or {}).items())]


def _ec2_tags(resource_type: str, tags: Mapping[str, str] | None) -> dict[str, Any]:
    return {"TagSpecifications": [{"ResourceType": resource_type, "Tags": _tag_list(tags)}]} if tags else {}


# --- translators: plan resource -> the provider's API requests ----------------------------------

Translator = Callable[[Inputs], Iterable[Call]]
TRANSLATORS: dict[str, Translator] = {}

PROVIDER_ONLY: dict[str, frozenset[str]] = {}
"""Inputs that steer the provider itself and reach no API request (with the reason)."""


def translates(type_: str, provider_only: Iterable[str] = ()) -> Callable[[Translator], Translator]:
    def register(fn: Translator) -> Translator:
        TRANSLATORS[type_] = fn
        PROVIDER_ONLY[type_] = frozenset(provider_only)
        return fn

    return register


# EC2 (query protocol: lists are plain lists of member structures, tags are TagSpecifications)


@translates("aws:ec2/vpc:Vpc")
def _vpc(i: Inputs) -> Iterator[Call]:
    yield Call("ec2", "CreateVpc", {"CidrBlock": i["cidrBlock"], **_ec2_tags("vpc", i.get("tags"))})
    # ModifyVpcAttribute takes one attribute per request
    for key, member in (("enableDnsSupport", "EnableDnsSupport"), ("enableDnsHostnames", "EnableDnsHostnames")):
        if key in i:
            yield Call("ec2", "ModifyVpcAttribute", {"VpcId": i.resource["id"], member: {"Value": i[key]}})


@translates("aws:ec2/subnet:Subnet")
def _subnet(i: Inputs) -> Iterator[Call]:
    yield Call(
        "ec2",
        "CreateSubnet",
        _drop_none(
            {
                "VpcId": i["vpcId"],
                "CidrBlock": i["cidrBlock"],
                "AvailabilityZone": i.get("availabilityZone"),
                **_ec2_tags("subnet", i.get("tags")),
            }
        ),
    )
    if i.get("mapPublicIpOnLaunch"):
        yield Call("ec2", "ModifySubnetAttribute", {"SubnetId": i.resource["id"], "MapPublicIpOnLaunch": {"Value": True}})


@translates("aws:ec2/internetGateway:InternetGateway")
def _igw(i: Inputs) -> Iterator[Call]:
    yield Call("ec2", "CreateInternetGateway", _ec2_tags("internet-gateway", i.get("tags")))
    yield Call("ec2", "AttachInternetGateway", {"InternetGatewayId": i.resource["id"], "VpcId": i["vpcId"]})


@translates("aws:ec2/eip:Eip")
def _eip(i: Inputs) -> Iterator[Call]:
    yield Call("ec2", "AllocateAddress", _drop_none({"Domain": i.get("domain"), **_ec2_tags("elastic-ip", i.get("tags"))}))


@translates("aws:ec2/natGateway:NatGateway")
def _nat(i: Inputs) -> Iterator[Call]:
    yield Call(
        "ec2",
        "CreateNatGateway",
        _drop_none(
            {
                "SubnetId": i["subnetId"],
                "AllocationId": i.get("allocationId"),
                "ConnectivityType": i.get("connectivityType"),
                **_ec2_tags("natgateway", i.get("tags")),
            }
        ),
    )


@translates("aws:ec2/routeTable:RouteTable")
def _route_table(i: Inputs) -> Iterator[Call]:
    yield Call("ec2", "CreateRouteTable", {"VpcId": i["vpcId"], **_ec2_tags("route-table", i.get("tags"))})


@translates("aws:ec2/route:Route")
def _route(i: Inputs) -> Iterator[Call]:
    yield Call(
        "ec2",
        "CreateRoute",
        _drop_none(
            {
                "RouteTableId": i["routeTableId"],
                "DestinationCidrBlock": i.get("destinationCidrBlock"),
                "GatewayId": i.get("gatewayId"),
                "NatGatewayId": i.get("natGatewayId"),
            }
        ),
    )


@translates("aws:ec2/vpcEndpoint:VpcEndpoint")
def _vpc_endpoint(i: Inputs) -> Iterator[Call]:
    # resourceVPCEndpointCreate: PrivateDnsEnabled is always sent (false unless set), the type
    # defaults to Gateway
    yield Call(
        "ec2",
        "CreateVpcEndpoint",
        _drop_none(
            {
                "VpcId": i["vpcId"],
                "ServiceName": i.get("serviceName"),
                "VpcEndpointType": i.get("vpcEndpointType", "Gateway"),
                "PrivateDnsEnabled": bool(i.get("privateDnsEnabled", False)),
                "RouteTableIds": i.get("routeTableIds") or None,
                "SubnetIds": i.get("subnetIds") or None,
                "SecurityGroupIds": i.get("securityGroupIds") or None,
                "PolicyDocument": i.get("policy"),
                **_ec2_tags("vpc-endpoint", i.get("tags")),
            }
        ),
    )


@translates("aws:ec2/routeTableAssociation:RouteTableAssociation")
def _route_table_association(i: Inputs) -> Iterator[Call]:
    yield Call("ec2", "AssociateRouteTable", {"RouteTableId": i["routeTableId"], "SubnetId": i["subnetId"]})


@translates("aws:ec2/securityGroup:SecurityGroup", provider_only=("revokeRulesOnDelete",))
def _security_group(i: Inputs) -> Iterator[Call]:
    yield Call(
        "ec2",
        "CreateSecurityGroup",
        _drop_none(
            {
                "GroupName": i.get("name") or autoname(i.resource),
                # the provider's default when none is given: "Managed by Pulumi"
                "Description": i.get("description", "Managed by Pulumi"),
                "VpcId": i.get("vpcId"),
                **_ec2_tags("security-group", i.get("tags")),
            }
        ),
    )


def _sg_rule(i: Inputs, operation: str) -> Iterator[Call]:
    permission: dict[str, Any] = {"IpProtocol": i["ipProtocol"]}
    if "fromPort" in i:
        permission["FromPort"] = _int(i["fromPort"])
    if "toPort" in i:
        permission["ToPort"] = _int(i["toPort"])
    description = i.get("description")
    if "cidrIpv4" in i:
        permission["IpRanges"] = [_drop_none({"CidrIp": i["cidrIpv4"], "Description": description})]
    if "cidrIpv6" in i:
        permission["Ipv6Ranges"] = [_drop_none({"CidrIpv6": i["cidrIpv6"], "Description": description})]
    if "referencedSecurityGroupId" in i:
        permission["UserIdGroupPairs"] = [_drop_none({"GroupId": i["referencedSecurityGroupId"], "Description": description})]
    if "prefixListId" in i:
        permission["PrefixListIds"] = [_drop_none({"PrefixListId": i["prefixListId"], "Description": description})]
    sources = [k for k in ("IpRanges", "Ipv6Ranges", "UserIdGroupPairs", "PrefixListIds") if k in permission]
    assert len(sources) == 1, f"{i.resource['name']}: a security group rule needs exactly one source or destination, got {sources}"
    yield Call(
        "ec2",
        operation,
        {"GroupId": i["securityGroupId"], "IpPermissions": [permission], **_ec2_tags("security-group-rule", i.get("tags"))},
    )


@translates("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
def _ingress(i: Inputs) -> Iterator[Call]:
    yield from _sg_rule(i, "AuthorizeSecurityGroupIngress")


@translates("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
def _egress(i: Inputs) -> Iterator[Call]:
    yield from _sg_rule(i, "AuthorizeSecurityGroupEgress")


@translates("aws:ec2/placementGroup:PlacementGroup")
def _placement_group(i: Inputs) -> Iterator[Call]:
    yield Call(
        "ec2",
        "CreatePlacementGroup",
        {"GroupName": i.get("name") or i.resource["id"], "Strategy": i["strategy"], **_ec2_tags("placement-group", i.get("tags"))},
    )


@translates("aws:ec2/launchTemplate:LaunchTemplate")
def _launch_template_calls(i: Inputs) -> Iterator[Call]:
    data: dict[str, Any] = {}
    if "instanceType" in i:
        data["InstanceType"] = i["instanceType"]
    if "userData" in i:
        data["UserData"] = i["userData"]
    if "vpcSecurityGroupIds" in i:
        data["SecurityGroupIds"] = i["vpcSecurityGroupIds"]
    if "imageId" in i:
        data["ImageId"] = i["imageId"]
    data["BlockDeviceMappings"] = [
        _drop_none(
            {
                "DeviceName": m["deviceName"],
                "Ebs": {
                    "DeleteOnTermination": _bool(m["ebs"].get("deleteOnTermination")),
                    "Encrypted": _bool(m["ebs"].get("encrypted")),
                    "VolumeSize": _int(m["ebs"].get("volumeSize")),
                    "VolumeType": m["ebs"].get("volumeType"),
                    "Iops": _int(m["ebs"].get("iops")),
                    "Throughput": _int(m["ebs"].get("throughput")),
                    "KmsKeyId": m["ebs"].get("kmsKeyId"),
                }
                if "ebs" in m
                else None,
            }
        )
        for m in i.get("blockDeviceMappings", [])
    ]
    data["NetworkInterfaces"] = [
        _drop_none(
            {
                "DeviceIndex": _int(n.get("deviceIndex")),
                "NetworkCardIndex": _int(n.get("networkCardIndex")),
                "InterfaceType": n.get("interfaceType"),
                "Groups": n.get("securityGroups"),
                "DeleteOnTermination": _bool(n.get("deleteOnTermination")),
                "SubnetId": n.get("subnetId"),
                "AssociatePublicIpAddress": _bool(n.get("associatePublicIpAddress")),
            }
        )
        for n in i.get("networkInterfaces", [])
    ]
    if "metadataOptions" in i:
        m = i["metadataOptions"]
        data["MetadataOptions"] = _drop_none(
            {
                "HttpEndpoint": m.get("httpEndpoint"),
                "HttpTokens": m.get("httpTokens"),
                "HttpPutResponseHopLimit": _int(m.get("httpPutResponseHopLimit")),
                "InstanceMetadataTags": m.get("instanceMetadataTags"),
                "HttpProtocolIpv6": m.get("httpProtocolIpv6"),
            }
        )
    if "placement" in i:
        p = i["placement"]
        data["Placement"] = _drop_none({"GroupName": p.get("groupName"), "AvailabilityZone": p.get("availabilityZone")})
    if "instanceMarketOptions" in i:
        m = i["instanceMarketOptions"]
        data["InstanceMarketOptions"] = _drop_none({"MarketType": m.get("marketType")})
        assert set(m) <= {"marketType"}, f"untranslated instanceMarketOptions members {sorted(m)}"
    if "capacityReservationSpecification" in i:
        spec = i["capacityReservationSpecification"]
        target = spec.get("capacityReservationTarget") or {}
        data["CapacityReservationSpecification"] = _drop_none(
            {
                "CapacityReservationPreference": spec.get("capacityReservationPreference"),
                "CapacityReservationTarget": _drop_none(
                    {
                        "CapacityReservationId": target.get("capacityReservationId"),
                        "CapacityReservationResourceGroupArn": target.get("capacityReservationResourceGroupArn"),
                    }
                )
                or None,
            }
        )
    data["TagSpecifications"] = [
        {"ResourceType": t["resourceType"], "Tags": _tag_list(t.get("tags"))} for t in i.get("tagSpecifications", [])
    ]
    data = {k: v for k, v in data.items() if v not in ([], None)}
    name = i.get("name") or autoname(i.resource)
    yield Call(
        "ec2",
        "CreateLaunchTemplate",
        {"LaunchTemplateName": name, "LaunchTemplateData": data, **_ec2_tags("launch-template", i.get("tags"))},
    )
    if i.get("updateDefaultVersion"):
        # on every change the provider makes the new version the default
        yield Call("ec2", "ModifyLaunchTemplate", {"LaunchTemplateId": i.resource["id"], "DefaultVersion": "2"})


# EKS (rest-json: members are camelCase, tags and labels are maps)


@translates("aws:eks/nodeGroup:NodeGroup")
def _node_group(i: Inputs) -> Iterator[Call]:
    scaling = {k: _int(v) for k, v in i["scalingConfig"].items()}
    launch_template = i.get("launchTemplate")
    yield Call(
        "eks",
        "CreateNodegroup",
        _drop_none(
            {
                "clusterName": i["clusterName"],
                "nodegroupName": i.get("nodeGroupName") or i.resource["id"].split(":", 1)[-1],
                "nodeRole": i["nodeRoleArn"],
                "subnets": i["subnetIds"],
                "amiType": i.get("amiType"),
                "capacityType": i.get("capacityType"),
                "instanceTypes": i.get("instanceTypes"),
                "diskSize": _int(i.get("diskSize")),
                "scalingConfig": scaling,
                "updateConfig": {k: _int(v) for k, v in i["updateConfig"].items()} if "updateConfig" in i else None,
                "nodeRepairConfig": i.get("nodeRepairConfig"),
                "labels": i.get("labels"),
                "taints": i.get("taints"),
                "tags": i.get("tags"),
                "launchTemplate": {"id": launch_template["id"], "version": str(launch_template["version"])} if launch_template else None,
                "version": i.get("version"),
                "releaseVersion": i.get("releaseVersion"),
            }
        ),
    )


@translates("aws:eks/addon:Addon")
def _addon(i: Inputs) -> Iterator[Call]:
    create = {
        "clusterName": i["clusterName"],
        "addonName": i["addonName"],
        "addonVersion": i.get("addonVersion"),
        "serviceAccountRoleArn": i.get("serviceAccountRoleArn"),
        "resolveConflicts": i.get("resolveConflictsOnCreate"),
        "configurationValues": i.get("configurationValues"),
        "tags": i.get("tags"),
    }
    yield Call("eks", "CreateAddon", _drop_none(create))
    if "resolveConflictsOnUpdate" in i:
        yield Call(
            "eks",
            "UpdateAddon",
            _drop_none({"clusterName": i["clusterName"], "addonName": i["addonName"], "resolveConflicts": i["resolveConflictsOnUpdate"]}),
        )


@translates("aws:eks/podIdentityAssociation:PodIdentityAssociation")
def _pod_identity_association(i: Inputs) -> Iterator[Call]:
    request = {
        "clusterName": i["clusterName"],
        "namespace": i["namespace"],
        "serviceAccount": i["serviceAccount"],
        "roleArn": i["roleArn"],
        "targetRoleArn": i.get("targetRoleArn"),
        "disableSessionTags": i.get("disableSessionTags"),
        "tags": i.get("tags"),
    }
    yield Call("eks", "CreatePodIdentityAssociation", _drop_none(request))


@translates("aws:eks/accessEntry:AccessEntry")
def _access_entry(i: Inputs) -> Iterator[Call]:
    request = {
        "clusterName": i["clusterName"],
        "principalArn": i["principalArn"],
        "type": i.get("type"),
        "kubernetesGroups": i.get("kubernetesGroups"),
        "username": i.get("userName"),
        "tags": i.get("tags"),
    }
    yield Call("eks", "CreateAccessEntry", _drop_none(request))


# SQS (json protocol: attributes are a string map) and EventBridge


@translates("aws:sqs/queue:Queue")
def _sqs_queue(i: Inputs) -> Iterator[Call]:
    attributes = {
        "MessageRetentionPeriod": i.get("messageRetentionSeconds"),
        "SqsManagedSseEnabled": i.get("sqsManagedSseEnabled"),
        "KmsMasterKeyId": i.get("kmsMasterKeyId"),
        "VisibilityTimeout": i.get("visibilityTimeoutSeconds"),
    }
    attributes = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in attributes.items() if v is not None}
    yield Call(
        "sqs",
        "CreateQueue",
        _drop_none({"QueueName": i.get("name") or autoname(i.resource), "Attributes": attributes or None, "tags": i.get("tags")}),
    )


@translates("aws:sqs/queuePolicy:QueuePolicy")
def _sqs_queue_policy(i: Inputs) -> Iterator[Call]:
    yield Call("sqs", "SetQueueAttributes", {"QueueUrl": i["queueUrl"], "Attributes": {"Policy": i["policy"]}})


@translates("aws:cloudwatch/eventRule:EventRule")
def _event_rule(i: Inputs) -> Iterator[Call]:
    request = {
        "Name": i.get("name") or autoname(i.resource),
        "EventPattern": i.get("eventPattern"),
        "ScheduleExpression": i.get("scheduleExpression"),
        "Description": i.get("description"),
        "EventBusName": i.get("eventBusName"),
        "State": i.get("state"),
        "Tags": _tag_list(i.get("tags")) or None,
    }
    yield Call("events", "PutRule", _drop_none(request))


@translates("aws:cloudwatch/eventTarget:EventTarget")
def _event_target(i: Inputs) -> Iterator[Call]:
    target = {"Id": i.get("targetId") or autoname(i.resource), "Arn": i["arn"]}
    yield Call("events", "PutTargets", {"Rule": i["rule"], "Targets": [target]})


# pulumi-eks's Cluster is a remote component: under mocks it has no children, so its inputs are
# checked against the requests its children make (aws.eks.Cluster -> CreateCluster, the vpc-cni
# and coredns addons -> CreateAddon). The cluster role is created inside it: a stand-in ARN named as
# pulumi-eks names it (servicerole.ts: the role "<cluster>-eksRole-role", autonamed).
_PULUMI_EKS_ROLE = "arn:aws:iam::123456789012:role/{name}-eksRole-role-0a1b2c3"


@translates(
    "eks:index:Cluster",
    provider_only=(
        # pulumi-eks options that decide which child resources exist, not what a request holds
        "skipDefaultNodeGroup",
        "skipDefaultSecurityGroups",
        "createOidcProvider",
        "vpcId",
    ),
)
def _pulumi_eks_cluster(i: Inputs) -> Iterator[Call]:
    vpc: dict[str, Any] = {
        "subnetIds": [*i.get("privateSubnetIds", []), *i.get("publicSubnetIds", []), *i.get("subnetIds", [])],
        "endpointPrivateAccess": i.get("endpointPrivateAccess"),
        "endpointPublicAccess": i.get("endpointPublicAccess"),
        "publicAccessCidrs": i.get("publicAccessCidrs"),
    }
    request = {
        "name": i["name"],
        "version": i.get("version"),
        "roleArn": i.get("serviceRole") or _PULUMI_EKS_ROLE.format(name=i.resource["name"]),
        "resourcesVpcConfig": _drop_none(vpc),
        "logging": {"clusterLogging": [{"types": i["enabledClusterLogTypes"], "enabled": True}]} if i.get("enabledClusterLogTypes") else None,
        "accessConfig": {"authenticationMode": i["authenticationMode"]} if "authenticationMode" in i else None,
        "encryptionConfig": [{"resources": ["secrets"], "provider": {"keyArn": i["encryptionConfigKeyArn"]}}]
        if "encryptionConfigKeyArn" in i
        else None,
        "tags": i.get("tags"),
    }
    yield Call("eks", "CreateCluster", _drop_none(request))
    for entry in (i.get("accessEntries") or {}).values():
        yield Call(
            "eks",
            "CreateAccessEntry",
            _drop_none(
                {
                    "clusterName": i["name"],
                    "principalArn": entry["principalArn"],
                    "kubernetesGroups": entry.get("kubernetesGroups"),
                    "username": entry.get("username"),
                    "type": entry.get("type"),
                }
            ),
        )
        for policy in (entry.get("accessPolicies") or {}).values():
            scope = policy["accessScope"]
            yield Call(
                "eks",
                "AssociateAccessPolicy",
                {
                    "clusterName": i["name"],
                    "principalArn": entry["principalArn"],
                    "policyArn": policy["policyArn"],
                    "accessScope": _drop_none({"type": scope["type"], "namespaces": scope.get("namespaces")}),
                },
            )
    for key, addon in (("vpcCniOptions", "vpc-cni"), ("corednsAddonOptions", "coredns"), ("kubeProxyAddonOptions", "kube-proxy")):
        options = i.get(key)
        if not options or options.get("enabled") is False:
            continue
        yield Call(
            "eks",
            "CreateAddon",
            _drop_none(
                {
                    "clusterName": i["name"],
                    "addonName": addon,
                    "addonVersion": options.get("addonVersion"),
                    "resolveConflicts": options.get("resolveConflictsOnCreate"),
                    "configurationValues": json.dumps(options["configurationValues"]) if "configurationValues" in options else None,
                }
            ),
        )


# IAM (query protocol; the policy documents are JSON strings, checked by policy_problems too)


def _role_name(i: Inputs) -> str:
    return i.get("name") or i.resource["id"]


@translates("aws:iam/role:Role", provider_only=("forceDetachPolicies",))
def _role(i: Inputs) -> Iterator[Call]:
    yield Call(
        "iam",
        "CreateRole",
        _drop_none(
            {
                "RoleName": _role_name(i),
                "AssumeRolePolicyDocument": i["assumeRolePolicy"],
                "Description": i.get("description"),
                "Path": i.get("path"),
                "MaxSessionDuration": _int(i.get("maxSessionDuration")),
                "Tags": _tag_list(i.get("tags")) or None,
            }
        ),
    )


@translates("aws:iam/rolePolicy:RolePolicy")
def _role_policy(i: Inputs) -> Iterator[Call]:
    yield Call(
        "iam",
        "PutRolePolicy",
        {"RoleName": i["role"], "PolicyName": i.get("name") or autoname(i.resource), "PolicyDocument": i["policy"]},
    )


@translates("aws:iam/policy:Policy")
def _policy(i: Inputs) -> Iterator[Call]:
    yield Call(
        "iam",
        "CreatePolicy",
        _drop_none(
            {
                "PolicyName": i.get("name") or autoname(i.resource),
                "PolicyDocument": i["policy"],
                "Description": i.get("description"),
                "Path": i.get("path"),
                "Tags": _tag_list(i.get("tags")) or None,
            }
        ),
    )


@translates("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
def _attachment(i: Inputs) -> Iterator[Call]:
    yield Call("iam", "AttachRolePolicy", {"RoleName": i["role"], "PolicyArn": i["policyArn"]})


@translates("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
def _oidc(i: Inputs) -> Iterator[Call]:
    yield Call(
        "iam",
        "CreateOpenIDConnectProvider",
        _drop_none({"Url": i["url"], "ClientIDList": i.get("clientIdLists"), "ThumbprintList": i.get("thumbprintLists"), "Tags": _tag_list(i.get("tags")) or None}),
    )


# KMS


@translates("aws:kms/key:Key")
def _kms_key(i: Inputs) -> Iterator[Call]:
    yield Call(
        "kms",
        "CreateKey",
        _drop_none(
            {
                "Description": i.get("description"),
                "KeyUsage": i.get("keyUsage"),
                "KeySpec": i.get("customerMasterKeySpec"),
                "Policy": i.get("policy"),
                "Tags": _tag_list(i.get("tags"), "TagKey", "TagValue") or None,
            }
        ),
    )
    if i.get("enableKeyRotation"):
        yield Call("kms", "EnableKeyRotation", {"KeyId": i.resource["id"]})
    if "deletionWindowInDays" in i:
        # used on destroy: the waiting period before the key is deleted
        yield Call("kms", "ScheduleKeyDeletion", {"KeyId": i.resource["id"], "PendingWindowInDays": _int(i["deletionWindowInDays"])})


# S3 (rest-xml; each bucket setting is its own resource and its own Put* request)


@translates("aws:s3/bucket:Bucket", provider_only=("forceDestroy",))  # forceDestroy: empty the bucket on delete
def _bucket(i: Inputs) -> Iterator[Call]:
    name = i.get("bucket") or i.resource["id"]
    request: dict[str, Any] = {"Bucket": name}
    if i.region != "us-east-1":
        # S3 CreateBucket: outside us-east-1 the region goes in as the bucket's location constraint
        request["CreateBucketConfiguration"] = {"LocationConstraint": i.region}
    yield Call("s3", "CreateBucket", request)
    if i.get("tags"):
        yield Call("s3", "PutBucketTagging", {"Bucket": name, "Tagging": {"TagSet": _tag_list(i["tags"])}})


@translates("aws:s3/bucketOwnershipControls:BucketOwnershipControls")
def _ownership(i: Inputs) -> Iterator[Call]:
    rule = i["rule"]
    yield Call("s3", "PutBucketOwnershipControls", {"Bucket": i["bucket"], "OwnershipControls": {"Rules": [{"ObjectOwnership": rule["objectOwnership"]}]}})


@translates("aws:s3/bucketPolicy:BucketPolicy")
def _bucket_policy(i: Inputs) -> Iterator[Call]:
    yield Call("s3", "PutBucketPolicy", {"Bucket": i["bucket"], "Policy": i["policy"]})


@translates("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
def _public_access(i: Inputs) -> Iterator[Call]:
    config = {
        member: i[key]
        for key, member in (
            ("blockPublicAcls", "BlockPublicAcls"),
            ("ignorePublicAcls", "IgnorePublicAcls"),
            ("blockPublicPolicy", "BlockPublicPolicy"),
            ("restrictPublicBuckets", "RestrictPublicBuckets"),
        )
        if key in i
    }
    yield Call("s3", "PutPublicAccessBlock", {"Bucket": i["bucket"], "PublicAccessBlockConfiguration": config})


@translates("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
def _encryption(i: Inputs) -> Iterator[Call]:
    rules = []
    for rule in i["rules"]:
        default = rule.get("applyServerSideEncryptionByDefault") or {}
        rules.append(
            _drop_none(
                {
                    "ApplyServerSideEncryptionByDefault": _drop_none(
                        {"SSEAlgorithm": default.get("sseAlgorithm"), "KMSMasterKeyID": default.get("kmsMasterKeyId")}
                    )
                    or None,
                    "BucketKeyEnabled": rule.get("bucketKeyEnabled"),
                }
            )
        )
    yield Call("s3", "PutBucketEncryption", {"Bucket": i["bucket"], "ServerSideEncryptionConfiguration": {"Rules": rules}})


@translates("aws:s3/bucketVersioning:BucketVersioning")
def _versioning(i: Inputs) -> Iterator[Call]:
    config = i["versioningConfiguration"]
    yield Call(
        "s3",
        "PutBucketVersioning",
        {"Bucket": i["bucket"], "VersioningConfiguration": _drop_none({"Status": config.get("status"), "MFADelete": config.get("mfaDelete")})},
    )


def _lifecycle_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    expiration, noncurrent = rule.get("expiration") or {}, rule.get("noncurrentVersionExpiration") or {}
    abort = rule.get("abortIncompleteMultipartUpload") or {}
    return _drop_none(
        {
            "ID": rule.get("id"),
            "Status": rule["status"],
            "Filter": {"Prefix": (rule.get("filter") or {}).get("prefix")} if rule.get("filter") else None,
            "Expiration": _drop_none({"Days": _int(expiration.get("days")), "ExpiredObjectDeleteMarker": expiration.get("expiredObjectDeleteMarker")})
            if expiration else None,
            "NoncurrentVersionExpiration": {"NoncurrentDays": _int(noncurrent.get("noncurrentDays"))} if noncurrent else None,
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": _int(abort.get("daysAfterInitiation"))} if abort else None,
        }
    )


@translates("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
def _bucket_lifecycle(i: Inputs) -> Iterator[Call]:
    yield Call("s3", "PutBucketLifecycleConfiguration", {"Bucket": i["bucket"], "LifecycleConfiguration": {"Rules": [_lifecycle_rule(r) for r in i["rules"]]}})


# FSx (json protocol)


@translates("aws:fsx/lustreFileSystem:LustreFileSystem")
def _lustre(i: Inputs) -> Iterator[Call]:
    subnets = i["subnetIds"]
    lustre = _drop_none(
        {
            "DeploymentType": i.get("deploymentType"),
            "PerUnitStorageThroughput": _int(i.get("perUnitStorageThroughput")),
            "DataCompressionType": i.get("dataCompressionType"),
            "CopyTagsToBackups": i.get("copyTagsToBackups"),
            "AutomaticBackupRetentionDays": _int(i.get("automaticBackupRetentionDays")),
            "WeeklyMaintenanceStartTime": i.get("weeklyMaintenanceStartTime"),
            "ImportPath": i.get("importPath"),
            "ExportPath": i.get("exportPath"),
        }
    )
    yield Call(
        "fsx",
        "CreateFileSystem",
        _drop_none(
            {
                "FileSystemType": "LUSTRE",
                "StorageCapacity": _int(i["storageCapacity"]),
                "StorageType": i.get("storageType"),
                # pulumi-aws v7 types subnetIds as one string (FSx for Lustre takes one subnet)
                "SubnetIds": [subnets] if isinstance(subnets, str) else subnets,
                "SecurityGroupIds": i.get("securityGroupIds"),
                "FileSystemTypeVersion": i.get("fileSystemTypeVersion"),
                "KmsKeyId": i.get("kmsKeyId"),
                "Tags": _tag_list(i.get("tags")) or None,
                "LustreConfiguration": lustre or None,
            }
        ),
    )
    if "skipFinalBackup" in i:
        # used on destroy
        yield Call(
            "fsx",
            "DeleteFileSystem",
            {"FileSystemId": i.resource["id"], "LustreConfiguration": {"SkipFinalBackup": i["skipFinalBackup"]}},
        )


@translates("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
def _dra(i: Inputs) -> Iterator[Call]:
    s3 = i.get("s3") or {}
    policies = {
        member: {"Events": s3[key]["events"]}
        for key, member in (("autoImportPolicy", "AutoImportPolicy"), ("autoExportPolicy", "AutoExportPolicy"))
        if key in s3
    }
    yield Call(
        "fsx",
        "CreateDataRepositoryAssociation",
        _drop_none(
            {
                "FileSystemId": i["fileSystemId"],
                "FileSystemPath": i.get("fileSystemPath"),
                "DataRepositoryPath": i["dataRepositoryPath"],
                "BatchImportMetaDataOnCreate": i.get("batchImportMetaDataOnCreate"),
                "ImportedFileChunkSize": _int(i.get("importedFileChunkSize")),
                "S3": policies or None,
                "Tags": _tag_list(i.get("tags")) or None,
            }
        ),
    )
    if "deleteDataInFilesystem" in i:
        yield Call(
            "fsx",
            "DeleteDataRepositoryAssociation",
            {"AssociationId": i.resource["id"], "DeleteDataInFileSystem": i["deleteDataInFilesystem"]},
        )


# Auto Scaling


def _schedule_size(value: Any) -> Any:
    """aws_autoscaling_schedule sends 0 for a size left unset and leaves a size of -1 out
    ("Set to -1 if you don't want to change ... Defaults to 0")."""
    value = _int(0 if value is None else value)
    return None if value == -1 else value


@translates("aws:autoscaling/schedule:Schedule")
def _schedule(i: Inputs) -> Iterator[Call]:
    yield Call(
        "autoscaling",
        "PutScheduledUpdateGroupAction",
        _drop_none(
            {
                "AutoScalingGroupName": i["autoscalingGroupName"],
                "ScheduledActionName": i["scheduledActionName"],
                "StartTime": i.get("startTime"),
                "EndTime": i.get("endTime"),
                "Recurrence": i.get("recurrence"),
                "TimeZone": i.get("timeZone"),
                "MinSize": _schedule_size(i.get("minSize")),
                "MaxSize": _schedule_size(i.get("maxSize")),
                "DesiredCapacity": _schedule_size(i.get("desiredCapacity")),
            }
        ),
    )


# ECR (json protocol; the repository's settings go in with CreateRepository)


@translates("aws:ecr/repository:Repository", provider_only=("forceDelete",))  # forceDelete: delete images with the repository
def _ecr_repository(i: Inputs) -> Iterator[Call]:
    encryption = (i.get("encryptionConfigurations") or [None])[0]
    scanning = i.get("imageScanningConfiguration")
    yield Call(
        "ecr",
        "CreateRepository",
        _drop_none(
            {
                "repositoryName": i.get("name") or autoname(i.resource),
                "imageTagMutability": i.get("imageTagMutability"),
                "imageTagMutabilityExclusionFilters": [
                    {"filterType": f.get("filterType"), "filter": f.get("filter")} for f in i.get("imageTagMutabilityExclusionFilters") or []
                ] or None,
                "imageScanningConfiguration": {"scanOnPush": scanning.get("scanOnPush", False)} if scanning else None,
                "encryptionConfiguration": _drop_none({"encryptionType": encryption.get("encryptionType"), "kmsKey": encryption.get("kmsKey")})
                if encryption else None,
                "tags": _tag_list(i.get("tags")) or None,
            }
        ),
    )


@translates("aws:ecr/lifecyclePolicy:LifecyclePolicy")
def _ecr_lifecycle(i: Inputs) -> Iterator[Call]:
    yield Call("ecr", "PutLifecyclePolicy", {"repositoryName": i["repository"], "lifecyclePolicyText": i["policy"]})


@translates("aws:ecr/pullThroughCacheRule:PullThroughCacheRule")
def _ecr_pull_through(i: Inputs) -> Iterator[Call]:
    yield Call(
        "ecr",
        "CreatePullThroughCacheRule",
        _drop_none(
            {
                "ecrRepositoryPrefix": i["ecrRepositoryPrefix"],
                "upstreamRegistryUrl": i["upstreamRegistryUrl"],
                "credentialArn": i.get("credentialArn"),
                "customRoleArn": i.get("customRoleArn"),
                "upstreamRepositoryPrefix": i.get("upstreamRepositoryPrefix"),
            }
        ),
    )


# CodeBuild (json protocol)


@translates("aws:codebuild/project:Project")
def _codebuild_project(i: Inputs) -> Iterator[Call]:
    env = i["environment"]
    source = i["source"]
    logs = i.get("logsConfig") or {}
    cloudwatch, s3_logs = logs.get("cloudwatchLogs"), logs.get("s3Logs")
    artifacts = i["artifacts"]
    yield Call(
        "codebuild",
        "CreateProject",
        _drop_none(
            {
                "name": i.get("name") or autoname(i.resource),
                "description": i.get("description"),
                "serviceRole": i["serviceRole"],
                "timeoutInMinutes": _int(i.get("buildTimeout")),
                "queuedTimeoutInMinutes": _int(i.get("queuedTimeout")),
                "source": {
                    "type": source["type"], "location": source.get("location"), "buildspec": source.get("buildspec"),
                    "insecureSsl": source.get("insecureSsl"), "gitCloneDepth": _int(source.get("gitCloneDepth")),
                },
                "artifacts": {"type": artifacts["type"], "location": artifacts.get("location"), "name": artifacts.get("name")},
                "environment": {
                    "type": env["type"], "image": env["image"], "computeType": env["computeType"],
                    "privilegedMode": env.get("privilegedMode"), "imagePullCredentialsType": env.get("imagePullCredentialsType"),
                    "environmentVariables": [
                        _drop_none({"name": v["name"], "value": v["value"], "type": v.get("type")}) for v in env.get("environmentVariables") or []
                    ] or None,
                },
                "logsConfig": {
                    "cloudWatchLogs": _drop_none({"status": cloudwatch["status"], "groupName": cloudwatch.get("groupName"),
                                                  "streamName": cloudwatch.get("streamName")}) if cloudwatch else None,
                    "s3Logs": _drop_none({"status": s3_logs["status"], "location": s3_logs.get("location")}) if s3_logs else None,
                } if logs else None,
                "tags": _tag_list(i.get("tags"), "key", "value") or None,
            }
        ),
    )  # fmt: skip


# CloudWatch Logs (json protocol)


@translates("aws:cloudwatch/logGroup:LogGroup", provider_only=("skipDestroy",))  # skipDestroy: keep it on destroy
def _log_group(i: Inputs) -> Iterator[Call]:
    name = i.get("name") or autoname(i.resource)
    yield Call(
        "logs",
        "CreateLogGroup",
        _drop_none({"logGroupName": name, "kmsKeyId": i.get("kmsKeyId"), "logGroupClass": i.get("logGroupClass"),
                    "tags": dict(i.get("tags") or {}) or None}),
    )  # fmt: skip
    if i.get("retentionInDays"):
        yield Call("logs", "PutRetentionPolicy", {"logGroupName": name, "retentionInDays": _int(i["retentionInDays"])})


# --- coverage ------------------------------------------------------------------------------------

NOT_AWS_CALLS: dict[str, str] = {
    "pulumi:providers:kubernetes": "a Pulumi provider instance, no cloud request",
    "pulumi:pulumi:StackReference": "a read of another stack's outputs from the Pulumi backend, no cloud request",
    "kubernetes:": "Kubernetes API objects: validated against the Kubernetes schemas and KubeRay CRDs elsewhere",
    "rlinf-eks:index:": "this project's ComponentResources: their children are the requests",
}
"""Types (or type prefixes ending in ':') that make no AWS API request, each with the reason."""


def not_aws_reason(type_: str) -> str | None:
    for key, reason in NOT_AWS_CALLS.items():
        if type_ == key or (key.endswith(":") and type_.startswith(key)):
            return reason
    return None


class Untranslated(AssertionError):
    pass


def calls_for(resource: Mapping[str, Any], region: str = "us-east-1") -> list[Call]:
    """The API requests of one plan resource ([] for the types in NOT_AWS_CALLS); fails for an
    unknown type or an input the translator did not read."""
    type_ = resource["type"]
    if type_ not in TRANSLATORS:
        if not_aws_reason(type_) is not None:
            return []
        raise Untranslated(
            f"{type_} ({resource['name']}) has no translation to the AWS API requests its provider makes: "
            "add one to tests/aws_models.py (or list it in NOT_AWS_CALLS with the reason)"
        )
    inputs = Inputs(resource, region)
    calls = list(TRANSLATORS[type_](inputs))
    unread = [k for k in inputs.unread() if k not in PROVIDER_ONLY[type_]]
    if unread:
        raise Untranslated(f"{type_} ({resource['name']}): inputs {unread} reach no translated request; translate them in tests/aws_models.py")
    return calls


def plan_problems(resources: Iterable[Mapping[str, Any]], region: str = "us-east-1") -> list[str]:
    """Every botocore-model and IAM-grammar problem of a plan's resources (in ``region``), one line each."""
    problems: list[str] = []
    for resource in resources:
        where = f"{resource['type']} {resource['name']}"
        for call in calls_for(resource, region):
            problems += [f"{where}: {p}" for p in validate(call)]
        for key, document in policy_documents(resource):
            problems += [f"{where}: {key}: {p}" for p in policy_problems(document)]
    return problems


# --- IAM policy documents ------------------------------------------------------------------------

_POLICY_INPUTS = {
    "aws:iam/role:Role": ("assumeRolePolicy",),
    "aws:iam/rolePolicy:RolePolicy": ("policy",),
    "aws:iam/policy:Policy": ("policy",),
    "aws:s3/bucketPolicy:BucketPolicy": ("policy",),
    "aws:kms/key:Key": ("policy",),
    "aws:sqs/queuePolicy:QueuePolicy": ("policy",),
}


def policy_documents(resource: Mapping[str, Any]) -> list[tuple[str, Any]]:
    keys = _POLICY_INPUTS.get(resource["type"], ())
    return [(k, resource["inputs"][k]) for k in keys if k in resource["inputs"]]


# IAM User Guide, "IAM JSON policy elements reference" and "Condition operators".
_STATEMENT_KEYS = {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource", "Condition"}
_PRINCIPAL_KEYS = {"AWS", "Service", "Federated", "CanonicalUser"}
# IAM User Guide, "AWS JSON policy elements: Principal": service principals are
# <service>.amazonaws.com; federated ones an OIDC/SAML provider ARN or a web identity provider.
_PRINCIPAL_VALUES = {
    "Service": re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)*\.amazonaws\.com(\.cn)?"),
    "Federated": re.compile(r"arn:aws[a-z-]*:iam::\d{12}:(oidc-provider|saml-provider)/\S+|cognito-identity\.amazonaws\.com|accounts\.google\.com|graph\.facebook\.com|www\.amazon\.com"),
    "AWS": re.compile(r"\*|\d{12}|arn:aws[a-z-]*:(iam|sts)::\d{12}:\S+"),
}
_CONDITION_BASE = {
    "StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase", "StringLike", "StringNotLike",
    "NumericEquals", "NumericNotEquals", "NumericLessThan", "NumericLessThanEquals", "NumericGreaterThan", "NumericGreaterThanEquals",
    "DateEquals", "DateNotEquals", "DateLessThan", "DateLessThanEquals", "DateGreaterThan", "DateGreaterThanEquals",
    "Bool", "BinaryEquals", "IpAddress", "NotIpAddress", "ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike",
}  # fmt: skip


def condition_operator_valid(operator: str) -> bool:
    """An operator, optionally with ...IfExists and a ForAllValues:/ForAnyValue: set qualifier;
    Null takes neither suffix."""
    for qualifier in ("ForAllValues:", "ForAnyValue:"):
        if operator.startswith(qualifier):
            operator = operator[len(qualifier) :]
            break
    if operator == "Null":
        return True
    if operator.endswith("IfExists"):
        operator = operator[: -len("IfExists")]
    return operator in _CONDITION_BASE


# IAM action names equal the API operation names for nearly every service. The exceptions used here,
# each from the Service Authorization Reference ("Actions, resources, and condition keys for ..."):
ACTION_EXCEPTIONS: dict[str, str] = {
    # Amazon S3: s3:ListBucket grants ListObjects/ListObjectsV2 (and HeadBucket)
    "s3:ListBucket": "ListObjectsV2",
    # Amazon S3: s3:ListBucketMultipartUploads grants ListMultipartUploads
    "s3:ListBucketMultipartUploads": "ListMultipartUploads",
    # Amazon S3: s3:ListMultipartUploadParts grants ListParts
    "s3:ListMultipartUploadParts": "ListParts",
    # Amazon S3: s3:GetBucketVersioning etc. equal their operations; s3:ListBucketVersions grants ListObjectVersions
    "s3:ListBucketVersions": "ListObjectVersions",
    # Amazon S3: s3:GetObjectVersion grants GetObject with a versionId
    "s3:GetObjectVersion": "GetObject",
    # Amazon S3: s3:DeleteObjectVersion grants DeleteObject with a versionId
    "s3:DeleteObjectVersion": "DeleteObject",
    # Amazon S3: s3:PutEncryptionConfiguration grants PutBucketEncryption
    "s3:PutEncryptionConfiguration": "PutBucketEncryption",
    # Amazon S3: s3:GetEncryptionConfiguration grants GetBucketEncryption
    "s3:GetEncryptionConfiguration": "GetBucketEncryption",
    # AWS STS: sts:TagSession is a permission-only action, granted with AssumeRole to pass session
    # tags (IAM User Guide, "Passing session tags in AWS STS"); EKS Pod Identity needs it
    "sts:TagSession": "AssumeRole",
    # Amazon S3 (the deployer policy, offline/deployer/deployer_policy.py): the bucket reads the AWS provider makes
    "s3:GetAccelerateConfiguration": "GetBucketAccelerateConfiguration",
    "s3:GetBucketObjectLockConfiguration": "GetObjectLockConfiguration",
    "s3:GetLifecycleConfiguration": "GetBucketLifecycleConfiguration",
    # Amazon S3: s3:PutLifecycleConfiguration grants PutBucketLifecycleConfiguration (the training
    # images' context bucket, offline/deployer/deployer_policy.py)
    "s3:PutLifecycleConfiguration": "PutBucketLifecycleConfiguration",
    "s3:GetReplicationConfiguration": "GetBucketReplication",
    "s3:GetBucketPublicAccessBlock": "GetPublicAccessBlock",
    "s3:PutBucketPublicAccessBlock": "PutPublicAccessBlock",
}
# Permission-only actions (Service Authorization Reference: "[permission only]"), with no API operation.
PERMISSION_ONLY = {
    "iam:PassRole",
    # Amazon ECR user guide, "IAM permissions required to sync an upstream registry with a pull
    # through cache": ecr:BatchImportUpstreamImage is a permission only (no API operation), checked
    # when a pull through the cache imports an upstream image
    "ecr:BatchImportUpstreamImage",
}


@functools.lru_cache(maxsize=None)
def _services_by_prefix() -> dict[str, str]:
    """IAM service prefix -> botocore service name, through each model's signingName (else its
    endpointPrefix): the prefix IAM uses is the name requests are signed with (ecr -> api.ecr
    models sign as ecr, elasticfilesystem -> efs)."""
    loader = _session().get_component("data_loader")
    index: dict[str, str] = {}
    for name in loader.list_available_services("service-2"):
        meta = service_model(name).metadata
        prefix = meta.get("signingName") or meta.get("endpointPrefix") or name
        # the same prefix can serve several models (s3/s3control): keep the one named like it
        if prefix not in index or name == prefix:
            index[prefix] = name
    return index


@functools.lru_cache(maxsize=None)
def _operations_signed_as(prefix: str) -> frozenset[str]:
    """The operations of every model that signs as ``prefix``: S3 Control's (TagResource,
    ListTagsForResource, the bucket tagging the AWS provider uses since v6.23.0) are s3: actions too."""
    loader = _session().get_component("data_loader")
    out: set[str] = set()
    for name in loader.list_available_services("service-2"):
        meta = service_model(name).metadata
        if (meta.get("signingName") or meta.get("endpointPrefix") or name) == prefix:
            out.update(service_model(name).operation_names)
    return frozenset(out)


def _service_for(prefix: str) -> str | None:
    try:
        meta = service_model(prefix).metadata  # the common case: the prefix is the model's name
        if (meta.get("signingName") or meta.get("endpointPrefix") or prefix) == prefix:
            return prefix
    except Exception:  # noqa: BLE001 - botocore raises UnknownServiceError for names it has no model of
        pass
    return _services_by_prefix().get(prefix)


def action_problem(action: str) -> str | None:
    """None when ``service:Operation`` (wildcards allowed) names a real action."""
    if action == "*":
        return None
    prefix, sep, name = action.partition(":")
    if not sep or not name:
        return f"action {action!r}: must be service:Action"
    service = _service_for(prefix)
    if service is None:
        return f"action {action!r}: no AWS service signs as {prefix!r}"
    operations = set(service_model(service).operation_names)
    if name.lower() not in {op.lower() for op in operations} and action not in ACTION_EXCEPTIONS:
        operations |= _operations_signed_as(prefix)
    if "*" in name or "?" in name:
        pattern = re.compile(re.escape(name).replace(r"\*", ".*").replace(r"\?", "."), re.IGNORECASE)
        if not any(pattern.fullmatch(op) for op in operations | {a.split(":", 1)[1] for a in ACTION_EXCEPTIONS if a.startswith(prefix + ":")}):
            return f"action {action!r}: matches no {service} operation"
        return None
    # the IAM action must exist, not only an API operation of that name (s3:DeleteBucketOwnershipControls
    # is an operation, authorized by s3:PutBucketOwnershipControls): the Service Authorization Reference
    if iam_reference.action(action) is None:
        return f"action {action!r}: not an action in the Service Authorization Reference (tests/iam_reference.py)"
    if action in PERMISSION_ONLY:
        return None
    if action in ACTION_EXCEPTIONS:
        assert ACTION_EXCEPTIONS[action] in operations, f"exception table: {ACTION_EXCEPTIONS[action]} is not a {service} operation"
        return None
    # IAM matches action names case-insensitively
    if name.lower() not in {op.lower() for op in operations}:
        return f"action {action!r}: {service} has no operation {name} (and it is not in ACTION_EXCEPTIONS)"
    return None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_problems(document: Any) -> list[str]:
    """Grammar of one policy document (a JSON string or parsed) and the existence of its actions."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as err:
            return [f"not JSON: {err}"]
    problems: list[str] = []
    if not isinstance(document, dict):
        return ["a policy document is a JSON object"]
    if document.get("Version") != "2012-10-17":
        problems.append(f"Version={document.get('Version')!r}: use 2012-10-17 (the older 2008-10-17 lacks policy variables)")
    unknown_top = set(document) - {"Version", "Id", "Statement"}
    if unknown_top:
        problems.append(f"unknown top-level elements {sorted(unknown_top)}")
    statements = document.get("Statement")
    if not statements:
        return problems + ["Statement: missing or empty"]
    for index, statement in enumerate(_as_list(statements)):
        where = f"Statement[{index}]"
        if not isinstance(statement, dict):
            problems.append(f"{where}: must be an object")
            continue
        unknown = set(statement) - _STATEMENT_KEYS
        if unknown:
            problems.append(f"{where}: unknown elements {sorted(unknown)}")
        if statement.get("Effect") not in ("Allow", "Deny"):
            problems.append(f"{where}.Effect={statement.get('Effect')!r}: must be Allow or Deny")
        if ("Action" in statement) == ("NotAction" in statement):
            problems.append(f"{where}: exactly one of Action / NotAction")
        for key in ("Action", "NotAction"):
            for action in _as_list(statement.get(key, [])):
                problem = action_problem(action) if isinstance(action, str) else f"action {action!r}: must be a string"
                if problem:
                    problems.append(f"{where}.{key}: {problem}")
        has_principal = "Principal" in statement or "NotPrincipal" in statement
        if "Resource" in statement and "NotResource" in statement:
            problems.append(f"{where}: Resource and NotResource exclude each other")
        # a trust policy (sts:AssumeRole*) names a principal and no resource; an identity policy the reverse
        if not has_principal and "Resource" not in statement and "NotResource" not in statement:
            problems.append(f"{where}: an identity policy statement needs Resource (or NotResource)")
        for key in ("Resource", "NotResource"):
            for arn in _as_list(statement.get(key, [])):
                if not (arn == "*" or (isinstance(arn, str) and re.fullmatch(r"arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:(\d{12}|aws|\*)?:.+", arn))):
                    problems.append(f"{where}.{key}={arn!r}: not an ARN (arn:partition:service:region:account:resource) or *")
        for key in ("Principal", "NotPrincipal"):
            principal = statement.get(key)
            if principal is None or principal == "*":
                continue
            if not isinstance(principal, dict) or not principal or set(principal) - _PRINCIPAL_KEYS:
                problems.append(f"{where}.{key}={principal!r}: an object with AWS, Service, Federated or CanonicalUser, or *")
                continue
            for kind, pattern in _PRINCIPAL_VALUES.items():
                for value in _as_list(principal.get(kind, [])):
                    if not (isinstance(value, str) and pattern.fullmatch(value)):
                        problems.append(f"{where}.{key}.{kind}={value!r}: not a {kind} principal")
        condition = statement.get("Condition", {})
        if not isinstance(condition, dict):
            problems.append(f"{where}.Condition: must be an object of operator -> {{key: value}}")
            continue
        for operator, clauses in condition.items():
            if not condition_operator_valid(operator):
                problems.append(f"{where}.Condition: unknown operator {operator!r}")
            if not isinstance(clauses, dict) or not clauses:
                problems.append(f"{where}.Condition.{operator}: must map condition keys to values")
    return problems
