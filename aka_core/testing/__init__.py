"""aka's test kit: fixtures (via the ``aka`` pytest plugin) and the contract suites that plugin
test suites subclass: ``ScorerContract``, ``AgentContract``, ``BackendContract``,
``ExecutorContract``. See ``aka_core.testing.contracts`` for how to use them."""

import pytest

# Plain ``assert`` in the contracts gets pytest's detailed messages; must precede the import.
pytest.register_assert_rewrite("aka_core.testing.contracts", "aka_core.testing.fixtures")

from aka_core.testing.contracts import (  # noqa: E402
    AgentContract,
    BackendContract,
    ExecutorContract,
    PluginContract,
    ScorerContract,
)

__all__ = [
    "AgentContract",
    "BackendContract",
    "ExecutorContract",
    "PluginContract",
    "ScorerContract",
]
