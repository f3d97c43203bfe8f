"""What the core itself provides, registered through the same hooks as any plugin."""

from __future__ import annotations

from typing import Any

from aka_core.hookspecs import hookimpl
from aka_core.records import BackendSpec, ExecutorSpec, TaskFormatSpec


def _operator_format() -> Any:
    from aka_core.operator_tasks import OperatorTaskFormat

    return OperatorTaskFormat()


def _local_executor(options: dict[str, Any]) -> Any:
    from aka_core.executors import LocalExecutor

    return LocalExecutor(**options)


def _python_backend() -> Any:
    from aka_core.python_backend import PythonBackend

    return PythonBackend()


@hookimpl
def aka_register_tasks() -> list[TaskFormatSpec]:
    return [TaskFormatSpec(
        name="operator", factory=_operator_format,
        description="Operator tasks: tasks/<family>/<name>/task.yaml (schemas/task.schema.json)",
    )]


@hookimpl
def aka_register_executors() -> list[ExecutorSpec]:
    return [ExecutorSpec(
        name="local", factory=_local_executor,
        description="Runs each task's lifecycle in this process, one task after another",
        config_schema={"type": "object", "additionalProperties": False, "properties": {}},
    )]


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="python", factory=_python_backend,
        description="Plain Python/PyTorch callables (CPU or GPU); the base of compiled backends",
    )]
