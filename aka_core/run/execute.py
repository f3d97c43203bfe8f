"""A run: create its directory, run every selected task through the executor, resume it.

``run.yaml`` is written before any task starts and holds everything needed to resume: the resolved
config, the task ids, the tasks folder, plugin versions and host facts. A task whose
``task_result.yaml`` exists is complete; a task folder without one was interrupted: it is moved
aside (kept, never deleted) and redone. Reports are regenerated after every task.

Every run goes through an executor (``Executor.execute`` with a ``Run`` handle): the builtin
``local`` one runs tasks in this process, one after another; with ``resources`` naming GPUs a
config's ``local`` is the builtin ``local-parallel``, whose worker processes (one per GPU or group,
``aka_core.builtin.parallel``) run them; plugins add others (docker, slurm). Results and reports have the
same shape whichever runs them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import structlog

from aka_core import __version__, gpus
from aka_core.builtin import parallel
from aka_core.builtin.executors import LOCAL, LOCAL_PARALLEL
from aka_core.convert import structure, unstructure
from aka_core.devices import probe
from aka_core.errors import AkaError, ConfigError, Problem, UsageError
from aka_core.interrupt import INTERRUPTS, signals_deferred
from aka_core.models import RunConfig, TaskResult
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import Run
from aka_core.run.config import check_plugin_factories, read_run_config, resolve_tasks_directory
from aka_core.run.lifecycle import (
    TaskContext,
    run_agent_phase,
    run_evaluation_phase,
    run_task,
)
from aka_core.run.progress import RunProgress
from aka_core.run.reports import write_reports
from aka_core.run.resources import (
    missing_gpu_problems,
    needs_workers,
    parallel_record,
    resource_problems,
)
from aka_core.run.results import (
    RUN_FILE,
    now_iso,
    read_run_file,
    read_task_result,
    set_aside_interrupted,
    task_result_path,
    write_task_result,
)
from aka_core.run.selection import resolve_selectors
from aka_core.yamlio import line_of, write_yaml_atomic

log = structlog.get_logger("aka.run")
DEVICE_ON_NODE = "chosen-on-the-node"


def run_directory_name(config: RunConfig, suffix: str | None) -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S")
    return f"run_{stamp}" + (f"_{suffix}" if suffix else "")


def choose_device(config: RunConfig) -> str:
    """Where evaluations run; refuses to time on a GPU other than the target, or to spread tasks
    over GPU ids this host does not have."""
    target = config.target_gpu_model  # None (only in code): this host's GPU, whatever it is
    wanted = config.evaluation.device
    if (target is not None and target.is_cpu) or wanted == "cpu":
        return "cpu"
    found = probe().get("gpu")
    if found is None:
        if wanted == "cuda":
            raise ConfigError(f"evaluation.device is cuda but this host has no GPU visible to "
                              f"PyTorch ({probe().get('torch') or 'torch not installed'})")
        raise ConfigError(
            f"target_gpu_model is {config.target_name} but this host has no GPU visible to "
            "PyTorch; set target_gpu_model: cpu (or evaluation.device: cpu) for a correctness-only "
            "run (evaluation.device: cpu also builds cuda/hip/flydsl tasks compile-only for the "
            "target), or run on a host with the target GPU", file=_source(config))
    mismatch = gpus.gpu_mismatch(found, target) if target is not None else None
    if mismatch:
        raise ConfigError(f"target_gpu_model is {config.target_name} but {mismatch}; change "
                          "target_gpu_model or run on the target", file=_source(config))
    if config.executor.name == LOCAL:  # other executors place tasks on GPUs themselves
        missing = missing_gpu_problems(config.resources, int(found.get("count") or 1),
                                       _source(config))
        if missing:
            raise ConfigError(missing)
    return "cuda"


def _source(config: RunConfig) -> Path | None:
    return Path(config.source) if config.source else None


def executor_name(config: RunConfig) -> str:
    """The executor that runs ``config``'s tasks: the one it names, except that ``local`` with
    ``resources`` naming GPUs (more than one slot, or one restricted to some GPUs) is
    ``local-parallel``: worker processes that each see only their slot's GPUs."""
    return LOCAL_PARALLEL if needs_workers(config) else config.executor.name


def _check_executor_name(config: RunConfig, source_doc: Any) -> None:
    if config.executor.name == LOCAL_PARALLEL:
        raise ConfigError(Problem(
            f"executor {LOCAL_PARALLEL!r} is chosen by resources, not by name", file=_source(config),
            line=line_of(source_doc, ["executor", "name"]), field="executor.name",
            hint=f"name the {LOCAL!r} executor and list GPUs in resources.gpus or "
                 "resources.gpu_groups: its tasks then run in one worker per GPU or group"))


def create_run(config_path: Path, host: PluginHost, *, run_suffix: str | None = None,
               output_root: Path | None = None) -> Path:
    """Validate everything, then write ``run.yaml``; returns the new run directory. The config
    file is read once; every later check takes its lines from that reading."""
    loaded = read_run_config(config_path, host)  # resources are checked there too
    config, source_doc = loaded.config, loaded.source
    check_plugin_factories(config, host, config_path, source_doc)
    _check_executor_name(config, source_doc)
    tasks_root = resolve_tasks_directory(config, config_path)
    _note_resources_left_to_executor(config)
    task_ids = resolve_selectors(list(config.tasks), tasks_root, host,
                                 source_file=config_path, source_doc=source_doc)
    elsewhere = host.executor(config.executor.name).runs_elsewhere
    # Where tasks run on other hosts, their device is chosen (and checked) there, in run-task.
    device = DEVICE_ON_NODE if elsewhere else choose_device(config)
    output_root = (output_root or Path.cwd()).resolve()
    group = f"{config.workspace_directory_prefix}_{config.target_name}_{config.agent.name}"
    run_dir = output_root / group / run_directory_name(config, run_suffix)
    counter = 1
    while run_dir.exists():
        counter += 1
        run_dir = run_dir.with_name(f"{run_directory_name(config, run_suffix)}.{counter}")
    run_dir.mkdir(parents=True)
    facts = probe()
    workers = parallel_record(config, facts.get("gpu"))
    write_yaml_atomic(run_dir / RUN_FILE, {
        "aka_version": __version__,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config_file": str(config_path.resolve()),
        "config": unstructure(config),
        "tasks_root": str(tasks_root),
        "task_ids": task_ids,
        "device": device,
        "parallel": workers,
        "plugins": host.versions(),
        "plugin_load_errors": [e.as_dict() | {"traceback": None} for e in host.load_errors],
        "host": {"hostname": socket.gethostname(), "platform": platform.platform(),
                 "python": sys.version.split()[0], "torch": facts.get("torch"),
                 "gpu": facts.get("gpu")},
    }, header="# aka run: the resolved config, selected tasks and versions of this run\n")
    return run_dir


def check_resources(config: RunConfig, config_path: Path, source_doc: Any) -> None:
    """Problems of ``resources`` that the schema cannot express, with file and line."""
    problems: list[Problem] = resource_problems(config.resources, config_path, source_doc)
    if problems:
        raise ConfigError(problems)
    _note_resources_left_to_executor(config)


def _note_resources_left_to_executor(config: RunConfig) -> None:
    resources = config.resources
    if config.executor.name != LOCAL and (resources.gpus or resources.gpu_groups
                                          or resources.workers_per_gpu > 1):
        log.info("resources are left to the executor", executor=config.executor.name)


def execute_run(run_dir: Path, host: PluginHost, *, show_progress: bool = True) -> list[TaskResult]:
    """Run (or resume) every task of ``run_dir`` that has no result yet, through its executor."""
    meta = read_run_file(run_dir)
    config = structure(meta["config"], RunConfig)
    task_ids: list[str] = list(meta["task_ids"])
    structlog.contextvars.bind_contextvars(run=run_dir.name)
    done = completed_task_ids(run_dir, task_ids)
    pending = [t for t in task_ids if t not in done]
    if done:
        log.info("resuming", completed=len(done), pending=len(pending))
    host.notify("aka_before_run", run_dir=run_dir, config=config, task_ids=pending)
    executor = host.executor(executor_name(config)).make(config.executor.options)
    try:
        # The bar only on a terminal, never between JSON log lines.
        with RunProgress(task_ids, enabled=None if show_progress else False) as progress:
            for task_id in done:
                progress.finish_task(task_id, "kept", None)
            executor.execute(_run_handle(run_dir, meta, config, pending, host, progress))
    except INTERRUPTS:
        # Stopped (Ctrl-C, SIGTERM): the reports say which tasks are left, and why.
        with signals_deferred(), contextlib.suppress(Exception):
            write_reports(run_dir)
        raise
    results = [r for r in (_read(run_dir, t) for t in task_ids) if r is not None]
    write_reports(run_dir)  # from the run folder: tasks still without a result show as missing
    host.notify("aka_report", run_dir=run_dir, results=results, reports_dir=run_dir / "reports")
    host.notify("aka_after_run", run_dir=run_dir, results=results)
    return results


def open_run(run_dir: Path, host: PluginHost, task_ids: list[str] | None = None) -> Run:
    """The ``Run`` handle of an existing run, as its executor gets it, for ``task_ids`` (default:
    those still without a result); without a progress display."""
    meta = read_run_file(run_dir)
    if task_ids is None:
        done = completed_task_ids(run_dir, list(meta["task_ids"]))
        task_ids = [t for t in meta["task_ids"] if t not in done]
    return _run_handle(run_dir, meta, structure(meta["config"], RunConfig), task_ids, host,
                       RunProgress(task_ids, enabled=False))


def _run_handle(run_dir: Path, meta: dict[str, Any], config: RunConfig, pending: list[str],
                host: PluginHost, progress: RunProgress) -> Run:
    """The ``Run`` an executor gets: ``run_task`` runs a task here; the events let tasks run
    elsewhere reach the progress and the reports as they end."""
    ctx = TaskContext(run_dir=run_dir, config=config, host=host,
                      tasks_root=Path(meta["tasks_root"]), device=meta["device"])

    def run_here(task_id: str) -> None:
        progress.start_task(task_id)
        set_aside_interrupted(run_dir, task_id)  # what an interrupted attempt left
        result = _abandoned_if_deadly(run_dir, task_id, host) or run_task(ctx, task_id)
        progress.finish_task(task_id, result.status, result.score)
        write_reports(run_dir)

    def finished(task_id: str) -> TaskResult | None:
        result: TaskResult | None
        try:
            result = read_task_result(task_result_path(run_dir, task_id))
        except FileNotFoundError:
            result = None
        except AkaError as exc:  # never fatal: the reports show the task without a result
            log.warning("unreadable task result", task=task_id, error=str(exc))
            result = TaskResult(task_id=task_id, status="error", error=str(exc))
        if result is not None:
            progress.finish_task(task_id, result.status, result.score)
        write_reports(run_dir)
        return result

    return Run(run_dir=run_dir, task_ids=tuple(pending), config=config,
               tasks_root=ctx.tasks_root, device=ctx.device, meta=meta, host=host,
               run_task=run_here, task_started=progress.start_task, task_finished=finished)


def run_one_task(run_dir: Path, task_id: str, host: PluginHost,
                 phase: str = "all") -> TaskResult | None:
    """One task of an existing run (what remote executors call: ``aka run-task``).

    ``phase`` "agent" runs steps 1-3 and returns None when the evaluation should follow (or the
    result when the task ended there); "evaluate" runs steps 4-7 after it; "all" runs both.
    """
    meta = read_run_file(run_dir)
    if task_id not in meta["task_ids"]:
        raise UsageError(f"task {task_id!r} is not part of run {run_dir}")
    config = structure(meta["config"], RunConfig)
    device = meta["device"]
    if device == DEVICE_ON_NODE:
        device = choose_device(config)
    ctx = TaskContext(run_dir=run_dir, config=config, host=host,
                      tasks_root=Path(meta["tasks_root"]), device=device)
    if phase == "evaluate":
        return run_evaluation_phase(ctx, task_id)
    set_aside_interrupted(run_dir, task_id)
    if phase == "agent":
        return run_agent_phase(ctx, task_id)
    return run_task(ctx, task_id)


def _read(run_dir: Path, task_id: str) -> TaskResult | None:
    path = task_result_path(run_dir, task_id)
    if not path.is_file():
        return None
    try:
        return read_task_result(path)
    except AkaError as exc:
        log.warning("unreadable task result", task=task_id, error=str(exc))
        return None


def completed_task_ids(run_dir: Path, task_ids: list[str]) -> set[str]:
    return {t for t in task_ids if _read(run_dir, t) is not None}


def deaths_of(run_dir: Path, task_id: str) -> int:
    """Attempts of ``task_id`` that ended without a result and without aka recording an
    interrupt (``interrupted.json``): the process running them died (killed from outside, or by
    what the task ran)."""
    from aka_core.run.lifecycle import INTERRUPTED_FILE

    attempts = (run_dir / ".interrupted").glob(f"*/{task_id}")
    return sum(1 for a in attempts if a.is_dir() and not (a / INTERRUPTED_FILE).exists())


def _abandoned_if_deadly(run_dir: Path, task_id: str, host: PluginHost) -> TaskResult | None:
    """A task whose attempts killed the process running them ``parallel.MAX_TASK_ATTEMPTS``
    times is recorded as an error (returned) instead of being run (and killing the resume)
    again."""
    deaths = deaths_of(run_dir, task_id)
    if deaths < parallel.MAX_TASK_ATTEMPTS:
        return None
    result = TaskResult(task_id=task_id, status="error", started_at=now_iso(),
                        finished_at=now_iso(),
                        error=f"the process running this task died during each of its last "
                              f"{deaths} attempts; it was not run again (the attempts are kept "
                              "under .interrupted/)")
    write_task_result(run_dir, result)
    log.error("task abandoned after repeated deaths of the process running it", task=task_id,
              attempts=deaths)
    host.notify("aka_after_task", run_dir=run_dir, result=result)
    return result
