"""What `aka eval --service` adds to a request: the CLI's own seconds, engine against engine.

A trainer's loop may run `aka eval --service` for every sample; what it waits for beyond the
service's answer is the CLI process: Python's start, aka's imports, the HTTP client, the request.
This starts a local service whose evaluator answers at once (a scripted record, no judge), then
times, alternating, the CLI of each engine given (``NAME=PYTHONPATH``; an empty path: this tree)
and the same request from a client already open in this process (the floor: the service's own
answer). Runs on any machine: nothing here touches a GPU.

Usage:  python bench/cli_service_latency.py [--runs 15] [--engine NAME=PATH ...] [--out DIR]
Writes DIR/cli_service_latency.json and .md where --out is given; prints the table.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASK = "triton2triton/gelu"

INSTANT_EVALUATOR = '''
def evaluate(task_dir, candidate_dir, device="auto", held_out_seed=None, protect=()):
    return {"status": "completed", "score": 0.5, "candidate_accepted": True,
            "pass_compilation": True, "pass_correctness": True, "speedup_ratio": 2.1,
            "task_id": "triton2triton/gelu", "evaluation": {"performance": {
                "measured": True, "speedup": 2.1, "ci95": [2.09, 2.11]}}}
'''


def start_service(tmp: Path) -> tuple[Any, str]:
    """The tests' service process (tests/service/conftest.py) with an evaluator that answers
    at once: (its handle, its URL)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "aka_service_fixtures", ROOT / "tests" / "service" / "conftest.py")
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "aka_instant_evaluator.py").write_text(INSTANT_EVALUATOR)
    service = fixtures.ServiceProcess(tmp, workers=2,
                                      evaluator="aka_instant_evaluator:evaluate").start()
    return service, service.url


def cli_once(url: str, pythonpath: str) -> float:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, *filter(None, [env.get("PYTHONPATH")])])
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval", str(ROOT / "tasks" / TASK),
                           "--candidate", str(ROOT / "tests" / "solutions" / TASK),
                           "--service", url, "--json"],
                          capture_output=True, text=True, env=env, check=False, cwd="/")
    wall = time.monotonic() - started
    if done.returncode != 0 or '"speedup_ratio"' not in done.stdout:
        raise RuntimeError(f"aka eval --service failed ({done.returncode}): {done.stderr[-1500:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--engine", action="append", default=[],
                        help="NAME=PYTHONPATH (an empty path: the installed aka)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    engines = dict(item.split("=", 1) for item in args.engine) or {"installed": ""}
    tmp = Path(tempfile.mkdtemp(prefix="aka-cli-latency-"))
    proc, url = start_service(tmp)
    walls: dict[str, list[float]] = {name: [] for name in engines}
    walls["request from an open client"] = []
    try:
        from aka_core.api import ServiceClient

        files = {"kernel.py": (ROOT / "tests" / "solutions" / TASK / "kernel.py").read_text()}
        with ServiceClient(url) as client:
            for path in engines.values():  # a first call of each, not counted
                cli_once(url, path)
            client.evaluate(TASK, files, id=f"warm-{time.time_ns()}")
            for run in range(args.runs):
                order = list(engines.items())
                if run % 2:
                    order.reverse()
                for name, path in order:
                    walls[name].append(cli_once(url, path))
                started = time.monotonic()
                client.evaluate(TASK, files, id=f"r{run}-{time.time_ns()}")
                walls["request from an open client"].append(time.monotonic() - started)
    finally:
        proc.stop()
    lines = [f"`aka eval --service` against a service that answers at once ({args.runs} runs "
             f"each, alternating; {os.cpu_count()} cores)", "",
             "| what | p50 s | min s | max s |", "|---|---|---|---|"]
    for name, values in walls.items():
        lines.append(f"| {name} | {statistics.median(values):.3f} | {min(values):.3f} | "
                     f"{max(values):.3f} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cli_service_latency.json").write_text(json.dumps(
            {"engines": engines, "walls_s": walls, "runs": args.runs}, indent=1))
        (args.out / "cli_service_latency.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
