"""A case's pairs rotate over placements: each side's runner holds several sets of input slots
(a drawn gap before each further one) and one captured graph per set, and every block names the
set it runs on. Where a call's buffers lie moved an H100 baseline by up to 7% (pairs on one
placement agree within 0.1%), so one placement per evaluation made its CI a claim about that
placement only."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from aka_core.evaluation import timing
from aka_core.evaluation.arena import CTRL_BYTES
from aka_core.evaluation.failures import JudgeFailure
from aka_core.models import TimingPolicy
from tests.evaluation.test_slot_setup import FakeJudge, patched_events

LAYOUT = {"x": {"offset": 0, "dtype": "float32", "shape": [4], "strides": [1]}}


def test_each_placement_lies_after_its_gap_and_the_runner_gets_them_all() -> None:
    plan = timing.SlotPlan("baseline", LAYOUT, 256, 3, 512, gaps=(0, 1024, 4096))
    assert plan.starts == [CTRL_BYTES, CTRL_BYTES + 768 + 1024, CTRL_BYTES + 2 * 768 + 5120]
    assert plan.size == CTRL_BYTES + 3 * 768 + 5120  # the audited outputs' room after them
    assert plan.total == plan.size + timing.AUDITS_PER_BLOCK * 512
    judge: Any = FakeJudge([])
    plan.send(judge)
    sent = judge.sent["baseline"]
    assert sent["per_placement"] == 3 and len(sent["slots"]) == 9
    assert [slot["x"]["offset"] for slot in sent["slots"][3:6]] == [
        plan.starts[1] + j * 256 for j in range(3)]
    one = timing.SlotPlan("baseline", LAYOUT, 256, 3, 512)  # as before placements
    assert one.starts == [CTRL_BYTES] and one.size == CTRL_BYTES + 768


def test_a_block_copies_into_its_own_placements_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    patched_events(monkeypatch)
    judge: Any = FakeJudge([])
    plan = timing.SlotPlan("candidate", LAYOUT, 256, 2, 0, gaps=(0, 512))
    slots = timing.SideSlots(judge, plan, {})
    assert slots.placements == 2
    for p in range(2):
        view = slots.inputs_of(p)
        assert len(view) == 512 and view == slots.arena.bytes[plan.starts[p]: plan.starts[p] + 512]


def test_a_capture_must_answer_for_every_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    patched_events(monkeypatch)
    judge: Any = FakeJudge([])
    slots = timing.SideSlots(judge, timing.SlotPlan("candidate", LAYOUT, 256, 2, 0,
                                                    gaps=(0, 512)), {})
    with pytest.raises(JudgeFailure, match="outputs of 2 placements"):
        slots.placed_views([[[], []]])  # one placement's calls only
    with pytest.raises(JudgeFailure, match="outputs of 2 calls"):
        slots.placed_views([[[]], [[], []]])


class _Timer(timing.CaseTimer):
    """A case timer whose GPU steps are stand-ins: every block reads its placement's time."""

    def __init__(self, per_placement_ms: list[float], policy: TimingPolicy):
        self.policy, self.record, self.rng = policy, {"case": "c"}, random.Random(3)
        self.judge = type("Judge", (), {"remaining": lambda s: 100.0, "limit": 100.0,
                                        "req": type("Req", (), {"time_reference": False})()})()
        self.ms, self.slots, self.aside, self.kept, self.last = per_placement_ms, {}, None, None, 0
        self.mode = {"baseline": "graph", "candidate": "graph"}
        self.stages: dict[str, float] = {}
        self.reset()

    def allocate(self, count: int, baseline: int | None = None, placements: int = 1) -> None:
        self.count, self.counts = count, {"candidate": count, "baseline": baseline or count}
        self.placements, self.placement = placements, 0

    def fresh_inputs(self, pair: int) -> list[dict[str, Any]]:
        return [{}] * self.count

    def block(self, side: str, inputs: Any, *, touch: bool = False, audit: bool = True) -> float:
        if touch:
            return 0.3
        scale = self.ms[self.placement] if side == "baseline" else 1.0
        return 0.3 + self.counts[side] * scale

    def choose_mode(self) -> None: ...
    def keep(self) -> None: ...
    def release(self) -> None: ...
    def free_memory(self) -> int: return 1 << 40
    def calls_that_fit(self, free: int) -> int: return 1000
    def fit_graph_blocks(self, count: int, most: int, overhead: float) -> int: return count

    def placements_that_fit(self, count: int, baseline: int, free: int) -> int:
        return self.policy.placements


def test_pairs_go_in_rounds_of_every_placement_and_stop_on_a_whole_round() -> None:
    timer = _Timer([2.0, 2.14, 1.9], TimingPolicy(placements=3))
    record = timer.run_blocks(timing.MAX_CALLS)
    where = record["pair_placements"]
    assert record["placements"] == 3 and record["stop_reason"] == "ci_target"
    # Placements 7% apart, no noise within one: two whole rounds, then the CI target is met
    # by what pairs can narrow (the spread between placements is the CI's).
    assert len(where) == record["pairs"] == 6
    assert sorted(where[:3]) == sorted(where[3:]) == [0, 1, 2]
    baseline, candidate = timer.samples(0.3)
    assert {round(b / c, 3) for b, c in zip(baseline, candidate, strict=True)} == {2.0, 2.14, 1.9}


def test_one_placement_stops_from_min_pairs_as_before() -> None:
    timer = _Timer([2.0], TimingPolicy(placements=1))
    record = timer.run_blocks(timing.MAX_CALLS)
    assert record["pairs"] == 5 and set(record["pair_placements"]) == {0}


def test_the_clean_phase_compares_each_placement_with_itself(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # Placement 1 is 7% slower than placement 0, beside the candidate and alone alike: no
    # interference. Four clean blocks over two placements (0, 1, 0, 1) against pairs that ran
    # three times on 0 and once on 1 would read a pooled ratio off by the mix.
    monkeypatch.setattr(timing, "speed_of_light", lambda judge, case: None)
    timer = object.__new__(timing.CaseTimer)
    timer.case = type("Case", (), {"name": "c1"})()
    timer.counts = {"baseline": 2, "candidate": 4}
    per_call = {0: 1.0, 1: 1.07}
    timer.pair_placements = [0, 1, 0, 0, 1, 0]
    timer.windows = {"baseline": [0.3 + 2 * per_call[p] for p in timer.pair_placements],
                     "candidate": [0.3 + 4 * 0.5] * 6}
    timer.copy_ms = {"baseline": [1.0] * 6, "candidate": [1.0] * 6}
    timer.flush_ms = {"baseline": [0.5] * 6, "candidate": [0.5] * 6}
    req = type("Req", (), {"candidate": object(), "timing": TimingPolicy()})()
    judge: Any = type("Judge", (), {"req": req})()
    clean_where = [0, 1, 1, 1]
    record: dict[str, Any] = {"clean": {
        "windows_ms": [0.3 + 2 * per_call[p] for p in clean_where], "placement": "same",
        "touch_windows_ms": [0.3] * 5, "placements": clean_where}}
    timing.finish_case(judge, timer, record)
    assert record["interference"]["ratio"] == pytest.approx(1.0)
    assert record["interference"]["by_placement"] == pytest.approx([1.0, 1.0])
    assert record["speedup"] == pytest.approx(math.sqrt(2.0 * 2.14))  # placements alike


class _SizedTimer(_Timer):
    """Room for ``room`` calls' slots (both sides) in all: placements as many as fit it."""

    def __init__(self, room: int, policy: TimingPolicy):
        super().__init__([2.0], policy)
        self.room = room

    def placements_that_fit(self, count: int, baseline: int, free: int) -> int:
        return max(1, min(self.policy.placements, self.room // (count + baseline)))


def test_blocks_shrink_alike_until_every_placement_fits() -> None:
    timer = _SizedTimer(room=60, policy=TimingPolicy(placements=3))
    count, baseline, placements = timer.sizes_for_placements(20, 10, 0)
    # 30 calls a placement fit twice; 0.64 of them (13 + 7) three times.
    assert (count, baseline, placements) == (13, 7, 3)
    assert timer.record["placement_sized"] == {"calls_from": 20, "calls_to": 13,
                                               "baseline_from": 10, "baseline_to": 7}


def test_blocks_shrink_no_further_than_the_floor() -> None:
    timer = _SizedTimer(room=30, policy=TimingPolicy(placements=3))
    # Two placements need blocks of a third (under the floor: 0.25 of 40 + 20 = 15): none
    # shrinks past the floor, and the floor gives two placements of 10 + 5 calls.
    assert timer.sizes_for_placements(40, 20, 0) == (10, 5, 2)
    timer = _SizedTimer(room=10, policy=TimingPolicy(placements=3))
    assert timer.sizes_for_placements(40, 20, 0) == (40, 20, 1)  # nothing gained: as asked
    assert "placement_sized" not in timer.record


def test_blocks_that_fit_every_placement_keep_their_size() -> None:
    timer = _SizedTimer(room=1000, policy=TimingPolicy(placements=3))
    assert timer.sizes_for_placements(20, 10, 0) == (20, 10, 3)
    assert "placement_sized" not in timer.record
