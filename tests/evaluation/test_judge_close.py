"""When the judge lets go of the GPU: never before the candidate's processes are gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aka_core.evaluation import judge as judge_module
from aka_core.evaluation import sides


class FakeProc:
    def __init__(self, pid: int):
        self.pid = pid


class FakeRunner:
    def __init__(self, side: str, events: list[str], pid: int):
        self.side, self.events, self.proc = side, events, FakeProc(pid)

    def cont(self) -> None:
        pass

    def kill_soon(self) -> None:
        self.events.append(f"{self.side} signalled")

    def kill(self) -> None:
        self.events.append(f"{self.side} gone")


class FakeLock:
    def __init__(self, events: list[str]):
        self.events = events

    def close(self) -> None:
        self.events.append("lock released")


def closed_judge(monkeypatch: pytest.MonkeyPatch, *, quiet: bool) -> list[str]:
    events: list[str] = []
    monkeypatch.setattr(sides, "kill_orphans",
                        lambda keep: events.append(f"orphans killed, kept {sorted(keep)}"))
    judge: Any = judge_module.Judge.__new__(judge_module.Judge)
    judge.io = {}
    judge.runners = {"baseline": FakeRunner("baseline", events, 11),
                     "candidate": FakeRunner("candidate", events, 22)}
    judge._gpu_lock = FakeLock(events)
    judge.sides_quiet = quiet
    judge.save_kernel_caches = lambda: events.append("caches saved")
    judge.close()
    return events


def test_after_a_normal_timing_the_lock_goes_before_the_baselines_teardown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events = closed_judge(monkeypatch, quiet=True)
    released = events.index("lock released")
    assert events.index("baseline signalled") < released
    assert events.index("candidate gone") < released
    assert events.index("orphans killed, kept [11]") < released
    assert events.index("caches saved") > events.index("candidate gone")
    # The record is sent before the baseline's exit is waited for (``reap``).
    assert "baseline gone" not in events
    assert events.count("lock released") == 1


def test_the_record_goes_out_before_the_sides_are_reaped(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    judge: Any = judge_module.Judge.__new__(judge_module.Judge)
    judge.runners = {"baseline": FakeRunner("baseline", events, 11),
                     "candidate": FakeRunner("candidate", events, 22)}
    monkeypatch.setattr(sides, "kill_orphans",
                        lambda keep: events.append(f"orphans killed, kept {sorted(keep)}"))

    class Channel:
        def send(self, event: str, **fields: Any) -> None:
            events.append(f"sent {event}")

    judge_module.send_then_reap(judge, Channel(), {})  # type: ignore[arg-type]
    assert events == ["sent result", "baseline gone", "candidate gone", "orphans killed, kept []"]


def test_a_failed_reap_does_not_lose_the_record(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    sent: list[str] = []
    judge: Any = judge_module.Judge.__new__(judge_module.Judge)

    def broken() -> None:
        raise OSError("no such process")

    judge.reap = broken

    class Channel:
        def send(self, event: str, **fields: Any) -> None:
            sent.append(event)

    judge_module.send_then_reap(judge, Channel(), {})  # type: ignore[arg-type]
    assert sent == ["result"]
    assert "reaping the runners failed" in capsys.readouterr().err


def test_otherwise_every_side_is_gone_before_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    # A failure (or correctness only): the candidate may have GPU work queued, the baseline a
    # block behind "go"; nothing of either may overlap the next evaluation.
    events = closed_judge(monkeypatch, quiet=False)
    released = events.index("lock released")
    assert events.index("candidate gone") < released
    assert events.index("baseline gone") < released
    assert events.index("orphans killed, kept []") < released


def test_a_runner_killed_twice_closes_its_pipes_once(tmp_path: Path) -> None:
    """The candidate's runner is killed before the clean phase and again when the judge closes:
    the second kill must not close the numbers its pipes had, which by then may be other files'
    (an arena's descriptor, the GPU lock)."""
    import os

    runner = sides.RunnerProcess("candidate", scratch=tmp_path, env=dict(os.environ),
                                 log_path=tmp_path / "runner.log")
    runner.kill()
    # New files take the lowest free numbers: the ones the runner's pipes and socket had.
    reused = [os.open(tmp_path / f"file{i}", os.O_CREAT | os.O_RDWR) for i in range(3)]
    try:
        runner.kill()
        for fd in reused:
            os.fstat(fd)  # still open
    finally:
        for fd in reused:
            os.close(fd)
