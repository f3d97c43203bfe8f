"""Both sides capture their graphs at once; the baseline's answer still decides the method (a
baseline that fails beside the candidate's capture is tried once more alone), and a candidate that
breaks (not merely raises) while capturing fails as before."""

from __future__ import annotations

from typing import Any

import pytest

from aka_core.evaluation import timing
from aka_core.evaluation.failures import FailureKind, JudgeFailure
from aka_core.evaluation.sides import RAISED, SideFailure
from aka_core.models import TimingPolicy


class Candidate:
    def __init__(self, log: list[str], failure: SideFailure | None):
        self.log, self.failure = log, failure

    def send(self, **message: Any) -> None:
        self.log.append(f"send candidate {message['op']}")

    def answer(self, op: str, timeout: float) -> dict[str, Any]:
        self.log.append(f"answer candidate {op}")
        if self.failure is not None:
            raise self.failure
        return {"ok": True, "outputs": ["placed"]}


class Judge:
    def __init__(self, baseline_fails: int, candidate: SideFailure | None):
        """``baseline_fails``: how many of the baseline's captures fail, from the first."""
        self.log: list[str] = []
        self.baseline_fails = baseline_fails
        self.runners = {"candidate": Candidate(self.log, candidate)}

    def _send(self, side: str, op: str, phase: str, **fields: Any) -> None:
        self.log.append(f"send {side} {op}")

    def _answer(self, side: str, op: str, phase: str, timeout: float | None = None
                ) -> dict[str, Any]:
        self.log.append(f"answer {side} {op}")
        if self.baseline_fails:
            self.baseline_fails -= 1
            raise JudgeFailure(FailureKind.INFRA_ERROR, "baseline: out of memory in the capture")
        return {"ok": True}

    def _request(self, side: str, op: str, phase: str, timeout: float | None = None,
                 **fields: Any) -> dict[str, Any]:
        self._send(side, op, phase, **fields)
        return self._answer(side, op, phase, timeout)

    def side_failure(self, side: str, exc: SideFailure, phase: str) -> JudgeFailure:
        return JudgeFailure(FailureKind.CRASHED, f"{side}: {exc}")

    def candidate_seconds(self, limit: float) -> float:
        return limit  # the phase has all its time left


class Slots:
    outputs: Any = None

    def placed_views(self, descs: Any) -> Any:
        return descs


def timer(judge: Judge) -> timing.CaseTimer:
    t = object.__new__(timing.CaseTimer)
    t.judge, t.policy, t.record = judge, TimingPolicy(), {}  # type: ignore[assignment]
    t.counts = {"baseline": 3, "candidate": 5}
    t.mode = {"baseline": "eager", "candidate": "eager"}
    t.slots = {"candidate": Slots()}  # type: ignore[dict-item]
    t.prime = lambda *sides, fresh=True: judge.log.append("prime")  # type: ignore[method-assign]
    return t


def test_both_sides_are_asked_before_either_answer_is_read() -> None:
    judge = Judge(0, None)
    t = timer(judge)
    t.choose_mode()
    assert judge.log == ["prime", "send baseline capture", "send candidate capture",
                         "answer baseline capture", "answer candidate capture"]
    assert t.mode == {"baseline": "graph", "candidate": "graph"}
    assert t.record["method"] == "cuda_graph" and t.slots["candidate"].outputs == ["placed"]


def test_a_baseline_that_cannot_be_captured_even_alone_leaves_both_sides_eager() -> None:
    judge = Judge(2, None)
    t = timer(judge)
    t.choose_mode()
    assert judge.log[-4:] == ["answer baseline capture", "answer candidate capture",  # in step
                              "send baseline capture", "answer baseline capture"]  # alone
    assert t.mode == {"baseline": "eager", "candidate": "eager"}
    assert t.record["method"] == "eager" and "out of memory" in t.record["graph_fallback"]
    assert "candidate_method" not in t.record


def test_a_baseline_that_fails_beside_the_candidate_is_captured_alone() -> None:
    """The candidate's capture, at the same time, must not decide the baseline's method (it
    could take the memory the baseline's capture needs just then)."""
    judge = Judge(1, None)
    t = timer(judge)
    t.choose_mode()
    assert t.mode == {"baseline": "graph", "candidate": "graph"}
    assert "graph_fallback" not in t.record
    assert "out of memory" in t.record["baseline_capture_retried"]


@pytest.mark.parametrize("baseline_fails", [0, 1])
def test_a_candidate_that_raises_is_timed_with_plain_launches(baseline_fails: int) -> None:
    judge = Judge(baseline_fails, SideFailure(RAISED, "cannot capture a sync", side="candidate"))
    t = timer(judge)
    t.choose_mode()
    assert t.mode == {"baseline": "graph", "candidate": "eager"}
    assert t.record["candidate_method"] == "eager"
    assert "cannot capture a sync" in t.record["candidate_graph_failure"]


@pytest.mark.parametrize("baseline_fails", [0, 2])
def test_a_candidate_that_breaks_while_capturing_fails(baseline_fails: int) -> None:
    judge = Judge(baseline_fails, SideFailure(FailureKind.CRASHED, "segfault", side="candidate"))
    with pytest.raises(JudgeFailure, match="segfault"):
        timer(judge).choose_mode()
