"""Both sides capture their graphs at once; the baseline's answer still decides the method, and a
candidate that breaks (not merely raises) while capturing fails as before."""

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
    def __init__(self, baseline_fails: bool, candidate: SideFailure | None):
        self.log: list[str] = []
        self.baseline_fails = baseline_fails
        self.runners = {"candidate": Candidate(self.log, candidate)}

    def _send(self, side: str, op: str, phase: str, **fields: Any) -> None:
        self.log.append(f"send {side} {op}")

    def _answer(self, side: str, op: str, phase: str, timeout: float | None = None
                ) -> dict[str, Any]:
        self.log.append(f"answer {side} {op}")
        if self.baseline_fails:
            raise JudgeFailure(FailureKind.TASK_ERROR, "baseline raised: not capturable")
        return {"ok": True}

    def side_failure(self, side: str, exc: SideFailure, phase: str) -> JudgeFailure:
        return JudgeFailure(FailureKind.CRASHED, f"{side}: {exc}")


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
    judge = Judge(False, None)
    t = timer(judge)
    t.choose_mode()
    assert judge.log == ["prime", "send baseline capture", "send candidate capture",
                         "answer baseline capture", "answer candidate capture"]
    assert t.mode == {"baseline": "graph", "candidate": "graph"}
    assert t.record["method"] == "cuda_graph" and t.slots["candidate"].outputs == ["placed"]


def test_a_baseline_that_cannot_be_captured_leaves_both_sides_eager() -> None:
    judge = Judge(True, None)
    t = timer(judge)
    t.choose_mode()
    assert judge.log[-1] == "answer candidate capture"  # read, so the protocol stays in step
    assert t.mode == {"baseline": "eager", "candidate": "eager"}
    assert t.record["method"] == "eager" and "not capturable" in t.record["graph_fallback"]
    assert "candidate_method" not in t.record


def test_a_candidate_that_raises_is_timed_with_plain_launches() -> None:
    judge = Judge(False, SideFailure(RAISED, "cannot capture a sync", side="candidate"))
    t = timer(judge)
    t.choose_mode()
    assert t.mode == {"baseline": "graph", "candidate": "eager"}
    assert t.record["candidate_method"] == "eager"
    assert "cannot capture a sync" in t.record["candidate_graph_failure"]


@pytest.mark.parametrize("baseline_fails", [False, True])
def test_a_candidate_that_breaks_while_capturing_fails(baseline_fails: bool) -> None:
    judge = Judge(baseline_fails, SideFailure(FailureKind.CRASHED, "segfault", side="candidate"))
    with pytest.raises(JudgeFailure, match="segfault"):
        timer(judge).choose_mode()
