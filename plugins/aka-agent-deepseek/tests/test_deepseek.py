"""The deepseek agent against a fake ``dsh`` (tests/fake_dsh.py): the contract, the command line,
every way a run can end, usage, the environment the CLI sees, and whole runs through the core."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from aka_agent_deepseek import CONFIG_SCHEMA, DeepSeekAgent, aka_register_agents, make_agent
from jsonschema import Draft202012Validator

from aka_core import api
from aka_core.agent_runtime import MAX_EVENTS_KEPT
from aka_core.errors import PluginError
from aka_core.host import PluginHost
from aka_core.models import AgentUsage
from aka_core.records import AgentInvocation
from aka_core.results import read_task_result
from aka_core.testing import AgentContract
from aka_core.testing.processes import alive
from aka_core.yamlio import dump_yaml

HERE = Path(__file__).resolve().parent
VERSION = "0.2.0-rc.2"
NORMAL_USAGE = AgentUsage(model=None, input_tokens=9490, cached_input_tokens=7040,
                          output_tokens=460, cost_usd=None, turns=3)
"""What tests/fixtures/normal.jsonl implies (see tests/fixtures/README.md)."""

MakeInvocation = Callable[..., AgentInvocation]


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A folder holding the fake as ``dsh`` (executable) and its fixtures."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    exe = bin_dir / "dsh"
    shutil.copyfile(HERE / "fake_dsh.py", exe)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    shutil.copytree(HERE / "fixtures", bin_dir / "fixtures")
    return bin_dir


@pytest.fixture
def invoke(make_invocation: MakeInvocation, fake_bin: Path) -> Callable[..., AgentInvocation]:
    """``invoke(mode="ok", timeout_seconds=60)``: an invocation whose PATH finds the fake first."""

    def make(mode: str = "ok", *, timeout_seconds: float = 60.0) -> AgentInvocation:
        invocation = make_invocation(timeout_seconds=timeout_seconds)
        env = {"PATH": f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}",
               "FAKE_DSH_MODE": mode}
        return attrs.evolve(invocation, environment=env)

    return make


def call_record(invocation: AgentInvocation) -> dict[str, Any]:
    """What the fake received (it writes this into its HOME, the private folder under logs/)."""
    return json.loads((invocation.logs_dir / "agent_home" / "fake_dsh_call.json").read_text())


class TestDeepSeekContract(AgentContract):
    record = aka_register_agents()[0]
    options = {"grace_seconds": 1}

    @pytest.fixture
    def invocation(self, invoke: Callable[..., AgentInvocation]) -> AgentInvocation:
        return invoke()


def test_registered_through_the_host(register_plugin) -> None:
    import aka_agent_deepseek

    spec = register_plugin(aka_agent_deepseek).agent("deepseek")
    assert spec.factory is make_agent
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


def test_default_command_line(make_invocation: MakeInvocation) -> None:
    invocation = make_invocation()
    cmd = make_agent({}).command(invocation, "/opt/bin/dsh")
    assert list(cmd.argv) == ["/opt/bin/dsh", "--profile", "headless", "--json", "-"]
    assert cmd.stdin == invocation.prompt
    assert dict(cmd.env) == {"DSH_PERMISSION_MODE": "workspace-write",
                             "DSH_TELEMETRY_DISABLED": "1"}


def test_model_overlays_and_extra_args(make_invocation: MakeInvocation, tmp_path: Path,
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


def test_provider_without_model_fails_before_launch(invoke) -> None:
    execution = make_agent({"provider": "acme"}).run(invoke())
    assert execution.status == "failed"
    assert "need agent.options.model" in (execution.message or "")


# --------------------------------------------------------------------------- outcomes


def test_normal_finish(invoke) -> None:
    invocation = invoke()
    execution = make_agent({}).run(invocation)

    assert (execution.agent, execution.status, execution.exit_code) == ("deepseek", "completed", 0)
    assert execution.timed_out is False
    assert execution.version == VERSION
    assert execution.usage == NORMAL_USAGE
    received = call_record(invocation)
    assert received["argv"] == ["--profile", "headless", "--json", "-"]
    assert received["prompt"] == invocation.prompt, "the task arrives on stdin"
    assert Path(received["cwd"]) == invocation.workspace.resolve()
    events = (invocation.logs_dir / "agent.jsonl").read_text().splitlines()
    assert len(events) == 17 and json.loads(events[-1])["type"] == "final"


def test_model_reaches_the_cli_as_an_overlay(invoke) -> None:
    invocation = invoke()
    execution = make_agent({"model": "deepseek-v4-flash"}).run(invocation)
    assert execution.status == "completed", execution.message
    patches = call_record(invocation)["patches"]
    assert list(patches.values()) == [[{"id": "agent-default-model", "config": {
        "provider": "deepseek-official", "model": "deepseek-v4-flash"}}]]
    assert execution.usage.model is None, "the stream does not name the model"


def test_hang_is_stopped_at_the_budget_with_its_child(invoke) -> None:
    invocation = invoke("hang", timeout_seconds=2)
    started = time.monotonic()
    execution = make_agent({"grace_seconds": 1}).run(invocation)
    elapsed = time.monotonic() - started

    assert execution.status == "timed_out" and execution.timed_out is True
    assert elapsed < 2 + 1 + 3, f"took {elapsed:.1f} s"
    pids = json.loads((invocation.logs_dir / "agent_home" / "fake_dsh_pids.json").read_text())
    assert len(pids) == 2
    deadline = time.monotonic() + 3
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if alive(pid)], "the CLI or its child survived"
    assert "stopped at the budget of 2 s" in (execution.message or "")


def test_non_zero_exit_fails_with_the_exit_code(invoke) -> None:
    execution = make_agent({}).run(invoke("fail"))
    assert (execution.status, execution.exit_code, execution.timed_out) == ("failed", 1, False)
    assert "dsh: SERVER" in (execution.message or "")
    assert execution.usage == AgentUsage(turns=1), "a step without usage leaves tokens unknown"


def test_not_on_path_is_not_installed(make_invocation: MakeInvocation, tmp_path: Path) -> None:
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    invocation = attrs.evolve(make_invocation(), environment={"PATH": str(empty)})
    execution = make_agent({}).run(invocation)
    assert execution.status == "not_installed"
    assert "'dsh' is not on PATH" in (execution.message or "")


def test_malformed_lines_are_counted_and_kept(invoke) -> None:
    invocation = invoke("malformed")
    execution = make_agent({}).run(invocation)

    assert execution.status == "completed"
    assert "2 lines were not JSON" in (execution.message or "")
    assert execution.usage == NORMAL_USAGE
    kept = [json.loads(line) for line in (invocation.logs_dir / "agent.jsonl").read_text()
            .splitlines()]
    unparsed = [e["aka_unparsed_line"] for e in kept if "aka_unparsed_line" in e]
    assert unparsed == ["(node:4242) ExperimentalWarning: this line is not JSON",
                        "dsh: a stray diagnostic on stdout {"]


def test_auth_failure_is_not_authenticated(invoke) -> None:
    execution = make_agent({}).run(invoke("auth"))
    assert (execution.status, execution.exit_code) == ("not_authenticated", 1)
    assert "MISSING_CREDENTIAL" in (execution.message or "")


def test_a_flag_regression_makes_the_fake_refuse(invoke) -> None:
    execution = make_agent({"output_format_args": []}).run(invoke())
    assert (execution.status, execution.exit_code) == ("failed", 3)
    assert "--json missing" in (execution.message or "")


# --------------------------------------------------------------------------- check and environment


def test_check_reports_install_version_and_credentials(
    fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    check = make_agent({}).check()
    assert (check.installed, check.version, check.authenticated) == (True, VERSION, True)
    assert "DEEPSEEK_API_KEY" in check.detail

    monkeypatch.delenv("DEEPSEEK_API_KEY")
    check = make_agent({}).check()
    assert (check.installed, check.authenticated, check.ready) == (True, None, True)

    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert make_agent({}).check().installed is False


def test_environment_has_the_key_and_no_unrelated_secrets(
    invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    invocation = invoke()
    execution = make_agent({}).run(invocation)
    assert execution.status == "completed", execution.message

    env = call_record(invocation)["env"]
    private_home = invocation.logs_dir / "agent_home"
    assert env["DEEPSEEK_API_KEY"] == "sk-test-key"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HOME"] == str(private_home)
    assert env["DSH_HOME"] == str(private_home / ".deepseek")
    assert (env["DSH_PERMISSION_MODE"], env["DSH_TELEMETRY_DISABLED"]) == ("workspace-write", "1")


def test_environment_without_the_key(invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    invocation = invoke()
    make_agent({}).run(invocation)
    assert "DEEPSEEK_API_KEY" not in call_record(invocation)["env"]


# --------------------------------------------------------------------------- usage


def step_end(step: int, **usage: int) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "status", "phase": "step_end", "turn": 1, "step": step}
    if usage:
        event["usage"] = usage
    return event


SESSION = {"type": "session", "sessionId": "session-x", "cwd": "/w"}


def test_usage_adds_cache_reads_and_writes_to_the_input() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=90),
              step_end(2, inputTokens=5, outputTokens=2, cacheReadTokens=100, cacheWriteTokens=7)]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=10 + 90 + 5 + 100 + 7, cached_input_tokens=190, output_tokens=5, turns=2)


def test_usage_without_cache_reads_leaves_the_cached_total_unknown() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=90),
              step_end(2, inputTokens=5, outputTokens=2)]
    assert make_agent({}).usage(events) == AgentUsage(
        input_tokens=105, cached_input_tokens=None, output_tokens=5, turns=2)


def test_a_step_without_usage_leaves_the_totals_unknown() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=0), step_end(2)]
    assert make_agent({}).usage(events) == AgentUsage(turns=2)


def test_usage_of_a_stream_without_steps_is_all_unknown() -> None:
    assert make_agent({}).usage([SESSION, {"type": "final", "text": ""}]) == AgentUsage()
    assert make_agent({}).usage([]) == AgentUsage()


def test_usage_is_unknown_when_the_start_of_a_long_stream_was_dropped() -> None:
    events = [step_end(i, inputTokens=1, outputTokens=1, cacheReadTokens=0)
              for i in range(MAX_EVENTS_KEPT // 2)]
    assert make_agent({}).usage(events) == AgentUsage()
    assert make_agent({}).usage([SESSION, *events]).turns == MAX_EVENTS_KEPT // 2


def test_usage_ignores_values_that_are_not_integers() -> None:
    events = [SESSION, step_end(1, inputTokens=10, outputTokens=3, cacheReadTokens=1)]
    events[1]["usage"]["outputTokens"] = "3"
    assert make_agent({}).usage(events) == AgentUsage(input_tokens=11, cached_input_tokens=1,
                                                     output_tokens=None, turns=1)


# --------------------------------------------------------------------------- whole runs


def whole_run(tmp_path: Path, fake_bin: Path, make_task: Callable[..., Path]) -> Path:
    make_task("demo/scale_add")
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({
        "agent": {"template": "deepseek", "timeout_seconds": 60,
                  "options": {"executable": str(fake_bin / "dsh"),
                              "pass_env": ["FAKE_DSH_MODE", "FAKE_DSH_OUTSIDE"]}},
        "tasks": ["demo/scale_add"],
        "target_gpu_model": "cpu",
    }), encoding="utf-8")
    host = PluginHost()
    try:
        host.agent("deepseek")
    except PluginError:  # not installed as a distribution: register the module directly
        import aka_agent_deepseek

        host.register(aka_agent_deepseek)
    return api.run(config, output_root=tmp_path / "out", host=host).run_dir


def test_whole_run_records_execution_and_costs(
    tmp_path: Path, fake_bin: Path, make_task, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DSH_MODE", "ok")
    run_dir = whole_run(tmp_path, fake_bin, make_task)

    result = read_task_result(run_dir / "demo" / "scale_add" / "task_result.yaml")
    execution = result.agent_execution
    assert execution is not None
    assert (execution.agent, execution.status, execution.exit_code, execution.timed_out,
            execution.version) == ("deepseek", "completed", 0, False, VERSION)
    assert execution.usage == NORMAL_USAGE
    costs = json.loads((run_dir / "agent_costs" / "demo__scale_add.json").read_text())
    assert costs == {"task_id": "demo/scale_add", "agent": "deepseek", "model": None,
                     "input_tokens": 9490, "cached_input_tokens": 7040, "output_tokens": 460,
                     "cost_usd": None, "turns": 3}


def test_whole_run_rejects_a_write_into_the_task_source(
    tmp_path: Path, fake_bin: Path, make_task, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DSH_MODE", "escape")
    monkeypatch.setenv("FAKE_DSH_OUTSIDE", str(tmp_path / "tasks" / "demo" / "scale_add"))
    run_dir = whole_run(tmp_path, fake_bin, make_task)

    result = read_task_result(run_dir / "demo" / "scale_add" / "task_result.yaml")
    assert result.agent_execution is not None and result.agent_execution.status == "completed"
    assert result.candidate_accepted is False
    assert result.acceptance is not None
    gates = {g.name: g for g in result.acceptance.gates}
    assert gates["evaluator_files_untouched"].passed is False
    assert "reference.py" in gates["evaluator_files_untouched"].detail
