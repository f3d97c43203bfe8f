"""The GPU proof of the e2e serving tasks (tasks/e2e/), in one call per task or several.

For each task, through the real judge (``api.evaluate_candidate``: confined engines, the operator
and model oracles, alternating pairs of fresh engines, the judge's clock):
  validate  the baseline against itself (A/A, ``aka validate --run``'s evaluation): its speedup
            must be 1 within the CI; each case's spread against the workload's A/A floor
  solution  the stored faster solution (tests/solutions/e2e/<name>/): accepted? its gain, CI,
            tokens/s of both arms, p99 TPOT
  mutants   every mutant of plugins/aka-backend-e2e/tests/test_mutants.py that edits a file the
            task lets the agent edit, correctness only: each must be rejected, and by what

Usage:  python bench/e2e_bench.py --out DIR [--tasks qwen3_norms ...]
                                  [--sections validate,solution,mutants] [--deadline-s 520]
                                  [--tiny]   (the tiny CPU variants: a smoke test of this script)
Writes DIR/e2e_bench.json (everything, raw pairs included) and DIR/e2e_table.md, prints the
table. Items that would start after the deadline are listed as not run. The weights of the
qwen3-0.6b model are generated once per machine into $AKA_E2E_CACHE (the first item pays it).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks" / "e2e"
SOLUTIONS = ROOT / "tests" / "solutions" / "e2e"
MUTANTS_FILE = ROOT / "plugins" / "aka-backend-e2e" / "tests" / "test_mutants.py"
SECTIONS = ("validate", "solution", "mutants")
# A guess of each item's wall time on an H200 (engine starts dominate); refined by what ran.
ESTIMATE_S = {"validate": 120.0, "solution": 120.0, "mutant": 30.0}
"""Seconds an item takes on an H200 (2026-12-03: 77-96 s an evaluation of the qwen3 tasks)."""


def versions() -> dict[str, Any]:
    from importlib import metadata

    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("aka-core", "aka-backend-e2e", "torch", "triton"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import torch

        out["cuda"] = torch.version.cuda
        out["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception as exc:  # the row still says what failed
        out["torch_error"] = str(exc)
    return out


def mutants() -> dict[str, list[tuple[str, str, str]]]:
    """The mutants of the plugin's tests (file, old text, new text edits)."""
    sys.path.insert(0, str(MUTANTS_FILE.parent))
    try:
        import test_mutants  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return dict(test_mutants.MUTANTS)


def evaluate(task_dir: Path, candidate: Path, **kwargs: Any) -> dict[str, Any]:
    from aka_core import api
    from aka_core.convert import unstructure

    started = time.monotonic()
    result = unstructure(api.evaluate_candidate(task_dir, candidate, **kwargs))
    result["bench_wall_s"] = round(time.monotonic() - started, 1)
    return result


def summary(result: dict[str, Any]) -> dict[str, Any]:
    ev = result.get("evaluation") or {}
    perf = ev.get("performance") or {}
    timing = perf if perf.get("measured") else perf.get("cpu_diagnostic") or {}
    failure = ev.get("failure") or {}
    out: dict[str, Any] = {
        "status": result.get("status"), "accepted": result.get("candidate_accepted"),
        "correct": result.get("pass_correctness"), "score": result.get("score"),
        "measured": perf.get("measured"), "speedup": timing.get("speedup"),
        "ci95": timing.get("ci95"), "phases": ev.get("phases"), "wall_s": result.get("bench_wall_s"),
        "reason": (result.get("acceptance") or {}).get("reason") or result.get("error"),
        "cases": [{k: c.get(k) for k in ("case", "speedup", "ci95", "pairs", "spread", "aa_floor",
                                         "stopped", "baseline_median_ms", "candidate_median_ms",
                                         "p99_tpot", "aa_ratios")} for c in timing.get("cases", [])],
        "pairs": (ev.get("e2e") or {}).get("pairs"),  # every run's raw samples
        "oracle": (ev.get("e2e") or {}).get("oracle"),
        "device": (ev.get("device") or {}).get("name"),
    }
    if failure:
        out["failure"] = {k: failure.get(k) for k in ("kind", "phase", "arm", "message")}
    return out


def same_as_baseline(task: Any, dest: Path) -> Path:
    for rel in task.editable:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.root / rel, dest / rel)
    return dest


def mutant_candidate(task: Any, edits: list[tuple[str, str, str]], dest: Path) -> Path | None:
    """The task's editable files with ``edits`` applied; None when an edit touches a file the
    task does not let the agent edit (that mutant is another task's)."""
    tree = "kernels"
    editable = {rel.removeprefix(f"{tree}/") for rel in task.editable}
    if any(file not in editable for file, _, _ in edits):
        return None
    same_as_baseline(task, dest)
    for file, old, new in edits:
        path = dest / tree / file
        text = path.read_text()
        if text.count(old) != 1:
            raise RuntimeError(f"{file} no longer holds {old!r}: update the mutant")
        path.write_text(text.replace(old, new))
    return dest


class Bench:
    def __init__(self, args: argparse.Namespace, out: Path):
        self.args, self.out = args, out
        self.deadline = time.monotonic() + args.deadline_s
        self.rows: list[dict[str, Any]] = []
        self.data: dict[str, Any] = {"versions": versions(), "args": vars(args), "rows": self.rows}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def item(self, task: str, section: str, name: str, run: Any, estimate: float) -> None:
        row: dict[str, Any] = {"task": task, "section": section, "item": name}
        self.rows.append(row)
        if self.left() < estimate:
            row["not_run"] = f"deadline: {self.left():.0f} s left, about {estimate:.0f} s needed"
            print(f"-- {task} {section} {name}: not run ({row['not_run']})", flush=True)
            return
        started = time.monotonic()
        print(f"-- {task} {section} {name} ({self.left():.0f} s left)", flush=True)
        try:
            row.update(run())
        except Exception as exc:  # a crash of one item is its row
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["traceback"] = traceback.format_exc()[-3000:]
        row["bench_wall_s"] = round(time.monotonic() - started, 1)
        self.write()

    def write(self) -> None:
        (self.out / "e2e_bench.json").write_text(json.dumps(self.data, indent=1, default=str))
        (self.out / "e2e_table.md").write_text(table(self.data))


def fmt(s: float | None, ci: list[float] | None = None) -> str:
    if s is None:
        return "-"
    return f"{s:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{s:.3f}"


def table(data: dict[str, Any]) -> str:
    v = data["versions"]
    lines = [f"# e2e bench: {v.get('gpu') or 'cpu'}, torch {v.get('torch')}, cuda "
             f"{v.get('cuda')}, aka-backend-e2e {v.get('aka-backend-e2e')}", "",
             "| task | section | item | verdict | speedup [95% CI] | spread / floor | "
             "tok/s base -> cand | p99 TPOT ms base / cand | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        if r.get("not_run"):
            verdict = "not run"
        elif r.get("error"):
            verdict = "bench error"
        elif r.get("accepted"):
            verdict = "accepted"
        else:
            verdict = f"rejected ({(r.get('failure') or {}).get('kind') or r.get('status')})"
        case = (r.get("cases") or [{}])[0]
        spread = (f"{case['spread']:.4f} / {case['aa_floor']}" if case.get("spread") is not None
                  else "-")
        tps = (f"{1000 / case['baseline_median_ms']:.0f} -> {1000 / case['candidate_median_ms']:.0f}"
               if case.get("baseline_median_ms") else "-")
        tpot = case.get("p99_tpot") or {}
        p99 = (f"{tpot['baseline_p99_ms']:.2f} / {tpot['candidate_p99_ms']:.2f}"
               if tpot.get("baseline_p99_ms") is not None else "-")
        measured = "" if r.get("measured") or r.get("speedup") is None else " (cpu)"
        lines.append(f"| {r['task']} | {r['section']} | {r['item']} | {verdict} | "
                     f"{fmt(r.get('speedup'), r.get('ci95'))}{measured} | {spread} | {tps} | "
                     f"{p99} | {r.get('bench_wall_s', '-')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tasks", nargs="*", default=None,
                        help="task names under tasks/e2e (default: all)")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--deadline-s", type=float, default=520.0,
                        help="start no item that would end after this many seconds")
    parser.add_argument("--tiny", action="store_true",
                        help="the tiny CPU variants of the tasks (a smoke test of this script)")
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    args = parser.parse_args()
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    args.out.mkdir(parents=True, exist_ok=True)
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.plugin.host import PluginHost

    names = args.tasks or sorted(p.name for p in TASKS.iterdir() if (p / "workload.yaml").is_file())
    bench = Bench(args, args.out)
    scale = 0.2 if args.tiny else 1.0
    common = {"device": args.device}
    tmp = Path(tempfile.mkdtemp(prefix="aka-e2e-bench-"))
    try:
        for name in names:
            task_dir = TASKS / name
            if args.tiny:
                from aka_backend_e2e.variants import write_tiny_variant

                task_dir = write_tiny_variant(task_dir, tmp / "tasks" / "e2e" / f"{name}_tiny")
            task = load_task(task_dir, f"e2e/{task_dir.name}", PluginHost())
            if "validate" in sections:
                bench.item(name, "validate", "baseline A/A", lambda t=task, d=task_dir: summary(
                    evaluate(d, same_as_baseline(t, tmp / "aa" / t.name), **common)),
                    ESTIMATE_S["validate"] * scale)
            if "solution" in sections:
                stored = SOLUTIONS / name
                bench.item(name, "solution", stored.relative_to(ROOT).as_posix(),
                           lambda d=task_dir, s=stored: summary(evaluate(d, s, **common)),
                           ESTIMATE_S["solution"] * scale)
            if "mutants" in sections:
                for mutant, edits in mutants().items():
                    cand = mutant_candidate(task, edits, tmp / "mutants" / name / mutant)
                    if cand is None:
                        continue
                    bench.item(name, "mutants", mutant, lambda d=task_dir, c=cand: summary(
                        evaluate(d, c, measure_performance=False, **common)),
                        ESTIMATE_S["mutant"] * scale)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        bench.write()
    print(table(bench.data))
    print(f"wrote {args.out / 'e2e_bench.json'} and {args.out / 'e2e_table.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
