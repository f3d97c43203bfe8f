"""The GPU proof of the task corpus and the measurement engine, in one call.

Sections (each row measured in this one run, side by side):
  validate  every task's reference and baseline through the evaluator (`aka validate --run`)
  replay    every stored faster solution (tests/solutions/<task>) replayed: speedup with 95% CI
  double    a candidate doing the baseline's work twice (every task): must measure 0.50
  latency   `aka eval` wall time per task, split into start-up, compile, correctness, timing
  aa        the baseline against itself (the noop agent), N fresh evaluations per task
  graph     each task on its smoke shape only (microsecond kernels: the CUDA-graph timing path):
            the baseline against itself 3 times and the stored solution once
  graph2x   each task on its smoke shape: the baseline against itself once and against twice
            its work once (no rules)
  compile   tasks this host cannot run (HIP, FlyDSL without an AMD GPU): the stored solution
            evaluated compile-only for the task's architecture; the row says nothing ran
  redteam   every exploit of tests/redteam (tests/redteam/harness.py): its verdict, failure kind
            and score, and whether it changed any file; then a stored solution, which must
            still be accepted (no exploit may change a later evaluation)

Usage:  python bench/gpu_bench.py --out DIR [--sections validate,replay,double,latency,aa]
                                  [--aa-repeats 10] [--tasks id ...] [--backends cuda,triton]
                                  [--deadline-s 540] [--merge earlier/bench.json]
Writes DIR/bench.json (everything, raw samples included) and DIR/table.md, prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"
SOLUTIONS = ROOT / "tests" / "solutions"


def task_ids() -> list[str]:
    return sorted(p.parent.relative_to(TASKS).as_posix() for p in TASKS.rglob("task.yaml"))


def load(task_id: str) -> Any:
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.plugin.host import PluginHost

    return load_task(TASKS / task_id, task_id, PluginHost())


def evaluate(task_id: str, candidate: Path, task_dir: Path | None = None) -> dict[str, Any]:
    from aka_core import api
    from aka_core.convert import unstructure

    started = time.monotonic()
    result = unstructure(api.evaluate_candidate(task_dir or TASKS / task_id, candidate))
    result["bench_wall_s"] = time.monotonic() - started
    return result


TWICE = """

def {fn}(*args, **kwargs):
    _aka_once(*args, **kwargs)
    return _aka_once(*args, **kwargs)
"""


def doubled_candidate(task: Any, dest: Path, entry: str = TWICE) -> Path:
    """A candidate doing the baseline's whole work twice per call: the initial kernel with its
    entry function renamed and called twice, or, where the task starts unimplemented, the
    provided baseline re-exported and called twice (evaluated without the task's rules, as the
    A/A candidate is). ``entry``: the entry function's text around ``_aka_once`` (the baseline)."""
    file, _, fn = task.entrypoint.partition(":")
    dest.mkdir(parents=True, exist_ok=True)
    twice = entry.format(fn=fn)
    if not task.baseline_is_initial_candidate:
        bfile, _, bfn = task.baseline.partition(":")
        module = Path(bfile).with_suffix("").as_posix().replace("/", ".")
        (dest / file).write_text(f"from .{module} import {bfn} as _aka_once" + twice)
        return dest
    source = (task.root / file).read_text()
    renamed, count = re.subn(rf"^def {fn}\(", "def _aka_once(", source, flags=re.M)
    if count != 1:
        raise RuntimeError(f"cannot find a top-level def {fn}( in {file}")
    (dest / file).write_text(renamed + twice)
    return dest


OWN_DATA = """

import torch as _aka_torch

_aka_copies = {{}}


def _aka_key(value):
    if isinstance(value, _aka_torch.Tensor):
        return (value.data_ptr(), tuple(value.shape), str(value.dtype))
    return repr(value)


def _aka_own(args, kwargs):
    # A private copy of these inputs, made the first time they are seen outside a CUDA-graph
    # capture (the runner calls every slot before it captures them): the second call of a
    # replayed block then reads memory of its own, which the judge's flush left cold too.
    key = tuple(_aka_key(v) for v in (*args, *kwargs.values()))
    capturing = _aka_torch.cuda.is_available() and _aka_torch.cuda.is_current_stream_capturing()
    if key not in _aka_copies and not capturing:
        clone = lambda v: v.clone() if isinstance(v, _aka_torch.Tensor) else v  # noqa: E731
        _aka_copies[key] = ([clone(v) for v in args], {{k: clone(v) for k, v in kwargs.items()}})
    return _aka_copies.get(key, (args, kwargs))


def {fn}(*args, **kwargs):
    out = _aka_once(*args, **kwargs)
    own_args, own_kwargs = _aka_own(args, kwargs)
    _aka_once(*own_args, **own_kwargs)
    return out
"""


def doubled_on_own_data(task: Any, dest: Path) -> Path:
    """The doubled candidate whose second call reads a private copy of its inputs: twice the
    work on twice the data (the plain doubled call's second pass finds its inputs in L2 on
    shapes that fit there, so it is not twice the work). For graph-timed smoke shapes: an eager
    block would pay for the copies the first time it sees a slot."""
    return doubled_candidate(task, dest, OWN_DATA)


def same_as_baseline(task: Any, dest: Path) -> Path:
    """What the noop agent leaves: the initial candidate; for tasks that start unimplemented, an
    entrypoint that re-exports the provided baseline (so the baseline is timed against itself)."""
    file, _, fn = task.entrypoint.partition(":")
    dest.mkdir(parents=True, exist_ok=True)
    if task.baseline_is_initial_candidate:
        (dest / file).write_text((task.root / file).read_text())
    else:
        bfile, _, bfn = task.baseline.partition(":")
        module = Path(bfile).with_suffix("").as_posix().replace("/", ".")
        (dest / file).write_text(f"from .{module} import {bfn} as {fn}  # noqa: F401\n")
    return dest


def perf_summary(result: dict[str, Any]) -> dict[str, Any]:
    ev = result.get("evaluation", {})
    perf = ev.get("performance") or {}
    out = {"accepted": result.get("candidate_accepted"), "correct": result.get("pass_correctness"),
           "speedup": perf.get("speedup"), "ci95": perf.get("ci95"),
           "reason": (result.get("acceptance") or {}).get("reason") or result.get("error"),
           "phases": ev.get("phases_wall"), "wall_s": result.get("bench_wall_s"),
           "cases": [{k: c.get(k) for k in ("case", "held_out", "method", "pairs", "speedup",
                                            "ci95", "baseline_median_ms", "candidate_median_ms",
                                            "stop_reason", "speed_of_light_ms",
                                            "calls_per_block", "launch_queue", "graph_resized",
                                            "seconds", "placements", "pair_placements")}
                     # The baseline beside the candidate against alone, and on which memory.
                     | {"interference": (c.get("interference") or {}).get("ratio"),
                        "clean_placement": (c.get("clean") or {}).get("placement"),
                        "samples_ms": c.get("samples_ms")}
                     for c in perf.get("cases", [])],
           "wall_clock_check": ev.get("wall_clock_check", {}).get("passed"),
           "memory": (ev.get("diagnostics") or {}).get("memory")}
    if ev.get("failure"):
        out["failure"] = {k: ev["failure"].get(k) for k in ("kind", "phase", "message", "file",
                                                              "line")}
        out["log_tail"] = (ev["failure"].get("log_tail") or ev.get("worker_log_tail") or "")[-1500:]
    return out


def fmt_ci(s: float | None, ci: list[float] | None) -> str:
    if s is None:
        return "-"
    return f"{s:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{s:.3f}"


def run_item(section: str, task_id: str, tmp: Path) -> Any:
    from aka_core.commands.validate import validate_task
    from aka_core.plugin.host import PluginHost

    task = load(task_id)
    if section == "validate":
        report = validate_task(TASKS / task_id, task_id, PluginHost(), run=True, device="auto",
                               trivial=not NO_TRIVIAL)
        perf = (report.get("evaluation") or {}).get("performance") or {}
        return {"status": report["overall_status"],
                "aa": {"speedup": perf.get("speedup"), "ci95": perf.get("ci95")},
                "checks": [{k: c.get(k) for k in ("name", "status", "detail", "reference_ms",
                                                  "baseline_ms")} for c in report["checks"]],
                "log_tail": next((c.get("log_tail") for c in report["checks"]
                                  if c.get("log_tail")), None)}
    if section == "replay":
        return perf_summary(evaluate(task_id, SOLUTIONS / task_id,
                                     with_timing(task.root, tmp / "replay-task" / task_id)))
    if section == "double":
        root = (task.root if task.baseline_is_initial_candidate else
                without_rules(task, tmp / "double-rules" / task_id))
        return perf_summary(evaluate(task_id, doubled_candidate(task, tmp / "double" / task_id),
                                     with_timing(root, tmp / "double-task" / task_id)))
    if section == "latency":
        return cli_latency(task_id)
    if section == "aa":
        cand = same_as_baseline(task, tmp / "aa" / task_id)
        return perf_summary(evaluate(task_id, cand, with_timing(
            without_rules(task, tmp / "aa-task" / task_id), tmp / "aa-task-b" / task_id)))
    if section == "compile":
        return compile_only_row(task_id)
    if section == "graph2x":
        # Microsecond calls (the smoke shape, timed by graph replay): the baseline against
        # itself and against twice its work, without the task's rules (both re-export it).
        small = smoke_shaped_task(task, tmp / "graph2x" / task_id, rules=False)
        return {"aa": perf_summary(evaluate(task_id, same_as_baseline(task, tmp / "g-aa" / task_id),
                                            small)),
                "double": perf_summary(evaluate(task_id, doubled_candidate(
                    task, tmp / "g-double" / task_id), small)),
                "double_own": perf_summary(evaluate(task_id, doubled_on_own_data(
                    task, tmp / "g-double-own" / task_id), small))}
    if section == "graph":
        small = smoke_shaped_task(task, tmp / "graph" / task_id)
        aa = [perf_summary(evaluate(task_id, same_as_baseline(task, tmp / f"graph-aa{i}" / task_id),
                                    small)) for i in range(3)]
        return {"aa": aa, "replay": perf_summary(evaluate(task_id, SOLUTIONS / task_id, small))}
    raise ValueError(section)


def redteam_harness() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("aka_redteam_harness",
                                                  ROOT / "tests" / "redteam" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_redteam(args: argparse.Namespace, data: dict[str, Any], save: Any) -> None:
    """Every exploit, one after another (each must leave nothing behind for the next), then the
    stored solutions of the exploited tasks, which must still be accepted."""
    harness = redteam_harness()
    deadline = time.monotonic() + args.deadline_s
    rows = data.setdefault("redteam", {})
    names = set(args.exploits or [])
    for exploit in harness.load_exploits("cuda"):
        if names and exploit.name not in names:
            continue
        if time.monotonic() > deadline:
            data.setdefault("incomplete", []).append(f"redteam {exploit.name}: deadline")
            continue
        try:
            rows[exploit.name] = harness.evaluate_exploit(exploit, device="cuda")
        except Exception as exc:
            rows[exploit.name] = {"exploit": exploit.name, "class": exploit.attack_class,
                                  "verdict": f"FAILED: harness error {type(exc).__name__}: {exc}"}
        save()
        print(f"[redteam] {exploit.name}: {rows[exploit.name].get('verdict')}", file=sys.stderr,
              flush=True)
    after = data.setdefault("after_redteam", {})
    for task_id in ("triton2triton/gelu", "torch2cuda/silu_and_mul"):
        after[task_id] = perf_summary(evaluate(task_id, SOLUTIONS / task_id))
        save()


def run_sections(args: argparse.Namespace, data: dict[str, Any], save: Any) -> None:
    """Evaluations of a section run ``--jobs`` at a time: their start-up and compile overlap,
    while checks and timing queue on the GPU lock (one evaluation on the GPU at a time)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    deadline = time.monotonic() + args.deadline_s
    ids = args.tasks or task_ids()
    if args.backends:
        ids = [t for t in ids if load(t).backend in args.backends]
    tmp = Path(tempfile.mkdtemp(prefix="aka-bench-"))
    lock = threading.Lock()

    def one(section: str, task_id: str, rep: int) -> None:
        if time.monotonic() > deadline:
            with lock:
                data.setdefault("incomplete", []).append(f"{section} {task_id} #{rep}: deadline")
            return
        try:
            row = run_item(section, task_id, tmp / f"{rep}")
        except Exception as exc:  # one broken row must not lose the others
            row = {"error": f"{type(exc).__name__}: {exc}"}
        with lock:
            rows = data.setdefault(section, {})
            if section == "aa":
                rows.setdefault(task_id, []).append(row)
            elif row is not None:
                rows[task_id] = row
            save()
        print(f"[{section}] {task_id} #{rep} done", file=sys.stderr, flush=True)

    if args.by_task:  # task after task (each one's sections together): a deadline cuts tasks, not
        items = [(section, t, r) for t in ids for section in args.sections  # sections
                 for r in range(args.aa_repeats if section == "aa" else 1)]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(lambda item: one(*item), items))
        return
    for section in args.sections:
        if section == "redteam":
            run_redteam(args, data, save)
            continue
        repeats = args.aa_repeats if section == "aa" else 1
        section_ids = ids[: args.latency_tasks] if section == "latency" else ids
        if section in ("aa", "double") and args.aa_tasks:
            section_ids = [t for t in ids if t in args.aa_tasks]
        items = [(section, t, r) for r in range(repeats) for t in section_ids]
        jobs = 1 if section == "latency" else args.jobs
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(lambda item: one(*item), items))


def without_rules(task: Any, dest: Path) -> Path:
    """A copy of the task without its rules: the A/A candidate re-exports a PyTorch baseline,
    which a task forbidding PyTorch compute would reject."""
    import shutil

    from aka_core.yamlio import dump_yaml, load_plain_yaml

    shutil.copytree(task.root, dest, dirs_exist_ok=True)
    doc = load_plain_yaml(dest / "task.yaml")
    doc.pop("rules", None)
    (dest / "task.yaml").write_text(dump_yaml(doc))
    return dest


TIMING: dict[str, float] = {}  # --block-ms, --min-pairs: the timing policy of the copies evaluated


def with_timing(task_dir: Path, dest: Path) -> Path | None:
    """``task_dir`` itself, or (with --block-ms or --min-pairs) a copy whose ``timing`` says so."""
    import shutil

    from aka_core.yamlio import dump_yaml, load_plain_yaml

    if not TIMING:
        return None if task_dir.is_relative_to(TASKS) else task_dir
    shutil.copytree(task_dir, dest, dirs_exist_ok=True)
    doc = load_plain_yaml(dest / "task.yaml")
    doc.setdefault("timing", {}).update(TIMING)
    (dest / "task.yaml").write_text(dump_yaml(doc))
    return dest


def smoke_shaped_task(task: Any, dest: Path, rules: bool = True) -> Path:
    """A copy of the task whose only case is its smoke shape (no held-out cases; without its
    rules unless ``rules``)."""
    import shutil

    from aka_core.yamlio import dump_yaml, load_plain_yaml

    shutil.copytree(task.root, dest, dirs_exist_ok=True)
    doc = load_plain_yaml(dest / "task.yaml")
    smoke = doc["smoke_case"]
    doc["cases"] = [{"name": f"smoke_{smoke['name']}", "params": smoke["params"]}]
    doc.pop("held_out_cases", None)
    doc.pop("held_out_draws", None)
    if not rules:
        doc.pop("rules", None)
    (dest / "task.yaml").write_text(dump_yaml(doc))
    return dest


def compile_only_row(task_id: str) -> dict[str, Any]:
    from aka_core import api
    from aka_core.convert import unstructure

    result = unstructure(api.evaluate_candidate(TASKS / task_id, SOLUTIONS / task_id, device="cpu"))
    record = result["evaluation"].get("compile_only") or {}
    return {"status": result["status"], "pass_compilation": result["pass_compilation"],
            "architecture": record.get("architecture"), "built": record.get("built"),
            "note": record.get("note") or result["acceptance"]["reason"]}


def cli_latency(task_id: str) -> dict[str, Any]:
    """Seconds from `aka eval` start to its result, and the evaluator's own phase split."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval", str(TASKS / task_id),
                           "--candidate", str(SOLUTIONS / task_id), "--json"],
                          capture_output=True, text=True, check=False)
    total = time.monotonic() - started
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"total_s": total, "error": proc.stderr[-1500:]}
    phases = result.get("evaluation", {}).get("phases_wall", {})
    worker = result.get("evaluation", {}).get("wall_seconds") or 0.0
    return {"total_s": total, "cli_overhead_s": total - worker, "phases": phases,
            "speedup": (result.get("evaluation", {}).get("performance") or {}).get("speedup")}


def environment() -> dict[str, Any]:
    import torch
    import triton

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "triton": triton.__version__, "platform": platform.platform()}
    try:
        from aka_backend_cuda.toolchain import find_nvcc, nvcc_version

        nvcc = find_nvcc()
        info["nvcc"] = nvcc_version(nvcc) if nvcc else None
    except ImportError:
        pass
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, sm=f"{p.major}.{p.minor}", multiprocessors=p.multi_processor_count,
                    l2_mb=getattr(p, "L2_cache_size", 0) / 2**20, cuda=torch.version.cuda)
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm",
                                  "--format=csv,noheader"], capture_output=True, text=True)
            info["nvidia_smi"] = smi.stdout.strip()
        except OSError:
            pass
    return info


def table(data: dict[str, Any]) -> str:
    env = data.get("environment", {})
    lines = [f"# aka GPU bench: {env.get('gpu', 'no GPU')}",
             "",
             f"torch {env.get('torch')}, triton {env.get('triton')}, CUDA {env.get('cuda')}, "
             f"nvcc {env.get('nvcc')}, "
             f"python {env.get('python')}, {env.get('nvidia_smi', '')}; {data.get('date')}",
             f"command: `{data.get('command')}`", ""]
    ids = sorted(set().union(*(data.get(s, {}).keys() for s in
                               ("validate", "replay", "double", "aa", "latency", "compile"))))
    lines += ["| task | validate | reference ms | baseline ms | A/A median (min..max) | A/A CI has 1 | "
              "solution speedup [95% CI] | 2x work | eval s (start/compile/check/time) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for task_id in ids:
        c = data.get("compile", {}).get(task_id)
        if c is not None:
            built = ", ".join(c.get("built") or []) or "nothing"
            if "baseline" not in (c.get("built") or []):
                built += " (the PyTorch baseline has nothing to build)"
            lines.append(f"| {task_id} | compile-only ({c.get('architecture')}): "
                         f"{'built ' + built if c.get('pass_compilation') else 'BUILD FAILED'}; "
                         f"not run, no such GPU here | - | - | - | - | - | - | - |")
            continue
        v = data.get("validate", {}).get(task_id, {})
        ref = [c["reference_ms"] for c in v.get("checks", []) if c.get("reference_ms")]
        base = [c["baseline_ms"] for c in v.get("checks", []) if c.get("baseline_ms")]
        aa = [r for r in data.get("aa", {}).get(task_id, []) if r.get("speedup")]
        aa_txt, aa_ci = "-", "-"
        if aa:
            s = [r["speedup"] for r in aa]
            aa_txt = f"{statistics.median(s):.4f} ({min(s):.4f}..{max(s):.4f}) n={len(s)}"
            aa_ci = f"{sum(r['ci95'][0] <= 1 <= r['ci95'][1] for r in aa)}/{len(aa)}"
        failed_aa = len(data.get("aa", {}).get(task_id, [])) - len(aa)
        if failed_aa:
            aa_txt += f" ({failed_aa} failed)"
        rp = data.get("replay", {}).get(task_id, {})
        rp_txt = fmt_ci(rp.get("speedup"), rp.get("ci95")) if rp.get("accepted") else (
            f"REJECTED: {str(rp.get('reason'))[:60]}" if rp else "-")
        d = data.get("double", {}).get(task_id, {})
        d_txt = "-" if not d else (f"{d['speedup']:.4f}" if d.get("speedup") else
                                   f"failed: {str(d.get('reason'))[:40]}")
        lat = data.get("latency", {}).get(task_id, {})
        ph = lat.get("phases", {})
        lat_txt = "-" if not lat else (f"{lat['total_s']:.1f} ({ph.get('startup', 0):.1f}/"
                                       f"{ph.get('compile', 0):.1f}/{ph.get('correctness', 0):.1f}/"
                                       f"{ph.get('timing', 0):.1f})")
        lines.append(f"| {task_id} | {v.get('status', '-')} | "
                     f"{', '.join(f'{x:.3f}' for x in ref) or '-'} | "
                     f"{', '.join(f'{x:.3f}' for x in base) or '-'} | {aa_txt} | {aa_ci} | "
                     f"{rp_txt} | {d_txt} | {lat_txt} |")
    aa_all = [r["speedup"] for rs in data.get("aa", {}).values() for r in rs if r.get("speedup")]
    if aa_all:
        worst = max(abs(x - 1) for x in aa_all)
        lines += ["", f"A/A over all tasks: {len(aa_all)} evaluations, worst |1 - s| = "
                  f"{worst * 100:.3f}%, geomean {math.exp(sum(map(math.log, aa_all)) / len(aa_all)):.4f}"]
    for merged in data.get("merged_runs", []):
        env = merged.get("environment", {})
        lines += ["", f"Rows of sections {', '.join(merged.get('sections', []))} were added on "
                  f"{merged.get('date')} by a later run ({env.get('gpu', 'no GPU')}, "
                  f"{env.get('platform')}, torch {env.get('torch')}, nvcc {env.get('nvcc')}): "
                  f"`{merged.get('command')}`"]
    graph = data.get("graph", {})
    if graph:
        lines += ["", "Smoke shapes only (the CUDA-graph timing path for kernels under 30 us):", "",
                  "| task | method | baseline ms | A/A (3 evaluations) | solution speedup [95% CI] |",
                  "|---|---|---|---|---|"]
        for task_id, row in sorted(graph.items()):
            if "aa" not in row:
                lines.append(f"| {task_id} | error: {str(row.get('error'))[:80]} | | | |")
                continue
            cases = [c for r in [*row["aa"], row["replay"]] for c in r.get("cases") or []]
            methods = ", ".join(sorted({str(c.get("method")) for c in cases})) or "-"
            base = [c["baseline_median_ms"] for c in cases if c.get("baseline_median_ms")]
            aa = ", ".join(f"{r['speedup']:.4f}" if r.get("speedup") else "FAILED"
                           for r in row["aa"])
            rp = row["replay"]
            rp_txt = fmt_ci(rp.get("speedup"), rp.get("ci95")) if rp.get("accepted") else (
                f"REJECTED: {str(rp.get('reason'))[:60]}")
            lines.append(f"| {task_id} | {methods} | "
                         f"{statistics.median(base) if base else float('nan'):.4f} | {aa} | {rp_txt} |")
    tiny = data.get("graph2x", {})
    if tiny:
        rows = [(t, r) for t, r in sorted(tiny.items()) if isinstance(r, dict) and "aa" in r]
        aa_ok = sum(1 for _, r in rows if r["aa"].get("speedup")
                    and abs(r["aa"]["speedup"] - 1) <= 0.01)
        dbl_ok = sum(1 for _, r in rows if r["double"].get("speedup")
                     and abs(r["double"]["speedup"] - 0.5) <= 0.005)
        own_ok = sum(1 for _, r in rows if (r.get("double_own") or {}).get("speedup")
                     and abs(r["double_own"]["speedup"] - 0.5) <= 0.005)
        lines += ["", f"Smoke shapes (graph replay of microsecond calls): A/A within 1% of 1.00 on "
                  f"{aa_ok} of {len(rows)}, 2x work within 1% of 0.50 on {dbl_ok} of {len(rows)}, "
                  f"2x work on its own data on {own_ok} of {len(rows)}", "",
                  "| task | baseline ms | A/A | 2x work (same inputs twice) | 2x work on its own data |",
                  "|---|---|---|---|---|"]
        for task_id, row in sorted(tiny.items()):
            if not isinstance(row, dict) or "aa" not in row:
                lines.append(f"| {task_id} | error: {str((row or {}).get('error'))[:80]} | | | |")
                continue
            base = [c["baseline_median_ms"] for c in row["aa"].get("cases") or []
                    if c.get("baseline_median_ms")]
            cells = [("-" if r is None else f"{r['speedup']:.4f}" if r.get("speedup") else
                      f"failed: {str(r.get('reason'))[:50]}")
                     for r in (row["aa"], row["double"], row.get("double_own"))]
            lines.append(f"| {task_id} | {statistics.median(base) if base else float('nan'):.4f} | "
                         f"{cells[0]} | {cells[1]} | {cells[2]} |")
    redteam = data.get("redteam", {})
    if redteam:
        # Paid as the harness judges it: a score, or an accepted evaluation of an exploit that
        # must fail (one that lists no failure kind computes honestly and may be accepted at 0).
        paid = [r for r in redteam.values() if "paid:" in (r.get("verdict") or "")]
        lines += ["", f"Red team: {len(redteam)} exploits on the GPU, {len(paid)} paid, "
                  f"{sum(1 for r in redteam.values() if r.get('verdict') == 'caught')} caught "
                  "with the expected verdict", "",
                  "| exploit | class | status | failure kind | score | files changed | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in sorted(redteam.items()):
            lines.append(f"| {name} | {r.get('class')} | {r.get('status')} | {r.get('kind')} | "
                         f"{r.get('score')} | {len(r.get('persistent_changes') or [])} | "
                         f"{str(r.get('verdict'))[:120]} |")
        for task_id, row in sorted(data.get("after_redteam", {}).items()):
            lines.append(f"\nAfter the red team, {task_id}'s stored solution: "
                         f"{'accepted' if row.get('accepted') else 'REJECTED'}, speedup "
                         f"{fmt_ci(row.get('speedup'), row.get('ci95'))}")
    if data.get("incomplete"):
        lines += ["", "INCOMPLETE: " + "; ".join(data["incomplete"])]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/results/latest"))
    parser.add_argument("--sections", default="validate,replay,double,latency,aa",
                        type=lambda s: s.split(","))
    parser.add_argument("--aa-repeats", type=int, default=10)
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--backends", type=lambda s: s.split(","),
                        help="only tasks of these backends (e.g. cuda)")
    parser.add_argument("--deadline-s", type=float, default=540)
    parser.add_argument("--merge", help="an earlier bench.json to extend")
    parser.add_argument("--latency-tasks", type=int, default=12,
                        help="how many tasks the latency section measures")
    parser.add_argument("--exploits", nargs="*", help="only these exploits (redteam section)")
    parser.add_argument("--aa-tasks", nargs="*", help="only these tasks in the aa and double sections")
    parser.add_argument("--jobs", type=int, default=2,
                        help="evaluations in flight (GPU work is serialised by the GPU lock)")
    parser.add_argument("--min-pairs", type=int,
                        help="evaluate copies of the tasks whose timing needs at least this many "
                             "pairs per case (the default is 10)")
    parser.add_argument("--block-ms", type=float,
                        help="evaluate copies of the tasks whose timed blocks aim at this many ms")
    parser.add_argument("--by-task", action="store_true",
                        help="run every section of a task before the next task (validate,replay)")
    parser.add_argument("--no-trivial", action="store_true",
                        help="validate without the trivial candidates (four evaluations a task)")
    args = parser.parse_args()
    global NO_TRIVIAL
    NO_TRIVIAL = args.no_trivial
    if args.block_ms is not None:
        TIMING["block_ms"] = args.block_ms
    if args.min_pairs is not None:
        TIMING["min_pairs"] = args.min_pairs
    from aka_core.logging_setup import configure_logging

    configure_logging(level="warning")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = json.loads(Path(args.merge).read_text()) if args.merge else {}
    this_run = {"environment": environment(), "date": time.strftime("%Y-%m-%d"),
                "command": "python bench/gpu_bench.py " + " ".join(sys.argv[1:]),
                "sections": args.sections, "block_ms": args.block_ms, "timing": dict(TIMING)}
    if args.merge:  # the earlier run keeps its header; this one is listed below the table
        data.setdefault("merged_runs", []).append(this_run)
    else:
        data.update({k: v for k, v in this_run.items() if k != "sections"})

    def save() -> None:
        (out / "bench.json").write_text(json.dumps(data, indent=1, default=str))
        (out / "table.md").write_text(table(data))

    run_sections(args, data, save)
    save()
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
