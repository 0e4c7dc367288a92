"""Counts in the command line's sentences: ``1 placeholder``, ``2 placeholders``."""

from __future__ import annotations

from typing import Optional


def counted(count: int, noun: str, plural: Optional[str] = None) -> str:
    """``count`` and ``noun`` in the number it takes: ``counted(1, "manifest")`` is "1 manifest",
    ``counted(2, "policy violation")`` "2 policy violations"; ``plural`` for an irregular one."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
