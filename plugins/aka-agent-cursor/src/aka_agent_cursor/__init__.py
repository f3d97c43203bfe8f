"""The ``cursor`` agent: Cursor's CLI (``cursor-agent``) run headless in the task workspace.

One launch per task, in print mode with the ``stream-json`` output format, the prompt on stdin::

    cursor-agent --print --output-format stream-json --force --trust --workspace WS \\
        [--model M] [--sandbox enabled|disabled] [extra_args ...]          < PROMPT

With ``prompt_input: argument`` the prompt is the last argument instead, as Cursor's parameter
reference documents; Linux caps one argument at 128 KiB (``MAX_ARG_STRLEN``), so a longer prompt
fails the agent step with a clear message rather than with ``E2BIG``. On stdin (the default) there
is no limit and the prompt stays out of process listings: with no positional prompt and a stdin
that is not a terminal, the CLI reads the prompt from stdin (not in Cursor's reference; relied on
by other integrations, e.g. https://github.com/multica-ai/multica/pull/5711 and
https://github.com/aaif-goose/goose/pull/10547).

The shared runtime (``aka_core.kits.agent_runtime``) runs it, streams its events to
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

The ``result`` event is the final one: a CLI still running 2 s after it is stopped. Cursor prints
its errors as text on stderr (or as lines of stdout that are not JSON), not as events, so how a
failed run ended is read there, never in the model's messages: "Authentication required", "Not
logged in" or "unauthenticated" is ``not_authenticated``; "You've hit your usage limit", "rate
limit" or ``resource_exhausted`` is ``rate_limited``; a server or network failure is
``infra_error``; a ``result`` with ``is_error`` is ``failed`` otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from aka_core.plugin import (
    AgentInvocation,
    AgentSpec,
    AgentUsage,
    CliAgent,
    CliAgentOptions,
    CliCommand,
    CliRun,
    as_int,
    common_agent_options_schema,
    hookimpl,
)

MAX_ARGUMENT_BYTES = 128 * 1024 - 1
"""The longest single command-line argument Linux accepts (``MAX_ARG_STRLEN``, 32 pages, with
its terminating NUL); a longer one fails ``execve`` with ``E2BIG``."""

QUIET_ENV = {
    # Each task has a fresh HOME, where cursor-agent would otherwise download a new CLI (~0.5 GB)
    # per task. CURSOR_DISABLE_AUTO_UPDATE is not in Cursor's documented variables; it is what
    # other harnesses set for cursor-agent (and its installer), found by searching public code.
    # A CLI that does not know it ignores it. NO_OPEN_BROWSER=1 ("print the login URL without
    # opening a browser") is among the CLI's documented variables, as listed at
    # https://www.developersdigest.tech/reference/cursor-cli/env-vars: a headless run has none.
    "CURSOR_DISABLE_AUTO_UPDATE": "1",
    "NO_OPEN_BROWSER": "1",
}

CONFIG_SCHEMA: dict[str, Any] = common_agent_options_schema({
    "sandbox": {
        "enum": ["enabled", "disabled"],
        "description": "Pass --sandbox with this value (Cursor's own sandbox for the commands the "
                       "agent runs). Unset: the CLI's default.",
    },
    "prompt_input": {
        "enum": ["stdin", "argument"],
        "default": "stdin",
        "description": "How the prompt reaches the CLI: on stdin (default: no size limit, not in "
                       "process listings) or as the last argument (Cursor's documented way; "
                       "Linux caps one argument at 128 KiB, so a longer prompt fails the agent "
                       "step). Use argument only for a CLI that does not read stdin.",
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


@attrs.frozen(kw_only=True)
class CursorOptions(CliAgentOptions):
    """``agent.options``: the CLI agents' and cursor's own (defaults: CONFIG_SCHEMA's)."""

    sandbox: str | None = None
    prompt_input: str = "stdin"
    trust_workspace: bool = True


class CursorAgent(CliAgent):
    """``cursor-agent`` in print mode, tools approved by ``--force``, in the workspace."""

    options_class: ClassVar[type[CliAgentOptions]] = CursorOptions

    name: ClassVar[str] = "cursor"
    executable: ClassVar[str] = "cursor-agent"
    credential_env: ClassVar[tuple[str, ...]] = ("CURSOR_API_KEY",)
    config_dir_env: ClassVar[str | None] = "CURSOR_CONFIG_DIR"
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = ("status",)
    auth_failure_markers: ClassVar[tuple[str, ...]] = (
        "authentication required", "not logged in", "not authenticated", "agent login",
        "invalid api key", "unauthorized", "unauthenticated",
    )

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        argv = [executable, "--print", "--output-format", "stream-json", "--force"]
        if self.options.trust_workspace:
            argv.append("--trust")
        argv += ["--workspace", str(invocation.workspace)]
        if self.options.model:
            argv += ["--model", self.options.model]
        if self.options.sandbox:
            argv += ["--sandbox", self.options.sandbox]
        argv += list(self.options.extra_args)
        if self.options.prompt_input == "stdin":
            return CliCommand(argv=argv, stdin=invocation.prompt, env=dict(QUIET_ENV))
        size = len(invocation.prompt.encode())
        if size > MAX_ARGUMENT_BYTES:
            raise ValueError(
                f"the prompt is {size} bytes and prompt_input is argument, but Linux takes at most "
                f"{MAX_ARGUMENT_BYTES} bytes in one command-line argument (MAX_ARG_STRLEN): set "
                "agent.options.prompt_input: stdin, or shorten the task's instructions")
        argv.append(invocation.prompt)
        return CliCommand(argv=argv, env=dict(QUIET_ENV))

    def is_final_event(self, event: Mapping[str, Any]) -> bool:
        """The terminal ``result`` event of print mode."""
        return event.get("type") == "result"

    def error_texts(self, run: CliRun) -> list[str]:
        """A failed ``result``'s text (Cursor's error, not the model's answer: a successful
        result's text is the answer and is never read here)."""
        result = _result(run.events)
        if result is None or not _failed(result):
            return []
        text = result.get("result") or result.get("error") or result.get("subtype")
        return [text if isinstance(text, str) else json.dumps(text)]

    def classify(self, run: CliRun) -> str | None:
        result = _result(run.events)
        failed = result is not None and _failed(result)
        if self.succeeded(run) and not failed:
            return None
        status = self.status_from_errors([*self.error_texts(run), *run.unparsed_lines,
                                          run.stderr_tail])
        return status or ("failed" if failed else None)

    def failure_reason(self, run: CliRun) -> str | None:
        texts = self.error_texts(run) or [line for line in run.unparsed_lines
                                          if "error" in line.lower()]
        if not texts and run.stderr_tail.strip():
            texts = [run.stderr_tail.strip().splitlines()[-1]]
        return texts[-1] if texts else None

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


def _result(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in reversed(events) if e.get("type") == "result"), None)


def _failed(result: Mapping[str, Any]) -> bool:
    return result.get("is_error") is True or result.get("subtype") not in (None, "success")


def prompt_tokens(uncached: int | None, read: int | None, write: int | None) -> int | None:
    """Every prompt token, from the result's disjoint counters; None when one is missing (a
    total without it would be short, and a missing count is not 0)."""
    if uncached is None or read is None or write is None:
        return None
    return uncached + read + write


def make_agent(options: CursorOptions | Mapping[str, Any]) -> CursorAgent:
    return CursorAgent(options)


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [
        AgentSpec(
            name="cursor",
            factory=make_agent,
            description="Cursor's CLI (cursor-agent --print, stream-json) in the task workspace",
            config_schema=CONFIG_SCHEMA,
            options_class=CursorOptions,
            needs_network=True,
        )
    ]
