"""The baseline's blocks sized on its own work against as many calls as the candidate's, side by
side on the same machine: per case, each way's per-call medians and speedup, and the timing
phase's seconds.

Each task's stored solution is evaluated (``aka eval``, the same held-out shapes) against the task
as it is (``timing.baseline_blocks: own``, the default) and against a copy of the task with
``baseline_blocks: shared`` (the judge before the change), alternating, ``--reps`` times each.
Where the baseline is much slower than the candidate, ``own`` times it on blocks that much
shorter; the per-call times must not move, the timing phase should shrink.

Usage:  python bench/block_sizes_ab.py --out DIR [--reps 1] task_id [task_id ...]
Writes DIR/ab.json and DIR/table.md, prints the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def evaluate(task_dir: Path, candidate: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval", str(task_dir),
                           "--candidate", str(candidate), "--json", "--held-out-seed", "1"],
                          capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"error": done.stderr[-1500:]}


def summary(record: dict[str, Any]) -> dict[str, Any]:
    evaluation = record.get("evaluation") or {}
    perf = evaluation.get("performance") or {}
    return {"speedup": perf.get("speedup"), "timing_s": (evaluation.get("phases") or {}).get("timing"),
            "failure": (evaluation.get("failure") or {}).get("message") or record.get("error"),
            "cases": {c["case"]: {k: c.get(k) for k in (
                "baseline_median_ms", "candidate_median_ms", "speedup", "calls_per_block",
                "baseline_calls_per_block", "pairs", "seconds")} for c in perf.get("cases", [])}}


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="aka-ab-") as tmp:
        for task in args.tasks:
            shared = Path(tmp) / task
            shutil.copytree(ROOT / "tasks" / task, shared)
            with (shared / "task.yaml").open("a") as handle:
                handle.write("timing: {baseline_blocks: shared}\n")
            runs: dict[str, list[dict[str, Any]]] = {"own": [], "shared": []}
            for _ in range(args.reps):
                for way, folder in (("own", ROOT / "tasks" / task), ("shared", shared)):
                    runs[way].append(summary(evaluate(folder, ROOT / "tests" / "solutions" / task)))
            results[task] = runs
    (args.out / "ab.json").write_text(json.dumps(results, indent=1))
    lines = ["| task | case | calls per block (baseline/candidate), own | shared | baseline ms "
             "own / shared | candidate ms own / shared | speedup own / shared |",
             "|---|---|---|---|---|---|---|"]
    for task, runs in results.items():
        for own, shared in zip(runs["own"], runs["shared"], strict=True):
            if own.get("failure") or shared.get("failure"):
                lines.append(f"| {task} | failed: {own.get('failure') or shared.get('failure')} "
                             "| | | | | |")
                continue
            for case, a in own["cases"].items():
                b = shared["cases"].get(case, {})
                lines.append(
                    f"| {task} | {case} | {a['baseline_calls_per_block']}/{a['calls_per_block']} "
                    f"| {b.get('baseline_calls_per_block')}/{b.get('calls_per_block')} "
                    f"| {a['baseline_median_ms']:.4f} / {b.get('baseline_median_ms', 0):.4f} "
                    f"| {a['candidate_median_ms']:.4f} / {b.get('candidate_median_ms', 0):.4f} "
                    f"| {a['speedup']:.4f} / {b.get('speedup', 0):.4f} |")
            lines.append(f"| {task} | **all** (timing phase {_num(own['timing_s'], 2)} s / "
                         f"{_num(shared['timing_s'], 2)} s) | | | | | **{_num(own['speedup'])} / "
                         f"{_num(shared['speedup'])}** |")
    table = "\n".join(lines)
    (args.out / "table.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
