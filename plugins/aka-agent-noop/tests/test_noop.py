"""The noop agent: the contract, and that the workspace stays exactly as delivered."""

from __future__ import annotations

import pytest
from aka_agent_noop import aka_register_agents, make_agent

from aka_core.testing import AgentContract, snapshot


class TestNoopContract(AgentContract):
    record = aka_register_agents()[0]


def test_leaves_the_workspace_unchanged(make_invocation) -> None:
    invocation = make_invocation()
    before = snapshot(invocation.workspace, ())
    execution = make_agent({}).run(invocation)
    assert (execution.agent, execution.status, execution.exit_code) == ("noop", "completed", 0)
    assert snapshot(invocation.workspace, ()) == before


def test_rejects_options() -> None:
    with pytest.raises(ValueError, match="no options"):
        make_agent({"model": "x"})


def test_registered_through_the_host(register_plugin) -> None:
    import aka_agent_noop

    assert register_plugin(aka_agent_noop).agent("noop").factory is make_agent
