"""Rerun the contract of the plugin's kind, then test what is specific to it."""

from __future__ import annotations

import pytest
from aka_kind_name import aka_register_scorers, make_scorer

from aka_core.plugin import EvaluationSummary
from aka_core.testing import ScorerContract  # or AgentContract, BackendContract, ExecutorContract

make = aka_register_scorers()[0].make
"""The scorer as a run builds it: options typed through the record's options class."""


class TestContract(ScorerContract):
    record = aka_register_scorers()[0]
    options = {"threshold": 1.5}  # or a fixture named `options` (same for `record`)


def test_registered_through_the_host(register_plugin) -> None:
    import aka_kind_name

    host = register_plugin(aka_kind_name)  # a PluginHost with the builtins and this plugin
    assert host.scorer("<name>").factory is make_scorer


@pytest.mark.parametrize(("speedup", "score"), [(1.2, 0.0), (2.0, 1.0)])
def test_threshold(speedup: float, score: float) -> None:
    evaluation = EvaluationSummary(accepted=True, performance_measured=True, speedup=speedup)
    assert make({"threshold": 1.5}).score(evaluation).score == score
