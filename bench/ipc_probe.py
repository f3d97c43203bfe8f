"""Probe of the judge's cross-process primitives on a GPU (one call, prints a table).

The judge times a runner's GPU work from its own process: it records timing events on its own
stream, releases the runner with an interprocess event A, and waits for the runner's event B;
tensors cross through dedicated driver allocations (aka_core.evaluation.cuda_ipc). This probe
measures what that design rests on:

  overhead   the judge's window around an empty block (two cross-context hops)
  accuracy   per-call time from judge-timed blocks of K graph-replayed calls vs the same kernel
             timed in-process (events around a graph of K calls)
  deferral   a runner that records B before its work: does the judge's copy right after its
             end event see unfinished outputs?
  hog        a second process spinning on the GPU during the judge's blocks: how much slower?
  sandbox    the runner's confinement record; reading the repository and connecting out fail

Usage: python bench/ipc_probe.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

N_ELEMS = 1 << 22  # 4M bf16 elements: 8 MB in, 8 MB out per call
CTRL = 256  # control words (go, done) at the start of a runner's arena


def child_main(mode: str) -> None:
    """A runner: confined, maps the judge's input arena, runs blocks on request."""
    import base64

    from aka_core.evaluation import sandbox

    scratch = Path(os.environ["PROBE_SCRATCH"])
    spec = sandbox.build_spec(scratch=scratch, read=[str(ROOT / "aka_core"), str(ROOT / "bench")],
                              protected=[str(ROOT / "tasks"), str(ROOT / "tests"),
                                         str(Path.home()), "/tmp"], required=False)
    record = sandbox.apply(spec)
    os.environ["TRITON_CACHE_DIR"] = str(scratch / "triton")
    os.environ["TMPDIR"] = str(scratch)
    os.environ["HOME"] = str(scratch)
    out = os.fdopen(int(os.environ["PROBE_FD"]), "w", buffering=1)

    def send(**msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    checks = {}
    try:
        (ROOT / "tasks" / "triton2triton" / "gelu" / "task.yaml").read_text()
        checks["read_tasks"] = "allowed"
    except OSError as exc:
        checks["read_tasks"] = f"denied ({exc.errno})"
    import socket
    try:
        s = socket.create_connection(("1.1.1.1", 80), timeout=2)
        s.close()
        checks["connect"] = "allowed"
    except OSError as exc:
        checks["connect"] = f"denied ({exc.errno})"
    import torch
    import triton
    import triton.language as tl

    from aka_core.evaluation import cuda_ipc

    @triton.jit
    def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
        t = 1.0 - 2.0 / (tl.exp(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)) + 1.0)
        tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(tl.bfloat16), mask=m)

    def gelu(x, y):
        gelu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)

    stream = torch.cuda.Stream()
    send(event="ready", confinement=record, checks=checks)
    arena = graph = None
    ys: list = []
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] == "setup":
            k = msg["k"]
            if arena is not None:
                arena.close()
            arena = cuda_ipc.Mapping(base64.b64decode(msg["handle"]))
            xs = [cuda_ipc.view(arena.bytes, CTRL + i * N_ELEMS * 2, torch.bfloat16, (N_ELEMS,))
                  for i in range(k)]
            ys = [torch.empty(N_ELEMS, dtype=torch.bfloat16, device="cuda") for _ in range(k)]
            with torch.cuda.stream(stream):
                for x, y in zip(xs, ys, strict=True):
                    gelu(x, y)
            torch.cuda.synchronize()
            graph = None
            if k:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=stream):
                    for x, y in zip(xs, ys, strict=True):
                        gelu(x, y)
                torch.cuda.synchronize()
            outs = []
            for y in ys:
                base, _ = cuda_ipc.address_range(y.data_ptr())
                outs.append({"handle": base64.b64encode(cuda_ipc.export(y.data_ptr())).decode(),
                             "offset": y.data_ptr() - base})
            send(event="setup", outs=outs)
        elif msg["op"] == "arm":
            n = msg["n"]
            s_ = stream.cuda_stream
            if mode == "defer":
                cuda_ipc.stream_write(s_, arena.ptr + 4, n)
            cuda_ipc.stream_wait_at_least(s_, arena.ptr, n)
            r0, r1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            r0.record(stream)
            if mode == "eager":
                with torch.cuda.stream(stream):
                    for x, y in zip(xs, ys, strict=True):
                        gelu(x, y)
            elif graph is not None:
                with torch.cuda.stream(stream):
                    graph.replay()
            r1.record(stream)
            if mode != "defer":
                cuda_ipc.stream_write(s_, arena.ptr + 4, n)
            send(event="armed")
        elif msg["op"] == "own":
            stream.synchronize()
            send(event="own", ms=r0.elapsed_time(r1))
        elif msg["op"] == "quit":
            break


def hog_main() -> None:
    import torch

    while True:
        torch.cuda._sleep(2_000_000_000)
        torch.cuda.synchronize()


class Child:
    def __init__(self, mode: str):
        self.scratch = tempfile.mkdtemp(prefix="probe-")
        r, w = os.pipe()
        env = {**os.environ, "PROBE_SCRATCH": self.scratch, "PROBE_FD": str(w),
               "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, __file__, "--child", mode],
                                     stdin=subprocess.PIPE, pass_fds=(w,), env=env, text=True)
        os.close(w)
        self.msgs = os.fdopen(r, "r")

    def send(self, **msg) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def recv(self) -> dict:
        line = self.msgs.readline()
        if not line:
            raise RuntimeError("child died")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.send(op="quit")
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)


def judge_main(out_dir: Path) -> None:
    import base64

    import torch

    from aka_core.evaluation import cuda_ipc

    torch.cuda.init()
    results: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda").normal_()
    js = torch.cuda.Stream()

    def run_blocks(child: Child, k: int, blocks: int, mode_note: str = "") -> dict:
        arena = cuda_ipc.Arena(CTRL + max(k, 1) * N_ELEMS * 2)
        arena.bytes[:CTRL].zero_()
        xs = [cuda_ipc.view(arena.bytes, CTRL + i * N_ELEMS * 2, torch.bfloat16, (N_ELEMS,))
              for i in range(max(k, 1))]
        child.send(op="setup", k=k, handle=base64.b64encode(arena.handle).decode())
        reply = child.recv()
        maps = {}
        outs = []
        for o in reply["outs"]:
            m = maps.get(o["handle"]) or cuda_ipc.Mapping(base64.b64decode(o["handle"]))
            maps[o["handle"]] = m
            outs.append(cuda_ipc.view(m.bytes, o["offset"], torch.bfloat16, (N_ELEMS,)))
        windows, copies, wrong, host, own = [], [], 0, [], []
        for n in range(1, blocks + 1):
            fresh = torch.randn(max(k, 1), N_ELEMS, device="cuda").to(torch.bfloat16)
            child.send(op="arm", n=n)
            assert child.recv()["event"] == "armed"
            e0, e0b, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            t0 = time.perf_counter()
            with torch.cuda.stream(js):
                flush_buf.sum()
                e0.record(js)
                for i, x in enumerate(xs):
                    x.copy_(fresh[i])
                e0b.record(js)
                cuda_ipc.stream_write(js.cuda_stream, arena.ptr, n)
                cuda_ipc.stream_wait_at_least(js.cuda_stream, arena.ptr + 4, n)
                e1.record(js)
                last = outs[-1].clone() if k else None
            js.synchronize()
            host.append((time.perf_counter() - t0) * 1000)
            child.send(op="own")
            own.append(child.recv()["ms"])
            windows.append(e0b.elapsed_time(e1))
            copies.append(e0.elapsed_time(e0b))
            if k:
                xf = fresh[-1].float()
                expect = (0.5 * xf * (1 + torch.tanh(0.7978845608028654 * (xf + 0.044715 * xf ** 3)))
                          ).to(torch.bfloat16)
                if not torch.allclose(last.float(), expect.float(), rtol=2e-2, atol=2e-2):
                    wrong += 1
        outs.clear()
        for m in maps.values():
            m.close()
        arena.close()
        return {"k": k, "median_ms": statistics.median(windows), "min_ms": min(windows),
                "max_ms": max(windows), "late_starts": round(statistics.median(copies), 4),
                "wrong_last_outputs": wrong,
                "host_median_ms": statistics.median(host), "note": mode_note,
                "runner_own_median_ms": statistics.median(own)}

    child = Child("honest")
    ready = child.recv()
    results["sandbox"] = {"confinement": ready["confinement"], "checks": ready["checks"]}
    rows = [run_blocks(child, k, 30) for k in (0, 1, 8, 32, 64)]
    results["blocks"] = rows

    # In-process reference: the same kernel in a graph of 32 calls, events around each replay.
    import triton
    import triton.language as tl

    @triton.jit
    def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
        t = 1.0 - 2.0 / (tl.exp(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)) + 1.0)
        tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(tl.bfloat16), mask=m)

    xs = torch.randn(32, N_ELEMS, device="cuda").to(torch.bfloat16)
    ys = torch.empty_like(xs)
    for i in range(32):
        gelu_kernel[(triton.cdiv(N_ELEMS, 1024),)](xs[i], ys[i], N_ELEMS, BLOCK=1024)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(32):
            gelu_kernel[(triton.cdiv(N_ELEMS, 1024),)](xs[i], ys[i], N_ELEMS, BLOCK=1024)
    per = []
    for _ in range(30):
        xs.normal_()
        flush_buf.sum()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(400_000)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        per.append(s.elapsed_time(e) / 32)
    results["in_process_per_call_ms"] = statistics.median(per)
    # One process, two streams: the same wait/write hand-off without a second context.
    flag = torch.zeros(64, dtype=torch.int32, device="cuda")
    r_stream = torch.cuda.Stream()
    inproc = []
    for n in range(1, 31):
        s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cuda_ipc.stream_wait_at_least(r_stream.cuda_stream, flag.data_ptr(), n)
        with torch.cuda.stream(r_stream):
            gelu_kernel[(triton.cdiv(N_ELEMS, 1024),)](xs[0], ys[0], N_ELEMS, BLOCK=1024)
        cuda_ipc.stream_write(r_stream.cuda_stream, flag.data_ptr() + 4, n)
        with torch.cuda.stream(js):
            flush_buf.sum()
            s0.record(js)
            cuda_ipc.stream_write(js.cuda_stream, flag.data_ptr(), n)
            cuda_ipc.stream_wait_at_least(js.cuda_stream, flag.data_ptr() + 4, n)
            s1.record(js)
        torch.cuda.synchronize()
        inproc.append(s0.elapsed_time(s1))
    results["in_process_handoff_one_call_ms"] = statistics.median(inproc)
    print(f"in-process hand-off of one call: {statistics.median(inproc):.4f} ms")
    o = rows[0]["median_ms"]
    for row in rows[1:]:
        row["per_call_ms_minus_overhead"] = (row["median_ms"] - o) / row["k"]
    child.close()

    eager = Child("eager")
    eager.recv()
    results["eager"] = [run_blocks(eager, k, 30, "eager launches queued before go")
                        for k in (0, 1, 32, 256)]
    o = results["eager"][0]["median_ms"]
    for row in results["eager"][1:]:
        row["per_call_ms_minus_overhead"] = (row["median_ms"] - o) / row["k"]
    eager.close()
    results["blocks"] = rows

    deferring = Child("defer")
    deferring.recv()
    results["deferral"] = run_blocks(deferring, 32, 20, "B recorded before the work")
    deferring.close()

    child = Child("honest")
    child.recv()
    hog = subprocess.Popen([sys.executable, __file__, "--hog"])
    time.sleep(8)
    results["hog"] = run_blocks(child, 32, 10, "a second process spins on the GPU")
    hog.kill()
    hog.wait()
    results["after_hog"] = run_blocks(child, 32, 10, "hog killed")
    child.close()

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ipc_probe.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results["sandbox"], indent=1))
    print(f"in-process per call: {results['in_process_per_call_ms']:.4f} ms")
    print("| k | window median ms | min | max | per call - overhead | input copy ms | wrong | host ms "
          "| note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in [*rows, *results["eager"], results["deferral"], results["hog"], results["after_hog"]]:
        print(f"| {row['k']} | {row['median_ms']:.4f} (own {row['runner_own_median_ms']:.4f}) | "
              f"{row['min_ms']:.4f} | {row['max_ms']:.4f} | "
              f"{row.get('per_call_ms_minus_overhead', float('nan')):.4f} | {row['late_starts']} | "
              f"{row['wrong_last_outputs']} | {row['host_median_ms']:.3f} | {row['note']} |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "--hog":
        hog_main()
    else:
        parser = argparse.ArgumentParser()
        parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "probe-out")))
        judge_main(parser.parse_args().out)
