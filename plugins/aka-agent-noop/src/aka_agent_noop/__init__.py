"""The ``noop`` agent: changes nothing, so the evaluation measures the baseline against itself.

Useful to calibrate a machine (the speedup should be about 1.0 and the reward 0) and to check a
task end to end without an LLM.
"""

from __future__ import annotations

import time
from typing import Any

from aka_core.plugin import AgentExecution, AgentInvocation, AgentSpec, hookimpl

CONFIG_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}


class NoopAgent:
    """Leaves the workspace exactly as the task delivered it."""

    def run(self, invocation: AgentInvocation) -> AgentExecution:
        started = time.monotonic()
        return AgentExecution(
            agent="noop",
            status="completed",
            exit_code=0,
            duration_seconds=time.monotonic() - started,
            message="no changes: the baseline is evaluated against itself",
        )


def make_agent(options: dict[str, Any]) -> NoopAgent:
    if options:
        raise ValueError(f"the noop agent takes no options, got {sorted(options)}")
    return NoopAgent()


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [
        AgentSpec(
            name="noop",
            factory=make_agent,
            description="Changes nothing: the baseline measured against itself",
            config_schema=CONFIG_SCHEMA,
        )
    ]
