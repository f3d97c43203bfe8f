"""Statistics of paired timings: medians, distribution-free CIs and a bootstrap over cases.

A case's speedup is the median of per-pair ratios baseline/candidate (each pair timed back to back
on the same inputs): drift in clocks or temperature cancels within a pair, which makes it far
steadier than a ratio of two separately taken medians (docs/measurement.md). The run's speedup is
the geometric mean over cases, with a percentile-bootstrap 95% CI that resamples pairs per case.
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


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_speedup_ci(
    cases: Sequence[tuple[Sequence[float], Sequence[float]]],
    replicates: int = 1000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Geometric mean of per-case speedups with a percentile-bootstrap 95% CI."""
    per_case_logs = [log_ratios(b, c) for b, c in cases]
    point = math.exp(sum(median(lr) for lr in per_case_logs) / len(per_case_logs))
    rng = random.Random(seed)
    estimates = []
    for _ in range(replicates):
        total = 0.0
        for logs in per_case_logs:
            sample = rng.choices(logs, k=len(logs))
            total += median(sample)
        estimates.append(total / len(per_case_logs))
    estimates.sort()
    lo = estimates[int(0.025 * (replicates - 1))]
    hi = estimates[math.ceil(0.975 * (replicates - 1))]
    return point, math.exp(lo), math.exp(hi)
