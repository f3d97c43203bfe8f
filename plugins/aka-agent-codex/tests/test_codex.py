"""The codex agent against a fake ``codex`` CLI (``fake_codex.py``) that replays recorded output.

No network, credentials or real CLI: the fake is copied to ``<tmp>/bin/codex`` and put first on the
PATH the agent gets; ``FAKE_CODEX_MODE`` picks what it does (see its docstring).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aka_agent_codex
import attrs
import pytest
from aka_agent_codex import CONFIG_SCHEMA, CodexAgent, aka_register_agents, make_agent

from aka_core import api
from aka_core.host import PluginHost
from aka_core.models import AgentUsage
from aka_core.records import AgentInvocation
from aka_core.results import agent_cost_path, read_task_result
from aka_core.testing import AgentContract
from aka_core.testing.processes import alive
from aka_core.yamlio import dump_yaml

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"

# What exec_completed.jsonl implies (see fixtures/README.md).
COMPLETED_USAGE = {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122,
                   "cost_usd": None, "turns": 1}
NO_USAGE = {"input_tokens": None, "cached_input_tokens": None, "output_tokens": None,
            "cost_usd": None, "turns": None}


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """``<tmp>/bin`` holding the fake as ``codex`` (executable) and the fixtures it replays."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    shutil.copyfile(HERE / "fake_codex.py", fake)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    shutil.copytree(FIXTURES, bin_dir / "fixtures")
    return bin_dir


def with_fake(invocation: AgentInvocation, bin_dir: Path, **env: str) -> AgentInvocation:
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return attrs.evolve(invocation, environment={**invocation.environment, "PATH": path, **env})


@pytest.fixture
def codex_invocation(make_invocation: Callable[..., AgentInvocation],
                     fake_bin: Path) -> Callable[..., AgentInvocation]:
    """``codex_invocation(mode="normal", timeout_seconds=60, **env)``: the fake first on PATH."""

    def make(mode: str = "normal", *, timeout_seconds: float = 60.0, **env: str) -> AgentInvocation:
        return with_fake(make_invocation(timeout_seconds=timeout_seconds), fake_bin,
                         FAKE_CODEX_MODE=mode, **env)

    return make


def record_of(invocation: AgentInvocation) -> dict[str, Any]:
    """What the fake received (argv, prompt, cwd, environment)."""
    path = invocation.logs_dir / "agent_home" / "fake_codex_record.json"
    return json.loads(path.read_text(encoding="utf-8"))


def usage_fields(usage: AgentUsage) -> dict[str, Any]:
    return {k: v for k, v in attrs.asdict(usage).items() if k != "model"}


# --------------------------------------------------------------------------- the contract


class TestCodexContract(AgentContract):
    record = aka_register_agents()[0]
    options = {"model": "gpt-5.1-codex", "reasoning_effort": "high", "extra_args": ["--ephemeral"]}

    @pytest.fixture
    def invocation(self, make_invocation: Callable[..., AgentInvocation],
                   fake_bin: Path) -> AgentInvocation:
        return with_fake(make_invocation(self.task_id), fake_bin)


def test_registered_through_the_host(register_plugin) -> None:
    host = register_plugin(aka_agent_codex)
    assert host.agent("codex").factory is make_agent


def test_schema_rejects_unknown_options_and_efforts() -> None:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(CONFIG_SCHEMA)
    assert not list(validator.iter_errors({"model": "gpt-5.1-codex", "reasoning_effort": "xhigh",
                                           "model_provider": "openai", "profile": "ci"}))
    assert list(validator.iter_errors({"modle": "gpt-5.1-codex"}))
    assert list(validator.iter_errors({"reasoning_effort": "maximum"}))


# --------------------------------------------------------------------------- the command line


def test_command_line(make_invocation: Callable[..., AgentInvocation]) -> None:
    invocation = make_invocation()
    agent = make_agent({"model": "gpt-5.1-codex", "reasoning_effort": "high",
                        "model_provider": "openai", "profile": "ci",
                        "extra_args": ["--add-dir", "/opt/rocm"]})
    cmd = agent.command(invocation, "/usr/bin/codex")
    workspace = str(invocation.workspace.resolve())
    assert list(cmd.argv) == [
        "/usr/bin/codex", "exec", "--json", "--color", "never", "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox", "--cd", workspace,
        "--model", "gpt-5.1-codex", "--profile", "ci",
        "-c", 'model_reasoning_effort="high"', "-c", 'model_provider="openai"',
        "--add-dir", "/opt/rocm", "-"]
    assert cmd.stdin == invocation.prompt


def test_command_line_without_options_leaves_codex_defaults(
        make_invocation: Callable[..., AgentInvocation]) -> None:
    cmd = make_agent({}).command(make_invocation(), "codex")
    assert not {"--model", "--profile", "-c"} & set(cmd.argv)
    assert cmd.argv[-1] == "-"


# --------------------------------------------------------------------------- runs


def test_normal_finish_records_usage_from_the_events(codex_invocation) -> None:
    invocation = codex_invocation()
    execution = make_agent({"model": "gpt-5.1-codex"}).run(invocation)

    assert execution.status == "completed", execution.message
    assert (execution.exit_code, execution.timed_out) == (0, False)
    assert execution.version == "codex-cli 0.130.0"
    assert execution.usage == AgentUsage(model="gpt-5.1-codex", **COMPLETED_USAGE)
    assert "# reviewed by codex" in (invocation.workspace / "kernel.py").read_text()
    seen = record_of(invocation)
    assert seen["prompt"] == invocation.prompt, "the prompt arrives on stdin"
    assert Path(seen["cwd"]).resolve() == invocation.workspace.resolve()
    events = (invocation.logs_dir / "agent.jsonl").read_text().splitlines()
    assert len(events) == 8 and json.loads(events[-1])["type"] == "turn.completed"


def test_model_is_null_when_codex_chose_it(codex_invocation) -> None:
    execution = make_agent({}).run(codex_invocation())
    assert execution.status == "completed", execution.message
    assert execution.usage == AgentUsage(model=None, **COMPLETED_USAGE)


def test_rerouted_model_is_the_one_codex_reports(codex_invocation) -> None:
    execution = make_agent({"model": "gpt-5.1-codex-max"}).run(codex_invocation("rerouted"))
    assert execution.status == "completed", execution.message
    assert execution.usage == AgentUsage(model="gpt-5.1-codex-mini", input_tokens=1200,
                                         cached_input_tokens=0, output_tokens=35, turns=1)


def test_hang_is_stopped_at_the_budget_with_its_children(codex_invocation) -> None:
    invocation = codex_invocation("hang", timeout_seconds=2.0)
    started = time.monotonic()
    execution = make_agent({"grace_seconds": 1}).run(invocation)
    elapsed = time.monotonic() - started

    assert execution.status == "timed_out" and execution.timed_out
    assert elapsed < 2.0 + 1.0 + 3.0, f"stopped after {elapsed:.1f} s"
    pids = json.loads((invocation.logs_dir / "agent_home" / "fake_codex_pids.json").read_text())
    deadline = time.monotonic() + 2.0
    while any(alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [name for name, pid in pids.items() if alive(pid)], pids
    assert execution.usage == AgentUsage(**NO_USAGE), "a turn that never completed has no usage"


def test_non_zero_exit_fails_with_the_exit_code(codex_invocation) -> None:
    execution = make_agent({}).run(codex_invocation("fail"))
    assert execution.status == "failed"
    assert execution.exit_code == 1
    assert execution.usage == AgentUsage(**NO_USAGE)


def test_auth_failure_is_not_authenticated(codex_invocation) -> None:
    execution = make_agent({}).run(codex_invocation("auth"))
    assert execution.status == "not_authenticated", execution.message
    assert execution.exit_code == 1
    assert "401 Unauthorized" in (execution.message or "")


def test_not_on_path_is_not_installed(make_invocation, tmp_path: Path) -> None:
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    invocation = attrs.evolve(make_invocation(), environment={"PATH": str(empty)})
    execution = make_agent({}).run(invocation)
    assert execution.status == "not_installed"
    assert "'codex' is not on PATH" in (execution.message or "")


def test_malformed_lines_are_counted_and_kept(codex_invocation) -> None:
    invocation = codex_invocation("malformed")
    execution = make_agent({}).run(invocation)

    assert execution.status == "completed", execution.message
    assert "3 lines were not JSON" in (execution.message or "")
    assert usage_fields(execution.usage) == COMPLETED_USAGE
    lines = [json.loads(line) for line in
             (invocation.logs_dir / "agent.jsonl").read_text().splitlines()]
    unparsed = [line["aka_unparsed_line"] for line in lines if "aka_unparsed_line" in line]
    assert unparsed == ["Reading prompt from stdin...", '{"type":"item.completed","item":{"id":',
                        "[1, 2, 3]"]
    assert len(lines) == 8 + 3


def test_a_broken_command_line_is_caught_by_the_fake(codex_invocation) -> None:
    """The fake refuses a command line without the flags the agent relies on (exit 3)."""

    class Regressed(CodexAgent):
        def command(self, invocation, executable):
            cmd = super().command(invocation, executable)
            return attrs.evolve(cmd, argv=[a for a in cmd.argv if a != "--skip-git-repo-check"])

    execution = Regressed({}).run(codex_invocation())
    assert (execution.status, execution.exit_code) == ("failed", 3)
    assert "missing --skip-git-repo-check" in (execution.message or "")


# --------------------------------------------------------------------------- environment


def test_environment_passes_credentials_only(codex_invocation,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-test")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-test")
    invocation = codex_invocation()
    execution = make_agent({}).run(invocation)
    assert execution.status == "completed", execution.message

    env = record_of(invocation)["env"]
    assert env["CODEX_API_KEY"] == "sk-codex-test"
    assert env["OPENAI_API_KEY"] == "sk-openai-test"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env
    private_home = invocation.logs_dir / "agent_home"
    assert env["HOME"] == str(private_home)
    assert env["CODEX_HOME"] == str(private_home / ".codex")
    assert (private_home / ".codex").is_dir(), "codex refuses a CODEX_HOME that does not exist"


def test_config_dir_becomes_codex_home(codex_invocation, tmp_path: Path) -> None:
    login = tmp_path / "codex_login"
    login.mkdir()
    invocation = codex_invocation()
    execution = make_agent({"config_dir": str(login)}).run(invocation)
    assert execution.status == "completed", execution.message
    assert record_of(invocation)["env"]["CODEX_HOME"] == str(login)


# --------------------------------------------------------------------------- check


def test_check_reports_version_and_login(fake_bin: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The status command runs against the folder a run would use: the stored login of
    config_dir, and none in the fresh folder a run gets without it."""
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    login = tmp_path / "codex_login"
    login.mkdir()
    (login / "auth.json").write_text('{"OPENAI_API_KEY": "sk-proj-test"}\n', encoding="utf-8")

    found = make_agent({"executable": str(fake_bin / "codex"), "config_dir": str(login)}).check()
    assert (found.installed, found.version, found.authenticated) == (
        True, "codex-cli 0.130.0", True)
    assert "Logged in using an API key" in found.detail

    found = make_agent({"executable": str(fake_bin / "codex")}).check()
    assert (found.installed, found.authenticated) == (True, False)
    assert found.detail == "Not logged in"


def test_check_counts_codex_api_key_as_a_login(fake_bin: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex-test")
    found = make_agent({"executable": str(fake_bin / "codex")}).check()
    assert found.authenticated is True
    assert "CODEX_API_KEY" in found.detail and "Not logged in" in found.detail


def test_check_not_installed(tmp_path: Path) -> None:
    found = make_agent({"executable": str(tmp_path / "nowhere" / "codex")}).check()
    assert (found.installed, found.authenticated) == (False, None)


# --------------------------------------------------------------------------- usage


def test_usage_takes_the_last_running_total() -> None:
    """turn.completed carries the thread's running total, so a second turn does not add up."""
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.completed",
         "usage": {"input_tokens": 100, "cached_input_tokens": 10, "output_tokens": 5}},
        {"type": "turn.completed",
         "usage": {"input_tokens": 250, "cached_input_tokens": 90, "output_tokens": 12}},
    ]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=250, cached_input_tokens=90, output_tokens=12, turns=2)


def test_usage_without_events_is_all_null() -> None:
    assert make_agent({"model": "m"}).usage([]) == AgentUsage(model="m")
    broken = [{"type": "turn.completed", "usage": "n/a"}]
    assert make_agent({}).usage(broken) == AgentUsage(turns=1)


# --------------------------------------------------------------------------- whole runs


def codex_host() -> PluginHost:
    """Installed plugins (the speedup scorer ...), with this one registered if not installed."""
    host = PluginHost()
    if "codex" not in host.names("agent"):
        host.register(aka_agent_codex)
    return host


def run_once(tmp_path: Path, make_task: Callable[..., Path], fake_bin: Path) -> api.RunOutcome:
    make_task("demo/scale_add")
    config = tmp_path / "run_config.yaml"
    config.write_text(dump_yaml({
        "agent": {"template": "codex", "timeout_seconds": 60,
                  "options": {"executable": str(fake_bin / "codex"), "model": "gpt-5.1-codex",
                              "grace_seconds": 1,
                              "pass_env": ["FAKE_CODEX_MODE", "FAKE_CODEX_TOUCH"]}},
        "tasks": ["demo"], "target_gpu_model": "cpu",
        "tasks_directory": str(tmp_path / "tasks"),
    }), encoding="utf-8")
    return api.run(config, output_root=tmp_path / "out", host=codex_host())


@pytest.mark.slow
def test_whole_run_records_execution_and_costs(tmp_path: Path, make_task, fake_bin: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "normal")
    outcome = run_once(tmp_path, make_task, fake_bin)

    result = read_task_result(outcome.run_dir / "demo" / "scale_add" / "task_result.yaml")
    assert result.status == "completed", result.error
    execution = result.agent_execution
    assert execution is not None
    assert (execution.agent, execution.status, execution.exit_code) == ("codex", "completed", 0)
    assert execution.version == "codex-cli 0.130.0"
    assert execution.usage == AgentUsage(model="gpt-5.1-codex", **COMPLETED_USAGE)
    costs = json.loads(agent_cost_path(outcome.run_dir, "demo/scale_add").read_text())
    assert costs == {"task_id": "demo/scale_add", "agent": "codex", "model": "gpt-5.1-codex",
                     **COMPLETED_USAGE}
    assert result.candidate_accepted is True, result.acceptance


@pytest.mark.slow
def test_whole_run_rejects_a_write_into_the_task_folder(tmp_path: Path, make_task,
                                                        fake_bin: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "tasks" / "demo" / "scale_add" / "planted.py"
    monkeypatch.setenv("FAKE_CODEX_MODE", "touch")
    monkeypatch.setenv("FAKE_CODEX_TOUCH", str(planted))
    outcome = run_once(tmp_path, make_task, fake_bin)

    assert planted.is_file(), "the fake wrote outside its workspace"
    result = read_task_result(outcome.run_dir / "demo" / "scale_add" / "task_result.yaml")
    assert result.agent_execution is not None and result.agent_execution.status == "completed"
    assert result.candidate_accepted is False
    assert result.acceptance is not None
    gates = {g.name: g for g in result.acceptance.gates}
    assert gates["evaluator_files_untouched"].passed is False
    assert "planted.py" in gates["evaluator_files_untouched"].detail
