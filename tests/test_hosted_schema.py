"""The component package's public surface: the schema the Pulumi SDK's analyzer infers from the
hosted components, compared with provider/schema.json (every change is a reviewed diff; re-record
with RLINF_EKS_UPDATE_SNAPSHOTS=1) and validated against Pulumi's package metaschema; and the
generated args, which must follow the pydantic settings field for field."""

from __future__ import annotations

import json
import os
import re
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from rlinf_eks import __version__
from rlinf_eks.hosted import args as hosted_args
from rlinf_eks.hosted import generate
from rlinf_eks.hosted.provider import COMPONENTS, NAME, schema
from tests.harness import ROOT, SHARED, pending_shared

SNAPSHOT = ROOT / "provider" / "schema.json"
METASCHEMA = SHARED / "schemas" / "pulumi" / "pulumi.json"
"""Pulumi's package metaschema (github.com/pulumi/pulumi, pkg/codegen/schema/pulumi.json): shared data."""

TOKEN = re.compile(r"^[a-zA-Z][-a-zA-Z0-9_]*:([^0-9][a-zA-Z0-9._/-]*)?:[^0-9][a-zA-Z0-9._/-]*$")  # the metaschema's $defs/token


@pytest.fixture(scope="module")
def package() -> dict[str, Any]:
    return schema()


def test_the_schema_is_the_checked_in_one(package):
    text = json.dumps(package, indent=2, sort_keys=True) + "\n"
    if os.environ.get("RLINF_EKS_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(text)
    assert SNAPSHOT.exists(), "no provider/schema.json: RLINF_EKS_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_hosted_schema.py"
    assert SNAPSHOT.read_text() == text, "the package schema changed: re-record with RLINF_EKS_UPDATE_SNAPSHOTS=1 and review git diff provider/schema.json"


def metaschema_validator(metaschema: dict[str, Any]) -> Any:
    """Draft 2020-12 with the metaschema's patterns read as ECMA 262 writes them (``(?<major>...)``
    named groups, which Python's re cannot read; the regex module can)."""
    import jsonschema
    import regex

    def pattern(validator: Any, expression: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not regex.search(expression, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {expression!r}")

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern})(metaschema)


def test_the_schema_validates_against_pulumis_metaschema(package):
    # Not (yet) among the shared data that CI provides (checked by hand against pulumi/pulumi
    # 1b5949891b3c, 2026-08-21: no errors); the test below checks what it can meanwhile
    pending_shared(METASCHEMA, "Pulumi's package metaschema", "pkg/codegen/schema/pulumi.json of github.com/pulumi/pulumi")
    metaschema = json.loads(METASCHEMA.read_text())
    validator = metaschema_validator(metaschema)
    assert not [e.message for e in validator.iter_errors(package)]
    # the validation bites: a property of an unknown primitive type is refused
    broken = json.loads(json.dumps(package))
    broken["resources"]["rlinf-eks:index:EfaGpuNodeGroup"]["inputProperties"]["clusterName"]["type"] = "str"
    assert list(validator.iter_errors(broken))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_what_the_metaschema_would_check_and_more_without_it(package):
    """Checked with or without the shared metaschema: name, version, tokens, references, descriptions."""
    assert package["name"] == NAME == "rlinf-eks"
    assert package["version"] == __version__
    assert package.get("dependencies") in (None, []), "a hosted output or input refers to another package's resource"
    assert sorted(package["resources"]) == sorted(f"rlinf-eks:index:{c.__name__}" for c in COMPONENTS)
    assert all(TOKEN.match(token) for token in [*package["resources"], *package["types"]])
    local = {ref.removeprefix("#/types/") for ref in _refs(package) if ref.startswith("#/types/")}
    assert local == set(package["types"]), "every type is used and every reference resolves"
    assert not [ref for ref in _refs(package) if not ref.startswith("#/types/") and ref != "pulumi.json#/Any"]
    for token, resource in package["resources"].items():
        assert resource["isComponent"] is True and resource["description"]
        for where in ("inputProperties", "properties"):
            undescribed = [p for p, spec in resource[where].items() if not spec.get("description")]
            assert not undescribed, (token, where, undescribed)


def test_the_python_components_register_the_hosted_type_tokens():
    """A hosted component is the Python one (subclass): the same token, so a program in another
    language and a Python program plan the same URNs."""
    for component in COMPONENTS:
        source = (ROOT / "components").rglob("*.py")
        token = f'"rlinf-eks:index:{component.__name__}"'
        assert any(token in path.read_text() for path in source), token


# --- one source of truth: the args follow the pydantic settings ---------------------------------------


def test_the_generated_args_are_current():
    stale = generate.stale_files()
    assert not stale, f"stale in components/hosted/args/: {stale}: run python -m rlinf_eks.hosted.generate"


def _settings_models() -> list[type[BaseModel]]:
    return generate._models(generate.SPECS)


@pytest.mark.parametrize("model", _settings_models(), ids=lambda m: m.__name__)
def test_every_settings_field_has_its_typeddict_field_with_its_description(model, package):
    """Field for field, by the wire name another language writes: a pydantic field without its
    counterpart, with another name or with another description fails here, naming it."""
    typed = getattr(hosted_args, model.__name__)
    assert set(typed.__annotations__) == set(model.model_fields), f"{model.__name__}: fields differ"
    assert typed.__optional_keys__ == frozenset(model.model_fields), "every field NotRequired: the defaults are pydantic's"
    spec = package["types"][f"rlinf-eks:index:{model.__name__}"]
    wire = {field.alias or name: field.description for name, field in model.model_fields.items()}
    assert set(spec["properties"]) == set(wire), f"{model.__name__}: the schema's names are not the stack file's"
    for key, description in wire.items():
        assert spec["properties"][key].get("description") == description, f"{model.__name__}.{key}"
    assert spec.get("required", []) == []


@pytest.mark.parametrize("spec", generate.SPECS, ids=lambda s: s.component)
def test_every_section_of_a_component_is_an_input_with_its_description(spec, package):
    inputs = package["resources"][f"rlinf-eks:index:{spec.component}"]["inputProperties"]
    for name in spec.section_fields():
        field = spec.model.model_fields[name]
        assert inputs[field.alias or name].get("description") == field.description, (spec.component, name)


def test_the_whole_stack_takes_every_section_of_a_stack_file(package):
    """A section added to StackSettings (an observability backend, ...) is an input of RlinfStack
    once the args are regenerated; this names any that is not."""
    from rlinf_eks.config import StackSettings

    inputs = package["resources"]["rlinf-eks:index:RlinfStack"]["inputProperties"]
    missing = [field.alias or name for name, field in StackSettings.model_fields.items() if (field.alias or name) not in inputs]
    assert not missing, f"StackSettings sections RlinfStack does not take: {missing} (python -m rlinf_eks.hosted.generate)"


def test_optional_fields_whose_none_is_not_their_default_are_listed_in_the_components_guide():
    """The wire cannot carry an explicit null (the provider drops it), so a field whose None means
    something other than its default (progressTimeoutSeconds: null turns the watchdog off) cannot
    be set to None from another language. docs/components.md names each."""
    from tests import docs_text

    section = docs_text.section(docs_text.DOCS / "components.md", "### From TypeScript, YAML and other languages")
    for model in _settings_models():
        for name, field in model.model_fields.items():
            default = field.get_default(call_default_factory=True)
            if type(None) in get_args(field.annotation) and default is not None:
                assert re.search(rf"`([\w.]+\.)?{field.alias or name}`", section), f"{model.__name__}.{field.alias}: null differs from its default"
