"""`aka eval` wall time of two installs of aka on the same tasks, alternated in one run.

Each engine is an install (a folder for PYTHONPATH) plus the tree its tasks and stored solutions
come from; for each task the two are run in turn, ``--repeats`` times, and the table gives each
one's median seconds end to end, its phase split, and the difference.

Usage:  python bench/latency_compare.py --out DIR --engine NAME=SITE:TREE --engine NAME=SITE:TREE
                                        [--repeats 2] task_id [task_id ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def one(site: str, tree: Path, task_id: str) -> dict[str, Any]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "aka_core.cli", "eval", str(tree / "tasks" / task_id),
         "--candidate", str(tree / "tests" / "solutions" / task_id), "--json"],
        capture_output=True, text=True, check=False, cwd=tree,
        env={**os.environ, "PYTHONPATH": site})
    total = time.monotonic() - started
    try:
        evaluation = json.loads(proc.stdout).get("evaluation", {})
    except json.JSONDecodeError:
        return {"total_s": total, "error": (proc.stderr or proc.stdout)[-1500:]}
    performance = evaluation.get("performance") or {}
    return {"total_s": total, "phases": evaluation.get("phases_wall"),
            "kernel_cache": evaluation.get("kernel_cache"),
            "speedup": performance.get("speedup"),
            "cases": [(c.get("case"), c.get("speedup")) for c in performance.get("cases", [])],
            "accepted": (evaluation.get("acceptance") or {}).get("accepted"),
            "diagnostics": evaluation.get("diagnostics"),
            "judge_block_steps_s": performance.get("judge_block_steps_s"),
            "timing_cases": [{k: c.get(k) for k in ("case", "pairs", "calls_per_block", "seconds")}
                             for c in performance.get("cases", [])]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--engine", action="append", required=True,
                        help="NAME=SITE:TREE (PYTHONPATH folder : repository tree)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    engines = {}
    for item in args.engine:
        name, rest = item.split("=", 1)
        site, tree = rest.split(":", 1)
        engines[name] = (site, Path(tree).resolve())
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for task_id in args.tasks:
        for _ in range(args.repeats):
            for name, (site, tree) in engines.items():
                result = one(site, tree, task_id)
                rows.setdefault(task_id, {}).setdefault(name, []).append(result)
                print(f"{task_id} {name}: {result.get('total_s'):.1f} s "
                      f"{result.get('phases')} {result.get('error', '')}", file=sys.stderr,
                      flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latency.json").write_text(json.dumps(rows, indent=1))
    names = list(engines)
    lines = ["| task | " + " | ".join(f"{n} s (median)" for n in names)
             + f" | {names[-1]} - {names[0]} s | speedups | phases ({', '.join(names)}) |",
             "|---|" + "---|" * (len(names) + 3)]
    for task_id, by_engine in rows.items():
        medians = [statistics.median(r["total_s"] for r in by_engine[n]) for n in names]
        phases = "; ".join(
            ", ".join(f"{k} {v:.1f}" for k, v in (by_engine[n][-1].get("phases") or {}).items())
            for n in names)
        speedups = "; ".join(
            ", ".join(f"{r['speedup']:.3f}" if r.get("speedup") else "-" for r in by_engine[n])
            for n in names)
        lines.append(f"| {task_id} | " + " | ".join(f"{m:.1f}" for m in medians)
                     + f" | {medians[-1] - medians[0]:+.1f} | {speedups} | {phases} |")
    table = "\n".join(lines)
    (args.out / "latency.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
