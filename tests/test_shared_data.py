"""The shared-data guard: tests that read the reference data ($RLINF_EKS_SHARED, else ../shared) skip
when it is absent, saying how to fetch it, and fail instead when RLINF_EKS_REQUIRE_SHARED says it must
be there (CI); the manifest that pins it (tests/data/shared-data.json) and the command that fetches it
(python -m tests.fetch_shared_data), run here against a file:// mirror."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests import fetch_shared_data as fetching
from tests import harness


def test_given_the_data_when_required_then_its_path_is_returned(tmp_path, monkeypatch):
    monkeypatch.setenv(harness.REQUIRE_SHARED_ENV, "1")
    assert harness.require_shared(tmp_path, "data") == tmp_path


def test_given_no_data_and_no_requirement_when_required_then_the_test_skips(tmp_path, monkeypatch):
    monkeypatch.delenv(harness.REQUIRE_SHARED_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="CRDs not found at .*missing"):
        harness.require_shared(tmp_path / "missing", "CRDs")


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_given_no_data_under_ci_when_required_then_the_test_fails(tmp_path, monkeypatch, value):
    monkeypatch.setenv(harness.REQUIRE_SHARED_ENV, value)
    with pytest.raises(pytest.fail.Exception, match="RLINF_EKS_REQUIRE_SHARED says it must be there"):
        harness.require_shared(tmp_path / "missing", "CRDs")


@pytest.mark.parametrize("value", ["", "0", "false"])
def test_given_the_variable_off_when_no_data_then_the_test_still_skips(tmp_path, monkeypatch, value):
    monkeypatch.setenv(harness.REQUIRE_SHARED_ENV, value)
    with pytest.raises(pytest.skip.Exception):
        harness.require_shared(tmp_path / "missing", "CRDs")


def test_given_data_not_yet_shared_when_asked_then_the_test_skips_naming_its_source_even_under_ci(tmp_path, monkeypatch):
    monkeypatch.setenv(harness.REQUIRE_SHARED_ENV, "1")
    with pytest.raises(pytest.skip.Exception, match=r"not among the shared data yet .*missing.*: repo/file belongs there"):
        harness.pending_shared(tmp_path / "missing", "Some schema", "repo/file")
    assert harness.pending_shared(tmp_path, "Some schema", "repo/file") == tmp_path


def test_every_reader_of_shared_goes_through_the_guard():
    """No test file checks ../shared on its own (a bare skip would hide a missing folder under CI)."""
    offenders = []
    for path in sorted(harness.ROOT.joinpath("tests").glob("*.py")):
        text = path.read_text()
        if path.name in ("harness.py", "test_shared_data.py"):
            continue
        if "SHARED" in text and ("pytest.skip(" in text or "skipif(" in text) and "require_shared" not in text and "pending_shared" not in text:
            offenders.append(path.name)
    assert not offenders, f"read ../shared through tests.harness.require_shared: {offenders}"


# --- where the data comes from: tests/data/shared-data.json and python -m tests.fetch_shared_data ------

# Data in the shared folder no test reads and no upstream holds: a real RLinf run's outputs (kept
# for a future test of the report against them), the folders' own notes, and other tools' scripts.
NOT_FETCHED = ("reference/rlinf-run-maniskill-mlp/", "design/", "hooks/", "seed/", "tools/")


def test_the_folder_is_one_setting(monkeypatch, tmp_path):
    monkeypatch.setenv(fetching.SHARED_ENV, str(tmp_path))
    assert fetching.shared_folder() == tmp_path.resolve()
    monkeypatch.delenv(fetching.SHARED_ENV)
    assert fetching.shared_folder() == harness.ROOT.parent / "shared"


def test_every_test_module_reads_the_folder_from_the_one_setting(tmp_path):
    import re
    import subprocess
    import sys

    # the simulated cluster's API server installs its CRDs from the folder too
    env = {**os.environ, fetching.SHARED_ENV: str(tmp_path)}
    said = subprocess.run([sys.executable, "-c", "from tests import kube_apiserver; print(kube_apiserver.SHARED)"],
                          cwd=harness.ROOT, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert said.stdout.strip() == str(tmp_path.resolve()), said.stderr
    # and no module works out ../shared on its own
    own = [p.name for p in (harness.ROOT / "tests").glob("*.py")
           if p.name not in ("fetch_shared_data.py", "test_shared_data.py") and re.search(r'parents?(\[\d+\])?\s*/\s*"shared"', p.read_text())]  # fmt: skip
    assert own == [], own


def test_a_skip_says_how_to_get_the_data(tmp_path, monkeypatch):
    monkeypatch.delenv(harness.REQUIRE_SHARED_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"python -m tests.fetch_shared_data.*RLINF_EKS_SHARED"):
        harness.require_shared(tmp_path / "missing", "CRDs")


def test_the_manifest_is_the_shared_folders_data_byte_for_byte():
    """Every file the manifest pins is in the shared folder with that sha256, and every data file there
    (but NOT_FETCHED and the folders' notes) is pinned: a user who fetches gets what CI tests with."""
    shared = harness.require_shared(harness.SHARED / "schemas", "the reference data").parent
    pinned = {relative: sha for relative, _, sha in fetching.entries(fetching.manifest())}
    wrong = {r: sha for r, sha in pinned.items() if not (shared / r).is_file() or hashlib.sha256((shared / r).read_bytes()).hexdigest() != sha}
    assert not wrong, f"not in {shared} with the pinned sha256: {sorted(wrong)}"
    present = {str(p.relative_to(shared)) for p in shared.rglob("*") if p.is_file()}
    unpinned = sorted(p for p in present - set(pinned) if not p.startswith(NOT_FETCHED) and p.rsplit("/", 1)[-1] not in ("README.md", "PROVENANCE.md"))
    assert not unpinned, f"shared data without an entry in tests/data/shared-data.json (its upstream, commit and sha256): {unpinned}"


def test_the_projects_own_facts_are_copied_in_the_repository_as_pinned():
    copies = [(r, origin, sha) for r, origin, sha in fetching.entries(fetching.manifest()) if isinstance(origin, Path)]
    assert copies, "the manifest copies nothing from the repository"
    for relative, origin, sha in copies:
        assert hashlib.sha256(origin.read_bytes()).hexdigest() == sha, f"{origin} is not the {relative} the manifest pins"


def _mirror(tmp_path: Path) -> tuple[dict, Path, str]:
    """A two-file manifest (one upstream file, one repository copy) and a file:// mirror of its upstream."""
    upstream, repo = b"kind: CustomResourceDefinition\n", b'{"chart": "x"}\n'
    (tmp_path / "mirror" / "org" / "repo" / "abc" / "crds").mkdir(parents=True)
    (tmp_path / "mirror" / "org" / "repo" / "abc" / "crds" / "x.yaml").write_bytes(upstream)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "meta.json").write_bytes(repo)
    folders = {"schemas/x": {"repository": "org/repo", "commit": "abc", "files": {
        "x.yaml": {"path": "crds/x.yaml", "sha256": hashlib.sha256(upstream).hexdigest()},
        "meta.json": {"copy": "meta.json", "sha256": hashlib.sha256(repo).hexdigest()},
    }}}
    return folders, tmp_path / "repo", (tmp_path / "mirror").as_uri()


def test_the_fetch_fills_the_folder_and_keeps_what_is_already_right(tmp_path):
    folders, repo, base = _mirror(tmp_path)
    into, said = tmp_path / "shared", []
    assert fetching.fetch(into, folders, base, repo, said.append) == []
    assert (into / "schemas/x/x.yaml").read_bytes() == b"kind: CustomResourceDefinition\n"
    assert (into / "schemas/x/meta.json").read_bytes() == b'{"chart": "x"}\n'
    assert said[-1].endswith("2 fetched, 0 already there, 0 failed")
    (into / "schemas/x/x.yaml").write_bytes(b"edited\n")  # a changed file is fetched again
    assert fetching.fetch(into, folders, base, repo, said.append) == []
    assert said[-1].endswith("1 fetched, 1 already there, 0 failed")
    assert (into / "schemas/x/x.yaml").read_bytes() == b"kind: CustomResourceDefinition\n"


def test_the_fetch_refuses_bytes_that_are_not_the_pinned_ones(tmp_path):
    folders, repo, base = _mirror(tmp_path)
    (tmp_path / "mirror/org/repo/abc/crds/x.yaml").write_bytes(b"moved on upstream\n")
    into = tmp_path / "shared"
    problems = fetching.fetch(into, folders, base, repo, lambda _: None)
    assert len(problems) == 1 and "schemas/x/x.yaml" in problems[0] and "not the pinned" in problems[0]
    assert not (into / "schemas/x/x.yaml").exists(), "a file that failed its sha256 was written"
    folders["schemas/x"]["commit"] = "gone"
    assert "cannot read" in fetching.fetch(tmp_path / "elsewhere", folders, base, repo, lambda _: None)[0]


def test_the_fetch_command_exits_1_naming_a_failure(tmp_path, capsys, monkeypatch):
    folders, repo, base = _mirror(tmp_path)
    (tmp_path / "mirror/org/repo/abc/crds/x.yaml").unlink()
    monkeypatch.setattr(fetching, "manifest", lambda: folders)
    monkeypatch.setattr(fetching, "ROOT", repo)
    assert fetching.main(["--into", str(tmp_path / "shared"), "--base-url", base]) == 1
    assert "schemas/x/x.yaml: cannot read" in capsys.readouterr().err
