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

from aka_core.errors import AkaError
from aka_core.evaluation import evaluate
from aka_core.host import PluginHost
from aka_core.lifecycle import build_request
from aka_core.models import TimingPolicy
from aka_core.operator_tasks import load_task
from aka_core.records import TaskFormatSpec

QUICK_TIMING = TimingPolicy(method="auto", min_pairs=10, max_pairs=40, target_ci_percent=1.0,
                            max_seconds_per_case=2.0)


def find_baseline(workspace: Path, marker: str = "task.yaml") -> Path:
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
    if judged is None and not (workspace / "task.yaml").is_file():
        raise AkaError(f"{workspace} holds no task.yaml: run `aka selfcheck` in a task workspace")
    # A run's workspace is <run>/<family>/<name>/workspace: the task id is the two folders above.
    task = load_task(workspace, f"{workspace.parent.parent.name}/{workspace.parent.name}", host)
    baseline = find_baseline(workspace, *([judged.marker_file] if judged is not None else []))
    device = resolve_device(device)
    require_runnable(task, device)
    if judged is not None and judged.judge is not None:
        from aka_core.lifecycle import judge_record
        from aka_core.records import JudgeRequest

        log = selfcheck_log(workspace)
        logs = log.parent if log is not None else Path(tempfile.mkdtemp(prefix="aka-selfcheck-"))
        record = judge_record(judged.judge(), JudgeRequest(
            task=task, workspace=workspace, baseline=baseline, logs=logs, device=device,
            measure_performance=timing, held_out=False, confinement="best_effort", quick=True))
        gates = evaluate.outcome(record)
        return {"task": task.id, "device": device, "advisory": True, **gates,
                "evaluation": record}
    request = build_request(device, task, workspace, baseline, held_out=False,
                            measure_performance=timing, seeds=2, host=host,
                            confinement="best_effort")
    request = attrs.evolve(request, timing=QUICK_TIMING)
    record = evaluate.evaluate(request, log_path=selfcheck_log(workspace))
    gates = evaluate.outcome(record)
    return {"task": task.id, "device": device, "advisory": True, **gates, "evaluation": record}


def judged_format(workspace: Path, host: PluginHost) -> TaskFormatSpec | None:
    """The format of the task in ``workspace`` when that format brings its own judge."""
    for registered in host.registered("task_format"):
        spec = registered.record
        if isinstance(spec, TaskFormatSpec) and spec.judge is not None and \
                spec.factory().is_task_dir(workspace):
            return spec
    return None


def render(result: dict[str, Any]) -> str:
    ev = result["evaluation"]
    failure = ev.get("failure") or {}
    lines = [f"selfcheck of {result['task']} on {result['device']} (advisory: the final "
             "evaluation is independent and also runs held-out cases)",
             f"  builds:   {result['pass_compilation']}",
             f"  correct:  {result['pass_correctness']}  (visible cases only)"]
    if failure:
        where = f" at {failure['file']}:{failure.get('line')}" if failure.get("file") else ""
        lines.append(f"  problem:  {failure.get('message')}{where}")
    perf = ev.get("performance") or {}
    if result["performance_measured"]:
        lo, hi = perf["ci95"]
        lines.append(f"  speedup:  {perf['speedup']:.3f} (95% CI {lo:.3f}..{hi:.3f}, quick timing)")
        for case in perf.get("cases", []):
            lines.append(f"    {case['case']}: {case['baseline_median_ms']:.4f} ms -> "
                         f"{case['candidate_median_ms']:.4f} ms")
    else:
        lines.append(f"  speedup:  not measured ({perf.get('reason_not_measured', 'see problem')})")
    return "\n".join(lines)
