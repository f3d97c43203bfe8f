"""The fast_p scorer: the contract, its values, its options."""

from __future__ import annotations

import pytest
from aka_scorer_fastp import FastPOptions, aka_register_scorers

from aka_core.plugin import EvaluationSummary
from aka_core.testing import ScorerContract

make = aka_register_scorers()[0].make
"""The scorer as a run builds it: options typed through the record's options class."""


class TestFastPContract(ScorerContract):
    record = aka_register_scorers()[0]


class TestConservativeFastPContract(ScorerContract):
    record = aka_register_scorers()[0]
    options = {"p": 1.5, "use_ci_lower_bound": True}


def measured(speedup: float, ci: tuple[float, float] | None = None) -> EvaluationSummary:
    return EvaluationSummary(accepted=True, performance_measured=True, speedup=speedup,
                             speedup_ci95=ci)


@pytest.mark.parametrize(("p", "speedup", "score"), [(1.0, 1.01, 1.0), (1.0, 1.0, 0.0),
                                                     (0.0, 0.3, 1.0), (2.0, 1.9, 0.0),
                                                     (2.0, 2.5, 1.0)])
def test_values(p: float, speedup: float, score: float) -> None:
    assert make({"p": p}).score(measured(speedup)).score == score


def test_the_ci_lower_bound_must_clear_p() -> None:
    scorer = make({"p": 1.0, "use_ci_lower_bound": True})
    assert scorer.score(measured(1.05, (0.98, 1.12))).score == 0.0
    assert scorer.score(measured(1.05, (1.02, 1.08))).score == 1.0


@pytest.mark.parametrize("p", [-1, float("nan"), float("inf"), True])
def test_p_must_be_finite_and_not_negative(p: object) -> None:
    with pytest.raises(ValueError, match="p must be"):
        FastPOptions(p=p)  # type: ignore[arg-type]  # the schema refuses these first
