"""The ``fast_p`` scorer: KernelBench's fast_p as a per-task reward.

1.0 for a candidate that was accepted (correct, every gate passed), whose performance was
measured, and whose speedup is above ``p``; 0.0 otherwise. Averaged over tasks it is fast_p.
``use_ci_lower_bound`` compares the lower end of the speedup's 95% CI instead (a candidate
only counts when it is faster beyond the measurement's noise).
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
        "p": {"type": "number", "minimum": 0, "default": 1.0,
              "description": "The speedup a candidate must exceed to score 1 (0: correct is enough)."},
        "use_ci_lower_bound": {"type": "boolean", "default": False,
                               "description": "Compare the lower end of the speedup's 95% CI."},
    },
}


def _check_p(_instance: object, _attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise ValueError(f"scorer option p must be a finite number >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class FastPOptions:
    """``scorer.options``; the defaults are CONFIG_SCHEMA's."""

    p: float = attrs.field(default=1.0, validator=_check_p)
    use_ci_lower_bound: bool = attrs.field(default=False,
                                           validator=attrs.validators.instance_of(bool))


@attrs.frozen
class FastPScorer:
    options: FastPOptions = attrs.field(factory=FastPOptions)

    def score(self, evaluation: EvaluationSummary) -> ScoreOutcome:
        refused = scoring.gate(evaluation, p=self.options.p)
        if refused is not None:
            return refused
        if self.options.use_ci_lower_bound:
            if evaluation.speedup_ci95 is None:
                return scoring.ineligible("no 95% CI for the speedup (use_ci_lower_bound is set)",
                                          p=self.options.p)
            used, speedup = "speedup_ci95_lower", evaluation.speedup_ci95[0]
        else:
            used, speedup = "speedup", evaluation.speedup
        if not scoring.positive_number(speedup):
            return scoring.ineligible(f"{used} is not a finite positive number (got {speedup!r})",
                                      p=self.options.p)
        assert speedup is not None
        fast = speedup > self.options.p
        return ScoreOutcome(score=1.0 if fast else 0.0, eligible=True,
                            reason=f"{used} {speedup:.4g}x {'>' if fast else '<='} p={self.options.p:g}",
                            details={"p": self.options.p, "scored": used, "speedup": speedup})


def make_scorer(options: FastPOptions) -> FastPScorer:
    return FastPScorer(options)


@hookimpl
def aka_register_scorers() -> list[ScorerSpec]:
    return [ScorerSpec(name="fast_p", factory=make_scorer, config_schema=CONFIG_SCHEMA,
                       options_class=FastPOptions,
                       description="1 for an accepted candidate faster than p (default 1.0), "
                                   "else 0: KernelBench's fast_p per task")]
