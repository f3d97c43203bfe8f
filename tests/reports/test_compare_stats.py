"""``aka compare``'s statistics on runs that carry the judge's timing samples: a deliberately
slower side is found slower with a CI and a p-value; a side against itself is not."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from aka_core.cli import main
from aka_core.commands.compare import compare_runs, comparison_as_dict, render_comparison
from aka_core.commands.compare_stats import fast_p, wilcoxon

from .conftest import make_result

TASKS = [f"triton2triton/t{i}" for i in range(8)]


def sampled_result(task_id: str, speedup: float, seed: int, *, noise: float = 0.01,
                   correct: bool = True, cost: float | None = None):
    """A result whose evaluation holds per-pair samples of two cases, as the judge stores them."""
    import math
    import statistics

    rng = random.Random(seed)
    cases = []
    for case in ("visible", "held_out_0"):
        base = [1.0 * (1 + rng.gauss(0, noise)) for _ in range(10)]
        cand = [b / speedup * (1 + rng.gauss(0, noise)) for b in base]
        measured = statistics.median(b / c for b, c in zip(base, cand, strict=True))
        cases.append({"case": case, "held_out": case != "visible", "pairs": 10,
                      "speedup": measured, "samples_ms": {"baseline": base, "candidate": cand}})
    speedup = math.exp(statistics.fmean(math.log(c["speedup"]) for c in cases))
    evaluation = {"performance": {"measured": True, "speedup": speedup,
                                  "ci95": [speedup * 0.99, speedup * 1.01], "cases": cases}}
    return make_result(task_id, speedup=speedup, ci=(speedup * 0.99, speedup * 1.01),
                       correct=correct, evaluation=evaluation, cost_usd=cost)


@pytest.fixture
def fast_and_slow(build_run) -> tuple[Path, Path]:
    """Side B replays a source whose kernels are 10% slower on every task."""
    speeds = [1.3, 2.6, 1.15, 3.0, 1.7, 1.2, 2.1, 1.4]
    a = build_run("replay_fast", [sampled_result(t, s, i, cost=0.5)
                                  for i, (t, s) in enumerate(zip(TASKS, speeds, strict=True))])
    b = build_run("replay_slow", [sampled_result(t, s / 1.1, 100 + i, cost=0.4)
                                  for i, (t, s) in enumerate(zip(TASKS, speeds, strict=True))])
    return a, b


def test_a_slower_replay_source_is_found_slower_with_a_ci_and_a_p_value(fast_and_slow) -> None:
    a, b = fast_and_slow
    c = compare_runs(a, b)
    for task in c.tasks:
        assert task.sampled_ratio is not None and task.verdict == "faster", task
        lo, hi = task.sampled_ratio.ci95
        assert 1.0 < lo < 1.1 < hi < 1.2
        assert task.sampled_ratio.samples == 40
    speed = c.aggregates.speed
    assert speed.estimate == pytest.approx(1.1, rel=0.01)
    assert 1.05 < speed.ci95[0] < speed.estimate < speed.ci95[1] < 1.15
    assert speed.p_value == pytest.approx(2 / 2**8)  # 8 of 8 tasks the same sign: exact test
    assert c.aggregates.fast_p_a["fast_2"] == pytest.approx(3 / 8)
    assert c.aggregates.fast_p_b["fast_2"] == pytest.approx(2 / 8)
    assert c.aggregates.cost_a["cost_per_task_usd"] == pytest.approx(0.5)
    text = render_comparison(c)
    assert "geomean A/B:      1.10" in text and "p=0.00781" in text
    assert "(A/B CIs from timing samples on 8 of 8 tasks" in text
    data = comparison_as_dict(c)
    assert data["aggregates"]["speed"]["p_value"] == pytest.approx(0.0078125)
    json.dumps(data)


def test_a_side_against_itself_is_within_noise(fast_and_slow) -> None:
    a, _ = fast_and_slow
    c = compare_runs(a, a)
    assert {t.verdict for t in c.tasks} == {"within noise"}
    for task in c.tasks:
        lo, hi = task.sampled_ratio.ci95
        assert lo < 1.0 < hi
    assert c.aggregates.speed.p_value == 1.0
    assert c.aggregates.score.estimate == 0.0 and c.aggregates.score.p_value == 1.0


def test_results_without_samples_keep_the_interval_verdict(build_run) -> None:
    a = build_run("a", [make_result(TASKS[0], speedup=2.0, ci=(1.9, 2.1))])
    b = build_run("b", [make_result(TASKS[0], speedup=1.5, ci=(1.4, 1.6))])
    c = compare_runs(a, b)
    assert c.tasks[0].sampled_ratio is None and c.tasks[0].verdict == "faster"
    assert c.aggregates.speed.p_value is None  # one task: no test


def test_fast_p_counts_correct_and_faster_only() -> None:
    runs = [[make_result("x/a", speedup=2.5)], [make_result("x/b", speedup=3.0, correct=False)],
            [make_result("x/c", speedup=0.9)], [make_result("x/d", speedup=None)]]
    got = fast_p(runs)
    assert got == {"fast_0": 0.75, "fast_1": 0.25, "fast_1.25": 0.25, "fast_1.5": 0.25,
                   "fast_2": 0.25}


def test_wilcoxon_edge_cases() -> None:
    import numpy as np

    assert wilcoxon(np.array([0.3])) is None
    assert wilcoxon(np.zeros(5)) == 1.0
    assert wilcoxon(np.array([0.1, 0.2, -0.05, 0.3, 0.15])) > 0.05


def test_the_command_prints_the_verdict(fast_and_slow, capsys) -> None:
    a, b = fast_and_slow
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "8 faster, 0 slower" in out and "p=0.00781" in out


def test_placements_are_weighed_alike_and_resampled_first() -> None:
    """A case whose pairs ran on placements 2x and 2.2x (four pairs on the first, two on the
    second): the judge's speedup is the mean of the placements' medians, not the pairs' median,
    and the CI spans the placements (a bootstrap over its pairs alone would sit near 2x)."""
    import math

    import numpy as np

    from aka_core.commands.compare_stats import case_point, case_ratios, resampled_speedups

    where = [0, 1, 0, 0, 1, 0]
    base = [2.0 if p == 0 else 2.2 for p in where]
    case = {"case": "c", "speedup": 2.0, "pair_placements": where,
            "samples_ms": {"baseline": base, "candidate": [1.0] * 6}}
    result = make_result("triton2triton/t0", speedup=2.0, ci=(1.9, 2.1), correct=True,
                         evaluation={"performance": {"measured": True, "speedup": 2.0,
                                                     "ci95": [1.9, 2.1], "cases": [case]}})
    groups = case_ratios(result)
    assert groups is not None and [g.tolist() for g in groups[0]] == [[2.0] * 4, [2.2] * 2]
    assert math.exp(case_point(groups[0])) == pytest.approx(math.sqrt(2.0 * 2.2))
    draws = resampled_speedups([groups], np.random.default_rng(0), n=2000)
    assert draws.min() == pytest.approx(2.0) and draws.max() == pytest.approx(2.2)
    unplaced = {**case, "pair_placements": None}
    plain = make_result("triton2triton/t0", speedup=2.0, ci=(1.9, 2.1), correct=True,
                        evaluation={"performance": {"measured": True, "speedup": 2.0,
                                                    "ci95": [1.9, 2.1], "cases": [unplaced]}})
    assert [len(g) for g in case_ratios(plain)[0]] == [6]  # as before placements


def test_one_run_a_side_carries_the_judges_between_runs_term() -> None:
    """Two single evaluations whose pairs agree to the last digit: their ratio's CI is as wide
    as what moves a case between evaluations (the records' ``between_runs``), not zero; records
    from before the term compare as they did."""
    import math

    import numpy as np

    from aka_core.commands.compare_stats import task_ratio

    def single(speedup: float, between_runs: float | None):
        case = {"case": "c", "speedup": speedup,
                "samples_ms": {"baseline": [speedup] * 8, "candidate": [1.0] * 8}}
        perf = {"measured": True, "speedup": speedup, "ci95": [speedup, speedup],
                "cases": [case], **({"between_runs": between_runs} if between_runs else {})}
        return make_result("triton2triton/t0", speedup=speedup, ci=(speedup, speedup),
                           correct=True, evaluation={"performance": perf})

    term = math.log(1.003)
    ratio = task_ratio([single(2.0, term)], [single(2.0, term)], np.random.default_rng(0))
    assert ratio is not None and ratio.ratio == pytest.approx(1.0)
    # Two independent draws of 0.3% each: the ratio's 95% CI is about +-1.96 * 0.42%.
    assert ratio.ci95[0] == pytest.approx(1 - 0.0083, abs=0.0015)
    assert ratio.ci95[1] == pytest.approx(1 + 0.0083, abs=0.0015)
    before = task_ratio([single(2.0, None)], [single(2.0, None)], np.random.default_rng(0))
    assert before is not None and before.ci95 == pytest.approx((1.0, 1.0))
