"""Error wording: ConfigError and the lines that name a key path, the value and what is valid.

Nothing here knows the settings models; the model a key path is resolved against is passed in.
The lowest module of the package: every other one may import it."""

from __future__ import annotations

import difflib
import re
from datetime import date, datetime, timezone
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError


def shown(value: Any) -> str:
    """A value in a problem line as a stack file spells it: true, false and null (never Python's
    True and None), numbers as written, text quoted (``'p5.48xl'``: where it starts and ends),
    lists and objects item by item, and a date or time as its ISO text (``2026-01-01``,
    ``2027-01-11T11:30:00Z``), never its repr."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        if value.tzinfo is not None and value.utcoffset() == timezone.utc.utcoffset(None):
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{shown(k)}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    return repr(value)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key_path(*parts: str | int) -> str:
    """A key path as ``--set`` and ``pulumi config set --path`` read it: names joined by '.', list
    indexes ``[0]``, and a key that holds anything but letters, digits, '_' and '-' quoted:
    ``workload.trainer.batch["actor.global_batch_size"]``, ``gpuNodes.labels["example.com/team"]``."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path and not _PLAIN_KEY.fullmatch(part):
            path += '["' + part.replace("\\", "\\\\").replace('"', '\\"') + '"]'
        else:
            path += ("." if path else "") + part
    return path


def quote_it(key: Any, value: bool | int | float) -> str:
    """The fix for a YAML number or boolean where text is meant: the text, quoted."""
    text = getattr(value, "written", None) or ("true" if value is True else "false" if value is False else str(value))
    what = "true/false" if isinstance(value, bool) else "a number"
    key_text = f"[{key}]" if isinstance(key, int) else key
    return f'text is meant here, but YAML reads {text} as {what}: quote it in the stack file ({key_text}: "{text}")'


def problem_line(path: str, value: Any, message: str) -> str:
    """One problem: the camelCase key path, the value and what is wrong or valid."""
    return f"{path}={shown(value)}: {message}"


def rule_error(path: str, value: Any, message: str) -> PydanticCustomError:
    """A cross-field rule violation inside one model; ``path`` is the key path relative to it."""
    return PydanticCustomError("rule", "{text}", {"text": problem_line(path, value, message)})


def raise_all(errors: list[PydanticCustomError]) -> None:
    """Raise every rule violation of one model at once (each becomes one problem line)."""
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
    return key_path(*(part if isinstance(part, int) else str(part) for part in loc))


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


def suggestion(match: str | None) -> str:
    """' (did you mean <match>?)', or '' without a match: every "did you mean" hint is worded so."""
    return f" (did you mean {match}?)" if match else ""


def did_you_mean(word: str, valid: Iterable[str], *, cutoff: float = 0.75, ignore_case: bool = True) -> str:
    """A hint for a near miss of ``word`` among ``valid``, such as ' (did you mean nodeCount?)'; else ''.

    Matched case-insensitively first, then by similarity >= ``cutoff`` (without case too);
    values such as regions pass ``cutoff=0.8, ignore_case=False``."""
    names = list(valid)
    lowered = {name.lower(): name for name in names}
    match = lowered.get(word.lower()) if ignore_case else None
    if match is None and ignore_case:
        # a shortened or mistyped value (p5.48xl, P5.48XLARG) is compared without case
        close = difflib.get_close_matches(word.lower(), lowered, n=1, cutoff=cutoff)
        match = lowered[close[0]] if close else None
    return suggestion(match or next(iter(difflib.get_close_matches(word, names, n=1, cutoff=cutoff)), None))


def key_hint(word: str, names: Iterable[str]) -> str:
    """The hint for an unknown key: a near miss (did_you_mean), else the one valid key that ends
    with it, for a key given by its last word(s) (count for nodeCount); else ''."""
    names = list(names)
    near = did_you_mean(word, names)
    if near:
        return near
    ending = [name for name in names if len(word) >= 4 and name.lower() != word.lower() and name.lower().endswith(word.lower())]
    return suggestion(ending[0]) if len(ending) == 1 else ""


def _needs(loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    """For a missing section: the keys it must have, e.g. "; an object with at least: image"."""
    model = _model_at(loc, root)
    if model is None:
        return ""
    required = [f.alias or n for n, f in model.model_fields.items() if f.is_required()]
    return f"; an object with at least: {', '.join(required)}" if required else ""


_BOUNDS = {"less_than_equal": "at most {le}", "greater_than_equal": "at least {ge}", "less_than": "below {lt}", "greater_than": "above {gt}"}
_LENGTHS = {"string_too_short": ("at least", "min_length", "characters"), "string_too_long": ("at most", "max_length", "characters"),
            "too_short": ("at least", "min_length", "items"), "too_long": ("at most", "max_length", "items")}  # fmt: skip
_TYPES = {
    "float_type": "must be a number", "float_parsing": "must be a number", "int_parsing": "must be an integer (unquoted, no decimal point)",
    "int_from_float": "must be a whole number", "string_type": "must be text", "dict_type": "must be an object (key: value lines)",
    "list_type": "must be a list", "model_type": "must be an object (key: value lines)", "model_attributes_type": "must be an object (key: value lines)",
    "bool_parsing": "must be true or false (a YAML boolean, unquoted)", "none_required": "must be left out",
}  # fmt: skip


_PYDANTIC_WORDS = re.compile(r"(Input|String|List|Value|Tuple|Dictionary|Set) should |Value error, ")
"""pydantic's own messages (a custom error of this project keeps its words)."""


def _in_our_words(item: Mapping[str, Any], message: str) -> str:
    """pydantic's wording of a bound, a length or a type ("Input should be less than or equal to
    512") in the project's: "must be at most 512"."""
    ctx = item.get("ctx") or {}
    kind = item["type"]
    if kind in _BOUNDS:
        return "must be " + _BOUNDS[kind].format(**{k: shown(v) for k, v in ctx.items()})
    if kind in _LENGTHS:
        bound, key, unit = _LENGTHS[kind]
        return f"must be {bound} {ctx.get(key)} {unit if ctx.get(key) != 1 else unit[:-1]} long" if unit == "characters" else (
            f"must hold {bound} {ctx.get(key)} {unit if ctx.get(key) != 1 else unit[:-1]}")  # fmt: skip
    if kind in _TYPES:
        return _TYPES[kind]
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    return message.replace("Input should be", "must be")


def describe(err: ValidationError, data: Mapping[str, Any], root: type[BaseModel]) -> list[str]:
    """Turn pydantic's errors into lines that name the key path, the value and what is valid."""
    return describe_errors(err.errors(include_url=False), data, root)


def describe_errors(items: Iterable[Mapping[str, Any]], data: Mapping[str, Any], root: type[BaseModel]) -> list[str]:
    """The lines of pydantic error items (``type``, ``loc``, ``msg``), ``loc`` from ``root``."""
    problems: list[str] = []
    for item in items:
        loc = tuple(p for p in item["loc"] if p not in ("function-after",))
        prefix = _dotted(loc)
        if loc == ("region",):
            prefix = "aws:region"  # the one key outside the project namespace
        if item["type"] in ("rule", "rules"):
            for line in item["msg"].split("\n"):
                joint = "" if not prefix or line.startswith("[") else "."
                problems.append(f"{prefix}{joint}{line}")
            continue
        if item["type"] == "extra_forbidden":
            model = _model_at(loc[:-1], root)
            names = [f.alias or n for n, f in model.model_fields.items()] if model else []
            valid = ", ".join(names) or "see the README"
            problems.append(f"{prefix}: unknown key{key_hint(str(loc[-1]), names)}; valid keys here: {valid}")
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
        elif item["type"] == "string_type" and isinstance(value, (bool, int, float)):
            message = quote_it(loc[-1] if loc else "value", value)
        if item["type"] in ("literal_error", "enum"):
            message = message.replace("Input should be", "must be one of")
        elif _PYDANTIC_WORDS.match(message):
            message = _in_our_words(item, message)
        problems.append(f"{prefix}={shown(value)}: {message}")
    return problems
