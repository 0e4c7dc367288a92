"""The repository's upstream trainer configs (tests/data/upstream-trainers) are the ones its README pins."""

from __future__ import annotations

import hashlib
import re

from tests.reference_trainers import UPSTREAM_OVERLAY, overlay_files


def test_the_upstream_copies_are_the_ones_their_readme_pins():
    """tests/data/upstream-trainers: each copy's sha256 is the one its README lists, and every copy is listed."""
    listed = dict(re.findall(r"^\| `(RLinf/[^`]+)` \| [0-9a-f]{40} \| ([0-9a-f]{64}) \|$", (UPSTREAM_OVERLAY / "README.md").read_text(), re.M))
    copies = sorted(str(p.relative_to(UPSTREAM_OVERLAY)) for p in UPSTREAM_OVERLAY.rglob("*") if p.is_file() and p.name not in ("README.md", "LICENSE"))
    assert sorted(listed) == copies
    assert {str(rel) for rel in overlay_files()} <= set(listed)
    for rel, digest in listed.items():
        assert hashlib.sha256((UPSTREAM_OVERLAY / rel).read_bytes()).hexdigest() == digest, rel
