"""aka's test kit: fixtures (via the ``aka`` pytest plugin) and the contract suites that plugin
test suites subclass: ``ScorerContract``, ``AgentContract``, ``BackendContract``,
``ExecutorContract``, ``TaskFormatContract``, and for agents built on the CLI runtime
``CliAgentContract``, which runs them against a fake CLI (``aka_core.testing.fake_cli``). See
``aka_core.testing.contracts`` and ``aka_core.testing.cli_contract`` for how to use them."""

import pytest

# Plain ``assert`` in the contracts gets pytest's detailed messages; must precede the import.
pytest.register_assert_rewrite("aka_core.testing.contracts", "aka_core.testing.fixtures",
                               "aka_core.testing.cli_contract")

from aka_core.testing.cli_contract import NOT_JSON, CliAgentContract, Ending, Outcome  # noqa: E402
from aka_core.testing.contracts import (  # noqa: E402
    AgentContract,
    BackendContract,
    ExecutorContract,
    PluginContract,
    ScorerContract,
    TaskFormatContract,
)
from aka_core.testing.fake_cli import FakeCli, Reply, Requires, Script  # noqa: E402

__all__ = [
    "NOT_JSON",
    "AgentContract",
    "BackendContract",
    "CliAgentContract",
    "Ending",
    "ExecutorContract",
    "FakeCli",
    "Outcome",
    "PluginContract",
    "Reply",
    "Requires",
    "ScorerContract",
    "Script",
    "TaskFormatContract",
]
