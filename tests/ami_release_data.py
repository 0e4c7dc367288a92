"""Regenerate components/config/data/eks-ami-releases.json from amazon-eks-ami's CHANGELOG.md.

    git -C amazon-eks-ami show COMMIT:CHANGELOG.md > CHANGELOG.md
    python -m tests.ami_release_data CHANGELOG.md COMMIT COMMIT_DATE

Each top-level section ``# AMI Release vYYYYMMDD`` is a release; a section marked ``[ABANDONED]``
or ``[Recalled]`` published no AMIs to use and is recorded so, without versions. A release ships
Kubernetes X.Y for the GPU nodes when the section names the AMI
``amazon-eks-node-al2023-x86_64-nvidia-X.Y-vYYYYMMDD`` (the image Karpenter's alias
``al2023@vYYYYMMDD`` resolves to on an NVIDIA instance type); the standard AL2023 x86-64 image
is recorded beside it.
"""

from __future__ import annotations

import json
import re
import sys

from tests.harness import ROOT

OUT = ROOT / "components" / "config" / "data" / "eks-ami-releases.json"


def parse(text: str) -> dict[str, dict]:
    releases: dict[str, dict] = {}
    parts = re.split(r"^# (.*)$", text, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2]):
        found = re.fullmatch(r"(\[\w+\] )?AMI Release (v\d{8})\s*", heading)
        if not found:
            continue
        mark, release = found.group(1), found.group(2)
        if mark:
            releases[release] = {"status": mark.strip(" []").lower()}
            continue

        def versions(variant: str) -> list[str]:
            found = set(re.findall(rf"amazon-eks-node-al2023-x86_64-{variant}-(1\.\d+)-{release}\b", body))
            return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")))

        releases[release] = {"al2023_x86_64_nvidia": versions("nvidia"), "al2023_x86_64_standard": versions("standard")}
    return releases


def main(changelog: str, commit: str, date: str) -> None:
    releases = parse(open(changelog, encoding="utf-8").read())
    data = {
        "provenance": {
            "source": "awslabs/amazon-eks-ami CHANGELOG.md",
            "commit": commit,
            "commit_date": date,
            "method": "tests/ami_release_data.py: one entry per '# AMI Release vYYYYMMDD' section; a Kubernetes version per "
            "amazon-eks-node-al2023-x86_64-<variant>-<version>-<release> AMI name the section lists",
        },
        "releases": dict(sorted(releases.items(), reverse=True)),
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
