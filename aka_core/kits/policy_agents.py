"""In-process policy agents: a Python callable instead of a CLI, for RL trainers.

The callable receives a ``TaskView`` (what a CLI agent would see) and returns the new contents of
editable files. ``policy_plugin(name, fn)`` wraps it as a plugin to register on a host, so the
whole lifecycle (workspace, integrity, evaluation, reward) runs as for any agent::

    host = PluginHost()
    host.register(policy_plugin("my-policy", generate))
    api.run("run.yaml", host=host)          # run.yaml: agent: {template: my-policy}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from aka_core.models import AgentExecution
from aka_core.plugin.hookspecs import hookimpl
from aka_core.plugin.records import AgentInvocation, AgentSpec


@attrs.frozen(kw_only=True)
class TaskView:
    task_id: str
    family: str
    backend: str
    instructions: str
    prompt: str
    entrypoint: str
    target_gpu_model: str
    files: dict[str, str]
    """Current text of each editable file."""


PolicyFn = Callable[[TaskView], Mapping[str, str]]


class PolicyAgent:
    def __init__(self, name: str, fn: PolicyFn):
        self.name = name
        self.fn = fn

    def run(self, invocation: AgentInvocation) -> AgentExecution:
        started = time.monotonic()
        task = invocation.task
        files = {rel: (invocation.workspace / rel).read_text(encoding="utf-8")
                 for rel in task.editable if (invocation.workspace / rel).is_file()}
        view = TaskView(task_id=task.id, family=task.family, backend=task.backend,
                        instructions=task.instructions, prompt=invocation.prompt,
                        entrypoint=task.entrypoint, target_gpu_model=invocation.target_gpu_model,
                        files=files)
        try:
            produced = dict(self.fn(view))
        except Exception as exc:  # the policy's failure is this task's agent failure
            return AgentExecution(agent=self.name, status="failed",
                                  duration_seconds=round(time.monotonic() - started, 3),
                                  message=f"the policy raised {type(exc).__name__}: {exc}")
        written, refused = [], []
        for rel, text in produced.items():
            if rel not in task.editable or not isinstance(text, str):
                refused.append(rel)
                continue
            (invocation.workspace / rel).write_text(text, encoding="utf-8")
            written.append(rel)
        message = f"wrote {', '.join(written) or 'nothing'}"
        if refused:
            message += f"; refused (not editable): {', '.join(refused)}"
        return AgentExecution(agent=self.name, status="completed", exit_code=0,
                              duration_seconds=round(time.monotonic() - started, 3),
                              message=message)


def policy_plugin(name: str, fn: PolicyFn, description: str = "") -> Any:
    """A plugin object registering ``fn`` as the agent ``name`` (``host.register(...)`` it)."""

    class _PolicyPlugin:
        @staticmethod
        @hookimpl
        def aka_register_agents() -> list[AgentSpec]:
            return [AgentSpec(name=name, factory=lambda options: PolicyAgent(name, fn),
                              description=description or "an in-process policy (Python callable)",
                              config_schema={"type": "object", "additionalProperties": False})]

    _PolicyPlugin.__name__ = f"policy:{name}"
    return _PolicyPlugin
