"""Run reports: CSV rows, JSON aggregates (null-aware totals), the text table, idempotence."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from aka_core.models import TaskResult
from aka_core.run.reports import COLUMNS, write_reports


@pytest.fixture
def results(build_result) -> list[TaskResult]:
    return [
        build_result("triton2triton/gelu", speedup=2.0, ci=(1.9, 2.1),
                     input_tokens=100, output_tokens=50, cost_usd=0.5),
        build_result("triton2triton/rms_norm", speedup=1.5, ci=(1.4, 1.6), cost_usd=0.25),
        build_result("torch2triton/gemm", correct=False, input_tokens=10, output_tokens=5),
        build_result("torch2triton/fp8", "skipped", skip_reason="requires sm_100"),
        build_result("torch2triton/softmax", "error", compiled=None, correct=None,
                     error="worker crashed: illegal memory access"),
    ]


@pytest.fixture
def run_dir(build_run, results: list[TaskResult]) -> Path:
    return build_run("run_20250101", results, extra_task_ids=["hip2hip/gelu"])


def _json(run_dir: Path) -> dict:
    def no_constants(name: str) -> None:
        raise AssertionError(f"summary.json holds {name}, which is not JSON")

    text = (run_dir / "reports" / "summary.json").read_text()
    return json.loads(text, parse_constant=no_constants)


def test_writes_three_reports(run_dir: Path) -> None:
    paths = write_reports(run_dir)
    assert [p.name for p in paths] == ["summary.csv", "summary.json", "report.txt"]
    assert all(p.parent == run_dir / "reports" and p.is_file() for p in paths)


def test_csv_has_one_row_per_task(run_dir: Path) -> None:
    write_reports(run_dir)
    with (run_dir / "reports" / "summary.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS
    by_id = {r["task_id"]: r for r in rows}
    assert len(rows) == 6
    gelu = by_id["triton2triton/gelu"]
    assert gelu["status"] == "completed"
    assert gelu["candidate_accepted"] == "true"
    assert (gelu["speedup_ratio"], gelu["ci95_low"], gelu["ci95_high"]) == ("2.0", "1.9", "2.1")
    assert float(gelu["score"]) == pytest.approx(1 - 1.05 / 2.0)
    assert gelu["timing_method"] == "events"
    assert gelu["device"] == "NVIDIA H200 (sm_90)"
    assert (gelu["input_tokens"], gelu["output_tokens"], gelu["cost_usd"]) == ("100", "50", "0.5")
    gemm = by_id["torch2triton/gemm"]
    assert (gemm["pass_compilation"], gemm["pass_correctness"]) == ("true", "false")
    assert gemm["cost_usd"] == "" and gemm["speedup_ratio"] == ""
    assert gemm["reason"] == "correctness failed"
    assert by_id["torch2triton/fp8"]["reason"] == "requires sm_100"
    assert by_id["torch2triton/softmax"]["reason"] == "worker crashed: illegal memory access"
    assert by_id["hip2hip/gelu"]["status"] == "missing"


def test_json_aggregates(run_dir: Path) -> None:
    write_reports(run_dir)
    doc = _json(run_dir)
    assert len(doc["tasks"]) == 6
    agg = doc["aggregates"]
    assert agg["status_counts"] == {"completed": 3, "compile_only": 0, "error": 1,
                                    "infra_error": 0, "missing": 1, "skipped": 1}
    assert agg["agent_status_counts"] == {
        "budget_exhausted": 0, "completed": 4, "failed": 0, "infra_error": 0, "max_turns": 0,
        "not_authenticated": 0, "not_installed": 0, "rate_limited": 0, "timed_out": 0}
    assert agg["attempted"] == 4  # completed + error
    assert agg["compiled"] == {"count": 3, "of": 4, "rate": 0.75}
    assert agg["correct"] == {"count": 2, "of": 4, "rate": 0.5}
    assert agg["accepted"] == {"count": 2, "of": 4, "rate": 0.5}
    expected_mean = ((1 - 1.05 / 2.0) + (1 - 1.05 / 1.5)) / 4
    assert agg["mean_score"]["value"] == pytest.approx(expected_mean)
    assert agg["geomean_speedup_accepted"]["value"] == pytest.approx(math.sqrt(3.0))
    assert agg["geomean_speedup_accepted"]["tasks"] == 2


def test_totals_are_null_aware(run_dir: Path) -> None:
    write_reports(run_dir)
    agg = _json(run_dir)["aggregates"]
    assert agg["input_tokens"] == {"total": 110, "reported_by": 2, "of": 6}
    assert agg["cost_usd"]["total"] == pytest.approx(0.75)
    assert agg["cost_usd"]["reported_by"] == 2
    # nobody reported cached tokens: the total is unknown, not zero
    assert agg["cached_input_tokens"] == {"total": None, "reported_by": 0, "of": 6}


def test_text_report_is_readable(run_dir: Path) -> None:
    write_reports(run_dir)
    text = (run_dir / "reports" / "report.txt").read_text()
    assert text.startswith("aka run report: run_20250101\n")
    assert "2.000x [1.900, 2.100]" in text
    assert "triton2triton/rms_norm" in text
    assert "accepted:         2/4 (50.0%)" in text
    assert "input tokens:     110 (reported by 2/6 tasks)" in text
    assert "cached tokens:    - (reported by 0/6 tasks)" in text
    header = text.splitlines()[3]
    rule = text.splitlines()[4]
    assert header.startswith("task") and set(rule) <= {"-", " "}


def test_regenerating_gives_identical_files(run_dir: Path, results: list[TaskResult]) -> None:
    first = {p.name: p.read_bytes() for p in write_reports(run_dir)}
    second = {p.name: p.read_bytes() for p in write_reports(run_dir)}
    assert first == second
    # explicit results in any order give the same report (sorted rows)
    forward = {p.name: p.read_bytes() for p in write_reports(run_dir, results)}
    backward = {p.name: p.read_bytes() for p in write_reports(run_dir, results[::-1])}
    assert forward == backward


def test_missing_evaluation_parts_and_unsound_numbers_are_reported_as_null(
        tmp_path: Path, build_result) -> None:
    weird = [
        build_result("a/no_eval", speedup=1.2, evaluation={}),
        build_result("a/no_ci", speedup=1.2, evaluation={"performance": {"measured": True}}),
        build_result("a/short_ci", speedup=1.2, evaluation={"performance": {"ci95": [1.0]}}),
        build_result("a/nan", speedup=float("nan"), accepted=True, score=0.0,
                     evaluation={"performance": {"ci95": [float("nan"), 2.0]}}),
    ]
    write_reports(tmp_path, weird)
    rows = {r["task_id"]: r for r in _json(tmp_path)["tasks"]}
    assert rows["a/no_eval"]["speedup_ratio"] == 1.2 and rows["a/no_eval"]["device"] is None
    assert rows["a/no_ci"]["ci95_low"] is None and rows["a/no_ci"]["timing_method"] is None
    assert rows["a/short_ci"]["ci95_low"] is None
    assert rows["a/nan"]["speedup_ratio"] is None and rows["a/nan"]["ci95_low"] is None


def test_a_malformed_evaluation_does_not_make_a_result(build_result) -> None:
    """The record is typed: a part of the wrong shape fails where it is read, not in a report."""
    with pytest.raises(Exception):  # noqa: B017 - cattrs' validation group
        build_result("a/bad_perf", speedup=1.2,
                     evaluation={"device": "gpu?", "performance": "not measured"})


def test_an_empty_run_reports_nulls(build_run) -> None:
    run_dir = build_run("empty", [])
    write_reports(run_dir)
    agg = _json(run_dir)["aggregates"]
    assert agg["tasks"] == 0
    assert agg["mean_score"] == {"value": None, "tasks": 0}
    assert agg["accepted"]["rate"] is None


def test_agent_statuses_are_counted_and_an_interrupted_task_says_why(
        build_run, build_result) -> None:
    """Every agent status is a key of the counts (0 when none); a selected task without a
    result whose folder has ``interrupted.json`` reports what it says."""
    import attrs

    limited = build_result("demo/a")
    assert limited.agent_execution is not None
    limited = attrs.evolve(limited, status="infra_error", agent_execution=attrs.evolve(
        limited.agent_execution, status="rate_limited", attempts=3))
    run_dir = build_run("run_20250102", [limited, build_result("demo/b")],
                        extra_task_ids=["demo/c"])
    (run_dir / "demo" / "c").mkdir(parents=True, exist_ok=True)
    (run_dir / "demo" / "c" / "interrupted.json").write_text(json.dumps({
        "signal": "SIGTERM", "step": "agent",
        "message": "aka was stopped by SIGTERM during the agent step"}))
    write_reports(run_dir)
    doc = _json(run_dir)
    agg = doc["aggregates"]
    assert agg["status_counts"]["infra_error"] == 1 and agg["attempted"] == 1
    assert (agg["agent_status_counts"]["rate_limited"], agg["agent_status_counts"]["completed"]
            ) == (1, 1)
    rows = {row["task_id"]: row for row in doc["tasks"]}
    assert rows["demo/c"]["reason"] == "aka was stopped by SIGTERM during the agent step"
    text = (run_dir / "reports" / "report.txt").read_text()
    assert "agents:           completed 1, rate_limited 1" in text


def test_a_cpu_run_says_once_why_nothing_was_timed() -> None:
    from aka_core.run.reports import NO_GPU_NOTE, render_text

    row = {"task_id": "a/b", "status": "completed", "agent_status": "completed",
           "pass_compilation": True, "pass_correctness": True, "candidate_accepted": True,
           "speedup_ratio": None, "ci95_low": None, "ci95_high": None, "score": 0.0,
           "input_tokens": None, "cached_input_tokens": None, "cache_write_tokens": None,
           "output_tokens": None, "reasoning_tokens": None, "cost_usd": None,
           "agent_duration_seconds": 1.0, "duration_seconds": 2.0, "timing_method": None,
           "device": "cpu", "reason": "performance was not measured: no GPU (correctness ran "
                                     "on the CPU through Triton's interpreter)"}
    text = render_text([row, {**row, "task_id": "a/c"}])
    assert text.count("not timed: no GPU (below)") == 2
    assert text.count(NO_GPU_NOTE) == 1
    assert NO_GPU_NOTE not in render_text([{**row, "reason": "all gates passed"}])
