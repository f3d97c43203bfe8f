"""The ``slurm`` executor: every task of a run as a Slurm job, on a shared filesystem.

Each job runs ``aka run-task RUN_DIR TASK_ID`` on a compute node; results land in the run
directory the submitting ``aka run`` created. See the README for the options, resume and
containers.
"""

from __future__ import annotations

from aka_core.plugin import ExecutorSpec, hookimpl
from aka_executor_slurm.executor import SlurmExecutor
from aka_executor_slurm.options import CONFIG_SCHEMA, SlurmOptions


def make_executor(options: SlurmOptions) -> SlurmExecutor:
    """The record's factory: ``options`` typed by the core from the run config's
    ``executor.options`` (``ExecutorSpec.make``)."""
    return SlurmExecutor(options)


@hookimpl
def aka_register_executors() -> list[ExecutorSpec]:
    return [
        ExecutorSpec(
            name="slurm",
            factory=make_executor,
            description="Each task as a Slurm job (sbatch); results in the shared run directory",
            config_schema=CONFIG_SCHEMA,
            options_class=SlurmOptions,
            runs_elsewhere=True,
        )
    ]


__all__ = ["CONFIG_SCHEMA", "SlurmExecutor", "SlurmOptions", "aka_register_executors",
           "make_executor"]
