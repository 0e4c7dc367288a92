"""Error wording: ConfigError and the lines that name a key path, the value and what is valid.

Nothing here knows the settings models; the model a key path is resolved against is passed in."""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError


def _rule(path: str, value: Any, message: str) -> PydanticCustomError:
    """A cross-field rule violation; ``path`` is the camelCase key path relative to the model."""
    return PydanticCustomError("rule", "{text}", {"text": f"{path}={value!r}: {message}"})


def _raise_all(errors: list[PydanticCustomError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise PydanticCustomError("rules", "{text}", {"text": "\n".join(e.message() for e in errors)})



class ConfigError(ValueError):
    """A stack configuration that cannot be deployed: one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid stack configuration:\n" + "\n".join(f"  - {p}" for p in problems))



def _dotted(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def _model_at(loc: tuple[Any, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    """The settings model found at a key path, for listing the keys valid there."""
    model: Any = root
    for part in loc:
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        field = fields.get(part)
        annotation = getattr(field, "annotation", None)
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model


def _lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _did_you_mean(key: str, valid: list[str]) -> str:
    """A hint for a near miss (case, or a letter or two), such as ' (did you mean nodeCount?)'; else ''."""
    by_lower = {name.lower(): name for name in valid}
    match = by_lower.get(key.lower()) or next(iter(difflib.get_close_matches(key, valid, n=1, cutoff=0.75)), None)
    return f" (did you mean {match}?)" if match else ""


def _needs(loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    """For a missing section: the keys it must have, e.g. "; an object with at least: image"."""
    model = _model_at(loc, root)
    if model is None:
        return ""
    required = [f.alias or n for n, f in model.model_fields.items() if f.is_required()]
    return f"; an object with at least: {', '.join(required)}" if required else ""


def describe(err: ValidationError, data: Mapping[str, Any], root: type[BaseModel]) -> list[str]:
    """Turn pydantic's errors into lines that name the key path, the value and what is valid."""
    problems: list[str] = []
    for item in err.errors(include_url=False):
        loc = tuple(p for p in item["loc"] if p not in ("function-after",))
        prefix = _dotted(loc)
        if loc == ("region",):
            prefix = "aws:region"  # the one key outside the project namespace
        if item["type"] in ("rule", "rules"):
            for line in item["msg"].split("\n"):
                problems.append(f"{prefix + '.' if prefix else ''}{line}")
            continue
        if item["type"] == "extra_forbidden":
            model = _model_at(loc[:-1], root)
            names = [f.alias or n for n, f in model.model_fields.items()] if model else []
            valid = ", ".join(names) or "see the README"
            problems.append(f"{prefix}: unknown key{_did_you_mean(str(loc[-1]), names)}; valid keys here: {valid}")
            continue
        if item["type"] == "missing":
            problems.append(f"{prefix}: required key is missing{_needs(loc, root)}")
            continue
        value = _lookup(data, loc)
        message = item["msg"]
        if item["type"] == "int_type":
            message = "must be an integer" + (", not a boolean" if isinstance(value, bool) else " (unquoted, no decimal point)")
        elif item["type"] == "bool_type":
            message = "must be true or false (a YAML boolean, unquoted)"
        if item["type"] == "literal_error":
            message = message.replace("Input should be", "must be one of")
        problems.append(f"{prefix}={value!r}: {message}")
    return problems
