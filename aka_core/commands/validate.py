"""``aka validate``: run configs and task folders, statically and (with ``--run``) on a device.

A task's validation report has ``overall_status`` PASS, WARN or FAIL, separate from any
optimisation result. ``--run`` runs the reference and the baseline through the evaluator (the
baseline against itself) and checks the reference's run time against the sizing rule; then the
quality checks of ``task_quality`` (hang guard, tolerance calibration, trivial candidates through
the real evaluator). Static validation includes ``task_quality``'s timeouts, held-out coverage
and unfinished-draft checks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from aka_core.convert import unstructure
from aka_core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, AkaError
from aka_core.evaluation.record import EvaluationRecord
from aka_core.models import TASK_FILE, Task
from aka_core.plugin.host import PluginHost
from aka_core.yamlio import write_json_atomic, write_yaml_atomic

# The reference should run 0.05-15 ms on the target (docs/task-format.md).
REFERENCE_MS_RANGE = (0.05, 15.0)


def _task_dirs(path: Path, host: PluginHost) -> list[tuple[Path, str]]:
    from aka_core.api import find_task
    from aka_core.run.selection import discover_tasks

    if (path / TASK_FILE).is_file() or _judged_task_dir(path, host):
        return [find_task(path)]
    found = discover_tasks(path, host)
    prefix = ""
    for parent in [path.resolve(), *path.resolve().parents]:
        if parent.name == "tasks":
            prefix = path.resolve().relative_to(parent).as_posix()
            break
    return [(p, f"{prefix}/{tid}" if prefix and prefix != "." else tid)
            for tid, p in sorted(found.items())]


def _judged_task_dir(path: Path, host: PluginHost) -> bool:
    """Whether ``path`` is a task folder of a format with its own judge."""
    from aka_core.plugin.records import TaskFormatSpec

    return any(isinstance(reg.record, TaskFormatSpec) and reg.record.judge is not None
               and reg.record.factory().is_task_dir(path) for reg in host.registered("task_format"))


def validate_task(task_dir: Path, task_id: str, host: PluginHost, *, run: bool,
                  device: str, trivial: bool = True) -> dict[str, Any]:
    """Static checks, and with ``run`` the evaluator's checks of the reference and baseline;
    ``trivial=False`` leaves out the trivial candidates (four more evaluations)."""
    from aka_core.builtin.operator_tasks import load_task

    report: dict[str, Any] = {"task": task_id, "path": str(task_dir), "checks": []}
    checks: list[dict[str, Any]] = report["checks"]
    try:
        task = load_task(task_dir, task_id, host)
    except AkaError as exc:
        checks.append({"name": "static", "status": "FAIL", "detail": str(exc)})
        report["overall_status"] = "FAIL"
        return report
    try:
        host.backend(task.backend)
    except AkaError as exc:
        checks.append({"name": "static", "status": "FAIL",
                       "detail": f"{task_dir / 'task.yaml'}: backend: {exc}"})
        report["overall_status"] = "FAIL"
        return report
    from aka_core.run.lifecycle import format_judge

    if format_judge(host, task) is not None:  # the format checked its files when it loaded them
        checks.append({"name": "static", "status": "PASS",
                       "detail": f"{task.format} task: files valid"})
        if run:
            checks.extend(_judged_run_checks(task, host, device, report))
    else:
        checks.append({"name": "static", "status": "PASS",
                       "detail": "task.yaml and files valid"})
        checks.extend(_contract_warnings(task))
        if run:
            checks.extend(_run_checks(task, host, device, report, trivial=trivial))
    statuses = {c["status"] for c in checks}
    report["overall_status"] = "FAIL" if "FAIL" in statuses else ("WARN" if "WARN" in statuses
                                                                    else "PASS")
    return report


def _contract_warnings(task: Task) -> list[dict[str, Any]]:
    from aka_core.authoring.task_quality import static_checks

    out = static_checks(task)
    if task.smoke_case is None:
        out.append({"name": "smoke_case", "status": "WARN",
                    "detail": "no smoke_case: CPU runs would use the first full case"})
    return out


def _run_checks(task: Task, host: PluginHost, device: str, report: dict[str, Any], *,
                trivial: bool = True) -> list[dict[str, Any]]:
    from aka_core.api import resolve_device, validate_task_run
    from aka_core.evaluation.evaluate import outcome

    device = resolve_device(device)
    record = validate_task_run(task, host, device=device)
    report["evaluation"] = unstructure(record.without("worker_log_tail"))
    gates = outcome(record)
    failure = record.failure
    out = []
    if failure is not None:
        out.append({"name": "run", "status": "FAIL", "detail": failure.message,
                    "traceback": failure.traceback,
                    "log_tail": (record.worker_log_tail or "")[-1500:]})
        return out
    if gates.compile_only and record.compile_only is not None:
        out.append({"name": "baseline_builds", "status": "PASS",
                    "detail": record.compile_only.note})
        return out
    n = len(record.correctness.checks) if record.correctness is not None else 0
    out.append({"name": "baseline_matches_reference", "status": "PASS" if gates.pass_correctness
                else "FAIL", "detail": f"{n} checks on {_device_name(record)}"})
    out.extend(_timing_checks(record))
    if gates.pass_correctness:
        from aka_core.authoring.task_quality import run_checks

        out.extend(run_checks(task, host, device, record, trivial=trivial))
    return out


def _device_name(record: EvaluationRecord) -> str | None:
    return record.device.name if record.device is not None else None


def _judged_run_checks(task: Task, host: PluginHost, device: str,
                       report: dict[str, Any]) -> list[dict[str, Any]]:
    """``--run`` for a task whose format judges it: its judge on the baseline against itself."""
    from aka_core.api import resolve_device, validate_task_run
    from aka_core.evaluation.evaluate import outcome

    record = validate_task_run(task, host, device=resolve_device(device))
    report["evaluation"] = unstructure(record.without("worker_log_tail"))
    failure = record.failure
    if failure is not None:
        return [{"name": "run", "status": "FAIL", "detail": failure.message,
                 "traceback": failure.traceback,
                 "log_tail": (record.worker_log_tail or "")[-1500:]}]
    gates = outcome(record)
    out = [{"name": "baseline_matches_reference",
            "status": "PASS" if gates.pass_correctness else "FAIL",
            "detail": f"on {_device_name(record)}"}]
    perf = record.performance
    if perf is None or not perf.measured:
        out.append({"name": "timing", "status": "PASS",
                    "detail": (perf.reason_not_measured if perf is not None else None)
                    or "not measured"})
        return out
    s, (lo, hi) = perf.speedup, perf.ci95 or (math.nan, math.nan)
    out.append({"name": "baseline_against_itself", "status": "PASS" if s is not None
                and abs(s - 1) < 0.02 else "WARN",
                "detail": f"A/A speedup {s:.4f} (95% CI {lo:.4f}..{hi:.4f})"})
    return out


def _timing_checks(record: EvaluationRecord) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    perf = record.performance
    if perf is None or not perf.measured:
        out.append({"name": "timing", "status": "PASS",
                    "detail": (perf.reason_not_measured if perf is not None else None)
                    or "not measured"})
        return out
    lo, hi = REFERENCE_MS_RANGE
    for case in perf.cases or []:
        ref_ms = case.reference_ms
        entry: dict[str, Any] = {"name": f"reference_time[{case.case}]", "reference_ms": ref_ms,
                                 "baseline_ms": case.baseline_median_ms}
        ok = ref_ms is not None and lo <= ref_ms <= hi
        entry["status"] = "PASS" if ok else "WARN"
        entry["detail"] = (f"reference {ref_ms:.4f} ms, baseline {case.baseline_median_ms:.4f}"
                           f" ms" + ("" if ok else f" (outside {lo}-{hi} ms)"))
        out.append(entry)
    s = perf.speedup
    aa_ok = s is not None and abs(s - 1) < 0.02
    ci = perf.ci95 or [math.nan, math.nan]
    out.append({"name": "baseline_against_itself", "status": "PASS" if aa_ok else "WARN",
                "detail": f"A/A speedup {s:.4f} (95% CI {ci[0]:.4f}..{ci[1]:.4f})"})
    return out


def validate_paths(paths: list[Path], host: PluginHost, *, run: bool, device: str,
                   report_dir: Path | None, as_json: bool, report_file: Path | None = None
                   ) -> int:
    from aka_core.run.config import check_plugin_factories, load_run_config, resolve_tasks_directory
    from aka_core.run.selection import resolve_selectors
    from aka_core.yamlio import load_yaml

    worst = EXIT_OK
    reports: list[dict[str, Any]] = []
    for path in paths:
        if path.is_file():
            try:
                config = load_run_config(path, host)
                check_plugin_factories(config, host, path)
                root = resolve_tasks_directory(config, path)
                resolve_selectors(list(config.tasks), root, host, source_file=path,
                                  source_doc=load_yaml(path))
                reports.append({"config": str(path), "overall_status": "PASS"})
            except AkaError as exc:
                reports.append({"config": str(path), "overall_status": "FAIL", "detail": str(exc)})
                worst = max(worst, EXIT_USAGE)
            continue
        if not path.is_dir():
            reports.append({"path": str(path), "overall_status": "FAIL",
                            "detail": "no such file or folder"})
            worst = max(worst, EXIT_USAGE)
            continue
        found = _task_dirs(path, host)
        if not found:
            reports.append({"path": str(path), "overall_status": "FAIL",
                            "detail": "no task.yaml here or in any folder below: a task folder "
                                      "holds a task.yaml (docs/task-format.md)"})
            worst = max(worst, EXIT_USAGE)
        for task_dir, task_id in found:
            report = validate_task(task_dir, task_id, host, run=run, device=device)
            reports.append(report)
            if report["overall_status"] == "FAIL":
                static_failed = report["checks"][0]["status"] == "FAIL"
                worst = max(worst, EXIT_USAGE if static_failed else EXIT_FAILURE)
            if report_dir is not None:
                write_yaml_atomic(report_dir.joinpath(*task_id.split("/"), "validation_report.yaml"),
                                  report)
    if report_file is not None:
        write_report_file(report_file, reports)
    if as_json:
        print(json.dumps(reports, indent=2, default=str))
    else:
        for report in reports:
            name = report.get("task") or report.get("config") or report.get("path")
            print(f"{report['overall_status']:<5} {name}")
            for check in report.get("checks", []):
                if check["status"] != "PASS" or run:
                    print(f"      {check['status']:<5} {check['name']}: {check.get('detail', '')}")
            if "detail" in report:
                print(f"      {report['detail']}")
    return worst if worst != EXIT_OK or all(r["overall_status"] != "FAIL" for r in reports) \
        else EXIT_FAILURE


def write_report_file(path: Path, reports: list[dict[str, Any]]) -> None:
    """Every report of this validation in one file: JSON for a ``.json`` name, else YAML."""
    data = {"reports": reports,
            "overall_status": "FAIL" if any(r["overall_status"] == "FAIL" for r in reports)
            else "WARN" if any(r["overall_status"] == "WARN" for r in reports) else "PASS"}
    if path.suffix == ".json":
        write_json_atomic(path, data)
    else:
        write_yaml_atomic(path, data)
