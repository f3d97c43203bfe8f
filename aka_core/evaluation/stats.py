"""Statistics of paired timings: medians, distribution-free CIs and a bootstrap over cases.

A case's speedup is the median of per-pair ratios baseline/candidate (each pair timed back to back
on the same inputs): drift in clocks or temperature cancels within a pair, which makes it far
steadier than a ratio of two separately taken medians (docs/measurement.md). The run's speedup is
the geometric mean over cases, with a percentile-bootstrap 95% CI that resamples pairs per case.

Where a case's pairs ran on several *placements* (each side's calls on memory of their own per
placement: where a call's buffers lie moved a baseline by up to 7% on an H100, and nothing within
one placement shows it), the case's speedup is the mean over placements of each placement's
median ratio, its CI also spans the placements' medians, and the bootstrap resamples placements
before their pairs: pairs of one placement are not independent samples of where memory lies.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@functools.cache
def median_ci_rank(n: int) -> int:
    """How many of ``n`` sorted values the median's 95% CI leaves out on each side: the largest
    ``k`` with ``2 * P(B <= k - 1) <= 0.05`` for ``B ~ Binomial(n, 1/2)`` makes
    ``[x_(k), x_(n+1-k)]`` (1-based) a distribution-free interval of coverage at least 95%, and
    ``k - 1`` values lie outside each end. Exact integers, not the normal approximation: below
    ~20 pairs the approximation (with a rank of slack) kept whole extra values inside, so one
    stray pair in ten held a case's CI at its minimum and maximum. Under 6 values no interval
    reaches 95% (5 values: the minimum and maximum cover 93.75%); those are the bounds then."""
    total, cumulative, k = 1 << n, 0, 0
    while k < n and 40 * (cumulative + math.comb(n, k)) <= total:  # P(B <= k) <= 0.025
        cumulative += math.comb(n, k)
        k += 1
    return max(k - 1, 0)


def median_ci(values: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% CI of the median: order statistics by the exact binomial rank."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    outside = median_ci_rank(n)
    return ordered[outside], ordered[n - 1 - outside]


def log_ratios(baseline: Sequence[float], candidate: Sequence[float]) -> list[float]:
    return [math.log(b / c) for b, c in zip(baseline, candidate, strict=True)]


def paired_speedup(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[float, float, float]:
    """(speedup, ci_low, ci_high) of one case from its pairs."""
    logs = log_ratios(baseline, candidate)
    lo, hi = median_ci(logs)
    return math.exp(median(logs)), math.exp(lo), math.exp(hi)


def relative_ci_halfwidth(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Half the CI width of a case's speedup, relative to the speedup (0.005 = +-0.5%)."""
    s, lo, hi = paired_speedup(baseline, candidate)
    return (hi - lo) / 2 / s


def by_placement(values: Sequence[float], placements: Sequence[int] | None
                 ) -> list[list[float]]:
    """``values`` grouped by their placement, in the placements' order (one group where no
    placements are named)."""
    if placements is None:
        return [list(values)]
    groups: dict[int, list[float]] = {}
    for value, where in zip(values, placements, strict=True):
        groups.setdefault(where, []).append(value)
    return [groups[key] for key in sorted(groups)]


def placed_speedup(baseline: Sequence[float], candidate: Sequence[float],
                   placements: Sequence[int] | None = None, between_runs: float = 0.0
                   ) -> tuple[float, float, float]:
    """(speedup, ci_low, ci_high) of a case whose pairs ran on ``placements`` (one per pair).

    One placement: ``paired_speedup``. Several: the mean over placements of their median log
    ratios, so that each placement weighs the same; the CI is the pairs' distribution-free CI
    widened to every placement's median (where memory lies is sampled by a few placements only:
    more pairs on them would narrow a CI over pairs, not the spread between them). Either way
    never narrower than ``between_runs`` (a standard deviation in logs: what moves a case's
    speedup from one evaluation to the next that no evaluation sees in itself) allows."""
    logs = log_ratios(baseline, candidate)
    groups = by_placement(logs, placements)
    if len(groups) < 2:
        s, lo, hi = paired_speedup(baseline, candidate)
    else:
        medians = [median(g) for g in groups]
        pooled_lo, pooled_hi = median_ci(logs)
        s = math.exp(sum(medians) / len(medians))
        lo, hi = math.exp(min(pooled_lo, *medians)), math.exp(max(pooled_hi, *medians))
    floor = math.exp(1.96 * between_runs)
    return s, min(lo, s / floor), max(hi, s * floor)


def within_ci_halfwidth(baseline: Sequence[float], candidate: Sequence[float],
                        placements: Sequence[int] | None = None) -> float:
    """Half the CI width, relative, of what more pairs can still narrow: the pairs' spread
    around their own placement's median (all of it with one placement). The spread between
    placements is reported in the CI (``placed_speedup``), not chased with pairs that cannot
    narrow it."""
    groups = by_placement(log_ratios(baseline, candidate), placements)
    if len(groups) < 2:
        return relative_ci_halfwidth(baseline, candidate)
    residuals = [x - median(g) for g in groups for x in g]
    lo, hi = median_ci(residuals)
    return (math.exp(hi) - math.exp(lo)) / 2


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_speedup_ci(
    cases: Sequence[tuple[Sequence[float], Sequence[float]]
                    | tuple[Sequence[float], Sequence[float], Sequence[int] | None]],
    replicates: int = 1000,
    seed: int = 0,
    between_runs: float = 0.0,
) -> tuple[float, float, float]:
    """Geometric mean of per-case speedups with a 95% CI. A case may carry its pairs'
    placements (a third item): its estimate is then the mean of its placements' medians
    (``placed_speedup``). Without several placements in any case: a percentile bootstrap that
    resamples pairs per case. With them: ``placed_ci_halfwidth`` (a bootstrap over two or three
    placements per case reads half to two thirds of their variance). Either way each case
    carries ``between_runs`` besides (a standard deviation in logs, independent per case: what
    moves a case from one evaluation to the next that no evaluation sees in itself)."""
    per_case: list[list[list[float]]] = []
    for case in cases:
        placements = case[2] if len(case) > 2 else None  # type: ignore[misc]
        per_case.append(by_placement(log_ratios(case[0], case[1]), placements))
    point = sum(sum(median(g) for g in groups) / len(groups) for groups in per_case) / len(per_case)
    if any(len(groups) > 1 for groups in per_case):
        half = placed_ci_halfwidth(per_case, between_runs)
        return math.exp(point), math.exp(point - half), math.exp(point + half)
    rng = random.Random(seed)
    estimates = []
    for _ in range(replicates):
        total = 0.0
        for groups in per_case:
            total += median(rng.choices(groups[0], k=len(groups[0])))
            if between_runs > 0:
                total += rng.gauss(0.0, between_runs)
        estimates.append(total / len(per_case))
    estimates.sort()
    lo = estimates[int(0.025 * (replicates - 1))]
    hi = estimates[math.ceil(0.975 * (replicates - 1))]
    return math.exp(point), math.exp(lo), math.exp(hi)


# Student's t, two-sided 95%, by degrees of freedom (1-30; beyond, 1.96 + 2.4 / df).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: float) -> float:
    if df >= len(_T975):
        return 1.96 + 2.4 / df
    return _T975[max(int(df), 1) - 1]


def placed_ci_halfwidth(per_case: Sequence[Sequence[Sequence[float]]],
                        between_runs: float = 0.0) -> float:
    """Half the 95% CI (in logs) of the mean over cases of each case's mean placement median.

    Each case's variance is that of its placements' medians over their number (each placement
    a draw of where memory lies, its pairs' noise included), never less than its pairs' own
    distribution-free CI says, plus ``between_runs`` squared (a known term: no degrees of
    freedom of its own); the cases' variances add, and Student's t takes the degrees of
    freedom of them all (the placements' variance pooled over the cases: one case's two
    placements alone, one degree of freedom, would multiply the interval by 12.7)."""
    variances, dfs = [], []
    for groups in per_case:
        pooled = [x for g in groups for x in g]
        lo, hi = median_ci(pooled)
        of_pairs = ((hi - lo) / (2 * 1.96)) ** 2
        medians = [median(g) for g in groups]
        if len(medians) > 1:
            of_placements = statistics.variance(medians) / len(medians)
            if of_placements >= of_pairs:
                variances.append(of_placements)
                dfs.append(len(medians) - 1)
                continue
        variances.append(of_pairs)
        dfs.append(max(len(pooled) - 1, 1))
    measured = sum(variances)
    known = len(per_case) * between_runs ** 2
    if measured + known <= 0:
        return 0.0
    return math.sqrt(t975(sum(dfs)) ** 2 * measured + 1.96 ** 2 * known) / len(per_case)
