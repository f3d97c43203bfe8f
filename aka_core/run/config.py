"""Loading a run config: schema validation, plugin names and options, and the tasks folder.

Every problem names the config file, the line and the field, so that a typo is fixed in one go:
all problems of a file are reported together.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs
from jsonschema.exceptions import SchemaError

from aka_core import gpus
from aka_core.convert import structure
from aka_core.errors import ConfigError, PluginError, Problem
from aka_core.models import RunConfig
from aka_core.plugin.host import PluginHost
from aka_core.run.resources import resource_problems
from aka_core.schema_validation import load_schema, sort_problems, validate_document
from aka_core.yamlio import line_of, load_yaml, to_builtin

# (kind, path of the name in the config, path of the options); the name may be a model default.
_PLUGIN_SECTIONS: tuple[tuple[str, tuple[str, str], tuple[str, str]], ...] = (
    ("agent", ("agent", "template"), ("agent", "options")),
    ("scorer", ("scorer", "name"), ("scorer", "options")),
    ("executor", ("executor", "name"), ("executor", "options")),
)
# The plugins a run builds from their options before its first task (a scorer is built per score).
_BUILT_BEFORE_A_RUN = ("agent", "executor")


@attrs.frozen
class LoadedRunConfig:
    """A run config read once: the typed config, its file, and the parsed YAML (``source``),
    which later checks use for the line numbers of their problems instead of reading it again."""

    config: RunConfig
    path: Path
    source: Any


def load_run_config(path: Path, host: PluginHost | None = None) -> RunConfig:
    """Read, validate and structure the run config at ``path``.

    With a ``host``, also check that the agent, scorer and executor exist and that their
    ``options`` match each plugin's ``config_schema``. Raises ``ConfigError`` listing every problem.
    """
    return read_run_config(path, host).config


def read_run_config(path: Path, host: PluginHost | None = None) -> LoadedRunConfig:
    """``load_run_config``, keeping the parsed YAML for the checks that follow it."""
    source = load_yaml(path)
    if not isinstance(source, Mapping):
        raise ConfigError(Problem("expected a mapping of settings (agent, tasks, ...)", file=path,
                                  line=1, hint="see schemas/run_config.schema.json"))
    data = to_builtin(source)
    problems = validate_document(data, load_schema("run_config"), file=path, source=source)
    if problems:
        raise ConfigError(problems)
    try:  # an unknown model is a problem with its line, reported with the others below
        gpus.target_model(data["target_gpu_model"])
    except ConfigError as exc:
        problems += [attrs.evolve(p, file=path, line=line_of(source, ["target_gpu_model"]))
                     for p in exc.problems]
        data = {**data, "target_gpu_model": None}  # go on to find the file's other problems
    try:
        config = structure(data, RunConfig)
    except cattrs.BaseValidationError as exc:  # the schema should have caught it; say so plainly
        raise ConfigError(Problem(f"invalid run config: {exc!r}", file=path)) from None
    config = attrs.evolve(config, source=str(path))

    if host is not None:
        problems += _check_plugins(config, host, path, source)
    problems += resource_problems(config.resources, path, source)
    if problems:
        raise ConfigError(sort_problems(problems))
    return LoadedRunConfig(config=config, path=path, source=source)


def check_plugin_factories(config: RunConfig, host: PluginHost, path: Path,
                           source: Any = None) -> None:
    """Build the configured agent and executor once, as the run will: options their schemas
    cannot judge (a replay ``source`` folder that does not exist, a docker mount that does not
    parse) fail here, before a run starts, not in every task or once the run folder exists.
    Raises ``ConfigError`` naming ``agent.options`` or ``executor.options`` (its line from
    ``source``, the parsed config, or from the file when not given)."""
    problems: list[Problem] = []
    for kind, _, options_path in _PLUGIN_SECTIONS:
        if kind not in _BUILT_BEFORE_A_RUN:
            continue
        section = getattr(config, kind)
        name: str = section.name
        try:
            host.get(kind, name).record.make(to_builtin(section.options))
        except Exception as exc:  # a plugin's own check: shown as a problem of the config
            message = exc.problems[0].message if isinstance(exc, ConfigError) else str(exc)
            if source is None:
                source = load_yaml(path)
            problems.append(Problem(
                f"{kind} {name!r} rejects its options: {message}", file=path,
                line=line_of(source, list(options_path)), field=".".join(options_path)))
    if problems:
        raise ConfigError(problems)


def _check_plugins(config: RunConfig, host: PluginHost, path: Path, source: Any) -> list[Problem]:
    problems: list[Problem] = []
    for kind, name_path, options_path in _PLUGIN_SECTIONS:
        section = getattr(config, kind)
        name: str = section.name
        explicit = _has(source, name_path)
        try:
            record = host.get(kind, name).record
        except PluginError as exc:
            message = str(exc) if explicit else f"the default {kind} is not installed: {exc}"
            problems.append(Problem(message, file=path, line=line_of(source, list(name_path)),
                                    field=".".join(name_path)))
            continue
        options: dict[str, Any] = to_builtin(section.options)
        if record.config_schema is None:
            if options:
                problems.append(Problem(
                    f"{kind} {name!r} takes no options", file=path,
                    line=line_of(source, list(options_path)), field=".".join(options_path),
                    hint="remove the options section"))
            continue
        try:
            problems += validate_document(options, record.config_schema, file=path,
                                          source=source, path_prefix=options_path)
        except SchemaError as exc:  # the plugin's fault, not the user's
            raise PluginError(
                f"{kind} {name!r} has an invalid config_schema: {exc.message}") from None
    return problems


def _has(source: Any, keys: tuple[str, ...]) -> bool:
    node = source
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def resolve_tasks_directory(config: RunConfig, config_path: Path) -> Path:
    """The folder holding the tasks of ``config`` (read from ``config_path``).

    ``tasks_directory`` when set (relative to the config file's folder); else the first ``tasks/``
    folder in the config file's folder or its parents; else ``./tasks``.
    """
    base = config_path.resolve().parent
    if config.tasks_directory:
        candidate = Path(config.tasks_directory).expanduser()
        folder = candidate if candidate.is_absolute() else base / candidate
        if not folder.is_dir():
            raise ConfigError(Problem(
                f"tasks directory {str(folder)!r} does not exist", file=config_path,
                field="tasks_directory",
                hint="tasks_directory is relative to the config file's folder"))
        return folder.resolve()
    for parent in (base, *base.parents):
        if (parent / "tasks").is_dir():
            return (parent / "tasks").resolve()
    fallback = Path("tasks")
    if fallback.is_dir():
        return fallback.resolve()
    raise ConfigError(Problem(
        f"no tasks/ folder in {base}, its parents or the working directory",
        file=config_path, field="tasks_directory",
        hint="set tasks_directory in the config, or run from a checkout that has tasks/"))
