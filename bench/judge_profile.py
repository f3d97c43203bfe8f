"""Where an honest evaluation's seconds go: `aka eval` of stored solutions with the judge profiled.

Each task's stored solution is evaluated with ``AKA_JUDGE_PROFILE`` set (the judge alone runs
under cProfile); prints the phase split and the judge's functions by cumulative time, and writes
``DIR/<task>.prof`` and ``DIR/profile.md``. The evaluating process itself (``aka eval``: the task
loaded, the workspace made, the evaluator's files checked, the record built) runs under cProfile
too (``DIR/<task>.parent.prof``): what an evaluation costs outside the judge, which a service's
request waits for (12-04b: 0.34 s of a single request's 2.80 s on an H200, unexplained).

Usage:  python bench/judge_profile.py --out DIR [--top 40] task_id [task_id ...]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def profile_one(task_id: str, out: Path, top: int) -> str:
    folder = Path(tempfile.mkdtemp(prefix="aka-judge-prof-"))
    started = time.monotonic()
    parent = out / (task_id.replace("/", "__") + ".parent.prof")
    proc = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(parent), "-m", "aka_core.cli", "eval",
         str(ROOT / "tasks" / task_id), "--candidate", str(ROOT / "tests" / "solutions" / task_id),
         "--json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "AKA_JUDGE_PROFILE": str(folder)})
    total = time.monotonic() - started
    lines = [f"## {task_id}: {total:.1f} s end to end", *outside_the_judge(parent, top)]
    try:
        evaluation = json.loads(proc.stdout).get("evaluation", {})
        lines.append(f"phases: {evaluation.get('phases_wall')}")
        for case in (evaluation.get("performance") or {}).get("cases", []):
            lines.append(f"case {case.get('case')}: {case.get('pairs')} pairs, "
                         f"{case.get('calls_per_block')} calls/block, {case.get('seconds')} s, "
                         f"method {case.get('method')}")
        lines.append("judge block steps s: "
                     f"{(evaluation.get('performance') or {}).get('judge_block_steps_s')}")
        lines.append("judge stages s: "
                     f"{(evaluation.get('performance') or {}).get('judge_stages_s')}")
        for side, ops in ((evaluation.get("diagnostics") or {}).get("runner_ops") or {}).items():
            lines.append(f"runner {side}: " + ", ".join(
                f"{op} x{e.get('count')} {e.get('round_trip_s')} s (busy {e.get('busy_s')}"
                + (f" {e.get('steps_s')}" if e.get("steps_s") else "") + ")"
                for op, e in ops.items()))
    except json.JSONDecodeError:
        lines.append(f"no result: {proc.stderr[-2000:]}")
    profiles = sorted(folder.glob("judge-*.prof"))
    if not profiles:
        lines.append("no profile was written")
        return "\n".join(lines)
    target = out / (task_id.replace("/", "__") + ".prof")
    target.write_bytes(profiles[0].read_bytes())
    text = io.StringIO()
    pstats.Stats(str(target), stream=text).sort_stats("cumulative").print_stats(top)
    lines += ["```", text.getvalue().strip()[-12000:], "```"]
    # aka's own functions alone (the imports above crowd them out): where the phases' time goes.
    ours = io.StringIO()
    pstats.Stats(str(target), stream=ours).sort_stats("cumulative").print_stats(
        r"aka_core/evaluation", top)
    lines += ["aka_core.evaluation alone:", "```", ours.getvalue().strip()[-12000:], "```"]
    return "\n".join(lines)


def outside_the_judge(parent: Path, top: int) -> list[str]:
    """The evaluating process's own seconds: all of them, the wait for the judge, and aka's
    functions by cumulative time (the wait and the imports are most of the rest)."""
    if not parent.is_file():
        return ["the evaluating process wrote no profile"]
    stats = pstats.Stats(str(parent))
    total = max(v[3] for v in stats.stats.values())  # the outermost call's cumulative seconds
    waited = sum(v[3] for k, v in stats.stats.items()
                 if k[2] == "_watch" and k[0].endswith("evaluate.py"))
    text = io.StringIO()
    pstats.Stats(str(parent), stream=text).sort_stats("cumulative").print_stats(
        r"aka_core/(api|run|evaluation/(evaluate|integrity|record))|operator_tasks|plugin", top)
    return [f"evaluating process (profiled, so slower than it runs): {total:.2f} s, of which "
            f"{waited:.2f} s waiting for the judge; outside it {total - waited:.2f} s:",
            "```", text.getvalue().strip()[-8000:], "```"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = "\n\n".join(profile_one(t, args.out, args.top) for t in args.tasks)
    (args.out / "profile.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
