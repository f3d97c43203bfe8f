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
    from aka_core.agent_runtime import AgentCheck
    from aka_core.models import (
        AgentExecution,
        DeviceInfo,
        EvaluationSummary,
        ScoreOutcome,
        Task,
    )

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


@attrs.frozen(kw_only=True)
class ScorerSpec(PluginRecord):
    """A reward function. ``factory(options) -> Scorer``."""

    kind: ClassVar[str] = "scorer"


@attrs.frozen(kw_only=True)
class ExecutorSpec(PluginRecord):
    """Where a task's lifecycle runs. ``factory(options) -> Executor``."""

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

        In a compile-only evaluation (``aka_core.native.compile_only()``) build, never run. May
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
        ``aka_core.failures.FailureKind``: faults of the evaluator are ``INFRA_ERROR``, of the
        task ``TASK_ERROR``; never raise for the candidate's."""


class TaskRunner(Protocol):
    def __call__(self, task_id: str) -> None: ...


@runtime_checkable
class Executor(Protocol):
    def execute(self, run_dir: Path, task_ids: list[str], run_task: TaskRunner) -> None:
        """Run the lifecycle of every task id (``run_task`` runs one, in this process).

        An executor that runs elsewhere starts ``aka run-task RUN_DIR TASK_ID`` there instead.
        """
