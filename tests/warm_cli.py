"""A warm ``python -m rlinf_eks`` for the documentation's shell blocks (tests/test_docs.py).

A block runs in bash as written, and each ``python -m rlinf_eks ...`` in it is a process of its
own. Most of such a process's CPU is the interpreter importing the package and the Pulumi SDKs
(about 0.8 of a plan's 1.2 CPU-s): with about 30 commands in the blocks, that was two thirds of
their CPU. So the blocks find ``python`` and ``python3`` on their PATH as a shim
(``bin_dir``): for ``-m rlinf_eks`` it asks a server that has imported the modules a plan imports
to fork a child, which takes the caller's working directory, environment, arguments and standard
streams (the file descriptors themselves, passed over a Unix socket) and runs the command's own
entry point (``rlinf_eks.__main__.cli``: its signal handling, its exit); the shim exits with the
child's status. Any other ``python`` command line runs the real interpreter. The commands, their
output and their files are the same: only the imports were done before.

One server per test session (``RLINF_EKS_TEST_WARM_CLI``: a folder), started by the session's
controller before the xdist workers start and stopped and waited for at its end (tests/conftest.py),
so that its CPU and its children's count in the session's (bench/suite_bench.py). It listens at
once and imports on its first request: it plans a stack once in a child of its own and imports what
that child had imported, in the same order, each as far as the plan took it (a package the SDKs
hand out lazily and the plan never used stays unrun). It also ends when its folder is gone, or after
``IDLE_SECONDS`` without a request.

    python -m tests.warm_cli serve DIR      # the server (tests/conftest.py starts it)
"""

from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SESSION_ENV = "RLINF_EKS_TEST_WARM_CLI"
SOCKET_ENV = "RLINF_EKS_WARM_CLI_SOCKET"
IDLE_SECONDS = 600
START_SECONDS = 60
_STREAMS = 3  # stdin, stdout, stderr


# --- the client: the shim's ``python -m rlinf_eks`` -------------------------------------------------

CLIENT = r'''
import array, json, os, socket, sys
env = dict(os.environ)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(env.pop("%(socket_env)s"))  # the caller's environment, as it was before the shim
request = json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": env}).encode()
sock.sendmsg([len(request).to_bytes(8, "big") + request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
status = b""
while len(status) < 4:
    chunk = sock.recv(4 - len(status))
    if not chunk:
        sys.stderr.write("tests/warm_cli.py: the server ended before the command did\n")
        os._exit(70)
    status += chunk
os._exit(int.from_bytes(status, "big"))
'''


def bin_dir(into: Path, socket_path: Path) -> Path:
    """A folder with ``python`` and ``python3`` shims to put first on a block's PATH."""
    into.mkdir(parents=True, exist_ok=True)
    client = into / "warm_client.py"
    client.write_text(CLIENT % {"socket_env": SOCKET_ENV})
    real = sys.executable
    for name in ("python", "python3"):
        shim = into / name
        shim.write_text(
            "#!/bin/sh\n"
            f'if [ "$1" = "-m" ] && [ "$2" = "rlinf_eks" ]; then shift 2; '
            f'{SOCKET_ENV}={socket_path} exec {real} -I -S {client} "$@"; fi\n'
            f'exec {real} "$@"\n'
        )
        shim.chmod(0o755)
    return into


# --- the server ---------------------------------------------------------------------------------


# what a plan's child found of each module it had (``_module_states``)
UNRUN = "unrun"  # handed out lazily (pulumi's or importlib's LazyLoader) and never used
INDEXED = "indexed"  # an SDK package the package hands out by name (rlinf_eks.offline.engine.sdk_imports), not run whole
RAN = "ran"


def _module_states() -> list[tuple[str, str]]:
    """Every module in ``sys.modules``, in import order, with what the plan did with it."""
    import importlib.util

    from pulumi._utils import _LazyModule

    from rlinf_eks.offline.engine.sdk_imports import _LazyPackage

    def state(module) -> str:
        if isinstance(module, (_LazyModule, importlib.util._LazyModule)):
            return UNRUN
        return INDEXED if isinstance(module, _LazyPackage) else RAN

    return [(name, state(module)) for name, module in list(sys.modules.items())]


def _warm_modules() -> list[tuple[str, str]]:
    """The modules a plan imports, in their import order, each with what the plan did with it (a
    lazily handed-out module may stay unrun: pulumi_aws has about 270): a child plans a stack and
    reports them."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: plan, list sys.modules, leave
        os.close(read)
        status = 1
        try:
            from rlinf_eks.__main__ import main

            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            project = Path(__file__).resolve().parents[1]
            with tempfile.TemporaryDirectory(prefix="warm-cli-") as out:
                os.chdir(project)
                main(["plan", "single-node", "--quiet", "--out", out])
            os.write(write, json.dumps(_module_states()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b"[]")


MODULES_FILE = "modules.json"
"""In the session's folder, once the server has imported: {"plan": the plan child's module states,
"server": the server's own} (tests/test_warm_cli.py compares them)."""


def _preload() -> list[tuple[str, str]]:
    """Import what the plan's child had, in its order, each as far as the plan took it. A module
    the SDKs import lazily is run before its submodules are imported, as the plan's first use ran
    it: a submodule imported into a parent that has not run is bound again after it runs, over the
    class the parent's star import bound (pulumi_kubernetes.apiextensions.CustomResource)."""
    import importlib

    import rlinf_eks.__main__  # noqa: F401  (and rlinf_eks.offline: the SDKs' lazy packages)

    planned = _warm_modules()
    for name, state in planned:
        if name == "__main__":
            continue
        try:
            module = importlib.import_module(name)
            if state == INDEXED:
                getattr(module, "__warm_cli_load__", None)  # runs pulumi's LazyLoader; a dunder never loads the package whole
            elif state == RAN:
                getattr(module, "_warm_cli_load", None)  # any other attribute runs a lazy module whole
        except Exception:  # a module the plan's child had that cannot be imported alone: it is imported when used
            pass
    return planned


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    header, ancillary, _, _ = conn.recvmsg(8, socket.CMSG_SPACE(_STREAMS * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    size = int.from_bytes(header, "big")
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            break
        body += chunk
    return json.loads(body), list(fds)


def _run_child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the caller's ``python -m rlinf_eks ARGS`` process and run it."""
    status = 1
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [str(Path(sys.modules["rlinf_eks.__main__"].__file__)), *request["argv"]]
        from rlinf_eks.__main__ import cli

        cli()  # leaves with os._exit(status)
    except SystemExit as end:
        status = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
        if not isinstance(end.code, (int, type(None))):
            print(end.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def serve(session: Path) -> None:
    """Listen at once; import on the first request (a session that runs no block imports nothing)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(session / "server.sock.partial"))
    listener.listen(64)
    (session / "server.sock.partial").replace(session / "server.sock")  # clients connect once it listens
    waiting: dict[int, socket.socket] = {}  # child pid: the connection its status goes back on
    warm = False
    last = time.monotonic()
    while session.is_dir() and (waiting or time.monotonic() - last < IDLE_SECONDS):
        ready, _, _ = select.select([listener], [], [], 0.05)
        if ready:
            conn, _ = listener.accept()
            last = time.monotonic()
            try:
                request, fds = _receive(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            if not warm:
                planned = _preload()
                (session / MODULES_FILE).write_text(json.dumps({"plan": planned, "server": _module_states()}))
                warm = True
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                _run_child(request, fds)
            for fd in fds:
                os.close(fd)
            waiting[pid] = conn
        while waiting:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(wait_status)
            conn = waiting.pop(pid, None)
            if conn is not None:
                try:  # killed by a signal: the shell's 128 + N
                    conn.sendall((code if code >= 0 else 128 - code).to_bytes(4, "big"))
                except OSError:
                    pass
                conn.close()
            last = time.monotonic()
    listener.close()


def start(session: Path) -> subprocess.Popen:
    """The session's server, started by the test session's controller (tests/conftest.py), which
    waits for it at the end: its CPU and its children's count in the session's own."""
    root = Path(__file__).resolve().parents[1]
    with open(session / "server.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "tests.warm_cli", "serve", str(session)], cwd=root,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def socket_of(session: Path) -> Path:
    """The server's socket, once it listens."""
    path = session / "server.sock"
    deadline = time.monotonic() + START_SECONDS
    while not path.exists():
        if time.monotonic() > deadline:
            log = session / "server.log"
            raise RuntimeError(f"the warm rlinf_eks server did not start: {log.read_text()[-2000:] if log.exists() else 'no log'}")
        time.sleep(0.02)
    return path


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
