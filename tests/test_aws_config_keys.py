"""Keys under `aws:` in a stack file (or --set) are the AWS provider's: one that is none of
pulumi-aws's configuration keys (aws:regoin) would be silently ignored by the provider, so the plan
and the program refuse it before anything exists, with the near miss (exit 2, one line)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

from rlinf_eks.__main__ import main
from rlinf_eks.config.pulumi_config import aws_config_keys, aws_key_problem, stack_data
from tests.harness import ROOT

STACK = """\
config:
  aws:{key}: {value}
  rlinf-eks:cluster:
    endpointPublicAccessCidrs: [198.51.100.7/32]
  rlinf-eks:workload:
    image: 210987654321.dkr.ecr.us-east-1.amazonaws.com/rlinf:v1
"""


def _project(tmp_path: Path, key: str, value: str) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text(STACK.format(key=key, value=value))
    return tmp_path


def test_a_misspelt_aws_key_in_a_stack_file_is_refused_with_the_near_miss(tmp_path):
    folder = _project(tmp_path, "regoin", "us-east-1")
    done = subprocess.run([sys.executable, "-m", "rlinf_eks", "plan", "s", "--quiet", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=folder, timeout=300)  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "aws:regoin" in x]
    assert "aws:regoin: not a configuration key of the AWS provider (pulumi-aws) (did you mean region?)" in line
    assert not (tmp_path / "out").exists()


def test_a_misspelt_aws_key_given_with_set_is_refused_too(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(_project(tmp_path, "region", "us-east-1"))
    status = main(["plan", "s", "--quiet", "--out", str(tmp_path / "out"), "--set", "aws:skipCredentialValidation=true"])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert "aws:skipCredentialValidation: not a configuration key of the AWS provider (pulumi-aws) (did you mean skipCredentialsValidation?)" in err


def test_the_providers_own_keys_and_other_namespaces_pass(monkeypatch, capsys, tmp_path):
    _, problems = stack_data({"aws:region": "us-east-1", "aws:profile": "dev", "aws:defaultTags": '{"tags": {"team": "ml"}}',
                              "aws:skipRequestingAccountId": "true", "kubernetes:context": "x", "pulumi:template": "y"})  # fmt: skip
    assert problems == []
    monkeypatch.chdir(_project(tmp_path, "profile", "training"))
    assert main(["plan", "s", "--quiet", "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err


def test_the_keys_are_every_property_of_the_installed_providers_config():
    """Read from pulumi_aws/config/vars.py (the package's Config class), one key per property."""
    spec = importlib.util.find_spec("pulumi_aws")
    source = (Path(list(spec.submodule_search_locations)[0]) / "config" / "vars.py").read_text()
    config = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == "_ExportableConfig")
    properties = [f for f in config.body if isinstance(f, ast.FunctionDef)
                  and any((getattr(d, "id", None) or getattr(d, "attr", None)) == "property" for d in f.decorator_list)]  # fmt: skip
    keys = aws_config_keys()
    assert len(keys) == len(properties) and {"region", "profile", "defaultTags", "skipCredentialsValidation", "assumeRoles"} <= set(keys)
    assert aws_key_problem("aws:foo") and "its keys: accessKey," in aws_key_problem("aws:foo")
    assert aws_key_problem("rlinf-eks:foo") is None and aws_key_problem("aws:region") is None
