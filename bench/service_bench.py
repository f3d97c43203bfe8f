"""The reward service on a GPU host: evaluations per GPU-minute, and whether it judges as `aka eval`.

1. ``--warm N``: N serial ``aka eval`` of one small task's stored solution after a first one
   that fills the kernel store: wall seconds p50 (the single-evaluation latency a trainer sees).
2. ``--serial``: one ``aka eval`` per task's stored solution, one after another (the reference
   scores and the serial rate). ``--warm-pass`` instead (or too): every task once through the
   service before anything is measured, so that a short run also starts from a warm kernel
   store.
3. ``--single N``: N requests of the same task, one at a time, to the idle service (each after a
   pause in which the slot's next evaluation starts: ``--prestart``): wall seconds p50, what one
   rollout waits.
4. the service: ``aka serve`` on every GPU (``--per-gpu``), a client with ``--in-flight``
   requests at once sending ``--repeats`` copies of every stored solution (distinct ids);
   evaluations per GPU-minute from the first submission to the last answer; per task, the
   service's speedups against the serial one (CI overlap).

Usage:  python bench/service_bench.py --out DIR [--tasks id ...] [--backends triton,cuda]
                                      [--repeats 4] [--in-flight 64] [--per-gpu 4]
                                      [--warm 5] [--warm-task triton2triton/softmax] [--serial]
                                      [--serial-repeats 1]
Writes DIR/bench.json and DIR/table.md, prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tests" / "solutions"
HELD_OUT_SEED = 1  # the same held-out shapes in every evaluation: scores comparable across paths


def stored(tasks: list[str] | None, backends: list[str]) -> list[str]:
    found = sorted(p.relative_to(SOLUTIONS).as_posix() for p in SOLUTIONS.glob("*/*")
                   if p.is_dir() and (ROOT / "tasks" / p.relative_to(SOLUTIONS)).is_dir())
    if tasks:
        return [t for t in found if t in tasks]
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.plugin.host import PluginHost

    host = PluginHost()
    return [t for t in found if load_task(ROOT / "tasks" / t, t, host).backend in backends]


def aka_eval(task: str, *extra: str) -> dict[str, Any]:
    """``aka eval`` of the task's stored solution (``extra``: more of its arguments)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval", str(ROOT / "tasks" / task),
                           "--candidate", str(SOLUTIONS / task), "--json",
                           "--held-out-seed", str(HELD_OUT_SEED), *extra],
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    try:
        record = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"task": task, "wall_s": wall, "error": done.stderr[-1500:]}
    evaluation = record.get("evaluation") or {}
    perf = evaluation.get("performance") or {}
    return {"task": task, "wall_s": wall, "score": record.get("score"),
            "speedup": perf.get("speedup"), "ci95": perf.get("ci95"),
            "accepted": record.get("candidate_accepted"),
            "judged_s": round(sum((evaluation.get("phases") or {}).values()), 4),
            "spawn_s": (evaluation.get("phases_wall") or {}).get("spawn"),
            "cases": case_samples(perf)}


def case_samples(perf: dict[str, Any]) -> list[dict[str, Any]]:
    """Each case's speedup, CI, placements and per-call samples: enough to recompute a CI."""
    return [{k: c.get(k) for k in ("case", "speedup", "ci95", "placements", "pair_placements",
                                   "samples_ms", "stop_reason", "placement_sized",
                                   "calls_per_block", "baseline_calls_per_block")}
            for c in perf.get("cases") or []]


def editable_files(task: str) -> dict[str, str | bytes]:
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.plugin.host import PluginHost

    loaded = load_task(ROOT / "tasks" / task, task, PluginHost())
    return {name: (SOLUTIONS / task / name).read_bytes() for name in loaded.editable
            if (SOLUTIONS / task / name).is_file()}


async def through_service(url: str, tasks: list[str], repeats: int, in_flight: int,
                          deadline: float | None = None) -> tuple[list[dict[str, Any]], float]:
    from aka_core.api import AsyncServiceClient

    limit = asyncio.Semaphore(in_flight)
    files = {task: editable_files(task) for task in tasks}
    run = time.strftime("%H%M%S")

    async with AsyncServiceClient(url, timeout=600) as client:

        async def one(task: str, k: int) -> dict[str, Any]:
            async with limit:
                started = time.monotonic()
                result = await client.evaluate(task, files[task],
                                               id=f"{run}-{k}-{task.replace('/', '.')}",
                                               held_out_seed=HELD_OUT_SEED)
                evaluation = (result.get("record") or {}).get("evaluation") or {}
                return {"task": task, "repeat": k, "wall_s": time.monotonic() - started,
                        "ended": time.monotonic(),
                        "status": result.get("status"), "reward": result.get("reward"),
                        "speedup": result.get("speedup"), "ci95": result.get("ci95"),
                        "message": result.get("message"),
                        "phases": evaluation.get("phases_wall"),
                        "warm": evaluation.get("warm"),
                        # Inside the GPU-exclusive part: the judge's seconds per step of its
                        # timed blocks, and each runner's operations (count, round trips).
                        "block_steps": (evaluation.get("performance") or {}).get(
                            "judge_block_steps_s"),
                        "stages": (evaluation.get("performance") or {}).get("judge_stages_s"),
                        "compile": (evaluation.get("compile") or {}).get("seconds"),
                        # The compile and correctness phases' seconds, by step.
                        "compile_steps": (evaluation.get("compile") or {}).get("steps_s"),
                        "correctness_steps": (evaluation.get("correctness") or {}).get(
                            "steps_s"),
                        # How the timing was taken: the flush, the lock's wait, clocks and heat.
                        "measured_how": {k: (evaluation.get("performance") or {}).get(k)
                                         for k in ("flush", "gpu_lock_wait_s", "gpu_state",
                                                 "holder_cpus")},
                        "runner_ops": ((evaluation.get("diagnostics") or {}).get("runner_ops")
                                       or {}),
                        # The correctness checks' quick passes: one kernel, or PyTorch's.
                        "quick_compare": (evaluation.get("diagnostics") or {}).get(
                            "quick_compare"),
                        # Each side's build before the GPU lock, and the pairs each case took.
                        "prebuild": evaluation.get("prebuild"),
                        "pairs": [c.get("pairs") for c in (evaluation.get("performance") or {})
                                  .get("cases", [])],
                        "cases": case_samples(evaluation.get("performance") or {})}

        started = time.monotonic()
        pending = [asyncio.ensure_future(one(t, k)) for k in range(repeats) for t in tasks]
        done, late = await asyncio.wait(pending, timeout=deadline)
        for future in late:  # past --deadline-s: the rate counts what finished by then
            future.cancel()
        finished = [f.result() for f in pending if f in done]
        ended = max((r["ended"] for r in finished), default=time.monotonic())
        return finished, (ended if late else time.monotonic()) - started


async def single_requests(url: str, task: str, count: int, gap: float
                          ) -> tuple[list[float], list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` requests one after another, each to an idle service: what one rollout waits
    (wall seconds, each evaluation's phases, and the service's timeline of each request)."""
    from aka_core.api import AsyncServiceClient

    files = editable_files(task)
    run = time.strftime("%H%M%S")
    walls, phases, timelines = [], [], []
    async with AsyncServiceClient(url, timeout=600) as client:
        for k in range(count + 1):  # the first fills the kernel store and is not counted
            await asyncio.sleep(gap)  # the slot's next evaluation has started meanwhile
            started = time.monotonic()
            result = await client.evaluate(task, files, id=f"{run}-single-{k}",
                                           held_out_seed=HELD_OUT_SEED)
            if k:
                walls.append(time.monotonic() - started)
                evaluation = (result.get("record") or {}).get("evaluation") or {}
                # The judge's phases, and "spawn": the wait for the judge started ahead to be
                # ready (imports, its runners confined and preloaded).
                phases.append({**(evaluation.get("phases") or {}), "spawn": float(
                    (evaluation.get("phases_wall") or {}).get("spawn") or 0.0)})
                timelines.append(result.get("timeline") or {})
    return walls, phases, timelines


def eval_through_service(task: str, state: Path, count: int, gap: float
                         ) -> tuple[list[float], list[dict[str, Any]]]:
    """``aka eval --service``: the CLI, its evaluation done by the running service (walls, and
    each one's judged seconds and wait for the judge started ahead)."""
    walls, parts = [], []
    for _ in range(count):
        time.sleep(gap)
        result = aka_eval(task, "--service", str(state))
        if "error" in result:
            print(f"aka eval --service failed: {result['error'][-500:]}", file=sys.stderr)
        else:
            walls.append(result["wall_s"])
            parts.append({"judged_s": result["judged_s"], "spawn_s": result["spawn_s"]})
    return walls, parts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--backends", default="triton,cuda")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--per-gpu", type=int, default=4)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--warm-task", default="triton2triton/softmax")
    parser.add_argument("--serial", action="store_true")
    parser.add_argument("--warm-pass", action="store_true",
                        help="before the measured requests, every task once through the service, "
                        "not counted: the kernel store warm without a serial pass")
    parser.add_argument("--serial-repeats", type=int, default=1,
                        help="with --serial: rounds of `aka eval` over the tasks (the spread "
                        "between a candidate's evaluations outside the service)")
    parser.add_argument("--single", type=int, default=5,
                        help="requests of --warm-task one at a time through the service (p50)")
    parser.add_argument("--single-gap", type=float, default=3.0,
                        help="seconds between single requests (the slot's next evaluation starts "
                        "after the last one ends: a shorter gap may find it still starting)")
    parser.add_argument("--deadline-s", type=float,
                        help="stop the service part after this long; the rate counts what ended")
    parser.add_argument("--holder-cpus", type=int, default=None,
                        help="aka serve's --holder-cpus (default: the service's own default)")
    parser.add_argument("--prestart", action=argparse.BooleanOptionalAction, default=True,
                        help="the service keeps each slot's next evaluation started")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpus = torch.cuda.device_count()
    tasks = stored(args.tasks, args.backends.split(","))
    report: dict[str, Any] = {"gpus": gpus, "tasks": tasks, "args": vars(args) | {"out": str(args.out)}}
    if args.warm:
        aka_eval(args.warm_task)  # fills the kernel store
        walls = [aka_eval(args.warm_task)["wall_s"] for _ in range(args.warm)]
        report["warm"] = {"task": args.warm_task, "wall_s": walls, "p50": statistics.median(walls)}
    if args.serial:
        started = time.monotonic()
        report["serial"] = [aka_eval(t) for _ in range(args.serial_repeats) for t in tasks]
        report["serial_wall_s"] = time.monotonic() - started
    with tempfile.TemporaryDirectory(prefix="aka-serve-bench-") as tmp:
        state = Path(tmp) / "state"
        service = subprocess.Popen([sys.executable, "-m", "aka_core.cli", "serve", "--tasks",
                                    str(ROOT / "tasks"), "--state", str(state), "--port", "0",
                                    "--per-gpu", str(args.per_gpu),
                                    "--max-queue", str(4 * args.in_flight),
                                    "--prestart" if args.prestart else "--no-prestart",
                                    *([] if args.holder_cpus is None
                                      else ["--holder-cpus", str(args.holder_cpus)])])
        try:
            while not (state / "service.json").is_file():
                if service.poll() is not None:
                    raise SystemExit("aka serve did not start")
                time.sleep(0.2)
            url = json.loads((state / "service.json").read_text())["url"]
            if args.warm_pass:  # every task once, not counted: the kernel store filled
                warmed, warm_wall = asyncio.run(through_service(url, tasks, 1, args.in_flight))
                report["warm_pass"] = {"evaluations": len(warmed), "wall_s": warm_wall,
                                       "statuses": sorted({str(r.get("status"))
                                                           for r in warmed})}
            if args.single:
                walls, phases, timelines = asyncio.run(single_requests(
                    url, args.warm_task, args.single, args.single_gap))
                report["single"] = {"task": args.warm_task, "wall_s": walls, "phases": phases,
                                    "timelines": timelines, "p50": statistics.median(walls),
                                    "prestart": args.prestart, "gap_s": args.single_gap}
                walls, parts = eval_through_service(args.warm_task, state, args.single,
                                                    args.single_gap)
                if walls:
                    report["eval_service"] = {"task": args.warm_task, "wall_s": walls,
                                              "parts": parts, "p50": statistics.median(walls)}
            results, wall = asyncio.run(through_service(url, tasks, args.repeats, args.in_flight,
                                                        args.deadline_s))
        finally:
            service.terminate()
            service.wait(timeout=120)
    report["service"] = results
    report["service_wall_s"] = wall
    rate = len(results) / (wall / 60) / max(1, gpus)
    report["evaluations_per_gpu_minute"] = rate
    lines = [f"# aka serve on {gpus} GPU(s) ({torch.cuda.get_device_name(0) if gpus else 'cpu'})",
             "", f"{len(results)} evaluations ({len(tasks)} tasks x {args.repeats}"
             f"{'' if len(results) == len(tasks) * args.repeats else ', cut at --deadline-s'}), "
             f"{args.in_flight} in flight, {args.per_gpu} per GPU: {wall:.1f} s, "
             f"**{rate:.1f} evaluations per GPU-minute**"]
    locked = [sum(float((r.get("phases") or {}).get(n) or 0.0)
                  for n in ("compile", "correctness", "timing")) for r in results]
    if locked and wall > 0:  # the GPU-exclusive part, and how much of the window it filled
        lines.append(f"GPU-locked seconds per evaluation {statistics.mean(locked):.2f} (median "
                     f"{statistics.median(locked):.2f}, most {max(locked):.2f}): the lock "
                     f"held {sum(locked) / (wall * max(1, gpus)):.0%} of the window")
    if "warm_pass" in report:
        lines.append(f"warm pass (not counted): {report['warm_pass']['evaluations']} evaluations "
                     f"in {report['warm_pass']['wall_s']:.1f} s")
    if "warm" in report:
        lines.append(f"warm `aka eval` of {args.warm_task}: p50 {report['warm']['p50']:.2f} s "
                     f"({', '.join(f'{w:.2f}' for w in report['warm']['wall_s'])})")
    if "single" in report:
        single = report["single"]
        lines.append(f"single requests of {single['task']} to an idle `aka serve` (prestart "
                     f"{'on' if single['prestart'] else 'off'}, {single.get('gap_s', 3.0):.0f} s "
                     f"apart): p50 {single['p50']:.2f} s "
                     f"({', '.join(f'{w:.2f}' for w in single['wall_s'])})")
        if single.get("phases"):
            names = list(single["phases"][0])
            lines.append("their phases, mean s: " + ", ".join(
                f"{n} {statistics.mean(p.get(n, 0.0) for p in single['phases']):.2f}"
                for n in names))
        spans = [t for t in single.get("timelines") or () if t]
        if spans:  # the rest of each request's wall time: the service's timeline
            judged = statistics.mean(sum(v for k, v in p.items() if k != "spawn")
                                     for p in single["phases"])
            lines.append("the service's timeline, mean s: " + ", ".join(
                f"{n} {statistics.mean(float(t.get(n) or 0.0) for t in spans):.3f}"
                for n in ("queued_s", "handed_s", "evaluation_s", "exit_s"))
                + f"; the judge's phases {judged:.3f}")
    if "eval_service" in report:
        through = report["eval_service"]
        lines.append(f"`aka eval --service` of {through['task']} (the CLI, evaluated by the idle "
                     f"service): p50 {through['p50']:.2f} s "
                     f"({', '.join(f'{w:.2f}' for w in through['wall_s'])}); judged "
                     + ", ".join(f"{p['judged_s']:.2f}" for p in through.get("parts", []))
                     + " s; waits for the judge started ahead "
                     + ", ".join(f"{p['spawn_s'] or 0:.2f}" for p in through.get("parts", []))
                     + " s")
    if "serial" in report:
        count = len(report["serial"])
        lines.append(f"serial `aka eval` of the {len(tasks)} tasks x {args.serial_repeats}: "
                     f"{report['serial_wall_s']:.1f} s "
                     f"({count / (report['serial_wall_s'] / 60):.1f} per GPU-minute)")
    phases = [r["phases"] for r in results if r.get("phases")]
    if phases:  # where an evaluation's seconds go; all but start-up and the wait hold the GPU
        names = sorted({name for p in phases for name in p}, key=lambda n: -sum(
            p.get(n, 0.0) for p in phases))
        lines += ["", "mean seconds per evaluation through the service: " + ", ".join(
            f"{n} {statistics.mean(p.get(n, 0.0) for p in phases):.2f}" for n in names)
            + f" ({sum(bool((r.get('warm') or {}).get('used')) for r in results)}/{len(results)} "
            "started ahead)"]
    steps = [r["block_steps"] for r in results if r.get("block_steps")]
    if steps:  # the timing phase's seconds, by step of the judge's blocks
        names = sorted({n for st in steps for n in st}, key=lambda n: -sum(
            st.get(n, 0.0) for st in steps))
        lines.append("mean seconds of the timing phase's block steps: " + ", ".join(
            f"{n} {statistics.mean(st.get(n, 0.0) for st in steps):.3f}" for n in names))
    for key, what in (("stages", "the timing phase's stages"),
                      ("compile_steps", "the compile phase's steps"),
                      ("correctness_steps", "the correctness phase's steps")):
        parts = [r[key] for r in results if r.get(key)]
        if parts:  # a phase's seconds, by stage or step
            names = sorted({n for st in parts for n in st}, key=lambda n: -sum(
                st.get(n, 0.0) for st in parts))
            lines.append(f"mean seconds of {what}: " + ", ".join(
                f"{n} {statistics.mean(st.get(n, 0.0) for st in parts):.3f}" for n in names))
    ops: dict[str, list[float]] = {}
    for r in results:
        for side, side_ops in (r.get("runner_ops") or {}).items():
            for op, entry in side_ops.items():
                ops.setdefault(f"{side}.{op}", []).append(float(entry.get("round_trip_s") or 0.0))
    if ops:  # the runners' operations, round trips summed per evaluation
        lines.append("mean round-trip seconds per evaluation, by runner operation: " + ", ".join(
            f"{k} {statistics.mean(v):.3f}" for k, v in sorted(
                ops.items(), key=lambda kv: -statistics.mean(kv[1]))[:14]))
    driver = [driver_steps(r.get("runner_ops") or {}) for r in results if r.get("runner_ops")]
    if driver:  # mostly driver calls: a mean far above its median is a few evaluations stalled
        names = sorted({n for d in driver for n in d}, key=lambda n: -sum(
            d.get(n, 0.0) for d in driver))
        lines.append("the runners' set-up and capture steps, seconds per evaluation (mean / "
                     "median): " + ", ".join(
                         f"{n} {statistics.mean(d.get(n, 0.0) for d in driver):.3f} / "
                         f"{statistics.median(d.get(n, 0.0) for d in driver):.3f}"
                         for n in names[:8]))
    held = [(r.get("measured_how") or {}).get("holder_cpus") for r in results]
    moved = [h for h in held if h]
    lines.append(f"holder CPUs: {moved[0]['cpus']} in {len(moved)} of {len(held)} evaluations, "
                 f"{sum(h.get('threads_refused', 0) for h in moved)} threads refused to move"
                 if moved else "holder CPUs: none kept")
    quick = [r["quick_compare"] for r in results if r.get("quick_compare")]
    if quick:  # which quick passes ran as one kernel, and why the kernel failed where it did
        errors = sorted({q["fused_error"] for q in quick if q.get("fused_error")})
        lines.append(f"correctness's quick passes: {sum(q.get('fused', 0) for q in quick)} as one "
                     f"kernel, {sum(q.get('equal', 0) for q in quick)} bit-exact by one "
                     f"equality, {sum(q.get('pytorch', 0) for q in quick)} with PyTorch"
                     + (f"; the kernel failed: {errors[0]}" if errors else ""))
        audits = [q["audits"] for q in quick if q.get("audits")]
        if audits:
            lines.append("timed audits' flags: " + ", ".join(
                f"{sum(a.get(k, 0) for a in audits)} {what}" for k, what in (
                    ("fused", "by the kernel"), ("pytorch", "by PyTorch"),
                    ("settled", "raised by the kernel, settled by PyTorch"))))
    builds: dict[str, list[float]] = {}
    for r in results:
        for side, entry in (r.get("prebuild") or {}).items():
            if isinstance(entry, dict) and entry.get("ran"):
                builds.setdefault(f"{side} {entry.get('outcome')}", []).append(
                    float(entry.get("seconds") or 0.0))
    if builds:  # the builds before the GPU lock: how many, how they ended, their seconds
        lines.append("builds before the GPU lock (side, outcome: count, mean s): " + ", ".join(
            f"{k}: {len(v)}, {statistics.mean(v):.2f}" for k, v in sorted(builds.items())))
    pairs = [p for r in results for p in (r.get("pairs") or []) if p]
    if pairs:
        lines.append(f"timed pairs per case: mean {statistics.mean(pairs):.1f}, "
                     f"min {min(pairs)}, max {max(pairs)}")
    lines += score_table(tasks, results, report.get("serial", []))
    table = "\n".join(lines)
    (args.out / "table.md").write_text(table + "\n")
    (args.out / "bench.json").write_text(json.dumps(report, indent=1, default=str))
    print(table)
    return 0


def driver_steps(runner_ops: dict[str, Any]) -> dict[str, float]:
    """One evaluation's seconds in its runners' slot set-ups and captures, by step, both sides
    summed (``setup.empty_cache``, ``capture.capture``, ...)."""
    steps: dict[str, float] = {}
    for side_ops in runner_ops.values():
        for op in ("setup", "capture"):
            for name, seconds in ((side_ops.get(op) or {}).get("steps_s") or {}).items():
                steps[f"{op}.{name}"] = steps.get(f"{op}.{name}", 0.0) + float(seconds)
    return steps


def score_table(tasks: list[str], results: list[dict[str, Any]],
                serial: list[dict[str, Any]]) -> list[str]:
    """Per task, the service's speedups against serial ``aka eval``'s: how many of the service's
    95% CIs overlap a serial one (the issue's "within their CIs"), and the largest difference of
    a service speedup from the serial ones' mean."""
    lines = ["", "| task | statuses | service speedups [95% CI] | serial speedups [95% CI] | "
             "CIs overlap | largest difference |", "|---|---|---|---|---|---|"]
    overlapping = compared = 0
    worst = 0.0
    for task in tasks:
        mine = [r for r in results if r["task"] == task]
        refs = [r for r in serial if r["task"] == task and r.get("ci95")]
        scored = [r for r in mine if r.get("speedup") is not None and r.get("ci95")]
        overlap = [any(r["ci95"][0] <= ref["ci95"][1] and ref["ci95"][0] <= r["ci95"][1]
                       for ref in refs) for r in scored]
        differences = []
        if refs:
            mean = statistics.mean(ref["speedup"] for ref in refs)
            differences = [100 * (r["speedup"] / mean - 1) for r in scored]
            overlapping += sum(overlap)
            compared += len(scored)
            worst = max([worst, *(abs(d) for d in differences)])
        lines.append(
            f"| {task} | {', '.join(sorted({str(r['status']) for r in mine}))} | "
            + ", ".join(_speed(r["speedup"], r["ci95"]) for r in scored) + " | "
            + (", ".join(_speed(ref["speedup"], ref["ci95"]) for ref in refs) or "-") + " | "
            + (f"{sum(overlap)}/{len(scored)}" if refs else "-") + " | "
            + (f"{max(differences, key=abs):+.2f}%" if differences else "-") + " |")
    if compared:
        lines += ["", f"service CIs overlapping a serial one: {overlapping}/{compared}; largest "
                  f"difference from the serial mean {worst:.2f}%"]
    return lines


def _speed(speedup: float | None, ci: list[float | None]) -> str:
    if speedup is None:
        return "-"
    return f"{speedup:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci[0] is not None else "")


if __name__ == "__main__":
    sys.exit(main())
