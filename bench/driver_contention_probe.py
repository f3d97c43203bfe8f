"""Do CUDA contexts made and torn down beside an evaluation slow the judge's driver calls?

The reward service starts each slot's next evaluation (a judge and two runners: PyTorch
imported, a CUDA context made) and ends the last one's processes (their contexts torn down)
while another evaluation holds the GPU lock. Through the service (bench/results/h100-2026-12-06i/)
the locked evaluation's slot set-ups took 0.005-0.05 s on most evaluations and 0.2-0.9 s on a
few, nearly all of it in the runners' ``torch.cuda.empty_cache()`` (``cudaFree``) and in graph
captures: some 0.1-0.3 s of the mean GPU-locked time. This probe asks whether other processes'
contexts explain it, in one process and a helper, no judge. Each iteration times what a slot
set-up does, with the judge's own code (``cuda_ipc``):

* ``empty_cache``: 256 MiB PyTorch had cached given back to the driver;
* ``allocate``: a 256 MiB ``cuda_ipc.Arena`` (``cuMemCreate`` and map), its first bytes zeroed;
* ``export``: its file descriptor (``export_fd``);
* ``map``: the helper imports it (``ImportedArena``, sent on a Unix socket as the runners send
  theirs), touches it and closes it; the helper's own seconds;
* ``release``: the arena unmapped and released;
* ``capture``: a CUDA graph of 8 small kernels captured, instantiated and replayed once;
* ``mem_get_info`` and ``launch_sync`` (one small kernel and a sync).

Phases alternate (``quiet``, ``imports``, ``contexts``, ``pinned``, twice): in ``contexts``,
``--procs`` processes at a time, one after another, each importing PyTorch, making its CUDA
context, a stream and 256 MiB, then exiting (a runner started ahead, then one ending); in
``imports``, the same processes import PyTorch only (the CPU load without the driver); in
``pinned``, ``contexts`` with this process and the helper on four cores of their own and the
children kept off them (what is left is the driver's). Per phase and step: the median, the 90th
percentile and the mean in ms, and the mean against the quiet phases'.

Usage:  python bench/driver_contention_probe.py [--seconds 7] [--procs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup_interference_probe import emit, keep_starting

# What each phase's processes do (none in "quiet"): "imports" loads the CPU as a start-up does
# and makes no context, so that a slower driver call there is the host's CPUs, not the driver.
CHILD = {"imports": "import torch",
         "contexts": ("import torch; torch.cuda.init(); torch.cuda.mem_get_info(); "
                      "s = torch.cuda.Stream(); x = torch.empty(1 << 28, dtype=torch.uint8, "
                      "device='cuda'); torch.cuda.synchronize()")}
# "pinned": "contexts" with this process and the helper on cores of their own (``RESERVED``) and
# the children on the others, as the evaluation holding the GPU could keep itself: what is left
# of the slowdown there is the driver's, not the CPUs'.
CHILD["pinned"] = CHILD["contexts"]
RESERVED = 4
CORES = sorted(os.sched_getaffinity(0))  # the cores this probe may use, before any pinning
# Pinning needs cores left for the children beyond the reserved ones.
PHASES = ("quiet", "imports", "contexts",
          *(("pinned",) if len(CORES) >= 2 * RESERVED else ())) * 2


def pin(pids: list[int], pinned: bool) -> None:
    """``pids`` on the first ``RESERVED`` cores, or back on all of them."""
    for pid in pids:
        os.sched_setaffinity(pid, CORES[:RESERVED] if pinned else CORES)


def child_code(name: str) -> str:
    """A phase's child: in "pinned", kept off the reserved cores."""
    if name != "pinned":
        return CHILD[name]
    return f"import os; os.sched_setaffinity(0, {CORES[RESERVED:]}); " + CHILD[name]
STEPS = ("empty_cache", "allocate", "export", "map", "release", "capture", "mem_get_info",
         "launch_sync")
NBYTES = 1 << 28


def helper(fd: int) -> int:
    """Imports each arena it is sent, touches it, closes it; replies with its own seconds."""
    import torch

    from aka_core.evaluation import cuda_ipc

    sock = socket.socket(fileno=fd)
    torch.cuda.init()
    torch.cuda.mem_get_info()
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 64, 1)
        if not fds:
            return 0
        t0 = time.perf_counter()
        arena = cuda_ipc.ImportedArena(fds[0], struct.unpack("Q", message)[0])
        os.close(fds[0])
        arena.bytes[:256].zero_()
        torch.cuda.synchronize()
        arena.close()
        sock.sendall(struct.pack("d", time.perf_counter() - t0))


def iteration(sock: socket.socket, small: Any) -> dict[str, float]:
    import torch

    from aka_core.evaluation import cuda_ipc

    cached = torch.empty(NBYTES, dtype=torch.uint8, device="cuda")
    del cached  # cached by PyTorch's allocator, as a capture's pool or a check's outputs are
    times: dict[str, float] = {}
    t0 = time.perf_counter()

    def step(name: str) -> None:
        nonlocal t0
        now = time.perf_counter()
        times[name] = now - t0
        t0 = now

    torch.cuda.empty_cache()
    step("empty_cache")
    arena = cuda_ipc.Arena(NBYTES)
    arena.bytes[:256].zero_()
    torch.cuda.synchronize()
    step("allocate")
    fd = arena.export_fd()
    step("export")
    socket.send_fds(sock, [struct.pack("Q", arena.nbytes)], [fd])
    os.close(fd)
    times["map"] = struct.unpack("d", sock.recv(8))[0]
    t0 = time.perf_counter()
    arena.close()
    step("release")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(8):
            small.mul_(1.0001)
    graph.replay()
    torch.cuda.synchronize()
    del graph
    step("capture")
    torch.cuda.mem_get_info()
    step("mem_get_info")
    small.add_(1.0)
    torch.cuda.synchronize()
    step("launch_sync")
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seconds", type=float, default=7.0)
    parser.add_argument("--procs", type=int, default=3)
    parser.add_argument("--helper", type=int, help=argparse.SUPPRESS)  # the helper's socket
    args = parser.parse_args()
    if args.helper is not None:
        return helper(args.helper)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    helper_proc = subprocess.Popen([sys.executable, __file__, "--helper", str(theirs.fileno())],
                                   pass_fds=[theirs.fileno()])
    theirs.close()
    import torch

    small = torch.ones(1 << 16, device="cuda")
    for _ in range(5):
        iteration(ours, small)
    phases: dict[str, list[dict[str, float]]] = {}
    started: dict[str, int] = {}
    for index, name in enumerate(PHASES):
        label = f"{name}_{index // (len(PHASES) // 2) + 1}"
        pin([0, helper_proc.pid], name == "pinned")
        rows: list[dict[str, float]] = []
        children: list[subprocess.Popen[bytes]] = []
        count = 0
        until = time.monotonic() + args.seconds
        while time.monotonic() < until:
            if name in CHILD:
                children, started_now = keep_starting(children, args.procs, child_code(name))
                count += started_now
            rows.append(iteration(ours, small))
        for process in children:
            process.wait()
        phases[label] = rows
        started[label] = count
    socket.send_fds(ours, [b"end"], [])
    ours.close()
    helper_proc.wait(10)

    quiet = [row for label, rows in phases.items() if label.startswith("quiet") for row in rows]
    base = {s: statistics.mean(row[s] for row in quiet) for s in STEPS}
    base_total = sum(base.values())
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "procs": args.procs,
                              "seconds": args.seconds, "phases": {}}
    lines = [f"# The judge's driver calls beside other processes' contexts "
             f"({torch.cuda.get_device_name(0)}, {args.procs} processes at a time)", "",
             "| phase | started | iterations | step | median ms | p90 ms | mean ms | "
             "mean vs quiet |", "|---|---|---|---|---|---|---|---|"]
    for label, rows in phases.items():
        entry: dict[str, Any] = {"started": started[label], "iterations": len(rows)}
        for s in (*STEPS, "total"):
            values = sorted(sum(r.values()) if s == "total" else r[s] for r in rows)
            mean = statistics.mean(values)
            quiet_mean = base_total if s == "total" else base[s]
            p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
            entry[s] = {"median_ms": statistics.median(values) * 1e3, "p90_ms": p90 * 1e3,
                        "mean_ms": mean * 1e3, "max_ms": values[-1] * 1e3,
                        "mean_vs_quiet": mean / quiet_mean}
            lines.append(f"| {label} | {started[label]} | {len(rows)} | {s} | "
                         f"{statistics.median(values) * 1e3:.2f} | {p90 * 1e3:.2f} | "
                         f"{mean * 1e3:.2f} | {mean / quiet_mean:.2f} |")
        report["phases"][label] = entry
    emit(lines, report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
