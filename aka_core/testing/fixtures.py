"""Pytest fixtures for plugin and core tests (registered by ``aka_core.testing.pytest_plugin``).

- ``aka_host``: a fresh ``PluginHost`` with the builtins only (no installed entry points).
- ``register_plugin``: ``register_plugin(module_or_object) -> PluginHost`` adds hookimpls to it.
- ``make_task``: ``make_task(task_id="demo/scale_add", **overrides) -> Path`` writes a minimal,
  valid operator task (builtin ``python`` backend, a pure-PyTorch elementwise op) under
  ``tmp_path/tasks/``.
- ``make_invocation``: ``make_invocation(task_id=...) -> AgentInvocation`` for that task, with a
  fresh ``workspace`` copy in ``tmp_path/run/<task id>/``.
- ``aka_cli``: ``aka_cli(*args) -> (exit status, stdout, stderr)``: the ``aka`` command, run
  in-process.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aka_core.models import TASK_FILE, Task
from aka_core.plugin.host import PluginHost, Provider
from aka_core.plugin.records import AgentInvocation
from aka_core.yamlio import dump_yaml

DEFAULT_TASK_ID = "demo/scale_add"

_KERNEL = '''\
"""The candidate: out = x + alpha * y (pure PyTorch; the agent may edit this file)."""

import torch


def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y
'''

_REFERENCE = '''\
"""Reference for scale_add, computed in float64."""

import torch


def scale_add_reference(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x.double() + alpha * y.double()
'''

_INPUTS = '''\
"""Inputs for scale_add: two random tensors of the case's size and a scalar."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "float32"))
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (int(case["M"]), int(case["N"]))
    x = torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
    y = torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
    return {"x": x, "y": y, "alpha": 0.5}
'''


def task_yaml_data(task_id: str = DEFAULT_TASK_ID) -> dict[str, Any]:
    """The ``task.yaml`` content ``make_task`` writes (before overrides)."""
    return {
        "format": "operator",
        "family": task_id.split("/")[0],
        "backend": "python",
        "description": "out = x + alpha * y over float32 tensors (a test task).",
        "editable": ["kernel.py"],
        "entrypoint": "kernel.py:scale_add",
        "reference": "reference.py:scale_add_reference",
        "inputs": "inputs.py:make_inputs",
        "cases": [{"name": "m256_n512_fp32", "params": {"M": 256, "N": 512, "dtype": "float32"}}],
        "held_out_cases": [{"name": "m97_n300_fp32", "params": {"M": 97, "N": 300}}],
        "smoke_case": {"name": "tiny", "params": {"M": 4, "N": 8}},
        "tolerance": {"float32": {"rtol": 1.0e-5, "atol": 1.0e-6}},
        "requires": {"cpu_interpreter": True},
        "timeouts": {"compile_seconds": 60, "correctness_seconds": 60, "timing_seconds": 60},
        "instructions": "Make `scale_add(x, y, alpha)` in kernel.py faster. It must return "
        "x + alpha * y with the shape and dtype of x.\n",
    }


def write_task(tasks_dir: Path, task_id: str = DEFAULT_TASK_ID, **overrides: Any) -> Path:
    """Write the test task to ``tasks_dir/<task_id>/``; ``overrides`` replace task.yaml keys."""
    task_dir = tasks_dir / task_id
    task_dir.mkdir(parents=True, exist_ok=True)
    data = {**task_yaml_data(task_id), **overrides}
    header = "# yaml-language-server: $schema=../../../schemas/task.schema.json\n"
    (task_dir / TASK_FILE).write_text(header + dump_yaml(data), encoding="utf-8")
    for name, text in (("kernel.py", _KERNEL), ("reference.py", _REFERENCE),
                       ("inputs.py", _INPUTS)):
        (task_dir / name).write_text(text, encoding="utf-8")
    return task_dir


def task_from_dir(task_dir: Path, task_id: str) -> Task:
    """Load a task folder with the builtin ``operator`` format (validated like any task)."""
    from aka_core.builtin.operator_tasks import OperatorTaskFormat

    return OperatorTaskFormat().load(task_dir, task_id)


@pytest.fixture
def aka_host() -> PluginHost:
    """A fresh plugin host with the builtins only: installed plugins are not loaded."""
    return PluginHost(load_entry_points=False)


@pytest.fixture
def register_plugin(aka_host: PluginHost) -> Callable[[object], PluginHost]:
    """``register_plugin(module_or_object)`` registers its hookimpls on ``aka_host``."""

    def register(plugin: object) -> PluginHost:
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        aka_host.register(plugin, Provider(name, f"test:{name}", None))
        return aka_host

    return register


@pytest.fixture
def make_task(tmp_path: Path) -> Callable[..., Path]:
    """``make_task(task_id="demo/scale_add", **overrides) -> Path`` under ``tmp_path/tasks``."""

    def make(task_id: str = DEFAULT_TASK_ID, **overrides: Any) -> Path:
        return write_task(tmp_path / "tasks", task_id, **overrides)

    return make


@pytest.fixture
def make_invocation(tmp_path: Path, make_task: Callable[..., Path]) -> Callable[
    ..., AgentInvocation
]:
    """``make_invocation(task_id=..., timeout_seconds=60) -> AgentInvocation``.

    Writes the task (unless ``make_task`` already did) and copies it into a fresh
    ``tmp_path/run/<task id>/workspace``; ``logs_dir`` is its sibling ``logs``.
    """

    def make(task_id: str = DEFAULT_TASK_ID, *, timeout_seconds: float = 60.0) -> AgentInvocation:
        task_dir = tmp_path / "tasks" / task_id
        if not (task_dir / TASK_FILE).is_file():
            make_task(task_id)
        task = task_from_dir(task_dir, task_id)
        run_dir = tmp_path / "run" / task_id
        workspace = run_dir / "workspace"
        shutil.copytree(task_dir, workspace)
        logs_dir = run_dir / "logs"
        logs_dir.mkdir(parents=True, exist_ok=True)
        return AgentInvocation(
            task=task,
            workspace=workspace,
            logs_dir=logs_dir,
            prompt=task.instructions,
            timeout_seconds=timeout_seconds,
            environment={"PATH": os.environ.get("PATH", "")},
            target_gpu_model="cpu",
        )

    return make


@pytest.fixture
def aka_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``aka_cli(*args) -> (exit status, stdout, stderr)``: the ``aka`` command, in-process."""
    from aka_core.cli import main

    def run(*args: str | Path) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run
