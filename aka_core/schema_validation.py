"""JSON Schema validation of user files, with errors a user can act on.

Every schema error becomes an ``aka_core.errors.Problem`` that names the file, the line (read from
the ruamel document), the field path (``agent.timeout_seconds``, ``cases[2].params``) and what to
do: the closest valid key for a misspelled one, the allowed values for an enum, the missing key for
a required one.
"""

from __future__ import annotations

import difflib
import functools
import importlib.resources
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

import aka_core
from aka_core.errors import ConfigError, Problem
from aka_core.yamlio import line_of

PathPart = str | int

# Models unstructure sequences as tuples; a result validated before it is written must pass too.
_TYPE_CHECKER = Draft202012Validator.TYPE_CHECKER.redefine(
    "array", lambda _checker, instance: isinstance(instance, list | tuple)
)
Validator = jsonschema.validators.extend(Draft202012Validator, type_checker=_TYPE_CHECKER)

_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def schemas_directory() -> Path:
    """Where the JSON Schemas live: in an installed wheel, else the repository's ``schemas/``."""
    packaged = importlib.resources.files("aka_core") / "_schemas"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(aka_core.__file__).resolve().parent.parent / "schemas"


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """Load ``schemas/<name>.schema.json`` (or a file name). Do not modify it."""
    file_name = name if name.endswith(".json") else f"{name}.schema.json"
    path = schemas_directory() / file_name
    try:
        schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"JSON Schema {file_name} not found in {path.parent}; is aka-core installed completely?"
        ) from None
    return schema


def field_path(parts: Sequence[PathPart]) -> str:
    """Render a path as users write it: ``agent.options.model``, ``cases[2].params``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def validate_document(
    data: Any,
    schema: Mapping[str, Any],
    *,
    file: Path | None,
    source: Any = None,
    path_prefix: Sequence[PathPart] = (),
) -> list[Problem]:
    """Validate ``data`` (plain data) and return every problem, sorted by line.

    ``source`` is the ruamel document ``data`` came from (for line numbers); ``path_prefix`` is
    where ``data`` sits inside it (e.g. ``("agent", "options")`` for a plugin's options section).
    """
    validator = Validator(schema)
    lines_from = source if source is not None else data
    problems: list[Problem] = [
        Problem(f"{value!r} is not a finite number", file=file,
                line=line_of(lines_from, [*path_prefix, *relative]) if lines_from is not None
                else None, field=field_path([*path_prefix, *relative]) or None,
                hint="write a finite number (no .inf or .nan)")
        for relative, value in _non_finite(data, [])]
    for error in validator.iter_errors(data):
        for relative, message, hint in _describe(error):
            path = [*path_prefix, *relative]
            problems.append(Problem(
                message,
                file=file,
                line=line_of(lines_from, path) if lines_from is not None else None,
                field=field_path(path) or None,
                hint=hint,
            ))
    return sort_problems(problems)


def _non_finite(data: Any, path: list[PathPart]) -> list[tuple[list[PathPart], float]]:
    """Every float in ``data`` that is inf or NaN, with its path (JSON Schema lets them pass as
    numbers: a timeout of .inf would never fire)."""
    if isinstance(data, float):
        return [] if math.isfinite(data) else [(path, data)]
    if isinstance(data, Mapping):
        return [found for key, value in data.items() for found in _non_finite(value, [*path, key])]
    if isinstance(data, list | tuple):
        return [found for index, value in enumerate(data)
                for found in _non_finite(value, [*path, index])]
    return []


def validate_or_raise(
    data: Any,
    schema: Mapping[str, Any],
    *,
    file: Path | None,
    source: Any = None,
    path_prefix: Sequence[PathPart] = (),
) -> None:
    """Like ``validate_document``, raising ``ConfigError`` with every problem when there are any."""
    problems = validate_document(data, schema, file=file, source=source, path_prefix=path_prefix)
    if problems:
        raise ConfigError(problems)


def sort_problems(problems: list[Problem]) -> list[Problem]:
    """Problems in reading order: by file, then line (unknown lines last), then field."""
    return sorted(problems, key=lambda p: (
        str(p.file or ""), p.line is None, p.line or 0, p.field or ""))


def _describe(error: ValidationError) -> list[tuple[list[PathPart], str, str | None]]:
    """(path, message, hint) for one schema error; one error may name several keys."""
    path: list[PathPart] = list(error.absolute_path)
    kind = str(error.validator)
    value: Any = error.validator_value
    instance: Any = error.instance
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}

    if "propertyNames" in error.absolute_schema_path:
        # jsonschema checks a key name without adding it to the path; point at the key itself.
        allowed = value if kind == "enum" else None
        hint = _choices_hint(str(instance), allowed) if allowed else None
        return [([*path, str(instance)], "key not allowed here", hint)]
    if kind == "additionalProperties" and isinstance(instance, Mapping):
        known = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        extra = [k for k in instance if k not in known
                 and not any(re.search(p, str(k)) for p in patterns)]
        return [([*path, str(key)], "unknown key", _choices_hint(str(key), known))
                for key in extra]
    if kind == "required" and isinstance(instance, Mapping):
        missing = [k for k in value if k not in instance]
        return [(path, f"missing required key {key!r}", None) for key in missing]
    if kind == "enum":
        allowed = ", ".join(_show(v) for v in value)
        return [(path, f"{_show(instance)} is not allowed", f"choose one of: {allowed}")]
    if kind == "const":
        return [(path, f"must be {_show(value)}, got {_show(instance)}", None)]
    if kind == "type":
        wanted = [value] if isinstance(value, str) else list(value)
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in wanted)
        return [(path, f"expected {names}, got {_type_of(instance)} ({_show(instance)})", None)]
    return [(path, _bound_message(kind, value, instance) or error.message, _pattern_hint(error))]


def _bound_message(kind: str, value: Any, instance: Any) -> str | None:
    messages = {
        "minimum": f"must be at least {value}, got {_show(instance)}",
        "maximum": f"must be at most {value}, got {_show(instance)}",
        "exclusiveMinimum": f"must be greater than {value}, got {_show(instance)}",
        "exclusiveMaximum": f"must be less than {value}, got {_show(instance)}",
        "minItems": f"needs at least {value} item(s)",
        "maxItems": f"takes at most {value} item(s)",
        "minLength": "must not be empty" if value == 1 else f"needs at least {value} characters",
        "minProperties": f"needs at least {value} key(s)",
        "uniqueItems": "has duplicate items",
        "pattern": f"{_show(instance)} does not match the pattern {value}",
    }
    return messages.get(kind)


def _pattern_hint(error: ValidationError) -> str | None:
    if error.validator == "pattern" and ".py:" in str(error.validator_value):
        return "expected `file.py:function`"
    return None


def _choices_hint(key: str, choices: Sequence[Any]) -> str | None:
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.7)
    if close:
        return f"did you mean {close[0]!r}?"
    if names:
        return f"valid keys: {', '.join(names)}"
    return "this section takes no keys"


def _type_of(instance: Any) -> str:
    for name, check in (("null", lambda v: v is None), ("boolean", lambda v: isinstance(v, bool)),
                        ("integer", lambda v: isinstance(v, int)),
                        ("number", lambda v: isinstance(v, float)),
                        ("string", lambda v: isinstance(v, str)),
                        ("object", lambda v: isinstance(v, Mapping)),
                        ("array", lambda v: isinstance(v, list | tuple))):
        if check(instance):
            return _TYPE_NAMES[name]
    return type(instance).__name__


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, bool | None) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
