"""Where a reward-service request's seconds go outside the judge: one service job profiled.

A request to ``aka serve`` is evaluated by a job process started ahead (``aka_core.service.job``
``--warm``): its judge and the judge's runners are started and waiting when the request comes.
This script does what such a job does (the judge started ahead, the plugins discovered and the
evaluator's files hashed ahead, a pause in which the judge gets ready), then evaluates a task's
stored solution under cProfile, ``--repeats`` times, and prints for each: the job's wall seconds,
the judge's own phases (from its messages) and what is left (the task loaded, the workspace made,
the request built, the judge's exit waited for, the record built), then the job's functions by
cumulative time. On an H200 (12-04b) that rest was 0.32 s of a single request's 2.83 s.

Runs on the CPU (a Triton task's correctness through the interpreter, no timing) or a GPU.

Usage:  python bench/job_profile.py [--task triton2triton/softmax] [--device auto] [--repeats 3]
                                    [--ready-s 8] [--top 30] [--out DIR] [--judge-profile]
                                    [--no-profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(task: str, device: str, ready_s: float, prof_path: Path | None) -> dict[str, float]:
    from aka_core.evaluation import evaluate, warm
    from aka_core.service import job

    evaluate.offer(evaluate.prestart_judge(warm.WarmProfile(device=device)))
    job.ahead()
    time.sleep(ready_s)  # the service's pause between requests: the judge gets ready
    with tempfile.TemporaryDirectory(prefix="aka-job-prof-") as tmp:
        spec = {"task_dir": str(ROOT / "tasks" / task),
                "candidate_dir": str(ROOT / "tests" / "solutions" / task), "device": device,
                "held_out_seed": 1, "result_path": str(Path(tmp) / "result.json")}
        profiler = cProfile.Profile() if prof_path is not None else None
        started = time.monotonic()
        if profiler is not None:
            profiler.enable()
        payload = job.run(spec)
        if profiler is not None:
            profiler.disable()
        wall = time.monotonic() - started
    if profiler is not None:
        profiler.dump_stats(prof_path)
    if "record" not in payload:
        raise SystemExit(f"the evaluation failed: {json.dumps(payload)[:1500]}")
    evaluation = payload["record"].get("evaluation") or {}
    phases = {k: float(v) for k, v in (evaluation.get("phases") or {}).items()}
    spawn = float((evaluation.get("phases_wall") or {}).get("spawn") or 0.0)
    judged = sum(phases.values()) + spawn
    return {"wall_s": wall, "judged_s": judged, "rest_s": wall - judged, "spawn_s": spawn,
            "evaluate_s": float(evaluation.get("wall_seconds") or 0.0), **phases}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="triton2triton/softmax")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ready-s", type=float, default=8.0)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--judge-profile", action="store_true",
                        help="the judge started ahead profiled too (AKA_JUDGE_PROFILE): its "
                        "functions by cumulative time follow the job's")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                        help="cProfile the job (its overhead inflates Python-heavy parts "
                        "several-fold: compare walls with --no-profile)")
    args = parser.parse_args()
    from aka_core.api import resolve_device

    device = resolve_device(args.device)
    out = args.out or Path(tempfile.mkdtemp(prefix="aka-job-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.judge_profile:
        (out / "judge").mkdir(exist_ok=True)
        os.environ["AKA_JUDGE_PROFILE"] = str(out / "judge")
    runs = []
    for k in range(args.repeats + 1):  # the first fills the kernel store; not counted
        entry = one(args.task, device, args.ready_s,
                    out / f"job-{k}.prof" if args.profile else None)
        if k:
            runs.append(entry)
        print(f"{'counted' if k else 'first  '} " + ", ".join(
            f"{n} {v:.3f}" for n, v in entry.items()), flush=True)
    lines = [f"# one service job of {args.task} on {device}, {args.repeats} counted", ""]
    for name in runs[0]:
        lines.append(f"- {name}: mean {statistics.mean(r[name] for r in runs):.3f} s")
    if args.profile:
        text = io.StringIO()
        stats = pstats.Stats(*(str(out / f"job-{k}.prof") for k in range(1, args.repeats + 1)),
                             stream=text)
        stats.sort_stats("cumulative").print_stats(args.top)
        lines += ["", f"the counted jobs' functions by cumulative time (summed over "
                  f"{args.repeats}):", "```", text.getvalue().strip(), "```"]
    judges = sorted((out / "judge").glob("judge-*.prof"), key=lambda p: p.stat().st_mtime)
    if len(judges) > 1:  # the first judge's evaluation filled the kernel store: not counted
        text = io.StringIO()
        pstats.Stats(*(str(p) for p in judges[1:]), stream=text).sort_stats(
            "cumulative").print_stats(args.top)
        lines += ["", f"the counted judges' functions by cumulative time (summed over "
                  f"{len(judges) - 1}):", "```", text.getvalue().strip(), "```"]
    (out / "profile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written: {out / 'profile.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
