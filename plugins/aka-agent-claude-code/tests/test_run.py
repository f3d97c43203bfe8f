"""Whole runs through ``aka_core.api.run`` with the fake ``claude``: what a user finds afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aka_agent_claude_code
import pytest

from aka_core import api
from aka_core.host import PluginHost
from aka_core.results import agent_cost_path, read_task_result
from aka_core.yamlio import dump_yaml, load_plain_yaml

if TYPE_CHECKING:
    from conftest import FakeClaude

TASK = "demo/scale_add"
USAGE = {"model": "claude-sonnet-4-5-20250929", "input_tokens": 104920,
         "cached_input_tokens": 98765, "output_tokens": 5718, "cost_usd": 0.1242, "turns": 7}
"""What tests/fixtures/stream_success.jsonl implies (see tests/fixtures/README.md)."""


def host_with_plugin() -> PluginHost:
    """Installed plugins (the speedup scorer ...), and this one even when it is not installed."""
    host = PluginHost()
    if "claude-code" not in host.names("agent"):
        host.register(aka_agent_claude_code)
    return host


def run_once(root: Path, fake: FakeClaude) -> Path:
    config = {"agent": {"template": "claude-code", "timeout_seconds": 240,
                        "options": fake.options(executable=str(fake.executable))},
              "tasks": ["demo"], "target_gpu_model": "cpu"}
    (root / "run_config.yaml").write_text(dump_yaml(config), encoding="utf-8")
    outcome = api.run(root / "run_config.yaml", run_suffix="fake", output_root=root / "out",
                      host=host_with_plugin())
    return outcome.run_dir


@pytest.mark.slow
def test_a_whole_run_records_what_the_cli_reported(
    tmp_path: Path, make_task: Any, fake: FakeClaude
) -> None:
    make_task(TASK)
    run_dir = run_once(tmp_path, fake)
    result = read_task_result(run_dir / TASK / "task_result.yaml")
    execution = result.agent_execution
    assert execution is not None
    assert (execution.agent, execution.status, execution.exit_code, execution.timed_out) == (
        "claude-code", "completed", 0, False)
    assert execution.version == "2.0.14 (Claude Code)"
    raw = load_plain_yaml(run_dir / TASK / "task_result.yaml")
    assert raw["agent_execution"]["usage"] == USAGE
    costs = json.loads(agent_cost_path(run_dir, TASK).read_text(encoding="utf-8"))
    assert costs == {"task_id": TASK, "agent": "claude-code", **USAGE}
    assert result.candidate_accepted is True, result.acceptance


@pytest.mark.slow
def test_a_write_into_the_task_folder_rejects_the_candidate(
    tmp_path: Path, make_task: Any, fake: FakeClaude
) -> None:
    task_dir = make_task(TASK)
    escaped = task_dir / "escaped.txt"
    fake.mode("escape", FAKE_CLAUDE_ESCAPE_PATH=str(escaped))
    run_dir = run_once(tmp_path, fake)
    assert escaped.is_file(), "the fake did not write outside the workspace"
    result = read_task_result(run_dir / TASK / "task_result.yaml")
    assert result.agent_execution is not None and result.agent_execution.status == "completed"
    assert result.candidate_accepted is False
    assert result.acceptance is not None
    gates = {gate.name: gate.passed for gate in result.acceptance.gates}
    assert gates["evaluator_files_untouched"] is False
    assert f"{TASK}/escaped.txt" in result.acceptance.reason
