"""Where the run-to-run noise of an e2e measurement comes from (an engineer's probe, GPU only).

The judge measures a case as pairs of fresh engine runs (``measure.timed_run``). This probe runs
the baseline tree of one e2e task, with the task's own case and the judge's adapter, three ways:

  fresh   N runs, each a fresh engine (warm-up requests, then the timed requests): what the judge does
  reuse   one engine, its warm-up, then N timed ``generate`` calls in a row
  long    (``--long K``) the same as ``fresh`` with K times the requests per run

and for every run prints its throughput (judge's clock), its median TPOT and TTFT, and the GPU's
SM clock, power and temperature sampled by ``nvidia-smi`` every 100 ms while it ran. The spread of
``fresh`` against ``reuse`` says whether the noise comes with a fresh engine (start-up, clocks after
an idle GPU) or from inside a run (the host loop, prefill).

Usage:  AKA_E2E_CACHE=/opt/e2e-cache python bench/e2e_noise_probe.py --out DIR [--task qwen3_norms]
            [--fresh 6] [--reuse 6] [--long 0 [--long-runs N]]
Writes DIR/e2e_noise.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[1]


class Clocks:
    """nvidia-smi samples (time, sm MHz, power W, temperature C) in a background thread."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                 "--format=csv,noheader,nounits", "-lms", "100"],
                stdout=subprocess.PIPE, text=True)
        except OSError:  # no nvidia-smi: no clocks
            return
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if self._stop.is_set():
                    break
                try:
                    sm, power, temp = (float(x) for x in line.split(","))
                except ValueError:
                    continue
                self.samples.append((time.perf_counter(), sm, power, temp))
        finally:
            proc.kill()

    def between(self, start: float, end: float) -> dict[str, Any]:
        got = [s for s in self.samples if start <= s[0] <= end]
        if not got:
            return {}
        return {"sm_mhz_median": statistics.median(s[1] for s in got),
                "sm_mhz_min": min(s[1] for s in got), "sm_mhz_max": max(s[1] for s in got),
                "power_w_median": statistics.median(s[2] for s in got),
                "temp_c_max": max(s[3] for s in got), "samples": len(got)}

    def stop(self) -> None:
        self._stop.set()


def describe(result: Any, clocks: Clocks) -> dict[str, Any]:
    from aka_backend_e2e import measure

    tpot = measure.tpot_ms(result)
    ttft = measure.ttft_ms(result)
    return {"tok_s": measure.throughput(result), "duration_s": measure.run_duration(result),
            "tpot_ms_median": statistics.median(tpot) if tpot else None,
            "tpot_ms_p99": measure.percentile(tpot, 99) if tpot else None,
            "ttft_ms_median": statistics.median(ttft) if ttft else None,
            "ttft_ms_max": max(ttft) if ttft else None,
            "clocks": clocks.between(result.start, result.end)}


def spread(values: list[float]) -> dict[str, float]:
    med = statistics.median(values)
    return {"median": med, "min_rel": min(values) / med - 1, "max_rel": max(values) / med - 1,
            "stdev_rel": statistics.pstdev(values) / med if len(values) > 1 else 0.0}


def probe_task(name: str, tiny: bool) -> tuple[Path, str]:
    """The folder of e2e task ``name`` and the device to run it on: the task on a GPU, or (``tiny``)
    its tiny variant on the CPU, written to a temporary folder."""
    task_dir = ROOT / "tasks" / "e2e" / name
    if not tiny:
        return task_dir, "cuda"
    from aka_backend_e2e.variants import write_tiny_variant

    return write_tiny_variant(task_dir, Path(tempfile.mkdtemp()) / f"{name}_tiny"), "cpu"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--task", default="qwen3_norms")
    parser.add_argument("--fresh", type=int, default=6)
    parser.add_argument("--reuse", type=int, default=6)
    parser.add_argument("--long", type=int, default=0, help="requests x K, fresh engines")
    parser.add_argument("--long-runs", type=int, default=0, help="runs of --long (default: --fresh)")
    parser.add_argument("--tiny", action="store_true", help="the task's tiny CPU variant (a smoke "
                        "test of this script)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from aka_backend_e2e import measure
    from aka_backend_e2e.adapters.base import RunSpec
    from aka_backend_e2e.adapters.builtin import BuiltinAdapter
    from aka_backend_e2e.model import config_by_name
    from aka_backend_e2e.workload import builtin_weights, load_workload

    task_dir, device = probe_task(args.task, args.tiny)
    workload = load_workload(task_dir / "workload.yaml")
    vocab = config_by_name(workload.model.config).vocab
    weights, digest = builtin_weights(workload.model.config, workload.model.seed)
    adapter = BuiltinAdapter(weights=weights, weights_digest=digest, device=device,
                             confinement="best_effort")
    logs = Path(tempfile.mkdtemp(prefix="aka-e2e-noise-"))
    spec = RunSpec(workload=workload, kernels={"baseline": task_dir / workload.kernels.tree,
                                               "candidate": task_dir / workload.kernels.tree},
                   log_dir=logs)
    case = workload.cases[0]
    clocks = Clocks()
    data: dict[str, Any] = {"task": args.task, "case": attrs.asdict(case)}
    rows: list[tuple[str, int, dict[str, Any]]] = []

    def report(way: str, i: int, row: dict[str, Any]) -> None:
        rows.append((way, i, row))
        c = row["clocks"]
        print(f"{way:6} {i:2d} {row['tok_s']:8.1f} tok/s  {row['duration_s']:6.3f} s  tpot "
              f"{row['tpot_ms_median']:.3f} ms  ttft {row['ttft_ms_median']:.1f} ms  sm "
              f"{c.get('sm_mhz_median')} MHz ({c.get('sm_mhz_min')}-{c.get('sm_mhz_max')})  "
              f"{c.get('power_w_median')} W", flush=True)

    def fresh(way: str, runs: int, the_case: Any) -> None:
        reqs = measure.case_requests(the_case, vocab, prompt_key="probe")
        warm = measure.case_requests(the_case, vocab, prompt_key="probe", warmup=True)
        for i in range(runs):
            result = measure.timed_run(adapter, spec, the_case, "baseline", i, reqs, warm)
            report(way, i, describe(result, clocks))

    time.sleep(1.0)
    fresh("fresh", args.fresh, case)
    if args.reuse:
        reqs = measure.case_requests(case, vocab, prompt_key="probe")
        warm = measure.case_requests(case, vocab, prompt_key="probe", warmup=True)
        limit = int(case.max_concurrency)
        run = adapter.start("baseline", spec.tree("baseline"), workload, case, logs / "reuse")
        try:
            run.generate(warm, float("inf"), max_concurrency=limit)
            for i in range(args.reuse):
                result = run.generate(reqs, case.request_rate, seed=case.seed,
                                      max_concurrency=limit)
                measure.check_counts(result, reqs, max_concurrency=limit)
                report("reuse", i, describe(result, clocks))
        finally:
            run.stop()
    if args.long:
        fresh("long", args.long_runs or args.fresh,
              attrs.evolve(case, requests=case.requests * args.long))
    clocks.stop()
    data["rows"] = [{"way": w, "i": i, **r} for w, i, r in rows]
    data["spread"] = {}
    for way in ("fresh", "reuse", "long"):
        got = [r["tok_s"] for w, _, r in rows if w == way]
        if got:
            data["spread"][way] = {"tok_s": spread(got), "tpot_ms": spread(
                [r["tpot_ms_median"] for w, _, r in rows if w == way])}
            print(way, json.dumps(data["spread"][way]))
    (args.out / "e2e_noise.json").write_text(json.dumps(data, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
