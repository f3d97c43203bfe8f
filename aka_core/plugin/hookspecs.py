"""The hooks of the ``aka`` plugin project: the whole plugin surface, one place.

Each hookspec's docstring is its reference documentation (docs/plugins.md points here).
Plugins implement them with ``@hookimpl`` (from ``aka_core.plugin``) and declare an entry point in the ``aka``
group. Registration hooks are collect-all: every plugin returns a list of records and the host
flattens them. Lifecycle hooks are observers: their return values are ignored, and an exception
in one is logged and never stops a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from aka_core.models import RunConfig, TaskResult
    from aka_core.plugin.records import AgentSpec, BackendSpec, ExecutorSpec, ScorerSpec, TaskFormatSpec

PROJECT = "aka"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# --------------------------------------------------------------------------- registration


@hookspec
def aka_register_tasks() -> list[TaskFormatSpec]:
    """Return the task formats this plugin provides.

    A task format finds task folders under ``tasks/`` and loads them into ``Task`` models. The core's
    builtin ``operator`` format reads ``task.yaml`` validated by ``schemas/task.schema.json``.
    """


@hookspec
def aka_register_agents() -> list[AgentSpec]:
    """Return the agents this plugin provides.

    An agent edits a task workspace (a CLI such as Codex, a replayed solution, an RL policy) and
    reports ``AgentExecution``. ``AgentSpec.config_schema`` validates ``agent.options``.
    """


@hookspec
def aka_register_backends() -> list[BackendSpec]:
    """Return the backends (languages/runtimes) this plugin provides.

    A backend builds and loads one side's entrypoint inside a confined runner process and
    describes the device to the judge; the judge checks and times what the runners load.
    """


@hookspec
def aka_register_scorers() -> list[ScorerSpec]:
    """Return the scorers (reward functions) this plugin provides.

    ``ScorerSpec.config_schema`` validates ``scorer.options`` in a run config.
    """


@hookspec
def aka_register_executors() -> list[ExecutorSpec]:
    """Return the executors (where a task's lifecycle runs) this plugin provides.

    ``ExecutorSpec.config_schema`` validates ``executor.options`` in a run config.
    """


# --------------------------------------------------------------------------- lifecycle observers


@hookspec
def aka_before_run(run_dir: Path, config: RunConfig, task_ids: list[str]) -> None:
    """Called once before the first task of a run (or of a resumed run) starts."""


@hookspec
def aka_after_task(run_dir: Path, result: TaskResult) -> None:
    """Called after a task's ``task_result.yaml`` has been written."""


@hookspec
def aka_after_run(run_dir: Path, results: list[TaskResult]) -> None:
    """Called once after every selected task has a result and reports were written."""


@hookspec
def aka_report(run_dir: Path, results: list[TaskResult], reports_dir: Path) -> list[Path] | None:
    """Write extra report files into ``reports_dir`` (plots, dashboards); return their paths."""


REGISTRATION_HOOKS: dict[str, str] = {
    "task_format": "aka_register_tasks",
    "agent": "aka_register_agents",
    "backend": "aka_register_backends",
    "scorer": "aka_register_scorers",
    "executor": "aka_register_executors",
}

OBSERVER_HOOKS: tuple[str, ...] = ("aka_before_run", "aka_after_task", "aka_after_run", "aka_report")


def hook_names() -> list[str]:
    """Every hook of the project, for documentation checks."""
    import inspect

    module = inspect.getmodule(hook_names)
    return sorted(n for n in dir(module) if n.startswith("aka_") and callable(getattr(module, n)))
