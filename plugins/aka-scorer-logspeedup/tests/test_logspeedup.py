"""The log_speedup scorer: the contract, its values, its option."""

from __future__ import annotations

import itertools
import math

import pytest
from aka_scorer_logspeedup import aka_register_scorers

from aka_core.plugin import EvaluationSummary
from aka_core.testing import ScorerContract

make = aka_register_scorers()[0].make
"""The scorer as a run builds it: options typed through the record's options class."""


class TestLogSpeedupContract(ScorerContract):
    record = aka_register_scorers()[0]


class TestSmallCapContract(ScorerContract):
    record = aka_register_scorers()[0]
    options = {"cap": 2.0}


def measured(speedup: float) -> EvaluationSummary:
    return EvaluationSummary(accepted=True, performance_measured=True, speedup=speedup)


@pytest.mark.parametrize(("speedup", "score"), [(1.0, 0.0), (0.5, 0.0), (10.0, 1.0),
                                                (100.0, 1.0), (math.sqrt(10), 0.5)])
def test_values(speedup: float, score: float) -> None:
    assert make({}).score(measured(speedup)).score == pytest.approx(score)


def test_equal_ratios_earn_equal_increments() -> None:
    scorer = make({"cap": 16.0})
    steps = [scorer.score(measured(s)).score for s in (1.0, 2.0, 4.0, 8.0)]
    assert [b - a for a, b in itertools.pairwise(steps)] == pytest.approx([0.25] * 3)


@pytest.mark.parametrize("cap", [1.0, 0.5, float("inf")])
def test_cap_must_exceed_one(cap: float) -> None:
    with pytest.raises(ValueError, match="cap must be"):
        make({"cap": cap})
