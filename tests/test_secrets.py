"""Secrets never appear in plain text: not in plan.json, manifests/, stack outputs nor the printed
plan (what a CI log keeps). Secret config values are set as ``pulumi config set --secret`` would
(a secret key of the stack's config), with distinctive cleartext to grep for."""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from rlinf_eks.__main__ import main
from rlinf_eks.offline.outputs import plan as plan_mod, tree
from rlinf_eks.offline.engine.stack_config import load, set_path
from tests.harness import ROOT, STACKS

CLEARTEXT = {
    "rlinf-eks:hfToken": "hf_CLEARTEXTtokenDoNotLeak0123456789",
    "rlinf-eks:wandbApiKey": "wandbCLEARTEXTkey0123456789abcdef0123",
}
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: kubeCLEARTEXTbearer0123456789\n"
EXISTING_CLUSTER = [
    "cluster.existing=true", "cluster.name=training", "network.vpcId=vpc-0123456789abcdef0",
    "network.privateSubnetIds[0]=subnet-0123456789abcdef0", "network.privateSubnetIds[1]=subnet-0123456789abcdef1",
    "network.gpuSubnetId=subnet-0123456789abcdef0",
]


def with_secrets(stack: str, secrets: dict[str, str], sets: list[str] = ()):
    config = load(ROOT, stack, list(sets))
    values = copy.deepcopy(config.values)
    for key, value in secrets.items():
        set_path(values, key, value)
    config.values = values
    config.secret_keys = set(config.secret_keys) | set(secrets)
    return config


def rendered(plan: plan_mod.Plan, tmp_path) -> str:
    """Everything the plan writes and prints."""
    plan_mod.write(plan, tmp_path)
    files = "\n".join(p.read_text() for p in sorted(tmp_path.rglob("*")) if p.is_file())
    printed = "\n".join([tree.render_tree(plan), *tree.render_outputs(plan.outputs), *plan.warnings])
    return files + printed


def plan_of(config):
    return plan_mod.make_plan(config)


@pytest.mark.parametrize("stack", STACKS)
def test_given_secret_tokens_when_planned_then_no_cleartext_anywhere(stack, tmp_path):
    plan = plan_of(with_secrets(stack, CLEARTEXT))
    text = rendered(plan, tmp_path)
    for key, secret in CLEARTEXT.items():
        assert secret not in text, f"{key} leaked in clear"
    # the secrets are used (the test would pass vacuously otherwise): masked where they land
    assert any("[secret]" in json.dumps(r["inputs"]) for r in plan.resources), "no resource carries the secrets"


def test_given_an_existing_clusters_kubeconfig_secret_when_planned_then_no_cleartext_anywhere(tmp_path):
    config = with_secrets("single-node", {"rlinf-eks:kubeconfig": KUBECONFIG}, EXISTING_CLUSTER)
    plan = plan_of(config)
    text = rendered(plan, tmp_path)
    assert "kubeCLEARTEXTbearer0123456789" not in text
    assert plan.outputs.get("kubeconfig") == "[secret]"


def test_given_a_stack_when_planned_by_the_cli_then_the_kubeconfig_output_is_masked(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(["plan", "single-node", "--out", str(tmp_path)])
    assert status == 0, err.getvalue()
    assert "kubeconfig: [secret]" in out.getvalue()
    assert json.loads((tmp_path / "plan.json").read_text())["outputs"]["kubeconfig"] == "[secret]"
