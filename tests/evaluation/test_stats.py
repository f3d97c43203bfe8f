"""Statistics of paired timings on synthetic samples whose true speedup is known."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from aka_core.evaluation import stats


def paired_samples(ratio: float, n: int, *, noise: float = 0.05, seed: int = 0,
                   base_ms: float = 1.0) -> tuple[list[float], list[float]]:
    """``n`` pairs whose per-pair ratio baseline/candidate is ``ratio`` times log-normal noise;
    a drift common to both sides of a pair (clock, temperature) cancels in the ratio."""
    rng = random.Random(seed)
    baseline, candidate = [], []
    for i in range(n):
        drift = 1 + 0.3 * math.sin(i / 7)
        b = base_ms * drift * math.exp(rng.gauss(0, noise))
        baseline.append(b)
        candidate.append(b / ratio * math.exp(rng.gauss(0, noise)))
    return baseline, candidate


@pytest.mark.parametrize("ratio", [0.5, 1.0, 1.3, 4.0])
def test_paired_speedup_recovers_a_known_ratio(ratio: float) -> None:
    baseline, candidate = paired_samples(ratio, 400)
    speedup, lo, hi = stats.paired_speedup(baseline, candidate)

    assert speedup == pytest.approx(ratio, rel=0.02)
    assert lo <= ratio <= hi
    assert lo < speedup < hi


def test_paired_speedup_of_an_exact_ratio_is_exact() -> None:
    baseline = [1.0, 2.0, 3.0, 5.0, 8.0]
    speedup, lo, hi = stats.paired_speedup(baseline, [b / 2 for b in baseline])
    assert (speedup, lo, hi) == pytest.approx((2.0, 2.0, 2.0))


@pytest.mark.parametrize("n", [1, 2, 5, 20, 101, 1000])
def test_median_ci_contains_the_median(n: int) -> None:
    rng = random.Random(n)
    values = [rng.lognormvariate(0, 1) for _ in range(n)]
    lo, hi = stats.median_ci(values)

    assert lo <= statistics.median(values) <= hi
    assert lo in values and hi in values, "bounds are order statistics"


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    trials, covered = 400, 0
    for _ in range(trials):
        values = [rng.gauss(10.0, 1.0) for _ in range(41)]  # true median 10
        lo, hi = stats.median_ci(values)
        covered += lo <= 10.0 <= hi
    assert 0.90 <= covered / trials <= 0.995


def test_median_ci_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        stats.median_ci([])


def test_geomean_speedup_ci_brackets_the_truth() -> None:
    # Per-case true ratios 2, 8 and 1: the geometric mean is 16 ** (1/3) = 2.52.
    truth = (2.0 * 8.0 * 1.0) ** (1 / 3)
    trials, covered = 60, 0
    for trial in range(trials):
        cases = [paired_samples(r, 60, noise=0.08, seed=100 * trial + i)
                 for i, r in enumerate((2.0, 8.0, 1.0))]
        point, lo, hi = stats.geomean_speedup_ci(cases, replicates=300, seed=trial)
        assert point == pytest.approx(truth, rel=0.03)
        assert lo < point < hi
        assert (hi - lo) / point < 0.1, "a CI this wide says nothing"
        covered += lo <= truth <= hi
    assert covered / trials >= 0.85, f"the 95% CI held the truth in {covered}/{trials} trials"


def test_geomean_speedup_ci_is_reproducible_for_a_seed() -> None:
    cases = [paired_samples(1.5, 30, seed=1), paired_samples(0.8, 30, seed=2)]
    assert stats.geomean_speedup_ci(cases, replicates=200, seed=3) == (
        stats.geomean_speedup_ci(cases, replicates=200, seed=3))


def test_relative_ci_halfwidth_shrinks_with_more_pairs() -> None:
    widths = []
    for n in (20, 80, 320, 1280):
        baseline, candidate = paired_samples(1.2, n, noise=0.05, seed=11)
        widths.append(stats.relative_ci_halfwidth(baseline, candidate))

    assert widths == sorted(widths, reverse=True), widths
    assert widths[-1] < widths[0] / 4, "quadrupling n twice should roughly quarter the width"
    assert widths[-1] < 0.005, "1280 pairs at 5% noise reach the 0.5% target"


def test_relative_ci_halfwidth_grows_with_noise() -> None:
    quiet = stats.relative_ci_halfwidth(*paired_samples(1.2, 100, noise=0.01, seed=5))
    noisy = stats.relative_ci_halfwidth(*paired_samples(1.2, 100, noise=0.10, seed=5))
    assert quiet < noisy


def _coverage(n: int, outside: int) -> float:
    """The exact coverage of [x_(outside+1), x_(n-outside)] for the median of ``n`` values."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(outside + 1)) / 2**n


@pytest.mark.parametrize("n", [*range(6, 61), 100, 200, 500])
def test_median_ci_is_the_narrowest_with_95_percent_coverage(n: int) -> None:
    outside = stats.median_ci_rank(n)
    assert _coverage(n, outside) >= 0.95
    assert _coverage(n, outside + 1) < 0.95, "one more value could be left out of each end"


def test_one_stray_pair_among_ten_leaves_the_ci_narrow() -> None:
    # Ten pairs at a ratio of 2.000 +- 0.1%, one of them 8% off (a block slowed by another
    # process starting on the GPU): the CI leaves it out and stays within +-0.5%.
    rng = random.Random(3)
    baseline = [1.0 * (1 + rng.uniform(-1e-3, 1e-3)) for _ in range(10)]
    candidate = [0.5 for _ in range(10)]
    baseline[4] *= 1.08
    assert stats.relative_ci_halfwidth(baseline, candidate) < 0.005
    assert stats.median_ci_rank(5) == 0  # under 6 pairs: the minimum and maximum
