"""The correctness comparison of a passing output: one float32 pass with one wait
(``checking.quick_pass``, what ``compare`` does first) against the float64 comparison
(``checking.exact_compare``), side by side on the same tensors.

Usage:  python bench/compare_speed.py [--device cpu|cuda] [--elements 33554432] [--repeats 5]
Prints a table (median seconds per comparison).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

from aka_core.evaluation import checking
from aka_core.models import Tolerance


def timed(fn: object, repeats: int, device: str) -> float:
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--elements", type=int, default=1 << 25)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    gen = torch.Generator(device=args.device).manual_seed(0)
    tol = Tolerance(rtol=1.6e-2, atol=1e-3, max_rel_l2=8e-3)
    print(f"device {args.device}, {args.elements} elements, median of {args.repeats}")
    print("| output dtype | float64 comparison s | quick pass s | ratio |")
    print("|---|---|---|---|")
    for dtype in (torch.bfloat16, torch.float32):
        ref = torch.randn(args.elements, generator=gen, device=args.device)
        out = (ref * (1 + 1e-3)).to(dtype)
        assert checking.quick_pass(out, ref, tol) is not None
        exact = timed(functools.partial(checking.exact_compare, out, ref, tol), args.repeats,
                      args.device)
        quick = timed(functools.partial(checking.quick_pass, out, ref, tol), args.repeats,
                      args.device)
        print(f"| {str(dtype).removeprefix('torch.')} | {exact:.4f} | {quick:.4f} | "
              f"{exact / quick:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
