"""renovate.json keeps every pin of components/pins.yaml current, offline.

Two checks stand in for Renovate's own run: the file against Renovate's JSON schema (Renovate
publishes it at docs.renovatebot.com/renovate-schema.json; check-jsonschema, a test dependency,
vendors that file as ``vendor.renovate``, its title naming the Renovate release it describes), and
each custom manager's matchStrings run as Renovate runs them (every match of every string, with
the global flag) over the files its managerFilePatterns name: the manifest's manager finds each
watched pin exactly once with its version, datasource and package, and the managers of the
literal copies (a recipe's commit, a Dockerfile ARG) find values equal to the manifest's.
Renovate compiles the strings with RE2 (JavaScript's RegExp where RE2 is missing), so they keep to
what both read: named groups, classes, alternation, no lookaround, backreference or inline flag.
``renovate-config-validator`` (npm's renovate package) is the full check where Node is installed
(docs/testing-and-contributing.md, Pins and Renovate).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import regex

from rlinf_eks import pins
from tests.harness import ROOT

CONFIG = json.loads((ROOT / "renovate.json").read_text())
MANAGERS: list[dict[str, Any]] = CONFIG["customManagers"]
# constructs RE2 or JavaScript's RegExp (unicode mode) does not read
NOT_PORTABLE = ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?i", "(?m", "(?s", "(?P", "\\1", "\\2", "\\Z", "\\A", "*+", "++", "?+")
SEARCHED = ("components", "images", "tests", "docs", "stacks", "examples")
"""Where pins may live (the root's own files are few: pyproject.toml is pep621's)."""
FIELDS = ("currentValue", "currentDigest", "datasource", "depName", "packageName", "registryUrl", "versioning")


def renovate_schema() -> dict[str, Any]:
    return json.loads((resources.files("check_jsonschema.builtin_schemas.vendor") / "renovate.json").read_text())


def manager_files(manager: dict[str, Any]) -> list[Path]:
    """The repository's files a manager reads: its managerFilePatterns are /regex/ (RE2) patterns."""
    patterns = [regex.compile(p.strip("/")) for p in manager["managerFilePatterns"]]
    tracked = [p.relative_to(ROOT).as_posix() for top in SEARCHED for p in (ROOT / top).rglob("*") if p.is_file()]
    return sorted(ROOT / path for path in tracked if any(p.search(path) for p in patterns))


def extract(manager: dict[str, Any], text: str) -> Iterator[dict[str, str]]:
    """What Renovate's regex manager extracts from ``text``: per match, the named groups, with the
    manager's templates filling the fields its groups do not."""
    for pattern in manager["matchStrings"]:
        for match in regex.finditer(pattern, text):
            found = {k: v for k, v in match.groupdict().items() if v is not None}
            for field in FIELDS:
                template = manager.get(f"{field}Template")
                if template is not None and field not in found:
                    found[field] = template
            yield found


def test_the_config_is_valid_by_renovates_schema():
    schema = renovate_schema()
    assert schema["title"].startswith("JSON schema for Renovate "), schema["title"]
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(CONFIG), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def unknown_keys(config: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Keys the schema does not name (it allows additional properties, and Renovate's validator
    refuses them): at the top, in a custom manager and in a package rule."""
    definitions = schema["definitions"]

    def properties(name: str) -> set[str]:
        return {key for part in definitions[name]["items"]["allOf"] for key in part.get("properties", {})}

    top = set(schema["properties"]) | {"$schema"}
    found = [key for key in config if key not in top]
    found += [f"customManagers.{k}" for m in config.get("customManagers", []) for k in m if k not in properties("customManagers")]
    found += [f"packageRules.{k}" for r in config.get("packageRules", []) for k in r if k not in properties("packageRules")]
    return found


def test_every_key_is_one_renovate_knows():
    assert unknown_keys(CONFIG, renovate_schema()) == []


def test_the_schema_checks_see_a_wrong_key_and_a_wrong_value():
    schema = renovate_schema()
    misspelt = {**CONFIG, "customManagers": [{**MANAGERS[0], "matchString": MANAGERS[0]["matchStrings"]}]}
    assert unknown_keys(misspelt, schema) == ["customManagers.matchString"]
    wrong = {**CONFIG, "customManagers": [{**MANAGERS[0], "customType": "regexp"}]}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(wrong))


@pytest.mark.parametrize("manager", MANAGERS, ids=[m["description"][:40] for m in MANAGERS])
def test_each_match_string_is_portable_and_finds_something(manager):
    for pattern in manager["matchStrings"]:
        assert not [c for c in NOT_PORTABLE if c in pattern], f"{pattern!r} uses what RE2 or JavaScript does not read"
        regex.compile(pattern)
    files = manager_files(manager)
    assert files, f"{manager['managerFilePatterns']} names no file of the repository"
    assert any(list(extract(manager, path.read_text())) for path in files), "no file it names holds its pin"


def test_the_manifest_manager_finds_every_watched_pin_once_with_its_value():
    manager = MANAGERS[0]
    assert manager_files(manager) == [pins.MANIFEST]
    found = list(extract(manager, pins.MANIFEST.read_text()))
    names = [dep["depType"] for dep in found]
    assert sorted(names) == sorted(set(names)), "a pin is found twice"
    watched = {name: pin for name, pin in pins.pins().items() if pin.watch is None}
    assert set(names) == set(watched), f"missed {sorted(set(watched) - set(names))}; unexpected {sorted(set(names) - set(watched))}"
    for dep in found:
        pin = watched[dep["depType"]]
        expected = {"currentValue": pin.version, "currentDigest": pin.digest, "datasource": pin.datasource, "depName": pin.dep_name,
                    "packageName": pin.package_name, "registryUrl": pin.registry_url, "versioning": pin.versioning}  # fmt: skip
        assert {k: dep.get(k) for k in expected} == expected, pin.name


def test_a_manual_pin_says_why():
    manual = [pin for pin in pins.pins().values() if pin.watch is not None]
    assert manual and all(pin.watch == "manual" and "no version index" in pin.source for pin in manual)


def test_the_literal_copies_managers_find_the_manifests_values():
    by_package = {pin.dep_name: pin for pin in pins.pins().values() if pin.dep_name}
    seen = set()
    for manager in MANAGERS[1:]:
        for path in manager_files(manager):
            for dep in extract(manager, path.read_text()):
                pin = by_package[dep["depName"]]
                assert dep["datasource"] == pin.datasource, (path, dep)
                assert dep.get("currentDigest") == pin.digest and dep["currentValue"] == pin.version, (path, dep, pin)
                seen.add(pin.name)
    assert {"ray", "rlinf", "rlinf-commit", "simplevla-rl", "openvla-oft", "transformers-openvla-oft", "libero"} <= seen


def test_the_python_pins_are_the_ones_pyproject_updates():
    rules = [r for r in CONFIG["packageRules"] if r.get("matchManagers") == ["pep621"] and r.get("enabled")]
    assert [set(r["matchPackageNames"]) for r in rules] == [{p.dep_name for p in pins.pins().values() if p.datasource == "pypi"}]


def test_a_regex_versioning_reads_its_current_value():
    for pin in pins.pins().values():
        if pin.versioning and pin.versioning.startswith("regex:"):
            assert regex.fullmatch(pin.versioning.removeprefix("regex:"), pin.version), pin.name


def test_an_eks_add_on_is_looked_up_for_the_pinned_kubernetes_version():
    addons = [pin for pin in pins.pins().values() if pin.datasource == "aws-eks-addon"]
    assert len(addons) == 2
    for pin in addons:
        assert json.loads(pin.package_name or "{}") == {"addonName": pin.dep_name, "kubernetesVersion": pins.version("kubernetes")}
