"""Versioned releases: the version is written once (rlinf_eks.__version__, which pyproject.toml
reads), CHANGELOG.md's newest release is that version, and every install line in README.md and
docs/*.md (pip, `pulumi package add`, the example program's requirements) pins its tag."""

from __future__ import annotations

import re

import rlinf_eks
from tests.harness import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CHANGELOG = (ROOT / "CHANGELOG.md").read_text() if (ROOT / "CHANGELOG.md").exists() else ""
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)


def test_the_version_is_written_once_and_pyproject_reads_it():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "rlinf_eks.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", rlinf_eks.__version__)
    source = (ROOT / "components" / "__init__.py").read_text()
    assert re.findall(r'^__version__ = "([^"]+)"$', source, flags=re.M) == [rlinf_eks.__version__]


def test_the_changelogs_newest_release_is_the_package_version():
    assert CHANGELOG.startswith("# Changelog\n"), "no CHANGELOG.md"
    assert "[Keep a Changelog]" in CHANGELOG
    releases = RELEASE.findall(CHANGELOG)
    assert releases, "no '## [X.Y.Z] - YYYY-MM-DD' release heading"
    assert releases[0][0] == rlinf_eks.__version__
    # Unreleased first, then the releases from newest to oldest, dated in that order
    headings = re.findall(r"^## \[([^\]]+)\]", CHANGELOG, flags=re.M)
    assert headings[0] == "Unreleased" and headings[1:] == [version for version, _ in releases]
    versions = [tuple(int(n) for n in version.split(".")) for version, _ in releases]
    assert versions == sorted(versions, reverse=True) and [d for _, d in releases] == sorted((d for _, d in releases), reverse=True)
    # every heading has its link at the bottom
    for heading in headings:
        assert re.search(rf"^\[{re.escape(heading)}\]: https://", CHANGELOG, flags=re.M), heading


def release_notes(version: str) -> str:
    """The body of one release's CHANGELOG entry (up to the next ``## [`` heading)."""
    match = re.search(rf"^## \[{re.escape(version)}\] - .*?$(.*?)(?=^## \[|^\[Unreleased\]:)", CHANGELOG, flags=re.M | re.S)
    assert match, f"CHANGELOG has no release {version}"
    return match.group(1)


def test_the_release_says_where_the_loading_functions_went():
    newest = release_notes("0.2.0")  # the release that moved them
    for name in ("parse", "settings_from_config", "from_pulumi_config"):
        assert f"`rlinf_eks.config.{name}`" in newest or f"`{name}`" in newest, name
    assert "rlinf_eks.loading" in newest and "rlinf_eks.testing" in newest and "TrainingSettings" in newest


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Anything that names a tag of this repository: `rlinf-eks@vX.Y.Z` (pip, requirements) and
# `rlinf-eks/provider@vX.Y.Z` (pulumi package add). A pin of another project never matches.
PIN = re.compile(r"rlinf-eks(?:/provider)?@v(\d+\.\d+\.\d+)")


def pins(text: str) -> list[str]:
    return PIN.findall(text)


def test_the_pin_pattern_finds_this_projects_tags_only():
    assert pins('pip install "rlinf-eks @ git+https://github.com/o/rlinf-eks@v1.2.3"') == ["1.2.3"]
    assert pins("pulumi package add github.com/o/rlinf-eks/provider@v0.9.0") == ["0.9.0"]
    assert pins("kuberay/ray-operator/config/crd?ref=v1.7.0 and rlinf/rlinf:agentic-rlinf0.3") == []


def test_the_changelog_the_version_and_every_pin_in_the_docs_agree():
    """The release a reader installs is the one the docs describe: CHANGELOG's newest release,
    ``__version__``, the provider schema's version and every tag pinned in README.md, docs/*.md and
    the example's requirements are one version."""
    (newest, _), *_ = RELEASE.findall(CHANGELOG)
    assert newest == rlinf_eks.__version__
    found = {}
    for path in [*DOCUMENTS, ROOT / "examples" / "own-cluster" / "requirements.txt", ROOT / "provider" / "PulumiPlugin.yaml"]:
        for version in pins(path.read_text()):
            found.setdefault(version, []).append(str(path.relative_to(ROOT)))
    assert set(found) <= {newest}, f"pins other than v{newest}: {found}"
    import json

    assert json.loads((ROOT / "provider" / "schema.json").read_text())["version"] == newest


def test_the_install_lines_pin_a_commit_until_a_release_tag_exists():
    """No tag is published yet: the install lines clone and check out the commit the reader tested
    (never a tag that does not exist, nor a branch that moves), and the example and the plugin
    install the library from that clone."""
    assert not pins("\n".join(p.read_text() for p in DOCUMENTS)), "a tag pinned before one is published"
    text = (ROOT / "docs" / "components.md").read_text()
    assert re.search(r'^git clone "\$RLINF_EKS_REPO" rlinf-eks && git -C rlinf-eks checkout "\$COMMIT"', text, flags=re.M)
    assert re.search(r"^pip install \./rlinf-eks$", text, flags=re.M)
    urls = re.findall(r'pip install "rlinf-eks @ git\+(\S+)"', text)
    assert urls and all(url.endswith("@$COMMIT") for url in urls), urls
    packages = re.findall(r"^pulumi package add (\S+)", text, flags=re.M)
    assert packages == ["./rlinf-eks/provider"], packages
    for requirements, path in ((ROOT / "examples" / "own-cluster" / "requirements.txt", "../.."), (ROOT / "provider" / "requirements.txt", "..")):
        lines = [line for line in requirements.read_text().splitlines() if line and not line.startswith("#")]
        assert lines == [path], (requirements, lines)
        assert (requirements.parent / path / "pyproject.toml").is_file()
