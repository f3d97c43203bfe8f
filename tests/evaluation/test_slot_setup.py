"""Timing's slots: both runners are asked to allocate before either answer is read, and to free
before either is waited for; a failure lets go of what was mapped."""

from __future__ import annotations

from typing import Any

import pytest

from aka_core.evaluation import timing
from aka_core.evaluation.failures import FailureKind, JudgeFailure


class FakeArena:
    def __init__(self, side: str, events: list[str]):
        self.side, self.events = side, events
        self.bytes = bytearray(1 << 12)

    def close(self) -> None:
        self.events.append(f"{self.side} unmapped")


class FakeReader:
    def __init__(self, side: str):
        self.region = None

    def close(self) -> None:
        pass


class FakeRunner:
    def __init__(self, dead: bool = False):
        self.dead = dead


class FakeJudge:
    def __init__(self, events: list[str], fail_answer: str | None = None,
                 dead: tuple[str, ...] = ()):
        self.events, self.fail_answer = events, fail_answer
        self.runners = {side: FakeRunner(side in dead) for side in ("baseline", "candidate")}
        self.sent: dict[str, dict[str, Any]] = {}

    def _send(self, side: str, op: str, phase: str, **fields: Any) -> None:
        self.events.append(f"{side} {op} sent")
        self.sent[side] = fields

    def _answer(self, side: str, op: str, phase: str) -> dict[str, Any]:
        self.events.append(f"{side} {op} answered")
        if side == self.fail_answer:
            raise JudgeFailure(FailureKind.PROTOCOL, f"{side}: its reply to {op} names no arena")
        return {"ok": True, "arena_fd": f"arena-{side}"}


def patched_events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Timing's arena mappings and output readers replaced by stand-ins that log to a list."""
    events: list[str] = []
    monkeypatch.setattr(timing, "map_runner_arena",
                        lambda judge, side, reply, size: FakeArena(side, events))
    monkeypatch.setattr(timing, "OutputReader", FakeReader)
    return events


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return patched_events(monkeypatch)


def plans() -> list[timing.SlotPlan]:
    layout = {"x": {"offset": 0, "dtype": "float32", "shape": [4], "strides": [1]}}
    return [timing.SlotPlan("baseline", layout, 256, 3, 512),
            timing.SlotPlan("candidate", layout, 256, 5, 512)]


def test_both_runners_allocate_before_either_answer_is_read(events: list[str]) -> None:
    judge: Any = FakeJudge(events)
    slots = timing.open_slots(judge, plans())
    assert events == ["baseline setup sent", "candidate setup sent",
                      "baseline setup answered", "candidate setup answered"]
    # What each runner is asked for: its own count of slots; room for audited outputs on the
    # baseline's side only.
    base, cand = judge.sent["baseline"], judge.sent["candidate"]
    assert len(base["slots"]) == 3 and len(cand["slots"]) == 5
    ctrl = timing.CTRL_BYTES
    assert base["out"] == [ctrl + 3 * 256, timing.AUDITS_PER_BLOCK * 512]
    assert base["nbytes"] == ctrl + 3 * 256 + timing.AUDITS_PER_BLOCK * 512
    assert cand["out"] is None and cand["nbytes"] == ctrl + 5 * 256
    assert [s["x"]["offset"] for s in cand["slots"]] == [ctrl + j * 256 for j in range(5)]
    assert slots["baseline"].out_each == 512 and slots["candidate"].out_each == 0


def test_a_failed_answer_lets_go_of_the_slots_already_mapped(events: list[str]) -> None:
    judge: Any = FakeJudge(events, fail_answer="candidate")
    with pytest.raises(JudgeFailure, match="names no arena"):
        timing.open_slots(judge, plans())
    assert events[-1] == "baseline unmapped"


def test_release_unmaps_first_then_frees_both_at_once(events: list[str]) -> None:
    judge: Any = FakeJudge(events)
    slots = timing.open_slots(judge, plans())
    events.clear()
    timing.release_slots(judge, slots)
    assert events == ["baseline unmapped", "candidate unmapped", "baseline release sent",
                      "candidate release sent", "baseline release answered",
                      "candidate release answered"]


def test_release_asks_nothing_of_a_runner_that_is_gone(events: list[str]) -> None:
    judge: Any = FakeJudge(events, dead=("candidate",))
    slots = timing.open_slots(judge, plans())
    events.clear()
    timing.release_slots(judge, slots)
    assert "candidate release sent" not in events and "candidate unmapped" in events
    assert "baseline release answered" in events


# --------------------------------------------------------------- the untimed calls' arenas


class TensorArena(FakeArena):
    def __init__(self, side: str, events: list[str]):
        import torch

        super().__init__(side, events)
        self.bytes = torch.zeros(1 << 12, dtype=torch.uint8)


@pytest.fixture
def side_ios(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any], list[str]]:
    """Both sides' untimed-call arenas on a judge that says it is on a GPU, with CPU tensors
    standing in for the mapped memory (the runners' answers logged, nothing waits)."""
    import torch

    from aka_core.evaluation import judge as judge_module

    events: list[str] = []
    monkeypatch.setattr(judge_module, "map_runner_arena",
                        lambda judge, side, reply, size: TensorArena(side, events))
    monkeypatch.setattr(judge_module, "OutputReader", FakeReader)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("synchronized"))

    def slot_layout(inputs: Any, start: int) -> Any:  # a GPU's layout of the CPU tensors
        layout, offset = {}, start
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                layout[name] = {"offset": offset, "dtype": str(value.dtype).split(".")[1],
                                "shape": list(value.shape)}
                offset += -(-value.numel() * value.element_size() // 256) * 256
            else:
                layout[name] = {"value": value}
        return layout, offset

    monkeypatch.setattr(judge_module, "slot_layout", slot_layout)
    judge: Any = FakeJudge(events)
    judge.device = "cuda"
    ios = [judge_module.SideIO(judge, side) for side in ("baseline", "candidate")]
    return judge, ios, events


def test_both_arenas_for_untimed_calls_are_set_up_at_once(side_ios: Any) -> None:
    import torch

    from aka_core.evaluation.judge import load_inputs

    judge, ios, events = side_ios
    inputs = {"x": torch.arange(8, dtype=torch.float32), "n": 8}
    fields = load_inputs(ios, inputs, out_bytes=64)
    assert events == ["baseline setup sent", "candidate setup sent", "baseline setup answered",
                      "candidate setup answered", "synchronized"]
    assert fields == {"baseline": {"slot": 0}, "candidate": {"slot": 0}}
    # Room for the copies of its outputs on the baseline's side only.
    base, cand = judge.sent["baseline"], judge.sent["candidate"]
    assert base["out"] is not None and base["nbytes"] == cand["nbytes"] + 64
    assert cand["out"] is None
    for io in ios:
        assert torch.equal(io.views["x"], inputs["x"]), f"{io.side}'s arena holds the inputs"


def test_inputs_of_the_same_shapes_reuse_the_arenas(side_ios: Any) -> None:
    import torch

    from aka_core.evaluation.judge import load_inputs

    _, ios, events = side_ios
    load_inputs(ios, {"x": torch.zeros(8)}, out_bytes=64)
    events.clear()
    again = {"x": torch.full((8,), 3.0)}
    load_inputs(ios[1:], again, out_bytes=64)  # the candidate's repeat: no new arena
    assert events == ["synchronized"]
    assert torch.equal(ios[1].views["x"], again["x"])
    load_inputs(ios, {"x": torch.zeros(16)}, out_bytes=128)  # new shapes: both set up anew
    assert events[1:] == ["baseline unmapped", "baseline setup sent", "candidate unmapped",
                          "candidate setup sent", "baseline setup answered",
                          "candidate setup answered", "synchronized"]


def test_a_failed_setup_of_the_baseline_is_reported_before_the_candidates_is_read(
        side_ios: Any) -> None:
    import torch

    from aka_core.evaluation.judge import load_inputs

    judge, ios, events = side_ios
    judge.fail_answer = "baseline"
    with pytest.raises(JudgeFailure, match="baseline: its reply to setup"):
        load_inputs(ios, {"x": torch.zeros(8)}, out_bytes=64)
    assert "candidate setup answered" not in events
