"""The ``cursor`` agent: Cursor's CLI (``cursor-agent``) run headless in the task workspace.

One launch per task, in print mode with the ``stream-json`` output format::

    cursor-agent --print --output-format stream-json --force --trust --workspace WS \\
        [--model M] [--sandbox enabled|disabled] [extra_args ...] PROMPT

The shared runtime (``aka_core.agent_runtime``) runs it, streams its events to
``logs/agent.jsonl``, stops it at the budget and records the execution. What this module adds is
the command line and the reading of usage from Cursor's own events:

- the model is the ``model`` of the ``system``/``init`` event (Cursor's display name);
- token counts come from a ``usage`` object on the terminal ``result`` event, when the CLI writes
  one (``inputTokens``, ``outputTokens``, ``cacheReadTokens``, ``cacheWriteTokens``); Cursor's
  output-format reference does not list that object, so a CLI that does not write it leaves the
  counts None;
- its ``inputTokens`` excludes the cached tokens (the object counts reads and writes apart, as the
  Anthropic API does), so aka's ``input_tokens`` is the sum of the three, and None when one of
  them is missing; ``cached_input_tokens`` is ``cacheReadTokens``, ``cache_write_tokens``
  ``cacheWriteTokens``;
- cost, reasoning and turns are never reported by the format, so they stay None.
"""

from __future__ import annotations

from typing import Any, ClassVar

from aka_core import hookimpl
from aka_core.agent_runtime import (
    CliAgent,
    CliCommand,
    as_int,
    common_agent_options_schema,
)
from aka_core.models import AgentUsage
from aka_core.records import AgentInvocation, AgentSpec

CONFIG_SCHEMA: dict[str, Any] = common_agent_options_schema({
    "sandbox": {
        "enum": ["enabled", "disabled"],
        "description": "Pass --sandbox with this value (Cursor's own sandbox for the commands the "
                       "agent runs). Unset: the CLI's default.",
    },
    "trust_workspace": {
        "type": "boolean",
        "default": True,
        "description": "Pass --trust so the CLI does not stop on its workspace-trust question "
                       "(a headless run has nobody to answer it). Turn off only for a CLI too old "
                       "to know the flag.",
    },
})

STATUS_LOGGED_OUT_MARKERS = ("not logged in", "not authenticated", "authentication required")
"""What ``cursor-agent status`` prints when nobody is logged in (it may still exit 0)."""


class CursorAgent(CliAgent):
    """``cursor-agent`` in print mode, tools approved by ``--force``, in the workspace."""

    name: ClassVar[str] = "cursor"
    executable: ClassVar[str] = "cursor-agent"
    credential_env: ClassVar[tuple[str, ...]] = ("CURSOR_API_KEY",)
    config_dir_env: ClassVar[str | None] = "CURSOR_CONFIG_DIR"
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = ("status",)
    auth_failure_markers: ClassVar[tuple[str, ...]] = (
        "authentication required", "not logged in", "not authenticated", "agent login",
        "invalid api key", "unauthorized",
    )

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        argv = [executable, "--print", "--output-format", "stream-json", "--force"]
        if self.options.get("trust_workspace", True):
            argv.append("--trust")
        argv += ["--workspace", str(invocation.workspace)]
        if self.options.get("model"):
            argv += ["--model", self.options["model"]]
        if self.options.get("sandbox"):
            argv += ["--sandbox", self.options["sandbox"]]
        argv += list(self.options.get("extra_args", []))
        argv.append(invocation.prompt)
        return CliCommand(argv=argv)

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        model = None
        result: dict[str, Any] | None = None
        for event in events:
            kind = event.get("type")
            if kind == "system" and event.get("subtype") == "init":
                if isinstance(event.get("model"), str) and event["model"]:
                    model = event["model"]
            elif kind == "result":
                result = event
        tokens = (result or {}).get("usage")
        if not isinstance(tokens, dict):
            tokens = {}
        uncached = as_int(tokens.get("inputTokens"))
        read = as_int(tokens.get("cacheReadTokens"))
        write = as_int(tokens.get("cacheWriteTokens"))
        return AgentUsage(
            model=model,
            input_tokens=prompt_tokens(uncached, read, write),
            cached_input_tokens=read,
            cache_write_tokens=write,
            output_tokens=as_int(tokens.get("outputTokens")),
            cost_usd=None,  # the format has no cost
            turns=None,  # the format does not define turns
        )

    def auth_status_ok(self, returncode: int, stdout: str, stderr: str) -> bool | None:
        """Read the status text too: ``cursor-agent status`` has been seen to exit 0 while
        saying that nobody is logged in."""
        text = f"{stdout}\n{stderr}".lower()
        return returncode == 0 and not any(m in text for m in STATUS_LOGGED_OUT_MARKERS)


def prompt_tokens(uncached: int | None, read: int | None, write: int | None) -> int | None:
    """Every prompt token, from the result's disjoint counters; None when one is missing (a
    total without it would be short, and a missing count is not 0)."""
    if uncached is None or read is None or write is None:
        return None
    return uncached + read + write


def make_agent(options: dict[str, Any]) -> CursorAgent:
    return CursorAgent(options)


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [
        AgentSpec(
            name="cursor",
            factory=make_agent,
            description="Cursor's CLI (cursor-agent --print, stream-json) in the task workspace",
            config_schema=CONFIG_SCHEMA,
        )
    ]
