"""What the repository holds at its root and in stacks/: the project's stacks are one list
(tests/harness.py PROJECT_STACKS), and nothing stray sits at the root (a shell slip once committed a
file named `ritten indented#` there)."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess

from tests.harness import PROJECT_STACKS, ROOT

ROOT_ENTRIES = {
    ".ci", ".github", ".gitignore", "CHANGELOG.md", "Pulumi.yaml", "README.md", "__main__.py", "bench",
    "components", "docs", "examples", "images", "policy", "provider", "pyproject.toml", "renovate.json",
    "requirements.txt", "schema", "stacks", "tests",
}  # fmt: skip
"""Every file and folder the repository has at its root. A new one is added here on purpose."""


def _git(*args: str) -> list[str] | None:
    """The lines git prints in the repository, or None where this is no git checkout."""
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        return None
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    return done.stdout.splitlines() if done.returncode == 0 else None


def _ignored(name: str) -> bool:
    patterns = [p.strip().strip("/") for p in (ROOT / ".gitignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def root_entries() -> set[str]:
    """The root's tracked entries and the untracked ones git does not ignore (a file about to be
    committed by `git add -A`); without git, the folder's entries that .gitignore does not name."""
    listed = _git("ls-files", "--cached", "--others", "--exclude-standard")
    if listed is None:
        return {p.name for p in ROOT.iterdir() if p.name != ".git" and not _ignored(p.name)}
    return {path.split("/", 1)[0] for path in listed}


def test_nothing_stray_sits_at_the_root():
    stray = sorted(root_entries() - ROOT_ENTRIES)
    assert not stray, (
        f"unexpected at the repository's root: {stray}; remove them, or add a new top-level entry to "
        "ROOT_ENTRIES in tests/test_repository_layout.py"
    )


def test_the_root_check_sees_a_stray_file(monkeypatch, tmp_path):
    from tests import test_repository_layout as layout

    (tmp_path / ".gitignore").write_text("build/\n.venv/\n")
    for name in ("README.md", "build", ".venv", "ritten indented#"):
        (tmp_path / name).touch()
    monkeypatch.setattr(layout, "ROOT", tmp_path)
    assert layout.root_entries() - ROOT_ENTRIES == {"ritten indented#"}


def test_every_tracked_stack_file_is_one_of_the_projects_stacks():
    for stack in PROJECT_STACKS:
        assert (ROOT / "stacks" / f"Pulumi.{stack}.yaml").is_file(), f"PROJECT_STACKS names {stack}, which has no stacks/Pulumi.{stack}.yaml"
    assert len(set(PROJECT_STACKS)) == len(PROJECT_STACKS), "PROJECT_STACKS names a stack twice"
    tracked = _git("ls-files", "stacks")
    if tracked is None:  # no git checkout: which stack files are the project's is the list alone
        return
    names = {path[len("stacks/Pulumi.") : -len(".yaml")] for path in tracked if path.startswith("stacks/Pulumi.") and path.endswith(".yaml")}
    missing = sorted(names - set(PROJECT_STACKS))
    assert not missing, (
        f"stack files tracked in stacks/ but not among the project's stacks: {missing}; add each to "
        "PROJECT_STACKS in tests/harness.py (one line), then record its golden plans with "
        "RLINF_EKS_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_stacks.py tests/test_diff_edits.py"
    )
