"""The ``claude-code`` agent: Anthropic's Claude Code CLI, run headless in the task workspace.

One launch per task, in the workspace (its cwd), with the prompt on stdin::

    claude -p --output-format stream-json --verbose --permission-mode bypassPermissions \
        [--model M] [--effort E] [--max-turns N] [--max-budget-usd X] [extra_args ...]

Print mode needs ``--verbose`` for ``stream-json`` (the CLI refuses the pair without it). The
prompt goes on stdin rather than as an argument: flags that take several values (``--allowedTools``,
``--add-dir`` ...) in ``extra_args`` would otherwise swallow a trailing prompt, and stdin has no
argument-length limit.

Usage comes only from the final ``{"type": "result"}`` event (the Agent SDK's ``SDKResultMessage``):

- token counts from its ``modelUsage`` (``inputTokens``, ``cacheReadInputTokens``,
  ``cacheCreationInputTokens``, ``outputTokens`` per model: every model the session used,
  subagents included) when every model carries all four; otherwise from its ``usage`` (the
  Messages API's ``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``,
  ``output_tokens``) when that carries all four; otherwise from the first of the two there is, as
  it stands (a counter it lacks is None). The two sources are never mixed: they need not cover
  the same models.
- The API counts cache reads and writes apart from ``input_tokens``, so aka's ``input_tokens`` is
  their sum, and None when one of the three is missing (a missing counter is not 0).
- ``cost_usd`` from ``total_cost_usd`` (else the sum of ``costUSD``); ``turns`` from
  ``num_turns``; no reasoning count (the API includes thinking in ``output_tokens``).

The per-message usage of ``assistant`` events is not read: their ``output_tokens`` are streaming
placeholders. A run stopped before the result event (at the time budget) reports no tokens, cost
or turns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
from jsonschema import Draft202012Validator

from aka_core import hookimpl
from aka_core.agent_runtime import (
    CliAgent,
    CliCommand,
    CliRun,
    as_float,
    as_int,
    common_agent_options_schema,
)
from aka_core.models import AgentUsage
from aka_core.records import AgentInvocation, AgentSpec

EFFORTS = ("low", "medium", "high", "xhigh", "max")

PROVIDERS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    # provider: (the switch Claude Code reads, the provider's own variables passed through when set)
    "anthropic": (None, ()),
    "bedrock": ("CLAUDE_CODE_USE_BEDROCK", (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL",
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
    )),
    "vertex": ("CLAUDE_CODE_USE_VERTEX", (
        "GOOGLE_APPLICATION_CREDENTIALS", "CLOUD_ML_REGION", "ANTHROPIC_VERTEX_PROJECT_ID",
        "ANTHROPIC_VERTEX_BASE_URL", "CLAUDE_CODE_SKIP_VERTEX_AUTH",
    )),
}

CONFIG_SCHEMA: dict[str, Any] = common_agent_options_schema({
    "effort": {"enum": list(EFFORTS),
               "description": "Reasoning effort (--effort); which levels a model accepts depends "
                              "on the model. Unset: the CLI's default."},
    "provider": {"enum": list(PROVIDERS), "default": "anthropic",
                 "description": "Where requests go: the Anthropic API (ANTHROPIC_API_KEY, "
                                "CLAUDE_CODE_OAUTH_TOKEN or a stored login), Amazon Bedrock or "
                                "Google Vertex AI (their own variables are passed through)."},
    "max_turns": {"type": "integer", "minimum": 1,
                  "description": "Stop after this many agentic turns (--max-turns)."},
    "max_budget_usd": {"type": "number", "exclusiveMinimum": 0,
                       "description": "Stop once the CLI's own cost estimate passes this many "
                                      "US dollars (--max-budget-usd)."},
})


class ClaudeCodeAgent(CliAgent):
    """``claude -p`` with stream-json output, permission prompts bypassed, cwd = the workspace."""

    name: ClassVar[str] = "claude-code"
    executable: ClassVar[str] = "claude"
    credential_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
    )
    config_dir_env: ClassVar[str | None] = "CLAUDE_CONFIG_DIR"
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = ("auth", "status")
    auth_failure_markers: ClassVar[tuple[str, ...]] = (
        "not logged in", "please run /login", "invalid api key", "invalid x-api-key",
        "authentication_error", "authentication_failed", "oauth token has expired",
    )

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        opts = self.options
        argv = [executable, "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", "bypassPermissions"]
        if opts.get("model"):
            argv += ["--model", opts["model"]]
        if opts.get("effort"):
            argv += ["--effort", opts["effort"]]
        if opts.get("max_turns") is not None:
            argv += ["--max-turns", str(opts["max_turns"])]
        if opts.get("max_budget_usd") is not None:
            argv += ["--max-budget-usd", f"{opts['max_budget_usd']:g}"]
        argv += list(opts.get("extra_args", []))
        return CliCommand(argv=argv, stdin=invocation.prompt)

    def environment(self, invocation: AgentInvocation | None, private_home: Path) -> dict[str, str]:
        """The runtime's clean environment plus the provider's variables (for runs and for
        ``aka check-agents`` alike)."""
        env = super().environment(invocation, private_home)
        env.update(self.provider_environment())
        return env

    def provider_environment(self) -> dict[str, str]:
        """The provider switch and the provider's own variables (only for bedrock and vertex:
        cloud credentials never reach a CLI that talks to the Anthropic API)."""
        switch, names = PROVIDERS[self.options.get("provider", "anthropic")]
        env = {k: os.environ[k] for k in names if k in os.environ}
        if switch:
            env[switch] = "1"
        return env

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        model = session_model(events)
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        if result is None:
            return AgentUsage(model=model)
        per_model = result.get("modelUsage")
        tokens = result_tokens(per_model, result.get("usage"))
        cost = as_float(result.get("total_cost_usd"))
        if cost is None and isinstance(per_model, dict) and per_model:
            cost = _sum_reported(per_model.values(), "costUSD", as_float)
        if model is None and isinstance(per_model, dict) and per_model:
            model = ", ".join(sorted(per_model))
        return AgentUsage(model=model, input_tokens=tokens.input_tokens,
                          cached_input_tokens=tokens.cache_read,
                          cache_write_tokens=tokens.cache_write, output_tokens=tokens.output,
                          cost_usd=cost, turns=as_int(result.get("num_turns")))

    def auth_status_ok(self, returncode: int, stdout: str, stderr: str) -> bool | None:
        """``claude auth status`` prints JSON with ``loggedIn`` (and exits 1 when it is false);
        the JSON is believed first, the exit code otherwise."""
        try:
            status = json.loads(stdout)
        except ValueError:
            status = None
        if isinstance(status, dict) and isinstance(status.get("loggedIn"), bool):
            return status["loggedIn"]
        return returncode == 0

    def is_auth_failure(self, run: CliRun) -> bool:
        """A failed exit whose stderr, final result text or an assistant ``error`` says the
        credentials were refused (not any mention of "401" in the model's own output)."""
        if run.exit_code in (0, None):
            return False
        texts = [run.stderr_tail]
        for event in run.events[-20:]:
            if event.get("type") == "result":
                if event.get("api_error_status") == 401:
                    return True
                texts += [str(event.get("result") or ""), json.dumps(event.get("errors") or [])]
            elif event.get("type") == "assistant" and event.get("error"):
                texts.append(str(event["error"]))
        text = " ".join(texts).lower()
        return any(marker in text for marker in self.auth_failure_markers)


def session_model(events: list[dict[str, Any]]) -> str | None:
    """The main model, as the CLI announced it in its ``system``/``init`` event."""
    for event in events:
        if event.get("type") == "system" and event.get("subtype") == "init":
            model = event.get("model")
            return model if isinstance(model, str) and model else None
    return None


@attrs.frozen
class Tokens:
    """The Messages API's disjoint counters of one source (``modelUsage`` or ``usage``); None where
    the source does not carry a counter."""

    uncached: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None

    @property
    def complete(self) -> bool:
        return None not in (self.uncached, self.cache_read, self.cache_write, self.output)

    @property
    def input_tokens(self) -> int | None:
        """Every prompt token: the API counts cache reads and writes apart from ``input_tokens``,
        so a total with one of them missing would be short."""
        if self.uncached is None or self.cache_read is None or self.cache_write is None:
            return None
        return self.uncached + self.cache_read + self.cache_write


def result_tokens(per_model: Any, usage: Any) -> Tokens:
    """The counters of the first complete source, ``modelUsage`` (it covers every model) then
    ``usage``; when neither is complete, the first there is, as it stands (never a mix of the two,
    which need not cover the same models)."""
    sources = [t for t in (tokens_from_model_usage(per_model), tokens_from_usage(usage))
               if t is not None]
    if not sources:
        return Tokens(None, None, None, None)
    return next((t for t in sources if t.complete), sources[0])


def tokens_from_usage(usage: Any) -> Tokens | None:
    """From the result's ``usage`` (the Messages API's snake_case fields); None without one."""
    if not isinstance(usage, Mapping):
        return None
    return Tokens(as_int(usage.get("input_tokens")), as_int(usage.get("cache_read_input_tokens")),
                  as_int(usage.get("cache_creation_input_tokens")),
                  as_int(usage.get("output_tokens")))


def tokens_from_model_usage(per_model: Any) -> Tokens | None:
    """Summed over the result's ``modelUsage`` (camelCase, one entry per model); None when there is
    no usable ``modelUsage``. A counter is summed only if every model reports it."""
    if not isinstance(per_model, Mapping) or not per_model:
        return None
    entries = list(per_model.values())
    if not all(isinstance(e, Mapping) for e in entries):
        return None
    return Tokens(_sum_reported(entries, "inputTokens", as_int),
                  _sum_reported(entries, "cacheReadInputTokens", as_int),
                  _sum_reported(entries, "cacheCreationInputTokens", as_int),
                  _sum_reported(entries, "outputTokens", as_int))


def _sum_reported(entries: Any, key: str, convert: Callable[[Any], Any]) -> Any:
    values = [convert(e.get(key)) for e in entries if isinstance(e, Mapping)]
    if not values or any(v is None for v in values):
        return None
    return sum(values)


def make_agent(options: dict[str, Any]) -> ClaudeCodeAgent:
    """Build the agent from ``agent.options`` (validated again here, for direct callers)."""
    errors = sorted(Draft202012Validator(CONFIG_SCHEMA).iter_errors(options), key=str)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "options"
        raise ValueError(f"claude-code agent options: {where}: {errors[0].message}")
    return ClaudeCodeAgent(options)


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [
        AgentSpec(
            name="claude-code",
            factory=make_agent,
            description="Claude Code CLI (claude -p, stream-json), permission prompts bypassed "
                        "in the workspace",
            config_schema=CONFIG_SCHEMA,
        )
    ]
