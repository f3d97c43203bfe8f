"""One task's stored solution evaluated with a fresh judge and with a judge started ahead
(``evaluate.prestart_judge``, what ``aka serve --prestart`` does per slot), alternated: wall
seconds and the record's phases of each.

Usage:  python bench/prestart_probe.py [--device cpu|cuda] [--repeats 2] [--head-start 8]
                                       [task_id]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("task", nargs="?", default="triton2triton/gelu")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--head-start", type=float, default=8.0,
                        help="seconds the judge started ahead gets before its request")
    args = parser.parse_args()
    from aka_core import api
    from aka_core.evaluation import evaluate, warm
    from aka_core.plugin.host import PluginHost
    from aka_core.service.server import prestart_protected

    host = PluginHost()
    task, solution = ROOT / "tasks" / args.task, ROOT / "tests" / "solutions" / args.task
    print(f"{args.task} on {args.device}")
    for _ in range(args.repeats):
        for mode in ("fresh", "ahead"):
            if mode == "ahead":
                protected = prestart_protected(ROOT / "tasks", ROOT / ".no-service-state")
                evaluate.offer(evaluate.prestart_judge(warm.WarmProfile(
                    device=args.device, protected=protected)))
                time.sleep(args.head_start)  # a service starts it during the previous evaluation
            started = time.monotonic()
            result = api.evaluate_candidate(task, solution, device=args.device, host=host)
            wall = time.monotonic() - started
            ev = result.evaluation
            phases = ", ".join(f"{k} {v:.2f}" for k, v in (ev.get("phases_wall") or {}).items())
            print(f"{mode:5} {wall:6.2f} s  accepted={result.candidate_accepted}  "
                  f"warm={ev.get('warm')}  {phases}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
