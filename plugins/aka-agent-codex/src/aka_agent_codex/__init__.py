"""The ``codex`` agent: OpenAI's Codex CLI run headless (``codex exec``) in the task workspace.

One launch per task, JSON Lines on stdout, the prompt on stdin::

    codex exec --json --color never --skip-git-repo-check \\
        --dangerously-bypass-approvals-and-sandbox --cd WORKSPACE \\
        -c check_for_update_on_startup=false -c analytics.enabled=false \\
        [-m MODEL] [-p PROFILE] [-c model_reasoning_effort="E"] [-c model_provider="P"] \\
        [extra_args ...] -

The shared runtime (``aka_core.kits.agent_runtime``) runs it in the workspace, streams its events to
``logs/agent.jsonl``, stops it at the budget and records the execution. What this module adds is
the command line and the reading of usage from Codex's own events:

- ``turn.completed`` carries ``usage`` with ``input_tokens``, ``cached_input_tokens`` and
  ``output_tokens`` (``Usage`` in ``codex-rs/exec/src/exec_events.rs``). Codex fills it from the
  thread's running total (not a per-turn delta), so the last ``turn.completed`` holds the whole
  run's tokens. OpenAI counts cached tokens inside ``input_tokens``, which is therefore aka's
  ``input_tokens`` as it stands. Builds that add ``reasoning_output_tokens`` and
  ``cache_write_input_tokens`` (the names of Codex's own ``TokenUsage``) to that object have them
  read too; otherwise reasoning and cache writes stay None.
- The format has no cost and no count of turns or model steps (a ``turn.completed`` ends the one
  turn of ``codex exec``, however many model calls it took), so ``cost_usd`` and ``turns`` stay
  None.
- No event names the model. ``model`` is the one this agent passed with ``-m`` (None when Codex
  chose its default), or the target of a ``model rerouted: A -> B`` notice when Codex reports one.

``codex exec`` runs one turn, so ``turn.completed`` or ``turn.failed`` is its final event: a CLI
still running 2 s after it is stopped. How a run ended comes from Codex's own error reports, the
``error`` events and the ``turn.failed`` error (``ThreadErrorEvent``, ``TurnFailedEvent``), and its
stderr, never from the agent's messages: "401 Unauthorized", "Incorrect API key" or "not logged in"
is ``not_authenticated``; "429 Too Many Requests", "rate limit" or "usage limit" is
``rate_limited``; a 5xx status, "stream disconnected before completion", "error sending request"
or an exhausted quota is ``infra_error``; any other failed turn is ``failed``. The last error
Codex reported is quoted in the execution's message. Codex has no turn or spending limit of its
own, so never ``max_turns`` nor ``budget_exhausted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
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

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

CONFIG_SCHEMA: dict[str, Any] = common_agent_options_schema({
    "reasoning_effort": {
        "enum": list(REASONING_EFFORTS),
        "description": "Passed as -c model_reasoning_effort=...; which values a model accepts "
                       "depends on the model. Unset: Codex's default.",
    },
    "model_provider": {
        "type": "string", "minLength": 1,
        "description": "Passed as -c model_provider=...: a built-in provider id or one defined "
                       "under [model_providers] in the config folder's config.toml.",
    },
    "profile": {
        "type": "string", "minLength": 1,
        "description": "Passed as --profile: a [profiles.NAME] table of config.toml (needs "
                       "config_dir, since a fresh config folder has no config.toml).",
    },
})

# ``codex exec`` prints these (in error events or on stderr) when its credentials are refused
# or missing. They are matched in Codex's error reports only, never in the agent's messages.
AUTH_FAILURE_MARKERS = (
    "unauthorized", "not logged in", "please log in", "incorrect api key", "invalid api key",
    "codex login",
)

QUIET_ARGS = (
    # `check_for_update_on_startup`: "Check for Codex updates on startup" (Codex's configuration
    # reference, https://developers.openai.com/codex/config-reference); `analytics.enabled`:
    # usage analytics (added in https://github.com/openai/codex/pull/8350). Each task has a
    # fresh CODEX_HOME: an update check per task is wasted, and analytics are not wanted. Codex
    # ignores a key it does not know, so older releases run unchanged.
    "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
)

_REROUTED = re.compile(r"^model rerouted: (?P<source>\S+) -> (?P<target>\S+)")


@attrs.frozen(kw_only=True)
class CodexOptions(CliAgentOptions):
    """``agent.options``: the CLI agents' and codex's own (defaults: CONFIG_SCHEMA's)."""

    reasoning_effort: str | None = None
    model_provider: str | None = None
    profile: str | None = None


class CodexAgent(CliAgent):
    """``codex exec --json`` with its sandbox and approvals bypassed, rooted in the workspace."""

    options_class: ClassVar[type[CliAgentOptions]] = CodexOptions

    name: ClassVar[str] = "codex"
    executable: ClassVar[str] = "codex"
    # CODEX_API_KEY is the key ``codex exec`` itself reads; OPENAI_API_KEY is read by model
    # providers whose env_key names it (the CLI's own login ignores it).
    credential_env: ClassVar[tuple[str, ...]] = ("CODEX_API_KEY", "OPENAI_API_KEY")
    # `codex login status` looks only at the stored login; `codex exec` logs in with CODEX_API_KEY.
    api_key_env: ClassVar[tuple[str, ...] | None] = ("CODEX_API_KEY",)
    config_dir_env: ClassVar[str | None] = "CODEX_HOME"
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = ("login", "status")
    auth_failure_markers: ClassVar[tuple[str, ...]] = AUTH_FAILURE_MARKERS

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        argv = [executable, "exec", "--json", "--color", "never", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "--cd", str(invocation.workspace.resolve()), *QUIET_ARGS]
        if self.options.model:
            argv += ["--model", self.options.model]
        if self.options.profile:
            argv += ["--profile", self.options.profile]
        if self.options.reasoning_effort:
            argv += ["-c", f"model_reasoning_effort={toml_string(self.options.reasoning_effort)}"]
        if self.options.model_provider:
            argv += ["-c", f"model_provider={toml_string(self.options.model_provider)}"]
        argv += list(self.options.extra_args)
        # "-": read the prompt from stdin (no argv length limit, no quoting issues).
        argv.append("-")
        return CliCommand(argv=argv, stdin=invocation.prompt)

    def environment(self, invocation: AgentInvocation | None,
                    private_home: Path) -> dict[str, str]:
        env = super().environment(invocation, private_home)
        # Codex refuses to start when CODEX_HOME names a folder that does not exist, and resolves
        # a relative one against its own working directory (the workspace).
        home = Path(env["CODEX_HOME"]).expanduser().absolute()
        env["CODEX_HOME"] = str(home)
        if home.is_relative_to(private_home.absolute()):
            home.mkdir(parents=True, exist_ok=True)
        return env

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        model = self.options.model
        last: dict[str, Any] | None = None
        for event in events:
            kind = event.get("type")
            if kind == "turn.completed":
                tokens = event.get("usage")
                last = tokens if isinstance(tokens, dict) else {}
            elif kind == "item.completed":
                rerouted = _rerouted_to(event.get("item"))
                if rerouted:
                    model = rerouted
        tokens = last or {}
        return AgentUsage(
            model=model or None,
            input_tokens=as_int(tokens.get("input_tokens")),  # cached tokens included
            cached_input_tokens=as_int(tokens.get("cached_input_tokens")),
            cache_write_tokens=as_int(tokens.get("cache_write_input_tokens")),
            output_tokens=as_int(tokens.get("output_tokens")),
            reasoning_tokens=as_int(tokens.get("reasoning_output_tokens")),
            cost_usd=None,  # Codex reports no cost
            turns=None,  # nor a count of turns: turn.completed events are not one
        )

    def is_final_event(self, event: Mapping[str, Any]) -> bool:
        """The end of ``codex exec``'s one turn."""
        return event.get("type") in ("turn.completed", "turn.failed")

    def error_texts(self, run: CliRun) -> list[str]:
        """The messages of ``error`` events and of a ``turn.failed`` error. Not ``error`` items
        (``item.completed`` with an error item): those are notices such as a model reroute."""
        texts = []
        for event in run.events:
            if event.get("type") == "error" and isinstance(event.get("message"), str):
                texts.append(event["message"])
            elif event.get("type") == "turn.failed":
                error = event.get("error")
                message = error.get("message") if isinstance(error, Mapping) else None
                texts.append(message if isinstance(message, str) else json.dumps(error))
        return texts

    def classify(self, run: CliRun) -> str | None:
        last = next((e.get("type") for e in reversed(run.events)
                     if e.get("type") in ("turn.completed", "turn.failed")), None)
        if self.succeeded(run) and last != "turn.failed":
            return None
        status = self.status_from_errors([*self.error_texts(run), run.stderr_tail])
        return status or ("failed" if last == "turn.failed" else None)


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string, the way ``-c key=value`` parses its right-hand side."""
    return json.dumps(value, ensure_ascii=False)


def _rerouted_to(item: Any) -> str | None:
    """The model of a ``model rerouted: A -> B (...)`` notice, which Codex emits as an error
    item when the service answers with another model than the one asked for."""
    if not isinstance(item, dict) or item.get("type") != "error":
        return None
    match = _REROUTED.match(str(item.get("message", "")))
    return match["target"] if match else None


def make_agent(options: CodexOptions | Mapping[str, Any]) -> CodexAgent:
    return CodexAgent(options)


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [
        AgentSpec(
            name="codex",
            factory=make_agent,
            description="OpenAI's Codex CLI (codex exec --json) in the task workspace",
            config_schema=CONFIG_SCHEMA,
            options_class=CodexOptions,
            needs_network=True,
        )
    ]
