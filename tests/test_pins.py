"""components/pins.yaml is the one place a version lives: the library's code types none of them
again, and the copies that must stay literal (a Dockerfile ARG, pyproject.toml, a recipe's commit,
aws_names' botocore) equal the manifest's value."""

from __future__ import annotations

import ast
import re
import tomllib

import pytest

from rlinf_eks import aws_names, pins
from rlinf_eks.trainers import recipe as recipes
from tests.harness import ROOT

COMPONENTS = ROOT / "components"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def typed_again() -> list[str]:
    """Every string constant of the library's code that is a pin's version (or an image at it)."""
    wanted = {}
    for pin in pins.pins().values():
        if len(pin.version) >= 5 and re.search(r"\d", pin.version):  # "1.35" or "main" are not distinctive
            wanted[pin.version] = pin.name
        if pin.datasource == "docker":
            wanted[f"{pin.dep_name}:{pin.version}"] = pin.name
        if pin.digest:
            wanted[pin.digest] = pin.name
    found = []
    for path in sorted(COMPONENTS.rglob("*.py")):
        if "hosted/args" in path.as_posix():  # generated from the settings' docstrings
            continue
        tree = ast.parse(path.read_text())
        pieces = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
        for node in ast.walk(tree):  # an f-string's pieces are messages' examples ("such as 1.7.0"), not pins
            if id(node) not in pieces and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in wanted:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r} is pin {wanted[node.value]!r}")
    return found


def test_no_version_of_the_manifest_is_typed_again_in_the_library():
    assert typed_again() == []


def test_the_scan_sees_a_typed_version(tmp_path, monkeypatch):
    (tmp_path / "x.py").write_text(f'version = "{pins.version("karpenter")}"\n')
    monkeypatch.setitem(globals(), "COMPONENTS", tmp_path)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert typed_again() == [f"x.py:1: '{pins.version('karpenter')}' is pin 'karpenter'"]


def test_the_settings_defaults_are_the_pins():
    from rlinf_eks.config import StackSettings

    s = StackSettings.model_validate({"workload": {"image": "x"}})
    assert s.gpu_nodes.karpenter.version == pins.version("karpenter")
    assert s.gpu_nodes.karpenter.ami_alias == f"al2023@{pins.version('eks-ami-al2023')}"
    assert s.cluster.kubernetes_version == pins.version("kubernetes") and s.cluster.vpc_cni_version == pins.version("vpc-cni")
    assert s.workload.ray_version == pins.version("ray") and s.queue.version == pins.version("kueue")
    assert s.autoscaler.image_tag == pins.version("cluster-autoscaler-image")
    assert s.preflight.image.endswith(":" + pins.version("nccl-tests"))


def _dockerfile_args() -> dict[str, dict[str, str]]:
    args = {}
    for path in sorted((ROOT / "images").glob("*/Dockerfile")):
        args[path.parent.name] = dict(re.findall(r"^ARG (\w+)=(\S+)$", path.read_text(), re.M))
    return args


@pytest.mark.parametrize("image", sorted(_dockerfile_args()))
def test_the_dockerfiles_args_are_the_pins(image):
    args = _dockerfile_args()[image]
    expected = {"EFA_INSTALLER_VERSION": pins.version("efa-installer"), "RAY_VERSION": pins.version("ray")}
    if image.startswith("rlinf-"):
        expected["RLINF_REF"] = pins.version("rlinf")
        expected["BASE_IMAGE"] = f"rlinf/rlinf:{pins.version(f'{image}-base')}"
    else:
        expected |= {"SIMPLEVLA_RL_REF": pins.commit("simplevla-rl"), "OPENVLA_OFT_REF": pins.commit("openvla-oft"),
                     "TRANSFORMERS_OPENVLA_OFT_REF": pins.commit("transformers-openvla-oft"), "LIBERO_REF": pins.commit("libero"),
                     "BASE_IMAGE": f"verlai/verl:{pins.version('verl-base')}"}  # fmt: skip
    assert {k: args.get(k) for k in expected} == expected, f"images/{image}/Dockerfile: copy the value from components/pins.yaml"


def test_each_recipes_commit_is_its_pin():
    by_repo = {pin.dep_name: pin for pin in pins.pins().values() if pin.datasource == "git-refs"}
    for path in sorted((COMPONENTS / "trainers" / "recipes").glob("*.yaml")):
        name = path.stem
        r = recipes.recipe_of(name)
        assert r.commit == by_repo[r.repository].digest, f"components/trainers/recipes/{name}.yaml commit: copy it from components/pins.yaml"


def test_pyproject_declares_the_pinned_ranges():
    declared = PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"]["test"]
    for pin in pins.pins().values():
        if pin.datasource != "pypi" or pin.name == "ray":
            continue
        assert f"{pin.dep_name}{pin.version}" in declared, f"pyproject.toml: {pin.dep_name}{pin.version} (components/pins.yaml)"
    major, minor = map(int, pins.version("ray").split(".")[:2])
    assert f"ray>={pins.version('ray')},<{major}.{minor + 1}" in declared
    assert aws_names.BOTOCORE_VERSION == pins.version("botocore").removeprefix("==")
