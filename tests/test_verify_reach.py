"""verify says why it cannot reach the cluster, against real failing endpoints on loopback: a
closed port (connection refused), a listening socket that never answers (timed out, with short
timeouts passed in), a TLS server whose certificate the kubeconfig's CA did not sign, a name that
does not resolve; and with no kubeconfig at all it points at ``--dry-run``. The 401 and 403 of a
real API server are in tests/test_verify_sim.py (they need its binaries)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from rlinf_eks.__main__ import main
from rlinf_eks.verify import cli as verify_cli
from rlinf_eks.verify.client import Cluster, api_failure
from rlinf_eks.verify.control_plane import check_control_plane
from rlinf_eks.verify.model import CheckResult
from tests.test_verify_checks import expect

SHORT = (0.5, 0.5)
"""(connect, read) seconds: a test waits on no production timeout."""


def kubeconfig(tmp_path: Path, server: str, ca: Path | None = None, insecure: bool = False) -> Path:
    cluster: dict[str, str | bool] = {"server": server}
    if ca is not None:
        cluster["certificate-authority"] = str(ca)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "a-token"}}],
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def reachable(tmp_path: Path, server: str, ca: Path | None = None) -> tuple[CheckResult, float]:
    """L0's first check against ``server``, and how long the control plane's reads took."""
    cluster = Cluster(str(kubeconfig(tmp_path, server, ca)), timeout=SHORT)
    started = time.monotonic()
    observed = cluster.observe_control_plane()
    took = time.monotonic() - started
    results = check_control_plane(expect("single-node"), observed)
    assert [r.outcome for r in results[1:]] == ["skip"] * (len(results) - 1)
    first = results[0]
    assert first.name == "api.reachable" and first.outcome == "fail"
    assert "\n" not in first.detail + first.remedy and "Traceback" not in first.detail
    return first, took


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A server that takes every connection and never reads or answers: (its port, the
    connections it took)."""
    taken: list[socket.socket] = []
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)

    def take() -> None:
        while not stop.is_set():
            try:
                taken.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), taken
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in taken:
            conn.close()
        listener.close()


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A listener that never accepts, its backlog full: the kernel drops further handshakes, as a
    firewall that drops packets does."""
    held = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = int(listener.getsockname()[1])
        try:
            for _ in range(16):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                held.append(s)
            time.sleep(0.2)
            yield port
        finally:
            for s in held:
                s.close()


def _openssl_cert(folder: Path, name: str) -> tuple[Path, Path]:
    key, cert = folder / f"{name}.key", folder / f"{name}.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return key, cert


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A TLS server with a self-signed certificate, and another CA's certificate (what a kubeconfig
    of an earlier cluster holds): (port, that CA's file)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: it makes the TLS server's certificates")
    key, cert = _openssl_cert(tmp_path, "server")
    _, other_ca = _openssl_cert(tmp_path, "earlier-cluster")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (OSError, ssl.SSLError):
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), other_ca
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def test_a_closed_port_is_connection_refused_naming_the_endpoint(tmp_path, closed_port):
    check, took = reachable(tmp_path, f"https://127.0.0.1:{closed_port}")
    assert check.detail == f"https://127.0.0.1:{closed_port} refused the connection (GET /version): nothing listens there"
    assert "pulumi stack output kubeconfig --show-secrets --stack single-node" in check.remedy
    assert took < 2


def test_a_server_that_never_answers_times_out_within_the_client_timeout(tmp_path, silent_server):
    port, taken = silent_server
    check, took = reachable(tmp_path, f"https://127.0.0.1:{port}")
    assert check.detail == f"no answer from https://127.0.0.1:{port} (GET /version): read timed out after 0.5s"
    assert check.remedy.startswith("it took the connection but never answered")
    # tried once more, not urllib3's default three more times
    assert len(taken) == 2, len(taken)
    assert took < 3, took


def test_an_untrusted_certificate_is_a_tls_failure(tmp_path, tls_server):
    port, other_ca = tls_server
    check, _ = reachable(tmp_path, f"https://127.0.0.1:{port}", ca=other_ca)
    assert check.detail.startswith(f"https://127.0.0.1:{port}'s certificate is not trusted (GET /version): ")
    assert "self-signed certificate" in check.detail or "certificate verify failed" in check.detail
    assert "certificate-authority-data" in check.remedy


def test_a_connection_that_never_completes_says_where_to_reach_the_endpoint_from(tmp_path, full_backlog):
    check, took = reachable(tmp_path, f"https://127.0.0.1:{full_backlog}")
    assert check.detail == f"no answer from https://127.0.0.1:{full_backlog} (GET /version): connect timed out after 0.5s"
    assert "cluster.endpointPublicAccessCidrs" in check.remedy and "inside the VPC" in check.remedy
    assert took < 3, took


def test_a_name_that_does_not_resolve_says_so(tmp_path):
    check, _ = reachable(tmp_path, "https://no-such-cluster.invalid:443")
    assert check.detail.startswith("the endpoint https://no-such-cluster.invalid:443 does not resolve (GET /version)")
    assert "kubeconfig" in check.remedy


def test_what_is_not_an_api_or_network_error_is_not_classified():
    assert api_failure(KeyError("x"), "https://e") is None
    assert api_failure(ConnectionResetError("reset"), "https://e").reason == "error"  # type: ignore[union-attr]


@pytest.fixture(autouse=True)
def _no_pulumi(monkeypatch):
    monkeypatch.setattr(verify_cli, "_stack_kubeconfig", lambda stack: None)


def test_the_command_against_a_closed_port_prints_the_table_row_and_exits_1(tmp_path, closed_port, capsys):
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port}")
    assert main(["verify", "single-node", "--kubeconfig", str(path)]) == 1
    out, err = capsys.readouterr()
    assert f"https://127.0.0.1:{closed_port} refused the connection" in out and "single-node: NOT READY (levels 0-0 of 0-5)" in out
    assert "Traceback" not in out + err


def test_with_no_kubeconfig_at_all_it_points_at_the_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["verify", "single-node"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: no cluster to verify: no kubeconfig (no --kubeconfig, no $KUBECONFIG, no kubeconfig output of stack single-node")
    assert line.endswith("python -m rlinf_eks verify single-node --dry-run")


def test_a_kubeconfig_that_does_not_exist_names_it_and_the_dry_run(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "kubeconfig"
    assert main(["verify", "single-node", "--kubeconfig", str(missing)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: no cluster to verify: {missing}: ") and line.endswith("(without a cluster: python -m rlinf_eks verify single-node --dry-run)")


@pytest.mark.parametrize("text", [
    "root:x:0:0:root:/root:/bin/bash\n",  # --kubeconfig /etc/passwd: YAML, a string
    "- a\n- b\n",
    "contexts: 5\nusers: [1, {name: x, user: 3}]\ncurrent-context: [1]\n",
    "clusters: {a: 1}\ncontexts: [{name: c, context: 7}]\ncurrent-context: c\n",
])  # fmt: skip
def test_a_file_that_is_no_kubeconfig_is_one_line_naming_it(text, tmp_path, capsys):
    file = tmp_path / "not-a-kubeconfig"
    file.write_text(text)
    assert main(["verify", "single-node", "--kubeconfig", str(file)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"error: no cluster to verify: {file}: ") and line.endswith("(without a cluster: python -m rlinf_eks verify single-node --dry-run)")


@pytest.fixture
def https_api(tmp_path: Path) -> Iterator[int]:
    """An HTTPS server with a self-signed certificate that answers GET /version as an API server
    does and everything else 401 (a token it does not take): its port."""
    import http.server
    import json

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: it makes the TLS server's certificate")
    key, cert = _openssl_cert(tmp_path, "server")

    class Api(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            version = self.path.startswith("/version")
            body = json.dumps({"major": "1", "minor": "33", "gitVersion": "v1.33.1", "gitCommit": "0", "gitTreeState": "clean",
                                               "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"} if version else
                              {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized", "code": 401}).encode()  # fmt: skip
            self.send_response(200 if version else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_kubeconfig_that_skips_tls_verification_is_said_once_in_one_line(tmp_path, https_api):
    import os
    import sys

    path = kubeconfig(tmp_path, f"https://127.0.0.1:{https_api}", insecure=True)
    env = {**os.environ, "KUBECONFIG": str(path)}  # no pulumi stack output asked for
    done = subprocess.run([sys.executable, "-m", "rlinf_eks", "verify", "single-node"], capture_output=True, text=True, env=env, timeout=120)
    assert "InsecureRequestWarning" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if "insecure-skip-tls-verify" in line]
    assert said == [
        f"warning: https://127.0.0.1:{https_api}: the kubeconfig sets insecure-skip-tls-verify: true, so its certificate is not "
        "checked (anyone on the way could answer as the cluster); put its CA in certificate-authority-data instead "
        "(aws eks update-kubeconfig writes it)"
    ]
    # it reached the server (the certificate went unchecked) and climbed to the credentials it refused
    assert "v1.33" in done.stdout and "single-node: NOT READY" in done.stdout, done.stdout
