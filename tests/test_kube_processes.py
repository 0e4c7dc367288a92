"""The real API server's start-up (tests/kube_processes.py, tests/kube_apiserver.py), without the
real binaries: binaries that fail say why, and a variable naming a folder without them is told
apart from no variable at all (the first fails the tier, the second skips it)."""

from __future__ import annotations

import os
import time

import pytest

from tests import kube_apiserver, kube_processes


def fake_binaries(folder, etcd_exit: str = "while :; do sleep 0.1; done", apiserver: str = 'echo "bad flag --nope" >&2; exit 3'):
    folder.mkdir()
    for name, body in (("etcd", etcd_exit), ("kube-apiserver", apiserver)):
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return folder


def test_given_a_kube_apiserver_that_exits_then_start_fails_with_its_log_and_leaves_nothing_running(tmp_path):
    # GIVEN binaries whose kube-apiserver exits at once (etcd would run)
    binaries = fake_binaries(tmp_path / "bin")
    workdir = tmp_path / "server"
    # WHEN the server is started THEN it fails saying what the process printed
    with pytest.raises(RuntimeError, match="bad flag --nope"):
        kube_processes.start(binaries, workdir)
    assert (workdir / "usage.json").exists() or _wait_for(workdir / "usage.json")  # the supervisor ended
    # AND the supervisor stopped etcd: no process of the fake binaries is left
    deadline = time.monotonic() + 10
    while any(str(binaries) in _cmdline(pid) for pid in _pids()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in _pids() if str(binaries) in _cmdline(pid)]


def _wait_for(path, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_given_the_variables_then_binaries_are_found_or_missing_ones_named(tmp_path, monkeypatch):
    monkeypatch.delenv(kube_apiserver.ASSETS_ENV, raising=False)
    monkeypatch.delenv(kube_apiserver.ENVTEST_ASSETS_ENV, raising=False)
    # no variable: nothing configured, nothing wrong (the tier skips)
    assert kube_apiserver.assets() is None and kube_apiserver.misconfigured() is None
    # a folder without kube-apiserver: named (the tier fails)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "half" / "etcd").chmod(0o755)
    monkeypatch.setenv(kube_apiserver.ENVTEST_ASSETS_ENV, str(tmp_path / "half"))
    assert kube_apiserver.assets() is None
    assert kube_apiserver.misconfigured() == f"KUBEBUILDER_ASSETS={tmp_path / 'half'} holds no executable kube-apiserver"
    # both binaries: found
    monkeypatch.setenv(kube_apiserver.ASSETS_ENV, str(fake_binaries(tmp_path / "full")))
    assert kube_apiserver.assets() == tmp_path / "full"
