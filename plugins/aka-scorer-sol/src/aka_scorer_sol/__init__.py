"""The ``speed_of_light`` scorer: how much of the way to the physical bound the candidate went.

Per timed case, with the baseline's time ``b``, the candidate's ``c`` and the case's speed-of-light
time ``l`` (the bytes and FLOPs the task declares, at the GPU's peak bandwidth and throughput):
``(b - c) / (b - l)``, clipped to [0, 1]: 0 for no faster than the baseline, 1 at the bound. The
reward is the mean over cases (SOL-ExecBench scores kernels by the same gap). A task without a
declared cost, or a baseline already at the bound (``b <= l``), cannot be scored this way: the
outcome is ineligible and says why.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from aka_core.plugin import EvaluationSummary, ScoreOutcome, ScorerSpec, hookimpl, scoring

CONFIG_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False,
                                 "properties": {}}


@attrs.frozen(kw_only=True)
class SpeedOfLightOptions:
    """``scorer.options``: none yet."""


@attrs.frozen(kw_only=True)
class SpeedOfLightScorer:
    def score(self, evaluation: EvaluationSummary) -> ScoreOutcome:
        refused = scoring.gate(evaluation)
        if refused is not None:
            return refused
        if not evaluation.cases:
            return scoring.ineligible("no timed cases in the evaluation")
        fractions: dict[str, float] = {}
        for case in evaluation.cases:
            bound = case.speed_of_light_ms
            if bound is None or not math.isfinite(bound):
                return scoring.ineligible(f"case {case.case} has no speed-of-light time (the task "
                                        "declares no cost)")
            gap = case.baseline_ms - bound
            if not gap > 0:
                return scoring.ineligible(f"case {case.case}: the baseline ({case.baseline_ms:.4g} "
                                        f"ms) is already at the bound ({bound:.4g} ms)")
            closed = (case.baseline_ms - case.candidate_ms) / gap
            fractions[case.case] = min(1.0, max(0.0, closed)) if math.isfinite(closed) else 0.0
        reward = sum(fractions.values()) / len(fractions)
        return ScoreOutcome(score=reward, eligible=True,
                            reason=f"closed {reward:.1%} of the gap to the speed of light "
                                   f"(mean over {len(fractions)} cases)",
                            details={"per_case": fractions})


def make_scorer(options: SpeedOfLightOptions) -> SpeedOfLightScorer:
    return SpeedOfLightScorer()


@hookimpl
def aka_register_scorers() -> list[ScorerSpec]:
    return [ScorerSpec(name="speed_of_light", factory=make_scorer, config_schema=CONFIG_SCHEMA,
                       options_class=SpeedOfLightOptions,
                       description="the share of the gap from the baseline to the speed-of-light "
                                   "bound that the candidate closed, mean over cases")]
