"""Stopping ``aka run`` (SIGTERM, or Ctrl-C's SIGINT) while an agent CLI works leaves no process of
the agent behind, confined or not, serial or in a parallel worker: the CLI runs in a session of
its own and has a child in yet another session, which no signal to aka's group reaches. The task
says what happened (``interrupted.json``) and ``aka run --resume`` redoes it.

The agent is the installed ``claude-code`` plugin driving a fake ``claude`` (``FakeCli``) in a
real ``aka run`` process, started as ``tests/lifecycle/test_resume.py`` starts its runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aka_core.plugin.host import PluginHost
from aka_core.run.results import read_task_result
from aka_core.testing import FakeCli, Script
from aka_core.testing.fake_cli import event, ignore_sigterm, linger, spawn_child
from aka_core.testing.fixtures import write_task
from aka_core.testing.processes import wait_for
from aka_core.yamlio import dump_yaml

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("claude-code" not in PluginHost().names("agent"),
                       reason="the claude-code agent plugin is not installed"),
]

TASK = "demo/scale_add"
SUCCESS = Path(__file__).resolve().parents[2] / (
    "plugins/aka-agent-claude-code/tests/fixtures/stream_success.jsonl")
WORKING = Script.from_events([
    {"type": "system", "subtype": "init", "model": "claude-test", "session_id": "s"},
]).then(spawn_child(new_session=True), event({"type": "system", "subtype": "spawned"}),
        ignore_sigterm(), linger())
"""A CLI at work: a child in a session of its own, SIGTERM ignored (only SIGKILL ends it)."""


def start_run(tmp_path: Path, fake: FakeCli, *, confinement: str,
              parallel: bool = False) -> subprocess.Popen[bytes]:
    write_task(tmp_path / "tasks", TASK)
    config: dict[str, Any] = {
        "agent": {"template": "claude-code", "timeout_seconds": 300,
                  "options": {"executable": str(fake.executable), "confinement": confinement,
                              "grace_seconds": 30}},
        "tasks": [TASK], "target_gpu_model": "cpu", "tasks_directory": str(tmp_path / "tasks"),
        "evaluation": {"seeds_per_case": 1},
    }
    if parallel:  # one worker process, restricted to "GPU 0" (the task runs on the CPU)
        config["resources"] = {"gpus": [0], "vendor": "nvidia"}
    path = tmp_path / "run_config.yaml"
    path.write_text(dump_yaml(config), encoding="utf-8")
    with (tmp_path / "aka.log").open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "aka_core.cli", "run", str(path), "--output-root",
             str(tmp_path / "out"), "--no-progress"],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def run_dir_of(tmp_path: Path) -> Path:
    runs = list((tmp_path / "out").glob("workspace_cpu_claude-code/run_*"))
    assert len(runs) == 1, runs
    return runs[0]


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("sig", "confinement", "parallel"), [
    (signal.SIGTERM, "off", False),
    (signal.SIGTERM, "best_effort", False),
    (signal.SIGINT, "off", False),
    (signal.SIGINT, "best_effort", False),
    (signal.SIGTERM, "off", True),
], ids=["sigterm-unconfined", "sigterm-confined", "sigint-unconfined", "sigint-confined",
        "sigterm-parallel-worker"])
def test_stopping_aka_leaves_no_agent_process(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, sig: signal.Signals,
    confinement: str, parallel: bool
) -> None:
    if confinement != "off" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    fake = FakeCli.install(tmp_path_factory.mktemp("fake-claude") / "bin", "claude",
                           version="2.0.14 (Claude Code)", script=WORKING)
    proc = start_run(tmp_path, fake, confinement=confinement, parallel=parallel)
    log = tmp_path / "aka.log"
    try:
        wait_for(lambda: list((tmp_path / "out").glob("*/run_*/run.yaml")), 60, "run.yaml")
        run_dir = run_dir_of(tmp_path)
        events = run_dir / TASK / "logs" / "agent.jsonl"
        wait_for(lambda: events.is_file() and "spawned" in events.read_text(), 60,
                 "the agent CLI to start its child")
        assert len(fake.processes()) >= 2, "the CLI and its child run"
        if sig == signal.SIGINT:  # Ctrl-C: the terminal signals aka's whole process group
            os.killpg(proc.pid, sig)
        else:  # `kill PID`: aka alone
            os.kill(proc.pid, sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            kill_all([proc.pid])
            proc.wait()
    try:
        assert code == (130 if sig == signal.SIGINT else 128 + signal.SIGTERM), log.read_text()
        wait_for(lambda: not fake.processes(), 5, "every process of the agent to be gone")
    finally:
        kill_all(fake.processes())
    record = json.loads((run_dir / TASK / "interrupted.json").read_text(encoding="utf-8"))
    assert (record["signal"], record["step"]) == (sig.name, "agent"), record
    assert "aka run --resume" in record["message"]
    assert not (run_dir / TASK / "task_result.yaml").exists(), "an interrupted task has no result"
    report = json.loads((run_dir / "reports" / "summary.json").read_text())
    (row,) = report["tasks"]
    assert (row["status"], row["reason"]) == ("missing", record["message"])

    if sig == signal.SIGTERM and confinement == "off" and not parallel:
        # --resume sets the attempt aside (its record kept) and redoes the task.
        fake.play(Script.from_file(SUCCESS))
        done = subprocess.run([sys.executable, "-m", "aka_core.cli", "run", "--resume",
                               str(run_dir), "--no-progress"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        result = read_task_result(run_dir / TASK / "task_result.yaml")
        assert result.agent_execution is not None
        assert result.agent_execution.status == "completed", result.agent_execution.message
        kept = list((run_dir / ".interrupted").glob(f"*/{TASK}/interrupted.json"))
        assert len(kept) == 1, "the interrupted attempt and its record are kept"
        assert not fake.processes()
