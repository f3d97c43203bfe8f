"""The parent's wall-clock bound on what a worker claims: forged timers must not pass.

``runner.wall_clock_check`` compares a worker's performance record with the block markers the
parent timestamped with its own clock. These tests feed it synthetic records and markers, as a
candidate that forged its device timings would produce them.
"""

from __future__ import annotations

from typing import Any

from aka_core.evaluation import runner


def perf_case(name: str, speedup: float, *, baseline_ms: float, pairs: int = 20,
              graph_launches: int | None = None) -> dict[str, Any]:
    """A case of a performance record claiming ``speedup`` (per-call samples in ms)."""
    case: dict[str, Any] = {
        "case": name, "speedup": speedup,
        "samples_ms": {"baseline": [baseline_ms] * pairs,
                       "candidate": [baseline_ms / speedup] * pairs},
    }
    if graph_launches is not None:
        case["graph_launches"] = graph_launches
    return case


def watch(timing_wall_s: float, blocks: dict[str, dict[str, tuple[float, int]]]) -> Any:
    """A parent watch: the timing phase's wall time and, per case and side, a block of
    ``calls`` calls that took ``seconds`` on the parent's clock."""
    w = runner._Watch()
    w.phase_times = {"startup": 1.0, "compile": 0.5, "correctness": 0.5, "timing": timing_wall_s}
    now = 100.0
    for case, sides in blocks.items():
        for side, (seconds, calls) in sides.items():
            w.blocks.append((now, {"event": "wall_block", "marker": "start", "case": case,
                                   "side": side, "calls": calls}))
            now += seconds
            w.blocks.append((now, {"event": "wall_block", "marker": "end", "case": case,
                                   "side": side, "calls": calls}))
            now += 0.01
    return w


def test_claim_consistent_with_the_wall_clock_passes() -> None:
    perf = {"cases": [perf_case("big", 2.0, baseline_ms=1.0)]}
    # 100 calls: baseline 1 ms each, candidate 0.5 ms each, as claimed.
    check = runner.wall_clock_check(perf, watch(5.0, {"big": {"baseline": (0.100, 100),
                                                              "candidate": (0.050, 100)}}))

    assert check["passed"] is True, check.get("reason")
    (entry,) = check["cases"]
    assert entry["conclusive"] is True
    assert abs(entry["wall_speedup"] - 2.0) < 1e-6


def test_claim_within_the_slack_passes() -> None:
    # Blocks run without L2 flushes, so the wall ratio may trail the claim a little.
    perf = {"cases": [perf_case("big", 2.0 * runner.WALL_SLACK * 0.99, baseline_ms=1.0)]}
    check = runner.wall_clock_check(perf, watch(5.0, {"big": {"baseline": (0.100, 100),
                                                              "candidate": (0.050, 100)}}))
    assert check["passed"] is True, check.get("reason")


def test_inflated_claimed_speedup_fails_naming_the_case() -> None:
    perf = {"cases": [perf_case("ok", 1.5, baseline_ms=1.0),
                      perf_case("forged", 4.0, baseline_ms=1.0)]}
    check = runner.wall_clock_check(perf, watch(10.0, {
        "ok": {"baseline": (0.150, 100), "candidate": (0.100, 100)},
        # The parent saw both sides take the same time: no speedup at all.
        "forged": {"baseline": (0.100, 100), "candidate": (0.100, 100)},
    }))

    assert check["passed"] is False
    assert "case forged: claimed speedup 4.000 but the wall clock shows 1.000" in check["reason"]
    assert "case ok" not in check["reason"]


def test_launch_bound_blocks_are_inconclusive_and_do_not_reject() -> None:
    # 10 us per call is below WALL_MIN_MS_PER_CALL: launch overhead, not the kernel.
    per_call_s = runner.WALL_MIN_MS_PER_CALL / 5 / 1000
    perf = {"cases": [perf_case("tiny", 4.0, baseline_ms=0.004)]}
    check = runner.wall_clock_check(perf, watch(5.0, {"tiny": {
        "baseline": (per_call_s * 200, 200), "candidate": (per_call_s * 200, 200)}}))

    assert check["passed"] is True, check.get("reason")
    (entry,) = check["cases"]
    assert entry["conclusive"] is False


def test_claimed_device_time_above_the_phases_wall_time_fails() -> None:
    # 2 x 200 pairs of 10 ms claimed = 4 s of device time in a timing phase of 1 s.
    perf = {"cases": [perf_case("slow", 1.0, baseline_ms=10.0, pairs=200)]}
    check = runner.wall_clock_check(perf, watch(1.0, {}))

    assert check["passed"] is False
    assert check["claimed_device_ms"] == 4000.0
    assert "claims 4000.0 ms of device time in a timing phase that lasted 1000.0 ms" in (
        check["reason"])


def test_graph_replays_count_every_launch_of_claimed_device_time() -> None:
    # Per-call samples of 0.01 ms over 100 pairs look like 2 ms, but each sample stands for
    # 20 graph launches: 40 ms of device time cannot fit in a 30 ms timing phase.
    perf = {"cases": [perf_case("graph", 1.0, baseline_ms=0.01, pairs=100, graph_launches=20)]}
    check = runner.wall_clock_check(perf, watch(0.030, {}))
    assert check["passed"] is False
    assert check["claimed_device_ms"] == 40.0



def test_each_side_keeps_its_fastest_block() -> None:
    # A busy parent read the candidate's first end marker 30 ms late; its second block is clean.
    perf = {"cases": [perf_case("big", 1.0, baseline_ms=0.06)]}
    w = runner._Watch()
    w.phase_times = {"timing": 5.0}
    now = 100.0
    for block, delays in enumerate(({"baseline": 0.0, "candidate": 0.030},
                                    {"baseline": 0.0, "candidate": 0.0})):
        for side in ("baseline", "candidate"):
            w.blocks.append((now, {"marker": "start", "case": "big", "side": side, "calls": 2000,
                                   "block": block}))
            now += 0.120 + delays[side]
            w.blocks.append((now, {"marker": "end", "case": "big", "side": side, "calls": 2000,
                                   "block": block}))
    check = runner.wall_clock_check(perf, w)
    assert check["passed"] is True, check.get("reason")
    (entry,) = check["cases"]
    assert abs(entry["wall_speedup"] - 1.0) < 1e-6


def test_graph_cases_compare_replays_not_launch_bound_calls() -> None:
    # Timed as CUDA graphs of 20 calls: 3.3 us vs 20 us per call (a fused kernel against seven
    # eager launches). The blocks replay the same graphs: 66 us vs 400 us per replay.
    perf = {"cases": [perf_case("tiny", 6.1, baseline_ms=0.020, graph_launches=20)]}
    w = runner._Watch()
    w.phase_times = {"timing": 5.0}
    now = 100.0
    for side, seconds in (("baseline", 0.400 * 250 / 1000), ("candidate", 0.066 * 250 / 1000)):
        w.blocks.append((now, {"marker": "start", "case": "tiny", "side": side, "calls": 250,
                               "block": 0, "per_call": 20}))
        now += seconds
        w.blocks.append((now, {"marker": "end", "case": "tiny", "side": side, "calls": 250,
                               "block": 0, "per_call": 20}))
    check = runner.wall_clock_check(perf, w)
    assert check["passed"] is True, check.get("reason")
    (entry,) = check["cases"]
    assert entry["conclusive"] is True and entry["graph_replays_of"] == 20
    assert abs(entry["wall_ms_per_call"]["baseline"] - 0.020) < 1e-9
    # A forged claim on the same replays is still caught.
    forged = {"cases": [perf_case("tiny", 20.0, baseline_ms=0.020, graph_launches=20)]}
    assert runner.wall_clock_check(forged, w)["passed"] is False
