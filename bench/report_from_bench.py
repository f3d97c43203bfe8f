"""The HTML report (aka-report-html) of a GPU bench's stored-solution section, as a run would show
it: each task of ``replay`` in a bench.json becomes a task result (status, gates, speedup, CI,
the speedup scorer's score, its timed cases).

Usage:  python bench/report_from_bench.py BENCH_JSON OUT_DIR [--title T]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aka_core.models import Acceptance, TaskResult


def results(bench: dict) -> list[TaskResult]:
    out = []
    for task_id, row in sorted((bench.get("replay") or {}).items()):
        speedup = row.get("speedup")
        accepted = bool(row.get("accepted"))
        score = max(0.0, 1 - 1.05 / speedup) if accepted and speedup else 0.0
        cases = row.get("cases") or []
        out.append(TaskResult(
            task_id=task_id, status="completed", family=task_id.split("/")[0],
            duration_seconds=row.get("wall_s"), pass_compilation=True,
            pass_correctness=row.get("correct"), candidate_accepted=accepted,
            acceptance=Acceptance(accepted=accepted, reason=row.get("reason") or ""),
            speedup_ratio=speedup, score=score, scorer={"name": "speedup", "options": {}},
            evaluation={"performance": {"measured": speedup is not None, "speedup": speedup,
                                        "ci95": row.get("ci95"), "cases": cases},
                        "phases_wall": row.get("phases")}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bench", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    from aka_report_html import write

    bench = json.loads(args.bench.read_text())
    title = args.title or f"stored solutions on {bench.get('environment', {}).get('gpu', 'a GPU')}"
    print(write(results(bench), args.out, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
