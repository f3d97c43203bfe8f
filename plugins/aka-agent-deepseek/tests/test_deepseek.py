"""The deepseek agent against a fake ``dsh`` (``aka_core.testing.fake_cli``) replaying the
``--json`` streams of tests/fixtures/: the CLI agent contract, the command line and its model
overlay, login, and usage, long streams included. No network, credentials or real CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import aka_agent_deepseek
import pytest
from aka_agent_deepseek import (
    CONFIG_SCHEMA,
    DeepSeekAgent,
    aka_register_agents,
    make_agent,
    steps_were_dropped,
)
from jsonschema import Draft202012Validator

from aka_core.plugin import KEEP_FIRST_EVENTS, MAX_EVENTS_KEPT, AgentInvocation, AgentUsage
from aka_core.testing import CliAgentContract, Ending, FakeCli, Outcome, Requires, Script, fake_cli

HERE = Path(__file__).resolve().parent
VERSION = "0.2.0-rc.2"
NORMAL = Script.from_file(HERE / "fixtures" / "normal.jsonl")
NORMAL_USAGE = AgentUsage(model=None, input_tokens=9490, cached_input_tokens=7040,
                          cache_write_tokens=None, output_tokens=460, reasoning_tokens=None,
                          cost_usd=None, turns=3)
"""What tests/fixtures/normal.jsonl implies (see tests/fixtures/README.md)."""
SESSION = {"type": "session", "sessionId": "session-x", "cwd": "/w"}


def step_end(step: int, turn: int = 1, **usage: int) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "status", "phase": "step_end", "turn": turn, "step": step}
    if usage:
        event["usage"] = usage
    return event


class TestDeepSeek(CliAgentContract):
    record = aka_register_agents()[0]
    plugin = aka_agent_deepseek
    cli_version = VERSION
    requires = Requires(args=(("--profile", "headless"), ("--json", "-")), stdin_prompt=True,
                        env=("DSH_PERMISSION_MODE",))
    completed = Outcome(script=NORMAL, usage=NORMAL_USAGE)
    failed = Outcome(
        script=Script.from_file(HERE / "fixtures" / "context.jsonl", exit_code=1).then(
            fake_cli.stderr("dsh: CONTEXT_WINDOW_EXCEEDED: the request exceeds the model's context "
                   "window")),
        usage=AgentUsage(turns=1), message="CONTEXT_WINDOW_EXCEEDED")
    """The agent's own failure. A step without usage leaves the tokens unknown."""
    rate_limited = Ending(
        script=Script.from_file(HERE / "fixtures" / "rate_limited.jsonl", exit_code=1).then(
            fake_cli.stderr("dsh: RATE_LIMIT: DeepSeek API error (HTTP 429): rate limit reached")),
        message="RATE_LIMIT: DeepSeek API error (HTTP 429)")
    infra_error = Ending(
        script=Script.from_file(HERE / "fixtures" / "fail.jsonl", exit_code=1).then(
            fake_cli.stderr("dsh: SERVER: DeepSeek API error (HTTP 503)")),
        message="SERVER: DeepSeek API error (HTTP 503)")
    model_says_unauthorized = Script.from_file(
        HERE / "fixtures" / "context.jsonl", exit_code=1).after(
        fake_cli.event({"type": "text", "text": "The mirror answers 401 Unauthorized (invalid API key); "
                                       "not logged in, so I vendor the file."}))
    refused = Script.from_file(HERE / "fixtures" / "auth.jsonl", exit_code=1).then(
        fake_cli.stderr("dsh: MISSING_CREDENTIAL: credential reference DEEPSEEK_API_KEY resolves to no "
               "value"))
    stopped = Outcome(script=NORMAL.head(1), usage=AgentUsage())
    not_json = ("(node:4242) ExperimentalWarning: this line is not JSON",
                "dsh: a stray diagnostic on stdout {")

    # ------------------------------------------------------------------ documented usage

    def test_documented_step_usage(self, agent: Any, invocation: AgentInvocation,
                                   fake: FakeCli) -> None:
        """normal.jsonl, built on the schema of dsh's ``--json`` projection
        (``packages/bundle/headless/src/json-stream.ts``, "Machine-readable output" of the
        headless README; see tests/fixtures/README.md): three ``step_end`` events whose disjoint
        counts add up to an input of 1800 + 400 + 250 uncached and 1024 + 2816 + 3200 cache reads,
        and 120 + 300 + 40 output tokens. No step reports cache writes, and the third no
        reasoning tokens, so neither has a total."""
        execution = self.run_with(agent, invocation, fake, NORMAL)
        assert execution.usage == AgentUsage(
            model=None, input_tokens=1800 + 400 + 250 + 1024 + 2816 + 3200,
            cached_input_tokens=7040, cache_write_tokens=None, output_tokens=460,
            reasoning_tokens=None, cost_usd=None, turns=3)

    def test_a_stream_too_long_to_keep_gets_no_partial_total(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """Past MAX_EVENTS_KEPT events the runtime drops the middle of the stream; steps went
        with it, so no total is reported (the sum of the steps left would be short)."""
        steps = MAX_EVENTS_KEPT // 4 + 100
        events: list[dict[str, Any]] = [SESSION, {"type": "status", "phase": "turn_start",
                                                  "turn": 1}]
        for step in range(1, steps + 1):
            events += [{"type": "status", "phase": "step_start", "turn": 1, "step": step},
                       {"type": "text", "text": f"step {step}"},
                       {"type": "tool_call", "callId": f"c{step}", "tool": "read", "input": {}},
                       step_end(step, inputTokens=10, outputTokens=2, cacheReadTokens=90)]
        events.append({"type": "final", "text": "done"})
        execution = self.run_with(agent, invocation, fake, Script.from_events(events))
        assert execution.status == "completed", execution.message
        kept = re.search(r"(\d+) events", execution.message or "")
        assert kept and int(kept[1]) < len(events), "the runtime kept every event"
        assert execution.usage == AgentUsage()

    def test_events_dropped_between_steps_leave_the_totals_exact(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """A step that prints more than MAX_EVENTS_KEPT events: the runtime drops some of its
        text, but every ``step_end`` is kept, so the totals are still exact."""
        events = [SESSION, {"type": "status", "phase": "turn_start", "turn": 1},
                  step_end(1, inputTokens=100, outputTokens=10, cacheReadTokens=900,
                           cacheWriteTokens=5)]
        events += [{"type": "text", "text": f"line {i}"} for i in range(MAX_EVENTS_KEPT + 500)]
        events += [step_end(2, inputTokens=200, outputTokens=20, cacheReadTokens=800,
                            cacheWriteTokens=0, reasoningTokens=7),
                   step_end(3, inputTokens=300, outputTokens=30, cacheReadTokens=700,
                            cacheWriteTokens=1),
                   {"type": "final", "text": "done"}]
        execution = self.run_with(agent, invocation, fake, Script.from_events(events))
        assert execution.status == "completed", execution.message
        assert execution.usage == AgentUsage(
            input_tokens=100 + 900 + 5 + 200 + 800 + 300 + 700 + 1, cached_input_tokens=2400,
            cache_write_tokens=6, output_tokens=60, reasoning_tokens=None, turns=3)

    # ------------------------------------------------------------------ runs

    def test_the_command_line_and_environment_the_cli_gets(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        assert agent.run(invocation).status == "completed"
        received = fake.received(invocation)
        assert received["argv"] == ["--profile", "headless", "--json", "-"]
        assert received["stdin"] == invocation.prompt, "the task arrives on stdin"
        env = received["env"]
        assert (env["DSH_PERMISSION_MODE"], env["DSH_TELEMETRY_DISABLED"]) == (
            "workspace-write", "1")

    def test_model_reaches_the_cli_as_an_overlay(self, invocation: AgentInvocation,
                                                 fake: FakeCli) -> None:
        execution = make_agent({"model": "deepseek-v4-flash"}).run(invocation)
        assert execution.status == "completed", execution.message
        argv = fake.received(invocation)["argv"]
        patches = [json.loads(Path(argv[i + 1]).read_text()) for i, a in enumerate(argv)
                   if a == "--patch"]
        assert patches == [[{"id": "agent-default-model", "config": {
            "provider": "deepseek-official", "model": "deepseek-v4-flash"}}]]
        assert execution.usage.model is None, "the stream does not name the model"

    def test_failures_say_what_dsh_said(self, agent: Any, invocation: AgentInvocation,
                                        fake: FakeCli) -> None:
        execution = self.run_with(agent, invocation, fake, self.refused)
        assert "dsh said: MISSING_CREDENTIAL: credential reference" in (execution.message or "")

    def test_the_error_code_on_stderr_alone_decides(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """A failure outside a turn: an ``error`` event and ``dsh: CODE: message`` on stderr."""
        execution = self.run_with(agent, invocation, fake, Script(steps=(
            fake_cli.event({"type": "error", "message": "quota exhausted for this account"}),
            fake_cli.stderr("dsh: QUOTA: quota exhausted for this account")), exit_code=1))
        assert execution.status == "infra_error", execution.message
        assert "quota exhausted" in (execution.message or "")

    @pytest.mark.parametrize(("version", "warned"), [
        ("0.2.0-rc.2", False), ("0.3.1", False), ("0.1.6", True), ("dsh (dev build)", True)])
    def test_a_release_older_than_the_flags_is_warned_about(
        self, invocation: AgentInvocation, fake: FakeCli, version: str, warned: bool
    ) -> None:
        """The flags are those of dsh 0.2: an older or unreadable --version is warned about in
        the message (the run still goes ahead)."""
        fake.describe(version=version, requires=self.requires)
        execution = make_agent({}).run(invocation)
        assert execution.status == "completed", execution.message
        assert ("warning: " in (execution.message or "")) is warned
        if warned:
            assert "0.2" in (execution.message or "")

    def test_a_flag_regression_makes_the_fake_refuse(self, invocation: AgentInvocation) -> None:
        execution = make_agent({"output_format_args": []}).run(invocation)
        assert (execution.status, execution.exit_code) == ("failed", 3)
        assert "missing --json -" in (execution.message or "")

    def test_provider_without_model_fails_before_launch(self, invocation: AgentInvocation,
                                                        fake: FakeCli) -> None:
        execution = make_agent({"provider": "acme"}).run(invocation)
        assert execution.status == "failed"
        assert "need agent.options.model" in (execution.message or "")

    # ------------------------------------------------------------------ check

    def test_check_reports_credentials_from_the_environment(
        self, fake: FakeCli, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """dsh has no login-status command: only DEEPSEEK_API_KEY says anything."""
        monkeypatch.setenv("PATH", f"{fake.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
        check = make_agent({}).check()
        assert (check.installed, check.version, check.authenticated) == (True, VERSION, True)
        assert "DEEPSEEK_API_KEY" in check.detail
        monkeypatch.delenv("DEEPSEEK_API_KEY")
        check = make_agent({}).check()
        assert (check.installed, check.authenticated, check.ready) == (True, None, True)


def test_the_factory_builds_the_agent() -> None:
    assert isinstance(make_agent({}), DeepSeekAgent)


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("options", [
    {},
    {"model": "deepseek-v4-pro", "provider": "deepseek-official", "reasoning_effort": "max",
     "permission_mode": "workspace-write", "patches": ["a.yml"], "telemetry": False,
     "extra_args": ["--session-id", "s"], "headless_args": ["headless"],
     "output_format_args": ["--json"], "executable": "dsh", "grace_seconds": 5},
])
def test_schema_accepts(options: dict[str, Any]) -> None:
    Draft202012Validator(CONFIG_SCHEMA).validate(options)


@pytest.mark.parametrize("options", [
    {"provider": "deepseek-official"},  # a provider without a model
    {"reasoning_effort": "high"},  # an effort without a model
    {"permission_mode": "yolo"},
    {"model_flag": "--model"},  # unknown keys fail
])
def test_schema_rejects(options: dict[str, Any]) -> None:
    assert not Draft202012Validator(CONFIG_SCHEMA).is_valid(options)


# --------------------------------------------------------------------------- command line


def test_default_command_line(make_invocation: Any) -> None:
    invocation = make_invocation()
    cmd = make_agent({}).command(invocation, "/opt/bin/dsh")
    assert list(cmd.argv) == ["/opt/bin/dsh", "--profile", "headless", "--json", "-"]
    assert cmd.stdin == invocation.prompt
    assert dict(cmd.env) == {"DSH_PERMISSION_MODE": "workspace-write",
                             "DSH_TELEMETRY_DISABLED": "1"}


def test_model_overlays_and_extra_args(make_invocation: Any, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    invocation = make_invocation()
    monkeypatch.chdir(tmp_path)
    agent = make_agent({"model": "deepseek-v4-pro", "reasoning_effort": "max",
                        "patches": ["mine.yml"], "extra_args": ["--session-id", "s-1"],
                        "permission_mode": "read-only", "telemetry": True})
    cmd = agent.command(invocation, "dsh")
    model_patch = invocation.logs_dir / "dsh-model.patch.yml"
    assert list(cmd.argv) == ["dsh", "--profile", "headless",
                              "--patch", str(tmp_path / "mine.yml"),
                              "--patch", str(model_patch),
                              "--json", "-", "--session-id", "s-1"]
    assert json.loads(model_patch.read_text()) == [{
        "id": "agent-default-model",
        "config": {"provider": "deepseek-official", "model": "deepseek-v4-pro",
                   "reasoningEffort": "max"}}]
    assert dict(cmd.env) == {"DSH_PERMISSION_MODE": "read-only"}


# --------------------------------------------------------------------------- usage


def test_usage_adds_cache_reads_and_writes_to_the_input() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=90),
              step_end(2, inputTokens=5, outputTokens=2, cacheReadTokens=100, cacheWriteTokens=7)]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=10 + 90 + 5 + 100 + 7, cached_input_tokens=190, cache_write_tokens=None,
        output_tokens=5, turns=2)


def test_usage_without_cache_reads_leaves_the_cached_total_unknown() -> None:
    """dsh takes cache reads out of ``inputTokens`` only when it reports them, so the input is
    still whole; how much of it came from the cache is not."""
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=90),
              step_end(2, inputTokens=5, outputTokens=2)]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=105, cached_input_tokens=None, output_tokens=5, turns=2)


def test_usage_sums_buckets_every_step_reports() -> None:
    events = [SESSION,
              step_end(1, inputTokens=10, outputTokens=30, cacheReadTokens=0, cacheWriteTokens=4,
                       reasoningTokens=20),
              step_end(2, inputTokens=5, outputTokens=8, cacheReadTokens=14, cacheWriteTokens=0,
                       reasoningTokens=3)]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=10 + 4 + 5 + 14, cached_input_tokens=14, cache_write_tokens=4,
        output_tokens=38, reasoning_tokens=23, turns=2)


def test_a_step_without_usage_leaves_the_totals_unknown() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=0), step_end(2)]
    assert make_agent({}).usage(events) == AgentUsage(turns=2)


def test_usage_of_a_stream_without_steps_is_all_unknown() -> None:
    assert make_agent({}).usage([SESSION, {"type": "final", "text": ""}]) == AgentUsage()


def trimmed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` as the runtime keeps them (``aka_core.kits.agent_runtime._pump_events``)."""
    kept: list[dict[str, Any]] = []
    for event in events:
        kept.append(event)
        if len(kept) > MAX_EVENTS_KEPT:
            del kept[KEEP_FIRST_EVENTS: KEEP_FIRST_EVENTS + MAX_EVENTS_KEPT // 2]
    return kept


def test_usage_is_unknown_when_steps_of_a_long_stream_were_dropped() -> None:
    events = [SESSION, *(step_end(i, inputTokens=1, outputTokens=1, cacheReadTokens=0)
                         for i in range(1, MAX_EVENTS_KEPT + 100))]
    kept = trimmed(events)
    assert len(kept) < len(events) and kept[0] == SESSION
    assert make_agent({}).usage(kept) == AgentUsage()
    assert make_agent({}).usage(events[:MAX_EVENTS_KEPT]).turns == MAX_EVENTS_KEPT - 1


def test_dropped_steps_are_told_by_their_numbers() -> None:
    long = [{"type": "text", "text": "x"}] * MAX_EVENTS_KEPT
    assert not steps_were_dropped(long, [step_end(1), step_end(2), step_end(1, turn=2)])
    assert not steps_were_dropped(long, [step_end(1), step_end(2), step_end(3, turn=2)])
    assert steps_were_dropped(long, [step_end(2), step_end(3)])  # the first steps are gone
    assert steps_were_dropped(long, [step_end(1), step_end(3)])
    assert steps_were_dropped(long, [step_end(1), step_end(1, turn=3)])
    assert steps_were_dropped(long, [step_end(1), {"type": "status", "phase": "step_end"}])
    # a list the runtime never trimmed is whole, however its steps are numbered
    assert not steps_were_dropped(long[:MAX_EVENTS_KEPT // 2], [step_end(2), step_end(5)])


def test_usage_ignores_values_that_are_not_integers() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=1)]
    events[1]["usage"]["outputTokens"] = "3"
    assert make_agent({}).usage(events) == AgentUsage(input_tokens=11, cached_input_tokens=1,
                                                     output_tokens=None, turns=1)
