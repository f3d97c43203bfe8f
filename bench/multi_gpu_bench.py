"""Parallel runs over the GPUs of one host, against the serial run on one GPU, in one call.

Runs the noop agent over the same tasks three times with `aka run`: serially on GPU 0, with one
worker per GPU (`resources.gpus`), and with GPU groups of two (`resources.gpu_groups`). Reports
wall times (scaling against linear) and whether each task's A/A speedup in the parallel runs lies
within the serial run's 95% CI. Then starts the per-GPU run again, SIGKILLs the worker holding the
first claimed task mid-task, and checks that the run completes with every task recorded.

Usage:  python bench/multi_gpu_bench.py --out DIR [--tasks id ...] [--target H200]
Writes DIR/multi_gpu.json and DIR/multi_gpu.md, prints the table.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def write_config(path: Path, tasks: list[str], target: str, resources: dict[str, Any] | None) -> Path:
    from aka_core.yamlio import dump_yaml

    doc: dict[str, Any] = {"agent": {"template": "noop", "timeout_seconds": 600},
                           "tasks": tasks, "tasks_directory": str(ROOT / "tasks"),
                           "target_gpu_model": target, "scorer": {"name": "speedup"}}
    if resources:
        doc["resources"] = resources
    path.write_text(dump_yaml(doc))
    return path


def run_dir_of(root: Path, suffix: str) -> Path | None:
    found = sorted(glob.glob(str(root / "*" / f"run_*_{suffix}")))
    return Path(found[-1]) if found else None


def aka_run(config: Path, root: Path, suffix: str) -> dict[str, Any]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aka_core.cli", "run", str(config),
                           "--output-root", str(root), "--run-suffix", suffix],
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    run_dir = run_dir_of(root, suffix)
    return {"wall_s": wall, "rc": proc.returncode, "run_dir": str(run_dir),
            "stderr_tail": proc.stderr[-1500:], "tasks": read_rows(run_dir)}


def read_rows(run_dir: Path | None) -> dict[str, Any]:
    if run_dir is None or not (run_dir / "reports" / "summary.json").is_file():
        return {}
    doc = json.loads((run_dir / "reports" / "summary.json").read_text())
    return {r["task_id"]: {k: r.get(k) for k in ("status", "speedup_ratio", "ci95_low", "ci95_high",
                                                 "candidate_accepted")} for r in doc["tasks"]}


def kill_test(config: Path, root: Path) -> dict[str, Any]:
    """Start the parallel run, SIGKILL the worker of the first claimed unfinished task, wait."""
    proc = subprocess.Popen([sys.executable, "-m", "aka_core.cli", "run", str(config),
                             "--output-root", str(root), "--run-suffix", "kill"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: dict[str, Any] = {}
    deadline = time.monotonic() + 120
    while proc.poll() is None and not killed and time.monotonic() < deadline:
        run_dir = run_dir_of(root, "kill")
        claims = sorted(glob.glob(str(run_dir / ".queue" / "claims" / "*.json"))) if run_dir else []
        for path in claims:
            claim = json.loads(Path(path).read_text())
            task_id = claim.get("task_id") or Path(path).stem
            if run_dir and not (run_dir / task_id / "task_result.yaml").is_file():
                os.kill(int(claim["pid"]), signal.SIGKILL)
                killed = {"task_id": task_id, "pid": claim["pid"], "worker": claim.get("worker"),
                          "after_s": round(120 - (deadline - time.monotonic()), 2)}
                break
        time.sleep(0.1)
    _, err = proc.communicate(timeout=900)
    run_dir = run_dir_of(root, "kill")
    reclaimed = sorted(Path(p).name for p in glob.glob(str(run_dir / ".queue" / "reclaimed" / "*")))
    return {"killed": killed, "rc": proc.returncode, "run_dir": str(run_dir),
            "reclaimed": reclaimed, "tasks": read_rows(run_dir), "stderr_tail": err[-1500:]}


def within(row: dict[str, Any], serial: dict[str, Any]) -> bool | None:
    s, lo, hi = row.get("speedup_ratio"), serial.get("ci95_low"), serial.get("ci95_high")
    if s is None or lo is None or hi is None:
        return None
    return lo <= s <= hi


def table(data: dict[str, Any]) -> str:
    runs = data["runs"]
    serial = runs["serial"]
    lines = [f"# aka multi-GPU bench: {data['gpus']} x {data.get('gpu_name')}", "",
             f"{data.get('date')}; command: `{data.get('command')}`", "",
             "| run | wall s | tasks completed | scaling vs serial | linear would be |",
             "|---|---|---|---|---|"]
    for name, run in runs.items():
        done = sum(r["status"] == "completed" for r in run["tasks"].values())
        slots = run.get("slots", 1)
        lines.append(f"| {name} | {run['wall_s']:.1f} | {done}/{len(data['tasks'])} | "
                     f"{serial['wall_s'] / run['wall_s']:.2f}x | {slots:.0f}x |")
    lines += ["", "| task | serial A/A [95% CI] | per-GPU | in serial CI | groups | in serial CI |",
              "|---|---|---|---|---|---|"]
    for task_id in data["tasks"]:
        s = serial["tasks"].get(task_id, {})
        cells = [f"{s.get('speedup_ratio') or float('nan'):.4f} "
                 f"[{s.get('ci95_low') or float('nan'):.4f}, {s.get('ci95_high') or float('nan'):.4f}]"]
        for name in ("per_gpu", "groups"):
            r = runs.get(name, {}).get("tasks", {}).get(task_id, {})
            cells += [f"{r.get('speedup_ratio') or float('nan'):.4f}", str(within(r, s))]
        lines.append(f"| {task_id} | " + " | ".join(cells) + " |")
    kill = data.get("kill")
    if kill:
        done = sum(r["status"] == "completed" for r in kill["tasks"].values())
        lines += ["", f"Worker killed mid-task: {kill['killed']}; run exit status {kill['rc']}; "
                  f"{done}/{len(data['tasks'])} tasks completed; reclaimed claims: "
                  f"{', '.join(kill['reclaimed']) or 'none'}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/results/latest"))
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--target", default="H200")
    parser.add_argument("--skip", default="", help="comma-separated runs to skip: groups,kill")
    parser.add_argument("--gpus", type=int, help="GPU ids to use (default: every GPU torch sees)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = args.tasks or sorted(p.parent.relative_to(ROOT / "tasks").as_posix()
                                 for p in (ROOT / "tasks").rglob("task.yaml")
                                 if "triton" in p.parent.parent.name)
    import torch

    n = args.gpus or gpu_count()
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    data: dict[str, Any] = {"gpus": n, "gpu_name": name,
                            "tasks": tasks, "date": time.strftime("%Y-%m-%d"),
                            "command": "python bench/multi_gpu_bench.py " + " ".join(sys.argv[1:]),
                            "runs": {}}
    skip = set(filter(None, args.skip.split(",")))
    work = Path("/tmp/aka-multi-gpu")
    work.mkdir(exist_ok=True)

    def save() -> None:
        (out / "multi_gpu.json").write_text(json.dumps(data, indent=1, default=str))
        if "serial" in data["runs"]:
            (out / "multi_gpu.md").write_text(table(data))

    plans = [("serial", None, 1), ("per_gpu", {"gpus": list(range(n))}, n)]
    if n >= 2 and "groups" not in skip:
        plans.append(("groups", {"gpu_groups": [list(range(i, i + 2)) for i in range(0, n - 1, 2)]},
                      n // 2))
    for name, resources, slots in plans:
        config = write_config(work / f"{name}.yaml", tasks, args.target, resources)
        data["runs"][name] = {**aka_run(config, work / "runs", name), "slots": slots,
                              "resources": resources}
        print(f"[{name}] {data['runs'][name]['wall_s']:.1f} s", file=sys.stderr, flush=True)
        save()
    if "kill" not in skip:
        config = write_config(work / "kill.yaml", tasks, args.target, {"gpus": list(range(n))})
        data["kill"] = kill_test(config, work / "runs")
        save()
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
