"""Errors a user can hit, each saying what was wrong, where, and what to do."""

from __future__ import annotations

from pathlib import Path

import attrs

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_JUDGED = 3
"""`aka eval`: the evaluator or this host failed (an ``infra_error``): not judged, retry."""


class AkaError(Exception):
    """Base of every error aka reports to a user (printed without a traceback)."""

    exit_code = EXIT_FAILURE


@attrs.frozen
class Problem:
    """One problem in a user file: where it is and what to do about it."""

    message: str
    file: Path | None = None
    line: int | None = None
    field: str | None = None
    hint: str | None = None

    def render(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        text = where
        if self.field:
            text += f"{self.field}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class UsageError(AkaError):
    """A command was given something it cannot use (a path that is not there, a file for a
    folder). Exit status 2."""

    exit_code = EXIT_USAGE


class ConfigError(AkaError):
    """A config, task.yaml or plugin option is invalid. Exit status 2."""

    exit_code = EXIT_USAGE

    def __init__(self, problems: list[Problem] | Problem | str, file: Path | None = None):
        if isinstance(problems, str):
            problems = [Problem(problems, file=file)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems = problems
        super().__init__("\n".join(p.render() for p in problems))


class PluginError(AkaError):
    """A plugin failed to load, or a name is unknown or provided twice."""

    exit_code = EXIT_USAGE


class SelectionError(ConfigError):
    """A task selector matched nothing."""


@attrs.frozen
class SourceLocation:
    file: str | None = None
    line: int | None = None


class BuildError(Exception):
    """A candidate did not build or load; ``file``/``line`` point into the candidate's sources."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        super().__init__(where + message)
