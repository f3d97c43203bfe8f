"""The README's quick start, exactly as a new user runs it: ``aka run configs/quickstart.yaml``
in the repository root, on a machine without a GPU (Triton's CPU interpreter)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aka_core.convert import unstructure
from aka_core.run.config import load_run_config
from aka_core.run.results import load_run

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "configs" / "quickstart.yaml"


@pytest.mark.slow
def test_quickstart_runs_end_to_end_on_cpu(tmp_path: Path) -> None:
    aka = shutil.which("aka")
    command = [aka] if aka else [sys.executable, "-m", "aka_core.cli"]
    done = subprocess.run([*command, "run", "configs/quickstart.yaml", "--output-root",
                           str(tmp_path), "--no-progress"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stderr[-4000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    assert run_dir.parent.parent == tmp_path
    run = load_run(run_dir)
    selected = list(load_run_config(QUICKSTART).tasks)
    assert list(run.task_ids) == selected and sorted(run.results) == sorted(selected)
    for task_id, result in run.results.items():
        failure = unstructure(result.evaluation).get("failure") or {}
        assert result.status == "completed", (task_id, result.error, failure.get("traceback"))
        assert result.agent_execution is not None
        assert result.agent_execution.status == "completed", result.agent_execution.message
        assert (result.pass_compilation, result.pass_correctness) == (True, True), (
            task_id, failure.get("message"))
        assert result.candidate_accepted is True, result.acceptance
        assert result.speedup_ratio is None and result.score == 0.0
        perf = unstructure(result.evaluation)["performance"]
        assert perf["measured"] is False
        assert "Triton's interpreter" in perf["reason_not_measured"]
    assert (run_dir / "reports" / "report.txt").is_file()
