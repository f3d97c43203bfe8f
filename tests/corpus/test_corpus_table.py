"""bench/corpus_table.py: a task's row takes its 2x-work reading from the double section."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_corpus_table_shows_two_x_work_and_counts_it(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import corpus_table
    finally:
        sys.path.pop(0)
    run = tmp_path / "bench.json"
    run.write_text(json.dumps({
        "replay": {"triton2triton/gelu": {"speedup": 2.4, "ci95": [2.39, 2.41], "cases": []}},
        "double": {"triton2triton/gelu": {"speedup": 0.5005},
                   "triton2triton/softmax": {"speedup": 0.4901},
                   "triton2triton/rms_norm": {"error": "RuntimeError: broken"}}}))
    text, summary = corpus_table.build([run], "H200")
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in text.splitlines()
            if line.startswith("| triton2triton/")}
    header = next(line for line in text.splitlines() if line.startswith("| task"))
    column = header.split(" | ").index("2x")
    assert rows["triton2triton/gelu"][column] == "0.5005"
    assert rows["triton2triton/softmax"][column] == "0.4901"
    assert rows["triton2triton/rms_norm"][column] == "-"  # an error row is no reading
    assert summary["doubled"] == 2 and summary["doubled_within_1pct"] == 1
