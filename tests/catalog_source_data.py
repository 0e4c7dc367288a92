"""Regenerate tests/data/catalog-sources.json: the figures of the catalog's types (and of the types
it refuses) as the two generated upstream files give them.

    git -C amazon-vpc-cni-k8s show COMMIT:pkg/vpc/vpc_ip_resource_limit.go > vpc_ip_resource_limit.go
    git -C karpenter-provider-aws show COMMIT:website/content/en/docs/reference/instance-types.md > instance-types.md
    python -m tests.catalog_source_data vpc_ip_resource_limit.go VPC_CNI_COMMIT instance-types.md KARPENTER_COMMIT

Both files are generated from EC2's DescribeInstanceTypes: vpc-cni's by ``go generate`` (network cards
per type), Karpenter's by its docs generator (the labels and resources a node of the type gets:
GPU count, name and memory in MiB, vCPU, memory in MiB, network bandwidth in Mbps, instance-store
NVMe in GB, and ``vpc.amazonaws.com/efa``, the EFA devices Karpenter advertises).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Optional

from rlinf_eks import catalog
from tests.harness import ROOT

OUT = ROOT / "tests" / "data" / "catalog-sources.json"
KARPENTER_LABELS = {
    "gpus": "karpenter.k8s.aws/instance-gpu-count",
    "gpuName": "karpenter.k8s.aws/instance-gpu-name",
    "gpuMemoryMiB": "karpenter.k8s.aws/instance-gpu-memory",
    "vcpu": "karpenter.k8s.aws/instance-cpu",
    "memoryMiB": "karpenter.k8s.aws/instance-memory",
    "bandwidthMbps": "karpenter.k8s.aws/instance-network-bandwidth",
    "localNvmeGB": "karpenter.k8s.aws/instance-local-nvme",
    "arch": "kubernetes.io/arch",
}


def network_cards(go_source: str, name: str) -> Optional[int]:
    entry = re.search(r'\n\t"' + re.escape(name) + r'": \{(.*?)\n\t\},', go_source, re.S)
    return len(re.findall(r"\n\t\t\t\tNetworkCardIndex:", entry.group(1))) if entry else None


def karpenter_figures(markdown: str, name: str) -> Optional[dict[str, Any]]:
    section = re.search(r"^### `" + re.escape(name) + r"`\n(.*?)(?=^###? )", markdown, re.S | re.M)
    if not section:
        return None
    rows = dict(re.findall(r"^ \|([^|]+)\|([^|]*)\|$", section.group(1), re.M))
    figures: dict[str, Any] = {key: rows.get(label) for key, label in KARPENTER_LABELS.items()}
    figures["efa"] = rows.get("vpc.amazonaws.com/efa")
    return {k: (int(v) if v is not None and v.isdigit() else v) for k, v in figures.items()}


def build(go_source: str, vpc_commit: str, markdown: str, karpenter_commit: str) -> dict[str, Any]:
    types = {}
    for name in sorted({*catalog.CATALOG, *catalog.REFUSED}):
        types[name] = {"networkCards": network_cards(go_source, name), "karpenter": karpenter_figures(markdown, name)}
    return {
        "provenance": {
            "vpc-cni": {"repository": "aws/amazon-vpc-cni-k8s", "commit": vpc_commit, "path": "pkg/vpc/vpc_ip_resource_limit.go"},
            "karpenter": {"repository": "aws/karpenter-provider-aws", "commit": karpenter_commit,
                          "path": "website/content/en/docs/reference/instance-types.md"},  # fmt: skip
            "method": "tests/catalog_source_data.py: the catalog's types and the refused ones, as each file lists them (null: not listed)",
        },
        "types": types,
    }


def main(argv: list[str]) -> None:
    go_path, vpc_commit, md_path, karpenter_commit = argv
    data = build(open(go_path).read(), vpc_commit, open(md_path).read(), karpenter_commit)
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(data['types'])} types")


if __name__ == "__main__":
    main(sys.argv[1:])
