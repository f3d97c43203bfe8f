"""A kit for scorer plugins: the gate every scorer applies first, and the checks they share.

    outcome = scoring.gate(evaluation)      # not accepted, or not measured: 0, ineligible, why
    if outcome is not None:
        return outcome
    if not scoring.positive_number(evaluation.speedup):
        return scoring.ineligible(f"speedup is not a finite positive number ...")
"""

from __future__ import annotations

import math
from typing import Any

from aka_core.models import EvaluationSummary, ScoreOutcome


def ineligible(reason: str, **details: Any) -> ScoreOutcome:
    """Score 0, not eligible, and why (``ScorerContract`` requires the reason)."""
    return ScoreOutcome(score=0.0, eligible=False, reason=reason, details=details)


def gate(evaluation: EvaluationSummary, **details: Any) -> ScoreOutcome | None:
    """The ineligible outcome of a candidate that was not accepted or whose performance was not
    measured, or None when the scorer may score it."""
    if not evaluation.accepted:
        return ineligible("candidate not accepted", **details)
    if not evaluation.performance_measured:
        return ineligible("performance not measured on this device", **details)
    return None


def positive_number(value: object) -> bool:
    """A finite number above 0 (not a bool)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
