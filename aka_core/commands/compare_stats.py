"""The statistics of ``aka compare``: is a difference between two runs real?

Per task, the ratio of the two sides' speedups with a 95% CI from the evaluator's stored timing
samples: each side's speedup is re-derived the way the judge derives it (per case the median of
per-pair ratios, or where the case's pairs ran on several placements the mean of each placement's
median; the geometric mean over cases) on bootstrap resamples of its pairs (of its placements
first, and of its runs, when a side is several repeated runs), and the ratio's CI is the percentile
interval of the resampled ratios. Over the tasks both sides measured: the geometric mean of those
ratios with a bootstrap CI over tasks and a Wilcoxon signed-rank test of their logarithms; the mean
score difference with a bootstrap CI and a Wilcoxon test of the per-task differences; fast_p
(KernelBench's metric: the share of tasks whose candidate is correct and more than p times faster
than the baseline) at several p; and the agents' cost per task and per unit of score. Resampling
uses a fixed seed: the same runs give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

from aka_core.evaluation import stats
from aka_core.models import TaskResult

BOOTSTRAP = 4000
SEED = 20261201
FAST_P = (0.0, 1.0, 1.25, 1.5, 2.0)


def case_ratios(result: TaskResult) -> list[list[Any]] | None:
    """Per case, the per-pair speedups (baseline / candidate) the judge measured, one array per
    placement the pairs ran on (one array where the record names none); None when the result
    carries no timing samples."""
    import numpy as np

    perf = result.evaluation.performance
    cases = []
    for case in (perf.cases or []) if perf is not None else []:
        samples = case.samples_ms
        base, cand = (samples.baseline, samples.candidate) if samples else (None, None)
        if not base or not cand or len(base) != len(cand):
            return None
        b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
        if not (np.isfinite(b).all() and np.isfinite(c).all()) or (c <= 0).any() or (b <= 0).any():
            return None
        where = case.pair_placements
        grouped = stats.by_placement((b / c).tolist(),
                                     where if where is not None and len(where) == b.size else None)
        cases.append([np.asarray(g) for g in grouped])
    return cases or None


def case_point(groups: Sequence[Any]) -> float:
    """A case's log speedup as the judge derives it: the mean of its placements' log medians."""
    import numpy as np

    return float(np.mean([math.log(float(np.median(g))) for g in groups]))


def resampled_speedups(runs: Sequence[list[list[Any]]], rng: Any, n: int = BOOTSTRAP,
                       between_runs: float = 0.0) -> Any:
    """``n`` bootstrap replicates of a side's speedup: a run drawn at random (repeats), then per
    case its placements drawn with replacement (where there are several) and each drawn one's
    pairs, the mean of their log medians per case, the geometric mean over cases. Where the side
    has one run, each case also draws a normal term of ``between_runs`` (the judge's, in logs):
    one evaluation cannot show what moves the next, and a drawn run can only where there are
    several."""
    import numpy as np

    out = np.empty(n)
    pick = rng.integers(0, len(runs), size=n)
    for index, run in enumerate(runs):
        rows = np.flatnonzero(pick == index)
        if not rows.size:
            continue
        logs = np.zeros(rows.size)
        for groups in run:
            count = len(groups)
            # Each drawn slot's own resample of its placement's pairs: (rows, slots) medians.
            medians = np.stack([np.median(g[rng.integers(0, g.size, size=(rows.size, count,
                                                                          g.size))], axis=2)
                                for g in groups])
            drawn = (rng.integers(0, count, size=(rows.size, count)) if count > 1
                     else np.zeros((rows.size, 1), dtype=int))
            chosen = np.take_along_axis(medians.transpose(1, 2, 0), drawn[..., None], axis=2)
            logs += np.log(chosen[..., 0]).mean(axis=1)
            if len(runs) == 1 and between_runs > 0:
                logs += rng.normal(0.0, between_runs, size=rows.size)
        out[rows] = np.exp(logs / len(run))
    return out


def judged_between_runs(results: Sequence[TaskResult]) -> float:
    """The largest ``between_runs`` the side's records carry (0 for records from before it)."""
    values = [r.evaluation.performance.between_runs for r in results
              if r.evaluation.performance is not None]
    return max((float(v) for v in values if v is not None and math.isfinite(v) and v > 0),
               default=0.0)


@attrs.frozen(kw_only=True)
class RatioCI:
    ratio: float
    ci95: tuple[float, float]
    samples: int
    """Timed pairs behind the estimate, both sides together."""


def task_ratio(a: Sequence[TaskResult], b: Sequence[TaskResult], rng: Any) -> RatioCI | None:
    """Speedup of A over B on one task with a 95% CI from the stored samples, or None."""
    import numpy as np

    runs_a = [r for r in (case_ratios(x) for x in a) if r]
    runs_b = [r for r in (case_ratios(x) for x in b) if r]
    if not runs_a or not runs_b:
        return None

    def point(runs: list[list[list[Any]]]) -> float:
        return math.exp(float(np.mean([np.mean([case_point(groups) for groups in run])
                                       for run in runs])))

    ratios = (resampled_speedups(runs_a, rng, between_runs=judged_between_runs(a))
              / resampled_speedups(runs_b, rng, between_runs=judged_between_runs(b)))
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    pairs = sum(g.size for run in runs_a + runs_b for groups in run for g in groups)
    return RatioCI(ratio=point(runs_a) / point(runs_b), ci95=(float(lo), float(hi)), samples=pairs)


@attrs.frozen(kw_only=True)
class PairedSummary:
    """One statistic over tasks, A relative to B."""

    estimate: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    """Two-sided Wilcoxon signed-rank test of the per-task values (None: fewer than 2 tasks)."""
    tasks: int


def geomean_ratio(ratios: Sequence[float], rng: Any) -> PairedSummary:
    import numpy as np

    logs = np.log(np.asarray([r for r in ratios if r and r > 0 and math.isfinite(r)]))
    if not logs.size:
        return PairedSummary(estimate=None, ci95=None, p_value=None, tasks=0)
    boot = logs[rng.integers(0, logs.size, size=(BOOTSTRAP, logs.size))].mean(axis=1)
    lo, hi = np.exp(np.percentile(boot, [2.5, 97.5]))
    return PairedSummary(estimate=float(np.exp(logs.mean())), ci95=(float(lo), float(hi)),
                         p_value=wilcoxon(logs), tasks=int(logs.size))


def mean_difference(differences: Sequence[float], rng: Any) -> PairedSummary:
    import numpy as np

    values = np.asarray([d for d in differences if math.isfinite(d)], dtype=float)
    if not values.size:
        return PairedSummary(estimate=None, ci95=None, p_value=None, tasks=0)
    boot = values[rng.integers(0, values.size, size=(BOOTSTRAP, values.size))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return PairedSummary(estimate=float(values.mean()), ci95=(float(lo), float(hi)),
                         p_value=wilcoxon(values), tasks=int(values.size))


def wilcoxon(values: Any) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value that the values' median is 0 (zeros dropped)."""
    import numpy as np
    from scipy import stats

    nonzero = values[np.abs(values) > 1e-12]
    if values.size < 2:
        return None
    if not nonzero.size:
        return 1.0
    return float(stats.wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided").pvalue)


def fast_p(results: Sequence[Sequence[TaskResult]], thresholds: Sequence[float] = FAST_P
           ) -> dict[str, float | None]:
    """Per threshold p, the mean over tasks of the share of a task's runs whose candidate is
    correct and more than p times faster than the baseline (p = 0: correct)."""
    if not results:
        return {f"fast_{p:g}": None for p in thresholds}
    out: dict[str, float | None] = {}
    for p in thresholds:
        shares = []
        for runs in results:
            hits = [r.pass_correctness is True and (p == 0 or (r.speedup_ratio or 0) > p)
                    for r in runs]
            shares.append(sum(hits) / len(hits) if hits else 0.0)
        out[f"fast_{p:g}"] = sum(shares) / len(shares)
    return out


def costs(results: Sequence[Sequence[TaskResult]]) -> dict[str, float | None]:
    """The agents' cost: mean per task-run, and per unit of score (None when unknown)."""
    known, total_score = [], 0.0
    for runs in results:
        for r in runs:
            usage = r.agent_execution.usage if r.agent_execution else None
            cost = getattr(usage, "cost_usd", None) if usage is not None else None
            if cost is not None and math.isfinite(cost):
                known.append(cost)
                total_score += r.score or 0.0
    if not known:
        return {"cost_per_task_usd": None, "cost_per_score_usd": None, "runs_with_cost": 0}
    return {"cost_per_task_usd": sum(known) / len(known),
            "cost_per_score_usd": sum(known) / total_score if total_score > 0 else None,
            "runs_with_cost": len(known)}


def generator() -> Any:
    import numpy as np

    return np.random.default_rng(SEED)
