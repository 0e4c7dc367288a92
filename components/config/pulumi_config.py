"""Reading Pulumi config: the project's keys ("rlinf-eks:gpuNodes", "aws:region") into the
mapping the settings validate, the secret keys, and keys under a wrong namespace."""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from .errors import key_hint
from .stack import PROJECT, StackSettings

TOP_LEVEL_KEYS: dict[str, str] = {
    (field.alias or name): name for name, field in StackSettings.model_fields.items() if name != "region"
}


SECRET_KEY_DESCRIPTIONS: dict[str, str] = {
    "hfToken": "Hugging Face token, for a gated or private repository (workload.model.source hf://...): reaches the "
    "pods as HF_TOKEN through a Kubernetes Secret. Set with `pulumi config set --secret`.",
    "wandbApiKey": "Weights & Biases API key: reaches the pods as WANDB_API_KEY through a Kubernetes Secret and turns "
    "on the trainer's wandb logger. Set with `pulumi config set --secret`.",
    "kubeconfig": "With cluster.existing: the kubeconfig of that cluster, for the Kubernetes provider. Set with "
    "`pulumi config set --secret`.",
}
"""Secret keys of the project namespace and their descriptions (the config reference lists them)."""
SECRET_KEYS = tuple(SECRET_KEY_DESCRIPTIONS)
"""Secret keys of the project namespace: read as secrets by program.Secrets, not by StackSettings."""


# Namespaces of the providers this program uses: their keys (kubernetes:cluster, aws:profile) are
# theirs even where a name matches one of this project's keys.
PROVIDER_NAMESPACES = frozenset({"aws", "eks", "kubernetes", "pulumi"})


def foreign_project_key(key: str, project: str = PROJECT) -> Optional[str]:
    """Why ``key`` looks like this project's key under a wrong namespace (``rlinf:gpuNodes``, a
    misspelt project), which the program would silently never read; None for other keys."""
    namespace, sep, name = key.partition(":")
    if not sep or namespace == project or namespace in PROVIDER_NAMESPACES:
        return None
    top = re.split(r"[.\[]", name, maxsplit=1)[0]
    similar = difflib.SequenceMatcher(None, namespace, project).ratio() >= 0.75
    if top in TOP_LEVEL_KEYS or top in SECRET_KEYS or similar:
        return (
            f"{key}: namespace {namespace!r} is not this project's ({project}), so the program would never read it; "
            f"use {project}:{name} (or leave the namespace out)"
        )
    return None


@functools.lru_cache(maxsize=1)
def aws_config_keys() -> tuple[str, ...]:
    """pulumi-aws's configuration keys (``aws:<key>``), read from the installed provider package's
    Config (``pulumi_aws/config/vars.py``: one property per key, each reading
    ``__config__.get...('<key>')``), without importing the package; () where it is not installed."""
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or not spec.submodule_search_locations:
        return ()
    path = Path(list(spec.submodule_search_locations)[0]) / "config" / "vars.py"
    if not path.is_file():
        return ()
    return tuple(sorted(set(re.findall(r"__config__\.get\w*\('(\w+)'", path.read_text()))))


def aws_key_problem(key: str) -> Optional[str]:
    """Why ``aws:<name>`` is no key of the AWS provider (``aws:regoin``), which the provider would
    silently never read; None for its keys, other namespaces, or without pulumi-aws installed."""
    namespace, sep, name = key.partition(":")
    keys = aws_config_keys()
    if namespace != "aws" or not sep or not keys or name in keys:
        return None
    return f"{key}: not a configuration key of the AWS provider (pulumi-aws){key_hint(name, keys)}; its keys: {', '.join(keys)}"


def stack_data(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Split a whole stack config ("namespace:key" -> value; objects as JSON text, as the engine
    passes them, or already structured) into the mapping StackSettings validates and the problems
    of its keys.

    Keys of other namespaces (aws:profile, kubernetes:context, ...) belong to providers and are
    left alone, except a key under ``aws:`` that is none of pulumi-aws's (aws_key_problem: aws:regoin);
    an unknown key of this project's namespace is a typo and is a problem, and so is a
    project key under a wrong namespace (foreign_project_key). rlinf_eks.loading.settings_from_config
    validates the mapping and reports these problems first.
    """
    data: dict[str, Any] = {}
    unknown: list[str] = []
    prefix = f"{PROJECT}:"
    for key, value in values.items():
        if key == "aws:region":
            data["region"] = value
        elif key.startswith(prefix):
            name = key[len(prefix) :]
            if name in TOP_LEVEL_KEYS:
                try:
                    data[name] = json.loads(value) if isinstance(value, str) else value
                except json.JSONDecodeError:
                    data[name] = value  # a plain string (availabilityZone)
            elif name not in SECRET_KEYS:
                unknown.append(key)
    valid = ", ".join(sorted([*TOP_LEVEL_KEYS, *SECRET_KEYS]))
    problems = [
        f"{key}: unknown key{key_hint(key[len(prefix):], [*TOP_LEVEL_KEYS, *SECRET_KEYS])}; valid keys: {valid}"
        for key in sorted(unknown)
    ]
    problems += [problem for key in sorted(values) if (problem := foreign_project_key(key))]
    problems += [problem for key in sorted(values) if (problem := aws_key_problem(key))]
    return data, problems


def plain_secret_warnings(values: Mapping[str, Any], is_secret: Callable[[str], bool], project: str = PROJECT) -> list[str]:
    """A warning per secret key (SECRET_KEYS) given as a plain value: `pulumi config set` without
    --secret (or the stack file, or ``--set``) keeps it in clear text in the stack file. The value
    itself is never named."""
    return [
        f"{key} is a plain value: it lands in clear text in the stack file; set it as a secret: "
        f"pulumi config set --secret {key} <value>"
        for name in SECRET_KEYS
        if (key := f"{project}:{name}") in values and not is_secret(key)
    ]


def running_secret_keys() -> set[str]:
    """The running program's secret config keys: `pulumi up` passes them in the environment
    (PULUMI_CONFIG_SECRET_KEYS), the mocks and the automation API with the config."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.get_config_secret_keys_env())
    return keys | {key for name in SECRET_KEYS if runtime_config.is_config_secret(key := f"{PROJECT}:{name}")}


def running_stack_config() -> tuple[dict[str, Any], str]:
    """The running Pulumi program's whole config ("namespace:key" -> value) and its stack name."""
    from pulumi.runtime import config as runtime_config

    import pulumi

    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}, pulumi.get_stack()


def _model_of(annotation: Any) -> Any:
    """The settings model an annotation holds (Optional[M], Annotated[M, ...]), else None."""
    from pydantic import BaseModel

    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _item_model(annotation: Any) -> Any:
    """The model of a list's items (list[M], Optional[list[M]]), else None."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if getattr(candidate, "__origin__", None) in (list, tuple):
            return next((m for m in map(_model_of, getattr(candidate, "__args__", ())) if m is not None), None)
    return None


def _container_arg(annotation: Any, kind: type) -> Any:
    """What a ``dict[str, V]`` (kind dict) or ``list[V]`` (kind list) holds, V, in an Optional too; else None."""
    import typing

    for candidate in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(candidate) is kind and typing.get_args(candidate):
            return typing.get_args(candidate)[-1]
    return None


def _holds_keys(annotation: Any) -> bool:
    """Whether a setting of this annotation can hold keys or items (a mapping, a list, a model or
    Any, alone or in a union); False for a plain value (int, str, a Literal, an enum)."""
    import typing

    if annotation is Any or _model_of(annotation) is not None:
        return True
    origin = typing.get_origin(annotation)
    if origin in (dict, list, tuple, set, frozenset) or (isinstance(origin, type) and issubclass(origin, (typing.Mapping, typing.Sequence)) and origin is not str):
        return True
    if origin is typing.Literal:
        return False
    return origin is not None and any(_holds_keys(arg) for arg in typing.get_args(annotation) if not isinstance(arg, (str, int, float)))


def unknown_key_path(segments: list[Any]) -> Optional[str]:
    """Why a key path of this project's namespace (``["gpuNodes", "nodecount"]``) names no setting,
    as a problem line with the nearest valid key; None when it names one (or a key inside a free
    mapping such as ``workload.env`` or ``tags``, where any key is valid)."""
    from .errors import key_path

    top = segments[0]
    if top in SECRET_KEYS:
        return None
    if top not in TOP_LEVEL_KEYS:
        valid = sorted([*TOP_LEVEL_KEYS, *SECRET_KEYS])
        return f"{key_path(top)}: unknown key{key_hint(str(top), valid)}; valid keys: {', '.join(valid)}"
    annotation = StackSettings.model_fields[TOP_LEVEL_KEYS[top]].annotation
    for depth, segment in enumerate(segments[1:], start=1):
        model = _model_of(annotation)
        if isinstance(segment, int):
            item = _item_model(annotation) or _container_arg(annotation, list)
            if item is None:
                return None
            annotation = item
            continue
        if model is None:
            value = _container_arg(annotation, dict)
            if value is not None:  # a free key of a mapping: what it holds decides the next segment
                annotation = value
                continue
            if _holds_keys(annotation):
                return None  # a mapping of free keys or a list of values
            # a plain value has no keys: `--unset gpuNodes.nodeCount.x` would silently change nothing
            held = key_path(*segments[:depth])
            return (f"{key_path(*segments[: depth + 1])}: {held} is a plain value, not an object: it has no key "
                    f"{segment!r}; unset {held} itself")  # fmt: skip
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        if segment not in fields:
            names = list(fields)
            return (f"{key_path(*segments[: depth + 1])}: unknown key{key_hint(str(segment), names)}; "
                    f"valid keys here: {', '.join(names)}")  # fmt: skip
        annotation = fields[segment].annotation
    return None
