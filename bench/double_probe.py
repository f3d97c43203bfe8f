"""Is a 2x-work reading away from 0.50 the judge's error or the GPU's? In one process, no judge.

For each (task, case): the task's baseline, and a candidate calling it twice per call, each
captured in a CUDA graph of K calls on K fresh input sets (as the judge's blocks run them), timed
with CUDA events after an L2 read-flush, single and double alternated, R repetitions; prints
single / double per call (the judge's 2x-work reading, measured without the judge), and single /
double where the second call of each pair gets inputs of its own (twice the work on twice the
data: what a doubled call costs without the second finding its inputs in L2). K is chosen as the
judge chooses it (about ``--block-ms`` of a call replayed in a graph, at least 2 calls).

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


def load(task_id: str, side: str = "baseline") -> tuple[Any, Any, Any]:
    """The task, one side's function (``baseline``, or ``solution``: the stored solution's
    entrypoint) and the task's inputs factory."""
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.kits.python_backend import PythonBackend
    from aka_core.plugin.host import PluginHost

    task = load_task(ROOT / "tasks" / task_id, task_id, PluginHost())
    loader = PythonBackend()
    package = f"aka_probe_{side}_" + task_id.replace("/", "_")
    if side == "baseline":
        fn = loader.load_callable(task.root, task.baseline, package)
    else:
        fn = loader.load_callable(ROOT / "tests" / "solutions" / task_id, task.entrypoint, package)
    inputs = loader.load_callable(task.root, task.inputs, package + "_inputs")
    return task, fn, inputs


def graph_of(calls: list[Any]) -> Any:
    """One CUDA graph of ``calls`` (thunks), after a warm-up run of them on a side stream."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    torch.cuda.synchronize()
    return graph


def probe(spec: str, reps: int, block_ms: float) -> str:
    import torch

    from aka_core.evaluation.timing import L2Reader

    task_id, _, case_name = spec.partition(":")
    task, baseline, make_inputs = load(task_id)
    known = [*task.cases, *([task.smoke_case] if task.smoke_case else [])]
    case = next(c for c in known if c.name == case_name)  # "tiny": the smoke shape
    flush = L2Reader()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(graph: Any) -> float:
        flush()
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def sized(count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return ([make_inputs(dict(case.params), 100 + i, "cuda") for i in range(count)],
                [make_inputs(dict(case.params), 10_000 + i, "cuda") for i in range(count)])

    # K as the judge chooses it: about --block-ms of the single call, timed as a graph (an eager
    # call of microseconds is launch-bound), at least 2.
    one = sized(1)[0]
    probe_graph = graph_of([lambda: baseline(**one[0])] * 20)
    per_call = min(timed(probe_graph) for _ in range(3)) / 20
    count = max(2, math.ceil(block_ms / max(per_call, 1e-5)))
    sets, others = sized(count)
    graphs = {
        "single": graph_of([lambda s=s: baseline(**s) for s in sets]),
        # The 2x-work candidate of the bench: the same call twice on the same inputs (its
        # second call may find them in L2) ...
        "double": graph_of([c for s in sets for c in (lambda s=s: baseline(**s),) * 2]),
        # ... and twice the work on twice the data: the second call on inputs of its own.
        "fresh": graph_of([c for s, o in zip(sets, others, strict=True)
                           for c in (lambda s=s: baseline(**s), lambda o=o: baseline(**o))]),
    }
    times: dict[str, list[float]] = {name: [] for name in graphs}
    names = list(graphs)
    for rep in range(reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            times[name].append(timed(graphs[name]) / count)
    med = {name: statistics.median(v) for name, v in times.items()}
    return (f"| {task_id} | {case_name} | {count} | {med['single']:.5f} | {med['double']:.5f} | "
            f"{med['single'] / med['double']:.4f} | {med['single'] / med['fresh']:.4f} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+", help="TASK:CASE")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--block-ms", type=float, default=2.0)
    args = parser.parse_args()
    print("| task | case | calls per graph | single ms | double ms | single / double | "
          "single / double on fresh inputs |")
    print("|---|---|---|---|---|---|---|")
    for spec in args.cases:
        try:
            print(probe(spec, args.reps, args.block_ms), flush=True)
        except Exception as exc:  # one broken case must not lose the others
            print(f"| {spec} | failed: {type(exc).__name__}: {exc} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
