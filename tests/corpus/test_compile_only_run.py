"""A whole run for a GPU target on a CPU host (``evaluation.device: cpu``) over a task of a compiled
backend: the agent works, the evaluator builds its candidate for the target's architecture, and
the record says nothing ran (status ``compile_only``, score 0, counted apart from completed tasks
in the reports). A portable Triton task in the same run is checked through the interpreter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aka_core import api
from aka_core.plugin.host import PluginHost
from aka_core.yamlio import dump_yaml

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = "cuda2cuda/transpose"


@pytest.mark.slow
def test_a_cpu_run_over_a_cuda_task_is_compile_only(tmp_path: Path) -> None:
    host = PluginHost()
    ready = host.backend("cuda").factory().readiness()
    if not ready.build:
        if os.environ.get("AKA_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"AKA_REQUIRE_TOOLCHAINS=1 but the cuda backend cannot build: {ready.detail}")
        pytest.skip(f"the cuda backend cannot build here: {ready.detail}")
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({
        "agent": {"template": "replay", "timeout_seconds": 600,
                  "options": {"source": str(ROOT / "tests" / "solutions")}},
        "tasks": [TASK_ID, "triton2triton/gelu"],
        "tasks_directory": str(ROOT / "tasks"),
        # The target is the GPU; evaluation on this host's CPU: compile-only for sm_90.
        "target_gpu_model": "H200",
        "evaluation": {"device": "cpu"},
        "scorer": {"name": "speedup"},
    }))
    outcome = api.run(config, output_root=tmp_path / "runs", host=host)
    results = {r.task_id: r for r in outcome.results}

    cuda = results[TASK_ID]
    assert cuda.status == "compile_only", cuda.error or cuda.acceptance
    assert cuda.pass_compilation is True and cuda.pass_correctness is None
    assert not cuda.candidate_accepted and cuda.score == 0.0 and cuda.speedup_ratio is None
    assert cuda.evaluation.compile_only.architecture == "sm_90"
    ran = next(g for g in cuda.acceptance.gates if g.name == "ran")
    assert not ran.passed and "not run" in ran.detail
    assert cuda.agent_execution is not None and cuda.agent_execution.status == "completed"

    summary = json.loads((outcome.run_dir / "reports" / "summary.json").read_text())
    counts = summary["aggregates"]["status_counts"]
    assert counts["compile_only"] == 1 and counts["completed"] == 1
    # Rates are over tasks that were judged: the compile-only one is left out.
    assert summary["aggregates"]["attempted"] == 1
