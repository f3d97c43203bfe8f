"""The ``docker`` executor: each task's lifecycle (agent and evaluation) in a container of an aka
image, with the GPU passed through, the run directory bind-mounted, the tasks folder read-only,
and memory and process limits. See this plugin's README for what it isolates and what it does not.

The docker SDK is imported only when a run or a check uses the executor.
"""

from __future__ import annotations

from aka_core.plugin import ExecutorSpec, hookimpl
from aka_executor_docker.executor import DockerExecutor, make_executor
from aka_executor_docker.options import CONFIG_SCHEMA, DockerOptions

__all__ = ["CONFIG_SCHEMA", "DockerExecutor", "DockerOptions", "aka_register_executors",
           "make_executor"]


@hookimpl
def aka_register_executors() -> list[ExecutorSpec]:
    return [
        ExecutorSpec(
            name="docker",
            factory=make_executor,
            description="Each task in a container of an aka image (GPU passed through)",
            config_schema=CONFIG_SCHEMA,
            options_class=DockerOptions,
            # The GPU is checked against the target inside each container, where torch sees it.
            runs_elsewhere=True,
        )
    ]
