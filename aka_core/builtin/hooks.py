"""What the core itself provides, registered through the same hooks as any plugin."""

from __future__ import annotations

from typing import Any

from aka_core.builtin.executors import LOCAL, LOCAL_PARALLEL, LocalExecutor, ParallelExecutor
from aka_core.plugin.hookspecs import hookimpl
from aka_core.plugin.records import BackendSpec, ExecutorSpec, TaskFormatSpec


def _operator_format() -> Any:
    from aka_core.builtin.operator_tasks import OperatorTaskFormat

    return OperatorTaskFormat()


def _python_backend() -> Any:
    from aka_core.kits.python_backend import PythonBackend

    return PythonBackend()


@hookimpl
def aka_register_tasks() -> list[TaskFormatSpec]:
    return [TaskFormatSpec(
        name="operator", factory=_operator_format,
        description="Operator tasks: tasks/<family>/<name>/task.yaml (schemas/task.schema.json)",
    )]


_NO_OPTIONS = {"type": "object", "additionalProperties": False, "properties": {}}


@hookimpl
def aka_register_executors() -> list[ExecutorSpec]:
    return [
        ExecutorSpec(
            name=LOCAL, factory=lambda options: LocalExecutor(**options),
            config_schema=_NO_OPTIONS,
            description="Runs each task's lifecycle in this process, one task after another",
        ),
        ExecutorSpec(
            name=LOCAL_PARALLEL, factory=lambda options: ParallelExecutor(**options),
            config_schema=_NO_OPTIONS,
            description="Runs tasks in worker processes of this host, one per GPU or group of "
                        "`resources` (what `local` becomes when `resources` name GPUs)",
        ),
    ]


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="python", factory=_python_backend,
        description="Plain Python/PyTorch callables (CPU or GPU); the base of compiled backends",
    )]
