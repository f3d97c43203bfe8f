"""The speed_of_light scorer: the contract, the gap it measures, and what it cannot score."""

from __future__ import annotations

import pytest
from aka_scorer_sol import aka_register_scorers

from aka_core.plugin import CaseTimes, EvaluationSummary
from aka_core.testing import ScorerContract

make = aka_register_scorers()[0].make
"""The scorer as a run builds it: options typed through the record's options class."""


class TestSpeedOfLightContract(ScorerContract):
    record = aka_register_scorers()[0]


def timed(*cases: tuple[float, float, float | None]) -> EvaluationSummary:
    times = tuple(CaseTimes(case=f"c{i}", baseline_ms=b, candidate_ms=c, speed_of_light_ms=sol)
                  for i, (b, c, sol) in enumerate(cases))
    speedup = cases[0][0] / cases[0][1]
    return EvaluationSummary(accepted=True, performance_measured=True, speedup=speedup,
                             cases=times)


def test_the_share_of_the_gap_closed_mean_over_cases() -> None:
    outcome = make({}).score(timed((1.0, 0.6, 0.2), (2.0, 2.0, 1.0)))
    assert outcome.eligible and outcome.score == pytest.approx((0.5 + 0.0) / 2)
    assert outcome.details["per_case"] == pytest.approx({"c0": 0.5, "c1": 0.0})


def test_clipped_to_the_unit_interval() -> None:
    assert make({}).score(timed((1.0, 2.0, 0.5))).score == 0.0  # slower
    assert make({}).score(timed((1.0, 0.4, 0.5))).score == 1.0  # below the bound


def test_what_it_cannot_score_is_ineligible_with_a_reason() -> None:
    no_cost = make({}).score(timed((1.0, 0.5, None)))
    assert (no_cost.score, no_cost.eligible) == (0.0, False) and "declares no cost" in no_cost.reason
    at_bound = make({}).score(timed((1.0, 0.5, 1.0)))
    assert not at_bound.eligible and "already at the bound" in at_bound.reason


def test_the_lifecycle_hands_it_the_cases() -> None:
    from aka_core.testing import case_times

    record = {"performance": {"cases": [
        {"case": "a", "baseline_median_ms": 1.0, "candidate_median_ms": 0.5,
         "speed_of_light_ms": 0.25},
        {"case": "b", "baseline_median_ms": 2.0, "candidate_median_ms": 1.0},
        {"case": "bad", "baseline_median_ms": float("nan"), "candidate_median_ms": 1.0}]}}
    assert case_times(record) == (CaseTimes(case="a", baseline_ms=1.0, candidate_ms=0.5,
                                            speed_of_light_ms=0.25),
                                  CaseTimes(case="b", baseline_ms=2.0, candidate_ms=1.0))
