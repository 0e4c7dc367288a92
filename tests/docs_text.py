"""Reading the user documentation (README.md and the guides under docs/) for the tests that hold it
to the code: its sections, its fenced blocks, its links and the marking of blocks that cannot run
offline. Pure functions of the text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.harness import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = {DOCS / "config-reference.md"}  # written by python -m rlinf_eks.config_reference
SHELLS = {"bash", "sh", "shell", "console"}
# The line right above a shell block that cannot run offline: the comment and why.
OFFLINE_MARK = re.compile(r"^<!-- not run offline: (?P<why>\S.*?) -->$")
# The commands that need what an offline test has not: the cloud, a cluster, the network, the
# test suite itself. A marked block must hold one; an unmarked block must hold none.
NEEDS_MORE = {"pulumi", "kubectl", "aws", "docker", "helm", "curl", "pip"}
SUITE = re.compile(r"(?:^|\s)-m pytest\b|(?:^|\s)pytest\b")
# this project's own commands that call AWS or a cluster (verify has an offline --dry-run)
CLOUD_COMMANDS = re.compile(r"-m rlinf_eks (?:build-image\b|report\b.*--from-bucket|verify\b(?!.*--dry-run))")


def guides() -> list[Path]:
    """The hand-written guides under docs/ (the generated reference left out)."""
    return sorted(p for p in DOCS.glob("*.md") if p not in GENERATED)


def documents() -> list[Path]:
    return [README, *guides()]


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def section(path: Path, heading: str) -> str:
    """The body of one section: from ``heading`` (a whole line) to the next heading of the same or
    a higher level."""
    text = path.read_text()
    assert f"\n{heading}\n" in f"\n{text}", f"{name(path)} has no section {heading!r}"
    body = f"\n{text}".split(f"\n{heading}\n", 1)[1]
    level = len(heading) - len(heading.lstrip("#"))
    kept, in_code = [], False
    for line in body.splitlines(keepends=True):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(rf"#{{1,{level}}} ", line):
            break  # a shell comment inside a block is no heading
        kept.append(line)
    return "".join(kept)


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the ```language blocks of a text."""
    return re.findall(rf"^```{re.escape(language)}\n(.*?)^```", text, flags=re.S | re.M)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    body: str
    mark: str | None  # the reason given by the comment above it, if any

    @property
    def where(self) -> str:
        return f"{name(self.path)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a document, with the offline mark on the line above it."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = re.match(r"^```(\S*)", lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        above = lines[i - 1] if i else ""
        mark = OFFLINE_MARK.match(above)
        found.append(Block(path, i + 1, opening.group(1), "\n".join(lines[i + 1 : end]) + "\n", mark and mark.group("why")))
        i = end + 1
    return found


def shell_blocks() -> list[Block]:
    return [b for path in documents() for b in blocks(path) if b.language in SHELLS]


def commands(body: str) -> list[tuple[str, int | None]]:
    """The command lines of a shell block (continuations joined, comment lines left out), each with
    the exit status its comment promises (``# exits 1: ...``), None for 0."""
    joined = re.sub(r"\\\n", " ", body)
    found = []
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        promise = re.search(r"#.*\bexits (\d+)\b", line)
        found.append((line, int(promise.group(1)) if promise else None))
    return found


def programs(command: str) -> list[str]:
    """The programs a command line runs: the first word of each pipeline stage, list element and
    command substitution (quoted text and comments aside)."""
    code = re.sub(r"'[^']*'", "''", command)
    code = re.sub(r"\s#.*$", "", code)
    parts = re.split(r"&&|\|\||[|;]|\$\(|`", code)
    words = []
    for part in parts:
        tokens = [t for t in part.replace('"', " ").split() if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", t)]
        if tokens:
            words.append(tokens[0].rsplit("/", 1)[-1])
    return words


def needs_more_than_offline(body: str) -> list[str]:
    """What in a block an offline test cannot run: a cloud or network program, or the suite."""
    found = []
    for command, _ in commands(body):
        found += [p for p in programs(command) if p in NEEDS_MORE]
        if SUITE.search(command):
            found.append("pytest")
        match = CLOUD_COMMANDS.search(command)
        if match:
            found.append(match.group(0).split()[-1] if "--from-bucket" not in match.group(0) else "report --from-bucket")
    return found


def links(path: Path) -> list[str]:
    """The targets of a document's Markdown links (inline code and fenced blocks left out)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a document's headings."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found
