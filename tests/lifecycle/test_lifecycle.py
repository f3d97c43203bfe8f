"""The lifecycle of a run on the CPU through ``aka_core.api.run``: what a user finds afterwards.

Most tests read one shared run (built once per module) of small python-backend tasks, worked on
by a ``scripted`` test agent that acts on each task by its name (see ``ScriptedAgent``):

- ``demo/good``: a correct new kernel;  ``demo/protected``: a correct kernel plus an edit of the
  protected reference;  ``demo/agent_raises``: the agent plugin raises;  ``demo/crash``: a kernel
  that aborts its process;  ``demo/broken``: a task whose baseline raises on import;
  ``demo/gpu_only``: a task that needs a GPU (skipped on target cpu).

An observer that records ``aka_after_task`` calls and one that raises are registered too.
"""

from __future__ import annotations

import csv
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import aka_core
from aka_core import api
from aka_core.models import AgentExecution, TaskResult
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import AgentInvocation, AgentSpec
from aka_core.run.results import read_task_result
from aka_core.testing.fixtures import write_task
from aka_core.yamlio import dump_yaml, load_plain_yaml

GOOD_KERNEL = '''\
import torch


def scale_add(x, y, alpha):
    return torch.add(x, y, alpha=alpha)
'''

CRASHING_KERNEL = '''\
import os


def scale_add(x, y, alpha):
    os.abort()
'''

PROTECTED_EDIT = "\n# edited by the agent: this file is protected\n"
TASKS = ("demo/agent_raises", "demo/broken", "demo/crash", "demo/good", "demo/gpu_only",
         "demo/protected")


class ScriptedAgent:
    def run(self, invocation: AgentInvocation) -> AgentExecution:
        name = invocation.task.id.rsplit("/", 1)[-1]
        kernel = invocation.workspace / "kernel.py"
        if name == "agent_raises":
            raise RuntimeError("the scripted agent exploded")
        if name in ("good", "protected"):
            kernel.write_text(GOOD_KERNEL, encoding="utf-8")
        if name == "protected":
            with (invocation.workspace / "reference.py").open("a", encoding="utf-8") as f:
                f.write(PROTECTED_EDIT)
        if name == "crash":
            kernel.write_text(CRASHING_KERNEL, encoding="utf-8")
        return AgentExecution(agent="scripted", status="completed", exit_code=0,
                              duration_seconds=0.01, message=f"scripted {name}")


class ScriptedAgentPlugin:
    @aka_core.hookimpl
    def aka_register_agents(self) -> list[AgentSpec]:
        return [AgentSpec(name="scripted", factory=lambda options: ScriptedAgent(),
                          description="acts on each task by its name (tests only)")]


class RecordingObserver:
    def __init__(self) -> None:
        self.after_task: list[tuple[str, bool]] = []
        """(task id, whether its task_result.yaml existed when the hook was called)."""
        self.after_run: list[list[str]] = []

    @aka_core.hookimpl
    def aka_after_task(self, run_dir: Path, result: TaskResult) -> None:
        path = run_dir.joinpath(*result.task_id.split("/"), "task_result.yaml")
        self.after_task.append((result.task_id, path.is_file()))

    @aka_core.hookimpl
    def aka_after_run(self, run_dir: Path, results: list[TaskResult]) -> None:
        self.after_run.append([r.task_id for r in results])


class RaisingObserver:
    @aka_core.hookimpl
    def aka_after_task(self, run_dir: Path, result: TaskResult) -> None:
        raise RuntimeError("a broken observer")

    @aka_core.hookimpl
    def aka_after_run(self, run_dir: Path, results: list[TaskResult]) -> None:
        raise RuntimeError("a broken observer")


def scripted_host(*observers: object) -> PluginHost:
    """Installed plugins (noop, replay, the speedup scorer ...) plus the scripted agent."""
    host = PluginHost()
    for plugin in (ScriptedAgentPlugin(), *observers):
        host.register(plugin)
    return host


def write_config(path: Path, **overrides: Any) -> Path:
    data: dict[str, Any] = {"agent": {"template": "scripted", "timeout_seconds": 60},
                            "tasks": ["demo"], "target_gpu_model": "cpu", **overrides}
    path.write_text(dump_yaml(data), encoding="utf-8")
    return path


class SharedRun:
    def __init__(self, outcome: api.RunOutcome, tasks_dir: Path, observer: RecordingObserver):
        self.run_dir = outcome.run_dir
        self.results = {r.task_id: r for r in outcome.results}
        self.tasks_dir = tasks_dir
        self.observer = observer

    def task(self, name: str) -> Path:
        return self.run_dir / "demo" / name

    def result_file(self, name: str) -> TaskResult:
        return read_task_result(self.task(name) / "task_result.yaml")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    root = tmp_path_factory.mktemp("lifecycle")
    tasks = root / "tasks"
    for task_id in ("demo/good", "demo/protected", "demo/agent_raises", "demo/crash"):
        write_task(tasks, task_id)
    broken = write_task(tasks, "demo/broken", baseline="baseline.py:scale_add")
    (broken / "baseline.py").write_text(
        "raise RuntimeError('this baseline is broken')\n\n\n"
        "def scale_add(x, y, alpha):\n    return x + alpha * y\n", encoding="utf-8")
    write_task(tasks, "demo/gpu_only", requires={"cpu_interpreter": False})
    observer = RecordingObserver()
    host = scripted_host(observer, RaisingObserver())
    config = write_config(root / "run_config.yaml")
    outcome = api.run(config, run_suffix="control", output_root=root / "out", host=host)
    return SharedRun(outcome, tasks, observer)


# --------------------------------------------------------------------------- the run directory


def test_run_directory_is_named_after_target_agent_and_suffix(shared: SharedRun) -> None:
    assert shared.run_dir.parent.name == "workspace_cpu_scripted"
    assert shared.run_dir.name.startswith("run_")
    assert shared.run_dir.name.endswith("_control")


def test_run_yaml_holds_config_task_ids_and_plugins(shared: SharedRun) -> None:
    meta = load_plain_yaml(shared.run_dir / "run.yaml")

    assert meta["config"]["agent"]["template"] == "scripted"
    assert meta["config"]["target_gpu_model"] == "cpu"
    assert meta["task_ids"] == list(TASKS)
    assert meta["device"] == "cpu"
    assert "aka-core (builtin)" in meta["plugins"]
    assert "aka-scorer-speedup" in meta["plugins"], "the scorer's distribution and version"
    assert meta["tasks_root"] == str(shared.tasks_dir.resolve())


def test_every_selected_task_has_a_result_file(shared: SharedRun) -> None:
    assert sorted(shared.results) == list(TASKS)
    for task_id in TASKS:
        assert (shared.run_dir / task_id / "task_result.yaml").is_file(), task_id


def test_task_folder_holds_workspace_read_only_baseline_and_logs(shared: SharedRun) -> None:
    good = shared.task("good")
    assert (good / "workspace" / "kernel.py").read_text() == GOOD_KERNEL
    original = (shared.tasks_dir / "demo" / "good" / "kernel.py").read_text()
    assert (good / "baseline" / "kernel.py").read_text() == original, (
        "the baseline is the task's own kernel, not the agent's")
    for path in [good / "baseline", *(good / "baseline").rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o222 == 0, f"{path} is writable"
    log = good / "logs" / "evaluation.log"
    assert log.is_file()


def test_agent_costs_are_recorded_with_nulls_for_unknown_usage(shared: SharedRun) -> None:
    costs = json.loads((shared.run_dir / "agent_costs" / "demo__good.json").read_text())

    assert costs["task_id"] == "demo/good" and costs["agent"] == "scripted"
    for key in ("model", "input_tokens", "output_tokens", "cost_usd"):
        assert key in costs and costs[key] is None, key


def test_reports_summarise_every_task(shared: SharedRun) -> None:
    reports = shared.run_dir / "reports"
    rows = {r["task_id"]: r for r in csv.DictReader((reports / "summary.csv").open())}
    assert sorted(rows) == list(TASKS)
    assert rows["demo/good"]["status"] == "completed"
    assert rows["demo/gpu_only"]["status"] == "skipped"
    assert rows["demo/broken"]["status"] == "error"

    summary = json.loads((reports / "summary.json").read_text())
    assert sorted(row["task_id"] for row in summary["tasks"]) == list(TASKS)
    text = (reports / "report.txt").read_text()
    assert "demo/good" in text and "demo/gpu_only" in text


# --------------------------------------------------------------------------- a task's result


def test_correct_candidate_result_keeps_each_question_in_its_own_field(shared: SharedRun) -> None:
    result = shared.result_file("good")

    assert result == shared.results["demo/good"], "the file is what the run returned"
    assert result.status == "completed"
    assert result.agent_execution is not None
    assert (result.agent_execution.status, result.agent_execution.agent) == ("completed",
                                                                              "scripted")
    assert (result.pass_compilation, result.pass_correctness) == (True, True)
    assert result.candidate_accepted is True
    assert result.acceptance is not None
    assert {g.name: g.passed for g in result.acceptance.gates} == {
        "compiles": True, "correct": True, "protected_files_unchanged": True,
        "evaluator_files_untouched": True, "confined": True}
    sandbox = result.evaluation.confinement.candidate
    assert sandbox is not None and sandbox.filesystem == "allowlist"
    assert result.evaluation.evaluator_integrity.unchanged is True
    assert result.integrity is not None and result.integrity.changed_files == ("kernel.py",)


def test_cpu_run_measures_no_speedup_and_scores_zero_saying_why(shared: SharedRun) -> None:
    result = shared.result_file("good")

    assert result.speedup_ratio is None
    assert result.score == 0.0
    assert "not measured" in result.evaluation.performance.reason_not_measured
    assert result.scorer["eligible"] is False
    assert "not measured" in result.scorer["reason"]


def test_protected_file_edit_is_restored_and_rejects_the_candidate(shared: SharedRun) -> None:
    result = shared.result_file("protected")
    reference = shared.task("protected") / "workspace" / "reference.py"
    original = shared.tasks_dir / "demo" / "protected" / "reference.py"

    assert reference.read_text() == original.read_text(), "the protected file was not restored"
    assert result.integrity is not None and result.integrity.ok is False
    assert result.integrity.restored_files == ("reference.py",)
    assert result.pass_correctness is True, "the candidate itself is correct"
    assert result.candidate_accepted is False
    gates = {g.name: g for g in result.acceptance.gates}
    assert gates["protected_files_unchanged"].passed is False
    assert "reference.py" in gates["protected_files_unchanged"].detail
    assert result.score == 0.0


def test_agent_that_raises_fails_its_step_but_the_task_is_still_evaluated(
    shared: SharedRun,
) -> None:
    result = shared.result_file("agent_raises")

    assert result.status == "completed"
    assert result.agent_execution is not None and result.agent_execution.status == "failed"
    assert "the scripted agent exploded" in (result.agent_execution.message or "")
    # The untouched workspace (the baseline) was still built and checked.
    assert (result.pass_compilation, result.pass_correctness) == (True, True)


def test_crashing_candidate_fails_its_task_only(shared: SharedRun) -> None:
    result = shared.result_file("crash")

    assert result.status == "completed"
    assert result.evaluation.failure.kind == "crashed"
    assert (result.pass_compilation, result.pass_correctness) == (True, False)
    assert result.candidate_accepted is False


def test_broken_task_is_an_error_and_the_other_tasks_complete(shared: SharedRun) -> None:
    result = shared.result_file("broken")

    assert result.status == "error"
    assert "this baseline is broken" in (result.error or "")
    assert result.candidate_accepted is False and result.score == 0.0
    completed = [t for t, r in shared.results.items() if r.status == "completed"]
    assert completed == ["demo/agent_raises", "demo/crash", "demo/good", "demo/protected"]


def test_task_needing_a_gpu_is_skipped_on_target_cpu_with_the_reason(shared: SharedRun) -> None:
    result = shared.result_file("gpu_only")

    assert result.status == "skipped"
    assert "requires.cpu_interpreter is false" in (result.skip_reason or "")
    assert not (shared.task("gpu_only") / "workspace").exists(), "a skipped task gets no workspace"


def test_after_task_observers_run_after_each_result_is_written(shared: SharedRun) -> None:
    # A second observer raised on every call; the run went on and this one saw every task.
    assert shared.observer.after_task == [(t, True) for t in TASKS]
    assert shared.observer.after_run == [list(TASKS)]


# --------------------------------------------------------------------------- separate runs


def test_baseline_raising_when_called_is_a_task_error(
    make_task: Callable[..., Path], tmp_path: Path
) -> None:
    task = make_task("demo/broken_call", baseline="baseline.py:scale_add")
    (task / "baseline.py").write_text(
        "def scale_add(x, y, alpha):\n    raise RuntimeError('broken when called')\n",
        encoding="utf-8")
    config = write_config(tmp_path / "run.yaml", agent={"template": "noop"})

    (result,) = api.run(config, output_root=tmp_path / "out", host=scripted_host()).results

    assert result.status == "error"
    assert "broken when called" in (result.error or "")


def test_a_preserved_copy_deleted_during_the_evaluation_is_not_judged(
    make_task: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aka_core.evaluation import evaluate as judge_process
    from aka_core.run.workspace import remove_tree

    make_task("demo/copy_deleted")
    real = judge_process.evaluate

    def evaluate_then_delete(request: Any, **kwargs: Any) -> dict[str, Any]:
        record = real(request, **kwargs)
        remove_tree(Path(request.reference.root))  # something outside aka, while it ran
        return record

    monkeypatch.setattr(judge_process, "evaluate", evaluate_then_delete)
    config = write_config(tmp_path / "run.yaml", agent={"template": "noop"})

    (result,) = api.run(config, output_root=tmp_path / "out", host=scripted_host()).results

    assert result.status == "infra_error" and result.score == 0
    assert "preserved copy of the task" in (result.error or "")
    assert result.integrity is not None and not result.integrity.evaluator_files_intact
    assert any("during the evaluation" in c for c in result.integrity.outside_changes)
