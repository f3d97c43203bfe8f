"""The ``deepseek`` agent: DeepSeek Harness (``dsh``) run headless in the task workspace.

The command line (see README.md, "Sources", for where each piece is documented)::

    dsh --profile headless [--patch FILE]... --json - [extra_args...]      (task on stdin)

``--profile headless`` boots dsh's one-shot app, ``--patch`` adds launcher overlays (one of them
sets the model when ``model`` is given), ``--json`` makes stdout newline-delimited run events and
``-`` reads the task from stdin. ``DSH_PERMISSION_MODE`` (default ``workspace-write``) confines the
agent's file effects to its working directory, which is the workspace.

Usage comes only from the event stream (``packages/bundle/headless/src/json-stream.ts``): each
``{"type": "status", "phase": "step_end", "turn", "step"}`` event carries the provider's token
counts for that model step (``inputTokens``, ``outputTokens``, and ``cacheReadTokens``,
``cacheWriteTokens``, ``reasoningTokens`` where the provider reported them), all of its attempts
summed, or no ``usage`` at all when an attempt went unreported. dsh's counts are disjoint:
``inputTokens`` excludes the cache reads and writes it reports apart, and nothing is taken out of
it for a bucket it does not report; aka's ``input_tokens`` adds them back. The stream has no
run-level total, no model name and no cost (those two stay None).

The totals are sums over the steps, so they are only right if every ``step_end`` was read. Past
``MAX_EVENTS_KEPT`` events the runtime keeps only the first events and the latest; since dsh numbers
the steps of a turn 1, 2, 3 ..., a gap in the numbering of the ``step_end`` events kept shows that
steps were dropped, and then no total (tokens or steps) is reported rather than a partial one.
Events dropped between two kept steps (text, tool calls) change nothing.

``final`` (the run's answer) or ``error`` (a failure outside a turn) is the last event of a run
(``packages/bundle/headless/src/index.ts``): a CLI still running 2 s after it is stopped. How a run
ended comes from dsh's error codes (``HarnessError.code``, "route on this, never by parsing
``message``": ``packages/llm/llm/src/error.ts``), in the ``turn_end`` event's error ``reason`` and
in its ``dsh: <CODE>: <message>`` stderr line, never from the model's text: ``RATE_LIMIT`` is
``rate_limited``; ``AUTH``, ``MISSING_CREDENTIAL``, ``INVALID_CREDENTIAL`` are
``not_authenticated``; ``QUOTA`` (an exhausted balance), ``SERVER``, ``EMPTY_RESPONSE`` and
``SANDBOX_UNAVAILABLE`` are ``infra_error``; another code is ``failed``.

The flags (``--profile headless``, ``--json``, ``-`` for stdin) are those of the 0.2 line;
``--version`` below 0.2, or one that cannot be read, adds a warning to the execution's message and
the log (the run still goes ahead: ``headless_args`` and ``output_format_args`` may adapt it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from aka_core.plugin import (
    MAX_EVENTS_KEPT,
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
    strip_ansi,
)

ERROR_CODE_STATUSES = {
    "RATE_LIMIT": "rate_limited",
    "AUTH": "not_authenticated", "MISSING_CREDENTIAL": "not_authenticated",
    "INVALID_CREDENTIAL": "not_authenticated",
    "QUOTA": "infra_error", "SERVER": "infra_error", "EMPTY_RESPONSE": "infra_error",
    "SANDBOX_UNAVAILABLE": "infra_error",
}
"""dsh's error codes that say more than ``failed``."""
FLAGS_SINCE: tuple[int, int] = (0, 2)
"""The release line whose headless flags and ``--json`` stream this agent uses."""
_STDERR_CODE = re.compile(r"^dsh: ([A-Z][A-Z0-9_]+): ", re.MULTILINE)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")

DEFAULT_HEADLESS_ARGS: tuple[str, ...] = ("--profile", "headless")
DEFAULT_OUTPUT_FORMAT_ARGS: tuple[str, ...] = ("--json",)
STDIN_TASK = "-"
"""dsh's marker for "read the task from stdin"."""
DEFAULT_PROVIDER = "deepseek-official"
"""The provider route dsh's base bundle ships for DeepSeek's own API."""
PERMISSION_MODES = ("read-only", "workspace-write", "danger-full-access")
MODEL_PATCH_FILE = "dsh-model.patch.yml"

CONFIG_SCHEMA: dict[str, Any] = common_agent_options_schema({
    "provider": {
        "type": "string", "minLength": 1,
        "description": f"Provider route of `model` (dsh's `agent-default-model` row); default "
                       f"{DEFAULT_PROVIDER!r}. Needs `model`.",
    },
    "reasoning_effort": {
        "type": "string", "minLength": 1,
        "description": "Reasoning effort level for `model` (for example high or max; the levels "
                       "depend on the model). Needs `model`.",
    },
    "permission_mode": {
        "enum": list(PERMISSION_MODES), "default": "workspace-write",
        "description": "DSH_PERMISSION_MODE: workspace-write lets the agent write only under its "
                       "working directory (the workspace); danger-full-access lifts the sandbox "
                       "entirely.",
    },
    "patches": {
        "type": "array", "items": {"type": "string", "minLength": 1}, "default": [],
        "description": "More dsh patch overlays (`--patch FILE`), in order; relative paths are "
                       "relative to the current directory.",
    },
    "telemetry": {
        "type": "boolean", "default": False,
        "description": "Leave dsh's feedback telemetry on (off by default: "
                       "DSH_TELEMETRY_DISABLED=1).",
    },
    "headless_args": {
        "type": "array", "items": {"type": "string"}, "default": list(DEFAULT_HEADLESS_ARGS),
        "description": "The launcher arguments that select the one-shot app.",
    },
    "output_format_args": {
        "type": "array", "items": {"type": "string"}, "default": list(DEFAULT_OUTPUT_FORMAT_ARGS),
        "description": "The app arguments that make stdout a JSON event stream.",
    },
})
CONFIG_SCHEMA["dependentRequired"] = {"provider": ["model"], "reasoning_effort": ["model"]}


@attrs.frozen(kw_only=True)
class DeepSeekOptions(CliAgentOptions):
    """``agent.options``: the CLI agents' and deepseek's own (defaults: CONFIG_SCHEMA's)."""

    provider: str | None = None
    """None: ``DEFAULT_PROVIDER`` (for ``model``)."""
    reasoning_effort: str | None = None
    permission_mode: str = "workspace-write"
    patches: tuple[str, ...] = ()
    telemetry: bool = False
    headless_args: tuple[str, ...] = DEFAULT_HEADLESS_ARGS
    output_format_args: tuple[str, ...] = DEFAULT_OUTPUT_FORMAT_ARGS


class DeepSeekAgent(CliAgent):
    """DeepSeek Harness's ``dsh``, one headless task per invocation."""

    options_class: ClassVar[type[CliAgentOptions]] = DeepSeekOptions

    name: ClassVar[str] = "deepseek"
    executable: ClassVar[str] = "dsh"
    credential_env: ClassVar[tuple[str, ...]] = ("DEEPSEEK_API_KEY",)
    config_dir_env: ClassVar[str | None] = "DSH_HOME"
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = None  # dsh has no login-status command
    auth_failure_markers: ClassVar[tuple[str, ...]] = (
        "missing_credential",  # a credential reference that resolves to nothing
        "dsh: auth:",  # `dsh: <code>: <message>` on stderr; HTTP 401/403 map to code AUTH
        '"code": "auth"',
        "authentication fails",  # the DeepSeek API's own 401 message
        "invalid api key",
        "unauthorized",
    )

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        options = self.options
        argv = [executable, *options.headless_args]
        for patch in options.patches:
            argv += ["--patch", str(Path(patch).expanduser().resolve())]
        model_patch = self.write_model_patch(invocation.logs_dir)
        if model_patch is not None:  # last, so that it wins over the user's overlays
            argv += ["--patch", str(model_patch)]
        argv += [*options.output_format_args, STDIN_TASK, *options.extra_args]
        env = {"DSH_PERMISSION_MODE": options.permission_mode}
        if not options.telemetry:
            env["DSH_TELEMETRY_DISABLED"] = "1"
        return CliCommand(argv=argv, stdin=invocation.prompt, env=env)

    def is_final_event(self, event: Mapping[str, Any]) -> bool:
        """``final`` closes a run; ``error`` reports one that failed outside a turn."""
        return event.get("type") in ("final", "error")

    def error_texts(self, run: CliRun) -> list[str]:
        """``CODE: message`` of every ``turn_end`` with an error reason, and the message of
        ``error`` events."""
        texts = []
        for event in run.events:
            if event.get("type") == "status" and event.get("phase") == "turn_end":
                code, message = _turn_error(event)
                if code or message:
                    texts.append(f"{code or 'ERROR'}: {message}")
            elif event.get("type") == "error":
                texts.append(str(event.get("message", "")))
        return texts

    def error_codes(self, run: CliRun) -> list[str]:
        """dsh's error codes, from its events, then from its stderr (``dsh: CODE: message``)."""
        codes = [code for event in run.events
                 if event.get("type") == "status" and event.get("phase") == "turn_end"
                 for code in [_turn_error(event)[0]] if code]
        return codes + _STDERR_CODE.findall(strip_ansi(run.stderr_tail))

    def classify(self, run: CliRun) -> str | None:
        texts = self.error_texts(run)
        if self.succeeded(run) and not texts:
            return None
        for code in reversed(self.error_codes(run)):
            if code in ERROR_CODE_STATUSES:
                return ERROR_CODE_STATUSES[code]
        status = self.status_from_errors([*texts, run.stderr_tail])
        return status or ("failed" if texts else None)

    def version_warning(self, version: str | None) -> str | None:
        """The headless flags this agent passes are those of dsh 0.2; an older dsh (0.1.x has no
        ``--json``), or one whose version cannot be read, may not understand them."""
        wanted = ".".join(map(str, FLAGS_SINCE))
        match = _VERSION.search(version or "")
        if match is None:
            return (f"dsh's version is unknown ({version!r}); this agent's flags (--profile "
                    f"headless, --json, -) are those of dsh {wanted}: if its output is not JSON "
                    "events, upgrade dsh or set headless_args/output_format_args")
        found = (int(match[1]), int(match[2]))
        if found < FLAGS_SINCE:
            return (f"dsh --version says {version!r}, older than {wanted}, whose flags this agent passes "
                    "(--profile headless, --json, -); upgrade dsh (npm install -g "
                    "@deepseek-ai/dsh) or set headless_args/output_format_args for this release")
        return None

    def write_model_patch(self, logs_dir: Path) -> Path | None:
        """A patch overlay that replaces the config of dsh's ``agent-default-model`` row (the model
        fresh sessions start on); None when no ``model`` is set. JSON is valid YAML."""
        model = self.options.model
        if not model:
            if self.options.provider or self.options.reasoning_effort:
                raise ValueError("provider and reasoning_effort need agent.options.model")
            return None
        config = {"provider": self.options.provider or DEFAULT_PROVIDER, "model": model}
        if self.options.reasoning_effort:
            config["reasoningEffort"] = self.options.reasoning_effort
        path = logs_dir / MODEL_PATCH_FILE
        path.write_text(json.dumps([{"id": "agent-default-model", "config": config}], indent=2)
                        + "\n", encoding="utf-8")
        return path

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        """Sums the per-step usage of ``status``/``step_end`` events.

        ``input_tokens`` counts every prompt token, cache hits included (the DeepSeek API's
        ``prompt_tokens``): ``inputTokens`` plus the cache reads and writes dsh reports apart. A
        step without usage makes every token total unknown, and a step without one of the optional
        buckets (``cacheReadTokens``, ``cacheWriteTokens``, ``reasoningTokens``) makes that
        bucket's total unknown: a partial sum would read as an exact one. So does a step the
        runtime dropped from a very long stream, for every total.
        """
        steps = [e for e in events if e.get("type") == "status" and e.get("phase") == "step_end"]
        if not steps or steps_were_dropped(events, steps):
            return AgentUsage()
        inputs: list[int | None] = []
        cached: list[int | None] = []
        written: list[int | None] = []
        outputs: list[int | None] = []
        reasoning: list[int | None] = []
        for step in steps:
            usage = step.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            uncached = as_int(usage.get("inputTokens"))
            read = as_int(usage.get("cacheReadTokens"))
            write = as_int(usage.get("cacheWriteTokens"))
            # A bucket dsh does not report was not taken out of inputTokens (its DeepSeek
            # translation subtracts the cache hits only when the API reports them): 0 to add back.
            inputs.append(None if uncached is None else uncached + (read or 0) + (write or 0))
            cached.append(read)
            written.append(write)
            outputs.append(as_int(usage.get("outputTokens")))
            reasoning.append(as_int(usage.get("reasoningTokens")))
        return AgentUsage(input_tokens=_total(inputs), cached_input_tokens=_total(cached),
                          cache_write_tokens=_total(written), output_tokens=_total(outputs),
                          reasoning_tokens=_total(reasoning), turns=len(steps))


def _turn_error(event: Mapping[str, Any]) -> tuple[str | None, str]:
    """(code, message) of a ``turn_end`` whose reason is an error; (None, "") otherwise."""
    reason = event.get("reason")
    if not isinstance(reason, Mapping) or reason.get("kind") == "completed":
        return None, ""
    error = reason.get("error")
    if not isinstance(error, Mapping):
        return (None, "") if reason.get("kind") is None else (str(reason.get("kind")).upper(), "")
    code = error.get("code")
    return (code if isinstance(code, str) and code else None), str(error.get("message", ""))


def _total(values: list[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def steps_were_dropped(events: list[dict[str, Any]], steps: list[dict[str, Any]]) -> bool:
    """Whether the runtime dropped any ``step_end`` event of a very long stream.

    The runtime trims its list once it passes ``MAX_EVENTS_KEPT`` events, by half of that, so a
    trimmed list still holds more than ``MAX_EVENTS_KEPT // 2``: a list no longer than that is
    whole. In a longer one, the ``step_end`` events kept must number the steps without a gap: 1,
    2, 3 ... in a turn (the first at 1), and a next turn going on from 1 or from the last step.
    Anything else, a missing number included, counts as dropped.
    """
    if len(events) <= MAX_EVENTS_KEPT // 2:
        return False
    previous: tuple[int, int] | None = None
    for event in steps:
        turn, step = as_int(event.get("turn")), as_int(event.get("step"))
        if turn is None or step is None:
            return True
        if previous is None:
            follows = step == 1
        else:
            follows = ((turn == previous[0] and step == previous[1] + 1)
                       or (turn == previous[0] + 1 and step in (1, previous[1] + 1)))
        if not follows:
            return True
        previous = (turn, step)
    return False


def make_agent(options: DeepSeekOptions | Mapping[str, Any]) -> DeepSeekAgent:
    return DeepSeekAgent(options)


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [AgentSpec(
        name="deepseek",
        factory=make_agent,
        description="DeepSeek Harness (dsh --profile headless --json), task on stdin",
        config_schema=CONFIG_SCHEMA,
        options_class=DeepSeekOptions,
        needs_network=True,
    )]
