"""Issue 55, item 4: the setups a reviewer would stop, refused from the user's side (the command,
the one line naming the key, exit status 2, nothing written), and the way to ask for them on purpose."""

from __future__ import annotations

from pathlib import Path

from rlinf_eks.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def _plan(monkeypatch, capsys, tmp_path, *sets: str) -> tuple[int, str]:
    monkeypatch.chdir(ROOT)
    argv = ["plan", "multi-node", "--quiet", "--out", str(tmp_path / "out")]
    for s in sets:
        argv += ["--set", s]
    status = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err


def test_efa_off_on_an_efa_type_with_two_nodes_is_refused_naming_the_key(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, "gpuNodes.efa=false")
    assert status == 2 and not (tmp_path / "out").exists()
    line = next(x for x in err.splitlines() if "gpuNodes.efa=false" in x)
    assert "p5.48xlarge has EFA" in line and "2 nodes" in line and "gpuNodes.allowTcpFabric" not in line
    assert "allowTcpFabric: true" in line


def test_efa_off_with_allow_tcp_fabric_plans(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true")
    assert status == 0, err


def test_efa_off_on_one_node_needs_no_allowance(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, "gpuNodes.efa=false", "gpuNodes.nodeCount=1")
    assert "gpuNodes.efa" not in err and "allowTcpFabric" not in err
