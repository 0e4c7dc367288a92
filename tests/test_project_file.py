"""Pulumi.yaml is a project file the real CLI loads: the project JSON schema
(pulumi/pulumi sdk/go/common/workspace/project.json) plus the rules the CLI adds when it
unmarshals the file (sdk/go/common/workspace/project.go, tested in project_test.go)."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from tests.harness import ALL_STACKS, ROOT

# The parts of project.json this project uses, transcribed (name, runtime, config, stackConfigDir).
_SIMPLE_TYPE = {"enum": ["string", "integer", "boolean", "array"]}
_ITEMS = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"oneOf": [_SIMPLE_TYPE, {"$ref": "#/$defs/items"}]}, "items": {"$ref": "#/$defs/items"}},
}
PROJECT_SCHEMA = {
    "$defs": {"items": _ITEMS},
    "type": "object",
    "required": ["name", "runtime"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": ["string", "null"]},
        "runtime": {
            "oneOf": [
                {"type": "string", "minLength": 1},
                {
                    "type": "object",
                    "properties": {"name": {"type": "string", "minLength": 1}, "options": {"type": "object"}},
                    "additionalProperties": False,
                },
            ]
        },
        "stackConfigDir": {"type": ["string", "null"]},
        "config": {
            "type": ["object", "null"],
            "additionalProperties": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "integer"},
                    {"type": "boolean"},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "type": _SIMPLE_TYPE,
                            "items": {"$ref": "#/$defs/items"},
                            "description": {"type": "string"},
                            "secret": {"type": "boolean"},
                            "default": {},
                            "value": {},
                        },
                    },
                ]
            },
        },
    },
}

_PY_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list}


def project_file_problems(project: dict) -> list[str]:
    """What `pulumi` would refuse when loading this project file (empty when it loads)."""
    try:
        jsonschema.validate(project, PROJECT_SCHEMA)
    except jsonschema.ValidationError as err:
        return [f"schema: {'/'.join(map(str, err.absolute_path))}: {err.message}"]
    problems = []
    name = project["name"]
    for key, decl in (project.get("config") or {}).items():
        if not isinstance(decl, dict):
            continue
        namespace = key.split(":", 1)[0] if ":" in key else name
        if namespace != name:
            # project.go: "Configuration key 'aws:region' is not namespaced by the project and
            # should not define a type / a default value" (use value).
            problems += [f"{key}: not namespaced by the project and should not define {a}" for a in ("type", "default", "items") if a in decl]
        elif "value" in decl and "default" in decl:
            problems.append(f"project config '{key}' cannot have both a 'default' and 'value' attribute")
        if decl.get("type") == "array" and "items" not in decl:
            problems.append(f"{key}: an array type needs items")
        expected = _PY_TYPES.get(decl.get("type", ""))
        if expected and "default" in decl and not isinstance(decl["default"], expected):
            problems.append(f"{key}: default {decl['default']!r} is not of type {decl['type']}")
    return problems


def test_pulumi_yaml_loads_as_a_pulumi_project():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project_file_problems(project) == []
    assert project["name"] == "rlinf-eks" and (ROOT / project["stackConfigDir"]).is_dir()
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}


@pytest.mark.parametrize(
    "config, problem",
    [
        ({"aws:region": {"default": "us-east-1"}}, "should not define default"),
        ({"aws:region": {"type": "string", "value": "us-east-1"}}, "should not define type"),
        ({"availabilityZone": {"type": "string", "default": "", "value": "x"}}, "both a 'default' and 'value'"),
        ({"availabilityZone": {"type": "integer", "default": ""}}, "not of type integer"),
        ({"availabilityZone": {"type": "object"}}, "schema"),
        ({"labels": {"type": "array"}}, "needs items"),
    ],
)
def test_the_checker_rejects_what_pulumi_rejects(config, problem):
    project = {"name": "rlinf-eks", "runtime": "python", "config": config}
    assert any(problem in p for p in project_file_problems(project)), project_file_problems(project)


def test_every_stack_file_gives_declared_keys_their_declared_type():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    declared = {
        (k if ":" in k else f"{project['name']}:{k}"): d["type"]
        for k, d in (project.get("config") or {}).items()
        if isinstance(d, dict) and "type" in d
    }
    for stack_file in (ROOT / project["stackConfigDir"] / f"Pulumi.{stack}.yaml" for stack in ALL_STACKS):
        values = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
        for key, type_ in declared.items():
            if key in values:
                assert isinstance(values[key], _PY_TYPES[type_]), f"{stack_file.name}: {key} must be a {type_}"
