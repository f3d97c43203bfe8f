"""Typed records that plugins register, and the Protocols the core calls them through.

A plugin's registration hook returns a list of these frozen records. The core never calls a plugin
through ``pm.hook`` directly: it asks the host for a record by name and calls its factory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from aka_core.kits.agent_runtime import AgentCheck
    from aka_core.models import (
        AgentExecution,
        DeviceInfo,
        EvaluationSummary,
        RunConfig,
        ScoreOutcome,
        Task,
        TaskResult,
    )
    from aka_core.plugin.host import PluginHost

JsonSchema = Mapping[str, Any]


@attrs.frozen(kw_only=True)
class PluginRecord:
    """What every registration record has. ``kind`` is fixed by each subclass."""

    kind: ClassVar[str] = "plugin"
    name: str = attrs.field(validator=attrs.validators.matches_re(r"^[a-z0-9][a-z0-9_.-]*$"))
    factory: Callable[..., Any]
    description: str = ""
    config_schema: JsonSchema | None = None
    """JSON Schema of the plugin's own ``options`` section in a run config (None: no options)."""
    options_class: type | None = None
    """The attrs class the ``options`` (validated against ``config_schema``) are structured into,
    through the one converter (``aka_core.convert``), before ``factory`` gets them: typed values
    and the defaults of options left out, which match the schema's ``default`` (a core test
    compares them). None: a plugin that takes no options: its factory gets them as a plain
    dict."""

    def make(self, options: Mapping[str, Any] | None = None) -> Any:
        """Build the implementation from a run config's ``options`` section: the one way the core
        calls ``factory`` of a kind that takes options (agent, scorer, executor)."""
        from aka_core.convert import structure

        given = dict(options or {})
        if self.options_class is None:
            return self.factory(given)
        try:
            typed = structure(given, self.options_class)
        except ExceptionGroup as group:  # the converter's: the option's own error says what
            leaf: BaseException = group
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            raise leaf from None
        return self.factory(typed)


@attrs.frozen(kw_only=True)
class TaskFormatSpec(PluginRecord):
    """A task format: finds and loads task folders. ``factory() -> TaskFormat``."""

    kind: ClassVar[str] = "task_format"
    marker_file: str = "task.yaml"
    judge: Callable[[], TaskJudge] | None = None
    """A format whose tasks are judged by the format's own judge (``judge() -> TaskJudge``), not
    by the operator judge nor by the task's commands: e2e serving tasks, whose runner is a
    server. None: the operator judge (or ``Task.harness``)."""


@attrs.frozen(kw_only=True)
class AgentSpec(PluginRecord):
    """An agent that produces a candidate in a workspace. ``factory(options) -> Agent``."""

    kind: ClassVar[str] = "agent"
    needs_network: bool = False
    """The agent reaches its model over the network (a CLI agent, whose agent object is a
    ``CheckedAgent``): an executor that isolates tasks (docker) gives its tasks a network. An
    in-process agent (noop, replay, a policy) gets none."""


@attrs.frozen(kw_only=True)
class BackendSpec(PluginRecord):
    """A language/runtime that builds and loads candidates. ``factory() -> Backend``."""

    kind: ClassVar[str] = "backend"
    compile_only_architecture: str | None = None
    """Set when the backend builds candidates for a GPU on a host without one (nvcc, clang's HIP
    offload): a task that needs a GPU is then evaluated compile-only on a CPU host, for the
    task's first ``requires.architectures`` entry or else this architecture, and its result says
    that nothing ran (status ``compile_only``)."""
    vendors: tuple[str, ...] = ()
    """The GPU vendors (``nvidia``, ``amd``) whose GPUs run this backend's kernels: a task of
    this backend is skipped on a target of another vendor, and on a ``cpu`` target. Empty: any
    (Triton, plain Python)."""


@attrs.frozen(kw_only=True)
class ScorerSpec(PluginRecord):
    """A reward function. ``factory(options) -> Scorer``."""

    kind: ClassVar[str] = "scorer"


@attrs.frozen(kw_only=True)
class ExecutorSpec(PluginRecord):
    """Where a task's lifecycle runs. ``factory(options) -> Executor``.

    A run uses the executor its config names; ``local`` with ``resources`` naming GPUs is the
    builtin ``local-parallel`` (one worker process per GPU or group)."""

    kind: ClassVar[str] = "executor"
    runs_elsewhere: bool = False
    """Tasks run on other hosts (``aka run-task`` in a job or container): the device is chosen
    and checked against the target there, and interrupted attempts are set aside there."""


RECORD_KINDS: dict[str, type[PluginRecord]] = {
    cls.kind: cls for cls in (TaskFormatSpec, AgentSpec, BackendSpec, ScorerSpec, ExecutorSpec)
}


# --------------------------------------------------------------------------- protocols


@runtime_checkable
class TaskFormat(Protocol):
    def is_task_dir(self, path: Path) -> bool:
        """Whether ``path`` is a task folder of this format."""

    def load(self, task_dir: Path, task_id: str) -> Task:
        """Load and validate the task in ``task_dir``; raise ``ConfigError`` on bad input."""


@attrs.frozen(kw_only=True)
class AgentInvocation:
    """Everything an agent is given for one task."""

    task: Task
    workspace: Path
    logs_dir: Path
    prompt: str
    timeout_seconds: float
    environment: Mapping[str, str]
    target_gpu_model: str
    protected: tuple[str, ...] = ()
    """Folders a confined agent must not see (the tasks, the stored solutions, the run)."""
    readable: tuple[str, ...] = ()
    """Folders it may read although they lie in a protected one (the task's preserved copy,
    which ``aka selfcheck`` loads; its task.yaml lists no held-out case)."""


@runtime_checkable
class Agent(Protocol):
    def run(self, invocation: AgentInvocation) -> AgentExecution:
        """Edit ``invocation.workspace``; return what happened. Never raise for agent failures."""


@runtime_checkable
class CheckedAgent(Agent, Protocol):
    """An agent that can say whether it is ready before a run (a CLI agent:
    ``agent_runtime.CliAgent``): ``aka check-agents`` asks it; an agent without ``check`` runs
    in-process, with nothing to install or log in to."""

    def check(self) -> AgentCheck:
        """Installed, which version, logged in (None: cannot tell)."""


@attrs.frozen(kw_only=True)
class BackendReadiness:
    """What ``Backend.readiness()`` reports for ``aka smoke``."""

    build: bool
    """Candidates build here (the compiler or DSL is installed)."""
    run: bool
    """Candidates run and are timed here (a GPU of a vendor this backend targets is visible)."""
    detail: str
    vendors: tuple[str, ...] = ()
    """GPU vendors the backend runs on (``nvidia``, ``amd``); empty: any, or the CPU."""


@runtime_checkable
class Backend(Protocol):
    """Builds and loads candidates. ``load_callable`` and ``prepare`` run in a confined runner
    (one per side); ``describe_device`` in the judge."""

    def worker_environment(self, device: str) -> dict[str, str]:
        """Environment variables the runners need for ``device`` ("cuda" or "cpu")."""

    def describe_device(self, device: str) -> DeviceInfo:
        """Facts about the device the evaluation runs on."""

    def load_callable(self, root: Path, ref: str, package: str) -> Callable[..., Any]:
        """Load ``file.py:function`` below ``root`` as a module of ``package``.

        Raise ``aka_core.errors.BuildError`` (with file and line where known) when it does not build.
        """

    def prepare(self, fn: Callable[..., Any], inputs: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Force compilation (e.g. a first launch) so build errors surface in the compile phase.

        In a compile-only evaluation (``aka_core.kits.native.compile_only()``) build, never run. May
        return facts about what was built (code objects, registers): the evaluation record keeps
        them per side under ``compile.sides`` (``compile_only.sides`` in a compile-only one).
        """

    def readiness(self) -> BackendReadiness:
        """Whether this host can build and run this backend's candidates (``aka smoke``)."""


@runtime_checkable
class Scorer(Protocol):
    def score(self, evaluation: EvaluationSummary) -> ScoreOutcome:
        """Turn an evaluation into a reward. Must return 0 when not eligible."""


@attrs.frozen(kw_only=True)
class JudgeRequest:
    """One evaluation for a format's own judge (``TaskFormatSpec.judge``). The judge is trusted
    (it runs in aka's process); the code it runs from ``workspace`` and ``baseline`` is not, and
    runs confined (``confinement``, ``protected``)."""

    task: Task
    workspace: Path | None
    """The candidate's folder (the task's editable files, the rest restored); None: the baseline
    is judged against itself (``aka validate --run``)."""
    baseline: Path
    """The preserved, read-only copy of the task: the evaluator's files and the baseline."""
    logs: Path
    """A folder the judge may write its logs to."""
    device: str
    """"cuda" or "cpu"."""
    measure_performance: bool = True
    held_out: bool = True
    """Judge with what the agent never saw (secret seeds) besides the visible work."""
    held_out_seed: int | None = None
    """The secret's seed, the same for every candidate (None: a fresh one per evaluation)."""
    protected: tuple[str, ...] = ()
    """Folders no confined process may read."""
    confinement: str = "required"
    """``required``, ``best_effort`` or ``off`` (``EvaluationConfig.confinement``)."""
    quick: bool = False
    """An advisory check (``aka selfcheck``): the judge may measure less."""


@runtime_checkable
class TaskJudge(Protocol):
    def evaluate(self, request: JudgeRequest) -> dict[str, Any]:
        """The evaluation record: the operator record's keys that ``evaluate.outcome`` and
        ``lifecycle.decide_acceptance`` read (``failure``, ``compile``, ``correctness``,
        ``performance``, ``confinement``, ``wall_clock_check``). ``failure.kind`` is a
        ``aka_core.evaluation.failures.FailureKind``: faults of the evaluator are ``INFRA_ERROR``, of the
        task ``TASK_ERROR``; never raise for the candidate's."""


class TaskRunner(Protocol):
    def __call__(self, task_id: str) -> None: ...


def _no_event(task_id: str) -> None:
    return None


@attrs.frozen(kw_only=True)
class Run:
    """One run as its executor sees it: what ``run.yaml`` says, and the calls back into the run.

    The core builds it from ``run.yaml`` when a run starts or resumes and hands it to
    ``Executor.execute``; the executor decides where each of ``task_ids`` runs.
    """

    run_dir: Path
    task_ids: tuple[str, ...]
    """The tasks to run now, in run order: those of the run still without a result."""
    config: RunConfig
    tasks_root: Path
    """The folder the run's tasks are loaded from (``aka run-task`` loads them there too)."""
    device: str
    """Where evaluations run: ``cuda``, ``cpu``, or ``chosen-on-the-node`` where the executor runs
    tasks elsewhere (``ExecutorSpec.runs_elsewhere``: ``aka run-task`` chooses it there)."""
    meta: Mapping[str, Any]
    """The whole of ``run.yaml`` as read (plugin versions, host facts, the ``parallel`` plan)."""
    host: PluginHost
    """The plugins of this process (for an executor that asks about the run's agent or scorer)."""
    run_task: TaskRunner
    """Run one task's whole lifecycle in this process, then update the progress and reports:
    leftovers of an interrupted attempt are set aside first, as ``aka run-task`` does."""
    task_started: Callable[[str], None] = _no_event
    """Say that a task started elsewhere (a worker, a container, a job): the progress shows it."""
    task_finished: Callable[[str], TaskResult | None] = _no_event
    """Say that a task run elsewhere ended: its result (read from the run directory and
    returned; None if it left none) reaches the progress, and the reports are regenerated."""


@runtime_checkable
class Executor(Protocol):
    def execute(self, run: Run) -> None:
        """Run the lifecycle of every task of ``run.task_ids``.

        In this process: call ``run.run_task(task_id)``. Elsewhere: start ``aka run-task
        RUN_DIR TASK_ID`` there (the same lifecycle, writing into the shared run directory) and
        call ``run.task_finished(task_id)`` when it has ended. Return when every task has ended;
        a task left without a result is redone by ``aka run --resume``.
        """
