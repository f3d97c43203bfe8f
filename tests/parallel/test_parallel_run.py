"""Parallel runs on one host, on the CPU with fake GPU ids: what a user finds afterwards.

Tasks are python-backend tasks with the ``noop`` agent. Each task's reference writes the
``CUDA_VISIBLE_DEVICES`` its evaluation saw into ``seen/<task name>``, so a test can tell which
slot ran it. ``demo/b_slow``'s reference waits while the file ``hold`` exists, so a test can kill
a worker (or the whole run) while that task is surely being evaluated, then let the redo through.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aka_core import api
from aka_core.builtin.parallel import TaskQueue
from aka_core.run.results import read_task_result
from aka_core.testing.processes import alive, descendants, wait_for
from aka_core.yamlio import dump_yaml, load_plain_yaml

pytestmark = pytest.mark.slow

FAST = ("demo/a_fast", "demo/c_fast")
SLOW = "demo/b_slow"
TASKS = ("demo/a_fast", SLOW, "demo/c_fast")

REFERENCE = '''\
import os
import time
from pathlib import Path


def scale_add_reference(x, y, alpha):
    Path({seen!r}).write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
    deadline = time.monotonic() + 120
    while {hold!r} and Path({hold!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return x.double() + alpha * y.double()
'''


@pytest.fixture(autouse=True)
def _no_inherited_visibility(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids are translated through the visibility aka was started with; start from none."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def write_config(tmp_path: Path, make_task: Callable[..., Path]) -> Callable[..., Path]:
    """``write_config(tasks, resources=..., hold=...)``: the tasks and a run config; with
    ``hold``, the slow task's evaluation waits while ``tmp_path/hold`` exists (created here)."""

    def write(tasks: tuple[str, ...] = TASKS, *, resources: dict[str, Any] | None = None,
              hold: bool = False, name: str = "run_config.yaml") -> Path:
        (tmp_path / "seen").mkdir(exist_ok=True)
        if hold:
            (tmp_path / "hold").touch()
        for task_id in tasks:
            folder = make_task(task_id)
            seen = tmp_path / "seen" / task_id.rsplit("/", 1)[-1]
            held = str(tmp_path / "hold") if hold and task_id == SLOW else ""
            (folder / "reference.py").write_text(REFERENCE.format(seen=str(seen), hold=held),
                                                 encoding="utf-8")
        data: dict[str, Any] = {"agent": {"template": "noop", "timeout_seconds": 60},
                                "tasks": list(tasks), "target_gpu_model": "cpu",
                                "evaluation": {"seeds_per_case": 1}}
        if resources is not None:
            data["resources"] = resources
        path = tmp_path / name
        path.write_text(dump_yaml(data), encoding="utf-8")
        return path

    return write


def seen(tmp_path: Path, task_id: str) -> str:
    return (tmp_path / "seen" / task_id.rsplit("/", 1)[-1]).read_text()


def result_fields(run_dir: Path, task_id: str) -> tuple[list[str], str, bool | None]:
    data = load_plain_yaml(run_dir / task_id / "task_result.yaml")
    return sorted(data), data["status"], data["pass_correctness"]


# --------------------------------------------------------------------------- in-process runs


def test_parallel_run_gives_every_task_the_result_a_serial_run_gives(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    serial = api.run(write_config(name="serial.yaml"), output_root=tmp_path / "serial")
    parallel = api.run(write_config(resources={"gpus": [0, 1, 2]}, name="parallel.yaml"),
                       output_root=tmp_path / "parallel")

    assert [r.task_id for r in parallel.results] == list(TASKS)
    for task_id in TASKS:
        assert result_fields(parallel.run_dir, task_id) == result_fields(serial.run_dir, task_id)
        assert result_fields(parallel.run_dir, task_id)[1:] == ("completed", True)
    # Each evaluation saw exactly one GPU id; the tasks were spread over the slots.
    ids = [seen(tmp_path, t) for t in TASKS]
    assert set(ids) <= {"0", "1", "2"} and len(set(ids)) > 1, ids
    summary = json.loads((parallel.run_dir / "reports" / "summary.json").read_text())
    assert sorted(summary) == sorted(json.loads(
        (serial.run_dir / "reports" / "summary.json").read_text()))
    assert [row["status"] for row in summary["tasks"]] == ["completed"] * 3
    meta = load_plain_yaml(parallel.run_dir / "run.yaml")
    assert meta["parallel"]["slots"] == [{"worker": i, "devices": [i]} for i in range(3)]
    assert load_plain_yaml(serial.run_dir / "run.yaml")["parallel"] is None
    logs = sorted(p.name for p in (parallel.run_dir / "logs").glob("worker-*.log"))
    assert logs == ["worker-0.log", "worker-1.log", "worker-2.log"]
    first = json.loads((parallel.run_dir / "logs" / "worker-1.log").read_text().splitlines()[0])
    assert (first["worker"], first["devices"]) == (1, "1")


def test_gpu_groups_give_each_worker_its_group(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    outcome = api.run(write_config(FAST, resources={"gpu_groups": [[0, 1], [2, 3]]}),
                      output_root=tmp_path / "out")
    assert [r.status for r in outcome.results] == ["completed", "completed"]
    assert {seen(tmp_path, t) for t in FAST} == {"0,1", "2,3"}


# --------------------------------------------------------------------------- killed processes


def aka(*args: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """``aka ARGS`` in a new session (its own process group), output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "aka_core.cli", *args], cwd=cwd,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


@contextlib.contextmanager
def started_run(config: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real ``aka run`` of ``config``; on exit every process it started is gone."""
    output_root = tmp_path / "out"
    proc = aka("run", str(config), "--output-root", str(output_root), "--no-progress",
               cwd=tmp_path, log=tmp_path / "run.log")
    spawned: set[int] = set()
    try:
        wait_for(lambda: list(output_root.glob("*/run_*/run.yaml")), 60, "run.yaml")
        yield proc, next(output_root.glob("*/run_*"))
    finally:
        spawned.update(descendants(proc.pid))
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in spawned:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def slow_task_evaluating(run_dir: Path) -> bool:
    return (run_dir / SLOW / "logs" / "evaluation.log").is_file()


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {t: (run_dir / t / "task_result.yaml").read_bytes() for t in TASKS
            if (run_dir / t / "task_result.yaml").is_file()}


def assert_complete(run_dir: Path) -> None:
    for task_id in TASKS:
        result = read_task_result(run_dir / task_id / "task_result.yaml")
        assert (result.status, result.pass_correctness) == ("completed", True), (task_id,
                                                                                 result.error)
    set_aside = list((run_dir / ".interrupted").glob(f"*/{SLOW}"))
    assert len(set_aside) == 1, "the interrupted attempt is kept under .interrupted/"
    assert (set_aside[0] / "workspace").is_dir()
    assert (set_aside[0] / "logs" / "evaluation.log").is_file()
    assert not (set_aside[0] / "task_result.yaml").exists()
    summary = json.loads((run_dir / "reports" / "summary.json").read_text())
    assert {row["task_id"]: row["status"] for row in summary["tasks"]} == dict.fromkeys(
        TASKS, "completed")


def test_a_worker_killed_mid_task_loses_only_that_attempt(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config(resources={"gpus": [0, 1]}, hold=True)
    with started_run(config, tmp_path) as (proc, run_dir):
        queue = TaskQueue(run_dir)
        wait_for(lambda: slow_task_evaluating(run_dir), 90, "the slow task's evaluation")
        claim = queue.read(SLOW)
        assert claim is not None
        wait_for(lambda: descendants(claim.pid), 30, "the worker's evaluation process")
        evaluation_workers = descendants(claim.pid)
        os.kill(claim.pid, signal.SIGKILL)
        (tmp_path / "hold").unlink()

        assert proc.wait(timeout=120) == 0, (tmp_path / "run.log").read_text()[-3000:]
        assert not any(alive(p) for p in evaluation_workers), "the evaluation outlived its worker"

    assert_complete(run_dir)
    redo = queue.read(SLOW)
    assert redo is not None and redo.pid != claim.pid
    reclaimed = list(queue.reclaimed_dir.iterdir())
    assert [json.loads(p.read_text())["pid"] for p in reclaimed] == [claim.pid]
    assert seen(tmp_path, SLOW) in ("0", "1")


def test_resume_finishes_a_parallel_run_whose_process_group_was_killed(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config(resources={"gpus": [0, 1]}, hold=True)
    with started_run(config, tmp_path) as (proc, run_dir):
        wait_for(lambda: (run_dir / "demo/a_fast/task_result.yaml").is_file(), 90,
                 "a finished task")
        wait_for(lambda: slow_task_evaluating(run_dir), 60, "the slow task's evaluation")
        workers = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        wait_for(lambda: not any(alive(p) for p in workers), 5, "every worker to die")
    before = snapshot(run_dir)
    assert "demo/a_fast" in before and SLOW not in before
    (tmp_path / "hold").unlink()

    resumed = subprocess.run([sys.executable, "-m", "aka_core.cli", "run", "--resume",
                              str(run_dir), "--no-progress"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=180, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.strip().splitlines()[-1] == str(run_dir)
    assert_complete(run_dir)
    after = snapshot(run_dir)
    assert {t: after[t] for t in before} == before, "a completed task was redone"
