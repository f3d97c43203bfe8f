"""aka's test kit: fixtures (via the ``aka`` pytest plugin) and the contract suites that plugin
test suites subclass: ``ScorerContract``, ``AgentContract``, ``BackendContract``,
``ExecutorContract``, ``TaskFormatContract``, and for agents built on the CLI runtime
``CliAgentContract``, which runs them against a fake CLI (``aka_core.testing.fake_cli``). See
``aka_core.testing.contracts`` and ``aka_core.testing.cli_contract`` for how to use them.

A plugin's tests import aka through ``aka_core.plugin`` and this module only
(``tests/core/test_plugin_surface.py`` holds them to it). Besides the contracts, this module hands
them the core entry points a test drives end to end (``api``, ``create_run``, ``cli_main``,
``compare_runs``, ``smoke``...), the result files' reader and writer, the workspace steps, the
fixtures' ``write_task``, and the test kits as modules (``fake_cli`` for the fake CLI's script
steps, ``processes`` for waiting on process trees). The entry points are imported on first use:
loading the contracts stays cheap."""

from typing import TYPE_CHECKING

import pytest

# Plain ``assert`` in the contracts gets pytest's detailed messages; must precede the import.
pytest.register_assert_rewrite(
    "aka_core.testing.contracts", "aka_core.testing.fixtures", "aka_core.testing.cli_contract"
)

from aka_core.lazy import lazy_exports  # noqa: E402
from aka_core.testing import fake_cli, processes  # noqa: E402
from aka_core.testing.cli_contract import NOT_JSON, CliAgentContract, Ending, Outcome  # noqa: E402
from aka_core.testing.contracts import (  # noqa: E402
    AgentContract,
    BackendContract,
    ExecutorContract,
    PluginContract,
    ScorerContract,
    TaskFormatContract,
    executor_run,
    snapshot,
)
from aka_core.testing.fake_cli import FakeCli, Reply, Requires, Script  # noqa: E402
from aka_core.testing.fixtures import write_task  # noqa: E402

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and editors
    from aka_core import api
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.cli import main as cli_main
    from aka_core.commands.compare import compare_runs
    from aka_core.commands.smoke import smoke
    from aka_core.evaluation import harness
    from aka_core.run.execute import create_run, open_run
    from aka_core.run.lifecycle import case_times
    from aka_core.run.prompt import build_prompt
    from aka_core.run.results import read_task_result, write_task_result
    from aka_core.run.workspace import check_and_restore, copy_task, prepare_workspace, preserve_baseline

# name -> (module, attribute); attribute None: the name is the module itself.
_LAZY: dict[str, tuple[str, str | None]] = {
    "api": ("aka_core.api", None),
    "harness": ("aka_core.evaluation.harness", None),
    "cli_main": ("aka_core.cli", "main"),
    "compare_runs": ("aka_core.commands.compare", "compare_runs"),
    "case_times": ("aka_core.run.lifecycle", "case_times"),
    "load_task": ("aka_core.builtin.operator_tasks", "load_task"),
    "build_prompt": ("aka_core.run.prompt", "build_prompt"),
    "read_task_result": ("aka_core.run.results", "read_task_result"),
    "write_task_result": ("aka_core.run.results", "write_task_result"),
    "create_run": ("aka_core.run.execute", "create_run"),
    "open_run": ("aka_core.run.execute", "open_run"),
    "smoke": ("aka_core.commands.smoke", "smoke"),
    "check_and_restore": ("aka_core.run.workspace", "check_and_restore"),
    "copy_task": ("aka_core.run.workspace", "copy_task"),
    "prepare_workspace": ("aka_core.run.workspace", "prepare_workspace"),
    "preserve_baseline": ("aka_core.run.workspace", "preserve_baseline"),
}

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
    "api",
    "build_prompt",
    "case_times",
    "check_and_restore",
    "cli_main",
    "compare_runs",
    "copy_task",
    "create_run",
    "executor_run",
    "fake_cli",
    "harness",
    "load_task",
    "open_run",
    "prepare_workspace",
    "preserve_baseline",
    "processes",
    "read_task_result",
    "smoke",
    "snapshot",
    "write_task",
    "write_task_result",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
