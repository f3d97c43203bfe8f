"""Does another process starting up on the GPU slow a kernel timed meanwhile?

The reward service starts each slot's next evaluation (a judge and two runners: PyTorch imported,
a CUDA context made, Triton's driver utilities loaded) while another evaluation holds the GPU and
times its kernels. This times a memory-bound kernel (a copy of ``--mib`` MiB, blocks of
``--calls`` calls between two events) for ``--seconds`` per phase:

* ``quiet``: nothing else on the GPU;
* ``contexts``: ``--procs`` processes at a time, one after another, each importing PyTorch and
  making its CUDA context and a stream (what a runner started ahead does), then exiting;
* ``triton``: the same, each also loading Triton's driver utilities and compiler identity (the
  runner's preload);
* ``quiet`` again.

Per phase: the median block time, its ratio to the first quiet phase's, and how many blocks were
more than 3% and 10% slower than that median (the judge's interference limits).

Usage:  python bench/startup_interference_probe.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = {
    "contexts": "import torch; torch.cuda.init(); torch.cuda.mem_get_info(); torch.cuda.Stream()",
    "triton": ("import torch; torch.cuda.init(); torch.cuda.mem_get_info(); torch.cuda.Stream(); "
               "import triton, triton.language; from triton.runtime import driver; "
               "from triton.compiler.compiler import make_backend; "
               "from triton.runtime.cache import triton_key; "
               "make_backend(driver.active.get_current_target()).hash(); triton_key()"),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--procs", type=int, default=3)
    args = parser.parse_args()
    import torch

    n = args.mib * 2**20 // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    flush = torch.empty(2 * 60 * 2**20 // 4, device="cuda")

    def block() -> float:
        flush.add_(1.0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.calls):
            dst.copy_(src)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / args.calls

    for _ in range(20):
        block()
    phases: dict[str, list[float]] = {}
    started: dict[str, int] = {}
    for name in ("quiet", "contexts", "triton", "quiet_again"):
        times: list[float] = []
        children: list[subprocess.Popen[bytes]] = []
        count = 0
        until = time.monotonic() + args.seconds
        while time.monotonic() < until:
            if name in CHILD:
                children, started_now = keep_starting(children, args.procs, CHILD[name])
                count += started_now
            times.append(block())
        for child in children:
            child.wait()
        phases[name] = times
        started[name] = count
    base = statistics.median(phases["quiet"])
    report = {"device": torch.cuda.get_device_name(0), "mib": args.mib, "calls": args.calls,
              "procs": args.procs, "phases": {}}
    lines = [f"# Start-ups beside a timed copy ({torch.cuda.get_device_name(0)}, {args.mib} MiB, "
             f"{args.calls} calls per block, {args.procs} processes at a time)", "",
             "| phase | processes started | blocks | median ms | vs quiet | > 3% slower | "
             "> 10% slower | max vs quiet |", "|---|---|---|---|---|---|---|---|"]
    for name, times in phases.items():
        med = statistics.median(times)
        over3 = sum(t > base * 1.03 for t in times)
        over10 = sum(t > base * 1.10 for t in times)
        report["phases"][name] = {"started": started[name], "blocks": len(times), "median_ms": med,
                                  "ratio": med / base, "over_3pct": over3, "over_10pct": over10,
                                  "max_ratio": max(times) / base}
        lines.append(f"| {name} | {started[name]} | {len(times)} | {med:.4f} | {med / base:.4f} | "
                     f"{over3} | {over10} | {max(times) / base:.3f} |")
    emit(lines, report, args.out)
    return 0


def keep_starting(children: list[subprocess.Popen[bytes]], procs: int, code: str
                  ) -> tuple[list[subprocess.Popen[bytes]], int]:
    """``children`` still running, topped up to ``procs`` new Python processes running
    ``code``; and how many were started."""
    running = [c for c in children if c.poll() is None]
    started = procs - len(running)
    running += [subprocess.Popen([sys.executable, "-c", code]) for _ in range(started)]
    return running, started


def emit(lines: list[str], report: dict[str, Any], out: Path | None) -> None:
    """The table printed, the report written to ``out`` (if given)."""
    print("\n".join(lines))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
