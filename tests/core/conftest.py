"""Fixtures for core tests: a plugin host with builtins plus tiny in-test plugins, task folders."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import aka_core
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import AgentSpec, ScorerSpec

TASK_YAML = """\
format: operator
family: triton2triton
backend: triton
editable: [kernel.py]
entrypoint: kernel.py:scale
reference: reference.py:scale_reference
inputs: inputs.py:make_inputs
cases:
  - {name: small, params: {N: 16}}
held_out_cases:
  - {name: odd, params: {N: 17}}
smoke_case: {name: tiny, params: {N: 4}}
tolerance:
  float32: {rtol: 1.0e-5, atol: 1.0e-6}
requires: {vendors: [nvidia, amd]}
instructions: Make scale faster.
"""

TASK_FILES = {
    "kernel.py": "def scale(x):\n    return x * 2\n",
    "reference.py": "def scale_reference(x):\n    return x * 2\n",
    "inputs.py": "def make_inputs(case, seed, device):\n    return {'x': seed}\n",
}


class _TestPlugins:
    """Agents and a scorer for config tests; registered like any third-party plugin."""

    @aka_core.hookimpl
    def aka_register_agents(self) -> list[AgentSpec]:
        return [
            AgentSpec(name="noop", factory=lambda options: None),
            AgentSpec(name="replay", factory=lambda options: None, config_schema={
                "type": "object", "additionalProperties": False, "required": ["source"],
                "properties": {"source": {"type": "string"}, "delay_seconds": {"type": "number"}},
            }),
        ]

    @aka_core.hookimpl
    def aka_register_scorers(self) -> list[ScorerSpec]:
        return [ScorerSpec(name="speedup", factory=lambda options: None, config_schema={
            "type": "object", "additionalProperties": False,
            "properties": {"threshold": {"type": "number"}},
        })]


@pytest.fixture
def bare_host() -> PluginHost:
    """Only the core's builtins (operator format, local executor, python backend)."""
    return PluginHost(load_entry_points=False)


@pytest.fixture
def host(bare_host: PluginHost) -> PluginHost:
    bare_host.register(_TestPlugins())
    return bare_host


MakeTask = Callable[..., Path]


@pytest.fixture
def make_task(tmp_path: Path) -> MakeTask:
    """``make_task("family/name", yaml=..., files={...})`` writes a task under tmp_path/tasks."""

    def make(task_id: str = "triton2triton/scale", *, yaml: str = TASK_YAML,
             files: dict[str, str] | None = None, root: Path | None = None) -> Path:
        folder = (root or tmp_path / "tasks") / task_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "task.yaml").write_text(textwrap.dedent(yaml), encoding="utf-8")
        for name, text in {**TASK_FILES, **(files or {})}.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
        return folder

    return make


Write = Callable[[Path, str], Path]


@pytest.fixture
def write() -> Write:
    """``write(path, text)`` writes dedented text (creating folders) and returns the path."""

    def write_file(path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write_file


@pytest.fixture
def task_yaml() -> str:
    """A valid task.yaml for the files ``make_task`` writes; tests edit it to break it."""
    return TASK_YAML
