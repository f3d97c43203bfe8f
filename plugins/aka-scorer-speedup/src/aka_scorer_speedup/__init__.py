"""The ``speedup`` scorer: aka's default reward, ``max(0, 1 - k / speedup)``.

Only an accepted candidate whose performance was measured earns credit; with ``k = 1.05`` the
reward is in [0, 1] and positive only above a 1.05x speedup. ``use_ci_lower_bound`` scores the
lower end of the speedup's 95% confidence interval instead (conservative: noise earns nothing).
"""

from __future__ import annotations

from typing import Any

import attrs

from aka_core.plugin import EvaluationSummary, ScoreOutcome, ScorerSpec, hookimpl, scoring

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "k": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 1.05,
            "description": "Speedup that earns zero reward; only speedups above it earn credit.",
        },
        "use_ci_lower_bound": {
            "type": "boolean",
            "default": False,
            "description": "Score the lower end of the speedup's 95% confidence interval.",
        },
    },
}


def _check_k(_instance: object, _attribute: object, value: float) -> None:
    if not scoring.positive_number(value):
        raise ValueError(f"scorer option k must be a finite number > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class SpeedupOptions:
    """``scorer.options``; the defaults are CONFIG_SCHEMA's."""

    k: float = attrs.field(default=1.05, validator=_check_k)
    use_ci_lower_bound: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool)
    )


@attrs.frozen
class SpeedupScorer:
    """``max(0, 1 - k / s)`` for eligible candidates, 0 (not eligible, with a reason) otherwise."""

    options: SpeedupOptions = attrs.field(factory=SpeedupOptions)

    def score(self, evaluation: EvaluationSummary) -> ScoreOutcome:
        refused = scoring.gate(evaluation, k=self.options.k)
        if refused is not None:
            return refused
        if self.options.use_ci_lower_bound:
            if evaluation.speedup_ci95 is None:
                return scoring.ineligible(
                    "no 95% confidence interval for the speedup (use_ci_lower_bound is set)",
                    k=self.options.k,
                )
            used, speedup = "speedup_ci95_lower", evaluation.speedup_ci95[0]
        else:
            used, speedup = "speedup", evaluation.speedup
        if not scoring.positive_number(speedup):
            return scoring.ineligible(
                f"{used} is not a finite positive number (got {speedup!r})", k=self.options.k
            )
        reward = max(0.0, 1.0 - self.options.k / speedup)
        verdict = "earns credit" if reward > 0 else "does not exceed k: no credit"
        return ScoreOutcome(
            score=reward,
            eligible=True,
            reason=f"{used} {speedup:.4g}x against k={self.options.k:g}x {verdict}",
            details={"k": self.options.k, "scored": used, "speedup": speedup},
        )


def make_scorer(options: SpeedupOptions) -> SpeedupScorer:
    """Build the scorer from ``scorer.options`` (validated against CONFIG_SCHEMA, then typed)."""
    return SpeedupScorer(options)


@hookimpl
def aka_register_scorers() -> list[ScorerSpec]:
    return [
        ScorerSpec(
            name="speedup",
            factory=make_scorer,
            description="max(0, 1 - k / speedup) for accepted, measured candidates (k=1.05)",
            config_schema=CONFIG_SCHEMA,
            options_class=SpeedupOptions,
        )
    ]
