"""AWS and Kubernetes value rules: node labels, tags, S3 bucket and EKS cluster names, AZs.

Each ``*_problem`` function says why a value would be refused (by EKS, S3, the kubelet, ...), or
returns None; the section models and the cross-section rules turn that into a problem line."""

from __future__ import annotations

import re
import unicodedata

from .. import aws_names
from .aws_zones import zone_problem

# Kubernetes label syntax (apimachinery validation IsQualifiedName / IsValidLabelValue): an
# optional DNS-subdomain prefix (<= 253) and a name of <= 63 alphanumerics, '-', '_', '.', starting
# and ending alphanumeric; values likewise (<= 63, may be empty).
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# The kubelet refuses to start with --node-labels in the kubernetes.io or k8s.io namespaces other
# than the kubelet.kubernetes.io/ and node.kubernetes.io/ prefixes (and the few labels it sets
# itself), and the NodeRestriction admission plugin rejects them (sig-auth enhancement "Bounding
# Self-Labeling Kubelets"); EKS hands node group labels to the kubelet that way.
_RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_ALLOWED_LABEL_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")
# EKS's CreateNodegroup labels: key and value 1-63 characters (botocore eks labelKey, labelValue).
_EKS_LABEL_MAX = 63


def label_problem(key: str, value: str) -> str | None:
    """Why ``key: value`` cannot be a label of an EKS managed node group, or None."""
    prefix, slash, name = key.rpartition("/")
    if not key or len(name) > 63 or not _LABEL_NAME.fullmatch(name) or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))):
        return (
            "not a Kubernetes label key: [prefix/]name, the prefix a lowercase DNS subdomain, the name at most "
            "63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    if len(key) > _EKS_LABEL_MAX:
        return f"EKS node group label keys are at most {_EKS_LABEL_MAX} characters ({len(key)})"
    domain = prefix.lower()
    if any(domain == d or domain.endswith("." + d) for d in _RESERVED_LABEL_DOMAINS) and domain not in _ALLOWED_LABEL_PREFIXES:
        return (
            "kubernetes.io and k8s.io labels are reserved: the kubelet will not set them on its own node "
            "(only the kubelet.kubernetes.io/ and node.kubernetes.io/ prefixes); use your own prefix, such as example.com/"
        )
    if not value or len(value) > _EKS_LABEL_MAX or not _LABEL_NAME.fullmatch(value):
        return (
            f"not an EKS node label value: 1 to {_EKS_LABEL_MAX} letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit"
        )
    return None


# AWS tags (botocore TagKey 1-128, TagValue 0-256; the aws: prefix is reserved for AWS's own tags,
# "Tag naming limits and requirements" in the Tagging AWS Resources guide). The stack's tags reach
# EKS, IAM and FSx too, whose models allow only letters, numbers, spaces and _.:/=+-@
# (pattern [\p{L}\p{Z}\p{N}_.:/=+\-@]*), and at most 50 tags per resource, of which the stack
# adds up to 5 (project, stack, Name and the two Kubernetes subnet tags).
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
MAX_USER_TAGS = 45


def _tag_text_problem(text: str) -> str | None:
    bad = sorted({c for c in text if c not in _TAG_PUNCTUATION and unicodedata.category(c)[0] not in "LZN"})
    return f"EKS, IAM and FSx allow only letters, numbers, spaces and _.:/=+-@ in tags, not {''.join(bad)!r}" if bad else None


def tag_problem(key: str, value: str) -> str | None:
    if not 1 <= len(key) <= 128:
        return f"a tag key is 1 to 128 characters ({len(key)})"
    if key.lower().startswith("aws:"):
        return "tag keys starting with aws: are reserved for AWS"
    if len(value) > 256:
        return f"a tag value is at most 256 characters ({len(value)})"
    return _tag_text_problem(key) or _tag_text_problem(value)


# EKS CreateCluster name (botocore eks ClusterName: 1-100, ^[0-9A-Za-z][A-Za-z0-9\-_]*); node group
# names follow the same characters, at most 63 (EKS CreateNodegroup).
_EKS_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]*")
EKS_CLUSTER_NAME_MAX = 100
EKS_NODEGROUP_NAME_MAX = 63
SYSTEM_NODEGROUP_SUFFIX = "-system"
"""The system node group is named <cluster>-system (cluster.py)."""


def cluster_name_problem(name: str, creates_node_group: bool) -> str | None:
    if not _EKS_NAME.fullmatch(name) or len(name) > EKS_CLUSTER_NAME_MAX:
        return f"an EKS cluster name is 1 to {EKS_CLUSTER_NAME_MAX} letters, digits, '-' or '_', starting with a letter or digit"
    if creates_node_group and len(name + SYSTEM_NODEGROUP_SUFFIX) > EKS_NODEGROUP_NAME_MAX:
        return (
            f"the system node group {name + SYSTEM_NODEGROUP_SUFFIX!r} would be {len(name + SYSTEM_NODEGROUP_SUFFIX)} characters; EKS allows "
            f"{EKS_NODEGROUP_NAME_MAX}, so a new cluster's name is at most {EKS_NODEGROUP_NAME_MAX - len(SYSTEM_NODEGROUP_SUFFIX)}"
        )
    return None


# S3 User Guide, "General purpose bucket naming rules".
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_problem(name: str) -> str | None:
    """Why S3 would refuse ``name`` for a general purpose bucket, or None."""
    if not _BUCKET.fullmatch(name):
        return "an S3 bucket name is 3 to 63 lowercase letters, digits, '.' or '-', starting and ending with a letter or digit"
    if ".." in name:
        return "an S3 bucket name has no two adjacent periods"
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", name):
        return "an S3 bucket name must not look like an IP address"
    for prefix in _BUCKET_PREFIXES:
        if name.startswith(prefix):
            return f"S3 reserves bucket names starting with {prefix}"
    for suffix in _BUCKET_SUFFIXES:
        if name.endswith(suffix):
            return f"S3 reserves bucket names ending with {suffix} (access point, Multi-Region, directory and table buckets)"
    return None


def az_problem(zone: str, region: str) -> str | None:
    """An AZ is its region and a letter the region has (us-east-1a; aws_zones); a Local Zone is
    <region>-<zone>-<n><letter>."""
    if re.fullmatch(re.escape(region) + r"[a-z]", zone):
        return zone_problem(zone, region)
    if re.fullmatch(re.escape(region) + r"-[a-z]+-\d+[a-z]", zone):
        return None
    if zone in aws_names.REGIONS:
        return f"{zone} is a region, not an Availability Zone: use {zone}a (and aws:region {zone})"
    return f"not an Availability Zone of region {region}: use {region} and a letter, such as {region}a"
