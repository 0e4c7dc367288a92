"""Karpenter's AMI alias against the AMI release data (components/config/data/eks-ami-releases.json,
from amazon-eks-ami's CHANGELOG at a pinned commit): an alias whose release ships no image of the
cluster's Kubernetes version is refused before anything is created, naming both keys and values
(exit 2, one line); the default ships every version of the EKS calendar that any release ships
together with the newest; an alias newer than the data is left to the list of what is not checked."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.config import ami_releases, eks_versions
from rlinf_eks.config.gpu_nodes import KarpenterSettings
from tests.harness import ROOT

KARPENTER = "gpuNodes.provisioner=karpenter"


def _plan(monkeypatch, capsys, tmp_path, *sets: str) -> tuple[int, str]:
    monkeypatch.chdir(ROOT)
    status = main(["plan", "multi-node", "--quiet", "--out", str(tmp_path), *(a for s in (KARPENTER, *sets) for a in ("--set", s))])
    return status, capsys.readouterr().err


def test_an_alias_without_the_clusters_version_is_refused_from_the_command_line(tmp_path):
    """The issue's case: the old default on the default cluster version (1.35)."""
    done = subprocess.run(
        [sys.executable, "-m", "rlinf_eks", "plan", "multi-node", "--quiet", "--out", str(tmp_path),
         "--set", KARPENTER, "--set", "gpuNodes.karpenter.amiAlias=al2023@v20251120"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "amiAlias" in x]
    assert "gpuNodes.karpenter.amiAlias='al2023@v20251120'" in line and "cluster.kubernetesVersion='1.35'" in line
    assert "ships 1.29 to 1.34" in line and "releases with 1.35: v20260114 to" in line
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    "sets, says",
    [
        # another version than the default's: a release that ships it, but not this cluster's older one
        (("gpuNodes.karpenter.amiAlias=al2023@v20260714", "cluster.kubernetesVersion=1.29"),
         "gpuNodes.karpenter.amiAlias='al2023@v20260714': has no Kubernetes 1.29 image for cluster.kubernetesVersion='1.29'"),
        # an abandoned release published no AMIs
        (("gpuNodes.karpenter.amiAlias=al2023@v20260311",), "release v20260311 published no AMIs"),
        # a date that was no release at all
        (("gpuNodes.karpenter.amiAlias=al2023@v20260101",), "gpuNodes.karpenter.amiAlias='al2023@v20260101': is no amazon-eks-ami release"),
    ],
)  # fmt: skip
def test_each_alias_without_an_image_is_refused_naming_what_is_valid(monkeypatch, capsys, tmp_path, sets, says):
    status, err = _plan(monkeypatch, capsys, tmp_path, *sets)
    assert status == 2 and err.startswith("error: ") and "Traceback" not in err
    assert says in err, err
    assert re.search(r"such as al2023@v\d{8}", err), err


def test_the_default_and_a_matching_pin_plan(monkeypatch, capsys, tmp_path):
    assert _plan(monkeypatch, capsys, tmp_path / "default")[0] == 0
    assert _plan(monkeypatch, capsys, tmp_path / "pin", "gpuNodes.karpenter.amiAlias=al2023@v20251120", "cluster.kubernetesVersion=1.34")[0] == 0
    # past the data: not refused, listed as unchecked (tests/test_newcomer_two.py)
    assert _plan(monkeypatch, capsys, tmp_path / "newer", "gpuNodes.karpenter.amiAlias=al2023@v20990101")[0] == 0


def test_the_default_ships_every_calendar_version_a_release_can_ship_with_the_newest():
    """No release ships 1.28 or 1.29 with 1.36 (1.29's last AL2023 NVIDIA image is in v20260318, 1.36's
    first in v20260610; EKS creates neither since 2026-03-23): the default ships every other version
    of the calendar, and is the newest that does."""
    calendar = list(eks_versions.STANDARD_SUPPORT_ENDS)
    newest_version = calendar[-1]
    with_newest = [r for r in ami_releases.data()["releases"] if newest_version in (ami_releases.versions(r) or ())]
    reachable = [v for v in calendar if any(v in ami_releases.versions(r) for r in with_newest)]
    assert set(calendar) - set(reachable) == {"1.28", "1.29"}
    release = KarpenterSettings().ami_alias.partition("@")[2]
    assert set(reachable) <= set(ami_releases.versions(release))
    assert release == max(r for r in with_newest if set(reachable) <= set(ami_releases.versions(r)))
    assert all(ami_releases.alias_problem(KarpenterSettings().ami_alias, v) is None for v in reachable)


def test_the_release_data_says_where_it_came_from_and_reads_as_the_changelog_says():
    prov = ami_releases.data()["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"]) and prov["source"] == "awslabs/amazon-eks-ami CHANGELOG.md"
    # the changelog's facts the refusal relies on
    assert ami_releases.releases_with("1.35")[0] == "v20260114" and "1.35" not in ami_releases.versions("v20260107")
    assert ami_releases.versions("v20260311") == () and ami_releases.versions("v20260101") is None
    assert ami_releases.versions("v20251120") == ("1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
