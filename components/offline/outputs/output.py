"""The output folder of every command that writes one (``plan --out``, ``verify --dry-run --out``,
``report --out``): one check before any work, and one way of writing.

:func:`check_output` refuses a folder that is a file, lies under a file or cannot be created or
written, before the command does anything, so a bad ``--out`` costs nothing and reads the same
from every command (exit 2, one line). :func:`staged` gives a temporary folder beside the output;
the command writes everything there, and :func:`commit` moves the files into place with
interrupts held (rlinf_eks.interrupts), so an interrupted command leaves the output folder as it
was, or whole, never half-written.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from ... import interrupts


REPORT_FOLDER = "report"
"""``report``'s default folder inside the stack's plan folder (build/<stack>/report)."""


class OutputError(ValueError):
    """An output folder the command cannot write: one line, exit 2."""


@dataclass(frozen=True)
class OutputFolder:
    """What a command writes into its output folder, for :func:`check_output` and :func:`staged`:
    ``command`` names it in the lines; ``subfolders`` are the folders it writes inside; ``ours`` are
    the names, or fnmatch patterns, at the folder's top of which an existing folder with files must
    hold one (the command writes among a user's own files, ``--out .`` or ``--out ~``, only by
    mistake, and would replace one of the same name); ``theirs`` are names that make the folder
    another command's (the value: whose), though it holds one of ``ours`` too (a plan's folder has
    the manifests/ a dry run writes)."""

    command: str = ""
    subfolders: tuple[str, ...] = ()
    ours: tuple[str, ...] = ()
    theirs: Mapping[str, str] = field(default_factory=dict)


ANY_FOLDER = OutputFolder()
"""A folder that need only be writable (verify --json's)."""


def check_output(out: Path, kind: OutputFolder = ANY_FOLDER) -> None:
    """Raise OutputError unless ``out`` (with ``kind``'s subfolders inside it) can be written, and
    is ``kind``'s (above), leaving no trace."""
    for path in (out, *(out / name for name in kind.subfolders)):
        if path.exists() and not path.is_dir():
            raise OutputError(f"{path} is a file, not a folder")
    if kind.ours and out.is_dir():
        try:
            held = sorted(entry.name for entry in os.scandir(out))
        except OSError as err:
            raise OutputError(f"cannot read {out}: {err.strerror or err}") from None
        other = next((f"{whose} ({name})" for pattern, whose in kind.theirs.items() for name in held if fnmatch.fnmatchcase(name, pattern)), None)
        if other:
            raise OutputError(f"{out} is {other}: give {kind.command} a folder of its own")
        if held and not any(fnmatch.fnmatchcase(name, pattern) for name in held for pattern in kind.ours):
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise OutputError(
                f"{out} holds files that {kind.command} did not write ({shown}): give a new or empty folder, or one {kind.command} wrote before"
            )
    existing = next(folder for folder in (out, *out.absolute().parents) if folder.exists())
    if not existing.is_dir():
        raise OutputError(f"cannot create {out}: {existing} is a file")
    try:
        # the folder that will receive the first new entry must take a file (as root too: os.access cannot tell)
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        what = f"cannot write in {out}" if existing == out else f"cannot create {out} in {existing}"
        raise OutputError(f"{what}: {err.strerror or err}") from None


@contextlib.contextmanager
def staged(out: Path, kind: OutputFolder = ANY_FOLDER) -> Iterator[Path]:
    """A temporary folder beside ``out`` to write the output into (removed when the block fails or
    the command is interrupted), once :func:`check_output` passed; :func:`commit` moves its files
    into ``out``."""
    check_output(out, kind)
    try:
        with interrupts.held():
            parent = out.resolve().parent  # beside the folder itself (a symbolic link's target): one file system
            parent.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=parent))
            interrupts.staging(folder)
    except OSError as err:
        raise OutputError(f"cannot create {out}: {err.strerror or err}") from None
    try:
        yield folder
    finally:
        with interrupts.held():
            shutil.rmtree(folder, ignore_errors=True)
            interrupts.staged(folder)


def commit(folder: Path, out: Path, remove: Iterable[str] = ()) -> None:
    """Move every file of ``folder`` to the same place in ``out`` (replacing what is there) and
    remove the files ``remove`` names (paths relative to ``out``), all before an interrupt takes
    effect. Files of ``out`` that ``folder`` does not hold are left alone."""
    try:
        with interrupts.held():
            out.mkdir(parents=True, exist_ok=True)
            for source in sorted(folder.rglob("*")):
                target = out / source.relative_to(folder)
                if source.is_dir():
                    target.mkdir(exist_ok=True)
                else:
                    try:
                        os.replace(source, target)
                    except OSError as err:
                        if err.errno != errno.EXDEV:
                            raise
                        shutil.move(source, target)  # out is a mount point of another file system: copied
            for name in remove:
                (out / name).unlink(missing_ok=True)
    except OSError as err:
        raise OutputError(f"cannot write in {out}: {err.strerror or err} ({getattr(err, 'filename', '') or out})") from None
