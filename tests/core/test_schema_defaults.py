"""The run config's defaults live in two places a reader sees, its JSON Schema (what `aka validate`
and an editor show) and the models it is structured into (what a run uses): they must agree.
Every ``default`` in schemas/run_config.schema.json is compared with the attrs default of the
field it describes, found by walking the models from ``RunConfig`` by the property path."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import attrs

from aka_core.models import RunConfig

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "run_config.schema.json"


def schema_defaults(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(property path, default) of every property below ``node`` that declares a default."""
    found: list[tuple[tuple[str, ...], Any]] = []
    if not isinstance(node, dict):
        return found
    if "default" in node and path:
        found.append((path, node["default"]))
    for name, child in (node.get("properties") or {}).items():
        found += schema_defaults(child, (*path, name))
    return found


def attrs_class(annotation: Any) -> type | None:
    """The attrs class an annotation names (``X | None`` included), or None."""
    if isinstance(annotation, type) and attrs.has(annotation):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        found = [a for a in typing.get_args(annotation) if isinstance(a, type) and attrs.has(a)]
        return found[0] if len(found) == 1 else None
    return None


def model_default(path: tuple[str, ...]) -> Any:
    """The default of the model field at ``path`` below ``RunConfig`` (a ``Factory`` called);
    raises LookupError naming the part of the path that no model field has."""
    cls: type | None = RunConfig
    default: Any = attrs.NOTHING
    for depth, name in enumerate(path):
        if cls is None:
            raise LookupError(f"{'.'.join(path[:depth])} is not a model with fields")
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in attrs.fields(cls)}
        if name not in fields:
            raise LookupError(f"{cls.__qualname__} has no field {name!r} "
                              f"(schema property {'.'.join(path[:depth + 1])})")
        default = fields[name].default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        cls = attrs_class(hints[name])
    return default


def plain(value: Any) -> Any:
    """Tuples as lists, enums as their values: the shapes JSON has."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return getattr(value, "value", value)


def mismatches(schema: dict[str, Any]) -> list[str]:
    problems = []
    for path, in_schema in schema_defaults(schema):
        dotted = ".".join(path)
        try:
            default = model_default(path)
        except LookupError as exc:
            problems.append(f"{dotted}: {exc}")
            continue
        if default is attrs.NOTHING:
            problems.append(f"{dotted}: defaults to {in_schema!r} in the schema but has no default "
                            "in the models")
        elif plain(default) != plain(in_schema) or isinstance(default, bool) != isinstance(
                in_schema, bool):  # 1 == True: a number is not a switch
            problems.append(f"{dotted}: defaults to {in_schema!r} in the schema but to "
                            f"{default!r} in the models")
    return problems


def test_the_run_config_schema_and_the_models_default_alike() -> None:
    schema = json.loads(SCHEMA.read_text())
    assert len(schema_defaults(schema)) >= 15  # the walk finds the nested ones too
    assert mismatches(schema) == []


def test_a_disagreement_is_named_by_its_path() -> None:
    schema = json.loads(SCHEMA.read_text())
    schema["properties"]["agent"]["properties"]["timeout_seconds"]["default"] = 60
    schema["properties"]["evaluation"]["properties"]["held_out"]["default"] = False
    schema["properties"]["resources"]["properties"]["nonexistent"] = {"default": 1}
    problems = mismatches(schema)
    assert any(p.startswith("agent.timeout_seconds: defaults to 60") for p in problems)
    assert any(p.startswith("evaluation.held_out: defaults to False") for p in problems)
    assert any(p.startswith("resources.nonexistent:") and "no field" in p for p in problems)
