"""Is a 2x-work reading away from 0.50 the judge's error or the GPU's? In one process, no judge.

For each (task, case): the task's baseline, and a candidate calling it twice per call, each
captured in a CUDA graph of K calls on K fresh input sets (as the judge's blocks run them), timed
with CUDA events after an L2 read-flush, single and double alternated, R repetitions; prints
single / double per call (the judge's 2x-work reading, measured without the judge). K is chosen
as the judge chooses it (about ``--block-ms`` of the faster side, at least 2 calls).

Usage:  python bench/double_probe.py [--reps 20] [--block-ms 2] TASK:CASE [TASK:CASE ...]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load(task_id: str) -> tuple[Any, Any, Any]:
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.kits.python_backend import PythonBackend
    from aka_core.plugin.host import PluginHost

    task = load_task(ROOT / "tasks" / task_id, task_id, PluginHost())
    loader = PythonBackend()
    package = "aka_probe_" + task_id.replace("/", "_")
    baseline = loader.load_callable(task.root, task.baseline, package)
    inputs = loader.load_callable(task.root, task.inputs, package)
    return task, baseline, inputs


def graph_of(fn: Any, sets: list[dict[str, Any]]) -> Any:
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for inputs in sets:
            fn(**inputs)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for inputs in sets:
            fn(**inputs)
    torch.cuda.synchronize()
    return graph


def probe(spec: str, reps: int, block_ms: float) -> str:
    import torch

    from aka_core.evaluation.timing import L2Reader

    task_id, _, case_name = spec.partition(":")
    task, baseline, make_inputs = load(task_id)
    case = next(c for c in task.cases if c.name == case_name)

    def twice(**kwargs: Any) -> Any:
        baseline(**kwargs)
        return baseline(**kwargs)

    flush = L2Reader()
    one = make_inputs(dict(case.params), 1, "cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    baseline(**one)
    torch.cuda.synchronize()
    start.record()
    baseline(**one)
    end.record()
    torch.cuda.synchronize()
    count = max(2, math.ceil(block_ms / max(start.elapsed_time(end), 1e-4)))
    sets = [make_inputs(dict(case.params), 100 + i, "cuda") for i in range(count)]
    graphs = {"single": graph_of(baseline, sets), "double": graph_of(twice, sets)}
    times: dict[str, list[float]] = {"single": [], "double": []}
    for rep in range(reps):
        for name in (("single", "double") if rep % 2 == 0 else ("double", "single")):
            flush()
            start.record()
            graphs[name].replay()
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) / count)
    single, double = statistics.median(times["single"]), statistics.median(times["double"])
    return (f"| {task_id} | {case_name} | {count} | {single:.4f} | {double:.4f} | "
            f"{single / double:.4f} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+", help="TASK:CASE")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--block-ms", type=float, default=2.0)
    args = parser.parse_args()
    print("| task | case | calls per graph | single ms | double ms | single / double |")
    print("|---|---|---|---|---|---|")
    for spec in args.cases:
        try:
            print(probe(spec, args.reps, args.block_ms), flush=True)
        except Exception as exc:  # one broken case must not lose the others
            print(f"| {spec} | failed: {type(exc).__name__}: {exc} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
