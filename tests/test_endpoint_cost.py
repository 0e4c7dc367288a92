"""Issue 55, item 3: network.interfaceEndpoints' hourly price in the plan's cost (AWS PrivateLink: per
endpoint per AZ), and the free S3 gateway endpoint billed nothing."""

from __future__ import annotations

from pathlib import Path

from rlinf_eks.__main__ import main
from rlinf_eks.offline.outputs.efficiency import efficiency_report
from tests.harness import plan_stack

ROOT = Path(__file__).resolve().parents[1]


def _items(*sets: str) -> dict:
    plan = plan_stack("single-node", *sets)
    return {i["item"]: i for i in efficiency_report(plan, plan.settings)["cost"]["items"]}


def test_four_interface_endpoints_in_two_azs_bill_eight_endpoint_hours():
    item = _items("network.interfaceEndpoints=true")["interfaceEndpoints"]
    assert item["unit"] == "endpoint-AZ-hour" and item["quantity"]["idle"] == 8
    assert item["perHourIdle"] == item["perHourWhileTraining"] == 0.08
    assert "privatelink" in item["price"]["source"]
    assert sorted(item["resources"]) == ["rlinf-ecr-api", "rlinf-ecr-dkr", "rlinf-logs", "rlinf-sts"]


def test_three_azs_bill_twelve():
    zones = [f"network.availabilityZones[{i}]=us-east-1{z}" for i, z in enumerate("abc")]
    item = _items("network.interfaceEndpoints=true", *zones)["interfaceEndpoints"]
    assert item["quantity"]["idle"] == 12


def test_the_gateway_endpoint_alone_bills_nothing():
    assert "interfaceEndpoints" not in _items()


def test_the_plan_prints_the_endpoints_hourly_price(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "single-node", "--set", "network.interfaceEndpoints=true", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "    interfaceEndpoints       $0.08/h while training, $0.08/h idle  (per endpoint per AZ, plus $0.01/GB processed)" in out
