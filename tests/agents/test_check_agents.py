"""`aka check-agents` applies one rule to the four CLI agents: an API key the CLI reads counts as a
login unless the CLI's status command says the key is refused; what the CLIs print is shown
without terminal escapes, in the table and in ``--json``. Each CLI is a fake (``FakeCli``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aka_core.cli import main
from aka_core.kits.agent_runtime import CliAgent
from aka_core.plugin.host import PluginHost
from aka_core.testing import FakeCli, Reply
from aka_core.yamlio import dump_yaml

AGENTS = ("claude-code", "codex", "cursor", "deepseek")
RED, BOLD, RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"
NOT_LOGGED_IN = f"{RED}{BOLD}Not logged in{RESET}\n"


def build(name: str, **options: Any) -> CliAgent:
    agent = PluginHost().agent(name).factory(options)
    assert isinstance(agent, CliAgent)
    return agent


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in AGENTS:
        for key in build(name).credential_env:
            monkeypatch.delenv(key, raising=False)
    return monkeypatch


def install(name: str, tmp_path: Path, status: Reply | None = None) -> CliAgent:
    """The agent with a fake CLI whose status command (if it has one) answers ``status``."""
    agent = build(name)
    replies = []
    if agent.auth_status_args is not None:
        replies.append(status or Reply(argv=agent.auth_status_args, stdout=NOT_LOGGED_IN,
                                       exit_code=1))
    fake = FakeCli.install(tmp_path / name / "bin", agent.executable,
                           version=f"{BOLD}{name} 9.9.9{RESET}", replies=replies)
    return build(name, executable=str(fake.executable))


@pytest.mark.parametrize("name", AGENTS)
def test_an_api_key_without_a_login_is_ready_for_every_cli(
    name: str, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """The status command says "Not logged in" (as ``codex login status`` and ``claude auth
    status`` do when only a key is set); the key the CLI reads decides."""
    agent = install(name, tmp_path)
    key = (agent.api_key_env or agent.credential_env)[0]
    clean_env.setenv(key, "sk-test-key")
    found = agent.check()
    assert (found.installed, found.authenticated, found.ready) == (True, True, True), found.detail
    assert key in found.detail
    assert found.version == f"{name} 9.9.9"
    assert "\x1b" not in found.detail + (found.version or "")


@pytest.mark.parametrize("name", AGENTS)
def test_without_a_key_the_status_command_decides(
    name: str, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    found = install(name, tmp_path).check()
    if name == "deepseek":  # no status command: unknown, still ready
        assert (found.authenticated, found.ready) == (None, True)
    else:
        assert (found.authenticated, found.ready) == (False, False)
        assert found.detail == "Not logged in"


@pytest.mark.parametrize("name", ["claude-code", "codex", "cursor"])
def test_a_key_the_status_command_refuses_is_not_a_login(
    name: str, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    agent = build(name)
    assert agent.auth_status_args is not None
    agent = install(name, tmp_path, Reply(argv=agent.auth_status_args, exit_code=1,
                                          stderr="Error: Invalid API key provided\n"))
    clean_env.setenv((agent.api_key_env or agent.credential_env)[0], "sk-revoked")
    found = agent.check()
    assert (found.authenticated, found.ready) == (False, False)
    assert "refused" in found.detail and "Invalid API key" in found.detail


def test_a_key_passed_through_but_not_read_by_the_cli_is_no_login(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """codex passes OPENAI_API_KEY to model providers, but does not log in with it."""
    agent = install("codex", tmp_path)
    clean_env.setenv("OPENAI_API_KEY", "sk-openai")
    assert agent.check().authenticated is False


def test_the_command_strips_terminal_escapes_also_in_json(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = install("cursor", tmp_path)
    (tmp_path / "tasks" / "demo").mkdir(parents=True)
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({
        "agent": {"template": "cursor", "options": {"executable": agent.options.executable}},
        "tasks": ["demo"], "target_gpu_model": "cpu", "tasks_directory": str(tmp_path / "tasks"),
    }), encoding="utf-8")
    assert main(["check-agents", str(config), "--json"]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\u001b" not in out
    (found,) = json.loads(out)
    assert (found["agent"], found["detail"], found["version"], found["ready"]) == (
        "cursor", "Not logged in", "cursor 9.9.9", False)
    clean_env.setenv("CURSOR_API_KEY", "key")
    assert main(["check-agents", str(config)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "cursor         ready" in out
