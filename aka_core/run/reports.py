"""Run reports regenerated from task results: ``reports/summary.{csv,json}``, ``report.txt``.

Reports are a pure function of the results (no clocks, no absolute paths): regenerating them gives
identical files, and deleting them loses nothing. A task result is the record of truth; a report
only reads fields of it, tolerating any part of ``evaluation`` being absent (the record is typed:
``aka_core.evaluation.record``).

Aggregates are null-aware: a total over a field some agent could not report (tokens, cost) is
``null`` only when no task reported it, and always says how many tasks did.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from aka_core import yamlio
from aka_core.models import AgentStatus, TaskResult
from aka_core.run.results import load_run, reports_dir

REPORT_SCHEMA_VERSION = 1
MISSING_STATUS = "missing"
"""Status of a row for a selected task with no ``task_result.yaml`` (not run, or interrupted)."""

COLUMNS: tuple[str, ...] = (
    "task_id",
    "family",
    "backend",
    "status",
    "agent",
    "agent_status",
    "pass_compilation",
    "pass_correctness",
    "candidate_accepted",
    "speedup_ratio",
    "ci95_low",
    "ci95_high",
    "score",
    "timing_method",
    "device",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
    "agent_duration_seconds",
    "duration_seconds",
    "reason",
)

_USAGE_TOTALS: tuple[str, ...] = ("input_tokens", "cached_input_tokens", "cache_write_tokens",
                                  "output_tokens", "reasoning_tokens", "cost_usd",
                                  "agent_duration_seconds", "duration_seconds")

# --------------------------------------------------------------------------- reading results


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def speedup_ci95(result: TaskResult) -> tuple[float, float] | None:
    """The 95% confidence interval of the speedup, when the evaluator recorded a sound one."""
    perf = result.evaluation.performance
    ci = perf.ci95 if perf is not None else None
    if not ci or len(ci) != 2:
        return None
    low, high = finite(ci[0]), finite(ci[1])
    if low is None or high is None or low > high:
        return None
    return (low, high)


def timing_method(result: TaskResult) -> str | None:
    """The judge's timing methods (``cuda_graph``, ``eager``, ...), comma-separated."""
    perf = result.evaluation.performance
    return ", ".join(perf.method) if perf is not None and perf.method else None


def device_label(result: TaskResult) -> str | None:
    """``name (architecture)`` of the evaluation device, or its kind; ``None`` if unrecorded."""
    device = result.evaluation.device
    if device is None:
        return None
    label = device.name or device.kind
    if label and device.architecture and device.architecture != label:
        label = f"{label} ({device.architecture})"
    return label or device.architecture


def _reason(result: TaskResult) -> str | None:
    """Why a task has no (full) credit: skip reason, error, failed gate or unmeasured timing."""
    if result.skip_reason:
        return result.skip_reason
    if result.error:
        return result.error
    if not result.candidate_accepted and result.acceptance is not None and result.acceptance.reason:
        return result.acceptance.reason
    perf = result.evaluation.performance
    return (perf.reason_not_measured or None) if perf is not None else None


def task_row(result: TaskResult) -> dict[str, Any]:
    """One summary row (keys: ``COLUMNS``) for a task result."""
    execution = result.agent_execution
    usage = execution.usage if execution is not None else None
    speedup = finite(result.speedup_ratio)
    ci = speedup_ci95(result) if speedup is not None else None
    return {
        "task_id": result.task_id,
        "family": result.family,
        "backend": result.backend,
        "status": result.status,
        "agent": execution.agent if execution is not None else None,
        "agent_status": execution.status if execution is not None else None,
        "pass_compilation": result.pass_compilation,
        "pass_correctness": result.pass_correctness,
        "candidate_accepted": result.candidate_accepted,
        "speedup_ratio": speedup,
        "ci95_low": ci[0] if ci else None,
        "ci95_high": ci[1] if ci else None,
        "score": finite(result.score),
        "timing_method": timing_method(result),
        "device": device_label(result),
        "input_tokens": _int_or_none(usage.input_tokens) if usage else None,
        "cached_input_tokens": _int_or_none(usage.cached_input_tokens) if usage else None,
        "cache_write_tokens": _int_or_none(usage.cache_write_tokens) if usage else None,
        "output_tokens": _int_or_none(usage.output_tokens) if usage else None,
        "reasoning_tokens": _int_or_none(usage.reasoning_tokens) if usage else None,
        "cost_usd": finite(usage.cost_usd) if usage else None,
        "agent_duration_seconds": finite(execution.duration_seconds) if execution else None,
        "duration_seconds": finite(result.duration_seconds),
        "reason": _reason(result),
    }


def missing_row(task_id: str, reason: str | None = None) -> dict[str, Any]:
    """A row for a selected task without a result."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(task_id=task_id, status=MISSING_STATUS, candidate_accepted=False,
               reason=reason or "no task_result.yaml (not run yet, or the run was interrupted)")
    return row


def interruption_reason(run_dir: Path, task_id: str) -> str | None:
    """What ``interrupted.json`` in a task's folder says (aka was stopped during the task), if
    there is one."""
    from aka_core.run.lifecycle import INTERRUPTED_FILE, task_dir

    path = task_dir(run_dir, task_id) / INTERRUPTED_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    message = record.get("message") if isinstance(record, dict) else None
    return message if isinstance(message, str) and message else None


# --------------------------------------------------------------------------- aggregates


def geometric_mean(values: Iterable[float]) -> float | None:
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


def _rate(count: int, of: int) -> dict[str, Any]:
    return {"count": count, "of": of, "rate": count / of if of else None}


def _total(rows: Sequence[Mapping[str, Any]], column: str) -> dict[str, Any]:
    values = [row[column] for row in rows if row.get(column) is not None]
    total: float | int | None = sum(values) if values else None
    return {"total": total, "reported_by": len(values), "of": len(rows)}


def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Run-level aggregates of summary rows.

    Rates and the mean score are over *attempted* tasks (completed or error; skipped, compile-only
    and missing tasks are left out); the geometric-mean speedup is over accepted tasks with a speedup.
    """
    attempted = [r for r in rows if r["status"] in ("completed", "error")]
    scores = [r["score"] if r["score"] is not None else 0.0 for r in attempted]
    accepted_speedups = [r["speedup_ratio"] for r in rows
                         if r["candidate_accepted"] and r["speedup_ratio"] is not None]
    geomean = geometric_mean(accepted_speedups)
    status_counts = Counter({"completed": 0, "compile_only": 0, "skipped": 0, "error": 0,
                             "infra_error": 0})
    status_counts.update(r["status"] for r in rows)
    # Every agent status, 0 when none: a trainer reads how many were rate-limited, etc.
    agent_counts = Counter(dict.fromkeys(get_args(AgentStatus), 0))
    agent_counts.update(r["agent_status"] for r in rows if r["agent_status"] is not None)
    return {
        "tasks": len(rows),
        "status_counts": dict(sorted(status_counts.items())),
        "agent_status_counts": dict(sorted(agent_counts.items())),
        "attempted": len(attempted),
        "compiled": _rate(sum(r["pass_compilation"] is True for r in attempted), len(attempted)),
        "correct": _rate(sum(r["pass_correctness"] is True for r in attempted), len(attempted)),
        "accepted": _rate(sum(r["candidate_accepted"] is True for r in attempted), len(attempted)),
        "mean_score": {"value": sum(scores) / len(scores) if scores else None,
                       "tasks": len(scores)},
        "geomean_speedup_accepted": {"value": geomean,
                                     "tasks": len([s for s in accepted_speedups if s > 0])},
        **{column: _total(rows, column) for column in _USAGE_TOTALS},
    }


# --------------------------------------------------------------------------- rendering


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def render_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_csv_cell(row.get(column)) for column in COLUMNS])
    return buf.getvalue()


def summary_document(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What ``summary.json`` holds."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "columns": list(COLUMNS),
        "tasks": [dict(row) for row in rows],
        "aggregates": aggregate(rows),
    }


def _fmt_bool(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _fmt_num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def _fmt_speedup(row: Mapping[str, Any]) -> str:
    if row["speedup_ratio"] is None:
        return "-"
    text = f"{row['speedup_ratio']:.3f}x"
    if row["ci95_low"] is not None and row["ci95_high"] is not None:
        text += f" [{row['ci95_low']:.3f}, {row['ci95_high']:.3f}]"
    return text


def _shorten(text: str | None, width: int) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(headers: Sequence[str], body: Sequence[Sequence[str]],
                 right: Iterable[int] = ()) -> list[str]:
    """Fixed-width lines: a header, a rule and the body; columns in ``right`` align right."""
    right_set = set(right)
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if i in right_set else c.ljust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in body)]


def _fmt_rate(rate: Mapping[str, Any]) -> str:
    pct = "-" if rate["rate"] is None else f"{100 * rate['rate']:.1f}%"
    return f"{rate['count']}/{rate['of']} ({pct})"


def _fmt_total(total: Mapping[str, Any], digits: int = 2) -> str:
    return (f"{_fmt_num(total['total'], digits)} "
            f"(reported by {total['reported_by']}/{total['of']} tasks)")


def render_text(rows: Sequence[Mapping[str, Any]], title: str = "aka run report") -> str:
    headers = ["task", "status", "agent", "build", "correct", "accepted", "speedup [95% CI]",
               "score", "in tok", "out tok", "cost $", "time s", "reason"]
    body = [[
        str(row["task_id"]),
        str(row["status"]),
        str(row["agent_status"] or "-"),
        _fmt_bool(row["pass_compilation"]),
        _fmt_bool(row["pass_correctness"]),
        _fmt_bool(row["candidate_accepted"]),
        _fmt_speedup(row),
        _fmt_num(row["score"], 3),
        _fmt_num(row["input_tokens"]),
        _fmt_num(row["output_tokens"]),
        _fmt_num(row["cost_usd"], 4),
        _fmt_num(row["duration_seconds"], 1),
        "not timed: no GPU (below)" if _untimed_on_cpu(row) else _shorten(row["reason"], 60),
    ] for row in rows]
    agg = aggregate(rows)
    counts = ", ".join(f"{k} {v}" for k, v in agg["status_counts"].items())
    agents = ", ".join(f"{k} {v}" for k, v in agg["agent_status_counts"].items() if v) or "-"
    geomean = agg["geomean_speedup_accepted"]
    lines = [
        title,
        "=" * len(title),
        "",
        *format_table(headers, body, right=range(7, 12)),
        "",
        f"tasks:            {agg['tasks']} ({counts})",
        f"agents:           {agents}",
        f"compiled:         {_fmt_rate(agg['compiled'])}   (rates over attempted tasks:"
        " completed or error)",
        f"correct:          {_fmt_rate(agg['correct'])}",
        f"accepted:         {_fmt_rate(agg['accepted'])}",
        f"mean score:       {_fmt_num(agg['mean_score']['value'], 4)}"
        f" over {agg['mean_score']['tasks']} tasks",
        f"geomean speedup:  "
        f"{'-' if geomean['value'] is None else format(geomean['value'], '.3f') + 'x'}"
        f" over {geomean['tasks']} accepted tasks",
        f"input tokens:     {_fmt_total(agg['input_tokens'])}",
        f"cached tokens:    {_fmt_total(agg['cached_input_tokens'])}",
        f"cache writes:     {_fmt_total(agg['cache_write_tokens'])}",
        f"output tokens:    {_fmt_total(agg['output_tokens'])}",
        f"reasoning tokens: {_fmt_total(agg['reasoning_tokens'])}",
        f"cost USD:         {_fmt_total(agg['cost_usd'], 4)}",
        f"agent time s:     {_fmt_total(agg['agent_duration_seconds'], 1)}",
        f"task time s:      {_fmt_total(agg['duration_seconds'], 1)}",
    ]
    if any(_untimed_on_cpu(row) for row in rows):
        lines += ["", NO_GPU_NOTE]
    return "\n".join(lines) + "\n"


NO_GPU_NOTE = (
    "No GPU: candidates were checked for correctness on the CPU (Triton through its interpreter),\n"
    "never timed, so their scores are 0. Scores need a run on a GPU: the same config on a machine\n"
    "with one (target_gpu_model names it), or an executor that reaches one (docker, slurm).")


def _untimed_on_cpu(row: Mapping[str, Any]) -> bool:
    return str(row.get("reason") or "").startswith("performance was not measured: no GPU")


# --------------------------------------------------------------------------- entry point


def summary_rows(results: Iterable[TaskResult], missing_task_ids: Iterable[str] = (),
                 run_dir: Path | None = None) -> list[dict[str, Any]]:
    """Rows sorted by task id, so the order results arrive in never changes a report. With
    ``run_dir``, a task without a result that aka was stopped during says so."""
    rows = [task_row(r) for r in results]
    seen = {row["task_id"] for row in rows}
    rows += [missing_row(t, interruption_reason(run_dir, t) if run_dir is not None else None)
             for t in missing_task_ids if t not in seen]
    return sorted(rows, key=lambda row: row["task_id"])


def write_reports(run_dir: Path, results: list[TaskResult] | None = None) -> list[Path]:
    """Regenerate ``reports/summary.csv``, ``summary.json`` and ``report.txt``; return their paths.

    With ``results`` of ``None`` the run directory is read: every task listed in ``run.yaml``
    gets a row, and one without a result is reported with status ``missing``.
    """
    run_dir = Path(run_dir)
    if results is None:
        record = load_run(run_dir)
        rows = summary_rows(record.results.values(), record.missing_task_ids, run_dir)
    else:
        rows = summary_rows(results)
    out = reports_dir(run_dir)
    csv_path, json_path, text_path = out / "summary.csv", out / "summary.json", out / "report.txt"
    yamlio.write_text_atomic(csv_path, render_csv(rows))
    yamlio.write_json_atomic(json_path, summary_document(rows))
    yamlio.write_text_atomic(text_path, render_text(rows, title=f"aka run report: {run_dir.name}"))
    return [csv_path, json_path, text_path]
