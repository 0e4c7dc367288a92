"""Issue 55, item 4: the setups a reviewer would stop, refused from the user's side (the command,
the one line naming the key, exit status 2, nothing written), and the way to ask for them on purpose."""

from __future__ import annotations

import pytest

from rlinf_eks.model_size import parameters_by_name
from tests.harness import cli_plan


def _plan(monkeypatch, capsys, tmp_path, *sets: str, stack: str = "multi-node") -> tuple[int, str]:
    return cli_plan(monkeypatch, capsys, tmp_path, stack, *sets)


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


# --- a staged model larger than its volume ------------------------------------------------------

BIG = "workload.model.source=hf://Qwen/Qwen2.5-72B-Instruct"


def test_a_model_larger_than_its_volume_is_refused_naming_the_size_key(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, BIG, stack="vllm-rollout")
    assert status == 2 and not (tmp_path / "out").exists()
    line = next(x for x in err.splitlines() if "workload.model.sizeGib=64" in x)
    assert "hf://Qwen/Qwen2.5-72B-Instruct" in line and "about 134 GiB" in line and "72B parameters" in line
    assert "workload.model.sizeGib to 148 or more" in line


def test_a_volume_as_large_as_the_model_plans(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, BIG, "workload.model.sizeGib=148", stack="vllm-rollout")
    assert status == 0, err


def test_the_recipes_own_model_is_sized_from_its_facts(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, "workload.model.sizeGib=8", stack="single-node")
    assert status == 2
    line = next(x for x in err.splitlines() if "workload.model.sizeGib=8" in x)
    assert "7.54B parameters by the recipe's facts" in line and "about 14 GiB" in line


def test_on_the_shared_filesystem_the_volume_does_not_hold_the_model(monkeypatch, capsys, tmp_path):
    status, err = _plan(monkeypatch, capsys, tmp_path, BIG, "storage.sharedFilesystem.enabled=true", stack="vllm-rollout")
    assert "workload.model.sizeGib" not in err


@pytest.mark.parametrize(
    "repo, parameters",
    [
        ("Qwen/Qwen2.5-72B-Instruct", 72e9),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.5e9),
        ("Qwen/Qwen3-235B-A22B", 235e9),
        ("HuggingFaceTB/SmolLM2-135M", 135e6),
        ("Qwen/Qwen2.5-72B-Instruct-AWQ", None),  # quantized: smaller, not estimated
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", None),
        ("openvla/openvla-7b-finetuned-libero-10", 7e9),
        ("Haozhan72/Openvla-oft-SFT-libero10-trajall", None),  # no count in the name
        ("mistralai/Mixtral-8x7B-v0.1", None),  # experts times size is not the count
    ],
)
def test_parameters_by_name(repo, parameters):
    assert parameters_by_name(repo) == parameters
