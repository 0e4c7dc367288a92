"""What another language sent, as the settings a Python program passes: the same models, the same
rules, the same problem lines (one per problem, each naming the property's path).

The provider hands a hosted component its ``args`` with Python names (``node_count``), numbers as
the wire's doubles (``2.0``: the wire has no integers) and any value that came from an Output or
a secret wrapped in an Output. :func:`wire_data` turns a settings value back into what a stack file
holds (camelCase keys, whole numbers as integers; a fraction stays a fraction, for pydantic to
refuse), and :func:`section_settings` validates the sections of one component at once.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Iterable, Literal, Mapping, Optional, TypeVar, Union, get_args, get_origin

import pulumi
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..config import ConfigError, StackSettings
from ..config.errors import describe_errors

M = TypeVar("M", bound=BaseModel)


def _is_int(annotation: Any) -> bool:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _is_int(args[0])
    if origin is Literal:
        return all(isinstance(a, int) and not isinstance(a, bool) for a in args)
    return annotation is int


def wire_data(annotation: Any, value: Any, path: str, outputs: list[str]) -> Any:
    """``value`` (Python names) as a stack file holds it (camelCase), by the settings' own
    ``annotation``: keys of a model become its fields' aliases (a key it lacks stays, for pydantic
    to name), whole numbers of an integer field become integers. A value that is an Output (it
    came from another resource or is a secret) is listed in ``outputs``: settings are plain."""
    if isinstance(value, pulumi.Output):
        outputs.append(path)
        return None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return wire_data(args[0], value, path, outputs)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return wire_data(rest[0], value, path, outputs) if len(rest) == 1 and value is not None else value
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, Mapping):
        fields = annotation.model_fields
        data = {}
        for key, item in value.items():
            field = fields.get(key)
            wire = (field.alias or key) if field is not None else key
            if isinstance(item, pulumi.Output):  # left out: the problem names it, pydantic nothing more
                outputs.append(f"{path}.{wire}")
            elif field is None:
                data[key] = item
            else:
                data[wire] = wire_data(field.annotation, item, f"{path}.{wire}", outputs)
        return data
    if origin is list and isinstance(value, list):
        return [wire_data(args[0], item, f"{path}[{i}]", outputs) for i, item in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        return {k: wire_data(args[1], item, f'{path}["{k}"]', outputs) for k, item in value.items()}
    if _is_int(annotation) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def plain_problems(paths: list[str]) -> list[str]:
    """The problem line of each setting that arrived as an Output."""
    return [
        f"{path}: must be a plain value, known when the program runs (not another resource's output, not a secret)"
        for path in paths
    ]


def sections_data(model: type[BaseModel], fields: list[str], args: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The given sections of ``args`` (Python names) as a stack file's top-level keys, and the
    problems of settings that are Outputs."""
    outputs: list[str] = []
    data: dict[str, Any] = {}
    for name in fields:
        if args.get(name) is None:
            continue
        field = model.model_fields[name]
        key = field.alias or name
        if isinstance(args[name], pulumi.Output):
            outputs.append(key)
            continue
        data[key] = wire_data(field.annotation, args[name], key, outputs)
    return data, plain_problems(outputs)


def section_settings(fields: list[str], args: Mapping[str, Any], more_problems: Iterable[str] = ()) -> dict[str, Any]:
    """The StackSettings sections ``fields`` of one component, each validated by itself as the
    loader validates a stack's sections (a missing one: its default), or one ConfigError with the
    problems of all of them (after ``more_problems``)."""
    data, problems = sections_data(StackSettings, fields, args)
    problems = [*more_problems, *problems]
    items: list[dict[str, Any]] = []
    settings: dict[str, Any] = {}
    for name in fields:
        field = StackSettings.model_fields[name]
        key = field.alias or name
        adapter = TypeAdapter(Annotated[(field.annotation, *field.metadata)]) if field.metadata else TypeAdapter(field.annotation)
        try:
            settings[name] = adapter.validate_python(data[key]) if key in data else field.get_default(call_default_factory=True)
        except ValidationError as err:
            items += [{**item, "loc": (key, *item["loc"])} for item in err.errors(include_url=False)]
    problems += describe_errors(items, data, StackSettings)
    if problems:
        raise ConfigError(problems)
    return settings


def validated(model: type[M], data: Mapping[str, Any], problems: Optional[list[str]] = None) -> M:
    """``model`` from ``data`` (camelCase), or ConfigError with ``problems`` and pydantic's, worded
    by the loader (rlinf_eks.config.errors)."""
    problems = list(problems or [])
    try:
        result = model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(problems + describe_errors(err.errors(include_url=False), data, model)) from None
    if problems:
        raise ConfigError(problems)
    return result


def tag_problems(tags: Optional[Mapping[str, Any]]) -> list[str]:
    """The stack's tag rules over a component's ``tags`` (the `tags` key path)."""
    if tags is None:
        return []
    if any(isinstance(v, pulumi.Output) for v in tags.values()):
        return plain_problems(["tags"])
    field = StackSettings.model_fields["tags"]
    try:
        TypeAdapter(Annotated[(field.annotation, *field.metadata)]).validate_python(dict(tags))
    except ValidationError as err:
        return describe_errors([{**i, "loc": ("tags", *i["loc"])} for i in err.errors(include_url=False)], {"tags": tags}, StackSettings)
    return []


__all__ = ["plain_problems", "section_settings", "sections_data", "tag_problems", "validated", "wire_data"]
