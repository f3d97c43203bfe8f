"""A backend's preload runs in the runner at "init", before "load" (before the judge holds the
GPU), and never fails the side; the runner says "ready" once it is done. A runner started ahead
(``warm``) preloads the backends it is given, their own files kept out of the side's cache."""

from __future__ import annotations

import os
import sys
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


class CacheMarking(MarkingBackend):
    """Appends the device to ``marks`` in the cache folder the environment names when preloaded
    (where a backend such as Triton writes what it compiles for itself)."""

    def preload(self, device: str) -> None:
        folder = Path(os.environ["TRITON_CACHE_DIR"])
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "marks", "a") as marks:
            marks.write(device + "\n")


def _start(tmp_path: Path, factory: str, device: str = "cpu", **confine: object
           ) -> RunnerProcess:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runner = RunnerProcess("candidate", scratch=scratch, env={
        "PATH": "/usr/bin:/bin", "TRITON_CACHE_DIR": str(scratch / "cache" / "triton")},
        log_path=tmp_path / "runner.log")
    spec = sandbox.build_spec(scratch=scratch, read=[str(HERE)], protected=[], required=False)
    if confine.get("warm"):
        confine["device"] = device
    runner.send(op="confine", sandbox=spec.to_json(), confine=False, **confine)
    assert runner.read(60, "start-up")["event"] == "sandboxed"
    runner.send(op="init", device=device, backend=factory, root=str(tmp_path), ref="k.py:f",
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
        # Ready once preloaded, while the runner still waits for "load" (the judge sends it once
        # it holds the GPU, and takes the GPU only once both runners are ready).
        assert runner.read(60, "start-up")["event"] == "ready"
        assert (tmp_path / "scratch" / "preloaded").read_text() == "cpu"
        runner.send(op="load")
        assert runner.read(60, "loading its code")["event"] == "loaded"
    finally:
        runner.kill()


def test_a_failing_preload_is_not_the_sides_failure(tmp_path: Path, importable: None) -> None:
    runner = _start(tmp_path, "test_runner_preload:FailingPreload")
    try:
        assert runner.read(60, "start-up")["event"] == "ready"
        runner.send(op="load")
        assert runner.read(60, "loading its code")["event"] == "loaded"
    finally:
        runner.kill()


def test_a_runner_started_ahead_preloads_outside_the_sides_cache(tmp_path: Path,
                                                                 importable: None) -> None:
    ahead = tmp_path / "scratch" / "ahead"
    runner = _start(tmp_path, "test_runner_preload:CacheMarking", warm=True,
                    preload=["test_runner_preload:CacheMarking", "no_such_module:Backend"],
                    preload_cache=str(ahead))
    try:
        assert runner.read(60, "start-up")["event"] == "ready"
        # Ahead: into its own folder (a missing backend skipped); at "init" too, into the
        # runner's "preload" folder: never into the side's cache, which the judge fills with
        # the side's stored kernels and its builder (side code) writes into before the lock.
        assert (ahead / "triton" / "marks").read_text() == "cpu\n"
        assert (tmp_path / "scratch" / "preload" / "triton" / "marks").read_text() == "cpu\n"
        assert not (tmp_path / "scratch" / "cache" / "triton" / "marks").exists()
        runner.send(op="load")
        assert runner.read(60, "loading its code")["event"] == "loaded"
    finally:
        runner.kill()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a host without a GPU")
def test_a_runner_without_its_cuda_context_says_so_before_any_side_code(
        tmp_path: Path, importable: None) -> None:
    runner = _start(tmp_path, "test_runner_preload:MarkingBackend", device="cuda")
    try:
        reply = runner.read(60, "start-up")
        assert reply["event"] == "setup_failed" and reply["message"]
    finally:
        runner.kill()
