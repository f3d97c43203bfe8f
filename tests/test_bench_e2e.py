"""The e2e bench's tools on the CPU: ``bench/e2e_bench.py --tiny`` (the tiny variants of the
tasks, through the real judge) and ``bench/corpus_table.py`` reading what it wrote. They are the
GPU proof's tools (bench/results/ comes from them): this keeps them working between GPU runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def test_the_e2e_bench_runs_the_tiny_variants_and_the_corpus_table_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKA_E2E_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "e2e_bench.py"), "--out", str(out), "--tiny",
         "--device", "cpu", "--tasks", "qwen3_silu_mul", "--sections", "solution,mutants"],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {row["item"]: row for row in json.loads((out / "e2e_bench.json").read_text())["rows"]}
    solution = rows["tests/solutions/e2e/qwen3_silu_mul"]
    assert solution["accepted"] is True and solution["speedup"] > 0, solution
    mutant = rows["gelu_for_silu"]
    assert mutant["accepted"] is False and "silu_and_mul" in mutant["reason"], mutant
    assert "| qwen3_silu_mul | mutants | gelu_for_silu | rejected (correctness)" in (
        out / "e2e_table.md").read_text()

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import corpus_table
    finally:
        sys.path.pop(0)
    merged = corpus_table.merged([out / "e2e_bench.json"])
    replay, source = merged["e2e/qwen3_silu_mul"]["replay"]
    assert replay["speedup"] == solution["speedup"] and source == str(out)
