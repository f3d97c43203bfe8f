"""The speedup scorer: the contract, the reward's values, and its options."""

from __future__ import annotations

import math

import pytest
from aka_scorer_speedup import CONFIG_SCHEMA, aka_register_scorers, make_scorer
from jsonschema import Draft202012Validator

from aka_core.plugin import EvaluationSummary
from aka_core.testing import ScorerContract

make = aka_register_scorers()[0].make
"""The scorer as a run builds it: options typed through the record's options class."""


class TestSpeedupContract(ScorerContract):
    record = aka_register_scorers()[0]


class TestConservativeSpeedupContract(ScorerContract):
    record = aka_register_scorers()[0]
    options = {"k": 1.2, "use_ci_lower_bound": True}


def accepted(speedup: float | None, ci: tuple[float, float] | None = None) -> EvaluationSummary:
    return EvaluationSummary(accepted=True, performance_measured=True, speedup=speedup,
                             speedup_ci95=ci)


def test_registered_through_the_host(register_plugin) -> None:
    import aka_scorer_speedup

    host = register_plugin(aka_scorer_speedup)
    assert host.scorer("speedup").factory is make_scorer


@pytest.mark.parametrize(("speedup", "reward"), [(2.1, 0.5), (1.05, 0.0), (1.0, 0.0),
                                                  (0.5, 0.0), (4.2, 0.75)])
def test_default_reward(speedup: float, reward: float) -> None:
    outcome = make({}).score(accepted(speedup))
    assert outcome.score == pytest.approx(reward, abs=1e-12)
    assert outcome.eligible


def test_k_is_configurable() -> None:
    assert make({"k": 2.0}).score(accepted(4.0)).score == pytest.approx(0.5)
    assert make({"k": 2.0}).score(accepted(1.9)).score == 0.0


@pytest.mark.parametrize("k", [0, -1.0, math.inf, math.nan])
def test_k_must_be_finite_positive(k: float) -> None:
    with pytest.raises(ValueError, match="k must be"):
        make({"k": k})


def test_unknown_option_is_rejected() -> None:
    assert list(Draft202012Validator(CONFIG_SCHEMA).iter_errors({"kk": 1}))
    with pytest.raises(Exception, match="kk"):
        make({"kk": 1})


def test_ci_lower_bound_scores_the_conservative_end() -> None:
    scorer = make({"use_ci_lower_bound": True})
    assert scorer.score(accepted(3.0, ci=(2.1, 4.0))).score == pytest.approx(0.5)
    outcome = scorer.score(accepted(3.0, ci=None))
    assert (outcome.score, outcome.eligible) == (0.0, False)
    assert "confidence interval" in outcome.reason


@pytest.mark.parametrize(
    ("evaluation", "reason"),
    [
        (EvaluationSummary(accepted=False, performance_measured=True, speedup=3.0),
         "candidate not accepted"),
        (EvaluationSummary(accepted=True, performance_measured=False, speedup=3.0),
         "performance not measured on this device"),
        (accepted(math.nan), "not a finite positive number"),
        (accepted(None), "not a finite positive number"),
    ],
)
def test_ineligible_says_why(evaluation: EvaluationSummary, reason: str) -> None:
    outcome = make({}).score(evaluation)
    assert (outcome.score, outcome.eligible) == (0.0, False)
    assert reason in outcome.reason
