"""aka's per-case times and speedups beside Nsight Compute's kernel durations, task by task.

For every task with a stored solution (tests/solutions/<task>):

1. ``aka eval`` of the solution with ``--held-out-seed 1`` (the held-out shapes are known, so the
   same cases can be replayed): per case, aka's baseline and candidate medians and its speedup;
2. the same cases under ``ncu`` (``gpu__time_duration.sum``, ``--cache-control all``: caches
   flushed and invalidated before every kernel, ``--clock-control none``: the clocks as aka sees
   them), in one process per task: baseline and solution loaded through the task's backend, each
   warmed, then ``--reps`` calls of each side per case between ``cudaProfilerStart``/``Stop``; a
   one-block marker kernel before each call assigns the kernels that follow it to that call.
   A call's time is the sum of its kernels' durations (the gaps between kernels are not counted:
   ncu's time is the GPU's busy time, aka's the wall time of the call on the GPU);
3. in a third process, the same cases timed three more ways with CUDA events, to tell apart where
   aka and ncu differ (``--probe``):
   ``alone``  per call: L2 read-flushed (clean), a GPU spin hiding the host's launch, then events
              around the one call: the call from a clean L2, its own dirty lines left unwritten
              (what ncu's kernel durations add up to, gaps between kernels included);
   ``drained`` the same window extended over a second L2 read, minus that read timed after a
              call-free window: the call plus writing back what it left dirty in L2;
   ``graph``  a CUDA graph of K calls back to back, each on its own inputs (K as aka sizes a 2 ms
              block, at most 40% of free memory), L2 flushed before each replay, window / K: how
              aka's judge times a block, in one process.

The table gives, per task, aka's and ncu's per-case times of each side, the speedups and their
difference, plus the geometric means over cases. Issue criterion: within 2% where the kernels run
>= 20 us, 3% below.

Usage:  python bench/ncu_accuracy.py --out DIR [--tasks id ...] [--backends triton,cuda]
                                     [--reps 5] [--deadline-s 480] [--no-probe]
        (internal) python bench/ncu_accuracy.py --drive TASK --labels FILE --reps N
        (internal) python bench/ncu_accuracy.py --probe TASK --labels FILE --reps N
Writes DIR/bench.json and DIR/table.md, prints the table.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"
SOLUTIONS = ROOT / "tests" / "solutions"
HELD_OUT_SEED = 1
MARKER = "aka_ncu_marker"


# ---------------------------------------------------------------------------- the driver (ncu)
def cases_of(task: Any) -> list[Any]:
    """The cases ``aka eval --held-out-seed 1`` times, in its order."""
    from aka_core.evaluation.judge import derive_seed, draw_held_out
    from aka_core.evaluation.request import cases_for

    cases, _ = cases_for(task, device="cuda", held_out=True)
    drawn = (draw_held_out(task.held_out_draws, derive_seed(HELD_OUT_SEED, "draws"))
             if task.held_out_draws is not None else [])
    return [*cases, *drawn]


def load_sides(task_id: str, prefix: str) -> tuple[Any, dict[str, Any], Any]:
    """The task, its baseline and stored solution as callables, and its inputs maker."""
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.kits.python_backend import PythonBackend
    from aka_core.plugin.host import PluginHost

    host = PluginHost()
    task = load_task(TASKS / task_id, task_id, host)
    backend = host.backend(task.backend).factory()
    sides = {"baseline": backend.load_callable(task.root, task.baseline, f"{prefix}_baseline"),
             "candidate": backend.load_callable(SOLUTIONS / task_id, task.entrypoint,
                                                f"{prefix}_candidate")}
    return task, sides, PythonBackend().load_callable(task.root, task.inputs, f"{prefix}_task")


def drive(task_id: str, labels_path: Path, reps: int) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def aka_ncu_marker(ptr, value):
        tl.store(ptr, value)

    task, sides, make = load_sides(task_id, "aka_ncu")
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    aka_ncu_marker[(1,)](flag, 0)  # compiled before anything is profiled
    labels: list[list[Any]] = []
    for case in cases_of(task):
        inputs = make(dict(case.params), 7, "cuda")
        for fn in sides.values():  # compile, autotune, first launches: not profiled
            for _ in range(2):
                fn(**inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for rep in range(reps):
            for side, fn in sides.items():
                aka_ncu_marker[(1,)](flag, len(labels))
                labels.append([case.name, side, rep])
                fn(**inputs)
                torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        del inputs
    labels_path.write_text(json.dumps(labels))


# ---------------------------------------------------------------------------- the probe (events)
def probe(task_id: str, out_path: Path, reps: int) -> None:
    """Per case and side: ``alone``, ``drained`` and ``graph`` times (ms per call), medians."""
    import torch

    task, sides, make = load_sides(task_id, "aka_probe")
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 2**20
    flush_buf = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
    sink = torch.zeros((), dtype=torch.float32, device="cuda")

    def flush() -> None:  # a read: evicts (writes back) what L2 holds, dirties nothing
        torch.sum(flush_buf, dim=0, out=sink)

    def event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    spin = 200_000  # GPU cycles (~0.1 ms): the host enqueues the window meanwhile

    def window(fn: Any, inputs: Any, drain: bool) -> float:
        flush()
        torch.cuda._sleep(spin)
        start, end = event(), event()
        start.record()
        if fn is not None:
            fn(**inputs)
        if drain:
            flush()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    found: dict[str, Any] = {}
    for case in cases_of(task):
        inputs = make(dict(case.params), 7, "cuda")
        in_bytes = sum(v.numel() * v.element_size() for v in inputs.values()
                       if isinstance(v, torch.Tensor))
        for side, fn in sides.items():
            for _ in range(3):
                fn(**inputs)
            torch.cuda.synchronize()
            alone = statistics.median(window(fn, inputs, False) for _ in range(reps))
            read = statistics.median(window(None, inputs, True) for _ in range(reps))
            drained = statistics.median(window(fn, inputs, True) for _ in range(reps)) - read
            # the graph: K calls on K input sets, as aka's block
            free, _ = torch.cuda.mem_get_info()
            calls = max(1, min(2000, int(2.0 / max(alone, 1e-4)),
                               int(0.4 * free / max(in_bytes, 1))))
            sets = [inputs] + [make(dict(case.params), 8 + i, "cuda") for i in range(calls - 1)]
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for s in sets[:2]:
                    fn(**s)
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            outs: list[Any] = []  # the graph's outputs live as long as it replays
            try:
                with torch.cuda.graph(graph):
                    outs.extend(fn(**s) for s in sets)
                replays = []
                for _ in range(max(3, reps // 2)):
                    flush()
                    torch.cuda._sleep(spin)
                    start, end = event(), event()
                    start.record()
                    graph.replay()
                    end.record()
                    torch.cuda.synchronize()
                    replays.append(start.elapsed_time(end) / calls)
                graph_ms: float | None = statistics.median(replays)
            except Exception as exc:  # a side that cannot be captured
                graph_ms = None
                found.setdefault("errors", []).append(f"{case.name} {side}: {exc!r}"[:300])
            finally:
                del graph
                outs.clear()
                del sets
                torch.cuda.synchronize()
            found.setdefault(case.name, {})[side] = {
                "alone_ms": alone, "drained_ms": drained, "read_ms": read, "graph_ms": graph_ms,
                "graph_calls": calls}
        del inputs
        torch.cuda.empty_cache()
    out_path.write_text(json.dumps(found))


def probe_run(task_id: str, reps: int, folder: Path) -> dict[str, Any]:
    out_path = folder / (task_id.replace("/", "__") + ".probe.json")
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--probe", task_id,
                           "--labels", str(out_path), "--reps", str(reps)],
                          capture_output=True, text=True, check=False, timeout=300)
    if not out_path.exists():
        return {"error": (done.stderr or done.stdout)[-1500:]}
    return json.loads(out_path.read_text())


# ---------------------------------------------------------------------------- parsing
def parse_ncu_csv(text: str) -> list[tuple[str, float]]:
    """(kernel name, duration in ms) per profiled kernel, in launch order, from ``ncu --csv
    --page raw --print-units base`` (durations in ns)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    name_col = header.index("Kernel Name")
    time_col = header.index("gpu__time_duration.sum")
    found = []
    for row in rows[1:]:
        if len(row) <= max(name_col, time_col) or not row[0].strip().isdigit():
            continue  # the units row, ncu's messages
        try:
            found.append((row[name_col], float(row[time_col].replace(",", "")) / 1e6))
        except ValueError:
            continue
    return found


def call_times(kernels: list[tuple[str, float]], labels: list[list[Any]]
               ) -> dict[tuple[str, str], list[float]]:
    """Per (case, side), the summed kernel time of each call: the kernels after a marker belong
    to the call of that marker's label. Only calls between cudaProfilerStart/Stop are profiled,
    so there is one marker per label; anything else is an error."""
    markers = sum(MARKER in name for name, _ in kernels)
    if markers != len(labels):
        raise ValueError(f"ncu saw {markers} markers for {len(labels)} calls")
    calls: list[float] = []
    for name, ms in kernels:
        if MARKER in name:
            calls.append(0.0)
        elif calls:
            calls[-1] += ms
    times: dict[tuple[str, str], list[float]] = {}
    for (case, side, _), ms in zip(labels, calls, strict=True):
        times.setdefault((case, side), []).append(ms)
    return times


# ---------------------------------------------------------------------------- the bench
def stored(tasks: list[str] | None, backends: list[str]) -> list[str]:
    """The tasks with a stored solution (the same list as the service bench's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from service_bench import stored as stored_solutions

    return stored_solutions(tasks, backends)


def aka_eval(task_id: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "aka_core.cli", "eval", str(TASKS / task_id), "--candidate",
         str(SOLUTIONS / task_id), "--json", "--held-out-seed", str(HELD_OUT_SEED)],
        capture_output=True, text=True, check=False)
    try:
        record = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"error": done.stderr[-1500:]}
    perf = (record.get("evaluation") or {}).get("performance") or {}
    return {"speedup": perf.get("speedup"), "ci95": perf.get("ci95"),
            "cases": {c["case"]: {"baseline_ms": c.get("baseline_median_ms"),
                                  "candidate_ms": c.get("candidate_median_ms"),
                                  "speedup": c.get("speedup"), "method": c.get("method")}
                      for c in perf.get("cases", [])}}


def ncu_run(task_id: str, reps: int, folder: Path) -> dict[str, Any]:
    labels_path = folder / (task_id.replace("/", "__") + ".labels.json")
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    done = subprocess.run(
        [ncu, "--csv", "--page", "raw", "--print-units", "base", "--metrics",
         "gpu__time_duration.sum", "--cache-control", "all", "--clock-control", "none",
         "--profile-from-start", "off", "--target-processes", "all",
         sys.executable, str(Path(__file__).resolve()), "--drive", task_id,
         "--labels", str(labels_path), "--reps", str(reps)],
        capture_output=True, text=True, check=False)
    if not labels_path.exists():
        return {"error": (done.stderr or done.stdout)[-1500:]}
    labels = json.loads(labels_path.read_text())
    kernels = parse_ncu_csv(done.stdout)
    try:
        times = call_times(kernels, labels)
    except ValueError as exc:
        return {"error": f"{exc}; ncu said: {(done.stderr or done.stdout)[-1200:]}"}
    cases: dict[str, dict[str, Any]] = {}
    for (case, side), values in times.items():
        cases.setdefault(case, {})[f"{side}_ms"] = statistics.median(values)
        cases[case][f"{side}_calls_ms"] = values
    for entry in cases.values():
        if entry.get("baseline_ms") and entry.get("candidate_ms"):
            entry["speedup"] = entry["baseline_ms"] / entry["candidate_ms"]
    return {"cases": cases, "kernels": len(kernels),
            "markers": sum(MARKER in n for n, _ in kernels), "labels": len(labels)}


def gpu_state() -> str:
    done = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,"
                           "power.draw", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def probe_speedup(probe: dict[str, Any], case: str, key: str) -> float | None:
    sides = probe.get(case) or {}
    b, c = (sides.get("baseline") or {}).get(key), (sides.get("candidate") or {}).get(key)
    return b / c if b and c and b > 0 and c > 0 else None


def pct(a: float | None, b: float | None) -> str:
    return f"{(a / b - 1) * 100:+.1f}%" if a and b else "-"


def num(value: float | None, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if value else "-"


def table(rows: dict[str, Any]) -> str:
    out = ["| task | case | method | aka baseline ms | ncu baseline ms | aka candidate ms | "
           "ncu candidate ms | aka speedup | ncu speedup | alone | drained | graph | "
           "aka vs ncu | aka vs graph | alone vs ncu |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    worst: list[tuple[float, str, str, float]] = []
    against_graph: list[float] = []
    alone_ncu: list[float] = []
    for task_id, row in rows.items():
        aka, ncu, probe = row.get("aka", {}), row.get("ncu", {}), row.get("probe", {})
        if "error" in aka or "error" in ncu:
            out.append(f"| {task_id} | error: {(aka.get('error') or ncu.get('error'))[-200:]!r} "
                       "| | | | | | | | | | | | | |")
            continue
        pairs = []
        for case, a in aka.get("cases", {}).items():
            n = ncu.get("cases", {}).get(case, {})
            if not (a.get("speedup") and n.get("speedup")):
                continue
            diff = a["speedup"] / n["speedup"] - 1
            alone, drained, graph = (probe_speedup(probe, case, k)
                                     for k in ("alone_ms", "drained_ms", "graph_ms"))
            pairs.append((a["speedup"], n["speedup"]))
            fast = min(n.get("baseline_ms") or 0, n.get("candidate_ms") or 0)
            worst.append((abs(diff), task_id, case, fast))
            if graph:
                against_graph.append(abs(a["speedup"] / graph - 1))
            if alone:
                alone_ncu.append(abs(alone / n["speedup"] - 1))
            out.append(f"| {task_id} | {case} | {a.get('method')} | {a['baseline_ms']:.4f} | "
                       f"{n['baseline_ms']:.4f} | {a['candidate_ms']:.4f} | "
                       f"{n['candidate_ms']:.4f} | {a['speedup']:.3f} | {n['speedup']:.3f} | "
                       f"{num(alone)} | {num(drained)} | {num(graph)} | {diff * 100:+.1f}% | "
                       f"{pct(a['speedup'], graph)} | {pct(alone, n['speedup'])} |")
        if pairs:
            ga, gn = geomean([p[0] for p in pairs]), geomean([p[1] for p in pairs])
            assert ga is not None and gn is not None
            out.append(f"| {task_id} | **geomean** | | | | | | **{ga:.3f}** | **{gn:.3f}** | | | "
                       f"| **{(ga / gn - 1) * 100:+.1f}%** | | |")
        if probe.get("errors"):
            out.append(f"| {task_id} | probe: {'; '.join(probe['errors'])[:200]!r} "
                       "| | | | | | | | | | | | | |")
    big = [w for w in worst if w[3] >= 0.020]
    small = [w for w in worst if w[3] < 0.020]
    out.append("")
    for name, group, limit in (("kernels >= 20 us", big, 0.02), ("kernels < 20 us", small, 0.03)):
        if group:
            top = max(group)
            within = sum(w[0] <= limit for w in group)
            out.append(f"{name}: {within}/{len(group)} cases within {limit:.0%} of ncu; worst "
                       f"{top[0] * 100:.1f}% ({top[1]} {top[2]})")
    for name, values in (("aka against the in-process graph", against_graph),
                         ("alone (events) against ncu", alone_ncu)):
        if values:
            out.append(f"{name}: {sum(v <= 0.02 for v in values)}/{len(values)} cases within "
                       f"2%; worst {max(values) * 100:.1f}%")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--backends", default="triton,cuda")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--deadline-s", type=float, default=480.0)
    parser.add_argument("--no-probe", action="store_true")
    parser.add_argument("--probe-only", type=Path, metavar="BENCH_JSON",
                        help="only run the probe, adding it to an earlier run's bench.json")
    parser.add_argument("--drive")
    parser.add_argument("--probe")
    parser.add_argument("--labels", type=Path)
    args = parser.parse_args()
    if args.drive:
        drive(args.drive, args.labels, args.reps)
        return 0
    if args.probe:
        probe(args.probe, args.labels, max(args.reps, 9))
        return 0
    if args.out is None:
        parser.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows: dict[str, Any] = {}
    state = {"start": gpu_state()}
    if args.probe_only:
        earlier = json.loads(args.probe_only.read_text())
        rows, state = earlier["rows"], {**earlier["gpu_state"], "probe_start": gpu_state()}
    for task_id in stored(args.tasks, args.backends.split(",")):
        if time.monotonic() - started > args.deadline_s:
            rows[task_id] = {"aka": {"error": "skipped: past the deadline"}, "ncu": {}}
            continue
        if not args.probe_only:
            rows[task_id] = {"aka": aka_eval(task_id),
                             "ncu": ncu_run(task_id, args.reps, args.out)}
        elif task_id not in rows:
            continue
        if not args.no_probe:
            try:
                rows[task_id]["probe"] = probe_run(task_id, args.reps, args.out)
            except subprocess.TimeoutExpired:
                rows[task_id]["probe"] = {"error": "the probe ran past 300 s"}
        print(task_id, f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    state["end"] = gpu_state()
    text = table(rows)
    command = "python3 bench/ncu_accuracy.py " + " ".join(sys.argv[1:])
    (args.out / "bench.json").write_text(json.dumps(
        {"command": command, "gpu_state": state, "date": time.strftime("%Y-%m-%d"),
         "rows": rows}, indent=1))
    (args.out / "table.md").write_text(text + "\n")
    print(text)
    print("GPU (sm MHz, mem MHz, C, W):", state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
