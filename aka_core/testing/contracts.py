"""Conformance suites that every implementation of a plugin kind reruns against itself.

A plugin's tests subclass the contract of its kind and say what to test, either as class
attributes or as pytest fixtures of the same names (a fixture wins; use one when the value needs
``tmp_path`` or other fixtures)::

    from aka_core.testing import ScorerContract
    from aka_scorer_speedup import aka_register_scorers

    class TestSpeedupContract(ScorerContract):
        record = aka_register_scorers()[0]
        options = {"k": 1.05}          # optional; default {}

Names a subclass may set: ``record`` (required), ``options`` (scorer, agent, executor),
``task_id`` (agent), ``task_ids`` (executor), ``task_folder`` (task format: a fixture that makes
one task folder of the format in ``tmp_path``). Fixtures a subclass's own tests may use: ``spec``
(the checked record) and the built plugin: ``scorer``, ``agent``, ``backend``, ``executor``.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, get_args

import pytest
from jsonschema import Draft202012Validator

from aka_core.errors import BuildError, ConfigError
from aka_core.models import (
    AgentConfig,
    AgentExecution,
    AgentStatus,
    EvaluationSummary,
    RunConfig,
    ScoreOutcome,
)
from aka_core.plugin.records import (
    Agent,
    AgentInvocation,
    AgentSpec,
    Backend,
    BackendReadiness,
    BackendSpec,
    CheckedAgent,
    Executor,
    ExecutorSpec,
    PluginRecord,
    Run,
    Scorer,
    ScorerSpec,
    TaskFormat,
    TaskFormatSpec,
    TaskRunner,
)
from aka_core.testing.fixtures import DEFAULT_TASK_ID

_MISSING = object()


def provided(request: pytest.FixtureRequest, name: str) -> Any:
    """The subclass's fixture ``name`` if it defines one, else its class attribute ``name``."""
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        pass
    value = getattr(request.cls, name, _MISSING)
    if value is _MISSING:
        owner = request.cls.__name__ if request.cls else "the test class"
        pytest.fail(f"{owner} must set `{name} = ...` or define a `{name}` fixture")
    return value


class PluginContract:
    """What every kind shares: the record's type and its options schema."""

    record_type: ClassVar[type[PluginRecord]] = PluginRecord
    options: ClassVar[Mapping[str, Any]] = {}

    @pytest.fixture
    def spec(self, request: pytest.FixtureRequest) -> Any:
        record = provided(request, "record")
        assert isinstance(record, self.record_type), (
            f"record must be a {self.record_type.__name__}, got {type(record).__name__}"
        )
        return record

    @pytest.fixture
    def plugin_options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return dict(provided(request, "options"))

    def test_config_schema_is_valid_and_accepts_options(
        self, spec: PluginRecord, plugin_options: dict[str, Any]
    ) -> None:
        if spec.config_schema is None:
            assert not plugin_options, "options are given but the record has no config_schema"
            return
        Draft202012Validator.check_schema(spec.config_schema)
        Draft202012Validator(spec.config_schema).validate(plugin_options)


# --------------------------------------------------------------------------- scorers


def measured(speedup: float | None) -> EvaluationSummary:
    """An accepted, measured evaluation with ``speedup`` and a +-3% confidence interval."""
    finite = speedup is not None and math.isfinite(speedup) and speedup > 0
    ci = (speedup * 0.97, speedup * 1.03) if finite and speedup is not None else None
    return EvaluationSummary(accepted=True, performance_measured=True, speedup=speedup,
                             speedup_ci95=ci)


SPEEDUP_GRID = (1e-6, 0.25, 0.5, 0.9, 1.0, 1.01, 1.05, 1.1, 1.5, 2.0, 3.0, 10.0, 1e6)
ODD_SPEEDUPS = (None, 0.0, -1.0, math.nan, math.inf)


class ScorerContract(PluginContract):
    """A scorer never rewards what was not accepted or measured, and stays in [0, 1]."""

    record_type = ScorerSpec

    @pytest.fixture
    def scorer(self, spec: ScorerSpec, plugin_options: dict[str, Any]) -> Scorer:
        scorer = spec.make(plugin_options)
        assert isinstance(scorer, Scorer), f"{spec.name}'s factory must return a Scorer"
        return scorer

    @pytest.mark.parametrize("speedup", [None, 0.5, 2.0, 10.0])
    def test_not_accepted_scores_zero(self, scorer: Scorer, speedup: float | None) -> None:
        evaluation = EvaluationSummary(accepted=False, performance_measured=True, speedup=speedup)
        outcome = scorer.score(evaluation)
        assert (outcome.score, outcome.eligible) == (0.0, False)
        assert outcome.reason, "an ineligible outcome must say why"

    @pytest.mark.parametrize("speedup", [None, 2.0, 10.0])
    def test_not_measured_scores_zero(self, scorer: Scorer, speedup: float | None) -> None:
        evaluation = EvaluationSummary(accepted=True, performance_measured=False, speedup=speedup)
        outcome = scorer.score(evaluation)
        assert (outcome.score, outcome.eligible) == (0.0, False)
        assert outcome.reason, "an ineligible outcome must say why"

    @pytest.mark.parametrize("speedup", SPEEDUP_GRID + ODD_SPEEDUPS)
    def test_score_is_in_unit_interval(self, scorer: Scorer, speedup: float | None) -> None:
        outcome = scorer.score(measured(speedup))
        assert isinstance(outcome, ScoreOutcome)
        assert isinstance(outcome.score, float) and 0.0 <= outcome.score <= 1.0, outcome

    def test_score_is_monotonic_in_speedup(self, scorer: Scorer) -> None:
        scores = [scorer.score(measured(s)).score for s in SPEEDUP_GRID]
        pairs = list(zip(SPEEDUP_GRID, scores, strict=True))
        assert scores == sorted(scores), f"score decreases somewhere in {pairs}"


# --------------------------------------------------------------------------- agents


def snapshot(root: Path, exclude: tuple[Path, ...]) -> dict[str, str]:
    """Every path below ``root`` (outside ``exclude``) with a digest of what it is."""
    state: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if any(path == ex or path.is_relative_to(ex) for ex in exclude):
            continue
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            state[rel] = f"link:{path.readlink()}"
        elif path.is_file():
            state[rel] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            state[rel] = "dir"
    return state


class AgentContract(PluginContract):
    """An agent reports what happened in an ``AgentExecution``, never raises, and only writes to
    its workspace (and its logs folder)."""

    record_type = AgentSpec
    task_id: ClassVar[str] = DEFAULT_TASK_ID

    @pytest.fixture
    def agent(self, spec: AgentSpec, plugin_options: dict[str, Any]) -> Agent:
        agent = spec.make(plugin_options)
        assert isinstance(agent, Agent), f"{spec.name}'s factory must return an Agent"
        return agent

    @pytest.fixture
    def invocation(self, request: pytest.FixtureRequest, make_invocation: Any) -> AgentInvocation:
        return make_invocation(provided(request, "task_id"))

    def test_needs_network_is_declared_for_a_cli_agent(self, spec: AgentSpec,
                                                        agent: Agent) -> None:
        """A CLI agent (one ``aka check-agents`` can check) reaches its model over the network:
        its record must say so, or an isolating executor (docker) cuts it off."""
        assert spec.needs_network == isinstance(agent, CheckedAgent), (
            f"{spec.name}: AgentSpec.needs_network must be "
            f"{isinstance(agent, CheckedAgent)} for {type(agent).__name__}")

    def test_run_returns_an_execution(self, agent: Agent, invocation: AgentInvocation) -> None:
        execution = agent.run(invocation)
        assert isinstance(execution, AgentExecution)
        assert execution.status in get_args(AgentStatus)
        assert math.isfinite(execution.duration_seconds) and execution.duration_seconds >= 0

    def test_writes_only_inside_the_workspace(
        self, agent: Agent, invocation: AgentInvocation, tmp_path: Path
    ) -> None:
        sentinel = invocation.workspace.parent / "sentinel"
        sentinel.mkdir()
        (sentinel / "kernel.py").write_text("# must stay untouched\n", encoding="utf-8")
        exclude = (invocation.workspace, invocation.logs_dir)
        before = snapshot(tmp_path, exclude)
        agent.run(invocation)
        after = snapshot(tmp_path, exclude)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"the agent changed paths outside its workspace: {changed}"


# --------------------------------------------------------------------------- backends


class BackendContract(PluginContract):
    """A backend describes its worker environment and loads candidates, reporting build errors
    with file and line."""

    record_type = BackendSpec

    @pytest.fixture
    def backend(self, spec: BackendSpec) -> Backend:
        backend = spec.factory()
        assert isinstance(backend, Backend), f"{spec.name}'s factory must return a Backend"
        return backend

    @staticmethod
    def package() -> str:
        return f"aka_contract_{uuid.uuid4().hex[:12]}"

    def test_worker_environment_is_str_to_str(self, backend: Backend) -> None:
        env = backend.worker_environment("cpu")
        assert isinstance(env, dict)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()), env

    def test_readiness_says_whether_it_builds_and_runs(self, backend: Backend) -> None:
        ready = backend.readiness()
        assert isinstance(ready, BackendReadiness), "readiness() must return a BackendReadiness"
        assert isinstance(ready.build, bool) and isinstance(ready.run, bool)
        assert ready.detail, "readiness().detail must say what was found or what to install"
        assert not (ready.run and not ready.build), "a backend that cannot build cannot run"

    def test_load_callable_loads_a_tiny_module(self, backend: Backend, tmp_path: Path) -> None:
        (tmp_path / "helpers.py").write_text("OFFSET = 1\n", encoding="utf-8")
        (tmp_path / "tiny.py").write_text(
            "from . import helpers\n\n\ndef add_one(x):\n    return x + helpers.OFFSET\n",
            encoding="utf-8",
        )
        fn = backend.load_callable(tmp_path, "tiny.py:add_one", self.package())
        assert callable(fn)
        assert fn(41) == 42

    def test_syntax_error_raises_build_error_with_file_and_line(
        self, backend: Backend, tmp_path: Path
    ) -> None:
        (tmp_path / "broken.py").write_text(
            "def fine():\n    return 1\n\ndef broken(:\n    pass\n", encoding="utf-8"
        )
        with pytest.raises(BuildError) as info:
            backend.load_callable(tmp_path, "broken.py:broken", self.package())
        assert info.value.file is not None and info.value.file.endswith("broken.py")
        assert info.value.line == 4


# --------------------------------------------------------------------------- executors


def executor_run(run_dir: Path, task_ids: Sequence[str], run_task: TaskRunner,
                 **fields: Any) -> Run:
    """A ``Run`` handle for an executor under test, without a run directory on disk: a CPU run
    of the ``noop`` agent whose ``run_task`` is the given callback (``fields`` replace any of the
    handle's fields: ``config``, ``meta``, ``task_finished``...)."""
    from aka_core.plugin.host import PluginHost

    values: dict[str, Any] = {
        "run_dir": run_dir, "task_ids": tuple(task_ids),
        "config": RunConfig(agent=AgentConfig(name="noop"), tasks=("demo",),
                            target_gpu_model="cpu"),
        "tasks_root": run_dir.parent / "tasks", "device": "cpu", "meta": {},
        "host": PluginHost(load_entry_points=False), "run_task": run_task,
    }
    return Run(**(values | fields))


class ExecutorContract(PluginContract):
    """An executor runs every task id of its ``Run`` exactly once through ``run.run_task``.

    This suits executors that call ``run_task`` in the test's process; one that starts
    ``aka run-task`` elsewhere overrides these tests with its own (``executor_run`` builds the
    handle for them).
    """

    record_type = ExecutorSpec
    task_ids: ClassVar[tuple[str, ...]] = ("demo/a", "demo/b", "other/c")

    @pytest.fixture
    def executor(self, spec: ExecutorSpec, plugin_options: dict[str, Any]) -> Executor:
        executor = spec.make(plugin_options)
        assert isinstance(executor, Executor), f"{spec.name}'s factory must return an Executor"
        return executor

    def test_runs_every_task_exactly_once(
        self, request: pytest.FixtureRequest, executor: Executor, tmp_path: Path
    ) -> None:
        task_ids = list(provided(request, "task_ids"))
        calls: list[str] = []
        executor.execute(executor_run(tmp_path / "run", task_ids, calls.append))
        assert sorted(calls) == sorted(task_ids)

    def test_no_tasks_runs_nothing(self, executor: Executor, tmp_path: Path) -> None:
        calls: list[str] = []
        executor.execute(executor_run(tmp_path / "run", [], calls.append))
        assert calls == []


# --------------------------------------------------------------------------- task formats


class TaskFormatContract(PluginContract):
    """A task format recognises its folders (and no empty one) and loads them into a task whose
    every named file exists, whose cases and tolerances are given, and whose ids stay as given;
    a folder it does not recognise is a ``ConfigError``, never a crash."""

    record_type = TaskFormatSpec

    @pytest.fixture
    def task_format(self, spec: TaskFormatSpec) -> TaskFormat:
        fmt = spec.factory()
        assert isinstance(fmt, TaskFormat), f"{spec.name}'s factory must return a TaskFormat"
        return fmt

    @pytest.fixture
    def folder(self, request: pytest.FixtureRequest) -> Path:
        folder = provided(request, "task_folder")
        assert isinstance(folder, Path) and folder.is_dir(), "task_folder must be a folder"
        return folder

    def test_recognises_its_folder_and_not_an_empty_one(
        self, task_format: TaskFormat, folder: Path, tmp_path: Path
    ) -> None:
        assert task_format.is_task_dir(folder)
        empty = tmp_path / "contract-empty"
        empty.mkdir()
        assert not task_format.is_task_dir(empty)
        assert not task_format.is_task_dir(tmp_path / "contract-missing")

    def test_loads_a_task_whose_files_exist(
        self, spec: TaskFormatSpec, task_format: TaskFormat, folder: Path
    ) -> None:
        task = task_format.load(folder, "family/contract")
        assert task.id == "family/contract" and task.format == spec.name
        root = Path(task.root)
        for ref in (task.entrypoint, task.reference, task.baseline, task.inputs):
            file_name = ref.partition(":")[0]
            assert (root / file_name).is_file(), f"{ref} names no file below {root}"
        assert task.editable and all((root / f).is_file() for f in task.editable)
        assert task.cases, "a task has at least one case"
        if task.harness is None:  # a task judged by its own commands compares nothing itself
            assert task.tolerance, "a task gives tolerances for its floating-point outputs"
        else:
            assert task.harness.correctness, "a harness task has a correctness command"

    def test_a_folder_it_does_not_recognise_is_a_config_error(
        self, task_format: TaskFormat, tmp_path: Path
    ) -> None:
        empty = tmp_path / "contract-not-a-task"
        empty.mkdir()
        (empty / "notes.txt").write_text("not a task\n", encoding="utf-8")
        with pytest.raises(ConfigError):
            task_format.load(empty, "family/none")
