"""The clean phase times the baseline on the memory and graph it was timed on beside the
candidate: its runner sets them aside after the case's pairs (``keep``) and makes them current
again for the clean phase (``restore``), within a share of the GPU's memory; beyond it the clean
phase gets new ones, and its record says which. (On an H100 a new placement alone moved a
baseline's call by up to 7%, which a clean phase on new memory read as interference.)"""

from __future__ import annotations

from typing import Any

import pytest

from aka_core.evaluation import runner as runner_mod
from aka_core.evaluation import timing
from aka_core.evaluation.failures import FailureKind, JudgeFailure
from tests.evaluation.test_slot_setup import FakeJudge, patched_events, plans


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return patched_events(monkeypatch)


class RequestingJudge(FakeJudge):
    def _request(self, side: str, op: str, phase: str, **fields: Any) -> dict[str, Any]:
        self._send(side, op, phase, **fields)
        return self._answer(side, op, phase)


def timer_with_slots(judge: Any, aside: timing.SetAside | None, index: int = 2,
                     mode: str = "graph") -> timing.CaseTimer:
    timer = object.__new__(timing.CaseTimer)
    timer.judge, timer.index, timer.aside, timer.kept = judge, index, aside, None
    timer.last = False
    timer.slots = timing.open_slots(judge, plans())
    timer.counts = {"baseline": 3, "candidate": 5}
    timer.mode = {"baseline": mode, "candidate": mode}
    timer.out_bytes = 512
    timer.stage, timer.stage_views, timer.stages = None, [], {}
    return timer


def test_the_baseline_is_set_aside_and_the_candidate_freed(events: list[str]) -> None:
    judge: Any = RequestingJudge(events)
    aside = timing.SetAside(1 << 30)
    timer = timer_with_slots(judge, aside)
    events.clear()
    timer.keep()
    timer.release()
    assert judge.sent["baseline"] == {"key": "2"}
    assert events == ["baseline keep sent", "baseline keep answered", "candidate unmapped",
                      "candidate release sent", "candidate release answered"]
    assert timer.kept is not None and timer.kept.side == "baseline"
    # Its arena, and room for its graph's outputs twice over, counted against the share.
    assert aside.used == timer.kept.total + 3 * 2 * 512


def test_without_room_the_baseline_is_freed_as_before(events: list[str]) -> None:
    judge: Any = RequestingJudge(events)
    timer = timer_with_slots(judge, timing.SetAside(100))
    events.clear()
    timer.keep()
    timer.release()
    assert timer.kept is None
    assert "baseline keep sent" not in events
    assert "baseline unmapped" in events and "baseline release sent" in events


def test_the_last_case_is_kept_without_room(events: list[str]) -> None:
    # No case after it needs the memory, and its clean phase comes after the candidate's memory
    # is freed: a candidate holding most of the GPU cannot send it to new memory.
    judge: Any = RequestingJudge(events)
    aside = timing.SetAside(0, lambda: 0.1)
    timer = timer_with_slots(judge, aside)
    timer.last = True
    timer.keep()
    assert timer.kept is not None and "baseline keep sent" in events
    # Counted: what the GPU holds when the candidate is killed is told apart from what it held.
    assert aside.used == timer.kept.total + 3 * 2 * 512


def test_the_room_is_shared_by_the_cases() -> None:
    aside = timing.SetAside(1000)
    assert aside.take(600) and not aside.take(500) and aside.take(400)
    assert aside.used == 1000


def test_nothing_is_set_aside_while_less_than_half_the_memory_is_free() -> None:
    # Kept memory is memory the next cases' slots cannot have.
    share = [0.6]
    aside = timing.SetAside(1 << 30, lambda: share[0])
    assert aside.take(100)
    share[0] = 0.4
    assert not aside.take(100) and aside.used == 100


def clean_with_stand_ins(timer: timing.CaseTimer, events: list[str]) -> dict[str, Any]:
    """``clean`` with its GPU steps replaced: the stage, the inputs, the blocks."""
    timer.layout, timer.region, timer.out_aligned = plans()[0].layout, 256, 512
    timer.make_stage = lambda: None  # type: ignore[method-assign]
    timer.fresh_inputs = lambda pair: [{}]  # type: ignore[method-assign]
    timer.prime = lambda *sides, fresh=True: events.append("primed")  # type: ignore[method-assign]

    def block(side: str, inputs: Any, *, touch: bool = False, audit: bool = True) -> float:
        events.append(f"{side} {'touch' if touch else 'block'} on {id(timer.slots[side])}")
        return 0.3 if touch else 2.0

    timer.block = block  # type: ignore[method-assign]
    return timer.clean()


def test_the_clean_phase_times_the_baseline_on_what_was_set_aside(events: list[str]) -> None:
    judge: Any = RequestingJudge(events)
    timer = timer_with_slots(judge, timing.SetAside(1 << 30))
    timer.keep()
    timer.release()
    kept = timer.kept
    events.clear()
    record = clean_with_stand_ins(timer, events)
    assert record["placement"] == "same"
    assert events[:2] == ["baseline restore sent", "baseline restore answered"]
    # No new arena, no new capture: every block on the kept slots, which are then freed.
    assert "baseline setup sent" not in events and "baseline capture sent" not in events
    assert "primed" not in events
    blocks = [e for e in events if " on " in e]
    assert len(blocks) == 2 * timing.CLEAN_BLOCKS + 1
    assert all(e.endswith(str(id(kept))) for e in blocks)
    assert events[-3:] == ["baseline unmapped", "baseline release sent",
                           "baseline release answered"]
    assert timer.kept is None


def test_a_clean_phase_without_a_kept_baseline_gets_new_memory(events: list[str]) -> None:
    judge: Any = RequestingJudge(events)
    timer = timer_with_slots(judge, timing.SetAside(0))
    timer.keep()
    timer.release()
    events.clear()
    record = clean_with_stand_ins(timer, events)
    assert record["placement"] == "new"
    assert events[:2] == ["baseline setup sent", "baseline setup answered"]
    assert "primed" in events and "baseline capture sent" in events


class FakeMemory:
    def __init__(self, name: str, events: list[str]):
        self.name, self.events, self.nbytes = name, events, 4096

    def close(self) -> None:
        self.events.append(f"{self.name} freed")


def bare_runner(events: list[str]) -> Any:
    runner = object.__new__(runner_mod.Runner)
    runner.device, runner.set_aside = "cpu", {}
    runner.replies = []
    runner.reply = lambda **message: runner.replies.append(message)
    runner.step = lambda name: None
    runner.arena, runner.slots, runner.out_region = FakeMemory("case 0", events), ["s"], (8, 8)
    runner.graphs, runner.graph_outputs, runner.per_placement = ["graph 0"], [[["o"]]], 1
    runner.kept, runner.last_calls, runner.exports = [["k"]], [["l"]], {1: b"x"}
    return runner


def test_a_runner_sets_a_case_aside_and_restores_it_unchanged() -> None:
    events: list[str] = []
    runner = bare_runner(events)
    runner.op_keep({"key": "0"})
    assert runner.arena is None and runner.graphs == [] and runner.slots == []
    assert events == []  # set aside, not freed
    runner.arena, runner.graphs = FakeMemory("case 1", events), ["graph 1"]  # the next case's
    runner.op_restore({"key": "0"})
    assert events == ["case 1 freed"]
    assert runner.graphs == ["graph 0"] and runner.slots == ["s"] and runner.out_region == (8, 8)
    assert runner.per_placement == 1
    assert runner.arena.name == "case 0" and runner.set_aside == {}
    assert runner.replies == [{"ok": True}, {"ok": True, "nbytes": 4096}]


def test_a_runner_asked_to_restore_what_it_never_kept_fails_that_request() -> None:
    runner = bare_runner([])
    with pytest.raises(KeyError):
        runner.op_restore({"key": "7"})
    assert runner.graphs == ["graph 0"]  # nothing of the current case was freed first


def band(placement: str) -> JudgeFailure:
    return JudgeFailure(FailureKind.INFRA_ERROR, f"band on {placement} memory; retry",
                        cause="interference_band", placement=placement)


@pytest.mark.parametrize(("verdicts", "raised"), [
    # Against new memory, unsure: a later case on its own memory says more, or any verdict.
    (["new", None, "same"], "band on same memory; retry"),
    (["new", "interference", None], "slowed"),
    (["new", None, None], "band on new memory; retry"),
    (["same", "new", None], "band on same memory; retry"),
    ([None, "interference", "new"], "slowed"),
    ([None, None, None], None),
])
def test_a_reading_against_new_memory_waits_for_the_other_cases(
        monkeypatch: pytest.MonkeyPatch, verdicts: list[str | None], raised: str | None) -> None:
    cleaned: list[int] = []

    class Timer:
        def __init__(self, index: int):
            self.index = index
            self.stages: dict[str, float] = {}

        def clean(self) -> dict[str, Any]:
            cleaned.append(self.index)
            return {"placement": verdicts[self.index] or "same"}

    def finish(judge: Any, timer: Any, record: dict[str, Any]) -> None:
        verdict = verdicts[timer.index]
        if verdict == "interference":
            raise JudgeFailure(FailureKind.INTERFERENCE, "slowed")
        if verdict is not None:
            raise band(verdict)

    monkeypatch.setattr(timing, "finish_case", finish)
    timers: Any = [Timer(i) for i in range(3)]
    records: list[dict[str, Any]] = [{} for _ in range(3)]
    if raised is None:
        timing.finish_cases(None, timers, records)  # type: ignore[arg-type]
        assert cleaned == [0, 1, 2]
        return
    with pytest.raises(JudgeFailure, match=raised):
        timing.finish_cases(None, timers, records)  # type: ignore[arg-type]


@pytest.mark.parametrize("placement", ["same", "new"])
def test_a_cases_retry_says_on_which_memory_its_baseline_was_timed_alone(
        monkeypatch: pytest.MonkeyPatch, placement: str) -> None:
    # The baseline 5% slower beside the candidate (1.05 ms a call) than alone (1.00 ms).
    monkeypatch.setattr(timing, "speed_of_light", lambda judge, case: None)
    timer = object.__new__(timing.CaseTimer)
    timer.case = type("Case", (), {"name": "c1"})()
    timer.counts = {"baseline": 2, "candidate": 4}
    timer.windows = {"baseline": [0.3 + 2 * 1.05] * 5, "candidate": [0.3 + 4 * 0.5] * 5}
    timer.pair_placements = [0] * 5
    timer.copy_ms = {"baseline": [1.0] * 5, "candidate": [1.0] * 5}
    timer.flush_ms = {"baseline": [0.5] * 5, "candidate": [0.5] * 5}
    judge: Any = type("Judge", (), {"req": type("Req", (), {"candidate": object()})()})()
    record: dict[str, Any] = {"clean": {"windows_ms": [0.3 + 2 * 1.0] * 4,
                                        "touch_windows_ms": [0.3] * 5, "placement": placement}}
    with pytest.raises(JudgeFailure) as band:
        timing.finish_case(judge, timer, record)
    assert band.value.kind == FailureKind.INFRA_ERROR
    assert band.value.details == {"cause": "interference_band", "placement": placement,
                                  "case": "c1"}
    assert record["interference"]["ratio"] == pytest.approx(1.05)


def test_a_refusal_says_why() -> None:
    share = [0.6]
    aside = timing.SetAside(1000, lambda: share[0])
    assert not aside.take(2000) and aside.refused == {"why": "room"}
    share[0] = 0.3
    assert not aside.take(10) and aside.refused == {"why": "free", "free_share": 0.3}
    share[0] = 0.6
    assert aside.take(10) and aside.refused is None


GIB = 1 << 30


def refusal(free_share: float, free: int, known: int = 2 * GIB, judge: int = GIB,
            kept: int = 0) -> dict[str, Any]:
    return {"why": "free", "free_share": free_share, "free_bytes": free, "known_bytes": known,
            "judge_reserved_bytes": judge, "kept_bytes": kept}


def test_what_the_candidate_held_when_its_case_was_refused() -> None:
    # 80 GiB GPU; at the refusal 24 GiB free (30%); once the candidate is killed 60 GiB free. Of
    # the 36 GiB gained, 2 GiB were the case's slots and 1 GiB the judge's own allocator's:
    # 33 GiB (41%) were the candidate's, and 4 GiB kept since then count back.
    after = {"free_bytes": 60 * GIB, "judge_reserved_bytes": 0, "kept_bytes": 4 * GIB,
             "gpu_bytes": 80 * GIB}
    held = timing.held_by_candidate(refusal(0.3, 24 * GIB), after)
    assert held == pytest.approx(37 / 80)
    assert timing.held_by_candidate({"why": "room"}, after) == 0.0
    assert timing.held_by_candidate(refusal(0.3, 24 * GIB), None) == 0.0
    # Nothing freed beyond what the judge knows of: nothing is the candidate's.
    quiet = {**after, "free_bytes": 27 * GIB, "kept_bytes": 0}
    assert timing.held_by_candidate(refusal(0.3, 24 * GIB), quiet) == 0.0


class _Cleaned:
    def __init__(self, index: int, refused: dict[str, Any] | None):
        self.index, self.refused = index, refused
        self.stages: dict[str, float] = {}

    def clean(self) -> dict[str, Any]:
        record: dict[str, Any] = {"placement": "new" if self.refused else "same"}
        if self.refused:
            record["set_aside_refused"] = self.refused
        return record


@pytest.mark.parametrize(("refused", "placement", "raised_at"), [
    # The candidate's 33 GiB (41%) would have left 71% free: its doing, judged at once.
    (refusal(0.3, 24 * GIB), "held_by_candidate", 0),
    # The share was spent by the baselines' own arenas: new memory, unsure, waits.
    ({"why": "room"}, "new", 2),
    # A GPU busy with other processes (the candidate's processes freed little): unsure.
    (refusal(0.3, 55 * GIB), "new", 2),
])
def test_new_memory_the_candidate_forced_counts_as_the_cases_own(
        monkeypatch: pytest.MonkeyPatch, refused: dict[str, Any], placement: str,
        raised_at: int) -> None:
    seen: list[tuple[int, str]] = []

    def finish(judge: Any, timer: Any, record: dict[str, Any]) -> None:
        seen.append((timer.index, record["clean"]["placement"]))
        if timer.index == 0:
            raise band(record["clean"]["placement"])

    monkeypatch.setattr(timing, "finish_case", finish)
    after = {"free_bytes": 60 * GIB, "judge_reserved_bytes": 0, "kept_bytes": 0,
             "gpu_bytes": 80 * GIB}
    timers: Any = [_Cleaned(0, refused), _Cleaned(1, None), _Cleaned(2, None)]
    records: list[dict[str, Any]] = [{} for _ in range(3)]
    with pytest.raises(JudgeFailure) as exc:
        timing.finish_cases(None, timers, records, after)  # type: ignore[arg-type]
    assert exc.value.details["placement"] == placement
    assert seen[0] == (0, placement) and len(seen) == raised_at + 1
    if placement == "held_by_candidate":
        assert records[0]["clean"]["held_by_candidate_share"] == pytest.approx(33 / 80)


def test_the_band_message_names_the_memory_the_candidate_held() -> None:
    with pytest.raises(JudgeFailure) as exc:
        timing.check_interference("c1", 1.05, 1.05, 1.0, {}, placement="held_by_candidate")
    assert exc.value.kind == FailureKind.INFRA_ERROR
    assert exc.value.details["placement"] == "held_by_candidate"
    assert "held the GPU memory" in str(exc.value)
