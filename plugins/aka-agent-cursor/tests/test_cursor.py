"""The cursor agent against a fake ``cursor-agent`` (tests/fake_cursor_agent.py) that replays
recorded stream-json outputs (tests/fixtures/): no network, credentials or real CLI needed."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aka_agent_cursor
import attrs
import pytest
from aka_agent_cursor import CONFIG_SCHEMA, CursorAgent, aka_register_agents, make_agent

from aka_core import api
from aka_core.agent_runtime import CliCommand
from aka_core.host import PluginHost, Provider
from aka_core.models import AgentUsage
from aka_core.records import AgentInvocation
from aka_core.results import agent_cost_path, read_task_result, task_result_path
from aka_core.testing import AgentContract
from aka_core.testing.processes import alive
from aka_core.yamlio import dump_yaml

HERE = Path(__file__).parent
FAKE_SOURCE = HERE / "fake_cursor_agent.py"
DOCS_EXAMPLE = HERE / "fixtures" / "docs_example.jsonl"
WITH_USAGE = HERE / "fixtures" / "with_usage.jsonl"
FAKE_VERSION = "2026.04.17-787b533"
TASK_ID = "demo/scale_add"

WITH_USAGE_USAGE = AgentUsage(model="GPT-5.1 Medium", input_tokens=5968, cached_input_tokens=17952,
                              output_tokens=199, cost_usd=None, turns=None)
"""Exactly what with_usage.jsonl implies."""


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def fake_cli(tmp_path: Path) -> Path:
    """The fake CLI, copied to ``<tmp>/bin/cursor-agent`` and made executable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "cursor-agent"
    shutil.copyfile(FAKE_SOURCE, exe)
    exe.chmod(0o755)
    return exe


@pytest.fixture
def cursor_invocation(make_invocation: Callable[..., AgentInvocation],
                      fake_cli: Path) -> Callable[..., AgentInvocation]:
    """``cursor_invocation(mode, fixture, timeout_seconds=..., **env)``: an invocation whose PATH
    finds the fake first; the fake records what it saw in ``logs/fake_record.json``."""

    def make(mode: str = "normal", fixture: Path = WITH_USAGE, *, timeout_seconds: float = 60.0,
             **env: str) -> AgentInvocation:
        invocation = make_invocation(TASK_ID, timeout_seconds=timeout_seconds)
        environment = {
            **invocation.environment,
            "PATH": f"{fake_cli.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKE_CURSOR_MODE": mode,
            "FAKE_CURSOR_FIXTURE": str(fixture),
            "FAKE_CURSOR_RECORD": str(invocation.logs_dir / "fake_record.json"),
            **env,
        }
        return attrs.evolve(invocation, environment=environment)

    return make


def seen_by_fake(invocation: AgentInvocation) -> dict[str, Any]:
    return json.loads((invocation.logs_dir / "fake_record.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the contract


class TestCursorContract(AgentContract):
    record = aka_register_agents()[0]
    options = {"model": "gpt-5.1", "grace_seconds": 1}
    task_id = TASK_ID

    @pytest.fixture
    def invocation(self, cursor_invocation: Callable[..., AgentInvocation]) -> AgentInvocation:
        return cursor_invocation()


def test_registered_through_the_host(register_plugin) -> None:
    assert register_plugin(aka_agent_cursor).agent("cursor").factory is make_agent


def test_schema_is_closed_and_knows_the_options() -> None:
    assert CONFIG_SCHEMA["additionalProperties"] is False
    assert {"model", "extra_args", "executable", "sandbox", "trust_workspace"} <= set(
        CONFIG_SCHEMA["properties"])


# --------------------------------------------------------------------------- the command line


def test_command_line(make_invocation: Callable[..., AgentInvocation]) -> None:
    invocation = make_invocation(TASK_ID)
    agent = make_agent({"model": "gpt-5.1-high", "sandbox": "disabled",
                        "extra_args": ["--approve-mcps"]})

    command = agent.command(invocation, "/opt/cursor-agent")

    assert command == CliCommand(argv=[
        "/opt/cursor-agent", "--print", "--output-format", "stream-json", "--force", "--trust",
        "--workspace", str(invocation.workspace), "--model", "gpt-5.1-high",
        "--sandbox", "disabled", "--approve-mcps", invocation.prompt])


def test_command_line_without_trust_or_model(make_invocation: Callable[..., AgentInvocation]) -> None:
    invocation = make_invocation(TASK_ID)
    argv = make_agent({"trust_workspace": False}).command(invocation, "cursor-agent").argv
    assert argv == ["cursor-agent", "--print", "--output-format", "stream-json", "--force",
                    "--workspace", str(invocation.workspace), invocation.prompt]


def test_fake_rejects_a_command_line_without_force(
    cursor_invocation: Callable[..., AgentInvocation],
) -> None:
    class WithoutForce(CursorAgent):
        def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
            argv = [a for a in super().command(invocation, executable).argv if a != "--force"]
            return CliCommand(argv=argv)

    execution = WithoutForce({}).run(cursor_invocation())

    assert (execution.status, execution.exit_code) == ("failed", 3)
    assert "--force is missing" in (execution.message or "")


# --------------------------------------------------------------------------- runs


def test_normal_finish_records_usage_as_reported(
    cursor_invocation: Callable[..., AgentInvocation],
) -> None:
    invocation = cursor_invocation("normal", WITH_USAGE)

    execution = make_agent({}).run(invocation)

    assert (execution.agent, execution.status, execution.exit_code) == ("cursor", "completed", 0)
    assert execution.timed_out is False
    assert execution.version == FAKE_VERSION
    assert execution.usage == WITH_USAGE_USAGE
    seen = seen_by_fake(invocation)
    assert seen["argv"][-1] == invocation.prompt, "the prompt is the last argument"
    assert Path(seen["cwd"]).resolve() == invocation.workspace.resolve()


def test_documented_result_has_no_usage(cursor_invocation: Callable[..., AgentInvocation]) -> None:
    execution = make_agent({}).run(cursor_invocation("normal", DOCS_EXAMPLE))

    assert execution.status == "completed"
    assert execution.usage == AgentUsage(model="Claude 4 Sonnet", input_tokens=None,
                                         cached_input_tokens=None, output_tokens=None,
                                         cost_usd=None, turns=None)


def test_hang_is_stopped_at_the_budget_with_its_child(
    cursor_invocation: Callable[..., AgentInvocation],
) -> None:
    invocation = cursor_invocation("hang", timeout_seconds=2)

    execution = make_agent({"grace_seconds": 1}).run(invocation)

    assert (execution.status, execution.timed_out) == ("timed_out", True)
    # budget + grace, plus the version query and start-up on a loaded 2-core machine
    assert execution.duration_seconds < 2 + 1 + 4, execution.duration_seconds
    seen = seen_by_fake(invocation)
    for pid in (seen["pid"], seen["child_pid"]):
        assert not alive(pid), f"process {pid} outlived the budget"


def test_nonzero_exit_is_a_failure_with_its_code(
    cursor_invocation: Callable[..., AgentInvocation],
) -> None:
    execution = make_agent({}).run(cursor_invocation("fail"))

    assert (execution.status, execution.exit_code, execution.timed_out) == ("failed", 7, False)
    assert "the model request failed" in (execution.message or "")


def test_not_on_path_is_not_installed(
    make_invocation: Callable[..., AgentInvocation], tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    invocation = attrs.evolve(make_invocation(TASK_ID), environment={"PATH": str(empty)})

    execution = make_agent({}).run(invocation)

    assert execution.status == "not_installed"
    assert "cursor-agent" in (execution.message or "")


def test_malformed_lines_are_counted_and_kept(
    cursor_invocation: Callable[..., AgentInvocation],
) -> None:
    invocation = cursor_invocation("malformed")

    execution = make_agent({}).run(invocation)

    assert (execution.status, execution.exit_code) == ("completed", 0)
    assert "3 lines were not JSON" in (execution.message or "")
    assert execution.usage == WITH_USAGE_USAGE
    logged = [json.loads(line) for line in
              (invocation.logs_dir / "agent.jsonl").read_text(encoding="utf-8").splitlines()]
    unparsed = [e["aka_unparsed_line"] for e in logged if "aka_unparsed_line" in e]
    assert unparsed == ["T: not a JSON event (0)", "T: not a JSON event (2)", "{truncated"]
    assert sum(1 for e in logged if e.get("type")) == len(WITH_USAGE.read_text().splitlines())


def test_auth_failure_is_not_authenticated(
    cursor_invocation: Callable[..., AgentInvocation],
) -> None:
    execution = make_agent({}).run(cursor_invocation("auth"))

    assert (execution.status, execution.exit_code) == ("not_authenticated", 1)
    assert "Authentication required" in (execution.message or "")


def test_environment_has_the_key_and_no_other_secret(
    cursor_invocation: Callable[..., AgentInvocation], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURSOR_API_KEY", "crsr-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    invocation = cursor_invocation()

    make_agent({}).run(invocation)

    env = seen_by_fake(invocation)["env"]
    assert env["CURSOR_API_KEY"] == "crsr-test-key"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    home = invocation.logs_dir / "agent_home"
    assert env["HOME"] == str(home)
    assert env["CURSOR_CONFIG_DIR"] == str(home / ".cursor")


def test_environment_without_a_key_has_none(
    cursor_invocation: Callable[..., AgentInvocation], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CURSOR_API_KEY", raising=False)
    invocation = cursor_invocation()

    make_agent({}).run(invocation)

    assert "CURSOR_API_KEY" not in seen_by_fake(invocation)["env"]


# --------------------------------------------------------------------------- check-agents


@pytest.mark.parametrize(("status", "authenticated"),
                         [("logged_in", True), ("logged_out", False), ("error", False)])
def test_check_reads_the_status_command(
    fake_cli: Path, monkeypatch: pytest.MonkeyPatch, status: str, authenticated: bool
) -> None:
    monkeypatch.setenv("FAKE_CURSOR_STATUS", status)

    # check() runs the CLI in a run's clean environment: the fake's switch must be passed on.
    found = make_agent({"executable": str(fake_cli), "pass_env": ["FAKE_CURSOR_STATUS"]}).check()

    assert (found.agent, found.installed, found.version) == ("cursor", True, FAKE_VERSION)
    assert found.authenticated is authenticated


def test_check_without_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    found = make_agent({}).check()

    assert (found.installed, found.ready) == (False, False)


# --------------------------------------------------------------------------- whole runs


def run_with_fake(tmp_path: Path, make_task: Callable[..., Path], fake_cli: Path,
                  monkeypatch: pytest.MonkeyPatch, mode: str) -> tuple[Path, Path]:
    """One ``aka_core.api.run`` of the test task with the cursor agent (the fake as executable);
    returns the run directory and the task's source folder."""
    task_dir = make_task(TASK_ID)
    monkeypatch.setenv("AKA_DISABLE_PLUGINS", "cursor")  # this module is registered below
    fake_env = {"FAKE_CURSOR_MODE": mode, "FAKE_CURSOR_FIXTURE": str(WITH_USAGE),
                "FAKE_CURSOR_RECORD": str(tmp_path / "fake_record.json"),
                "FAKE_CURSOR_ESCAPE": str(task_dir)}
    for key, value in fake_env.items():
        monkeypatch.setenv(key, value)
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({
        "agent": {"template": "cursor", "timeout_seconds": 120,
                  "options": {"executable": str(fake_cli), "pass_env": sorted(fake_env)}},
        "tasks": [TASK_ID], "target_gpu_model": "cpu",
    }), encoding="utf-8")
    host = PluginHost()
    host.register(aka_agent_cursor, Provider("cursor", "aka-agent-cursor", "0.1.0"))
    outcome = api.run(config, output_root=tmp_path / "out", host=host)
    return outcome.run_dir, task_dir


def test_whole_run_records_execution_and_costs(
    tmp_path: Path, make_task: Callable[..., Path], fake_cli: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_dir, _ = run_with_fake(tmp_path, make_task, fake_cli, monkeypatch, "normal")

    result = read_task_result(task_result_path(run_dir, TASK_ID))
    execution = result.agent_execution
    assert execution is not None
    assert (execution.agent, execution.status, execution.exit_code, execution.timed_out,
            execution.version) == ("cursor", "completed", 0, False, FAKE_VERSION)
    assert execution.usage == WITH_USAGE_USAGE
    costs = json.loads(agent_cost_path(run_dir, TASK_ID).read_text(encoding="utf-8"))
    assert costs == {"task_id": TASK_ID, "agent": "cursor", "model": "GPT-5.1 Medium",
                     "input_tokens": 5968, "cached_input_tokens": 17952, "output_tokens": 199,
                     "cost_usd": None, "turns": None}
    assert result.candidate_accepted is True


def test_whole_run_writing_into_the_task_folder_is_rejected(
    tmp_path: Path, make_task: Callable[..., Path], fake_cli: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_dir, task_dir = run_with_fake(tmp_path, make_task, fake_cli, monkeypatch, "escape")

    assert (task_dir / "escaped.txt").is_file(), "the fake did write outside its workspace"
    result = read_task_result(task_result_path(run_dir, TASK_ID))
    assert result.agent_execution is not None and result.agent_execution.status == "completed"
    assert result.candidate_accepted is False
    assert result.acceptance is not None
    gates = {g.name: g for g in result.acceptance.gates}
    assert gates["evaluator_files_untouched"].passed is False
    assert "escaped.txt" in gates["evaluator_files_untouched"].detail
    assert result.score == 0.0
