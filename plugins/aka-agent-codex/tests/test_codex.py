"""The codex agent against a fake ``codex`` (``aka_core.testing.fake_cli``) replaying the
``codex exec --json`` output of tests/fixtures/: the CLI agent contract, the command line, the
model, login and usage. No network, credentials or real CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aka_agent_codex
import attrs
import pytest
from aka_agent_codex import CONFIG_SCHEMA, aka_register_agents, make_agent
from jsonschema import Draft202012Validator

from aka_core.plugin import AgentInvocation, AgentUsage
from aka_core.testing import CliAgentContract, Ending, FakeCli, Outcome, Reply, Requires, Script, fake_cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VERSION = "codex-cli 0.130.0"
MODEL = "gpt-5.1-codex"
COMPLETED = Script.from_file(FIXTURES / "exec_completed.jsonl")
COMPLETED_TOKENS = {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}
"""What exec_completed.jsonl implies (see fixtures/README.md); Codex reports no cost nor turns."""
LOGIN = (
    # `codex login status` reads the login stored in $CODEX_HOME/auth.json
    Reply(argv=("login", "status"), stderr="Logged in using an API key - sk-proj-***WXYZ\n",
          if_exists="$CODEX_HOME/auth.json"),
    Reply(argv=("login", "status"), stderr="Not logged in\n", exit_code=1),
)


class TestCodex(CliAgentContract):
    record = aka_register_agents()[0]
    plugin = aka_agent_codex
    options = {"model": MODEL, "reasoning_effort": "high", "extra_args": ["--ephemeral"],
               "grace_seconds": 1}
    cli_version = VERSION
    requires = Requires(
        args=(("exec",), ("--json",), ("--skip-git-repo-check",),
              ("--dangerously-bypass-approvals-and-sandbox",)),
        stdin_prompt=True, last_arg="-", cwd_flag="--cd",
        env_dirs=("CODEX_HOME",))  # Codex refuses a CODEX_HOME that does not exist
    replies = LOGIN
    completed = Outcome(
        script=COMPLETED.after(fake_cli.append("kernel.py", "\n# reviewed by codex\n")),
        usage=AgentUsage(model=MODEL, **COMPLETED_TOKENS))
    failed = Outcome(script=Script.from_file(FIXTURES / "exec_context_window.jsonl",
                                             exit_code=1),
                     usage=AgentUsage(model=MODEL), message="ran out of room")
    """A failure of the agent's own run (its context window), not of the provider."""
    rate_limited = Ending(script=Script.from_file(FIXTURES / "exec_rate_limited.jsonl",
                                                  exit_code=1),
                          message="last status: 429 Too Many Requests")
    infra_error = Ending(script=Script.from_file(FIXTURES / "exec_failed.jsonl", exit_code=1),
                         message="stream disconnected before completion")
    model_says_unauthorized = Script.from_file(
        FIXTURES / "exec_context_window.jsonl", exit_code=1).interleaved(
        ['{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":'
         '"The API answers 401 Unauthorized: Incorrect API key. Not logged in, I mock it."}}'])
    """A failed turn whose agent message (the model's words) quotes a 401."""
    refused = Script.from_file(FIXTURES / "exec_unauthorized.jsonl", exit_code=1).then(
        fake_cli.stderr("ERROR: unexpected status 401 Unauthorized: Incorrect API key provided"))
    stopped = Outcome(script=COMPLETED.head(2), usage=AgentUsage(model=MODEL))
    """thread.started and turn.started only: a turn that never completed has no usage."""
    not_json = ("Reading prompt from stdin...", '{"type":"item.completed","item":{"id":',
                "[1, 2, 3]")

    # ------------------------------------------------------------------ documented usage

    def test_documented_sample_output(self, agent: Any, invocation: AgentInvocation,
                                      fake: FakeCli) -> None:
        """The "Sample output" of the JSON output mode, verbatim: "JSON output mode" in
        https://github.com/openai/codex/blob/main/docs/exec.md (also
        https://developers.openai.com/codex/noninteractive). Its ``turn.completed`` reports
        ``input_tokens`` 24763 (cached ones included, as OpenAI counts them),
        ``cached_input_tokens`` 24448 and ``output_tokens`` 122; no cost, no turn count."""
        execution = self.run_with(agent, invocation, fake, COMPLETED)
        assert execution.usage == AgentUsage(
            model=MODEL, input_tokens=24763, cached_input_tokens=24448, cache_write_tokens=None,
            output_tokens=122, reasoning_tokens=None, cost_usd=None, turns=None)

    # ------------------------------------------------------------------ runs

    def test_the_cli_works_in_the_workspace(self, agent: Any, invocation: AgentInvocation,
                                            fake: FakeCli) -> None:
        assert agent.run(invocation).status == "completed"
        assert "# reviewed by codex" in (invocation.workspace / "kernel.py").read_text()
        assert fake.received(invocation)["argv"][-1] == "-", "the prompt comes from stdin"

    def test_model_is_null_when_codex_chose_it(self, invocation: AgentInvocation) -> None:
        execution = make_agent({}).run(invocation)
        assert execution.status == "completed", execution.message
        assert execution.usage == AgentUsage(model=None, **COMPLETED_TOKENS)

    def test_rerouted_model_is_the_one_codex_reports(self, invocation: AgentInvocation,
                                                     fake: FakeCli) -> None:
        execution = self.run_with(make_agent({"model": "gpt-5.1-codex-max"}), invocation, fake,
                                  Script.from_file(FIXTURES / "exec_rerouted.jsonl"))
        assert execution.status == "completed", execution.message
        assert execution.usage == AgentUsage(model="gpt-5.1-codex-mini", input_tokens=1200,
                                             cached_input_tokens=0, output_tokens=35)

    def test_refused_credentials_say_so(self, agent: Any, invocation: AgentInvocation,
                                        fake: FakeCli) -> None:
        execution = self.run_with(agent, invocation, fake, self.refused)
        assert "401 Unauthorized" in (execution.message or "")

    def test_codex_home_is_created_or_the_config_dir(
        self, invocation: AgentInvocation, make_invocation: Any, fake: FakeCli, tmp_path: Path
    ) -> None:
        assert make_agent({}).run(invocation).status == "completed"
        private_home = invocation.logs_dir / "agent_home"
        assert fake.received(invocation)["env"]["CODEX_HOME"] == str(private_home / ".codex")
        assert (private_home / ".codex").is_dir(), "codex refuses a CODEX_HOME that does not exist"
        login = tmp_path / "codex_login"
        login.mkdir()
        other = fake.on_path(make_invocation("demo/with_login"))
        assert make_agent({"config_dir": str(login)}).run(other).status == "completed"
        assert fake.received(other)["env"]["CODEX_HOME"] == str(login)

    # ------------------------------------------------------------------ check

    def test_check_reads_the_login_of_the_folder_a_run_uses(
        self, fake: FakeCli, tmp_path: Path
    ) -> None:
        """The status command runs against the folder a run would use: the stored login of
        config_dir, and none in the fresh folder a run gets without it."""
        login = tmp_path / "codex_login"
        login.mkdir()
        (login / "auth.json").write_text('{"OPENAI_API_KEY": "sk-proj-test"}\n', encoding="utf-8")
        found = make_agent({"executable": str(fake.executable), "config_dir": str(login)}).check()
        assert (found.installed, found.version, found.authenticated) == (True, VERSION, True)
        assert "Logged in using an API key" in found.detail
        found = make_agent({"executable": str(fake.executable)}).check()
        assert (found.installed, found.authenticated) == (True, False)
        assert found.detail == "Not logged in"

    def test_check_counts_codex_api_key_as_a_login(self, fake: FakeCli,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("CODEX_API_KEY", "sk-codex-test")
        found = make_agent({"executable": str(fake.executable)}).check()
        assert found.authenticated is True
        assert "CODEX_API_KEY" in found.detail and "Not logged in" in found.detail

    def test_check_does_not_count_openai_api_key(self, fake: FakeCli,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """OPENAI_API_KEY is passed for model providers; `codex exec` does not log in with it."""
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
        found = make_agent({"executable": str(fake.executable)}).check()
        assert (found.authenticated, found.detail) == (False, "Not logged in")

    def test_the_reason_is_codex_s_own_not_its_stderr(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """Codex's error event is quoted, before whatever stderr says."""
        execution = self.run_with(agent, invocation, fake, self.rate_limited.script.then(
            fake_cli.stderr("2026-01-01T00:00:00Z WARN codex_core::config: an unrelated warning")))
        message = execution.message or ""
        assert execution.status == "rate_limited", message
        assert message.index("codex said: exceeded retry limit") < message.index("unrelated")

    def test_a_turn_failed_after_exit_0_is_not_completed(
        self, agent: Any, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        execution = self.run_with(agent, invocation, fake,
                                  Script.from_file(FIXTURES / "exec_context_window.jsonl"))
        assert (execution.status, execution.exit_code) == ("failed", 0), execution.message


# --------------------------------------------------------------------------- options


def test_schema_rejects_unknown_options_and_efforts() -> None:
    validator = Draft202012Validator(CONFIG_SCHEMA)
    assert not list(validator.iter_errors({"model": "gpt-5.1-codex", "reasoning_effort": "xhigh",
                                           "model_provider": "openai", "profile": "ci"}))
    assert list(validator.iter_errors({"modle": "gpt-5.1-codex"}))
    assert list(validator.iter_errors({"reasoning_effort": "maximum"}))


def test_check_not_installed_knows_no_login(tmp_path: Path) -> None:
    found = make_agent({"executable": str(tmp_path / "nowhere" / "codex")}).check()
    assert (found.installed, found.authenticated) == (False, None)


# --------------------------------------------------------------------------- the command line


def test_command_line(make_invocation: Any) -> None:
    invocation = make_invocation()
    agent = make_agent({"model": "gpt-5.1-codex", "reasoning_effort": "high",
                        "model_provider": "openai", "profile": "ci",
                        "extra_args": ["--add-dir", "/opt/rocm"]})
    cmd = agent.command(invocation, "/usr/bin/codex")
    workspace = str(invocation.workspace.resolve())
    assert list(cmd.argv) == [
        "/usr/bin/codex", "exec", "--json", "--color", "never", "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox", "--cd", workspace,
        "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
        "--model", "gpt-5.1-codex", "--profile", "ci",
        "-c", 'model_reasoning_effort="high"', "-c", 'model_provider="openai"',
        "--add-dir", "/opt/rocm", "-"]
    assert cmd.stdin == invocation.prompt


def test_command_line_without_options_leaves_codex_defaults(make_invocation: Any) -> None:
    cmd = make_agent({}).command(make_invocation(), "codex")
    assert not {"--model", "--profile"} & set(cmd.argv)
    settings = [cmd.argv[i + 1] for i, arg in enumerate(cmd.argv) if arg == "-c"]
    assert settings == ["check_for_update_on_startup=false", "analytics.enabled=false"]
    assert cmd.argv[-1] == "-"


# --------------------------------------------------------------------------- usage


def test_usage_takes_the_last_running_total_and_counts_no_turns() -> None:
    """turn.completed carries the thread's running total, so a second one does not add up; and
    it is not a count of turns (Codex reports none)."""
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.completed",
         "usage": {"input_tokens": 100, "cached_input_tokens": 10, "output_tokens": 5}},
        {"type": "turn.completed",
         "usage": {"input_tokens": 250, "cached_input_tokens": 90, "output_tokens": 12}},
    ]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=250, cached_input_tokens=90, output_tokens=12, turns=None)


def test_usage_reads_reasoning_and_cache_writes_where_reported() -> None:
    usage = {"input_tokens": 900, "cached_input_tokens": 600, "cache_write_input_tokens": 200,
             "output_tokens": 80, "reasoning_output_tokens": 64}
    assert make_agent({}).usage([{"type": "turn.completed", "usage": usage}]) == AgentUsage(
        input_tokens=900, cached_input_tokens=600, cache_write_tokens=200, output_tokens=80,
        reasoning_tokens=64)


def test_usage_without_events_is_all_null() -> None:
    assert make_agent({"model": "m"}).usage([]) == AgentUsage(model="m")
    broken = [{"type": "turn.completed", "usage": "n/a"}]
    assert make_agent({}).usage(broken) == AgentUsage()
    assert attrs.asdict(make_agent({}).usage([])) == dict.fromkeys(attrs.asdict(AgentUsage()))
