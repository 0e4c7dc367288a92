"""The user documentation holds: the README stays short, the guides exist, every relative link
resolves, and every shell block of README.md and docs/*.md runs offline as written (in a copy of
the project's stack files), unless the comment above it says why it cannot, and it truly cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests import docs_text, warm_cli
from tests.docs_text import Block
from tests.harness import ROOT

MAX_README_LINES = 300


def test_the_readme_is_at_most_300_lines():
    lines = docs_text.README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move detail into a guide under docs/"


def test_there_are_at_least_four_guides_and_the_readme_links_each():
    guides = docs_text.guides()
    assert len(guides) >= 4, [docs_text.name(g) for g in guides]
    readme_links = set(docs_text.links(docs_text.README))
    for guide in guides:
        assert docs_text.name(guide) in readme_links, f"README.md does not link {docs_text.name(guide)}"


def _relative_links() -> list[tuple[str, str]]:
    found = []
    for path in docs_text.documents():
        for target in docs_text.links(path):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            found.append((docs_text.name(path), target))
    return found


@pytest.mark.parametrize("document, target", _relative_links())
def test_every_relative_link_resolves(document, target):
    """A link to a file that is not in this checkout fails, whoever writes the file: the guides
    listed in the README as written alongside resolve once they are merged."""
    source = ROOT / document
    file, _, anchor = target.partition("#")
    resolved = (source.parent / unquote(file)).resolve() if file else source
    assert resolved.exists(), f"{document} links {target}: {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved} does not exist"
    assert resolved.is_relative_to(ROOT), f"{document} links {target} outside the repository"
    if anchor and resolved.suffix == ".md":
        assert anchor in docs_text.anchors(resolved), f"{document} links {target}: no heading with that anchor"


def test_the_link_reader_sees_links_and_skips_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](docs/a.md) `[b](b.md)`\n```bash\necho [c](c.md)\n```\n[d](#heading)\n## The heading, with: marks\n")
    assert docs_text.links(page) == ["docs/a.md", "#heading"]
    assert docs_text.anchors(page) == {"the-heading-with-marks"}


def test_a_section_ends_at_the_next_heading_not_at_a_shell_comment(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n## One\ntext\n```bash\n# a comment\necho\n```\n### Sub\nmore\n## Two\nno\n")
    assert docs_text.section(page, "## One") == "text\n```bash\n# a comment\necho\n```\n### Sub\nmore\n"
    assert docs_text.section(page, "### Sub") == "more\n"


# --- shell blocks -------------------------------------------------------------------------------


def test_the_documentation_has_shell_blocks_of_both_kinds():
    blocks = docs_text.shell_blocks()
    assert [b for b in blocks if b.mark is None], "no shell block runs offline"
    assert [b for b in blocks if b.mark is not None], "no shell block is marked"
    assert all(b.path in docs_text.documents() for b in blocks)


@pytest.mark.parametrize("block", [b for b in docs_text.shell_blocks() if b.mark is not None], ids=lambda b: b.where)
def test_a_block_marked_not_offline_truly_needs_more(block: Block):
    """The mark is deliberate: the block runs something an offline test cannot (the cloud, a
    cluster, the network, the suite itself), and says why."""
    assert len(block.mark) > 10, f"{block.where}: say why it cannot run offline"
    assert docs_text.needs_more_than_offline(block.body), f"{block.where} is marked, but every command in it runs offline: unmark it"


@pytest.mark.parametrize("block", [b for b in docs_text.shell_blocks() if b.mark is None], ids=lambda b: b.where)
def test_an_unmarked_block_needs_nothing_beyond_the_machine(block: Block):
    needs = docs_text.needs_more_than_offline(block.body)
    assert not needs, f"{block.where} runs {needs}: split it, or mark it <!-- not run offline: why -->"


def test_the_marking_rules_tell_cloud_commands_from_offline_ones():
    assert docs_text.needs_more_than_offline("pulumi stack init x && pulumi up\n") == ["pulumi", "pulumi"]
    assert docs_text.needs_more_than_offline('kubectl -n x port-forward "$(kubectl get pod -o name)" 8265\n') == ["kubectl", "kubectl"]
    assert docs_text.needs_more_than_offline("python3 -m venv .venv && .venv/bin/pip install -e .\n") == ["pip"]
    assert docs_text.needs_more_than_offline("RLINF_EKS_UPDATE_SNAPSHOTS=1 python -m pytest tests/x.py\n") == ["pytest"]
    assert docs_text.needs_more_than_offline("# pulumi up, later\npython -m rlinf_eks plan x   # not pulumi\n") == []
    assert docs_text.needs_more_than_offline("sed -i.bak 's/pulumi/aws/' f && python -m rlinf_eks diff a b\n") == []
    assert docs_text.commands("a \\\n  b   # exits 2: why\nc\n") == [("a    b   # exits 2: why", 2), ("c", None)]


def _project_copy(tmp_path: Path) -> Path:
    """What a block sees as the repository: the Pulumi project file and the stack files (the
    commands write under build/ and stacks/, never into the checkout)."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    return tmp_path


def _script(block: Block) -> str:
    """The block as a script that stops at the first command whose status is not the one its
    comment promises (0 unless ``# exits N``), naming the line."""
    lines = ["set -o pipefail"]
    for command, status in docs_text.commands(block.body):
        expected = status or 0
        quoted = command.replace("'", "'\\''")
        lines.append(f"{command}\nrc=$?; if [ $rc != {expected} ]; then echo 'exit '$rc', not {expected}: {quoted}' >&2; exit 99; fi")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def warm_python(tmp_path_factory) -> list[str]:
    """The session's warm ``python -m rlinf_eks`` shims (tests/warm_cli.py) as a PATH entry, where
    the session has a server (tests/conftest.py starts one); else none."""
    session = os.environ.get(warm_cli.SESSION_ENV)
    if not session or not os.path.isdir(session):
        return []
    return [str(warm_cli.bin_dir(tmp_path_factory.mktemp("warm-python"), warm_cli.socket_of(Path(session))))]


@pytest.mark.parametrize("block", [b for b in docs_text.shell_blocks() if b.mark is None], ids=lambda b: b.where)
def test_an_offline_block_runs_as_written(block: Block, tmp_path, warm_python):
    """Run the block in bash in a copy of the project, with this interpreter as ``python`` (its
    ``python -m rlinf_eks`` forked from a warm server: tests/warm_cli.py)."""
    cwd = _project_copy(tmp_path)
    path = os.pathsep.join([*warm_python, str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("RLINF_EKS_UPDATE_SNAPSHOTS", None)
    done = subprocess.run(["bash", "-c", _script(block)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-3000:]}"


def test_the_runner_stops_at_a_broken_line_and_honours_promised_statuses(tmp_path):
    ok = Block(tmp_path / "x.md", 1, "bash", "true\nfalse   # exits 1: promised\n", None)
    broken = Block(tmp_path / "x.md", 1, "bash", "false\ntrue\n", None)
    assert subprocess.run(["bash", "-c", _script(ok)], capture_output=True).returncode == 0
    done = subprocess.run(["bash", "-c", _script(broken)], capture_output=True, text=True)
    assert done.returncode == 99 and "exit 1, not 0: false" in done.stderr
