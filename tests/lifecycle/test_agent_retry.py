"""An agent whose provider failed (rate-limited, a server error) is no candidate's failure: the
lifecycle starts it again per ``agent.retry`` (each retry from the task's initial workspace, after
an exponential backoff, earlier attempts' logs kept), and when retries run out the task ends as
``infra_error``: not judged, not scored. The agent is the ``claude-code`` plugin driving a fake
``claude`` (``FakeCli``) replaying the plugin's recorded streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aka_agent_claude_code
import pytest

from aka_core import api
from aka_core.errors import ConfigError
from aka_core.evaluation.record import EvaluationRecord
from aka_core.models import AgentConfig, AgentRetry
from aka_core.plugin.host import PluginHost
from aka_core.run.config import load_run_config
from aka_core.testing import FakeCli, Script
from aka_core.testing.fake_cli import append
from aka_core.testing.fixtures import write_task
from aka_core.yamlio import dump_yaml

TASK = "demo/scale_add"
FIXTURES = Path(aka_agent_claude_code.__file__).resolve().parents[2] / "tests" / "fixtures"
RATE_LIMITED = Script.from_file(FIXTURES / "stream_rate_limited.jsonl", exit_code=1).after(
    append("kernel.py", "\n# half-done edit of a rate-limited attempt\n"))
OVERLOADED = Script.from_file(FIXTURES / "stream_overloaded.jsonl", exit_code=1)
SUCCESS = Script.from_file(FIXTURES / "stream_success.jsonl")


@pytest.fixture
def fake(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> FakeCli:
    for key in aka_agent_claude_code.ClaudeCodeAgent.credential_env:
        monkeypatch.delenv(key, raising=False)
    return FakeCli.install(tmp_path_factory.mktemp("fake-claude") / "bin", "claude",
                           version="2.0.14 (Claude Code)")


def run(tmp_path: Path, fake: FakeCli, retry: dict[str, Any] | None,
        **options: Any) -> api.RunOutcome:
    write_task(tmp_path / "tasks", TASK)
    agent: dict[str, Any] = {"template": "claude-code", "timeout_seconds": 120,
                             "options": {"executable": str(fake.executable), **options}}
    if retry is not None:
        agent["retry"] = retry
    config = tmp_path / "run_config.yaml"
    config.write_text(dump_yaml({
        "agent": agent, "tasks": [TASK], "target_gpu_model": "cpu",
        "tasks_directory": str(tmp_path / "tasks"), "evaluation": {"seeds_per_case": 1},
    }), encoding="utf-8")
    host = PluginHost()
    if "claude-code" not in host.names("agent"):
        host.register(aka_agent_claude_code)
    return api.run(config, output_root=tmp_path / "out", host=host)


def test_rate_limited_every_time_ends_as_infra_error_unjudged(
    tmp_path: Path, fake: FakeCli
) -> None:
    fake.play(RATE_LIMITED)
    outcome = run(tmp_path, fake, {"rate_limited": 2, "backoff_seconds": 0.2,
                                   "backoff_factor": 2})
    (result,) = outcome.results
    execution = result.agent_execution
    assert execution is not None
    assert (result.status, execution.status, execution.attempts) == (
        "infra_error", "rate_limited", 3)
    assert (result.score, result.candidate_accepted, result.evaluation) == (
        0.0, False, EvaluationRecord())
    assert result.pass_compilation is None and result.acceptance is None, "never judged"
    assert "rate-limited" in (result.error or "") and "API status 429" in (result.error or "")
    assert result.duration_seconds is not None and result.duration_seconds >= 0.2 + 0.4
    assert (execution.message or "").startswith("attempt 3; earlier: attempt 1: rate_limited, "
                                                "attempt 2: rate_limited")
    logs = outcome.run_dir / TASK / "logs"
    for attempt in (1, 2):
        assert "rate_limit_error" in (logs / f"agent.attempt-{attempt}.jsonl").read_text()
        assert (logs / f"agent_home.attempt-{attempt}").is_dir()
    workspace = (outcome.run_dir / TASK / "workspace" / "kernel.py").read_text()
    assert workspace.count("half-done edit") == 1, "each attempt starts from the initial code"
    summary = json.loads((outcome.run_dir / "reports" / "summary.json").read_text())
    aggregates = summary["aggregates"]
    assert aggregates["status_counts"]["infra_error"] == 1
    assert aggregates["agent_status_counts"]["rate_limited"] == 1
    assert aggregates["attempted"] == 0, "an unjudged task is not in the rates"


def test_a_retry_that_succeeds_is_judged_as_any_run(tmp_path: Path, fake: FakeCli) -> None:
    """The fake counts its runs beside itself: unconfined, so that it may."""
    fake.play(RATE_LIMITED, SUCCESS)
    outcome = run(tmp_path, fake, {"rate_limited": 2, "backoff_seconds": 0.01},
                  confinement="off")
    (result,) = outcome.results
    execution = result.agent_execution
    assert execution is not None
    assert (result.status, execution.status, execution.attempts) == ("completed", "completed", 2)
    assert result.candidate_accepted is True, result.acceptance
    assert "attempt 1: rate_limited" in (execution.message or "")
    assert execution.usage.cost_usd == 0.1242, "the usage is the last attempt's"


def test_infra_errors_are_not_retried_unless_asked(tmp_path: Path, fake: FakeCli) -> None:
    fake.play(OVERLOADED)
    (result,) = run(tmp_path, fake, None).results
    assert result.agent_execution is not None
    assert (result.status, result.agent_execution.status, result.agent_execution.attempts) == (
        "infra_error", "infra_error", 1)
    assert "outside the agent" in (result.error or "")


def test_a_turn_limit_is_the_agent_s_own_and_is_judged(tmp_path: Path, fake: FakeCli) -> None:
    fake.play(Script.from_file(FIXTURES / "stream_max_turns.jsonl", exit_code=1))
    (result,) = run(tmp_path, fake, {"rate_limited": 3, "backoff_seconds": 0.01}).results
    assert result.agent_execution is not None
    assert (result.status, result.agent_execution.status, result.agent_execution.attempts) == (
        "completed", "max_turns", 1)
    assert result.pass_correctness is True, "the candidate it left is judged"


def test_retry_defaults_and_backoff() -> None:
    retry = AgentConfig(name="x").retry
    assert retry == AgentRetry(rate_limited=2, infra_error=0, backoff_seconds=60.0,
                               backoff_factor=2.0)
    assert [retry.backoff(n) for n in (1, 2, 3)] == [60.0, 120.0, 240.0]
    assert (retry.retries("rate_limited"), retry.retries("infra_error"),
            retry.retries("failed")) == (2, 0, 0)


def test_the_retry_option_is_validated(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", TASK)
    config = tmp_path / "run.yaml"
    base = {"tasks": [TASK], "target_gpu_model": "cpu", "tasks_directory": str(tmp_path / "tasks")}
    config.write_text(dump_yaml({**base, "agent": {"template": "noop", "retry": {
        "rate_limited": 3, "backoff_seconds": 30}}}), encoding="utf-8")
    loaded = load_run_config(config, PluginHost())
    assert loaded.agent.retry == AgentRetry(rate_limited=3, backoff_seconds=30.0)
    config.write_text(dump_yaml({**base, "agent": {"template": "noop", "retry": {
        "rate_limit": 3}}}), encoding="utf-8")
    with pytest.raises(ConfigError, match="rate_limit"):
        load_run_config(config, PluginHost())
