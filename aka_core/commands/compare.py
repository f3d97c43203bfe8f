"""Comparing runs task by task: ``aka compare RUN_A RUN_B``.

Each side is one run or several repeated runs of the same setting (stochastic agents). Per task
and side we report the score's mean and spread over runs, and the speedup with a 95% interval.
With one run the interval is the evaluator's CI; with several it is the envelope of every run's
CI and point estimate, so it covers both measurement noise and the agent's run-to-run spread.
Two speedups whose intervals overlap are "within noise"; otherwise A is "faster" or "slower".
Deltas and ratios read "A relative to B": a positive score delta means A scored higher.

Where both sides' results carry the evaluator's timing samples, the ratio of their speedups gets
a CI of its own from those samples, and the verdict follows it (``compare_stats``); over tasks,
the geometric mean of the ratios and the mean score difference come with bootstrap CIs and
Wilcoxon signed-rank p-values, with fast_p and the agents' costs per side.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from aka_core.commands import compare_stats
from aka_core.commands.compare_stats import PairedSummary, RatioCI
from aka_core.models import TaskResult
from aka_core.run.reports import finite, format_table, geometric_mean, speedup_ci95
from aka_core.run.results import RunRecord, load_run

SCORE_TIE_EPSILON = 1e-9

Verdict = Literal["faster", "slower", "within noise", "n/a"]
CorrectnessChange = Literal["same", "A better", "B better", "n/a"]
RunLike = Path | str | RunRecord


@attrs.frozen(kw_only=True)
class SideStats:
    """One task on one side, over that side's runs that have a result for it."""

    runs: int
    statuses: tuple[str, ...]
    scores: tuple[float, ...]
    mean_score: float
    min_score: float
    max_score: float
    stdev_score: float | None
    """Sample standard deviation over runs; ``None`` with a single run."""
    speedup: float | None
    """The speedup (geometric mean over runs that measured one)."""
    speedup_ci95: tuple[float, float] | None
    speedup_runs: int
    correct_runs: int
    """Runs whose candidate passed correctness."""

    @property
    def correct_rate(self) -> float:
        return self.correct_runs / self.runs if self.runs else 0.0


@attrs.frozen(kw_only=True)
class TaskComparison:
    task_id: str
    a: SideStats
    b: SideStats
    score_delta: float
    """Mean score of A minus mean score of B."""
    speedup_ratio: float | None
    """Speedup of A divided by speedup of B (> 1: A's candidate is faster)."""
    speedup_ratio_ci95: tuple[float, float] | None
    verdict: Verdict
    correctness: CorrectnessChange
    sampled_ratio: RatioCI | None = None
    """A/B from both sides' stored timing samples (bootstrap CI); the verdict follows it."""


@attrs.frozen(kw_only=True)
class SideInfo:
    label: str
    run_dirs: tuple[Path, ...]


@attrs.frozen(kw_only=True)
class ComparisonAggregates:
    common_tasks: int
    only_a: int
    only_b: int
    mean_score_a: float | None
    """Mean over tasks in both (per task, the mean over A's runs)."""
    mean_score_b: float | None
    mean_score_a_all: float | None
    """Mean over every task A has a result for."""
    mean_score_b_all: float | None
    wins: int
    """Tasks where A's mean score is higher."""
    losses: int
    ties: int
    faster: int
    slower: int
    within_noise: int
    no_speedup: int
    correctness_a_better: int
    correctness_b_better: int
    geomean_speedup_ratio: float | None
    """Geometric mean of A/B speedup ratios over tasks where both sides measured one."""
    speed: PairedSummary | None = None
    """The geometric mean of A/B ratios with a bootstrap CI over tasks and a Wilcoxon p-value."""
    score: PairedSummary | None = None
    """Mean score of A minus B over tasks in both, with a bootstrap CI and a Wilcoxon p-value."""
    fast_p_a: dict[str, float | None] = attrs.Factory(dict)
    fast_p_b: dict[str, float | None] = attrs.Factory(dict)
    cost_a: dict[str, float | None] = attrs.Factory(dict)
    cost_b: dict[str, float | None] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class Comparison:
    a: SideInfo
    b: SideInfo
    tasks: tuple[TaskComparison, ...]
    """Tasks with a result on both sides, sorted by id."""
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    aggregates: ComparisonAggregates


# --------------------------------------------------------------------------- building


def _records(side: RunLike | Sequence[RunLike]) -> list[RunRecord]:
    items: Sequence[RunLike] = [side] if isinstance(side, Path | str | RunRecord) else side
    if not items:
        raise ValueError("each side of a comparison needs at least one run")
    records: dict[Path, RunRecord] = {}
    for item in items:
        record = item if isinstance(item, RunRecord) else load_run(Path(item))
        # the same run listed twice would count as two repeats and understate the spread
        records.setdefault(record.run_dir.resolve(), record)
    return list(records.values())


def _side_info(records: Sequence[RunRecord]) -> SideInfo:
    names = [r.name for r in records]
    label = ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]}, ... {names[-1]}"
    return SideInfo(label=label, run_dirs=tuple(r.run_dir for r in records))


def _results_by_task(records: Sequence[RunRecord]) -> dict[str, list[TaskResult]]:
    by_task: dict[str, list[TaskResult]] = {}
    for record in records:
        for task_id, result in record.results.items():
            by_task.setdefault(task_id, []).append(result)
    return by_task


def side_stats(results: Sequence[TaskResult]) -> SideStats:
    """Score spread and combined speedup of one task over a side's runs."""
    scores = tuple(finite(r.score) or 0.0 for r in results)
    measured = [(s, speedup_ci95(r)) for r in results
                if (s := finite(r.speedup_ratio)) is not None and s > 0]
    speedup = geometric_mean(s for s, _ in measured)
    ci: tuple[float, float] | None = None
    if measured:
        if len(measured) == 1:
            ci = measured[0][1]
        else:
            lows = [min(s, c[0]) if c else s for s, c in measured]
            highs = [max(s, c[1]) if c else s for s, c in measured]
            ci = (min(lows), max(highs))
    return SideStats(
        runs=len(results),
        statuses=tuple(r.status for r in results),
        scores=scores,
        mean_score=statistics.fmean(scores),
        min_score=min(scores),
        max_score=max(scores),
        stdev_score=statistics.stdev(scores) if len(scores) > 1 else None,
        speedup=speedup,
        speedup_ci95=ci,
        speedup_runs=len(measured),
        correct_runs=sum(r.pass_correctness is True for r in results),
    )


def _interval(stats: SideStats) -> tuple[float, float] | None:
    if stats.speedup is None:
        return None
    return stats.speedup_ci95 or (stats.speedup, stats.speedup)


def compare_task(task_id: str, a: SideStats, b: SideStats,
                 sampled: RatioCI | None = None) -> TaskComparison:
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    verdict: Verdict = "n/a"
    ia, ib = _interval(a), _interval(b)
    if sampled is not None and a.speedup is not None and b.speedup is not None:
        ratio, ratio_ci = a.speedup / b.speedup, sampled.ci95
        verdict = ("faster" if sampled.ci95[0] > 1 else "slower" if sampled.ci95[1] < 1
                   else "within noise")
    elif a.speedup is not None and b.speedup is not None and ia and ib:
        ratio = a.speedup / b.speedup
        if ib[0] > 0:
            ratio_ci = (ia[0] / ib[1], ia[1] / ib[0])
        if ia[0] > ib[1]:
            verdict = "faster"
        elif ia[1] < ib[0]:
            verdict = "slower"
        else:
            verdict = "within noise"
    correctness: CorrectnessChange = "n/a"
    if a.runs and b.runs:
        if a.correct_rate > b.correct_rate:
            correctness = "A better"
        elif a.correct_rate < b.correct_rate:
            correctness = "B better"
        else:
            correctness = "same"
    return TaskComparison(task_id=task_id, a=a, b=b, score_delta=a.mean_score - b.mean_score,
                          speedup_ratio=ratio, speedup_ratio_ci95=ratio_ci, verdict=verdict,
                          correctness=correctness, sampled_ratio=sampled)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def compare_runs(run_a: RunLike | Sequence[RunLike],
                 run_b: RunLike | Sequence[RunLike]) -> Comparison:
    """Compare side A with side B task by task; each side is a run dir or a list of repeats."""
    records_a, records_b = _records(run_a), _records(run_b)
    by_a, by_b = _results_by_task(records_a), _results_by_task(records_b)
    stats_a = {t: side_stats(rs) for t, rs in by_a.items()}
    stats_b = {t: side_stats(rs) for t, rs in by_b.items()}
    common = sorted(stats_a.keys() & stats_b.keys())
    rng = compare_stats.generator()
    tasks = tuple(compare_task(t, stats_a[t], stats_b[t],
                               compare_stats.task_ratio(by_a[t], by_b[t], rng)) for t in common)
    ratios = [t.speedup_ratio for t in tasks if t.speedup_ratio is not None]
    aggregates = ComparisonAggregates(
        common_tasks=len(tasks),
        only_a=len(stats_a.keys() - stats_b.keys()),
        only_b=len(stats_b.keys() - stats_a.keys()),
        mean_score_a=_mean([t.a.mean_score for t in tasks]),
        mean_score_b=_mean([t.b.mean_score for t in tasks]),
        mean_score_a_all=_mean([s.mean_score for s in stats_a.values()]),
        mean_score_b_all=_mean([s.mean_score for s in stats_b.values()]),
        wins=sum(t.score_delta > SCORE_TIE_EPSILON for t in tasks),
        losses=sum(t.score_delta < -SCORE_TIE_EPSILON for t in tasks),
        ties=sum(abs(t.score_delta) <= SCORE_TIE_EPSILON for t in tasks),
        faster=sum(t.verdict == "faster" for t in tasks),
        slower=sum(t.verdict == "slower" for t in tasks),
        within_noise=sum(t.verdict == "within noise" for t in tasks),
        no_speedup=sum(t.verdict == "n/a" for t in tasks),
        correctness_a_better=sum(t.correctness == "A better" for t in tasks),
        correctness_b_better=sum(t.correctness == "B better" for t in tasks),
        geomean_speedup_ratio=geometric_mean(ratios),
        speed=compare_stats.geomean_ratio(ratios, rng) if ratios else None,
        score=compare_stats.mean_difference([t.score_delta for t in tasks], rng) if tasks else None,
        fast_p_a=compare_stats.fast_p([by_a[t] for t in common]),
        fast_p_b=compare_stats.fast_p([by_b[t] for t in common]),
        cost_a=compare_stats.costs([by_a[t] for t in common]),
        cost_b=compare_stats.costs([by_b[t] for t in common]),
    )
    return Comparison(
        a=_side_info(records_a),
        b=_side_info(records_b),
        tasks=tasks,
        only_a=tuple(sorted(stats_a.keys() - stats_b.keys())),
        only_b=tuple(sorted(stats_b.keys() - stats_a.keys())),
        aggregates=aggregates,
    )


# --------------------------------------------------------------------------- output


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return finite(value)  # NaN/inf are not JSON
    return value


def comparison_as_dict(c: Comparison) -> dict[str, Any]:
    """Plain data for ``aka compare --json`` (per-side stats include ``correct_rate``)."""
    data = _plain(attrs.asdict(c, recurse=True))
    for task, raw in zip(data["tasks"], c.tasks, strict=True):
        task["a"]["correct_rate"] = raw.a.correct_rate
        task["b"]["correct_rate"] = raw.b.correct_rate
    return data


def _fmt_score(stats: SideStats) -> str:
    text = f"{stats.mean_score:.3f}"
    if stats.runs > 1:
        sd = f"{stats.stdev_score:.3f}" if stats.stdev_score is not None else "-"
        text += f" ±{sd} [{stats.min_score:.3f}, {stats.max_score:.3f}]"
    return text


def _fmt_speedup(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "-"
    text = f"{value:.3f}x"
    if ci is not None:
        text += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
    return text


def _fmt_opt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def render_comparison(c: Comparison) -> str:
    """A readable fixed-width table of a comparison, then its aggregates."""
    headers = ["task", "score A", "score B", "delta", "speedup A [95% CI]",
               "speedup B [95% CI]", "A/B [95% CI]", "verdict", "correct A", "correct B"]
    body = [[
        t.task_id,
        _fmt_score(t.a),
        _fmt_score(t.b),
        f"{t.score_delta:+.3f}",
        _fmt_speedup(t.a.speedup, t.a.speedup_ci95),
        _fmt_speedup(t.b.speedup, t.b.speedup_ci95),
        _fmt_speedup(t.speedup_ratio, t.speedup_ratio_ci95).replace("x", "", 1)
        if t.speedup_ratio is not None else "-",
        t.verdict,
        f"{t.a.correct_runs}/{t.a.runs}",
        f"{t.b.correct_runs}/{t.b.runs}",
    ] for t in c.tasks]
    agg = c.aggregates
    lines = [
        f"A: {c.a.label} ({len(c.a.run_dirs)} run{'s' if len(c.a.run_dirs) != 1 else ''})",
        f"B: {c.b.label} ({len(c.b.run_dirs)} run{'s' if len(c.b.run_dirs) != 1 else ''})",
        "",
        *format_table(headers, body, right=(1, 2, 3, 6)),
        "",
    ]
    if c.only_a:
        lines.append(f"only in A ({len(c.only_a)}): {', '.join(c.only_a)}")
    if c.only_b:
        lines.append(f"only in B ({len(c.only_b)}): {', '.join(c.only_b)}")
    lines += [
        f"tasks in both:    {agg.common_tasks}",
        f"mean score:       A {_fmt_opt(agg.mean_score_a, '.4f')}"
        f"  B {_fmt_opt(agg.mean_score_b, '.4f')}  (tasks in both)",
        f"A vs B score:     {agg.wins} wins, {agg.losses} losses, {agg.ties} ties",
        f"A vs B speed:     {agg.faster} faster, {agg.slower} slower,"
        f" {agg.within_noise} within noise, {agg.no_speedup} not comparable",
        "geomean A/B:      " + (_fmt_summary(agg.speed, ".3f") if agg.speed
                                   else _fmt_opt(agg.geomean_speedup_ratio)),
        f"score A - B:      {_fmt_summary(agg.score, '+.4f') if agg.score else '-'}",
        f"correctness:      A better on {agg.correctness_a_better},"
        f" B better on {agg.correctness_b_better}",
        "fast_p:           " + "  ".join(
            f"{k} A {_fmt_opt(agg.fast_p_a.get(k), '.2f')} B {_fmt_opt(agg.fast_p_b.get(k), '.2f')}"
            for k in agg.fast_p_a),
    ]
    if agg.cost_a.get("runs_with_cost") or agg.cost_b.get("runs_with_cost"):
        lines.append(
            f"agent cost:       per task A ${_fmt_opt(agg.cost_a.get('cost_per_task_usd'), '.3f')}"
            f" B ${_fmt_opt(agg.cost_b.get('cost_per_task_usd'), '.3f')}; per unit of score"
            f" A ${_fmt_opt(agg.cost_a.get('cost_per_score_usd'), '.3f')}"
            f" B ${_fmt_opt(agg.cost_b.get('cost_per_score_usd'), '.3f')}")
    sampled = sum(t.sampled_ratio is not None for t in c.tasks)
    lines.append(f"                  (A/B CIs from timing samples on {sampled} of {len(c.tasks)} "
                 "tasks; p: two-sided Wilcoxon signed-rank over tasks)")
    return "\n".join(lines) + "\n"


def _fmt_summary(summary: PairedSummary, spec: str) -> str:
    if summary.estimate is None:
        return "-"
    text = format(summary.estimate, spec)
    if summary.ci95 is not None:
        text += f" [{format(summary.ci95[0], spec)}, {format(summary.ci95[1], spec)}]"
    if summary.p_value is not None:
        text += f"  p={summary.p_value:.3g}"
    return text + f"  ({summary.tasks} tasks)"
