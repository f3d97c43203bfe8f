"""The Python API for trainers and scripts: run a config, evaluate a candidate, validate a task.

```python
from aka_core import api
result = api.evaluate_candidate("tasks/triton2triton/gelu", "policy_output/step_42")
reward = result.score            # the evaluator's reward; keep it beside your own transforms
```
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import attrs

from aka_core.builtin.operator_tasks import load_task
from aka_core.devices import gpu_visible_quick, no_gpu_device_files, probe
from aka_core.errors import AkaError, UsageError
from aka_core.evaluation.record import EvaluationRecord
from aka_core.models import (
    TASK_FILE,
    AgentConfig,
    EvaluationConfig,
    IntegrityReport,
    NamedPluginConfig,
    RunConfig,
    Task,
    TaskResult,
)
from aka_core.plugin.host import PluginHost
from aka_core.run.execute import create_run, execute_run, read_run_file
from aka_core.run.lifecycle import (
    EvaluationOptions,
    TaskContext,
    compile_only_architecture,
    cpu_unrunnable,
    evaluate,
    evaluate_and_score,
    format_judge,
    now_iso,
    protected_paths,
)
from aka_core.run.workspace import copy_task, overlay_editable, prepare_workspace, preserve_baseline
from aka_core.tails import tail


@attrs.frozen
class RunOutcome:
    run_dir: Path
    results: list[TaskResult]


def run(config_path: str | Path, *, run_suffix: str | None = None,
        output_root: str | Path | None = None, host: PluginHost | None = None,
        show_progress: bool = False) -> RunOutcome:
    """Run a config end to end; returns the run directory and every task result."""
    host = host or PluginHost()
    run_dir = create_run(Path(config_path), host, run_suffix=run_suffix,
                         output_root=Path(output_root) if output_root else None)
    return RunOutcome(run_dir, execute_run(run_dir, host, show_progress=show_progress))


def resume(run_dir: str | Path, *, host: PluginHost | None = None,
           show_progress: bool = False) -> RunOutcome:
    """Finish an interrupted run: completed tasks are kept, the rest (re)run."""
    host = host or PluginHost()
    run_dir = Path(run_dir).resolve()
    read_run_file(run_dir)
    return RunOutcome(run_dir, execute_run(run_dir, host, show_progress=show_progress))


def find_task(task: str | Path, tasks_root: Path | None = None) -> tuple[Path, str]:
    """A task folder and its id from a path (or an id relative to ``tasks_root``)."""
    path = Path(task)
    if not (path / TASK_FILE).is_file() and tasks_root is not None:
        path = tasks_root / task
    if not path.is_dir():
        raise UsageError(f"no task folder at {task}; pass a folder holding task.yaml "
                       "(e.g. tasks/triton2triton/gelu)")
    path = path.resolve()
    for parent in path.parents:
        if parent.name == "tasks":
            return path, path.relative_to(parent).as_posix()
    return path, path.name


def __getattr__(name: str) -> Any:
    """The reward service's clients (``ServiceClient``, ``AsyncServiceClient``, ``ServiceError``,
    ``files_of``), imported on first use: the ``asyncio`` client needs httpx (``aka-core[serve]``),
    the blocking one only the standard library."""
    if name in ("ServiceClient", "AsyncServiceClient", "ServiceError", "files_of"):
        from aka_core.service import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_device(device: str) -> str:
    if device == "cuda":
        quick = gpu_visible_quick()
        if quick is False or (quick is None and not probe().get("gpu")):
            raise UsageError("a GPU was asked for (device cuda) but this host has none PyTorch "
                             "can see: use device cpu (correctness only) or auto")
        return device
    if device != "auto":
        return device
    quick = gpu_visible_quick()
    if quick is not None:
        return "cuda" if quick else "cpu"
    if no_gpu_device_files():
        return "cpu"
    return "cuda" if probe().get("gpu") else "cpu"


def evaluate_candidate(
    task: str | Path,
    candidate_dir: str | Path,
    *,
    device: str = "auto",
    held_out: bool = True,
    held_out_seed: int | None = None,
    measure_performance: bool = True,
    scorer: str = "speedup",
    scorer_options: dict[str, Any] | None = None,
    work_dir: str | Path | None = None,
    host: PluginHost | None = None,
    confinement: str = "required",
    protect: tuple[str | Path, ...] = (),
) -> TaskResult:
    """Evaluate the editable files found in ``candidate_dir`` against the task's baseline.

    Only the task's declared editable files are taken from ``candidate_dir``; everything else comes
    from the task. This is the RL entry point: one call, one reward (``result.score``).
    ``protect``: folders the candidate's runner must not read, beyond the task's corpus (a queue
    holding other candidates).
    """
    host = host or PluginHost()
    task_path, task_id = find_task(task)
    loaded = load_task(task_path, task_id, host)
    candidate = Path(candidate_dir)
    if candidate.is_file():
        raise UsageError(f"{candidate} is a file; --candidate takes the folder that holds the "
                       f"candidate's files ({', '.join(loaded.editable)})")
    if not candidate.is_dir():
        raise UsageError(f"candidate folder {candidate} does not exist")
    device = resolve_device(device)
    require_runnable(loaded, device, host)
    with tempfile.TemporaryDirectory(prefix="aka-eval-", dir=work_dir) as tmp:
        root = Path(tmp)
        workspace, baseline, logs = root / "workspace", root / "baseline", root / "logs"
        prepare_workspace(loaded, workspace)
        preserve_baseline(loaded, baseline)
        logs.mkdir()
        copied = overlay_editable(loaded, candidate, workspace)
        if not copied:
            raise UsageError(f"{candidate} holds none of the task's editable files "
                           f"({', '.join(loaded.editable)})")
        ctx = _eval_context(host, loaded, device, held_out, measure_performance, scorer,
                            scorer_options or {}, run_dir=root, confinement=confinement,
                            held_out_seed=held_out_seed)
        ctx = attrs.evolve(ctx, protected_extra=tuple(Path(p).resolve() for p in protect))
        integrity = IntegrityReport(ok=True, changed_files=tuple(copied))
        started = now_iso()
        result = evaluate_and_score(ctx, loaded, workspace, baseline, logs, None, integrity,
                                    {"task_id": task_id, "started_at": started,
                                     "family": loaded.family, "backend": loaded.backend})
        tails = {name: tail(logs / f"{name}.log") for name in
                 ("evaluation", "evaluation.baseline", "evaluation.candidate")}
    evaluation = result.evaluation.without("logs")
    evaluation = attrs.evolve(evaluation, worker_log=None, worker_log_tail=tails["evaluation"],
                              candidate_log_tail=tails["evaluation.candidate"],
                              baseline_log_tail=tails["evaluation.baseline"])
    return attrs.evolve(result, finished_at=now_iso(), evaluation=evaluation)


def require_runnable(task: Task, device: str, host: PluginHost | None = None) -> None:
    reason = cpu_unrunnable(task, device, host)
    if reason:
        raise AkaError(reason)


def _eval_context(host: PluginHost, task: Task, device: str, held_out: bool,
                  measure_performance: bool, scorer: str, scorer_options: dict[str, Any],
                  *, run_dir: Path, confinement: str = "required",
                  held_out_seed: int | None = None) -> TaskContext:
    config = RunConfig(
        agent=AgentConfig(name="external"), tasks=(task.id,),
        # None: no model is named; ``aka eval`` evaluates on whatever GPU this host has.
        target_gpu_model="cpu" if device == "cpu" else None,
        scorer=NamedPluginConfig(name=scorer, options=scorer_options),
        evaluation=EvaluationConfig(device=device, held_out=held_out,  # type: ignore[arg-type]
                                    held_out_seed=held_out_seed,
                                    measure_performance=measure_performance,
                                    confinement=confinement),  # type: ignore[arg-type]
    )
    return TaskContext(run_dir=run_dir, config=config, host=host, tasks_root=task.root.parent,
                       device=device)


def validate_task_run(task: Task, host: PluginHost, *, device: str = "auto") -> EvaluationRecord:
    """Run a task's reference and baseline through the evaluator (baseline against itself)."""
    device = resolve_device(device)
    require_runnable(task, device, host)
    with tempfile.TemporaryDirectory(prefix="aka-validate-") as tmp:
        baseline, logs = Path(tmp) / "baseline", Path(tmp) / "logs"
        logs.mkdir()
        options = EvaluationOptions(device=device, time_reference=True,
                                    protected=protected_paths(task, Path(tmp)),
                                    log_path=Path(tmp) / "evaluation.log")
        if format_judge(host, task) is not None:
            preserve_baseline(task, baseline)
            record = evaluate(host, task, None, baseline, logs, options)
            return attrs.evolve(record, worker_log_tail="\n".join(
                tail(path, 3000) for path in sorted(logs.glob("*.log")))[-3000:])
        copy_task(task, baseline)
        options = attrs.evolve(options, compile_only=compile_only_architecture(task, device, host))
        record = evaluate(host, task, None, baseline, logs, options)
        record = attrs.evolve(record, worker_log_tail=tail(Path(tmp) / "evaluation.log", 3000),
                              baseline_log_tail=tail(Path(tmp) / "evaluation.baseline.log", 3000))
    return attrs.evolve(record.without("logs"), worker_log=None)
