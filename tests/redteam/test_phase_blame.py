"""Red team, the timing phase's clock: a candidate that answers each of the judge's requests
just inside a fixed limit (or inflates its estimate block so that every wait on its blocks is
minutes long) once took the timing phase past its limit, where the parent stops the judge as a
fault of the evaluator: an ``infra_error``, retried with new held-out shapes. Every wait on the
candidate now ends with the phase, and a phase spent waiting on the candidate is its failure,
whoever's request is the one that runs out of time. The GPU is stubbed; the judge's code is
real (``CaseTimer.arm``, ``CaseTimer._wait``, ``Judge._answer``, ``Judge.side_failure``)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from aka_core.evaluation import judge as judge_module
from aka_core.evaluation import timing
from aka_core.evaluation.failures import INFRA, FailureKind, JudgeFailure
from aka_core.evaluation.sides import SideFailure


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    fake = types.SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep)
    monkeypatch.setattr(timing, "time", fake)
    monkeypatch.setattr(judge_module, "time", fake)
    return clock


class Runner:
    """A side's runner that answers each request after ``delay`` seconds (if within its limit)."""

    def __init__(self, side: str, clock: Clock, delay: float):
        self.side, self.clock, self.delay = side, clock, delay
        self.dead = False
        self.waited_s = 0.0
        self.limits: list[float] = []

    def request(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        return self.answer(op, timeout)

    def answer(self, op: str, timeout: float) -> dict[str, Any]:
        self.limits.append(timeout)
        waited = min(self.delay, timeout)
        self.clock.sleep(waited)
        self.waited_s += waited
        if self.delay > timeout:
            raise SideFailure(FailureKind.TIMEOUT, f"no answer to {op}", side=self.side)
        return {"ok": True}

    def kill(self) -> None:
        self.dead = True


def timing_judge(clock: Clock, candidate_delay: float, baseline_delay: float = 0.001) -> Any:
    judge = judge_module.Judge.__new__(judge_module.Judge)
    judge.result, judge.device = {"device_memory": {"shared": False}}, "cuda"
    judge.runners = {"baseline": Runner("baseline", clock, baseline_delay),
                     "candidate": Runner("candidate", clock, candidate_delay)}
    judge._phase, judge._phase_start, judge.limit = "timing", clock.now, 300.0
    judge._waited_at_phase = {"baseline": 0.0, "candidate": 0.0}
    return judge


def test_answers_just_inside_a_fixed_limit_cannot_outlast_the_phase(clock: Clock) -> None:
    judge = timing_judge(clock, candidate_delay=timing.ARM_SECONDS - 1)
    timer = types.SimpleNamespace(judge=judge, mode={"candidate": "graph"},
                                  counts={"candidate": 100}, placement=0)
    with pytest.raises(SideFailure) as late:
        for n in range(30):  # 30 arms of 29 s: 870 s of a 300 s phase, before
            timing.CaseTimer.arm(timer, judge.runners["candidate"], None, "candidate", n)
    assert late.value.kind == FailureKind.TIMEOUT
    assert clock.now - 1000.0 <= judge.limit + 1  # it ended with the phase
    assert judge.spent_by_candidate()
    assert judge.phase_spent_failure().kind == FailureKind.TIMEOUT


def test_a_baseline_out_of_time_after_the_candidate_spent_the_phase_is_not_a_retry(
        clock: Clock) -> None:
    judge = timing_judge(clock, candidate_delay=299.5)
    judge.runners["candidate"].answer("arm", judge.candidate_seconds(timing.ARM_SECONDS * 100))
    with pytest.raises(JudgeFailure) as failed:  # the baseline's request gets what is left
        judge.runners["baseline"].delay = 1.0
        judge._answer("baseline", "setup", "timing")
    assert failed.value.kind == FailureKind.TIMEOUT and "waiting for the candidate" in str(
        failed.value)
    # The control: a baseline that itself took the phase is still the evaluator's fault.
    judge = timing_judge(clock, candidate_delay=0.001, baseline_delay=299.5)
    judge.runners["baseline"].answer("arm", 299.6)
    with pytest.raises(JudgeFailure) as failed:
        judge._answer("baseline", "setup", "timing")
    assert failed.value.kind == INFRA


def test_a_block_wait_is_sized_on_the_baseline_and_ends_with_the_phase(
        clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    # The candidate's estimate block spun 19 s (its estimate: 9.5 s a call): waits on its
    # blocks were 100 x 9.5 s x 50 long. Now they are sized on the baseline's 0.02 ms.
    import sys

    import aka_core.evaluation

    judge = timing_judge(clock, candidate_delay=0.0)
    cuda_ipc = types.SimpleNamespace(stream_write=lambda *args: None)  # no GPU here
    monkeypatch.setitem(sys.modules, "aka_core.evaluation.cuda_ipc", cuda_ipc)
    monkeypatch.setattr(aka_core.evaluation, "cuda_ipc", cuda_ipc, raising=False)
    timer = types.SimpleNamespace(
        judge=judge, counts={"candidate": 100}, count=100, estimate_ms=9500.0, baseline_ms=0.02,
        stream=types.SimpleNamespace(synchronize=lambda: None),
        unblock_stream=types.SimpleNamespace(cuda_stream=0))
    timer._block_did_not_finish = types.MethodType(timing.CaseTimer._block_did_not_finish, timer)
    never = types.SimpleNamespace(query=lambda: False)  # a block that spins for ever
    started = clock.now
    with pytest.raises(JudgeFailure) as failed:
        timing.CaseTimer._wait(timer, never, 0, 1, "candidate")
    assert failed.value.kind == FailureKind.TIMEOUT
    assert clock.now - started <= timing.BLOCK_SECONDS_MIN + 1
    assert judge.runners["candidate"].waited_s >= timing.BLOCK_SECONDS_MIN
