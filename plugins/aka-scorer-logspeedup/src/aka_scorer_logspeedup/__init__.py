"""The ``log_speedup`` scorer: ``ln(speedup) / ln(cap)``, clipped to [0, 1].

For an accepted, measured candidate. Equal ratios earn equal increments (2x to 4x counts as much
as 1x to 2x), unlike ``speedup``'s ``1 - k/s`` which saturates; ``cap`` (default 10) is the speedup
that earns 1. A candidate no faster than the baseline earns 0, as one that was not accepted does.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from aka_core.plugin import EvaluationSummary, ScoreOutcome, ScorerSpec, hookimpl, scoring

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "cap": {"type": "number", "exclusiveMinimum": 1, "default": 10.0,
                "description": "The speedup that earns the full reward of 1."},
    },
}


def _check_cap(_instance: object, _attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value <= 1:
        raise ValueError(f"scorer option cap must be a finite number > 1, got {value!r}")


@attrs.frozen(kw_only=True)
class LogSpeedupOptions:
    """``scorer.options``; the default is CONFIG_SCHEMA's."""

    cap: float = attrs.field(default=10.0, validator=_check_cap)


@attrs.frozen
class LogSpeedupScorer:
    options: LogSpeedupOptions = attrs.field(factory=LogSpeedupOptions)

    def score(self, evaluation: EvaluationSummary) -> ScoreOutcome:
        refused = scoring.gate(evaluation, cap=self.options.cap)
        if refused is not None:
            return refused
        speedup = evaluation.speedup
        if not scoring.positive_number(speedup):
            return scoring.ineligible(f"speedup is not a finite positive number (got {speedup!r})",
                                      cap=self.options.cap)
        assert speedup is not None
        reward = min(1.0, max(0.0, math.log(speedup) / math.log(self.options.cap)))
        return ScoreOutcome(score=reward, eligible=True,
                            reason=f"ln({speedup:.4g}) / ln({self.options.cap:g})",
                            details={"cap": self.options.cap, "speedup": speedup})


def make_scorer(options: LogSpeedupOptions) -> LogSpeedupScorer:
    return LogSpeedupScorer(options)


@hookimpl
def aka_register_scorers() -> list[ScorerSpec]:
    return [ScorerSpec(name="log_speedup", factory=make_scorer, config_schema=CONFIG_SCHEMA,
                       options_class=LogSpeedupOptions,
                       description="ln(speedup) / ln(cap) in [0, 1] for accepted candidates "
                                   "(cap 10)")]
