"""The lazy SDK packages (rlinf_eks/offline/engine/sdk_imports.py) against the installed SDKs: when an SDK
upgrade changes its generated layout, this fails naming the SDK version and the package, instead of
the plan silently importing everything again or, worse, a name resolving to something else.

The plans' bytes are pinned by tests/test_stacks.py's golden plans, which the suite computes with
the lazy packages (tests/conftest.py installs them before any test imports an SDK).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import pytest

from rlinf_eks.offline.engine import sdk_imports
from rlinf_eks.offline.outputs.plan import make_plan
from rlinf_eks.offline.engine.stack_config import load
from tests.harness import ROOT, STACKS

# The SDK packages the program uses (components/*.py and pulumi_eks): each must stay lazy.
PACKAGES = (
    "pulumi_aws.ec2", "pulumi_aws.eks", "pulumi_aws.iam", "pulumi_aws.s3", "pulumi_aws.kms", "pulumi_aws.vpc",
    "pulumi_aws.fsx", "pulumi_kubernetes.core.v1", "pulumi_kubernetes.batch.v1", "pulumi_kubernetes.helm.v3",
    "pulumi_kubernetes.meta.v1", "pulumi_kubernetes.apiextensions", "pulumi_kubernetes.networking.v1",
    "pulumi_kubernetes.rbac.v1",
)


def _sdk(package: str) -> str:
    top = package.split(".", 1)[0]
    return f"{top} {version(top.replace('_', '-'))}"


def _init(package: str) -> Path:
    return Path(find_spec(package.split(".", 1)[0]).submodule_search_locations[0], *package.split(".")[1:], "__init__.py")


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_has_the_generated_layout(package):
    problem = sdk_imports.layout_problem(_init(package))
    assert problem is None, (
        f"{_sdk(package)}: {package}/__init__.py has `{problem}`, which sdk_imports.layout_problem does not "
        "know: the package is imported whole again (slower plans); teach sdk_imports the new layout"
    )


def test_every_stack_plans_with_its_sdk_packages_still_lazy():
    for stack in STACKS:  # planned here, in this process (harness.plan_stack may load another worker's plan)
        make_plan(load(ROOT, stack, []))
    loaded = {name: module for name, module in sys.modules.items() if name in PACKAGES}
    assert loaded, "the plans imported none of the SDK packages this test knows"
    whole = sorted(f"{_sdk(name)}: {name}" for name, module in loaded.items() if not sdk_imports.is_lazy(module))
    assert not whole, f"these packages had to run their real __init__ (a name their submodules' __all__ do not list): {whole}"


EAGER = r"""
import importlib, json, sys
from pathlib import Path
from rlinf_eks.offline.engine import sdk_imports
wrong = []
for package in sys.argv[1:]:
    module = importlib.import_module(package)
    assert not sdk_imports.is_lazy(module)
    index = sdk_imports._Index(Path(module.__file__).parent, Path(module.__file__))
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, type(sys)):
            continue
        source = index.source_of(name)
        if source is None:
            continue  # the lazy package runs the real __init__ for it: the same value
        lazy = getattr(importlib.import_module(f"{package}.{source}"), name)
        if lazy is not value:
            wrong.append(f"{package}.{name}: the real package has {value!r}, the lazy one {package}.{source}.{name}")
print(json.dumps(wrong))
"""


def test_every_name_the_lazy_packages_resolve_is_the_real_packages_own():
    # in a fresh process with the SDKs imported as they are (RLINF_EKS_EAGER_SDK=1)
    env = {"RLINF_EKS_EAGER_SDK": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", EAGER, *PACKAGES], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    wrong = json.loads(out.stdout.strip().splitlines()[-1])
    assert not wrong, f"names the lazy packages resolve differently: {wrong[:20]}"
