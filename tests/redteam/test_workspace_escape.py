"""Exploits of what an agent leaves in its workspace, run end to end on the CPU (``aka run``
with an in-process agent that shapes the workspace, then the lifecycle's integrity step and the
judge): bytecode that runs in place of the checked source, file names and folder shapes the
evaluator's walks failed on, files it hashed without end, a folder link the integrity step wrote
through, bytecode planted in the evaluator itself. Each must end as the candidate's failure (or
be ignored), never as an evaluator fault, a hang or a write outside the workspace.

From the red team's report (``/tmp/redteam-workspace``: pyc_bypass, cache_key, badname, deep,
sparse, e2e_symlink, evalpyc)."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import aka_core
from aka_core import api
from aka_core.evaluation import integrity, kernel_cache
from aka_core.models import AgentExecution, TaskResult
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import AgentInvocation, AgentSpec
from aka_core.testing.fixtures import write_task
from aka_core.yamlio import dump_yaml

pytest.importorskip("torch")

TASK = "demo/scale_add"
FORBIDDEN = {"torch_compute": "forbidden"}

# What the cheats compute, hidden from the run-time operator recorder (a TorchDispatchMode).
HIDDEN_TORCH = '''\
import torch


def scale_add(x, y, alpha):
    with torch._C._DisableTorchDispatch():
        return torch.add(x, y, alpha=alpha)
'''
WRONG = '''\
import torch


def scale_add(x, y, alpha):
    return torch.zeros_like(x)
'''


class ShapingAgent:
    """Does ``act(workspace)``: what a CLI agent could do with its shell."""

    def __init__(self, act: Callable[[Path], None]):
        self.act = act

    def run(self, invocation: AgentInvocation) -> AgentExecution:
        self.act(invocation.workspace)
        return AgentExecution(agent="shaping", status="completed", exit_code=0,
                              duration_seconds=0.01, message="shaped the workspace")


class ShapingAgentPlugin:
    def __init__(self, act: Callable[[Path], None]):
        self.act = act

    @aka_core.hookimpl
    def aka_register_agents(self) -> list[AgentSpec]:
        return [AgentSpec(name="shaping", factory=lambda options: ShapingAgent(self.act),
                          description="shapes the workspace (red team)")]


def run_task(tmp_path: Path, act: Callable[[Path], None], *, rules: dict[str, str] | None = None,
             task_files: dict[str, str] | None = None) -> TaskResult:
    """One task of ``aka run`` on the CPU with an agent that does ``act``."""
    tasks = tmp_path / "tasks"
    folder = write_task(tasks, TASK, **({"rules": rules} if rules else {}))
    for rel, text in (task_files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({"agent": {"template": "shaping", "timeout_seconds": 60},
                                 "tasks": [TASK], "tasks_directory": str(tasks),
                                 "target_gpu_model": "cpu"}))
    host = PluginHost()
    host.register(ShapingAgentPlugin(act))
    outcome = api.run(config, output_root=tmp_path / "out", host=host)
    (result,) = outcome.results
    return result


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(value=fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert "value" in done, f"still running after {seconds} s"
    return done["value"]


def compiled(target: Path, source: str, mode: py_compile.PycInvalidationMode) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".scratch-{os.getpid()}.py"
    scratch.write_text(source)
    py_compile.compile(str(scratch), cfile=str(target), doraise=True, invalidation_mode=mode)
    scratch.unlink()


@pytest.fixture(autouse=True)
def private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path / "kernel-store"))


# -- H1: bytecode in place of the source the rules checked ---------------------------------------

def test_a_sourceless_helper_behind_a_clean_wrapper_is_not_imported(tmp_path: Path) -> None:
    # pyc_bypass/sol: kernel.py imports .helper, which exists only as helper.pyc; the policy
    # read no .py for it and returned, Python imported the bytecode: accepted, torch computing.
    # Now the runner imports sources only: the candidate does not build, and is told why (the
    # policy names helper.pyc too, when a build gets that far: test_policy_bytecode.py).
    def act(workspace: Path) -> None:
        (workspace / "kernel.py").write_text(
            "from .helper import scale_add as _impl\n\n\n"
            "def scale_add(x, y, alpha):\n    return _impl(x, y, alpha)\n")
        compiled(workspace / "helper.pyc", HIDDEN_TORCH,
                 py_compile.PycInvalidationMode.UNCHECKED_HASH)

    result = run_task(tmp_path, act, rules=FORBIDDEN)
    assert result.status == "completed" and not result.candidate_accepted
    failure = result.evaluation.failure
    assert failure is not None and failure.kind == "compile", failure
    assert "helper.pyc is bytecode" in failure.message and "ship the module's .py" in failure.message


def test_an_unchecked_hash_pyc_of_the_kernel_never_runs(tmp_path: Path) -> None:
    # pyc_bypass/sol2: kernel.py (checked, clean) beside __pycache__/kernel.cpython-311.pyc,
    # which Python ran whatever kernel.py said. Now the source runs: its zeros are wrong.
    def act(workspace: Path) -> None:
        (workspace / "kernel.py").write_text(WRONG)
        compiled(Path(importlib.util.cache_from_source(str(workspace / "kernel.py"))),
                 HIDDEN_TORCH, py_compile.PycInvalidationMode.UNCHECKED_HASH)

    result = run_task(tmp_path, act, rules=FORBIDDEN)
    assert result.status == "completed" and not result.candidate_accepted
    assert result.evaluation.failure is not None
    assert result.evaluation.failure.kind == "correctness", result.evaluation.failure


# -- H2: the kernel store's key ------------------------------------------------------------------

def test_bytecode_or_a_git_folder_that_differs_is_another_key(tmp_path: Path) -> None:
    # cache_key: a candidate whose pyc planted files in its Triton cache shared its key with a
    # clean candidate of the same .py files.
    clean, planted = tmp_path / "clean", tmp_path / "planted"
    for folder in (clean, planted):
        folder.mkdir()
        (folder / "kernel.py").write_text(WRONG)
    compiled(planted / "__pycache__" / "kernel.cpython-311.pyc", HIDDEN_TORCH,
             py_compile.PycInvalidationMode.UNCHECKED_HASH)
    keys = {kernel_cache.key("candidate", TASK, "python", {}, folder) for folder in (clean, planted)}
    assert len(keys) == 2 and None not in keys


# -- H3, H4, H5: names, depths and sizes the evaluator could not handle -------------------------

def test_a_file_name_that_is_not_utf8_is_no_evaluator_fault(tmp_path: Path) -> None:
    # badname: the judge's store key raised UnicodeEncodeError, a retryable infra_error that let
    # a wrong candidate dodge its zero.
    def act(workspace: Path) -> None:
        (workspace / "kernel.py").write_text(WRONG)
        Path(os.fsdecode(os.fsencode(workspace) + b"/notes-\xff\xfe.txt")).write_text("x")

    result = run_task(tmp_path, act)
    assert result.status == "completed" and not result.candidate_accepted, result.error
    assert result.evaluation.failure is not None
    assert result.evaluation.failure.kind == "correctness"


def test_folders_nested_past_pythons_recursion_reject_the_candidate(tmp_path: Path) -> None:
    # deep: 1200 nested folders made the integrity step raise RecursionError (the task ended
    # `error`) and the judge's store key too (`infra_error`).
    def act(workspace: Path) -> None:
        folder = workspace
        for _ in range(1200):
            folder = folder / "d"
            folder.mkdir()

    result = run_task(tmp_path, act)
    assert result.status == "completed" and not result.candidate_accepted, result.error
    assert result.integrity is not None and not result.integrity.ok
    assert any("nested deeper than" in entry for entry in result.integrity.restored_files)
    assert any(g.name == "protected_files_unchanged" and not g.passed
               for g in result.acceptance.gates)


def test_a_sparse_file_of_terabytes_does_not_stall_the_integrity_step(tmp_path: Path) -> None:
    # sparse: 15 TiB in no disk blocks, made inside the agent's sandbox; the integrity step
    # hashed its apparent size.
    def act(workspace: Path) -> None:
        (workspace / "kernel.py").write_text(WRONG)
        for name in ("notes.bin", "reference.py"):
            with open(workspace / name, "wb") as handle:
                handle.truncate(15 * 2**40)

    result = within(120, lambda: run_task(tmp_path, act))
    assert result.status == "completed" and not result.candidate_accepted
    assert result.integrity.restored_files == ("reference.py",)
    assert result.integrity.added_files == ("notes.bin",)


# -- H6: a link where the task has a folder --------------------------------------------------------

def test_a_linked_folder_is_replaced_and_never_written_through(tmp_path: Path) -> None:
    # e2e_symlink: the agent replaced lib/ by a link to a folder elsewhere (there a stored
    # solution); restoring lib/helpers.py deleted and rewrote the file the link reached.
    victim = tmp_path / "stored_solutions" / "lib"
    victim.mkdir(parents=True)
    (victim / "helpers.py").write_text("STORED = 'a solution that must not change'\n")

    def act(workspace: Path) -> None:
        shutil.rmtree(workspace / "lib")
        (workspace / "lib").symlink_to(victim)

    result = run_task(tmp_path, act, task_files={"lib/helpers.py": "HELPER = 1\n"})
    assert (victim / "helpers.py").read_text() == "STORED = 'a solution that must not change'\n"
    assert result.status == "completed" and not result.candidate_accepted
    assert any(entry.startswith("lib (a link where the task has a folder")
               for entry in result.integrity.restored_files)


def test_the_e2e_judge_copies_no_kernel_tree_through_a_link(tmp_path: Path) -> None:
    # The e2e judge assembled the candidate's tree from workspace/kernels: through a link it
    # copied whatever the link reached into a tree the candidate's engine reads.
    judge = pytest.importorskip("aka_backend_e2e.judge")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "norm.py").write_text("SECRET = 1\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "kernels").symlink_to(elsewhere)
    with pytest.raises(judge.JudgeFailure, match="kernels is a link or a file") as caught:
        judge.candidate_files(workspace, "kernels")
    assert caught.value.kind == "compile"
    (workspace / "kernels").unlink()
    (workspace / "kernels").mkdir()
    (workspace / "kernels" / "sub").symlink_to(elsewhere)
    (workspace / "kernels" / "norm.py").write_text("x = 1\n")
    assert judge.candidate_files(workspace, "kernels") == {"norm.py": 6}


# -- H7: bytecode planted in the evaluator -------------------------------------------------------

EVIL_COMPARE = "def compare_outputs(*args, **kwargs):\n    return {'passed': True}\n"


def test_bytecode_planted_in_the_evaluator_is_named_before_each_evaluation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # evalpyc: an unconfined agent wrote an unchecked-hash checking.cpython-311.pyc into the
    # evaluator's __pycache__; the judge imported it (a compare that passes everything) and the
    # record said evaluator_integrity.unchanged. A copy of the module stands for the installed
    # one here.
    package = tmp_path / "site" / "aka_planted"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    source = Path(aka_core.__file__).parent / "evaluation" / "checking.py"
    shutil.copy(source, package / "checking.py")
    monkeypatch.setattr(integrity, "package_folders", lambda: {package})
    before = integrity.snapshot()  # what a run takes when it starts

    pyc = Path(importlib.util.cache_from_source(str(package / "checking.py")))
    compiled(pyc, source.read_text() + "\n\n" + EVIL_COMPARE,
             py_compile.PycInvalidationMode.UNCHECKED_HASH)
    ran = subprocess.run([sys.executable, "-c", "import aka_planted.checking as c; "
                          "print(c.compare_outputs(None, None, None)['passed'])"],
                         env={**os.environ, "PYTHONPATH": str(package.parent)},
                         capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "True"  # Python runs the bytecode, not checking.py

    assert integrity.changes(before) == [f"{pyc} (bytecode that is not its source's)"]
