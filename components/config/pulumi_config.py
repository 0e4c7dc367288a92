"""Reading Pulumi config: the project's keys ("rlinf-eks:gpuNodes", "aws:region") into the
mapping the settings validate, the secret keys, and keys under a wrong namespace."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Callable, Mapping, Optional

from .errors import did_you_mean
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


def stack_data(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Split a whole stack config ("namespace:key" -> value; objects as JSON text, as the engine
    passes them, or already structured) into the mapping StackSettings validates and the problems
    of its keys.

    Keys of other namespaces (aws:profile, kubernetes:context, ...) belong to providers and are
    left alone; an unknown key of this project's namespace is a typo and is a problem, and so is a
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
        f"{key}: unknown key{did_you_mean(key[len(prefix):], [*TOP_LEVEL_KEYS, *SECRET_KEYS])}; valid keys: {valid}"
        for key in sorted(unknown)
    ]
    problems += [problem for key in sorted(values) if (problem := foreign_project_key(key))]
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
