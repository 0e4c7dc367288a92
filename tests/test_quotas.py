"""The EC2 Service Quotas the plan prints: the right quota per family and purchase option, the vCPUs
from the catalog, only codes this project checked, and the plan's output carries them."""

from __future__ import annotations

import subprocess

from rlinf_eks import quotas
from rlinf_eks.offline.outputs.plan import settings_of
from rlinf_eks.offline.engine.stack_config import load
from tests.harness import ROOT

# The codes as checked (field notes, section 5, and the sources named in components/quotas.py):
# a new code must be checked and added here on purpose.
CHECKED = {"L-417A185B", "L-7212CCBC", "L-DB2E81BA", "L-3819A6DF", "L-1216C47A"}


def settings(stack: str, *sets: str):
    return settings_of(load(ROOT, stack, list(sets)))


def test_only_checked_quota_codes_are_named():
    assert {code for _, code in quotas.QUOTAS.values()} == CHECKED


def test_given_two_p5_nodes_on_demand_then_the_p_quota_needs_384_vcpus_and_the_system_nodes_the_standard_one():
    needs = quotas.needed(settings("multi-node"))
    assert (needs[0].name, needs[0].code, needs[0].vcpus) == ("Running On-Demand P instances", "L-417A185B", 384)
    assert (needs[1].code, needs[1].vcpus) == ("L-1216C47A", 8)  # 2 x m6i.xlarge


def test_given_spot_g_nodes_or_an_autoscaled_group_then_the_quota_follows_the_option_and_the_maximum():
    spot = quotas.needed(settings("single-node", "gpuNodes.instanceType=g6e.48xlarge", "gpuNodes.capacityType=SPOT", "gpuNodes.efa=false"))
    assert spot[0].code == "L-3819A6DF" and spot[0].vcpus == 192
    scaled = quotas.needed(settings("autoscaled"))
    s = settings("autoscaled")
    assert scaled[0].vcpus == s.gpu_nodes.max_size * 96


def test_an_unknown_family_is_named_as_unknown_never_guessed():
    need = quotas._need(quotas.family_group("x2idn.32xlarge"), "on-demand", "1 x x2idn.32xlarge", 128)
    assert need.code is None and "no Service Quotas code known here" in str(need)


def test_the_plan_prints_the_quotas_and_that_p5_capacity_is_not_a_quota(tmp_path, cli_python):
    done = subprocess.run(
        [cli_python, "-m", "rlinf_eks", "plan", "multi-node", "--out", str(tmp_path / "plan")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Running On-Demand P instances (L-417A185B): 384 vCPUs for 2 x p5.48xlarge" in done.stdout
    assert "a quota is not capacity" in done.stdout
