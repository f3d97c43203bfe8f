"""Plugins see aka through one face: ``aka_core.plugin`` (and ``aka_core.testing`` in their tests).

Every ``plugins/**/*.py`` is read with ``ast``: a plugin's source may import only
``aka_core.plugin``; its tests (files under a ``tests`` folder, and ``conftest.py``) may also import
``aka_core.testing``. Any other import of aka (``from aka_core.models import Task``,
``from aka_core import native``, ``from aka_core.testing.fixtures import ...``) fails, naming
file:line, so the core's modules can move without breaking a plugin.

``aka_core.plugin.__all__`` is pinned below: a name is added to (or removed from) the public face
on purpose, with this list changed in the same commit.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import aka_core.plugin
import aka_core.testing

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
SOURCE_ALLOWED = frozenset({"aka_core.plugin"})
TEST_ALLOWED = frozenset({"aka_core.plugin", "aka_core.testing"})

EXPECTED_PLUGIN_ALL = [
    "AGENT_PHASE_FILE",
    "AKA_VERSION",
    "DEVICE_ON_NODE",
    "KEEP_FIRST_EVENTS",
    "MAX_EVENTS_KEPT",
    "SANDBOX_PROTECTED_ALWAYS",
    "TASK_FILE",
    "Acceptance",
    "Agent",
    "AgentExecution",
    "AgentInvocation",
    "AgentSpec",
    "AgentStatus",
    "AgentUsage",
    "AkaError",
    "Backend",
    "BackendReadiness",
    "BackendSpec",
    "BuildError",
    "Case",
    "CaseTimes",
    "Check",
    "CliAgent",
    "CliAgentOptions",
    "CliCommand",
    "CliRun",
    "ConfigError",
    "DeviceInfo",
    "EvaluationSummary",
    "Executor",
    "ExecutorSpec",
    "FailureKind",
    "Harness",
    "HeldOutDraws",
    "JudgeRequest",
    "PluginHost",
    "Problem",
    "PythonBackend",
    "Requirements",
    "Run",
    "RunConfig",
    "ScoreOutcome",
    "Scorer",
    "ScorerSpec",
    "Task",
    "TaskFormat",
    "TaskFormatSpec",
    "TaskJudge",
    "TaskResult",
    "TaskRules",
    "TaskRunner",
    "Timeouts",
    "Tolerance",
    "as_float",
    "as_int",
    "bounded_files",
    "children",
    "common_agent_options_schema",
    "disk_watch",
    "dump_yaml",
    "field_path",
    "gpus",
    "hookimpl",
    "innermost_location",
    "line_of",
    "load_plain_yaml",
    "load_yaml",
    "memory_watch",
    "native",
    "now_iso",
    "protocol",
    "read_facts",
    "read_run_file",
    "runner_environment",
    "runtime_checks",
    "sandbox",
    "scoring",
    "signal_pids",
    "signal_tree",
    "strip_ansi",
    "structure",
    "task_dir",
    "task_result_path",
    "to_builtin",
    "unstructure",
    "validate_document",
    "worker_base_environment",
    "write_json_atomic",
    "write_reports",
    "write_text_atomic",
    "write_yaml_atomic",
]


def _is_test_file(path: Path, root: Path) -> bool:
    return path.name == "conftest.py" or "tests" in path.relative_to(root).parts


def _aka_modules(node: ast.AST) -> list[str]:
    """The aka modules an import statement reads from (none for other packages)."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module]
    elif isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        return []
    return [name for name in names if name == "aka_core" or name.startswith("aka_core.")]


def foreign_imports(root: Path) -> list[str]:
    """``file:line: module`` (file relative to ``root``) for every import under ``root`` of an aka
    module its file may not import, function-local imports included."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        allowed = TEST_ALLOWED if _is_test_file(path, root) else SOURCE_ALLOWED
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for module in _aka_modules(node):
                if module not in allowed:
                    found.append((path.relative_to(root).as_posix(), node.lineno, module))
    return [f"{file}:{line}: {module}" for file, line, module in sorted(found)]


def test_plugins_import_aka_only_through_its_public_face() -> None:
    foreign = [f"plugins/{where}" for where in foreign_imports(PLUGINS)]
    assert not foreign, (
        "plugins import aka only through aka_core.plugin (tests: and aka_core.testing); add what is "
        "missing to aka_core.plugin (and EXPECTED_PLUGIN_ALL here) instead:\n" + "\n".join(foreign)
    )


def test_the_walk_finds_foreign_imports_in_source_and_tests(tmp_path: Path) -> None:
    src = tmp_path / "aka-x" / "src" / "aka_x"
    tests = tmp_path / "aka-x" / "tests"
    src.mkdir(parents=True)
    tests.mkdir(parents=True)
    (src / "__init__.py").write_text(
        "from aka_core.plugin import hookimpl\n"
        "from aka_core.testing import ScorerContract\n"
        "def f():\n    from aka_core import native\n"
    )
    (tests / "test_x.py").write_text(
        "import aka_core.models\n"
        "from aka_core.testing import api\n"
        "from aka_core.testing.fixtures import write_task\n"
        "from aka_core_extra import x\n"
    )
    assert foreign_imports(tmp_path) == [
        "aka-x/src/aka_x/__init__.py:2: aka_core.testing",
        "aka-x/src/aka_x/__init__.py:4: aka_core",
        "aka-x/tests/test_x.py:1: aka_core.models",
        "aka-x/tests/test_x.py:3: aka_core.testing.fixtures",
    ]


def test_the_public_names_are_the_pinned_ones() -> None:
    assert aka_core.plugin.__all__ == EXPECTED_PLUGIN_ALL, (
        "aka_core.plugin.__all__ changed: if on purpose, update EXPECTED_PLUGIN_ALL and the module "
        "docstring (what is stable) in the same commit"
    )


@pytest.mark.parametrize("module", [aka_core.plugin, aka_core.testing], ids=lambda m: m.__name__)
def test_every_public_name_resolves(module) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it does not have: {missing}"
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("module", [aka_core.plugin, aka_core.testing], ids=lambda m: m.__name__)
def test_lazy_names_are_the_core_objects_and_typed_alike(module) -> None:
    """A lazy name is the very object of the module it comes from, and the ``TYPE_CHECKING`` block
    (what editors and type checkers see) imports exactly the lazy names."""
    for name, (source, attribute) in module._LAZY.items():
        target = importlib.import_module(source)
        expected = target if attribute is None else getattr(target, attribute)
        assert getattr(module, name) is expected, name
    tree = ast.parse(Path(module.__file__).read_text())
    typed: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    typed |= {alias.asname or alias.name for alias in inner.names}
    assert typed == set(module._LAZY)
    assert set(module._LAZY) <= set(module.__all__)


HEAVY = (
    "aka_core.kits.agent_runtime",
    "aka_core.evaluation.evaluate",
    "aka_core.evaluation.judge",
    "aka_core.plugin.host",
    "aka_core.kits.native",
    "aka_core.kits.python_backend",
    "aka_core.run.reports",
    "aka_core.run.execute",
    "aka_core.commands.smoke",
)


def test_importing_the_face_leaves_the_kits_unloaded() -> None:
    """Registering a plugin (importing its module) must not pull in toolchains, the judge or the
    run machinery: those load on first use."""
    code = f"import sys, aka_core.plugin\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
