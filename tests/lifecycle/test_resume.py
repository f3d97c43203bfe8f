"""Resume after a kill: a real ``aka run`` process is killed mid-run and ``--resume`` finishes it.

Three python-backend tasks run with the ``noop`` agent; the reference of ``demo/b_slow`` sleeps,
so the run is reliably inside that task (its evaluation worker running) when it is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aka_core.run.results import read_task_result
from aka_core.testing.fixtures import write_task
from aka_core.testing.processes import alive, descendants, wait_for
from aka_core.yamlio import dump_yaml

pytestmark = pytest.mark.slow

TASKS = ("demo/a_fast", "demo/b_slow", "demo/c_fast")
SLOW_SECONDS = 2.0

SLOW_REFERENCE = f'''\
import time


def scale_add_reference(x, y, alpha):
    time.sleep({SLOW_SECONDS})
    return x.double() + alpha * y.double()
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    for task_id in TASKS:
        folder = write_task(tmp_path / "tasks", task_id)
        if task_id == "demo/b_slow":
            (folder / "reference.py").write_text(SLOW_REFERENCE, encoding="utf-8")
    path = tmp_path / "run_config.yaml"
    path.write_text(dump_yaml({
        "agent": {"template": "noop", "timeout_seconds": 60},
        "tasks": ["demo"], "target_gpu_model": "cpu",
        "evaluation": {"seeds_per_case": 1},
    }), encoding="utf-8")
    return path


def aka(*args: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """``aka ARGS`` in a new session (its own process group), output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "aka_core.cli", *args],
                                cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_quietly(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def the_run_dir(output_root: Path) -> Path:
    runs = list(output_root.glob("workspace_cpu_noop/run_*"))
    assert len(runs) == 1, runs
    return runs[0]


def interrupt_mid_task(config: Path, tmp_path: Path, sig: signal.Signals
                       ) -> tuple[Path, int, list[int], Path]:
    """Start a run, send ``sig`` to its process group while ``demo/b_slow`` is being evaluated.

    Returns the run directory, the exit status, the processes the run had started and the log.
    """
    log = tmp_path / f"run_{sig.name}.log"
    output_root = tmp_path / "out"
    proc = aka("run", str(config), "--output-root", str(output_root), "--no-progress",
               cwd=tmp_path, log=log)
    started: list[int] = []
    try:
        wait_for(lambda: list(output_root.glob("workspace_cpu_noop/run_*/run.yaml")), 60,
                 "run.yaml")
        run_dir = the_run_dir(output_root)
        wait_for(lambda: (run_dir / "demo/a_fast/task_result.yaml").is_file(), 60,
                 "the first task's result")
        wait_for(lambda: (run_dir / "demo/b_slow/logs/evaluation.log").is_file(), 30,
                 "the second task's evaluation")
        time.sleep(0.5)  # the worker is importing torch or sleeping in the reference
        started = descendants(proc.pid)
        assert started, "the run had started no evaluation worker"
        assert not (run_dir / "demo/b_slow/task_result.yaml").exists(), "killed too late"
        os.killpg(proc.pid, sig)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            kill_quietly([proc.pid])
            proc.wait()
    return run_dir, code, started, log


def snapshot_results(run_dir: Path) -> dict[str, bytes]:
    return {t: (run_dir / t / "task_result.yaml").read_bytes() for t in TASKS
            if (run_dir / t / "task_result.yaml").is_file()}


def resume(run_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aka_core.cli", "run", "--resume", str(run_dir),
                           "--no-progress"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=180, check=False)


def assert_resumed(run_dir: Path, before: dict[str, bytes], tmp_path: Path) -> None:
    result = resume(run_dir, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(run_dir)

    after = snapshot_results(run_dir)
    assert sorted(after) == list(TASKS), "every task ends with a result"
    assert after["demo/a_fast"] == before["demo/a_fast"], "the completed task was redone"
    for task_id in TASKS:
        result_ = read_task_result(run_dir / task_id / "task_result.yaml")
        assert result_.status == "completed", (task_id, result_.error)
        assert result_.pass_correctness is True, task_id
    set_aside = list((run_dir / ".interrupted").glob("*/demo/b_slow"))
    assert len(set_aside) == 1, "the interrupted attempt is kept under .interrupted/"
    assert (set_aside[0] / "workspace").is_dir()
    assert not (set_aside[0] / "task_result.yaml").exists()
    summary = json.loads((run_dir / "reports" / "summary.json").read_text())
    assert {row["task_id"]: row["status"] for row in summary["tasks"]} == dict.fromkeys(
        TASKS, "completed"), "reports are regenerated from every result"


def test_resume_after_sigkill_keeps_completed_tasks_and_redoes_the_interrupted_one(
    config: Path, tmp_path: Path
) -> None:
    run_dir, code, started, _log = interrupt_mid_task(config, tmp_path, signal.SIGKILL)
    try:
        assert code == -signal.SIGKILL
        # The worker still had seconds of work (the slow reference) but must not outlive aka:
        # a hung one would hold the CPU, the GPU and its GPU lock forever.
        assert gone_within(started, 1.5), "the evaluation worker outlived a SIGKILLed aka"
        before = snapshot_results(run_dir)
        assert sorted(before) == ["demo/a_fast"]
        assert_resumed(run_dir, before, tmp_path)
    finally:
        kill_quietly([p for p in started if alive(p)])

    # Resuming a finished run is a no-op that keeps every result as it is.
    finished = snapshot_results(run_dir)
    attempts = sorted(p.name for p in (run_dir / ".interrupted").iterdir())
    again = resume(run_dir, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert snapshot_results(run_dir) == finished
    assert sorted(p.name for p in (run_dir / ".interrupted").iterdir()) == attempts


def test_ctrl_c_stops_the_run_and_its_worker_and_resume_finishes_it(
    config: Path, tmp_path: Path
) -> None:
    run_dir, code, started, log = interrupt_mid_task(config, tmp_path, signal.SIGINT)
    try:
        assert code == 130, log.read_text()[-3000:]
        assert f"resume with `aka run --resume {run_dir.resolve()}`" in log.read_text()
        workers = [p for p in started if alive(p)]
        assert not workers, "Ctrl-C left the evaluation worker running"
    finally:
        kill_quietly([p for p in started if alive(p)])
    before = snapshot_results(run_dir)
    assert sorted(before) == ["demo/a_fast"]
    assert_resumed(run_dir, before, tmp_path)


def test_a_task_that_killed_its_process_three_times_is_recorded_and_not_run_again(
    config: Path, tmp_path: Path
) -> None:
    """Deaths without an interrupt record (the process was killed, by the host or by what the
    task ran) count; a task that caused MAX_TASK_ATTEMPTS of them would kill every resume."""
    from aka_core.builtin import parallel
    from aka_core.plugin.host import PluginHost
    from aka_core.run.execute import create_run, execute_run
    from aka_core.run.lifecycle import INTERRUPTED_FILE

    host = PluginHost()
    run_dir = create_run(config, host, output_root=tmp_path / "out")
    for attempt in range(parallel.MAX_TASK_ATTEMPTS):
        (run_dir / ".interrupted" / f"2026010{attempt}" / "demo/b_slow").mkdir(parents=True)
    stopped = run_dir / ".interrupted" / "20260109" / "demo/a_fast"
    stopped.mkdir(parents=True)
    (stopped / INTERRUPTED_FILE).write_text("{}")  # Ctrl-C: aka recorded it; not a death
    results = {r.task_id: r for r in execute_run(run_dir, host, show_progress=False)}
    assert results["demo/b_slow"].status == "error"
    assert f"died during each of its last {parallel.MAX_TASK_ATTEMPTS} attempts" in (
        results["demo/b_slow"].error or "")
    assert not (run_dir / "demo" / "b_slow" / "workspace").exists(), "it ran again"
    assert results["demo/a_fast"].status == "completed"
    assert results["demo/c_fast"].status == "completed"
