"""The builtin executors, registered through ``aka_register_executors`` like any plugin's.

``local`` runs every task's lifecycle in this process, one after another. ``local-parallel``
spreads the tasks over worker processes on this host, one per GPU or group of ``resources``
(``aka_core.builtin.parallel``); a config that names ``local`` and GPUs in ``resources`` gets it
(``aka_core.run.execute.executor_name``). Results and reports have the same shape either way.
"""

from __future__ import annotations

from aka_core.builtin.parallel import ParallelRun
from aka_core.plugin.records import Run

LOCAL = "local"
LOCAL_PARALLEL = "local-parallel"


class LocalExecutor:
    """Each task in this process, in run order."""

    def execute(self, run: Run) -> None:
        for task_id in run.task_ids:
            run.run_task(task_id)


class ParallelExecutor:
    """Each task in a worker process of its GPU slot (the slots ``run.yaml`` recorded)."""

    def execute(self, run: Run) -> None:
        if run.task_ids:
            ParallelRun(run).run()
