"""Versioned releases: the version is written once (rlinf_eks.__version__, which pyproject.toml
reads), CHANGELOG.md's newest release is that version, and the README's install line (and the
example program's requirements) pin its tag."""

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


def test_the_release_says_where_the_loading_functions_went():
    newest = CHANGELOG.split("\n## [")[2] if CHANGELOG.count("\n## [") >= 2 else ""
    for name in ("parse", "settings_from_config", "from_pulumi_config"):
        assert f"`rlinf_eks.config.{name}`" in newest or f"`{name}`" in newest, name
    assert "rlinf_eks.loading" in newest and "rlinf_eks.testing" in newest and "TrainingSettings" in newest


def test_the_readme_install_line_pins_the_release_tag():
    text = (ROOT / "README.md").read_text()
    lines = re.findall(r'^pip install "rlinf-eks @ git\+(\S+)"$', text, flags=re.M)
    assert lines, "no install line for foreign programs"
    for url in lines:
        assert url.endswith(f"/rlinf-eks@v{rlinf_eks.__version__}"), url
    requirements = (ROOT / "examples" / "own-cluster" / "requirements.txt").read_text()
    assert f"rlinf-eks @ git+{lines[0]}" in requirements
