"""The pytest plugin of aka-core (entry point ``pytest11: aka``): makes the fixtures of
``aka_core.testing.fixtures`` available to every test suite, plugin suites included."""

from aka_core.testing.fixtures import (
    aka_cli,
    aka_host,
    make_invocation,
    make_task,
    register_plugin,
)

__all__ = ["aka_cli", "aka_host", "make_invocation", "make_task", "register_plugin"]
