"""<One line: what this plugin provides.> (template: a scorer; rename the package folder.)

A plugin is one module: a registration hook that returns records, and the implementation the
record's factory builds. The other kinds work the same way:

    aka_register_agents()    -> [AgentSpec(name, factory=lambda options: Agent)]
    aka_register_backends()  -> [BackendSpec(name, factory=lambda: Backend)]
    aka_register_executors() -> [ExecutorSpec(name, factory=lambda options: Executor)]
    aka_register_tasks()     -> [TaskFormatSpec(name, factory=lambda: TaskFormat)]

Import aka only through ``aka_core.plugin`` (records, Protocols, models, errors, kits; tests may
also use ``aka_core.testing``): the rest of aka_core may move. Each hook is documented in
``aka_core.plugin.hookspecs``.
"""

from __future__ import annotations

from typing import Any

import attrs

from aka_core.plugin import EvaluationSummary, ScoreOutcome, ScorerSpec, hookimpl

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "threshold": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
    },
}


@attrs.frozen(kw_only=True)
class ExampleOptions:
    """The ``options`` section, typed: the core validates it against CONFIG_SCHEMA, then
    structures it into this class; keep the defaults equal to the schema's (a core test checks)."""

    threshold: float = 1.0


@attrs.frozen
class ExampleScorer:
    """1 for an accepted, measured candidate faster than ``threshold``; 0 otherwise."""

    options: ExampleOptions = attrs.field(factory=ExampleOptions)

    def score(self, evaluation: EvaluationSummary) -> ScoreOutcome:
        if not evaluation.accepted:
            return ScoreOutcome(score=0.0, eligible=False, reason="candidate not accepted")
        if not evaluation.performance_measured or evaluation.speedup is None:
            return ScoreOutcome(score=0.0, eligible=False,
                                reason="performance not measured on this device")
        faster = evaluation.speedup > self.options.threshold
        return ScoreOutcome(score=1.0 if faster else 0.0, eligible=True,
                            reason=f"speedup {evaluation.speedup:.3g}x vs {self.options.threshold:g}x")


def make_scorer(options: ExampleOptions) -> ExampleScorer:
    return ExampleScorer(options)


@hookimpl
def aka_register_scorers() -> list[ScorerSpec]:
    return [ScorerSpec(
        name="<name>",  # the name a run config uses: scorer: {name: <name>}
        factory=make_scorer,
        description="<one line shown by `aka plugins`>",
        config_schema=CONFIG_SCHEMA,
        options_class=ExampleOptions,
    )]
