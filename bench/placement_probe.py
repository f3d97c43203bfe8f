"""Does a call's time depend on where its buffers landed in GPU memory? In one process, no judge.

Serial evaluations of one candidate on an H100 (bench/results/h100-2026-12-06c/) read the
baseline's per-call time 1-4% apart between evaluations, in both the interleaved and the clean
phase, while the candidate's moved 0.1%; every evaluation allocates its slots anew and captures
its graphs anew. This probe times one side's call, captured in a CUDA graph of K calls on K input
sets (as the judge's blocks run them, after an L2 read-flush), in ``--placements`` placements:

- ``fresh``: new input buffers (the same values, copied) behind a spacer allocation of random
  size, and a new capture (its outputs in a new graph pool): what a new evaluation gets;
- ``recapture``: the first placement's inputs, a new capture only (the outputs move);
- ``stagger``: as ``fresh``, with a spacer of random size (256-byte steps, up to
  ``--stagger-mib``) before each input set, so that each of the K calls finds its inputs at its
  own offset from its outputs: do K calls then average K placements instead of one?

Every placement stays allocated, so each one takes memory no earlier one had. Per placement the
median of ``--reps`` replays; the spread across placements against the spread within one tells
whether placement matters, and for which side.

Usage:  python bench/placement_probe.py [--placements 8] [--reps 15] [--block-ms 2]
                                        [--sides baseline,solution] [--stagger-mib 4]
                                        TASK:CASE [TASK:CASE ...]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from double_probe import graph_of, load  # noqa: E402


def spread(values: list[float]) -> float:
    """(max - min) / median, in percent."""
    return 100 * (max(values) - min(values)) / statistics.median(values)


def probe(spec: str, side: str, placements: int, reps: int, block_ms: float,
          stagger_mib: int) -> str:
    import torch

    from aka_core.evaluation.timing import L2Reader

    task_id, _, case_name = spec.partition(":")
    task, fn, make_inputs = load(task_id, side)
    case = next(c for c in [*task.cases, *([task.smoke_case] if task.smoke_case else [])]
                if c.name == case_name)
    flush = L2Reader()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rng = random.Random(7)

    def timed(graph: Any, count: int) -> tuple[float, list[float]]:
        times = []
        for _ in range(reps):
            flush()
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / count)
        return statistics.median(times), times

    one = make_inputs(dict(case.params), 100, "cuda")
    per_call = min(timed(graph_of([lambda: fn(**one)] * 4), 4)[0] for _ in range(2))
    count = max(2, math.ceil(block_ms / max(per_call, 1e-5)))
    master = [make_inputs(dict(case.params), 100 + i, "cuda") for i in range(count)]
    kept: list[Any] = []  # every placement stays allocated: the next one lands elsewhere

    def spacer(most: int) -> None:
        kept.append(torch.empty(rng.randrange(256, most, 256), dtype=torch.uint8, device="cuda"))

    def placed(stagger: int = 0) -> list[dict[str, Any]]:
        spacer(256 * 2**20)
        sets = []
        for s in master:
            if stagger:
                spacer(stagger)
            sets.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in s.items()})
        return sets

    rows: dict[str, list[float]] = {"fresh": [], "recapture": [], "stagger": []}
    within: list[float] = []
    first = placed()
    for p in range(placements):
        sets = first if p == 0 else placed()
        graph = graph_of([lambda s=s: fn(**s) for s in sets])
        med, times = timed(graph, count)
        rows["fresh"].append(med)
        within.append(spread(times[len(times) // 4:]))  # the replays' own spread
        kept.append((sets, graph))
        graph = graph_of([lambda s=s: fn(**s) for s in first])
        rows["recapture"].append(timed(graph, count)[0])
        kept.append(graph)
        sets = placed(stagger_mib * 2**20)
        graph = graph_of([lambda s=s: fn(**s) for s in sets])
        rows["stagger"].append(timed(graph, count)[0])
        kept.append((sets, graph))
        if torch.cuda.mem_get_info()[0] < 8 * 2**30:
            break
    kept.clear()
    torch.cuda.empty_cache()
    fresh, again, stagger = rows["fresh"], rows["recapture"], rows["stagger"]
    return (f"| {task_id} | {case_name} | {side} | {count} | {len(fresh)} | "
            f"{statistics.median(fresh):.5f} | {spread(fresh):.2f}% | {spread(again):.2f}% | "
            f"{statistics.median(stagger):.5f} | {spread(stagger):.2f}% | "
            f"{statistics.median(within):.2f}% | {', '.join(f'{v:.4f}' for v in fresh)} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+", help="TASK:CASE")
    parser.add_argument("--placements", type=int, default=8)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--block-ms", type=float, default=2.0)
    parser.add_argument("--sides", default="baseline,solution")
    parser.add_argument("--stagger-mib", type=int, default=4)
    args = parser.parse_args()
    print("| task | case | side | calls per graph | placements | median ms | spread across "
          "fresh placements | across recaptures (outputs moved) | staggered: median ms | "
          "staggered: spread | within one placement | per fresh placement ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.cases:
        for side in args.sides.split(","):
            try:
                print(probe(spec, side, args.placements, args.reps, args.block_ms,
                            args.stagger_mib), flush=True)
            except Exception as exc:  # one broken case must not lose the others
                print(f"| {spec} | {side} | failed: {type(exc).__name__}: {exc} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
