"""Comparing runs: speedup verdicts against noise, only-in-one tasks, repeated runs."""

from __future__ import annotations

import json
import statistics

import pytest

from aka_core.commands.compare import compare_runs, comparison_as_dict, render_comparison


@pytest.fixture
def two_runs(build_run, build_result):
    a = build_run("run_a", [
        build_result("k/faster", speedup=2.0, ci=(1.9, 2.1)),
        build_result("k/noise", speedup=1.2, ci=(1.0, 1.4)),
        build_result("k/slower", speedup=1.1, ci=(1.05, 1.15)),
        build_result("k/broke", correct=False),
        build_result("k/only_a", speedup=1.3, ci=(1.2, 1.4)),
    ])
    b = build_run("run_b", [
        build_result("k/faster", speedup=1.5, ci=(1.4, 1.6)),
        build_result("k/noise", speedup=1.3, ci=(1.1, 1.5)),
        build_result("k/slower", speedup=1.6, ci=(1.5, 1.7)),
        build_result("k/broke", speedup=1.2, ci=(1.1, 1.3)),
        build_result("k/only_b", speedup=1.3, ci=(1.2, 1.4)),
    ])
    return a, b


def test_verdicts_respect_confidence_intervals(two_runs) -> None:
    c = compare_runs(*two_runs)
    by_id = {t.task_id: t for t in c.tasks}
    assert [t.task_id for t in c.tasks] == ["k/broke", "k/faster", "k/noise", "k/slower"]
    assert by_id["k/faster"].verdict == "faster"
    assert by_id["k/faster"].speedup_ratio == pytest.approx(2.0 / 1.5)
    assert by_id["k/faster"].speedup_ratio_ci95 == pytest.approx((1.9 / 1.6, 2.1 / 1.4))
    assert by_id["k/noise"].verdict == "within noise"
    assert by_id["k/slower"].verdict == "slower"
    assert by_id["k/broke"].verdict == "n/a"
    assert by_id["k/broke"].correctness == "B better"
    assert by_id["k/faster"].correctness == "same"
    assert c.only_a == ("k/only_a",) and c.only_b == ("k/only_b",)


def test_aggregates_count_wins_and_losses(two_runs) -> None:
    agg = compare_runs(*two_runs).aggregates
    assert (agg.common_tasks, agg.only_a, agg.only_b) == (4, 1, 1)
    # A scores higher on faster; lower on noise (1.2 < 1.3), slower and broke
    assert (agg.wins, agg.losses, agg.ties) == (1, 3, 0)
    assert (agg.faster, agg.slower, agg.within_noise, agg.no_speedup) == (1, 1, 1, 1)
    assert agg.correctness_b_better == 1 and agg.correctness_a_better == 0
    expected_a = statistics.fmean([0, 1 - 1.05 / 2.0, 1 - 1.05 / 1.2, 1 - 1.05 / 1.1])
    assert agg.mean_score_a == pytest.approx(expected_a)


def test_same_run_on_both_sides_ties_within_noise(two_runs) -> None:
    a, _ = two_runs
    agg = compare_runs(a, a).aggregates
    assert agg.ties == agg.common_tasks == 5
    assert agg.faster == agg.slower == 0


def test_repeated_runs_report_spread(build_run, build_result) -> None:
    a1 = build_run("a1", [build_result("k/x", speedup=1.5, ci=(1.45, 1.55))])
    a2 = build_run("a2", [build_result("k/x", speedup=3.0, ci=(2.9, 3.1))])
    b1 = build_run("b1", [build_result("k/x", speedup=1.2, ci=(1.1, 1.3))])
    b2 = build_run("b2", [build_result("k/x", correct=False)])
    c = compare_runs([a1, a2], [b1, b2])
    task = c.tasks[0]
    scores_a = [1 - 1.05 / 1.5, 1 - 1.05 / 3.0]
    assert task.a.runs == 2 and task.a.scores == pytest.approx(tuple(scores_a))
    assert task.a.mean_score == pytest.approx(statistics.fmean(scores_a))
    assert task.a.stdev_score == pytest.approx(statistics.stdev(scores_a))
    assert (task.a.min_score, task.a.max_score) == pytest.approx(tuple(scores_a))
    # the interval over repeats spans every run's CI
    assert task.a.speedup == pytest.approx((1.5 * 3.0) ** 0.5)
    assert task.a.speedup_ci95 == (1.45, 3.1)
    assert task.b.speedup_runs == 1 and task.b.correct_runs == 1
    assert task.correctness == "A better"
    assert task.verdict == "faster"
    assert c.a.label == "a1, a2"
    assert render_comparison(c).startswith("A: a1, a2 (2 runs)\nB: b1, b2 (2 runs)\n")


def test_a_run_listed_twice_counts_once(two_runs) -> None:
    a, b = two_runs
    c = compare_runs([a, a], b)
    assert c.a.run_dirs == (a,) and all(t.a.runs == 1 for t in c.tasks)


def test_render_and_json(two_runs) -> None:
    c = compare_runs(*two_runs)
    text = render_comparison(c)
    assert text.startswith("A: run_a (1 run)\nB: run_b (1 run)\n")
    assert "only in A (1): k/only_a" in text and "only in B (1): k/only_b" in text
    assert "1 wins, 3 losses, 0 ties" in text
    faster_line = next(line for line in text.splitlines() if line.startswith("k/faster"))
    assert "faster" in faster_line and "2.000x [1.900, 2.100]" in faster_line
    data = comparison_as_dict(c)
    json.dumps(data, allow_nan=False)
    assert data["only_a"] == ["k/only_a"]
    assert data["tasks"][1]["verdict"] == "faster"
    assert data["tasks"][0]["a"]["correct_rate"] == 0.0
    assert data["a"]["run_dirs"] == [str(two_runs[0])]
