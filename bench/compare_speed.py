"""The correctness comparison of a passing output, side by side on the same tensors: the float64
comparison (``checking.exact_compare``), the quick pass with PyTorch's operators
(``checking._quick_figures``: ~30 full passes, one wait) and the quick pass as one kernel
(``fused_compare.figures``: each side read once; GPU only), with the two quick passes' figures
checked against each other on the same data.

Usage:  python bench/compare_speed.py [--device cpu|cuda] [--elements 33554432] [--repeats 5]
Prints a table (median seconds per comparison).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

from aka_core.evaluation import checking, fused_compare
from aka_core.models import Tolerance


def timed(fn: object, repeats: int, device: str) -> float:
    fn()  # type: ignore[operator]  # the first call (a kernel's compile or load) is not timed
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
    slack = 1.0 - checking.QUICK_MARGIN
    print(f"device {args.device}, {args.elements} elements, median of {args.repeats}")
    print("| output dtype | reference dtype | float64 s | quick, PyTorch s | quick, one kernel s "
          "| PyTorch / kernel | figures agree |")
    print("|---|---|---|---|---|---|---|")
    for dtype, ref_dtype in ((torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16),
                             (torch.float16, torch.float32), (torch.float32, torch.float32),
                             # float64 references (half the corpus'): float64 arithmetic
                             (torch.bfloat16, torch.float64), (torch.float32, torch.float64)):
        ref = torch.randn(args.elements, generator=gen, device=args.device).to(ref_dtype)
        out = (ref.float() * (1 + 1e-3)).to(dtype)
        assert checking.quick_pass(out, ref, tol) is not None
        exact = timed(functools.partial(checking.exact_compare, out, ref, tol), args.repeats,
                      args.device)
        torch_pass = timed(functools.partial(checking._quick_figures, out, ref, tol, slack),
                           args.repeats, args.device)
        kernel, agree = "-", "-"
        if fused_compare.applies(out, ref):
            fused = fused_compare.figures(out, ref, tol.atol, tol.rtol, slack)
            if fused is None:
                kernel = f"failed: {fused_compare.error[:1]}"
            else:
                seconds = timed(functools.partial(fused_compare.figures, out, ref, tol.atol,
                                                  tol.rtol, slack), args.repeats, args.device)
                theirs = checking._quick_figures(out, ref, tol, slack)
                agree = str(fused[0] == theirs[0] and all(
                    abs(a - b) <= 1e-4 * max(abs(a), abs(b), 1e-30)
                    for a, b in zip(fused[1:], theirs[1:], strict=True)))
                kernel = f"{seconds:.5f} | {torch_pass / seconds:.1f}x"
        kernel = kernel if "|" in kernel else f"{kernel} | -"
        print(f"| {str(dtype).removeprefix('torch.')} | {str(ref_dtype).removeprefix('torch.')} "
              f"| {exact:.4f} | {torch_pass:.4f} | {kernel} | {agree} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
