"""The corpus table: every task, whether and when it was validated on the target GPU, its
baseline's time, the stored solution's speedup, A/A and speed-of-light fractions.

The numbers come from `bench/gpu_bench.py` runs kept under bench/results (their `bench.json`),
given oldest first: a later run's row for a task replaces an earlier run's. Per task:

- *validated*: the task.yaml's `validated_on` entry for the target in mode `run` (its date);
- *baseline ms*: the baseline's median per call on the task's first case (replay section);
- *solution*: the stored solution's speedup over the baseline and its 95% CI (replay section);
- *A/A*: the baseline timed against itself (the validate section's `aa`, else the median of
  the aa section's evaluations);
- *SOL baseline / solution*: the speed-of-light time of a call (the task's declared bytes and
  FLOPs at the target's datasheet bandwidth and peak, `aka_core.evaluation.cost`) over the measured time,
  geometric mean over the task's visible cases: 1.0 would be the hardware limit;
- *2x*: a candidate doing the baseline's whole work twice per call, timed against it (the
  double section): 0.50 is exact;
- *run*: the results folder the solution's numbers come from.

An e2e task's numbers come from `bench/e2e_bench.py` runs (their `e2e_bench.json`): its
baseline time is milliseconds per output token of the served workload, its solution's speedup
the throughput ratio, its A/A the validate section's baseline against itself.

Usage:  python bench/corpus_table.py [--target H200] [--out docs/corpus.md] RUN/bench.json ...
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"


def merged(runs: list[Path]) -> dict[str, dict[str, Any]]:
    """Per task: its latest replay, validate and aa rows, each with the run it came from."""
    rows: dict[str, dict[str, Any]] = {}
    for run in runs:
        data = json.loads(run.read_text())
        results = ROOT / "bench" / "results"
        folder = run.resolve().parent
        source = (folder.relative_to(results).as_posix() if results in folder.parents
                  else str(folder))
        for section in ("replay", "validate", "aa", "double"):
            for task_id, row in (data.get(section) or {}).items():
                if row and not (isinstance(row, dict) and row.get("error")):
                    rows.setdefault(task_id, {})[section] = (row, source)
        for row in data.get("rows") or []:  # an e2e_bench.json
            if "speedup" not in row or not row.get("accepted"):
                continue
            task_id = f"e2e/{row['task']}"
            if row.get("section") == "solution":
                rows.setdefault(task_id, {})["replay"] = (row, source)
            elif row.get("section") == "validate":
                rows.setdefault(task_id, {})["validate"] = ({"aa": row}, source)
    return rows


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def sol_fractions(task: Any, replay: dict[str, Any], model: Any) -> tuple[float | None, ...]:
    """Speed of light over measured time, baseline and solution, over the visible cases."""
    from aka_core.evaluation import cost

    if task.cost is None:
        return None, None
    params = {case.name: dict(case.params) for case in task.cases}
    base, cand = [], []
    for case in replay.get("cases") or []:
        if case.get("case") not in params:
            continue
        try:
            sol = cost.speed_of_light_ms(task.cost.bytes, task.cost.flops, params[case["case"]],
                                         model.memory_bandwidth, model.peak_flops)
        except cost.CostError:
            return None, None
        if sol is None:
            return None, None
        if case.get("baseline_median_ms"):
            base.append(sol / case["baseline_median_ms"])
        if case.get("candidate_median_ms"):
            cand.append(sol / case["candidate_median_ms"])
    return geomean(base), geomean(cand)


def aa_of(row: dict[str, Any]) -> float | None:
    if "validate" in row:
        value = ((row["validate"][0].get("aa") or {}).get("speedup"))
        if value:
            return value
    if "aa" in row:
        speeds = [r.get("speedup") for r in row["aa"][0] if isinstance(r, dict) and r.get("speedup")]
        return statistics.median(speeds) if speeds else None
    return None


def validated(task: Any, model: Any) -> str:
    from aka_core.gpus import validation_on

    entry = validation_on(task, model)
    if entry is not None:
        return str(entry.get("date", "yes"))
    modes = sorted({str(e.get("mode")) for e in task.validated_on if e.get("mode")})
    return "no" + (f" ({', '.join(modes)})" if modes else "")


def fmt(value: float | None, digits: int) -> str:
    return f"{value:.{digits}f}" if value else "-"


def level(task: Any) -> str:
    return next((t for t in task.tags if t.startswith("level-")), "-")


def build(runs: list[Path], target: str) -> tuple[str, dict[str, Any]]:
    from aka_core import gpus
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.plugin.host import PluginHost
    from aka_core.run.selection import discover_tasks

    host = PluginHost()
    model = gpus.gpu_model(target)
    found = merged(runs)
    lines = [f"| task | level | validated on {target} | baseline ms | solution speedup [95% CI] "
             "| A/A | 2x | SOL baseline | SOL solution | run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    summary = {"tasks": 0, "runs_on_target": 0, "validated": 0, "with_solution_timed": 0,
               "faster": 0, "doubled": 0, "doubled_within_1pct": 0}
    for task_id in sorted(discover_tasks(TASKS, host)):
        task = load_task(TASKS.joinpath(*task_id.split("/")), task_id, host)
        summary["tasks"] += 1
        skip = gpus.skip_reason(task, model, host.backend_vendors(task.backend))
        row = found.get(task_id, {})
        when = validated(task, model)
        if skip:
            lines.append(f"| {task_id} | {level(task)} | not on this GPU: {skip} | | | | | | | |")
            continue
        summary["runs_on_target"] += 1
        summary["validated"] += when[0].isdigit()
        replay, source = row.get("replay", ({}, ""))
        cases = replay.get("cases") or []
        first = next((c for c in cases if c.get("case") == task.cases[0].name), None)
        speed, ci = replay.get("speedup"), replay.get("ci95")
        summary["with_solution_timed"] += bool(speed)
        summary["faster"] += bool(speed and ci and ci[0] > 1.0)
        sol_b, sol_c = sol_fractions(task, replay, model) if replay else (None, None)
        aa = aa_of(row)
        base_ms = first.get("baseline_median_ms") if first else None
        if speed and ci:
            solution = f"{speed:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
        elif replay:
            solution = f"not accepted: {str(replay.get('reason'))[:80]}"
        else:
            solution = "-"
        double = (row.get("double") or ({}, ""))[0].get("speedup")
        summary["doubled"] += bool(double)
        summary["doubled_within_1pct"] += bool(double and abs(double - 0.5) <= 0.005)
        cells = [task_id, level(task), when, fmt(base_ms, 4), solution, fmt(aa, 4),
                 fmt(double, 4), fmt(sol_b, 2), fmt(sol_c, 2), source]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{summary['tasks']} tasks; {summary['runs_on_target']} run on the {target}; "
              f"{summary['validated']} validated on it (a `validated_on` entry in mode `run`); "
              f"{summary['with_solution_timed']} with the stored solution timed there, "
              f"{summary['faster']} of them faster than the baseline (the CI above 1); "
              f"2x work measured on {summary['doubled']}, "
              f"{summary['doubled_within_1pct']} of them within 1% of 0.50."]
    return "\n".join(lines) + "\n", summary


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path, help="gpu_bench bench.json, oldest first")
    parser.add_argument("--target", default="H200")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text, _ = build(args.runs, args.target)
    if args.out:
        runs = " ".join(str(r.resolve().relative_to(ROOT)) if ROOT in r.resolve().parents
                        else str(r) for r in args.runs)
        args.out.write_text(
            f"# The corpus on the {args.target}\n\n"
            "Generated by `bench/corpus_table.py` (its docstring says what each column is) from "
            "the GPU bench runs below, oldest first; a task's row comes from the latest run that "
            "has it. A row showing a failure is the last measurement; where the task was "
            "changed after it, the task's NOTES and `validated_on` say so, and it counts as not "
            "validated until a new run. HIP and FlyDSL tasks need an AMD GPU, which this project "
            "has not had: they are compile-checked only.\n\n"
            f"```\npython bench/corpus_table.py --target {args.target} --out docs/corpus.md "
            f"{runs}\n```\n\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
