"""Set ``workload.image`` in a stack file, leaving every other line (comments, order, quoting)
as it is. The edit is one line: the ``image:`` line of the ``rlinf-eks:workload:`` block (its
trailing comment kept unless it is a PLACEHOLDER note, which the new value makes untrue), or a
new one as the block's first line. The result is read back with the same YAML reader the plan
uses and must differ from the original in that one value only; otherwise nothing is written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

WORKLOAD_KEY = "rlinf-eks:workload"


class StackFileError(ValueError):
    pass


def _config(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text) or {}
    return data.get("config") or {}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def with_image(text: str, image: str, where: str = "the stack file") -> str:
    """``text`` with ``config: rlinf-eks:workload: image:`` set to ``image``."""
    lines = text.splitlines(keepends=True)
    block = next((i for i, line in enumerate(lines) if re.match(rf"^(\s+){re.escape(WORKLOAD_KEY)}:\s*(#.*)?$", line)), None)
    if block is None:
        if re.search(rf"^\s+{re.escape(WORKLOAD_KEY)}:", text, re.MULTILINE):
            raise StackFileError(f"{where}: {WORKLOAD_KEY} is written inline ({{...}}): set workload.image by hand")
        raise StackFileError(f"{where}: no {WORKLOAD_KEY}: block (a platform stack has no run: update an experiment's stack)")
    parent = _indent(lines[block])
    child = None
    image_line = None
    for i in range(block + 1, len(lines)):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if _indent(line) <= parent:
            break
        child = _indent(line) if child is None else child
        if _indent(line) == child and re.match(r"^\s*image:", line):
            image_line = i
    child = child if child is not None else parent + 2
    newline = "\r\n" if "\r\n" in text else "\n"
    if image_line is not None:
        old = lines[image_line]
        comment = re.search(r"\s#\s?(.*)$", old.rstrip("\r\n"))
        keep = f"  # {comment.group(1)}" if comment and "PLACEHOLDER" not in comment.group(1) else ""
        lines[image_line] = f"{' ' * child}image: {image}{keep}{newline}"
    else:
        lines.insert(block + 1, f"{' ' * child}image: {image}{newline}")
    new = "".join(lines)
    before, after = _config(text), _config(new)
    expected = {**before, WORKLOAD_KEY: {**(before.get(WORKLOAD_KEY) or {}), "image": image}}
    if after != expected:
        raise StackFileError(f"{where}: setting workload.image by a one-line edit would change other values: set it by hand")
    return new


def update_image(path: Path, image: str) -> None:
    """Rewrite ``path`` with ``workload.image`` set to ``image`` (see :func:`with_image`)."""
    from .. import interrupts

    text = with_image(path.read_text(encoding="utf-8"), image, str(path))
    with interrupts.held():  # Ctrl-C waits for the write: a stack file is never left half-written
        path.write_text(text, encoding="utf-8")
