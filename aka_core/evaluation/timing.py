"""Paired, interleaved GPU timing of baseline and candidate (runs inside the worker).

Each sample is a *pair*: both sides run back to back on the same fresh inputs, in a random order,
each after a device synchronisation and an L2 flush, each bracketed by device events. Pairs are
added until the 95% CI of the case's speedup is tight enough, or a pair/time cap is reached.
Microsecond kernels are timed as CUDA-graph replays of many launches instead (launch overhead
would otherwise dominate), with fresh data copied into the graph's static inputs between pairs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aka_core.evaluation import stats
from aka_core.models import TimingPolicy

GRAPH_THRESHOLD_MS = 0.03
GRAPH_LAUNCHES = 20
# Graphs captured per side, used in turn: each capture places its outputs elsewhere, and at a
# few microseconds per call one placement can be a few percent faster than another. Cycling
# spreads that fixed effect over the samples instead of baking it into one side.
GRAPH_INSTANCES = 4
WARMUP_CALLS = 3
# Before each timed call the GPU spins this many cycles (~0.25 ms at 2 GHz) while the host enqueues
# the start event and the call: the start event then fires right before the call's first kernel.
# Without it, whichever side of a pair runs first also times the host's launch latency (tens of
# microseconds for a Triton launch from Python), which made an A/A pair read 0.75 or 1.33 (seen on
# an H200, 2026-11-29).
SPIN_CYCLES = 500_000
# Timed outputs are checked on the first pairs and then on a random tenth (drawn from the secret).
CHECK_FIRST_PAIRS = 3
CHECK_FRACTION = 0.1

Fn = Callable[..., Any]
Checker = Callable[[Any, Any], str | None]


class L2Flusher:
    """Writes a buffer twice the size of the L2 cache, evicting whatever the last call left."""

    def __init__(self) -> None:
        import torch

        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 2**20
        self.buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buffer.zero_()


def hide_launch_latency() -> None:
    """Keep the GPU busy while the host enqueues what follows (see SPIN_CYCLES)."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(SPIN_CYCLES)


def _event_time(fn: Fn, inputs: Mapping[str, Any], flush: L2Flusher | None) -> tuple[Any, Any, Any]:
    import torch

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    if flush is not None:
        flush()
    hide_launch_latency()
    start.record()
    out = fn(**inputs)
    end.record()
    return out, start, end


def estimate_ms(fn: Fn, inputs: Mapping[str, Any], flush: L2Flusher, calls: int = WARMUP_CALLS) -> float:
    """Warm up ``fn`` and return its median event time over ``calls`` flushed calls."""
    import torch

    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        _, start, end = _event_time(fn, inputs, flush)
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return stats.median(times)


class _GraphSide:
    """One side captured as a CUDA graph of ``launches`` calls on static inputs."""

    def __init__(self, fn: Fn, static_inputs: Mapping[str, Any], launches: int):
        import torch

        self.launches = launches
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn(**static_inputs)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            for _ in range(launches):
                self.out = fn(**static_inputs)
        torch.cuda.synchronize()

    def run(self) -> Any:
        self.graph.replay()
        return self.out


def time_case(
    baseline: Fn,
    candidate: Fn,
    fresh_inputs: Iterator[dict[str, Any]],
    check: Checker,
    policy: TimingPolicy,
    flush: L2Flusher,
    order_seed: int,
    graphs: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """Time one case; returns raw samples (ms per call), the speedup, its CI and how it stopped.

    In CUDA-graph mode the captured graphs are left in ``graphs`` (side -> instances), so that
    the wall-clock blocks can replay the same graphs.
    """
    import torch

    rng = random.Random(order_seed)
    first = next(fresh_inputs)
    est_b = estimate_ms(baseline, first, flush)
    est_c = estimate_ms(candidate, first, flush)
    method = policy.method
    if method == "auto":
        method = "cuda_graph" if min(est_b, est_c) < GRAPH_THRESHOLD_MS else "events"
    record: dict[str, Any] = {"warmup_ms": {"baseline": est_b, "candidate": est_c}}
    sides: dict[str, list[_GraphSide]] = {}
    static: dict[str, Any] | None = None
    if method == "cuda_graph":
        static = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in first.items()}
        try:
            sides = {side: [_GraphSide(fn, static, GRAPH_LAUNCHES) for _ in range(GRAPH_INSTANCES)]
                     for side, fn in (("baseline", baseline), ("candidate", candidate))}
        except Exception as exc:  # some callables cannot be captured (host syncs, allocations)
            record["graph_fallback"] = f"{type(exc).__name__}: {exc}"
            method, static, sides = "events", None, {}
            torch.cuda.synchronize()
    record["method"] = method
    fns = {"baseline": baseline, "candidate": candidate}
    samples: dict[str, list[float]] = {"baseline": [], "candidate": []}
    started = time.monotonic()
    stop_reason = "max_pairs"
    while len(samples["baseline"]) < policy.max_pairs:
        inputs = next(fresh_inputs)
        if static is not None:
            for k, v in inputs.items():
                if isinstance(v, torch.Tensor):
                    static[k].copy_(v)
        order = ["baseline", "candidate"]
        if rng.random() < 0.5:
            order.reverse()
        torch.cuda.synchronize()
        events: dict[str, tuple[Any, Any, Any]] = {}
        for side in order:
            if method == "cuda_graph":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                flush()
                hide_launch_latency()
                start.record()
                out = sides[side][len(samples["baseline"]) % GRAPH_INSTANCES].run()
                end.record()
                events[side] = (out, start, end)
            else:
                events[side] = _event_time(fns[side], inputs, flush)
        torch.cuda.synchronize()
        per_call = GRAPH_LAUNCHES if method == "cuda_graph" else 1
        for side in order:
            _, start, end = events[side]
            samples[side].append(start.elapsed_time(end) / per_call)
        n_done = len(samples["baseline"])
        checked = n_done <= CHECK_FIRST_PAIRS or rng.random() < CHECK_FRACTION
        reason = check(events["candidate"][0], events["baseline"][0]) if checked else None
        record["checked_pairs"] = record.get("checked_pairs", 0) + int(checked)
        if reason is not None:
            record.update(failed=True, reason=f"timed call {len(samples['baseline'])}: {reason}")
            break
        n = len(samples["baseline"])
        if n >= policy.min_pairs and n % 5 == 0:
            if stats.relative_ci_halfwidth(samples["baseline"], samples["candidate"]) * 100 <= (
                policy.target_ci_percent
            ):
                stop_reason = "ci_target"
                break
            if time.monotonic() - started > policy.max_seconds_per_case:
                stop_reason = "time_cap"
                break
    record["stop_reason"] = stop_reason
    record["pairs"] = len(samples["baseline"])
    record["seconds"] = time.monotonic() - started
    record["samples_ms"] = samples
    if samples["baseline"] and not record.get("failed"):
        s, lo, hi = stats.paired_speedup(samples["baseline"], samples["candidate"])
        b_med, c_med = stats.median(samples["baseline"]), stats.median(samples["candidate"])
        record.update(
            speedup=s, ci95=[lo, hi], baseline_median_ms=b_med, candidate_median_ms=c_med,
            ratio_of_medians=b_med / c_med,
            baseline_min_ms=min(samples["baseline"]), candidate_min_ms=min(samples["candidate"]),
        )
        if method == "cuda_graph":
            record["graph_launches"] = GRAPH_LAUNCHES
            record["graph_instances"] = GRAPH_INSTANCES
    if graphs is not None and sides:
        graphs.update(sides)
    return record


def run_block(fn: Fn, inputs: Mapping[str, Any], calls: int) -> None:
    """``calls`` back-to-back launches, synchronised at both ends (for the wall-clock check)."""
    import torch

    torch.cuda.synchronize()
    for _ in range(calls):
        fn(**inputs)
    torch.cuda.synchronize()


def time_alone(fn: Fn, inputs: Mapping[str, Any], flush: L2Flusher, calls: int = 10) -> float:
    """Median flushed event time of one callable (reference run times for task validation)."""
    return estimate_ms(fn, inputs, flush, calls)
