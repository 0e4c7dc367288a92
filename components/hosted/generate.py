"""Write the package :mod:`rlinf_eks.hosted.args` from the pydantic settings: ``python -m rlinf_eks.hosted.generate``.

The hosted components' inputs must be ``TypedDict`` classes (what the Pulumi SDK's analyzer reads:
each field's type, and the string literal after it as its description). Nothing of them is typed
by hand: every settings model a component takes becomes a TypedDict of the model's name, field by
field (types translated, descriptions copied, every field ``NotRequired`` so that the defaults stay
in pydantic), and each component's ``<Name>Args`` holds its settings sections (fields of a settings
model, by their description there) and its references to other resources (:data:`SPECS`, the one
place their descriptions are written). ``tests/test_hosted_schema.py`` fails while the file is stale
(``--check`` here too), so a section added to ``StackSettings`` reaches ``RlinfStackArgs`` by running
this, and a field added to any model reaches every component that takes it.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import BaseModel

from ..config import StackSettings
from ..workload.standalone import TrainingSettings

TARGET = Path(__file__).with_name("args")
"""The generated package: rlinf_eks.hosted.args."""


@dataclass(frozen=True)
class Ref:
    """An input that is not a setting: another resource's id or name, a secret, a flag of the
    Python component. ``annotation`` is the TypedDict field's type as source text."""

    name: str
    annotation: str
    description: str


@dataclass(frozen=True)
class ArgsSpec:
    """One hosted component's args: ``sections`` (field names of ``model``, all of them when None)
    and ``refs``."""

    component: str
    model: type[BaseModel]
    sections: Optional[tuple[str, ...]]
    refs: tuple[Ref, ...]

    def section_fields(self) -> list[str]:
        return list(self.model.model_fields) if self.sections is None else list(self.sections)


_INPUT_STR = "pulumi.Input[str]"
_OPTIONAL_INPUT_STR = "NotRequired[pulumi.Input[str]]"
KUBECONFIG = Ref(
    "kubeconfig",
    _OPTIONAL_INPUT_STR,
    "The kubeconfig of the cluster (pass it as a secret): the Kubernetes objects are created through a provider made "
    "from it, registered beside this component. Without it, the Kubernetes provider of the resource options "
    "(`providers`) is used.",
)
SECRETS = (
    Ref("hf_token", _OPTIONAL_INPUT_STR, "The Hugging Face token (a secret), for a gated or private model: it reaches "
        "the pods as HF_TOKEN through a Kubernetes Secret."),
    Ref("wandb_api_key", _OPTIONAL_INPUT_STR, "The Weights & Biases API key (a secret): it reaches the pods as "
        "WANDB_API_KEY through a Kubernetes Secret and turns on the trainer's wandb logger."),
)  # fmt: skip

SPECS: tuple[ArgsSpec, ...] = (
    ArgsSpec(
        "EfaGpuNodeGroup",
        StackSettings,
        ("gpu_nodes",),
        (
            Ref("cluster_name", _INPUT_STR, "The name of the EKS cluster the nodes join."),
            Ref("cluster_security_group_id", _INPUT_STR, "The cluster security group: every network interface of the nodes carries it."),
            Ref("subnet_id", _INPUT_STR, "The one private subnet of every node, in the GPU Availability Zone (EFA and the placement group work within one AZ)."),
            Ref("autoscaled", "NotRequired[bool]", "The Cluster Autoscaler owns the desired size (Pulumi then ignores drift on it) and the scale-from-zero tags are set. Defaults to false."),
            Ref("tags", "NotRequired[dict[str, str]]", "AWS tags of every resource, checked by the rules of the stack's `tags`."),
        ),
    ),
    ArgsSpec("DevicePlugins", StackSettings, ("device_plugins", "gpu_nodes"), (KUBECONFIG,)),
    ArgsSpec("KubeRayOperator", StackSettings, ("kuberay",), (KUBECONFIG,)),
    ArgsSpec(
        "RlinfTraining",
        TrainingSettings,
        None,
        (
            Ref("service_account_name", _INPUT_STR, "The IRSA service account the training pods run as."),
            Ref("bucket_name", _INPUT_STR, "The checkpoint bucket."),
            Ref("shared_volume_claim", _OPTIONAL_INPUT_STR, "The shared filesystem's PersistentVolumeClaim (ReadWriteMany): "
                "given exactly when storage.sharedFilesystem.enabled is true."),
            Ref("shared_volume_exported", "NotRequired[bool]", "The claim's filesystem exports new files to the checkpoint bucket "
                "(an FSx data repository association): only then does the launcher remove older checkpoints from it "
                "(workload.checkpoints.keepLocal). Defaults to false: another claim keeps every checkpoint."),
            *SECRETS,
            KUBECONFIG,
        ),
    ),
    ArgsSpec(
        "RlinfStack",
        StackSettings,
        None,
        (
            *SECRETS,
            Ref("kubeconfig", _OPTIONAL_INPUT_STR, "With cluster.existing: the kubeconfig of that cluster (a secret), for the Kubernetes provider."),
        ),
    ),
)  # fmt: skip
"""The hosted components' args, in the order they are written."""


# --- translating a pydantic annotation into a TypedDict annotation ---------------------------------


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def type_source(annotation: Any) -> str:
    """The TypedDict form of a settings field's type: the wire's types (a date-time is text, a
    Literal its values' type), a nested model by its TypedDict's name."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return type_source(args[0])
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"no TypedDict form for the union {annotation!r}")
        return type_source(rest[0])
    if origin is Literal:
        kinds = {type(a) for a in args}
        if kinds == {str}:
            return "str"
        if kinds == {int}:
            return "int"
        raise TypeError(f"no TypedDict form for {annotation!r}")
    if origin is list:
        return f"list[{type_source(args[0])}]"
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"map keys must be strings: {annotation!r}")
        return f"dict[str, {type_source(args[1])}]"
    if annotation in (str, int, float, bool):
        return annotation.__name__
    if annotation is datetime:
        return "str"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    raise TypeError(f"no TypedDict form for {annotation!r}")


def _models(specs: tuple[ArgsSpec, ...]) -> list[type[BaseModel]]:
    """Every settings model the specs reach, each after the models its fields hold."""
    ordered: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in ordered:
            return
        for field in model.model_fields.values():
            for inner in _models_in(field.annotation):
                visit(inner)
        ordered.append(model)

    for spec in specs:
        for name in spec.section_fields():
            for model in _models_in(spec.model.model_fields[name].annotation):
                visit(model)
    names = [m.__name__ for m in ordered]
    clash = {n for n in names if names.count(n) > 1}
    if clash:
        raise TypeError(f"two settings models share a name (one package type each): {sorted(clash)}")
    return ordered


# --- writing the module ----------------------------------------------------------------------------


def _literal(text: str, indent: str) -> list[str]:
    """A description as the string expression after its field: exactly ``text`` (line breaks
    included), one double-quoted literal per line inside parentheses when it has several."""

    def quoted(part: str) -> str:
        return '"' + part.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    lines = text.split("\n")
    if len(lines) == 1:
        return [f"{indent}{quoted(text)}"]
    parts = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    return [f"{indent}(", *(f"{indent}    {quoted(p)}" for p in parts), f"{indent})"]


def _doc(model: type) -> str:
    import inspect

    return inspect.cleandoc(model.__doc__ or "")


def _field_lines(name: str, annotation: str, description: Optional[str]) -> list[str]:
    lines = [f"    {name}: {annotation}"]
    return lines + (_literal(description, "    ") if description else [])


def _model_class(model: type[BaseModel]) -> list[str]:
    lines = [f"class {model.__name__}(TypedDict):", *(_literal(_doc(model), "    ") if _doc(model) else [])]
    for name, field in model.model_fields.items():
        lines += _field_lines(name, f"NotRequired[{type_source(field.annotation)}]", field.description)
    return lines


def _args_class(spec: ArgsSpec) -> list[str]:
    lines = [
        f"class {spec.component}Args(TypedDict):",
        *_literal(f"The inputs of {spec.component}: its references to other resources, then its settings "
                  f"(each a field of {spec.model.__name__}, absent: its default there).", "    "),
    ]  # fmt: skip
    for ref in spec.refs:
        lines += _field_lines(ref.name, ref.annotation, ref.description)
    for name in spec.section_fields():
        field = spec.model.model_fields[name]
        lines += _field_lines(name, f"NotRequired[{type_source(field.annotation)}]", field.description)
    return lines


HEADER = '''"""GENERATED by `python -m rlinf_eks.hosted.generate` from the pydantic settings (rlinf_eks.config):
do not edit. {what} tests/test_hosted_schema.py fails while this file is stale."""

# No `from __future__ import annotations`: the analyzer reads these annotations at run time.
{imports}
'''
MODELS_WHAT = "The TypedDicts of the settings models of rlinf_eks.config.{section} (same names, same fields, their\ndescriptions; every field NotRequired: the defaults are pydantic's)."
ARGS_WHAT = "The inputs of the hosted components: one <Component>Args each (its references to\nother resources, then its settings sections), as the Pulumi SDK's analyzer reads them."


def _module_of(model: type) -> str:
    """The generated module of a settings model: the name of its rlinf_eks.config module."""
    return model.__module__.rsplit(".", 1)[1]


def _imports(names: set[str], here: str, by_name: dict[str, str], pulumi_too: bool = False) -> str:
    lines = ["import pulumi"] if pulumi_too else []
    lines += ["from typing import TypedDict", "", "from typing_extensions import NotRequired"]
    outside: dict[str, list[str]] = {}
    for name in sorted(names):
        if by_name[name] != here:
            outside.setdefault(by_name[name], []).append(name)
    if outside:
        lines.append("")
        lines += [f"from .{module} import {', '.join(items)}" for module, items in sorted(outside.items())]
    return "\n".join(lines)


def _used(block: list[str], by_name: dict[str, str]) -> set[str]:
    import re

    words = set(re.findall(r"\b[A-Z]\w+\b", " ".join(line for line in block if ":" in line and not line.strip().startswith(("(", '"')))))
    return {w for w in words if w in by_name}


def render_files(specs: tuple[ArgsSpec, ...] = SPECS) -> dict[str, str]:
    """The generated package's files by name: one module per config module, ``__init__.py`` with
    the components' args (and every name)."""
    models = _models(specs)
    by_name = {m.__name__: _module_of(m) for m in models}
    files: dict[str, str] = {}
    for module in dict.fromkeys(by_name.values()):
        blocks = [_model_class(m) for m in models if _module_of(m) == module]
        used = set().union(*(_used(b, by_name) for b in blocks))
        header = HEADER.format(what=MODELS_WHAT.format(section=module), imports=_imports(used, module, by_name))
        files[f"{module}.py"] = header + "\n\n" + "\n\n\n".join("\n".join(b) for b in blocks) + "\n"
    blocks = [_args_class(s) for s in specs]
    used = set().union(*(_used(b, by_name) for b in blocks))
    names = sorted([*by_name, *(f"{s.component}Args" for s in specs)])
    imports = _imports(set(by_name), "__init__", by_name, pulumi_too=True)
    body = "\n\n\n".join("\n".join(b) for b in blocks)
    all_names = "__all__ = [" + ", ".join(f'"{n}"' for n in names) + "]  # fmt: skip"
    files["__init__.py"] = HEADER.format(what=ARGS_WHAT, imports=imports) + "\n" + all_names + "\n\n\n" + body + "\n"
    return files


def stale_files(specs: tuple[ArgsSpec, ...] = SPECS) -> list[str]:
    """The generated files that differ from what :func:`render_files` makes, or should not be there."""
    files = render_files(specs)
    present = {p.name for p in TARGET.glob("*.py")} if TARGET.is_dir() else set()
    changed = [name for name, text in files.items() if name not in present or (TARGET / name).read_text() != text]
    return sorted(changed + sorted(present - set(files)))


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        stale = stale_files()
        if stale:
            print(f"stale in {TARGET}: {stale}: run python -m rlinf_eks.hosted.generate", file=sys.stderr)
        return int(bool(stale))
    files = render_files()
    TARGET.mkdir(exist_ok=True)
    for path in TARGET.glob("*.py"):
        if path.name not in files:
            path.unlink()
    for name, text in files.items():
        (TARGET / name).write_text(text)
    print(f"wrote {len(files)} files in {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
