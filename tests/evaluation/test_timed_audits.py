"""The audit of a timed call, on the CPU: a wrong output or a changed input fails the side (the
candidate's a ``timing_check``, the baseline's the evaluator's fault), a changed input is named
first, and the pair's two sides share one reference per audited call."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from aka_core.evaluation import timing
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
    t.references, t.audits, t.slots = {}, 0, {}
    stage = [torch.arange(8, dtype=torch.float32) + j for j in range(4)]
    t.stage_views = [{"x": x} for x in stage]
    t.slot_memory = {side: [x.clone() for x in stage] for side in ("baseline", "candidate")}
    t.slot_inputs = lambda side, j: {"x": t.slot_memory[side][j]}  # type: ignore[method-assign]
    return t


def inputs(t: timing.CaseTimer) -> list[dict[str, Any]]:
    return [{"x": views["x"]} for views in t.stage_views]


def test_a_right_output_passes_and_the_sides_share_its_reference() -> None:
    t = timer()
    for side in ("baseline", "candidate"):
        t.audit(side, 1, [inputs(t)[1]["x"] * 2], inputs(t)[1], None)
    assert t.audits == 2 and t.judge.references == 1


def test_a_wrong_output_fails_the_candidate_naming_the_call() -> None:
    t = timer()
    wrong = inputs(t)[2]["x"] * 2
    wrong[5] += 1.0
    with pytest.raises(JudgeFailure) as failed:
        t.audit("candidate", 2, [wrong], inputs(t)[2], None)
    assert failed.value.kind == FailureKind.TIMING_CHECK
    assert "call 3 of a timed block of 4" in str(failed.value)


def test_the_baseline_wrong_in_a_timed_block_is_the_evaluators_fault() -> None:
    t = timer()
    with pytest.raises(JudgeFailure) as failed:
        t.audit("baseline", 0, [inputs(t)[0]["x"] * 3], inputs(t)[0], None)
    assert failed.value.kind == INFRA and "memory was disturbed" in str(failed.value)


def test_a_changed_input_is_named_before_a_wrong_output() -> None:
    t = timer()
    t.slot_memory["candidate"][3][0] = -1.0  # the candidate wrote into its input
    with pytest.raises(JudgeFailure, match="it modified its inputs x"):
        t.audit("candidate", 3, [inputs(t)[3]["x"]], inputs(t)[3], None)  # and is wrong


def test_a_wrong_structure_fails_with_its_reason() -> None:
    t = timer()
    with pytest.raises(JudgeFailure, match="returned 2 outputs") as failed:
        t.audit("candidate", 0, [], inputs(t)[0], "returned 2 outputs, expected 1")
    assert failed.value.kind == FailureKind.TIMING_CHECK


def test_a_nan_where_the_reference_has_a_number_fails() -> None:
    t = timer()
    bad = inputs(t)[1]["x"] * 2
    bad[0] = float("nan")
    with pytest.raises(JudgeFailure, match="call 2 of"):
        t.audit("candidate", 1, [bad], inputs(t)[1], None)


def test_a_blocks_audited_calls_are_read_with_one_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    from aka_core.evaluation import checking

    reads: list[int] = []
    real = checking.read_flags
    monkeypatch.setattr(checking, "read_flags", lambda flags: reads.append(len(flags)) or real(flags))
    t = timer()
    outs = {3: [inputs(t)[3]["x"] * 2], 1: [inputs(t)[1]["x"] * 2]}
    t.audit_calls("candidate", outs, {j: inputs(t)[j] for j in outs}, {})
    assert reads == [4] and t.audits == 2  # per call: its input and its output


def test_the_second_audited_call_of_a_block_wrong_is_named() -> None:
    t = timer()
    outs = {3: [inputs(t)[3]["x"] * 2], 1: [inputs(t)[1]["x"] * 2 + 1]}
    with pytest.raises(JudgeFailure, match="call 2 of a timed block of 4"):
        t.audit_calls("candidate", outs, {j: inputs(t)[j] for j in outs}, {3: None, 1: None})


def test_the_baselines_inputs_are_judged_by_its_outputs_alone() -> None:
    t = timer()
    # Its input changed after the call, its output right (made from the judge's copy): the
    # timing is not disturbed, nothing fails; its inputs are not compared byte by byte.
    t.slot_memory["baseline"][2][0] = -1.0
    t.audit("baseline", 2, [inputs(t)[2]["x"] * 2], inputs(t)[2], None)
    # Disturbed before it ran: its output differs from the reference made from the judge's copy.
    with pytest.raises(JudgeFailure, match="memory was disturbed"):
        t.audit("baseline", 2, [t.slot_memory["baseline"][2] * 2], inputs(t)[2], None)


@pytest.fixture
def raised_quick_flags(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The audits' quick kernel standing in on the CPU, raising every flag ("not clearly
    within"): PyTorch's exact flag must settle each."""
    from aka_core.evaluation import fused_compare

    monkeypatch.setattr(fused_compare, "audit_flag",
                        lambda out, ref, *args: torch.ones((), dtype=torch.bool))
    counts = {"fused": 0, "pytorch": 0, "settled": 0}
    monkeypatch.setattr(fused_compare, "audits", counts)
    return counts


def test_a_raised_quick_flag_on_a_right_output_is_settled_as_a_pass(
        raised_quick_flags: dict[str, int]) -> None:
    t = timer()
    x = inputs(t)
    t.audit_calls("candidate", {0: [x[0]["x"] * 2], 3: [x[3]["x"] * 2]},
                  {0: x[0], 3: x[3]}, {0: None, 3: None})
    assert raised_quick_flags == {"fused": 2, "pytorch": 0, "settled": 2}


def test_a_raised_quick_flag_on_a_wrong_output_still_fails_it(
        raised_quick_flags: dict[str, int]) -> None:
    t = timer()
    x = inputs(t)
    wrong = x[3]["x"] * 2
    wrong[0] += 1.0
    with pytest.raises(JudgeFailure, match="call 4 of a timed block") as failed:
        t.audit_calls("candidate", {0: [x[0]["x"] * 2], 3: [wrong]}, {0: x[0], 3: x[3]},
                      {0: None, 3: None})
    assert failed.value.kind == FailureKind.TIMING_CHECK
    assert raised_quick_flags["settled"] == 2


def test_where_the_kernel_does_not_apply_pytorch_flags_the_output() -> None:
    from aka_core.evaluation import fused_compare

    before = dict(fused_compare.audits)
    t = timer()  # on the CPU the kernel never applies
    t.audit("candidate", 1, [inputs(t)[1]["x"] * 2], inputs(t)[1], None)
    assert fused_compare.audits["pytorch"] == before["pytorch"] + 1
    assert fused_compare.audits["fused"] == before["fused"]
