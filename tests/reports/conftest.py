"""Builders for task results and run directories used by the report and comparison tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from aka_core import yamlio
from aka_core.models import Acceptance, AgentExecution, AgentUsage, TaskResult
from aka_core.run.results import write_task_result

DEVICE = {"kind": "cuda", "vendor": "nvidia", "name": "NVIDIA H200", "architecture": "sm_90"}


def make_result(
    task_id: str,
    status: str = "completed",
    *,
    compiled: bool | None = True,
    correct: bool | None = True,
    accepted: bool | None = None,
    speedup: float | None = None,
    ci: tuple[float, float] | None = None,
    score: float | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost_usd: float | None = None,
    duration: float | None = 10.0,
    skip_reason: str | None = None,
    error: str | None = None,
    evaluation: dict[str, Any] | None = None,
) -> TaskResult:
    """A TaskResult as the lifecycle would write it; score defaults to the speedup reward."""
    if status == "skipped":
        return TaskResult(task_id=task_id, status="skipped", family=task_id.split("/")[0],
                          backend="triton", skip_reason=skip_reason or "requires sm_100")
    if accepted is None:
        accepted = bool(correct) and speedup is not None
    if score is None:
        score = max(0.0, 1 - 1.05 / speedup) if accepted and speedup else 0.0
    if evaluation is None:
        evaluation = {"device": DEVICE}
        if speedup is not None:
            evaluation["performance"] = {
                "measured": True, "reason_not_measured": None, "method": ["events"],
                "speedup": speedup, "ci95": list(ci) if ci else None,
                "cases": [{"case": "small", "held_out": False, "baseline_median_ms": 1.0,
                           "candidate_median_ms": 1.0 / speedup, "speedup": speedup,
                           "ci95": list(ci) if ci else None, "pairs": 25}],
            }
    return TaskResult(
        task_id=task_id,
        status=status,  # type: ignore[arg-type]
        family=task_id.split("/")[0],
        backend="triton",
        error=error,
        duration_seconds=duration,
        agent_execution=AgentExecution(
            agent="replay", status="completed", duration_seconds=5.0,
            usage=AgentUsage(input_tokens=input_tokens, output_tokens=output_tokens,
                             cost_usd=cost_usd)),
        pass_compilation=compiled,
        pass_correctness=correct,
        candidate_accepted=accepted,
        acceptance=Acceptance(accepted=accepted,
                              reason="all gates passed" if accepted else "correctness failed"),
        speedup_ratio=speedup,
        score=score,
        evaluation=evaluation,
    )


def make_run(root: Path, name: str, results: Sequence[TaskResult],
             extra_task_ids: Sequence[str] = ()) -> Path:
    """A run directory with ``run.yaml`` and one ``task_result.yaml`` per result."""
    run_dir = root / name
    task_ids = [r.task_id for r in results] + list(extra_task_ids)
    yamlio.write_yaml_atomic(run_dir / "run.yaml", {
        "config": {"agent": {"template": "replay"}}, "task_ids": task_ids, "plugins": {},
        "host": {}, "created_at": "2025-01-01T00:00:00Z", "aka_version": "0.1.0"})
    for result in results:
        write_task_result(run_dir, result)
    return run_dir


@pytest.fixture
def build_result() -> Callable[..., TaskResult]:
    return make_result


@pytest.fixture
def build_run(tmp_path: Path) -> Callable[..., Path]:
    def build(name: str, results: Sequence[TaskResult],
              extra_task_ids: Sequence[str] = ()) -> Path:
        return make_run(tmp_path, name, results, extra_task_ids)

    return build
