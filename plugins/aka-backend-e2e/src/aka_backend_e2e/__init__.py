"""aka-backend-e2e: end-to-end serving tasks, a task format ``e2e`` and a backend ``e2e``.

An e2e task (``tasks/e2e/<name>/``: ``workload.yaml``, ``workload.lock``, ``kernels/``,
``instructions.md``) asks for faster kernels inside a model server. The format's judge
(``judge.E2EJudge``) serves the workload with the baseline kernels and with the candidate's, each
engine in a confined process of its own, checks the replaced kernels against FP32 references and
the generated sequences against an FP32 reference model, and scores the measured throughput
ratio. See docs/e2e.md.
"""

from __future__ import annotations

from typing import Any

from aka_core.plugin import BackendSpec, TaskFormatSpec, hookimpl


def _format() -> Any:
    from aka_backend_e2e.task_format import E2ETaskFormat

    return E2ETaskFormat()


def _judge() -> Any:
    from aka_backend_e2e.judge import E2EJudge

    return E2EJudge()


def _backend() -> Any:
    from aka_backend_e2e.backend import E2EBackend

    return E2EBackend()


@hookimpl
def aka_register_tasks() -> list[TaskFormatSpec]:
    return [TaskFormatSpec(
        name="e2e", factory=_format, marker_file="workload.yaml", judge=_judge,
        description="end-to-end serving tasks: tasks/e2e/<name>/workload.yaml; the server's "
                    "throughput with the candidate's kernels against the baseline's, with "
                    "model-level correctness")]


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="e2e", factory=_backend,
        description="kernel trees (Python: PyTorch, Triton) served inside a model server "
                    "(builtin engine; vLLM, SGLang where installed)")]
