"""The claude-code agent against a fake ``claude``: command line, usage, failures, environment."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aka_agent_claude_code import (
    CONFIG_SCHEMA,
    ClaudeCodeAgent,
    aka_register_agents,
    make_agent,
)
from jsonschema import Draft202012Validator

from aka_core.models import AgentUsage
from aka_core.testing import AgentContract
from aka_core.testing.processes import alive

if TYPE_CHECKING:
    from conftest import FakeClaude

FIXTURES = Path(__file__).parent / "fixtures"

SUCCESS_USAGE = AgentUsage(model="claude-sonnet-4-5-20250929", input_tokens=104920,
                           cached_input_tokens=98765, output_tokens=5718, cost_usd=0.1242, turns=7)
"""stream_success.jsonl: modelUsage summed over both models; model from the init event."""
ERROR_USAGE = AgentUsage(model="claude-sonnet-4-5-20250929", input_tokens=11410,
                         cached_input_tokens=9000, output_tokens=420, cost_usd=0.0311, turns=2)
VERSION = "2.0.14 (Claude Code)"
BASE_FLAGS = ["-p", "--output-format", "stream-json", "--verbose",
              "--permission-mode", "bypassPermissions"]


def events(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]


class TestClaudeCodeContract(AgentContract):
    record = aka_register_agents()[0]

    @pytest.fixture
    def options(self, fake: FakeClaude) -> dict:
        return fake.options()

    @pytest.fixture
    def invocation(self, fake: FakeClaude, make_invocation):
        return fake.invocation(make_invocation)


# --------------------------------------------------------------------------- registration


def test_registered_through_the_host(register_plugin) -> None:
    import aka_agent_claude_code

    assert register_plugin(aka_agent_claude_code).agent("claude-code").factory is make_agent


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


def test_command_line(make_invocation) -> None:
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


def test_the_fake_refuses_a_command_line_without_the_flags_relied_on(fake: FakeClaude) -> None:
    out = subprocess.run([str(fake.executable), "-p", "--output-format", "stream-json"],
                         input="hello", capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 3 and "--verbose" in out.stderr
    out = subprocess.run([str(fake.executable), *BASE_FLAGS], input="", capture_output=True,
                         text=True, timeout=30, check=False)
    assert out.returncode == 3 and "stdin" in out.stderr


# --------------------------------------------------------------------------- runs


def test_normal_finish(fake: FakeClaude, make_invocation) -> None:
    invocation = fake.invocation(make_invocation)
    execution = make_agent(fake.options(model="claude-sonnet-4-5", effort="medium")).run(invocation)
    assert (execution.agent, execution.status, execution.exit_code) == ("claude-code", "completed", 0)
    assert execution.version == VERSION
    assert not execution.timed_out
    assert execution.usage == SUCCESS_USAGE
    got = fake.received()
    assert got["argv"] == [*BASE_FLAGS, "--model", "claude-sonnet-4-5", "--effort", "medium"]
    assert got["stdin"] == invocation.prompt
    assert Path(got["cwd"]) == invocation.workspace.resolve()
    kept = (invocation.logs_dir / "agent.jsonl").read_text(encoding="utf-8").splitlines()
    assert kept == (FIXTURES / "stream_success.jsonl").read_text(encoding="utf-8").splitlines()


def test_the_cli_gets_its_credentials_a_private_home_and_no_other_secrets(
    fake: FakeClaude, make_invocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "gh-secret")
    invocation = fake.invocation(make_invocation)
    assert make_agent(fake.options()).run(invocation).status == "completed"
    env = fake.received()["env"]
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-test"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "CLAUDE_CODE_USE_BEDROCK" not in env
    home = invocation.logs_dir / "agent_home"
    assert env["HOME"] == str(home)
    assert env["CLAUDE_CONFIG_DIR"] == str(home / ".claude-code")


def test_bedrock_provider_gets_the_aws_variables(
    fake: FakeClaude, make_invocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    invocation = fake.invocation(make_invocation)
    assert make_agent(fake.options(provider="bedrock")).run(invocation).status == "completed"
    env = fake.received()["env"]
    assert (env["CLAUDE_CODE_USE_BEDROCK"], env["AWS_SECRET_ACCESS_KEY"]) == ("1", "aws-secret")


def test_hang_is_stopped_at_the_budget_with_its_child(fake: FakeClaude, make_invocation) -> None:
    fake.mode("hang")
    invocation = fake.invocation(make_invocation, timeout_seconds=2)
    started = time.monotonic()
    execution = make_agent(fake.options(grace_seconds=1)).run(invocation)
    elapsed = time.monotonic() - started
    assert (execution.status, execution.timed_out) == ("timed_out", True)
    assert elapsed < 2 + 1 + 3, f"took {elapsed:.1f} s for a 2 s budget and 1 s grace"
    got = fake.received()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (alive(got["pid"]) or alive(got["child_pid"])):
        time.sleep(0.05)
    assert not alive(got["pid"]), "the CLI outlived its budget"
    assert not alive(got["child_pid"]), "the CLI's child outlived the budget"
    # stopped before its result event: only the model it announced is known
    assert execution.usage == AgentUsage(model="claude-sonnet-4-5-20250929")


def test_non_zero_exit_is_a_failure_with_its_code(fake: FakeClaude, make_invocation) -> None:
    fake.mode("fail")
    execution = make_agent(fake.options()).run(fake.invocation(make_invocation))
    assert (execution.status, execution.exit_code) == ("failed", 1)
    assert "the model request failed (simulated)" in execution.message
    assert execution.usage == ERROR_USAGE


def test_not_on_path_is_not_installed(fake: FakeClaude, make_invocation, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    invocation = fake.invocation(make_invocation, path=str(tmp_path / "empty"))
    execution = make_agent(fake.options()).run(invocation)
    assert execution.status == "not_installed"
    assert "'claude' is not on PATH" in execution.message


def test_malformed_lines_are_counted_and_kept(fake: FakeClaude, make_invocation) -> None:
    fake.mode("malformed")
    invocation = fake.invocation(make_invocation)
    execution = make_agent(fake.options()).run(invocation)
    assert execution.status == "completed"
    assert "4 lines were not JSON" in execution.message
    assert execution.usage == SUCCESS_USAGE
    kept = [json.loads(line) for line in
            (invocation.logs_dir / "agent.jsonl").read_text(encoding="utf-8").splitlines()]
    unparsed = [e["aka_unparsed_line"] for e in kept if "aka_unparsed_line" in e]
    assert unparsed[0].startswith("[SandboxDebug]") and unparsed[-1] == "[1, 2, 3]"
    assert len(unparsed) == 4 and len(kept) == 4 + len(events("stream_success.jsonl"))


def test_refused_credentials_are_not_authenticated(fake: FakeClaude, make_invocation) -> None:
    fake.mode("auth")
    execution = make_agent(fake.options()).run(fake.invocation(make_invocation))
    assert (execution.status, execution.exit_code) == ("not_authenticated", 1)


def test_a_failure_that_mentions_401_is_not_an_auth_failure(
    fake: FakeClaude, make_invocation, tmp_path: Path
) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    lines = events("stream_error.jsonl")
    lines[-1]["duration_ms"] = 14017
    lines[-1]["errors"] = ["tests failed in test_401_redirect.py"]
    (fixtures / "stream_error.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    fake.mode("fail", FAKE_CLAUDE_FIXTURES=str(fixtures))
    assert make_agent(fake.options()).run(fake.invocation(make_invocation)).status == "failed"


# --------------------------------------------------------------------------- check


def test_check_reports_installed_version_and_login(fake: FakeClaude) -> None:
    agent = make_agent(fake.options(executable=str(fake.executable)))
    check = agent.check()
    assert (check.installed, check.version, check.authenticated) == (True, VERSION, True)
    assert json.loads(check.detail)["loggedIn"] is True
    fake.mode("normal", FAKE_CLAUDE_AUTH="none")
    check = agent.check()
    assert (check.installed, check.authenticated, check.ready) == (True, False, False)


def test_status_json_is_believed_before_the_exit_code() -> None:
    agent = ClaudeCodeAgent()
    assert agent.auth_status_ok(0, '{"loggedIn": false, "authMethod": "none"}', "") is False
    assert agent.auth_status_ok(1, '{"loggedIn": true}', "") is True
    assert agent.auth_status_ok(0, "Logged in as me@example.com", "") is True
    assert agent.auth_status_ok(1, "", "error: unknown command 'auth'") is False


def test_check_without_the_cli(tmp_path: Path) -> None:
    check = make_agent({"executable": str(tmp_path / "claude")}).check()
    assert (check.installed, check.ready) == (False, False)


# --------------------------------------------------------------------------- usage


def test_usage_from_the_result_usage_when_there_is_no_model_usage() -> None:
    evs = events("stream_success.jsonl")
    del evs[-1]["modelUsage"]
    assert ClaudeCodeAgent().usage(evs) == AgentUsage(
        model="claude-sonnet-4-5-20250929", input_tokens=1234 + 98765 + 4321,
        cached_input_tokens=98765, output_tokens=5678, cost_usd=0.1242, turns=7)


def test_usage_leaves_unreported_values_null() -> None:
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 3,
              "modelUsage": {"claude-x": {"inputTokens": 10, "outputTokens": 5}}}
    assert ClaudeCodeAgent().usage([result]) == AgentUsage(
        model="claude-x", input_tokens=10, cached_input_tokens=None, output_tokens=5,
        cost_usd=None, turns=3)
    bare = {"type": "result", "subtype": "success", "is_error": False}
    assert ClaudeCodeAgent().usage([bare]) == AgentUsage()
    assert ClaudeCodeAgent().usage(events("stream_partial.jsonl")) == AgentUsage(
        model="claude-sonnet-4-5-20250929")


def test_usage_of_a_model_that_misses_a_counter_is_not_summed() -> None:
    result = {"type": "result", "total_cost_usd": 0.5, "num_turns": 2, "modelUsage": {
        "a": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 7},
        "b": {"inputTokens": 1, "outputTokens": 1}}}
    usage = ClaudeCodeAgent().usage([result])
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (11, None, 6)
    assert usage.model == "a, b"
