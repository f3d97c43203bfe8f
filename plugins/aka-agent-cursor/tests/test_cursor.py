"""The cursor agent against a fake ``cursor-agent`` (``aka_core.testing.fake_cli``) replaying the
stream-json of tests/fixtures/: the CLI agent contract, the command line, login and usage. No
network, credentials or real CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aka_agent_cursor
import attrs
import pytest
from aka_agent_cursor import (
    CONFIG_SCHEMA,
    MAX_ARGUMENT_BYTES,
    QUIET_ENV,
    aka_register_agents,
    make_agent,
)

from aka_core.plugin import AgentInvocation, AgentUsage, CliCommand
from aka_core.testing import CliAgentContract, Ending, FakeCli, Outcome, Reply, Requires, Script, fake_cli

HERE = Path(__file__).parent
DOCS_EXAMPLE = Script.from_file(HERE / "fixtures" / "docs_example.jsonl")
WITH_USAGE = Script.from_file(HERE / "fixtures" / "with_usage.jsonl")
VERSION = "2026.04.17-787b533"
MODEL = "GPT-5.1 Medium"
AUTH_ERROR = ("Error: Authentication required. Please run 'agent login' first, or set "
              "CURSOR_API_KEY environment variable.")
STATUS = {
    # `cursor-agent status` exits 0 whether or not anybody is logged in: the text says which.
    "logged_in": Reply(argv=("status",), stdout="\u2713 Logged in as someone@example.invalid\n"),
    "logged_out": Reply(argv=("status",), stdout="Not logged in\n"),
    "error": Reply(argv=("status",), stderr="Error: could not reach the Cursor API\n",
                   exit_code=1),
}

WITH_USAGE_USAGE = AgentUsage(model=MODEL, input_tokens=5968 + 17952 + 0,
                              cached_input_tokens=17952, cache_write_tokens=0, output_tokens=199)
"""Exactly what with_usage.jsonl implies: ``inputTokens`` leaves out the cached tokens."""


class TestCursor(CliAgentContract):
    record = aka_register_agents()[0]
    plugin = aka_agent_cursor
    options = {"model": "gpt-5.1", "grace_seconds": 1}
    cli_version = VERSION
    requires = Requires(
        args=(("--print",), ("--output-format", "stream-json"), ("--force",), ("--trust",)),
        stdin_prompt=True, cwd_flag="--workspace")
    replies = (STATUS["logged_in"],)
    completed = Outcome(script=WITH_USAGE, usage=WITH_USAGE_USAGE)
    failed = Outcome(script=WITH_USAGE.head(2, exit_code=7).then(
        fake_cli.stderr("Error: the model request failed")),
        usage=AgentUsage(model=MODEL), message="the model request failed")
    refused = Script(steps=(fake_cli.stderr(AUTH_ERROR),), exit_code=1)
    stopped = Outcome(script=WITH_USAGE.head(1), usage=AgentUsage(model=MODEL))
    not_json = ("T: not a JSON event (0)", "T: not a JSON event (2)", "{truncated")
    rate_limited = Ending(script=Script(steps=(fake_cli.stderr(
        "Error: You've hit your usage limit\n  Get Cursor Pro for more Agent usage, unlimited "
        "Tab, and more."),), exit_code=1), message="You've hit your usage limit")
    """As cursor-agent prints it (https://github.com/cursor/cursor/issues/3703)."""
    infra_error = Ending(script=WITH_USAGE.head(2, exit_code=1).then(
        fake_cli.line("ConnectError: [unavailable] upstream connect error or disconnect/reset before "
             "headers. reset reason: connection failure")),
        message="[unavailable] upstream connect error")
    """Cursor's Connect-RPC error, printed as a line of stdout that is not JSON."""
    model_says_unauthorized = WITH_USAGE.head(2, exit_code=7).then(
        fake_cli.line('{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":'
             '"The endpoint returns 401 Unauthorized: invalid API key, so I stub it."}]}}'),
        fake_cli.stderr("Error: the model request failed"))

    # ------------------------------------------------------------------ documented usage

    def test_documented_example_has_no_usage(self, agent: Any, invocation: AgentInvocation,
                                             fake: FakeCli) -> None:
        """The "Example sequence" of Cursor's output-format reference, verbatim
        (https://cursor.com/docs/cli/reference/output-format.md): the model is the init event's
        display name; its ``result`` event carries no token counts, cost or turns."""
        execution = self.run_with(agent, invocation, fake, DOCS_EXAMPLE)
        assert execution.status == "completed"
        assert execution.usage == AgentUsage(model="Claude 4 Sonnet")

    def test_result_usage_as_recent_clis_write_it(self, agent: Any, invocation: AgentInvocation,
                                                  fake: FakeCli) -> None:
        """The ``usage`` object recent CLIs add to the ``result`` event (``inputTokens``,
        ``outputTokens``, ``cacheReadTokens``, ``cacheWriteTokens``; not in the output-format
        reference, parsed so by other integrations, e.g.
        https://github.com/copperheadhq/copperhead/pull/67). ``inputTokens`` excludes the cached
        tokens: 5200 uncached + 41000 read + 300 written is an input of 46500, of which 41000
        cached (not cached 41000 > input 5200)."""
        stream = WITH_USAGE.events
        stream[-1]["usage"] = {"inputTokens": 5200, "outputTokens": 730, "cacheReadTokens": 41000,
                               "cacheWriteTokens": 300}
        execution = self.run_with(agent, invocation, fake, Script.from_events(stream))
        assert execution.usage == AgentUsage(
            model=MODEL, input_tokens=46500, cached_input_tokens=41000, cache_write_tokens=300,
            output_tokens=730, reasoning_tokens=None, cost_usd=None, turns=None)

    # ------------------------------------------------------------------ runs

    def test_the_prompt_goes_on_stdin(self, agent: Any, invocation: AgentInvocation,
                                      fake: FakeCli) -> None:
        """Out of the command line: no 128 KiB limit, not in process listings."""
        assert agent.run(invocation).status == "completed"
        received = fake.received(invocation)
        assert received["stdin"] == invocation.prompt
        assert invocation.prompt not in received["argv"]

    def test_the_prompt_as_the_last_argument(self, invocation: AgentInvocation,
                                             fake: FakeCli) -> None:
        fake.describe(version=VERSION, replies=self.replies, requires=attrs.evolve(
            self.requires, stdin_prompt=False, last_arg=fake_cli.PROMPT,
            value_flags=("--model", "--sandbox", "--workspace")))
        execution = make_agent({"prompt_input": "argument"}).run(invocation)
        assert execution.status == "completed", execution.message
        assert fake.received(invocation)["argv"][-1] == invocation.prompt

    def test_a_prompt_too_long_for_an_argument_fails_clearly(
        self, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """Above Linux's 128 KiB per argument the agent step fails before the launch, with what
        to do, instead of an E2BIG crash; on stdin the same prompt goes through."""
        long = attrs.evolve(invocation, prompt="x" * (MAX_ARGUMENT_BYTES + 1))
        execution = make_agent({"prompt_input": "argument"}).run(long)
        assert execution.status == "failed"
        assert "prompt_input: stdin" in (execution.message or "")
        assert "MAX_ARG_STRLEN" in (execution.message or "")
        assert not (invocation.logs_dir / "agent_home" / "fake-cli-run.json").exists()
        execution = make_agent({}).run(long)
        assert execution.status == "completed", execution.message
        assert fake.received(long)["stdin"] == long.prompt

    def test_self_update_is_off(self, agent: Any, invocation: AgentInvocation,
                                fake: FakeCli) -> None:
        assert agent.run(invocation).status == "completed"
        env = fake.received(invocation)["env"]
        assert {key: env.get(key) for key in QUIET_ENV} == QUIET_ENV

    def test_refused_credentials_say_so(self, agent: Any, invocation: AgentInvocation,
                                        fake: FakeCli) -> None:
        execution = self.run_with(agent, invocation, fake, self.refused)
        assert "Authentication required" in (execution.message or "")

    @pytest.mark.parametrize(("status", "authenticated"),
                             [("logged_in", True), ("logged_out", False), ("error", False)])
    def test_check_reads_the_status_command(self, fake: FakeCli, status: str,
                                            authenticated: bool) -> None:
        fake.describe(version=VERSION, replies=[STATUS[status]])
        found = make_agent({"executable": str(fake.executable)}).check()
        assert (found.agent, found.installed, found.version) == ("cursor", True, VERSION)
        assert found.authenticated is authenticated


# --------------------------------------------------------------------------- options


def test_schema_is_closed_and_knows_the_options() -> None:
    assert CONFIG_SCHEMA["additionalProperties"] is False
    assert {"model", "extra_args", "executable", "sandbox", "trust_workspace",
            "prompt_input"} <= set(CONFIG_SCHEMA["properties"])


# --------------------------------------------------------------------------- the command line


def test_command_line(make_invocation: Any) -> None:
    invocation = make_invocation()
    agent = make_agent({"model": "gpt-5.1-high", "sandbox": "disabled",
                        "extra_args": ["--approve-mcps"]})
    assert agent.command(invocation, "/opt/cursor-agent") == CliCommand(argv=[
        "/opt/cursor-agent", "--print", "--output-format", "stream-json", "--force", "--trust",
        "--workspace", str(invocation.workspace), "--model", "gpt-5.1-high",
        "--sandbox", "disabled", "--approve-mcps"], stdin=invocation.prompt, env=QUIET_ENV)
    argument = make_agent({"prompt_input": "argument"}).command(invocation, "cursor-agent")
    assert (argument.argv[-1], argument.stdin) == (invocation.prompt, None)


def test_command_line_without_trust_or_model(make_invocation: Any) -> None:
    invocation = make_invocation()
    argv = make_agent({"trust_workspace": False}).command(invocation, "cursor-agent").argv
    assert argv == ["cursor-agent", "--print", "--output-format", "stream-json", "--force",
                    "--workspace", str(invocation.workspace)]


# --------------------------------------------------------------------------- usage


def test_a_missing_cache_counter_leaves_the_input_unknown() -> None:
    """A total without one of the disjoint counters would be short: None, not a guess."""
    result = {"type": "result", "usage": {"inputTokens": 5200, "outputTokens": 9,
                                          "cacheReadTokens": 41000}}
    assert make_agent({}).usage([result]) == AgentUsage(
        input_tokens=None, cached_input_tokens=41000, cache_write_tokens=None, output_tokens=9)
    assert make_agent({}).usage([{"type": "result", "usage": "n/a"}]) == AgentUsage()
