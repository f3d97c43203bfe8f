"""Audits enqueued after a block and read later: a wrong output or a changed input still fails
the side, with the message it had when each audit waited for the GPU; nothing is released with an
audit unread."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from aka_core.evaluation import checking, timing
from aka_core.evaluation.failures import INFRA, FailureKind, JudgeFailure
from aka_core.models import Tolerance


class Judge:
    def __init__(self) -> None:
        self.req = type("Req", (), {"tolerance": {"float32": Tolerance(rtol=1e-3, atol=1e-5)}})()
        self.references = 0

    def reference_outputs(self, case: Any, inputs: dict[str, Any]) -> list[Any]:
        self.references += 1
        return [inputs["x"] * 2]


def timer() -> timing.CaseTimer:
    """A case timer with one input ``x`` per call, its stage and its slots on the CPU."""
    t = object.__new__(timing.CaseTimer)
    t.judge, t.case = Judge(), type("Case", (), {"name": "c"})()
    t.counts = {"baseline": 4, "candidate": 4}
    t.expected = [((8,), torch.float32)]
    t.positions = [None]
    t.references, t.pending, t.audits, t.slots = {}, [], 0, {}
    stage = [torch.arange(8, dtype=torch.float32) + j for j in range(4)]
    t.stage_views = [{"x": x} for x in stage]
    t.slot_memory = {side: [x.clone() for x in stage] for side in ("baseline", "candidate")}
    t.slot_inputs = lambda side, j: {"x": t.slot_memory[side][j]}  # type: ignore[method-assign]
    return t


def inputs(t: timing.CaseTimer) -> list[dict[str, Any]]:
    return [{"x": views["x"]} for views in t.stage_views]


def test_a_right_output_settles_quietly_and_reads_its_reference_once_per_call() -> None:
    t = timer()
    for side in ("baseline", "candidate"):
        t.audit(side, 1, [inputs(t)[1]["x"] * 2], inputs(t)[1], None)
    assert len(t.pending) == 2 and t.audits == 2
    t.settle_audits()
    assert t.pending == [] and t.judge.references == 1  # the pair's sides share the reference


def test_a_wrong_output_fails_the_candidate_when_read_not_when_enqueued() -> None:
    t = timer()
    wrong = inputs(t)[2]["x"] * 2
    wrong[5] += 1.0
    t.audit("candidate", 2, [wrong], inputs(t)[2], None)  # enqueued: nothing raised yet
    with pytest.raises(JudgeFailure) as failed:
        t.settle_audits()
    assert failed.value.kind == FailureKind.TIMING_CHECK
    assert "call 3 of a timed block of 4" in str(failed.value)
    assert t.pending == []


def test_the_baseline_wrong_in_a_timed_block_is_the_evaluators_fault() -> None:
    t = timer()
    wrong = inputs(t)[0]["x"] * 3
    t.audit("baseline", 0, [wrong], inputs(t)[0], None)
    with pytest.raises(JudgeFailure) as failed:
        t.settle_audits()
    assert failed.value.kind == INFRA and "memory was disturbed" in str(failed.value)


def test_a_changed_input_is_named_before_a_wrong_output() -> None:
    t = timer()
    t.slot_memory["candidate"][3][0] = -1.0  # the candidate wrote into its input
    t.audit("candidate", 3, [inputs(t)[3]["x"]], inputs(t)[3], None)  # and its output is wrong
    with pytest.raises(JudgeFailure, match="it modified its inputs x"):
        t.settle_audits()


def test_a_wrong_structure_fails_at_once() -> None:
    t = timer()
    with pytest.raises(JudgeFailure, match="returned 2 outputs") as failed:
        t.audit("candidate", 0, [], inputs(t)[0], "returned 2 outputs, expected 1")
    assert failed.value.kind == FailureKind.TIMING_CHECK


def test_the_first_failing_audit_in_order_is_the_one_reported() -> None:
    t = timer()
    t.audit("candidate", 0, [inputs(t)[0]["x"] * 2], inputs(t)[0], None)
    bad = inputs(t)[1]["x"] * 2
    bad[0] = float("nan")
    t.audit("candidate", 1, [bad], inputs(t)[1], None)
    t.audit("candidate", 2, [inputs(t)[2]["x"]], inputs(t)[2], None)
    with pytest.raises(JudgeFailure, match="call 2 of"):
        t.settle_audits()


def test_releasing_the_slots_reads_every_pending_audit_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    t = timer()
    released: list[str] = []
    monkeypatch.setattr(timing, "release_slots", lambda judge, slots: released.append("freed"))
    t.audit("candidate", 0, [inputs(t)[0]["x"]], inputs(t)[0], None)  # wrong: x, not 2x
    t.slots = {"candidate": object()}  # type: ignore[dict-item]
    with pytest.raises(JudgeFailure):
        t.release()
    assert released == []  # the audit failed before the memory it read could go
    t.pending, t.slots = [], {"candidate": object()}  # type: ignore[dict-item]
    t.release()
    assert released == ["freed"]


def test_flags_read_later_on_the_cpu_are_ready_at_once() -> None:
    flags = checking.FlagsRead([torch.tensor(True), torch.tensor(False)])
    assert flags.ready() and flags.values() == [True, False]
    assert checking.FlagsRead([]).values() == []
