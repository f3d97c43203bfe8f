"""Whether a plugin's options class agrees with its ``config_schema``.

A plugin writes each option's default twice: in the schema (what ``aka plugins`` and the docs
show, what a config is checked against) and in its options class (what its factory gets for an
option left out). :func:`option_default_mismatches` compares the two, for the contract tests and
for the core's test over every registered plugin.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from aka_core.convert import unstructure
from aka_core.plugin.records import PluginRecord


def _plain(value: Any) -> Any:
    """``value`` as JSON has it (tuples are lists), so a class's ``()`` equals a schema's ``[]``."""
    return json.loads(json.dumps(unstructure(value)))


def option_default_mismatches(record: PluginRecord) -> list[str]:
    """Where ``record``'s options class and its schema disagree: an option only one of them has,
    a default that differs (an option without a schema ``default`` must default to None, "not
    given"), an option without a default that the schema does not require. Each problem names the
    plugin and the option; empty when they agree."""
    label = f"{record.kind} {record.name!r}"
    schema = record.config_schema or {}
    options = dict(schema.get("properties") or {})
    cls = record.options_class
    if cls is None:
        return [f"{label}: config_schema has options {sorted(options)} but the record has no "
                "options_class"] if options else []
    if not attrs.has(cls):
        return [f"{label}: options_class {cls.__qualname__} is not an attrs class"]
    fields = {field.name: field for field in attrs.fields(cls)}
    problems = [f"{label}: option {name!r} is in config_schema but not a field of "
                f"{cls.__qualname__}" for name in sorted(options.keys() - fields.keys())]
    problems += [f"{label}: field {name!r} of {cls.__qualname__} is not an option of "
                 "config_schema" for name in sorted(fields.keys() - options.keys())]
    required = set(schema.get("required") or ())
    for name in sorted(options.keys() & fields.keys()):
        default = fields[name].default
        if default is attrs.NOTHING:
            if name not in required:
                problems.append(f"{label}: option {name!r} has no default in "
                                f"{cls.__qualname__} but config_schema does not require it")
            continue
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        in_schema = options[name].get("default")
        if _plain(default) != _plain(in_schema):
            problems.append(f"{label}: option {name!r} defaults to {in_schema!r} in config_schema "
                            f"but to {default!r} in {cls.__qualname__}")
    return problems
