"""The claude-code agent against a fake ``claude`` (``aka_core.testing.fake_cli``) replaying the
stream-json of tests/fixtures/: the CLI agent contract, the command line, providers, login, usage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import aka_agent_claude_code
import pytest
from aka_agent_claude_code import CONFIG_SCHEMA, ClaudeCodeAgent, aka_register_agents, make_agent
from jsonschema import Draft202012Validator

from aka_core.plugin import AgentInvocation, AgentUsage
from aka_core.testing import (
    NOT_JSON,
    CliAgentContract,
    Ending,
    FakeCli,
    Outcome,
    Reply,
    Requires,
    Script,
    fake_cli,
)

FIXTURES = Path(__file__).parent / "fixtures"
MODEL = "claude-sonnet-4-5-20250929"
VERSION = "2.0.14 (Claude Code)"
BASE_FLAGS = ["-p", "--output-format", "stream-json", "--verbose",
              "--permission-mode", "bypassPermissions"]
LOGGED_IN = Reply(argv=("auth", "status"), stdout=json.dumps(
    {"loggedIn": True, "authMethod": "api_key", "apiProvider": "firstParty"}))
LOGGED_OUT = Reply(argv=("auth", "status"), exit_code=1, stdout=json.dumps(
    {"loggedIn": False, "authMethod": "none", "apiProvider": "firstParty"}))
"""``claude auth status``: JSON, and exit 1 when nobody is logged in."""

SUCCESS_USAGE = AgentUsage(model=MODEL, input_tokens=1234 + 600 + 98765 + 0 + 4321 + 0,
                           cached_input_tokens=98765, cache_write_tokens=4321 + 0,
                           output_tokens=5678 + 40, cost_usd=0.1242, turns=7)
"""stream_success.jsonl: modelUsage summed over both models; the model from the init event."""
ERROR_USAGE = AgentUsage(model=MODEL, input_tokens=310 + 9000 + 2100, cached_input_tokens=9000,
                         cache_write_tokens=2100, output_tokens=420, cost_usd=0.0311, turns=2)


def events(name: str) -> list[dict[str, Any]]:
    return Script.from_file(FIXTURES / name).events


def model_says_unauthorized() -> Script:
    """stream_error.jsonl (exit 1) with an assistant text that quotes an HTTP 401: the model's
    words, not the CLI's."""
    stream = events("stream_error.jsonl")
    stream.insert(1, {"type": "assistant", "message": {
        "id": "msg_02Tx", "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "text", "text": "The proxy answers 401 Unauthorized (invalid API "
                                             "key): not logged in, so I mock it."}]},
        "parent_tool_use_id": None, "session_id": stream[0]["session_id"]})
    return Script.from_events(stream, exit_code=1)


class TestClaudeCode(CliAgentContract):
    record = aka_register_agents()[0]
    plugin = aka_agent_claude_code
    cli_version = VERSION
    requires = Requires(args=tuple(tuple(flag.split()) for flag in (
        "-p", "--output-format stream-json", "--verbose", "--permission-mode bypassPermissions")),
        stdin_prompt=True)
    replies = (LOGGED_IN,)
    completed = Outcome(script=Script.from_file(FIXTURES / "stream_success.jsonl"),
                        usage=SUCCESS_USAGE)
    failed = Outcome(script=Script.from_file(FIXTURES / "stream_error.jsonl", exit_code=1).then(
        fake_cli.stderr("Error: the model request failed (simulated)")),
        usage=ERROR_USAGE, message="the model request failed (simulated)")
    refused = Script.from_file(FIXTURES / "stream_auth_failure.jsonl", exit_code=1)
    stopped = Outcome(script=Script.from_file(FIXTURES / "stream_partial.jsonl"),
                      usage=AgentUsage(model=MODEL))
    """Stopped before its result event: only the model it announced is known."""
    not_json = ("[SandboxDebug] sandbox initialised without network restrictions", *NOT_JSON)
    """Some CLI builds print sandbox diagnostics on stdout."""
    rate_limited = Ending(script=Script.from_file(FIXTURES / "stream_rate_limited.jsonl",
                                                  exit_code=1), message="API status 429")
    infra_error = Ending(script=Script.from_file(FIXTURES / "stream_overloaded.jsonl",
                                                 exit_code=1), message="overloaded_error")
    max_turns = Ending(script=Script.from_file(FIXTURES / "stream_max_turns.jsonl", exit_code=1),
                       message="result error_max_turns")
    budget_exhausted = Ending(script=Script.from_file(FIXTURES / "stream_max_budget.jsonl",
                                                      exit_code=1),
                              message="result error_max_budget_usd")
    model_says_unauthorized = model_says_unauthorized()

    # ------------------------------------------------------------------ documented usage

    def test_documented_result_usage(self, agent: Any, invocation: AgentInvocation,
                                     fake: FakeCli) -> None:
        """The result event as the Agent SDK documents it (``SDKResultMessage``:
        https://code.claude.com/docs/en/agent-sdk/typescript; ``modelUsage`` covers every model,
        subagents included, and ``total_cost_usd`` is the CLI's estimate:
        https://code.claude.com/docs/en/agent-sdk/cost-tracking), in stream_success.jsonl:
        Sonnet 1234 input, 98765 cache reads, 4321 cache writes, 5678 output; Haiku 600 input,
        40 output; $0.1242 in 7 turns."""
        execution = self.run_with(agent, invocation, fake, self.completed.script)
        assert execution.usage == AgentUsage(
            model=MODEL, input_tokens=104920, cached_input_tokens=98765, cache_write_tokens=4321,
            output_tokens=5718, reasoning_tokens=None, cost_usd=0.1242, turns=7)

    def test_cache_counters_missing_from_model_usage_come_from_usage(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """A ``modelUsage`` entry without the cache counters (``ModelUsage`` declares
        ``cacheReadInputTokens`` and ``cacheCreationInputTokens``, some builds leave them out)
        next to a complete ``usage`` (the Messages API's ``input_tokens``,
        ``cache_read_input_tokens``, ``cache_creation_input_tokens``): the input is
        40 + 250000 + 9000, not 40 with unknown cache reads."""
        stream = events("stream_success.jsonl")
        stream[-1]["modelUsage"] = {MODEL: {"inputTokens": 40, "outputTokens": 1200,
                                            "costUSD": 0.11}}
        stream[-1]["usage"] = {"input_tokens": 40, "cache_read_input_tokens": 250000,
                               "cache_creation_input_tokens": 9000, "output_tokens": 1200}
        execution = self.run_with(agent, invocation, fake, Script.from_events(stream))
        assert execution.usage == AgentUsage(
            model=MODEL, input_tokens=40 + 250000 + 9000, cached_input_tokens=250000,
            cache_write_tokens=9000, output_tokens=1200, cost_usd=0.1242, turns=7)

    # ------------------------------------------------------------------ runs

    def test_options_reach_the_command_line(self, spec: Any, invocation: AgentInvocation,
                                            fake: FakeCli) -> None:
        agent = spec.factory({"model": "claude-sonnet-4-5", "effort": "medium"})
        assert agent.run(invocation).status == "completed"
        assert fake.received(invocation)["argv"] == [*BASE_FLAGS, "--model", "claude-sonnet-4-5",
                                                     "--effort", "medium"]

    def test_bedrock_provider_gets_the_aws_variables(
        self, spec: Any, make_invocation: Any, fake: FakeCli, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
        invocation = fake.on_path(make_invocation("demo/anthropic"))
        assert spec.factory({}).run(invocation).status == "completed"
        env = fake.received(invocation)["env"]
        assert "CLAUDE_CODE_USE_BEDROCK" not in env and "AWS_SECRET_ACCESS_KEY" not in env
        invocation = fake.on_path(make_invocation("demo/bedrock"))
        assert spec.factory({"provider": "bedrock"}).run(invocation).status == "completed"
        env = fake.received(invocation)["env"]
        assert (env["CLAUDE_CODE_USE_BEDROCK"], env["AWS_SECRET_ACCESS_KEY"]) == ("1", "aws-secret")

    def test_a_failure_that_mentions_401_is_not_an_auth_failure(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        stream = events("stream_error.jsonl")
        stream[-1]["duration_ms"] = 14017
        stream[-1]["errors"] = ["tests failed in test_401_redirect.py"]
        execution = self.run_with(agent, invocation, fake,
                                  Script.from_events(stream, exit_code=1))
        assert execution.status == "failed"

    def test_a_turn_limit_keeps_its_usage(self, agent: Any, invocation: AgentInvocation,
                                          fake: FakeCli) -> None:
        """A run stopped by --max-turns is the agent's own limit: its usage is recorded as for
        any run, and the status says which limit it hit."""
        assert self.max_turns is not None
        execution = self.run_with(agent, invocation, fake, self.max_turns.script)
        assert execution.status == "max_turns", execution.message
        assert execution.usage == AgentUsage(model=MODEL, input_tokens=120 + 5000 + 800,
                                             cached_input_tokens=5000, cache_write_tokens=800,
                                             output_tokens=300, cost_usd=0.0123, turns=3)

    def test_an_error_result_of_exit_0_is_not_completed(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """The result event, not the exit code, says the run failed; its reason is quoted."""
        execution = self.run_with(agent, invocation, fake,
                                  Script.from_file(FIXTURES / "stream_error.jsonl"))
        assert (execution.status, execution.exit_code) == ("failed", 0), execution.message
        assert "error_during_execution" in (execution.message or "")
        assert "the model request failed (simulated)" in (execution.message or "")

    def test_updates_and_telemetry_are_off(self, agent: Any, invocation: AgentInvocation,
                                           fake: FakeCli) -> None:
        assert agent.run(invocation).status == "completed"
        env = fake.received(invocation)["env"]
        assert (env["DISABLE_AUTOUPDATER"], env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"]) == (
            "1", "1")

    @pytest.mark.parametrize(("root", "confined", "expected"), [
        (True, True, "1"), (True, False, None), (False, True, None)])
    def test_is_sandbox_only_for_root_inside_aka_s_sandbox(
        self, spec: Any, invocation: AgentInvocation, fake: FakeCli,
        monkeypatch: pytest.MonkeyPatch, root: bool, confined: bool, expected: str | None
    ) -> None:
        """Claude Code refuses bypassPermissions as root unless IS_SANDBOX=1: set only when aka
        confines it (the euid the plugin sees is faked; the CLI's own check is not run here)."""
        import aka_agent_claude_code as plugin

        monkeypatch.setattr(plugin.os, "geteuid", lambda: 0 if root else 1000)
        options = {} if confined else {"confinement": "off"}
        execution = spec.factory(options).run(invocation)
        assert execution.status == "completed", execution.message
        if confined and not (execution.confinement or {}).get("confined"):
            pytest.skip("bubblewrap cannot confine here")
        assert fake.received(invocation)["env"].get("IS_SANDBOX") == expected

    def test_the_fake_refuses_a_run_without_a_prompt_on_stdin(self, fake: FakeCli) -> None:
        out = subprocess.run([str(fake.executable), *BASE_FLAGS], input="", capture_output=True,
                             text=True, timeout=30, check=False)
        assert out.returncode == 3 and "no prompt on stdin" in out.stderr

    # ------------------------------------------------------------------ check

    def test_check_reports_the_login(self, fake: FakeCli) -> None:
        agent = make_agent({"executable": str(fake.executable)})
        check = agent.check()
        assert (check.installed, check.version, check.authenticated) == (True, VERSION, True)
        assert json.loads(check.detail)["loggedIn"] is True
        fake.describe(version=VERSION, replies=[LOGGED_OUT])
        check = agent.check()
        assert (check.installed, check.authenticated, check.ready) == (True, False, False)


# --------------------------------------------------------------------------- options


def test_schema_accepts_a_full_example_and_rejects_typos() -> None:
    validator = Draft202012Validator(CONFIG_SCHEMA)
    example = {"model": "claude-sonnet-4-5", "effort": "high", "provider": "bedrock",
               "max_turns": 80, "max_budget_usd": 5, "extra_args": ["--fallback-model", "sonnet"],
               "grace_seconds": 5, "pass_env": ["ANTHROPIC_BASE_URL"], "config_dir": "/x"}
    assert not list(validator.iter_errors(example))
    assert list(validator.iter_errors({"modle": "x"}))
    with pytest.raises(ValueError, match="effort"):
        make_agent({"effort": "extreme"})


# --------------------------------------------------------------------------- command line


def test_command_line(make_invocation: Any) -> None:
    invocation = make_invocation()
    agent = make_agent({"model": "claude-opus-4-1", "effort": "high", "max_turns": 40,
                        "max_budget_usd": 2.5, "extra_args": ["--add-dir", "/data"]})
    cmd = agent.command(invocation, "/usr/bin/claude")
    assert list(cmd.argv) == ["/usr/bin/claude", *BASE_FLAGS, "--model", "claude-opus-4-1",
                              "--effort", "high", "--max-turns", "40", "--max-budget-usd", "2.5",
                              "--add-dir", "/data"]
    assert cmd.stdin == invocation.prompt
    assert dict(cmd.env) == {}
    assert list(make_agent({}).command(invocation, "claude").argv) == ["claude", *BASE_FLAGS]


def test_provider_variables_only_for_that_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/keys/gcp.json")
    assert make_agent({}).provider_environment() == {}
    assert make_agent({"provider": "bedrock"}).provider_environment() == {
        "CLAUDE_CODE_USE_BEDROCK": "1", "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "AWS_REGION": "us-east-1"}
    assert make_agent({"provider": "vertex"}).provider_environment() == {
        "CLAUDE_CODE_USE_VERTEX": "1", "GOOGLE_APPLICATION_CREDENTIALS": "/keys/gcp.json"}


def test_status_json_is_believed_before_the_exit_code() -> None:
    agent = ClaudeCodeAgent()
    assert agent.auth_status_ok(0, '{"loggedIn": false, "authMethod": "none"}', "") is False
    assert agent.auth_status_ok(1, '{"loggedIn": true}', "") is True
    assert agent.auth_status_ok(0, "Logged in as me@example.com", "") is True
    assert agent.auth_status_ok(1, "", "error: unknown command 'auth'") is False


# --------------------------------------------------------------------------- usage


def test_usage_from_the_result_usage_when_there_is_no_model_usage() -> None:
    stream = events("stream_success.jsonl")
    del stream[-1]["modelUsage"]
    assert ClaudeCodeAgent().usage(stream) == AgentUsage(
        model=MODEL, input_tokens=1234 + 98765 + 4321, cached_input_tokens=98765,
        cache_write_tokens=4321, output_tokens=5678, cost_usd=0.1242, turns=7)


def test_usage_leaves_unreported_values_null() -> None:
    """Without cache counters anywhere, the input total is unknown (not the uncached part)."""
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 3,
              "modelUsage": {"claude-x": {"inputTokens": 10, "outputTokens": 5}}}
    assert ClaudeCodeAgent().usage([result]) == AgentUsage(
        model="claude-x", input_tokens=None, cached_input_tokens=None, cache_write_tokens=None,
        output_tokens=5, cost_usd=None, turns=3)
    bare = {"type": "result", "subtype": "success", "is_error": False}
    assert ClaudeCodeAgent().usage([bare]) == AgentUsage()
    assert ClaudeCodeAgent().usage(events("stream_partial.jsonl")) == AgentUsage(model=MODEL)


def test_usage_of_a_model_that_misses_a_counter_is_not_summed() -> None:
    result = {"type": "result", "total_cost_usd": 0.5, "num_turns": 2, "modelUsage": {
        "a": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 7,
              "cacheCreationInputTokens": 1},
        "b": {"inputTokens": 1, "outputTokens": 1, "cacheCreationInputTokens": 0}}}
    usage = ClaudeCodeAgent().usage([result])
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens,
            usage.output_tokens) == (None, None, 1, 6)
    assert usage.model == "a, b"


def test_model_usage_and_usage_are_never_mixed() -> None:
    """An incomplete ``usage`` does not fill in a complete ``modelUsage``, nor the other way
    round: the two need not cover the same models (subagents are only in ``modelUsage``)."""
    complete = {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 7,
                "cacheCreationInputTokens": 3}
    result = {"type": "result", "modelUsage": {"a": complete, "b": dict(complete)},
              "usage": {"input_tokens": 10, "output_tokens": 5}}
    usage = ClaudeCodeAgent().usage([result])
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens,
            usage.output_tokens) == (40, 14, 6, 10)
    result = {"type": "result", "modelUsage": {"a": {"inputTokens": 10, "outputTokens": 5}},
              "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2}}
    usage = ClaudeCodeAgent().usage([result])
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (None, None, 5)
