"""The lifecycle of one task: select, workspace, agent, integrity, evaluate, score, record.

Every step dispatches by name through the plugin host (task format, agent, backend, scorer).
A failure in one task becomes that task's result (status ``error`` with the reason); it never
stops the run. The task result is the record of truth; the agent's own message is never a verdict.

An agent whose provider failed (rate-limited, a server or network failure: ``PROVIDER_FAILURES``)
is started again per ``agent.retry``; when retries run out the task ends as ``infra_error``,
unjudged, since nothing about the candidate was learned. When aka itself is stopped (Ctrl-C,
SIGTERM) during a task, the task gets no result (``aka run --resume`` redoes it) but its folder gets
``interrupted.json``: the signal, the step it stopped, and when.
"""

from __future__ import annotations

import contextvars
import os
import shutil
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs
import structlog

from aka_core import gpus
from aka_core.builtin.operator_tasks import load_task
from aka_core.convert import structure, unstructure
from aka_core.evaluation import evaluate as evaluate_judge
from aka_core.evaluation import integrity
from aka_core.evaluation.failures import TIMING_FAILURES, FailureKind
from aka_core.evaluation.record import (
    EvaluationRecord,
    EvaluatorIntegrity,
    Failure,
    Gates,
    as_record,
)
from aka_core.evaluation.request import EvaluationRequest, SideRef, cases_for
from aka_core.interrupt import INTERRUPTS, signal_name
from aka_core.kits import native
from aka_core.models import (
    PROVIDER_FAILURES,
    SETUP_FAILURES,
    Acceptance,
    AgentExecution,
    CaseTimes,
    EvaluationSummary,
    Gate,
    IntegrityReport,
    RunConfig,
    Task,
    TaskResult,
    TimingPolicy,
)
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import AgentInvocation, JudgeRequest, TaskJudge
from aka_core.run.prompt import build_prompt
from aka_core.run.results import agent_cost_path, now_iso, task_dir, write_task_result
from aka_core.run.workspace import (
    changed_since,
    check_and_restore,
    check_outside_workspace,
    digests,
    prepare_workspace,
    preserve_baseline,
    remove_tree,
)
from aka_core.service import state_registry
from aka_core.yamlio import write_json_atomic

log = structlog.get_logger("aka.lifecycle")

# Variables an agent process inherits; everything else (tokens of other tools, cloud keys) is dropped.
AGENT_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "SHELL",
                  "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@attrs.frozen(kw_only=True)
class TaskContext:
    """What every task of a run shares."""

    run_dir: Path
    config: RunConfig
    host: PluginHost
    tasks_root: Path
    device: str
    """"cuda" or "cpu": where evaluations run."""
    evaluator: integrity.Manifest = attrs.Factory(integrity.snapshot)
    """Digests of aka's code and Python's startup hooks when the run (or this worker) started:
    each evaluation first checks that they are unchanged."""
    protected_extra: tuple[Path, ...] = ()
    """More folders no runner may read (the reward service's queue, with other candidates)."""


AGENT_PHASE_FILE = "agent_phase.json"
INTERRUPTED_FILE = "interrupted.json"
"""In a task folder without a result: aka was stopped while it ran the task (``record_interruption``)."""

_STEP: contextvars.ContextVar[str] = contextvars.ContextVar("aka_task_step", default="select")
"""The step the current task is in (select, workspace, agent, integrity, evaluation, which
includes scoring): what an interruption record names."""


@attrs.frozen(kw_only=True)
class AgentPhase:
    """What the agent step hands to the evaluation step. Persisted in the task folder when the
    two run apart (``aka run-task --phase``), e.g. in two containers: the agent's with a network,
    the evaluation's without."""

    base: dict[str, Any]
    execution: AgentExecution
    workspace_before: dict[str, str]
    task_before: dict[str, str]
    baseline_before: dict[str, str]


def run_task(ctx: TaskContext, task_id: str) -> TaskResult:
    """Run the seven steps for one task and write its result. Never raises for task failures."""
    def both(base: dict[str, Any]) -> TaskResult:
        phase = _agent_phase(ctx, task_id, base)
        if isinstance(phase, TaskResult):
            return phase
        return _evaluation_phase(ctx, phase)

    result = _guarded(ctx, task_id, both)
    assert result is not None
    return result


def run_agent_phase(ctx: TaskContext, task_id: str) -> TaskResult | None:
    """Steps 1-3; persists what the evaluation step needs. Returns the task's result only when
    the task ends here (skipped, or an error); None when the evaluation step should follow."""
    def agent_only(base: dict[str, Any]) -> TaskResult | None:
        phase = _agent_phase(ctx, task_id, base)
        if isinstance(phase, TaskResult):
            return phase
        write_json_atomic(task_dir(ctx.run_dir, task_id) / AGENT_PHASE_FILE, unstructure(phase))
        return None

    return _guarded(ctx, task_id, agent_only)


def run_evaluation_phase(ctx: TaskContext, task_id: str) -> TaskResult:
    """Steps 4-7 after ``run_agent_phase`` ran (possibly elsewhere)."""
    def evaluate_only(base: dict[str, Any]) -> TaskResult:
        import json

        path = task_dir(ctx.run_dir, task_id) / AGENT_PHASE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: run the agent phase first")
        phase = structure(json.loads(path.read_text(encoding="utf-8")), AgentPhase)
        base.update(phase.base)
        return _evaluation_phase(ctx, phase)

    result = _guarded(ctx, task_id, evaluate_only)
    assert result is not None
    return result


def _guarded(ctx: TaskContext, task_id: str,
             step: Callable[[dict[str, Any]], TaskResult | None]) -> TaskResult | None:
    """Run ``step``; turn any failure into the task's error result; write the result if any."""
    started = time.monotonic()
    base: dict[str, Any] = {"task_id": task_id, "started_at": now_iso()}
    structlog.contextvars.bind_contextvars(task=task_id)
    _STEP.set("select")
    try:
        result = step(base)
    except INTERRUPTS as exc:  # aka is stopping: no result, so that --resume redoes the task
        record_interruption(ctx.run_dir, task_id, exc, base["started_at"],
                            round(time.monotonic() - started, 3))
        raise
    except Exception as exc:
        log.error("task failed", error=f"{type(exc).__name__}: {exc}")
        result = TaskResult(status="error", error=f"{type(exc).__name__}: {exc}",
                            evaluation=EvaluationRecord(traceback=traceback.format_exc()[-4000:]), **base)
    finally:
        structlog.contextvars.unbind_contextvars("task")
    if result is None:
        return None
    result = attrs.evolve(result, finished_at=now_iso(),
                          duration_seconds=round(time.monotonic() - started, 3))
    write_task_result(ctx.run_dir, result)
    ctx.host.notify("aka_after_task", run_dir=ctx.run_dir, result=result)
    return result


def record_interruption(run_dir: Path, task_id: str, exc: BaseException, started_at: str,
                        seconds: float) -> None:
    """Write ``interrupted.json`` in the task's folder: aka was stopped during this task. The
    folder (and this record) is moved under ``.interrupted/`` when the run is resumed."""
    step = _STEP.get()
    sig = signal_name(exc)
    record = {
        "task_id": task_id, "signal": sig, "step": step, "started_at": started_at,
        "interrupted_at": now_iso(), "seconds": seconds,
        "message": f"aka was stopped by {sig} during the {step} step"
                   + (" (the agent CLI and the processes it started were stopped)"
                      if step == "agent" else "")
                   + "; the task has no result: `aka run --resume RUN_DIR` runs it again",
    }
    log.warning("task interrupted", signal=sig, step=step)
    try:
        write_json_atomic(task_dir(run_dir, task_id) / INTERRUPTED_FILE, record)
    except OSError as exc_:  # never hide the interruption itself
        log.error("cannot record the interruption", error=str(exc_))


def _agent_phase(ctx: TaskContext, task_id: str, base: dict[str, Any]) -> AgentPhase | TaskResult:
    # 1. Select
    task = load_task(ctx.tasks_root.joinpath(*task_id.split("/")), task_id, ctx.host)
    base.update(family=task.family, backend=task.backend)
    reason = gpus.skip_reason(task, ctx.config.target_gpu_model,
                              ctx.host.backend_vendors(task.backend)) or cpu_unrunnable(
        task, ctx.device, ctx.host)
    if reason:
        log.info("task skipped", reason=reason)
        return TaskResult(status="skipped", skip_reason=reason, **base)
    # 2. Workspace
    _STEP.set("workspace")
    tdir = task_dir(ctx.run_dir, task_id)
    workspace, baseline, logs = tdir / "workspace", tdir / "baseline", tdir / "logs"
    remove_tree(workspace)
    logs.mkdir(parents=True, exist_ok=True)
    task_before = digests(task.root)
    baseline_before = preserve_baseline(task, baseline)  # read-only, verified after the agent
    before = prepare_workspace(task, workspace)
    # 3. Agent
    _STEP.set("agent")
    execution = run_agent(ctx, task, workspace, logs)
    write_json_atomic(agent_cost_path(ctx.run_dir, task_id),
                      {"task_id": task_id, "agent": execution.agent,
                       **unstructure(execution.usage)})
    if execution.status in SETUP_FAILURES:
        log.warning("agent could not start", status=execution.status)
        return TaskResult(
            status="infra_error", agent_execution=execution,
            error=f"the agent could not work ({execution.status}: {execution.message}); the "
                  "candidate was not judged: fix the setup (aka check-agents CONFIG) and run "
                  "the task again", **base)
    if execution.status in PROVIDER_FAILURES:
        # The provider, not the agent nor its candidate, failed: nothing to judge or score.
        log.warning("agent step failed outside the agent", status=execution.status,
                    attempts=execution.attempts)
        what = ("was rate-limited by its provider" if execution.status == "rate_limited"
                else "failed for reasons outside the agent (its provider or the network)")
        return TaskResult(
            status="infra_error", agent_execution=execution,
            error=f"the agent {what} in each of its {execution.attempts} attempt(s) "
                  f"({execution.message}); the candidate was not judged: run the task again "
                  "later (agent.retry sets the retries)", **base)
    return AgentPhase(base=dict(base), execution=execution, workspace_before=before,
                      task_before=task_before, baseline_before=baseline_before)


def _evaluation_phase(ctx: TaskContext, phase: AgentPhase) -> TaskResult:
    base = dict(phase.base)
    task_id = base["task_id"]
    task = load_task(ctx.tasks_root.joinpath(*task_id.split("/")), task_id, ctx.host)
    tdir = task_dir(ctx.run_dir, task_id)
    workspace, baseline, logs = tdir / "workspace", tdir / "baseline", tdir / "logs"
    # 4. Integrity
    _STEP.set("integrity")
    integrity = check_and_restore(task, workspace, phase.workspace_before)
    outside = check_outside_workspace(task, baseline, phase.task_before, phase.baseline_before)
    if outside:
        log.warning("task files changed outside the workspace", files=outside)
        integrity = attrs.evolve(integrity, outside_changes=tuple(outside))
    # 5-6. Evaluate and score (7. Record: the caller writes the result)
    _STEP.set("evaluation")
    return evaluate_and_score(ctx, task, workspace, baseline, logs, phase.execution, integrity,
                              base)


def run_agent(ctx: TaskContext, task: Task, workspace: Path, logs: Path) -> AgentExecution:
    """The agent step, started again per ``agent.retry`` while its provider fails: each retry
    waits its backoff, starts from the task's initial workspace, and keeps the earlier attempt's
    logs as ``agent.attempt-N.*``. The execution returned is the last attempt's."""
    retry = ctx.config.agent.retry
    attempt, retried = 1, 0
    history: list[str] = []
    while True:
        execution = _run_agent_once(ctx, task, workspace, logs)
        if retried >= retry.retries(execution.status) or execution.status not in PROVIDER_FAILURES:
            break
        retried += 1
        wait = retry.backoff(retried)
        history.append(f"attempt {attempt}: {execution.status}")
        log.warning("agent attempt failed outside the agent; retrying", status=execution.status,
                    attempt=attempt, wait_seconds=wait, message=execution.message)
        _set_attempt_aside(logs, attempt)
        time.sleep(wait)
        remove_tree(workspace)
        prepare_workspace(task, workspace)
        attempt += 1
    if attempt == 1:
        return execution
    note = f"attempt {attempt}; earlier: " + ", ".join(history) + \
        f" (their logs: {logs.name}/agent.attempt-N.*)"
    return attrs.evolve(execution, attempts=attempt,
                        message=f"{note}; {execution.message}" if execution.message else note)


def _set_attempt_aside(logs: Path, attempt: int) -> None:
    """Keep an attempt's event stream and stderr before the next attempt appends to them."""
    for name, suffix in (("agent.jsonl", "jsonl"), ("agent.stderr.log", "stderr.log")):
        path = logs / name
        if path.exists():
            path.rename(logs / f"agent.attempt-{attempt}.{suffix}")
    home = logs / "agent_home"
    if home.is_dir():  # a fresh private home, as the first attempt had
        shutil.move(str(home), str(logs / f"agent_home.attempt-{attempt}"))


def _run_agent_once(ctx: TaskContext, task: Task, workspace: Path, logs: Path) -> AgentExecution:
    cfg = ctx.config.agent
    started = time.monotonic()
    structlog.contextvars.bind_contextvars(agent=cfg.name)
    try:
        agent = ctx.host.agent(cfg.name).make(cfg.options)
        invocation = AgentInvocation(
            task=task, workspace=workspace, logs_dir=logs,
            prompt=build_prompt(task, ctx.config.target_gpu_model),
            timeout_seconds=cfg.agent_seconds,
            environment={k: v for k, v in os.environ.items() if k in AGENT_ENV_KEEP},
            target_gpu_model=ctx.config.target_name,
            protected=agent_protected_paths(task, ctx.tasks_root, ctx.run_dir,
                                            *ctx.protected_extra),
            readable=(str((workspace.parent / "baseline").resolve()),),
        )
        execution = agent.run(invocation)
        if not isinstance(execution, AgentExecution):
            raise TypeError(f"agent {cfg.name!r} returned {type(execution).__name__}, "
                            "expected AgentExecution")
        log.info("agent finished", status=execution.status, seconds=execution.duration_seconds)
        return execution
    except Exception as exc:  # a broken agent plugin fails this task's agent step only
        log.error("agent raised", error=f"{type(exc).__name__}: {exc}")
        return AgentExecution(agent=cfg.name, status="failed",
                              duration_seconds=round(time.monotonic() - started, 3),
                              message=f"the agent plugin raised {type(exc).__name__}: {exc}")


def cpu_unrunnable(task: Task, device: str, host: PluginHost | None = None) -> str | None:
    """Why ``task`` cannot be evaluated on ``device`` when that is the CPU, or None.

    With ``host``, a task whose backend builds without the GPU is evaluable (compile-only).
    """
    if host is not None and compile_only_architecture(task, device, host) is not None:
        return None
    if device == "cpu" and not task.requires.cpu_interpreter:
        return (f"task {task.id} needs a GPU: its kernels cannot run under the CPU interpreter "
                "(requires.cpu_interpreter: false in its task.yaml)")
    return None


def compile_only_architecture(task: Task, device: str, host: PluginHost,
                              target: gpus.GpuModel | None = None) -> str | None:
    """The architecture to build ``task`` for when ``device`` cannot run it, or None to run it.

    Only on the CPU, for a task that needs a GPU, with a backend that builds without one: the
    target GPU's architecture (a run with ``target_gpu_model: MI300X`` and ``evaluation.device:
    cpu``), else the task's first ``requires.architectures`` entry, else the backend's default.
    """
    if device != "cpu" or task.requires.cpu_interpreter:
        return None
    default = host.backend(task.backend).compile_only_architecture
    if default is None:
        return None
    if target is not None and not target.is_cpu and target.architecture:
        return target.architecture
    return task.requires.architectures[0] if task.requires.architectures else default


def case_times(record: EvaluationRecord | Mapping[str, Any]) -> tuple[CaseTimes, ...]:
    """The timed cases of an evaluation record (a mapping is structured first), as scorers see
    them (a case without positive, finite medians left out)."""
    record = as_record(record)
    out = []
    for case in (record.performance.cases or []) if record.performance is not None else []:
        times = case.times()
        if times is not None:
            base, cand, sol = times
            out.append(CaseTimes(case=case.case, baseline_ms=base, candidate_ms=cand,
                                 speed_of_light_ms=sol))
    return tuple(out)


def protected_paths(task: Task, *extra: Path | None) -> tuple[str, ...]:
    """Folders no runner may read: the task's folder, and every ``tasks`` and ``tests`` folder
    beside one of its ancestors (the corpus with its held-out cases and references, the stored
    solutions), and ``extra`` (the run directory)."""
    root = task.root.resolve()
    found = [root]
    for ancestor in root.parents:
        found += [ancestor / name for name in ("tasks", "tests") if (ancestor / name).is_dir()]
    found += [p.resolve() for p in extra if p is not None]
    return tuple(sorted({str(p) for p in found}))


def agent_protected_paths(task: Task, *extra: Path | None) -> tuple[str, ...]:
    """What an agent's sandbox hides: ``protected_paths``, and the state folders of this host's
    reward services (other rollouts' queued files, their held-out draws: ``state_registry``),
    since the sandbox shows the rest of the host read-only."""
    return protected_paths(task, *extra, *state_registry.recorded())


def build_request(ctx_device: str, task: Task, workspace: Path | None, baseline: Path,
                  *, held_out: bool, measure_performance: bool, seeds: int | None,
                  time_reference: bool = False, compile_only: str | None = None,
                  confinement: str = "required", protected: tuple[str, ...] = (),
                  host: PluginHost | None = None, held_out_seed: int | None = None
                  ) -> EvaluationRequest:
    """The evaluator's files (reference, inputs) come from ``baseline``: the preserved copy of the
    task, verified after the agent ran; never from the workspace.

    Folders are sent as absolute paths: the judge runs in a scratch folder of its own.
    """
    cases, hidden = cases_for(task, device=ctx_device, held_out=held_out)
    root = str(baseline.resolve())
    env = worker_env(host, task.backend, ctx_device, compile_only) if host is not None else {}
    plugin = backend_entry_point(host, task.backend) if host is not None else None
    return EvaluationRequest(
        task_id=task.id, backend=task.backend,
        reference=SideRef(root=root, ref=task.reference),
        inputs=SideRef(root=root, ref=task.inputs),
        baseline=SideRef(root=str(baseline.resolve()), ref=task.baseline),
        candidate=None if workspace is None else SideRef(root=str(workspace.resolve()),
                                                         ref=task.entrypoint),
        cases=cases, held_out=hidden, tolerance=dict(task.tolerance), device=ctx_device,
        seeds_per_case=seeds or task.seeds_per_case,
        measure_performance=measure_performance, timing=task.timing, timeouts=task.timeouts,
        time_reference=time_reference, compile_only_architecture=compile_only,
        held_out_draws=task.held_out_draws if held_out and ctx_device != "cpu" else None,
        held_out_seed=held_out_seed, cost=task.cost, rules=task.rules, candidate_files=task.editable,
        confinement=confinement,  # type: ignore[arg-type]
        protected=protected or protected_paths(task), backend_env=env, backend_plugin=plugin,
    )


def backend_entry_point(host: PluginHost, backend: str) -> str | None:
    """The entry point that provides ``backend`` ("" for a built-in one), for the judge to load
    alone; None where it came from elsewhere (registered in this process): the judge then
    discovers every plugin."""
    from importlib import metadata

    from aka_core.plugin.host import ENTRY_POINT_GROUP

    provider = host.get("backend", backend).provider
    if provider.builtin:
        return ""
    names = {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return provider.plugin if provider.plugin in names else None


def worker_env(host: PluginHost, backend: str, device: str,
               compile_only: str | None = None) -> dict[str, str]:
    """The backend's worker variables; for a compile-only evaluation, the native build's too."""
    env = dict(host.backend(backend).factory().worker_environment(device))
    if compile_only:
        env.update({native.COMPILE_ONLY_ENV: "1", native.TARGET_ARCH_ENV: compile_only})
    return env


QUICK_TIMING = TimingPolicy(method="auto", min_pairs=5, max_pairs=40, target_ci_percent=1.0,
                            max_seconds_per_case=2.0)
"""The operator judge's timing of an advisory evaluation (``aka selfcheck``)."""


@attrs.frozen(kw_only=True)
class EvaluationOptions:
    """What one evaluation is asked for (``evaluate``): the same for a run's final evaluation,
    ``aka eval``, ``aka validate --run`` and ``aka selfcheck``."""

    device: str
    held_out: bool = True
    held_out_seed: int | None = None
    measure_performance: bool = True
    seeds: int | None = None
    """Seeds per case (None: the task's own)."""
    confinement: str = "required"
    protected: tuple[str, ...] = ()
    """Folders no runner may read (``protected_paths``); empty: the task's own."""
    compile_only: str | None = None
    """The architecture of a compile-only evaluation (``compile_only_architecture``)."""
    time_reference: bool = False
    quick: bool = False
    """Advisory (``aka selfcheck``): the judge times less."""
    by_task_commands: bool = False
    """A task with its own commands (``harness``) is judged by them (a run's evaluation)."""
    log_path: Path | None = None
    """The operator judge's log (None: a temporary file)."""


def evaluate(host: PluginHost, task: Task, workspace: Path | None, baseline: Path, logs: Path,
             options: EvaluationOptions) -> EvaluationRecord:
    """Evaluate the candidate in ``workspace`` (None: the baseline against itself) with the
    judge ``task`` has: its format's own, else the operator judge (in a process of its own),
    else (``by_task_commands``) the task's commands. The judge's record is structured here,
    once; a record that is not one is the evaluator's fault (``infra_error``)."""
    judge = format_judge(host, task)
    if judge is not None:
        log.info("evaluating with the task format's judge", format=task.format,
                 device=options.device)
        data = judge_record(judge, JudgeRequest(
            task=task, workspace=workspace, baseline=baseline, logs=logs, device=options.device,
            measure_performance=options.measure_performance, held_out=options.held_out,
            held_out_seed=options.held_out_seed, protected=options.protected,
            confinement=options.confinement, quick=options.quick))
    elif task.harness is None or not options.by_task_commands:
        request = build_request(options.device, task, workspace, baseline,
                                held_out=options.held_out,
                                measure_performance=options.measure_performance,
                                seeds=options.seeds, time_reference=options.time_reference,
                                compile_only=options.compile_only,
                                confinement=options.confinement, host=host,
                                protected=options.protected, held_out_seed=options.held_out_seed)
        if options.quick:
            request = attrs.evolve(request, timing=QUICK_TIMING)
        log.info("evaluating", device=options.device, cases=[c.name for c in request.cases],
                 compile_only=options.compile_only)
        data = evaluate_judge.evaluate(request, log_path=options.log_path)
    else:
        from aka_core.evaluation import harness

        assert workspace is not None
        log.info("evaluating with the task's own commands (harness-trusted)",
                 device=options.device)
        data = harness.evaluate(task, workspace, baseline, logs, device=options.device,
                                measure_performance=options.measure_performance,
                                protected=options.protected, confinement=options.confinement)
    try:
        return as_record(data)
    except (cattrs.BaseValidationError, TypeError, ValueError, ArithmeticError,
            RecursionError) as exc:
        details = ("; ".join(cattrs.transform_error(exc, path="record"))
                   if isinstance(exc, cattrs.BaseValidationError) else str(exc))
        log.error("the judge's record is malformed", error=details)
        return EvaluationRecord(failure=Failure(
            kind=FailureKind.INFRA_ERROR, phase="judge", retryable=False,
            message=f"the judge returned a malformed record: {details}"[:4000]))


def evaluate_and_score(ctx: TaskContext, task: Task, workspace: Path, baseline: Path, logs: Path,
                       execution: AgentExecution | None, integrity_report: IntegrityReport,
                       base: dict[str, Any]) -> TaskResult:
    ev = ctx.config.evaluation
    protected = protected_paths(task, ctx.tasks_root, ctx.run_dir, *ctx.protected_extra)
    judged_by_format = format_judge(ctx.host, task) is not None
    arch = (compile_only_architecture(task, ctx.device, ctx.host, ctx.config.target_gpu_model)
            if not judged_by_format and task.harness is None else None)
    tampered = evaluator_tampering(ctx)
    if tampered:
        return TaskResult(status="infra_error", error=tampered, agent_execution=execution,
                          integrity=integrity_report, evaluation=EvaluationRecord(
                              failure=Failure(kind=FailureKind.INFRA_ERROR, message=tampered,
                                              retryable=False)),
                          **base)
    copy_before = digests(baseline)
    record = evaluate(ctx.host, task, workspace, baseline, logs, EvaluationOptions(
        device=ctx.device, held_out=ev.held_out, held_out_seed=ev.held_out_seed,
        measure_performance=ev.measure_performance, seeds=ev.seeds_per_case,
        confinement=ev.confinement, protected=protected, compile_only=arch,
        by_task_commands=True, log_path=logs / "evaluation.log"))
    tampered = evaluator_tampering(ctx)
    if tampered:  # something changed the evaluator while this evaluation ran
        record = attrs.evolve(record, failure=Failure(
            kind=FailureKind.INFRA_ERROR, message=tampered, retryable=False))
    copy_changed = changed_since(copy_before, baseline)
    if copy_changed and not tampered:
        # The judge read its reference and inputs from this copy: a result is not to be trusted
        # when it changed or went away meanwhile (nothing the candidate can write: its sandbox
        # keeps it out), and an evaluation again is the remedy.
        record = attrs.evolve(record, failure=Failure(
            kind=FailureKind.INFRA_ERROR, retryable=True,
            message=f"the run's preserved copy of the task ({baseline}) changed while it was "
                    f"evaluated ({len(copy_changed)} file(s): {', '.join(copy_changed[:5])}); "
                    "something outside aka wrote there: not judged, run the task again"))
        integrity_report = attrs.evolve(integrity_report, outside_changes=(
            *integrity_report.outside_changes,
            *(f"baseline/{rel} (preserved copy, during the evaluation)" for rel in copy_changed)))
    record = attrs.evolve(record, evaluator_integrity=EvaluatorIntegrity(
        files=len(ctx.evaluator.files), digest=ctx.evaluator.digest, unchanged=not tampered))
    gates = evaluate_judge.outcome(record)
    failure_message = record.failure.message if record.failure is not None else ""
    if gates.infra_error:
        return TaskResult(status="infra_error", error=f"the evaluator failed (retryable): "
                          f"{failure_message}", agent_execution=execution,
                          integrity=integrity_report, evaluation=record, **base)
    if gates.task_error:
        return TaskResult(status="error", error=f"the task itself failed: "
                          f"{failure_message}", agent_execution=execution,
                          integrity=integrity_report, evaluation=record, **base)
    if gates.compile_only:
        return TaskResult(status="compile_only", agent_execution=execution,
                          integrity=integrity_report,
                          pass_compilation=gates.pass_compilation, pass_correctness=None,
                          candidate_accepted=False,
                          acceptance=decide_acceptance(record, gates, integrity_report),
                          evaluation=record, **base)
    acceptance = decide_acceptance(record, gates, integrity_report)
    summary = EvaluationSummary(accepted=acceptance.accepted,
                                performance_measured=gates.performance_measured,
                                speedup=gates.speedup, speedup_ci95=gates.ci95,
                                cases=case_times(record) if gates.performance_measured else ())
    scorer_cfg = ctx.config.scorer
    outcome = ctx.host.scorer(scorer_cfg.name).make(scorer_cfg.options).score(summary)
    return TaskResult(
        status="completed", agent_execution=execution, integrity=integrity_report,
        pass_compilation=gates.pass_compilation, pass_correctness=gates.pass_correctness,
        candidate_accepted=acceptance.accepted, acceptance=acceptance,
        speedup_ratio=gates.speedup, score=outcome.score if acceptance.accepted else 0.0,
        scorer={"name": scorer_cfg.name, "options": dict(scorer_cfg.options),
                "eligible": outcome.eligible, "reason": outcome.reason, **outcome.details},
        evaluation=record, **base,
    )


def format_judge(host: PluginHost, task: Task) -> TaskJudge | None:
    """The judge of ``task``'s format when the format brings its own (``TaskFormatSpec.judge``),
    else None (the operator judge, or the task's own commands)."""
    from aka_core.errors import AkaError

    try:
        spec = host.task_format(task.format)
    except AkaError:  # a format name no registered format has: the operator judge's task
        return None
    return spec.judge() if spec.judge is not None else None


def judge_record(judge: TaskJudge, request: JudgeRequest) -> dict[str, Any]:
    """``judge.evaluate(request)``; a judge that raises is the evaluator's fault (infra_error),
    never the candidate's."""
    try:
        record = judge.evaluate(request)
    except Exception as exc:
        log.error("the task format's judge raised", error=f"{type(exc).__name__}: {exc}")
        return {"failure": {"kind": FailureKind.INFRA_ERROR, "phase": "judge", "retryable": True,
                            "message": f"the task format's judge raised {type(exc).__name__}: "
                                       f"{exc}", "traceback": traceback.format_exc()[-4000:]}}
    if not isinstance(record, dict):
        return {"failure": {"kind": FailureKind.INFRA_ERROR, "phase": "judge", "retryable": False,
                            "message": f"the task format's judge returned "
                                       f"{type(record).__name__}, not a record (dict)"}}
    return record


def evaluator_tampering(ctx: TaskContext) -> str | None:
    """Why the evaluator cannot be trusted now, or None: its code or Python's startup hooks
    changed since the run started, or a wheel install differs from its RECORD."""
    changed = integrity.changes(ctx.evaluator)
    if changed:
        return ("the evaluator's installed code changed since the run started (an agent or another "
                f"process wrote {integrity.describe(changed)}): no result can be trusted; "
                "reinstall aka and run again")
    modified = integrity.verify_installed()
    if modified:
        return (f"aka's installed files differ from their wheels' RECORD "
                f"({integrity.describe(modified)}): reinstall aka")
    return None


def decide_acceptance(record: EvaluationRecord, gates: Gates,
                      integrity: IntegrityReport) -> Acceptance:
    failure = record.failure
    compile_only = record.compile_only if gates.compile_only else None
    checks = [
        Gate(name="compiles", passed=gates.pass_compilation is True,
             detail="" if gates.pass_compilation else _failure_text(failure)),
        Gate(name="correct", passed=gates.pass_correctness is True,
             detail="not checked: compile-only" if compile_only and gates.pass_compilation
             else _correctness_detail(record, failure)),
        Gate(name="protected_files_unchanged", passed=integrity.ok,
             detail="" if integrity.ok else
             "the agent changed protected files (restored before evaluation): "
             + ", ".join(integrity.restored_files)),
        Gate(name="evaluator_files_untouched", passed=integrity.evaluator_files_intact,
             detail="" if integrity.evaluator_files_intact else
             "task files changed outside the workspace while the agent ran (evaluated with an "
             "intact copy): " + ", ".join(integrity.outside_changes)),
    ]
    kind = record.failure_kind
    if kind in (FailureKind.POLICY, FailureKind.PRECISION):
        checks.append(Gate(name="rules", passed=False, detail=_failure_text(failure)))
    elif record.enforced_rules():
        checks.append(Gate(name="rules", passed=True, detail="the task's rules were enforced"))
    if failure is not None and (kind in TIMING_FAILURES or (
            kind in (FailureKind.TIMEOUT, FailureKind.CRASHED, FailureKind.PROTOCOL)
            and failure.phase == "timing")):
        checks.append(Gate(name="timing_sound", passed=False, detail=failure.message))
    elif record.wall_clock_check:
        checks.append(Gate(name="timing_sound", passed=True,
                           detail="timed by the judge's clock; audits, interference and "
                                  "speed-of-light checks passed"))
    confinement = record.confinement
    if confinement is not None and not compile_only:
        confined = confinement.confined
        checks.append(Gate(
            name="confined", passed=confined or confinement.policy != "required",
            detail="candidate and baseline ran confined (file system allowlist, no network)"
            if confined else f"the runners were not fully confined (policy "
                             f"{confinement.policy}): see evaluation.confinement"))
    if record.trust == "harness":  # passes, and says what it means
        checks.append(Gate(name="judged_by_the_task", passed=True,
                           detail=record.trust_note or "harness-trusted"))
    if compile_only:  # nothing ran: never accepted, whatever else passed
        checks.append(Gate(name="ran", passed=False, detail=compile_only.note))
    failed = [g for g in checks if not g.passed]
    reason = "all gates passed" if not failed else "; ".join(
        f"{g.name}: {g.detail}" if g.detail else g.name for g in failed)
    return Acceptance(accepted=not failed, reason=reason, gates=tuple(checks))


def _failure_text(failure: Failure | None) -> str:
    return failure.text() if failure is not None else ""


def _correctness_detail(record: EvaluationRecord, failure: Failure | None) -> str:
    if record.correctness is not None and record.correctness.passed:
        checks = record.correctness.checks
        held = sum(1 for c in checks if c.held_out)
        return f"{len(checks)} checks passed ({held} on held-out cases)"
    return _failure_text(failure)
