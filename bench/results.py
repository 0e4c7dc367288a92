"""bench/RESULTS.md is made of sections, each written by one benchmark script and never by hand:

    <!-- section: NAME (written by bench/SCRIPT; do not edit) -->
    ...
    <!-- end: NAME -->

``write_section`` replaces one section and keeps the others (a new section goes after them)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
ORDER = ("plan", "suite", "suite-compare", "suite-quick", "suite-compare-quick")  # the order of the sections in the file


def _begin(name: str, script: str) -> str:
    return f"<!-- section: {name} (written by bench/{script}; do not edit) -->"


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- section: {re.escape(name)} \(.*?\) -->\n.*?<!-- end: {re.escape(name)} -->\n", re.S)


def sections(text: str) -> dict[str, str]:
    """Each section's whole text (markers included), by name."""
    found = {}
    for match in re.finditer(r"<!-- section: ([a-z-]+) \(.*?\) -->\n.*?<!-- end: \1 -->\n", text, re.S):
        found[match.group(1)] = match.group(0)
    return found


def write_section(name: str, script: str, body: str, path: Path = RESULTS) -> None:
    """Replace section ``name`` of ``path`` with ``body`` (markdown), keeping every other section."""
    block = f"{_begin(name, script)}\n{body.rstrip()}\n<!-- end: {name} -->\n"
    existing = sections(path.read_text()) if path.exists() else {}
    existing[name] = block
    names = [n for n in ORDER if n in existing] + sorted(n for n in existing if n not in ORDER)
    path.write_text("\n".join(existing[n] for n in names))


def machine() -> str:
    """The machine a benchmark ran on, for its section's text."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"
