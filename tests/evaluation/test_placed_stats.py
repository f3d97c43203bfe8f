"""A case's pairs rotate over placements (each side's slots and graphs at memory of their own):
where a call's buffers lie moved an H100 baseline by up to 7%, and pairs within one placement
agree to 0.1%. The statistics must weigh placements alike, show their spread in the CI, and not
let pairs on the same placements narrow it."""

from __future__ import annotations

import math
import random

import pytest

from aka_core.evaluation import stats


def placed(offsets: list[float], per: int, noise: float = 0.001, seed: int = 0
           ) -> tuple[list[float], list[float], list[int]]:
    """Pairs in rounds over ``len(offsets)`` placements: candidate 1 ms, the baseline 2 ms times
    its placement's factor, with a little noise per pair."""
    rng = random.Random(seed)
    baseline, candidate, where = [], [], []
    for _ in range(per):
        for p, offset in enumerate(offsets):
            baseline.append(2.0 * math.exp(offset + rng.gauss(0, noise)))
            candidate.append(1.0)
            where.append(p)
    return baseline, candidate, where


def test_each_placement_weighs_the_same_and_the_ci_spans_them() -> None:
    # Two placements read 2x, one 2.2x: the pairs' median would say 2x and a CI of +-0.1%.
    b, c, where = placed([0.0, 0.0, math.log(1.1)], per=3)
    s, lo, hi = stats.placed_speedup(b, c, where)
    assert s == pytest.approx(2.0 * 1.1 ** (1 / 3), rel=2e-3)
    assert lo <= 2.0 * 0.999 and hi >= 2.2 * 0.999
    assert stats.paired_speedup(b, c)[0] == pytest.approx(2.0, rel=2e-3)  # the pairs' median


def test_one_placement_is_the_paired_speedup() -> None:
    b, c, where = placed([0.01], per=7)
    assert stats.placed_speedup(b, c, where) == stats.paired_speedup(b, c)
    assert stats.placed_speedup(b, c) == stats.paired_speedup(b, c)
    assert stats.within_ci_halfwidth(b, c, where) == stats.relative_ci_halfwidth(b, c)


def test_pairs_stop_when_what_they_can_narrow_is_narrow() -> None:
    # Placements 5% apart, pairs within each 0.1%: more pairs cannot narrow the spread between
    # placements, so the stop rule looks at the spread within them.
    b, c, where = placed([0.0, 0.05, -0.03], per=2)
    assert stats.relative_ci_halfwidth(b, c) > 0.02
    assert stats.within_ci_halfwidth(b, c, where) < 0.005
    noisy = placed([0.0, 0.05, -0.03], per=4, noise=0.03)
    assert stats.within_ci_halfwidth(*noisy) > 0.01


def test_the_task_ci_widens_with_the_spread_between_placements() -> None:
    quiet = [placed([0.0, 0.001, -0.001], per=2, seed=k) for k in range(4)]
    loud = [placed([0.0, 0.03, -0.03], per=2, seed=k) for k in range(4)]
    s_quiet, lo_q, hi_q = stats.geomean_speedup_ci(quiet)
    s_loud, lo_l, hi_l = stats.geomean_speedup_ci(loud)
    assert s_quiet == pytest.approx(2.0, rel=2e-3) and s_loud == pytest.approx(2.0, rel=5e-3)
    assert (hi_l - lo_l) > 5 * (hi_q - lo_q)
    assert lo_l < 2.0 * 0.985 and hi_l > 2.0 * 1.015


def test_the_task_ci_covers_placement_effects_about_95_percent_of_the_time() -> None:
    # Each evaluation draws 3 placements per case for 4 cases, the placement effect 2% (sd).
    # Timed on one placement per case (as before placements), the bootstrap over pairs cannot
    # see the effect at all.
    rng = random.Random(1)
    trials, covered, one_placement_covered = 300, 0, 0
    for trial in range(trials):
        cases = [placed([rng.gauss(0, 0.02) for _ in range(3)], per=2, seed=trial * 10 + k)
                 for k in range(4)]
        _, lo, hi = stats.geomean_speedup_ci(cases)
        covered += lo <= 2.0 <= hi
        single = [placed([rng.gauss(0, 0.02)], per=6, seed=trial * 10 + k)[:2] for k in range(4)]
        _, lo, hi = stats.geomean_speedup_ci(single, replicates=200)
        one_placement_covered += lo <= 2.0 <= hi
    assert covered / trials >= 0.92
    assert one_placement_covered / trials < 0.5


def test_without_placements_the_bootstrap_is_as_it_was() -> None:
    cases = [placed([0.0], per=9, noise=0.01, seed=k)[:2] for k in range(3)]
    marked = [(b, c, [0] * len(b)) for b, c in cases]
    assert stats.geomean_speedup_ci(cases) == stats.geomean_speedup_ci(marked)


def test_t_quantiles() -> None:
    assert stats.t975(1) == pytest.approx(12.706)
    assert stats.t975(2.7) == pytest.approx(4.303)  # fewer degrees of freedom: wider
    assert stats.t975(1000) == pytest.approx(1.96, abs=0.01)


def test_a_case_ci_is_never_narrower_than_what_moves_it_between_runs() -> None:
    b, c, where = placed([0.0, 0.0005, -0.0005], per=3, noise=0.0002)
    s, lo, hi = stats.placed_speedup(b, c, where)
    assert hi / lo < 1.003  # what the evaluation sees: +-0.1%
    s_f, lo_f, hi_f = stats.placed_speedup(b, c, where, between_runs=math.log(1.003))
    assert s_f == s
    assert lo_f == pytest.approx(s / 1.003 ** 1.96) and hi_f == pytest.approx(s * 1.003 ** 1.96)
    # A CI already wider than the floor is left as it is.
    wide = placed([0.0, 0.03, -0.03], per=3)
    assert stats.placed_speedup(*wide, between_runs=math.log(1.003)) == stats.placed_speedup(*wide)


@pytest.mark.parametrize("placements", [1, 3])
def test_the_task_ci_covers_what_moves_cases_between_evaluations(placements: int) -> None:
    # Each evaluation's cases are off by a draw of 0.5% that nothing inside it shows (its
    # placements agree); pairs agree to 0.05%. Without the between-runs term the CI covers the
    # truth (2.0) in few evaluations; with it, in about 95%.
    rng = random.Random(11)
    sd = math.log(1.005)
    covered = {0.0: 0, sd: 0}
    trials = 300
    for trial in range(trials):
        cases = []
        for _ in range(4):
            shift = rng.gauss(0, sd)
            offsets = [shift + rng.gauss(0, 0.0003) for _ in range(placements)]
            b, c, where = placed(offsets, per=6 // placements + 1, noise=0.0005, seed=trial)
            cases.append((b, c, where if placements > 1 else None))
        for term in covered:
            _, lo, hi = stats.geomean_speedup_ci(cases, replicates=200, between_runs=term)
            covered[term] += lo <= 2.0 <= hi
    assert covered[0.0] / trials < 0.6
    assert 0.9 <= covered[sd] / trials <= 0.995
