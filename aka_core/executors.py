"""The builtin ``local`` executor: every task's lifecycle in this process, one after another.

A run whose ``resources`` name GPUs does not come here: ``aka_core.run`` hands it to the worker
processes of ``aka_core.parallel``, one per GPU or group, which run the same lifecycle.
"""

from __future__ import annotations

from pathlib import Path

from aka_core.records import TaskRunner


class LocalExecutor:
    def execute(self, run_dir: Path, task_ids: list[str], run_task: TaskRunner) -> None:
        for task_id in task_ids:
            run_task(task_id)
