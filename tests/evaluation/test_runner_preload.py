"""A backend's preload runs in the runner at "init", before "load" (before the judge holds the
GPU), and never fails the side."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from aka_core.evaluation import sandbox
from aka_core.evaluation.sides import RunnerProcess

HERE = Path(__file__).resolve().parent


class MarkingBackend:
    """Writes ``preloaded`` into the runner's working folder (its scratch) when preloaded; its
    side's function returns whether that file existed when the side was loaded."""

    def worker_environment(self, device: str) -> dict[str, str]:
        return {}

    def preload(self, device: str) -> None:
        Path("preloaded").write_text(device)

    def load_callable(self, root: Path, ref: str, package: str):  # type: ignore[no-untyped-def]
        seen = Path("preloaded").is_file()
        return lambda: seen


class FailingPreload(MarkingBackend):
    def preload(self, device: str) -> None:
        raise RuntimeError("no compiler here")


def _start(tmp_path: Path, factory: str) -> RunnerProcess:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runner = RunnerProcess("candidate", scratch=scratch, env={"PATH": "/usr/bin:/bin"},
                           log_path=tmp_path / "runner.log")
    spec = sandbox.build_spec(scratch=scratch, read=[str(HERE)], protected=[], required=False)
    runner.send(op="confine", sandbox=spec.to_json(), confine=False)
    assert runner.read(60, "start-up")["event"] == "sandboxed"
    runner.send(op="init", device="cpu", backend=factory, root=str(tmp_path), ref="k.py:f",
                package="aka_side_candidate", env={})
    return runner


@pytest.fixture
def importable() -> None:
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))


def test_preload_runs_before_the_side_is_loaded(tmp_path: Path, importable: None) -> None:
    runner = _start(tmp_path, "test_runner_preload:MarkingBackend")
    try:
        marker = tmp_path / "scratch" / "preloaded"
        deadline = time.monotonic() + 20
        while not marker.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        # Preloaded while the runner still waits for "load" (the judge sends it once it holds
        # the GPU).
        assert marker.read_text() == "cpu"
        runner.send(op="load")
        assert runner.read(60, "loading its code")["event"] == "loaded"
    finally:
        runner.kill()


def test_a_failing_preload_is_not_the_sides_failure(tmp_path: Path, importable: None) -> None:
    runner = _start(tmp_path, "test_runner_preload:FailingPreload")
    try:
        runner.send(op="load")
        assert runner.read(60, "loading its code")["event"] == "loaded"
    finally:
        runner.kill()
