"""Ctrl-C (SIGINT) and SIGTERM for the command line: one line, exit 128 + the signal, at once.

Python's own handling raises KeyboardInterrupt wherever the program happens to be: inside the
offline plan's asyncio tasks under the Pulumi mocks it prints a long traceback, may leave tasks the
event loop waits on for ever (the first Ctrl-C then hangs until a second one), or is swallowed by
code that catches it and the plan finishes. The command line (``rlinf_eks.__main__.cli``) installs
:func:`install` instead: the handler removes the staging folders of outputs being written and the
temporary files that hold secrets (:func:`staging`), writes one line and leaves with ``os._exit``,
whatever the program was doing.

Two kinds of work change that for a while:

- :func:`held`: moving a finished output into place (a few renames) completes first; the signal
  then ends the command as above, so an output folder is either the old one or the new one.
- :func:`raising`: work that must undo what it did on the way out (verify's climb deletes the
  objects it created in the cluster; build-image says that a started build goes on) gets Python's
  KeyboardInterrupt and handles it itself.

Only the command line installs it (``python -m rlinf_eks`` while importing the package, the
``rlinf-eks`` script in ``cli``): a program that imports the library keeps its own handling.
"""

from __future__ import annotations

# Only modules the interpreter has loaded before any of this package runs: `python -m rlinf_eks`
# installs the handler while importing the package (rlinf_eks/__init__.py), and an import here
# would be a moment where Ctrl-C still prints Python's traceback.
# `_signal` is the module `signal` wraps (in enums, which take a moment to import): the same
# functions, loaded with the interpreter.
import _signal as signal
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType
    from typing import Any, Optional

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}

_staging: set[Path | str] = set()
_holding = 0
_pending: Optional[int] = None


def message(signum: int) -> str:
    """The one line an interrupted command writes (stderr)."""
    return f"error: interrupted by {_NAMES.get(signum, f'signal {signum}')}: stopped; no output folder was left half-written"


def _stop(signum: int) -> None:
    for path in list(_staging):
        try:
            if os.path.isdir(path):
                import shutil  # loaded already: an output is being written (rlinf_eks.offline.outputs.output)

                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass
    # os.write, not sys.stderr: the main thread may be inside a write to sys.stderr's buffer
    try:
        os.write(2, (message(signum) + "\n").encode())
    except OSError:
        pass  # stderr closed: the status still says it
    os._exit(128 + signum)


def _handler(signum: int, _frame: Optional[FrameType]) -> None:
    global _pending
    if _holding:
        _pending = signum
        return
    _stop(signum)


def install() -> None:
    """Make SIGINT and SIGTERM end the command at once with one line (the command line only)."""
    for sig in _SIGNALS:
        signal.signal(sig, _handler)


def installed() -> bool:
    return signal.getsignal(signal.SIGINT) is _handler


class _Held:
    def __enter__(self) -> None:
        global _holding
        _holding += 1

    def __exit__(self, *exc: Any) -> None:
        global _holding
        _holding -= 1
        if not _holding and _pending is not None and installed():
            _stop(_pending)


def held() -> _Held:
    """``with held():`` finishes the block before an interrupt takes effect (it then ends the command)."""
    return _Held()


def _raise(_signum: int, _frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


class _Raising:
    def __enter__(self) -> None:
        self.active = installed()
        if self.active:
            for sig in _SIGNALS:
                signal.signal(sig, _raise)

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            install()


def raising() -> _Raising:
    """``with raising():`` within the block, SIGINT (and SIGTERM) raise KeyboardInterrupt for the
    code to handle."""
    return _Raising()


def staging(path: Path | str) -> None:
    """A folder or file an interrupt removes: an output being written beside its final place, a
    temporary file that holds a secret (verify's kubeconfig from the stack's output)."""
    _staging.add(path)


def staged(path: Path | str) -> None:
    """The folder or file is gone or moved into place: an interrupt leaves it alone."""
    _staging.discard(path)
