"""Config fields are documented once (their docstrings), and the generated reference and JSON
schema are current and describe the real stack files."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from rlinf_eks import config, config_reference, loading
from tests.harness import ALL_STACKS, ROOT

STACK_FILES = [ROOT / "stacks" / f"Pulumi.{stack}.yaml" for stack in ALL_STACKS]


def _config_models() -> list[type[BaseModel]]:
    return [
        value
        for value in vars(config).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__.startswith(config.__name__ + ".") and value is not config.SettingsModel
    ]


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(config_reference.stack_file_schema())


def test_every_field_of_every_config_model_has_a_description():
    models = _config_models()
    assert len(models) >= 20  # the walk found the model tree, not an empty module
    fields = [(model.__name__, name, field) for model in models for name, field in model.model_fields.items()]
    undocumented = [f"{model}.{name}" for model, name, field in fields if not (field.description or "").strip()]
    assert len(fields) > 100
    assert not undocumented, f"fields without a docstring (the line after the field): {undocumented}"


def test_the_docstring_is_the_description_in_the_json_schema():
    # GpuNodeSettings.node_count is documented only by its attribute docstring
    node = config.StackSettings.model_json_schema(by_alias=True)["$defs"]["GpuNodeSettings"]["properties"]["nodeCount"]
    assert node["description"].startswith("Nodes the training run uses")


@pytest.mark.parametrize("path", [config_reference.REFERENCE_PATH, config_reference.SCHEMA_PATH], ids=str)
def test_the_checked_in_file_is_current(path):
    expected = config_reference.generated()[path]
    actual = (ROOT / path).read_text() if (ROOT / path).is_file() else None
    assert actual == expected, f"{path} is stale: run `{config_reference.COMMAND}` and commit it"


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    (tmp_path / "Pulumi.yaml").write_text("name: rlinf-eks\n")
    assert config_reference.main(["--root", str(tmp_path)]) == 0
    assert config_reference.main(["--root", str(tmp_path), "--check"]) == 0
    (tmp_path / config_reference.SCHEMA_PATH).write_text("{}\n")
    assert config_reference.main(["--root", str(tmp_path), "--check"]) == 1
    assert f"{config_reference.SCHEMA_PATH}: stale" in capsys.readouterr().err


def test_the_reference_lists_every_key_path_with_its_description():
    text = config_reference.reference_markdown()

    def paths(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
        out = []
        for name, field in model.model_fields.items():
            key = f"{prefix}.{field.alias or name}" if prefix else field.alias or name
            out.append((key, field.description or ""))
            child = config_reference._model_of(field.annotation)
            if child is not None:
                out += paths(child, key)
        return out

    rows = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}
    for key, description in paths(config.StackSettings):
        if "." not in key:
            key = "aws:region" if key == "region" else f"{config.PROJECT}:{key}"
        else:
            assert config_reference._cell(description) in rows[key], key
        assert key in rows, key
    for secret in config.SECRET_KEYS:
        assert f"{config.PROJECT}:{secret}" in rows
    assert "| `gpuNodes.nodeCount` | integer (>= 1, <= 512) | `1` |" in text
    assert "| `workload.image` | string (non-empty) | **required** |" in text


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(json.loads((ROOT / config_reference.SCHEMA_PATH).read_text()))


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_file_validates_against_the_schema(path):
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(yaml.safe_load(path.read_text()))]
    assert not errors


def test_the_stack_files_were_found():
    assert len(STACK_FILES) >= 6


def _stack(**config_block):
    base = {"aws:region": "us-east-1", "rlinf-eks:cluster": {"deployFromVpc": True}, "rlinf-eks:workload": {"image": "example/rlinf:v1"}}
    return {"config": {**base, **config_block}}


def test_the_base_stack_of_these_tests_is_valid():
    loading.settings_from_config(_stack()["config"])
    assert not list(_validator().iter_errors(_stack()))


@pytest.mark.parametrize(
    "block, where",
    [
        ({"rlinf-eks:gpuNode": {"nodeCount": 2}}, "config"),  # misspelt top-level key of this project
        ({"rlinf-eks:gpuNodes": {"nodeCount": True}}, "config.rlinf-eks:gpuNodes.nodeCount"),  # strict integer
        ({"rlinf-eks:gpuNodes": {"nodeCount": 0}}, "config.rlinf-eks:gpuNodes.nodeCount"),
        ({"rlinf-eks:gpuNodes": {"nodecount": 2}}, "config.rlinf-eks:gpuNodes"),  # unknown nested key
        ({"rlinf-eks:workload": {"image": ""}}, "config.rlinf-eks:workload.image"),
        ({"rlinf-eks:workload": {"image": "x", "rollout": {"backend": "trt"}}}, "config.rlinf-eks:workload.rollout.backend"),
        ({"aws:region": "us-east-1a"}, "config.aws:region"),
    ],
)
def test_the_schema_rejects_what_the_model_rejects(block, where):
    data = _stack(**block)
    with pytest.raises(config.ConfigError):
        loading.settings_from_config(data["config"])
    errors = list(_validator().iter_errors(data))
    assert errors, block
    assert where in {".".join(map(str, e.absolute_path)) for e in errors}


def test_a_secret_is_a_string_or_pulumis_secure_form():
    errors = list(_validator().iter_errors(_stack(**{"rlinf-eks:hfToken": {"plain": "x"}})))
    assert {".".join(map(str, e.absolute_path)) for e in errors} == {"config.rlinf-eks:hfToken"}


def test_the_schema_requires_the_workload():
    errors = list(_validator().iter_errors({"config": {"aws:region": "us-east-1"}}))
    assert [e.message for e in errors] == ["'rlinf-eks:workload' is a required property"]


def test_the_schema_accepts_other_namespaces_and_secrets():
    data = _stack(
        **{
            "aws:profile": "dev",
            "kubernetes:context": "ctx",
            "rlinf-eks:hfToken": {"secure": "v1:abc"},
            "rlinf-eks:kubeconfig": "plain text",
            "rlinf-eks:gpuNodes": {"instanceType": "p5en.48xlarge", "capacityBlock": None},
        }
    )
    assert not list(_validator().iter_errors(data))
    data = {**data, "encryptionsalt": "v1:salt", "secretsprovider": "awskms://alias/x"}
    assert not list(_validator().iter_errors(data))
    assert list(_validator().iter_errors({**data, "confg": {}}))  # a misspelt stack-file key
