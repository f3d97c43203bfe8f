"""Checks that keep the plugin surface, the schemas and the configs honest.

Every hook is documented (docstring and docs/plugins.md); every plugin distribution has one
``aka`` entry point, depends on aka-core and has tests; every schema is a valid JSON Schema;
every run config in configs/ validates against schemas/run_config.schema.json.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from referencing import Registry, Resource

from aka_core.plugin import hookspecs
from aka_core.yamlio import line_of, load_yaml, to_builtin

REPO = Path(__file__).resolve().parents[1]
PLUGINS_MD = REPO / "docs" / "plugins.md"
PLUGIN_DIRS = sorted(p for p in (REPO / "plugins").glob("aka-*") if p.is_dir())
ALL_PLUGIN_DIRS = sorted(p for p in (REPO / "plugins").iterdir() if p.is_dir())
SCHEMAS = sorted((REPO / "schemas").glob("*.json"))
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(REPO).as_posix() for p in paths]


# --------------------------------------------------------------------------- hooks


@pytest.mark.parametrize("hook", hookspecs.hook_names())
def test_hook_has_a_docstring(hook: str) -> None:
    doc = getattr(hookspecs, hook).__doc__
    assert doc and doc.strip(), f"aka_core/plugin/hookspecs.py: {hook} has no docstring"


@pytest.mark.parametrize("hook", hookspecs.hook_names())
def test_hook_is_documented_in_plugins_md(hook: str) -> None:
    assert PLUGINS_MD.is_file(), (
        "docs/plugins.md (the plugin authoring guide) is missing: write it and mention every "
        "hook of aka_core/plugin/hookspecs.py"
    )
    assert hook in PLUGINS_MD.read_text(encoding="utf-8"), (
        f"docs/plugins.md does not mention {hook}: document it"
    )


# --------------------------------------------------------------------------- plugins


def _pyproject(plugin_dir: Path) -> dict[str, Any]:
    return tomllib.loads((plugin_dir / "pyproject.toml").read_text(encoding="utf-8"))


def test_there_are_plugin_distributions() -> None:
    assert PLUGIN_DIRS, "plugins/ holds no aka-* distribution"


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=_ids(PLUGIN_DIRS))
def test_plugin_declares_one_aka_entry_point(plugin_dir: Path) -> None:
    project = _pyproject(plugin_dir)["project"]
    assert project["name"] == plugin_dir.name, "the distribution is named after its folder"
    entry_points = project.get("entry-points", {}).get("aka", {})
    assert len(entry_points) == 1, (
        f"{plugin_dir.name}/pyproject.toml must declare exactly one entry point in "
        f"[project.entry-points.aka], found {sorted(entry_points)}"
    )
    module = next(iter(entry_points.values())).split(":")[0]
    package = plugin_dir / "src" / module.split(".")[0]
    assert package.is_dir() or package.with_suffix(".py").is_file(), (
        f"entry point module {module!r} is not under {plugin_dir.name}/src/"
    )


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=_ids(PLUGIN_DIRS))
def test_plugin_depends_on_aka_core(plugin_dir: Path) -> None:
    deps = [Requirement(d) for d in _pyproject(plugin_dir)["project"].get("dependencies", [])]
    assert any(canonicalize_name(d.name) == "aka-core" for d in deps), (
        f"{plugin_dir.name}/pyproject.toml must depend on aka-core"
    )


@pytest.mark.parametrize("plugin_dir", ALL_PLUGIN_DIRS, ids=_ids(ALL_PLUGIN_DIRS))
def test_plugin_has_tests(plugin_dir: Path) -> None:
    tests = list((plugin_dir / "tests").glob("test_*.py"))
    assert tests, f"{plugin_dir.relative_to(REPO)}/tests/ holds no test_*.py"


# --------------------------------------------------------------------------- schemas, configs


def _schema(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _registry() -> Registry:
    resources = [Resource.from_contents(_schema(p)) for p in SCHEMAS]
    return Registry().with_resources((r.id(), r) for r in resources if r.id())


@pytest.mark.parametrize("schema", SCHEMAS, ids=_ids(SCHEMAS))
def test_schema_is_valid(schema: Path) -> None:
    Draft202012Validator.check_schema(_schema(schema))


def test_there_are_run_configs() -> None:
    assert CONFIGS, "configs/ holds no *.yaml run config (the README and CI use them)"


@pytest.mark.parametrize("config", CONFIGS, ids=_ids(CONFIGS))
def test_config_validates(config: Path) -> None:
    schema_path = REPO / "schemas" / "run_config.schema.json"
    assert schema_path.is_file(), "schemas/run_config.schema.json is missing"
    data = load_yaml(config)
    validator = Draft202012Validator(_schema(schema_path), registry=_registry())
    problems = [
        f"{config.relative_to(REPO)}:{line_of(data, list(e.absolute_path))}: "
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in validator.iter_errors(to_builtin(data))
    ]
    assert not problems, "\n".join(problems)


def test_make_task_writes_a_valid_task(make_task: Any) -> None:
    """The test kit's task validates against the schema and loads with the operator format."""
    from aka_core.testing.fixtures import task_from_dir

    task_dir = make_task("demo/scale_add")
    data = to_builtin(load_yaml(task_dir / "task.yaml"))
    errors = list(Draft202012Validator(_schema(REPO / "schemas" / "task.schema.json"))
                  .iter_errors(data))
    assert not errors, [e.message for e in errors]
    task = task_from_dir(task_dir, "demo/scale_add")
    assert (task.backend, task.editable, task.baseline) == ("python", ("kernel.py",),
                                                            "kernel.py:scale_add")
