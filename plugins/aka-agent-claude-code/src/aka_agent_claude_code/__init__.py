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

The ``result`` event is the final one: a CLI still running 2 s after it is stopped (its status
stays what the result says). How a run ended is read from the CLI's own signals, never from the
model's text:

- the result's ``subtype`` (``SDKResultMessage``): ``error_max_turns`` is ``max_turns`` (the
  ``--max-turns`` limit), ``error_max_budget_usd`` is ``budget_exhausted`` (``--max-budget-usd``),
  another error (``is_error: true``) is ``failed`` unless more is known;
- its ``api_error_status``: 429 is ``rate_limited``, 401/403 ``not_authenticated``, 5xx
  ``infra_error``;
- the ``error`` of an ``assistant`` event (``SDKAssistantMessageError``): ``rate_limit``,
  ``authentication_failed``, ``billing_error``/``server_error`` (``infra_error``);
- otherwise the result's error text, its ``errors`` and stderr (``API Error: 429``, "usage limit
  reached", "Invalid API key").

The result's subtype, API status and error text are quoted in the execution's message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
from jsonschema import Draft202012Validator

from aka_core.plugin import (
    AgentInvocation,
    AgentSpec,
    AgentUsage,
    CliAgent,
    CliAgentOptions,
    CliCommand,
    CliRun,
    as_float,
    as_int,
    common_agent_options_schema,
    hookimpl,
)

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

QUIET_ENV = {
    # https://code.claude.com/docs/en/env-vars (also the `env` table of
    # https://code.claude.com/docs/en/settings): DISABLE_AUTOUPDATER "set to 1 to disable
    # automatic updates"; CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is DISABLE_AUTOUPDATER,
    # DISABLE_BUG_COMMAND, DISABLE_ERROR_REPORTING and DISABLE_TELEMETRY together. Each task has a
    # fresh HOME: an update check (or download) per task is wasted, and telemetry is not wanted.
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}

RESULT_STATUSES = {"error_max_turns": "max_turns", "error_max_budget_usd": "budget_exhausted"}
"""``SDKResultMessage`` subtypes that say the CLI stopped at a limit it was given."""
ASSISTANT_ERRORS = {"rate_limit": "rate_limited", "authentication_failed": "not_authenticated",
                    "billing_error": "infra_error", "server_error": "infra_error"}
"""``SDKAssistantMessageError`` values (https://code.claude.com/docs/en/agent-sdk/typescript)
that are not the agent's doing; ``invalid_request``, ``max_output_tokens`` and ``unknown`` are
left to the rest of the classification."""

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


@attrs.frozen(kw_only=True)
class ClaudeCodeOptions(CliAgentOptions):
    """``agent.options``: the CLI agents' and claude-code's own (defaults: CONFIG_SCHEMA's)."""

    effort: str | None = None
    provider: str = "anthropic"
    max_turns: int | None = None
    max_budget_usd: float | None = None


class ClaudeCodeAgent(CliAgent):
    """``claude -p`` with stream-json output, permission prompts bypassed, cwd = the workspace."""

    name: ClassVar[str] = "claude-code"
    options_class: ClassVar[type[CliAgentOptions]] = ClaudeCodeOptions
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
        if opts.model:
            argv += ["--model", opts.model]
        if opts.effort:
            argv += ["--effort", opts.effort]
        if opts.max_turns is not None:
            argv += ["--max-turns", str(opts.max_turns)]
        if opts.max_budget_usd is not None:
            argv += ["--max-budget-usd", f"{opts.max_budget_usd:g}"]
        argv += list(opts.extra_args)
        return CliCommand(argv=argv, stdin=invocation.prompt)

    def environment(self, invocation: AgentInvocation | None, private_home: Path) -> dict[str, str]:
        """The runtime's clean environment plus the provider's variables (for runs and for
        ``aka check-agents`` alike), with auto-update and telemetry off."""
        env = super().environment(invocation, private_home)
        env.update(self.provider_environment())
        env.update(QUIET_ENV)
        return env

    def launch_environment(self, env: dict[str, str], *, confined: bool) -> None:
        """As root, Claude Code refuses ``bypassPermissions`` unless ``IS_SANDBOX=1``
        (anthropics/claude-code#3490). aka sets it only when it confines the CLI itself: then the
        CLI does run in a sandbox. Unconfined as root, the refusal stands (pass ``IS_SANDBOX``
        with ``pass_env`` to override it knowingly)."""
        if confined and os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"

    def is_final_event(self, event: Mapping[str, Any]) -> bool:
        """The ``result`` event ends a print-mode run (it carries the totals)."""
        return event.get("type") == "result"

    def error_texts(self, run: CliRun) -> list[str]:
        """The ``error`` codes of ``assistant`` events (with the CLI's own text when the message
        is the CLI's, model ``<synthetic>``) and a failed result's subtype, API status, error
        text and ``errors``; never what the model wrote."""
        texts: list[str] = []
        for event in run.events:
            if event.get("type") == "assistant" and event.get("error"):
                texts.append(f"assistant error {event['error']}"
                             + (f": {synthetic}" if (synthetic := _synthetic_text(event)) else ""))
        result = final_result(run.events)
        if result is not None and result_failed(result):
            texts.append(result_summary(result))
        return texts

    def classify(self, run: CliRun) -> str | None:
        """From the result's ``subtype`` and ``api_error_status``, the assistant ``error`` codes,
        then the error texts and stderr (see the module's docstring)."""
        result = final_result(run.events)
        failed = result is not None and result_failed(result)
        if failed:
            assert result is not None
            if result.get("subtype") in RESULT_STATUSES:
                return RESULT_STATUSES[result["subtype"]]
            by_http = http_status(result.get("api_error_status"))
            if by_http:
                return by_http
        elif self.succeeded(run):
            return None
        for event in reversed(run.events):
            code = event.get("error") if event.get("type") == "assistant" else None
            if code in ASSISTANT_ERRORS:
                return ASSISTANT_ERRORS[code]
        by_text = self.status_from_errors([*self.error_texts(run), run.stderr_tail])
        return by_text or ("failed" if failed else None)

    def failure_reason(self, run: CliRun) -> str | None:
        texts = self.error_texts(run)
        return "; ".join(texts) if texts else None

    def provider_environment(self) -> dict[str, str]:
        """The provider switch and the provider's own variables (only for bedrock and vertex:
        cloud credentials never reach a CLI that talks to the Anthropic API)."""
        switch, names = PROVIDERS[self.options.provider]
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



def final_result(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in reversed(events) if e.get("type") == "result"), None)


def result_failed(result: Mapping[str, Any]) -> bool:
    """An error result: ``is_error`` (the CLI sets it with subtype ``success`` for API errors
    too) or an ``error_*`` subtype."""
    return result.get("is_error") is True or str(result.get("subtype", "")).startswith("error")


def result_summary(result: Mapping[str, Any]) -> str:
    """A failed result in the CLI's words: subtype, API status, its text, its ``errors``."""
    text = f"result {result.get('subtype')}"
    if result.get("api_error_status") is not None:
        text += f" (API status {result['api_error_status']})"
    if isinstance(result.get("result"), str) and result["result"].strip():
        text += f": {result['result'].strip()[:300]}"
    errors = result.get("errors")
    if isinstance(errors, list) and errors:
        text += "; errors: " + "; ".join(str(e) for e in errors)[:300]
    return text


def http_status(code: Any) -> str | None:
    """The status an HTTP error of the API means."""
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    if code == 429:
        return "rate_limited"
    if code in (401, 403):
        return "not_authenticated"
    if 500 <= code < 600:
        return "infra_error"
    return None


def _synthetic_text(event: Mapping[str, Any]) -> str:
    """The text of an ``assistant`` message the CLI wrote itself (model ``<synthetic>``: an API
    error it reports), never a model's."""
    message = event.get("message")
    if not isinstance(message, Mapping) or message.get("model") != "<synthetic>":
        return ""
    content = message.get("content")
    parts = [c.get("text", "") for c in content if isinstance(c, Mapping)] if isinstance(
        content, list) else []
    return " ".join(p for p in parts if isinstance(p, str)).strip()[:300]


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


def make_agent(options: ClaudeCodeOptions | Mapping[str, Any]) -> ClaudeCodeAgent:
    """Build the agent from ``agent.options`` (a direct caller's mapping is validated here)."""
    errors = [] if isinstance(options, ClaudeCodeOptions) else sorted(
        Draft202012Validator(CONFIG_SCHEMA).iter_errors(options), key=str)
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
            options_class=ClaudeCodeOptions,
            needs_network=True,
        )
    ]
