"""``aka selfcheck``: what an agent runs inside its workspace to check its own work.

It builds the candidate, checks it on the visible cases and times it briefly against the baseline,
through the same worker as the final evaluation. It never sees the held-out cases (the workspace's
task.yaml does not list them) nor the final evaluation's secret seed (each evaluation draws its
own). Its answer is advisory: the final evaluation is independent.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import attrs

from aka_core.builtin.operator_tasks import load_task
from aka_core.errors import AkaError
from aka_core.evaluation.evaluate import outcome
from aka_core.evaluation.record import EvaluationRecord
from aka_core.models import TASK_FILE
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import TaskFormatSpec
from aka_core.run.lifecycle import QUICK_TIMING  # noqa: F401 (re-exported: it was defined here)


def find_baseline(workspace: Path, marker: str = TASK_FILE) -> Path:
    """The preserved copy of the task next to the workspace (``<task>/baseline``); ``marker``:
    the file its task format recognises a task folder by."""
    sibling = workspace.parent / "baseline"
    if (sibling / marker).is_file():
        return sibling
    raise AkaError(f"no baseline copy next to {workspace} (expected {sibling}); run selfcheck in "
                   "a task workspace that aka created")


def selfcheck_log(workspace: Path) -> Path | None:
    """Where the evaluation logs: ``$AKA_SELFCHECK_LOG`` (the agent's private home, set by aka:
    a confined agent cannot write the task's logs), else the task's logs folder when writable,
    else a temporary file."""
    import os

    if os.environ.get("AKA_SELFCHECK_LOG"):
        return Path(os.environ["AKA_SELFCHECK_LOG"])
    logs = workspace.parent / "logs"
    return logs / "selfcheck.log" if logs.is_dir() and os.access(logs, os.W_OK) else None


def selfcheck(workspace: Path, host: PluginHost, *, device: str = "auto",
              timing: bool = True) -> dict[str, Any]:
    from aka_core.api import require_runnable, resolve_device

    workspace = workspace.resolve()
    judged = judged_format(workspace, host)
    if judged is None and not (workspace / TASK_FILE).is_file():
        raise AkaError(f"{workspace} holds no task.yaml: run `aka selfcheck` in a task workspace")
    # A run's workspace is <run>/<family>/<name>/workspace: the task id is the two folders above.
    task = load_task(workspace, f"{workspace.parent.parent.name}/{workspace.parent.name}", host)
    baseline = find_baseline(workspace, *([judged.marker_file] if judged is not None else []))
    device = resolve_device(device)
    require_runnable(task, device)
    from aka_core.run.lifecycle import EvaluationOptions, evaluate

    options = EvaluationOptions(device=device, held_out=False, measure_performance=timing,
                                seeds=2, confinement="best_effort", quick=True,
                                log_path=selfcheck_log(workspace))
    if judged is not None and judged.judge is not None:
        log = options.log_path
        logs = log.parent if log is not None else Path(tempfile.mkdtemp(prefix="aka-selfcheck-"))
    else:
        logs = workspace.parent / "logs"  # not written: the operator judge logs to log_path
    record = evaluate(host, task, workspace, baseline, logs, options)
    gates = outcome(record)
    return {"task": task.id, "device": device, "advisory": True, **attrs.asdict(gates),
            "evaluation": record}


def judged_format(workspace: Path, host: PluginHost) -> TaskFormatSpec | None:
    """The format of the task in ``workspace`` when that format brings its own judge."""
    for registered in host.registered("task_format"):
        spec = registered.record
        if isinstance(spec, TaskFormatSpec) and spec.judge is not None and \
                spec.factory().is_task_dir(workspace):
            return spec
    return None


def render(result: dict[str, Any]) -> str:
    ev: EvaluationRecord = result["evaluation"]
    failure = ev.failure
    lines = [f"selfcheck of {result['task']} on {result['device']} (advisory: the final "
             "evaluation is independent and also runs held-out cases)",
             f"  builds:   {result['pass_compilation']}",
             f"  correct:  {result['pass_correctness']}  (visible cases only)"]
    if failure is not None:
        where = f" at {failure.file}:{failure.line}" if failure.file else ""
        lines.append(f"  problem:  {failure.message}{where}")
    perf = ev.performance
    if result["performance_measured"] and perf is not None and perf.ci95 and perf.speedup:
        lo, hi = perf.ci95
        lines.append(f"  speedup:  {perf.speedup:.3f} (95% CI {lo:.3f}..{hi:.3f}, quick timing)")
        for case in perf.cases or []:
            lines.append(f"    {case.case}: {case.baseline_median_ms:.4f} ms -> "
                         f"{case.candidate_median_ms:.4f} ms")
    else:
        reason = perf.reason_not_measured if perf is not None else None
        lines.append(f"  speedup:  not measured ({reason or 'see problem'})")
    return "\n".join(lines)
