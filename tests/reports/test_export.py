"""``aka export``: rows that equal the task results, in JSON Lines and Parquet."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aka_core.cli import main
from aka_core.commands import export
from aka_core.run.lifecycle import task_dir
from aka_core.run.results import load_run

from .conftest import make_result


@pytest.fixture
def run_with_workspaces(build_run) -> Path:
    results = [make_result("triton2triton/gelu", speedup=2.0, ci=(1.9, 2.1), cost_usd=0.25,
                           input_tokens=1200, output_tokens=300),
               make_result("cuda2cuda/rms_norm", correct=False, evaluation={
                   "failure": {"kind": "correctness", "message": "wrong on case c1"}}),
               make_result("torch2triton/softmax", status="skipped")]
    run = build_run("run1", results)
    for task_id, files in (("triton2triton/gelu", {"kernel.py": "def gelu(x): ...\n"}),
                           ("cuda2cuda/rms_norm", {"kernel.cu": "__global__ void k() {}\n",
                                                   "kernel.py": "import torch\n"})):
        folder = task_dir(run, task_id)
        (folder / "workspace").mkdir(parents=True)
        (folder / "baseline").mkdir(parents=True)
        (folder / "baseline" / "task.yaml").write_text(f"editable: {sorted(files)}\n")
        for name, text in files.items():
            (folder / "workspace" / name).write_text(text)
        (folder / "workspace" / "reference.py").write_text("# not the candidate's\n")
    return run


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_rows_round_trip_and_equal_the_task_results(run_with_workspaces: Path, tmp_path: Path,
                                                    fmt: str) -> None:
    out = tmp_path / f"runs.{fmt}"
    assert export.write([run_with_workspaces], out, fmt, sources=True) == 3
    rows = {r["task_id"]: r for r in export.read(out)}
    record = load_run(run_with_workspaces)
    assert set(rows) == set(record.results)
    for task_id, result in record.results.items():
        got = rows[task_id]
        assert got["run"] == "run1" and got["status"] == result.status
        assert got["score"] == result.score and got["speedup"] == result.speedup_ratio
        assert got["pass_correctness"] == result.pass_correctness
        assert got["accepted"] == result.candidate_accepted
    gelu = rows["triton2triton/gelu"]
    assert gelu["ci95"] == [1.9, 2.1] and gelu["cost_usd"] == 0.25
    assert gelu["input_tokens"] == 1200 and gelu["agent"] == "replay"
    assert gelu["candidate_files"] == {
        "kernel.py": hashlib.sha256(b"def gelu(x): ...\n").hexdigest()}
    assert gelu["sources"] == {"kernel.py": "def gelu(x): ...\n"}
    norm = rows["cuda2cuda/rms_norm"]
    assert sorted(norm["candidate_files"]) == ["kernel.cu", "kernel.py"]  # editable files only
    assert norm["failure_kind"] == "correctness"
    assert rows["torch2triton/softmax"]["candidate_files"] == {}


def test_the_command(run_with_workspaces: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(run_with_workspaces), str(run_with_workspaces), "-o", str(out)]) == 0
    assert "6 rows written" in capsys.readouterr().out
    assert "sources" not in export.read(out)[0]
    assert main(["export", str(tmp_path / "nope"), "-o", str(out)]) == 2
    assert "run directory not found" in capsys.readouterr().err
