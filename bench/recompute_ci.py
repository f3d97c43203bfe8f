"""Recompute each evaluation's task speedup and 95% CI from the per-case samples a bench kept
(``gpu_bench.py``'s A/A section, ``service_bench.py``'s service and serial records), with the
statistics as they are now: how a change to the CI reads on evaluations already run.

    python3 bench/recompute_ci.py bench/results/h100-2026-12-06d/aa-43/bench.json
    python3 bench/recompute_ci.py --between-runs-percent 0.3 SERVICE_BENCH_JSON

With a service bench's records, it also counts the service CIs that overlap the serial one of
the same task (issue 13's "identical within their CIs").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aka_core.evaluation import stats


def evaluations(data: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(section, task, record with ``cases``) of every evaluation the file kept samples for."""
    for task, runs in (data.get("aa") or {}).items():
        for run in runs:
            yield "aa", task, run
    for section in ("serial", "service"):
        for run in data.get(section) or []:
            yield section, run["task"], run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_json", type=Path)
    parser.add_argument("--expect", type=float, default=None,
                        help="the true speedup (1.0 for A/A): count the CIs that hold it")
    parser.add_argument("--between-runs-percent", type=float, default=0.0,
                        help="the CIs' term for what moves a case between evaluations "
                             "(timing.between_runs_percent; 0: as before it)")
    args = parser.parse_args()
    term = math.log1p(args.between_runs_percent / 100)
    recomputed: dict[tuple[str, str], list[tuple[float, float]]] = {}
    data = json.loads(args.bench_json.read_text())
    held = total = 0
    print("| section | task | kept speedup [CI] | recomputed [CI] |")
    print("|---|---|---|---|")
    for section, task, run in evaluations(data):
        cases = [c for c in run.get("cases") or [] if c.get("samples_ms")]
        if not cases:
            continue
        s, lo, hi = stats.geomean_speedup_ci(
            [(c["samples_ms"]["baseline"], c["samples_ms"]["candidate"], c.get("pair_placements"))
             for c in cases], between_runs=term)
        recomputed.setdefault((section, task), []).append((lo, hi))
        kept = run.get("ci95") or [float("nan")] * 2
        print(f"| {section} | {task} | {run.get('speedup', float('nan')):.4f} "
              f"[{kept[0]:.4f}, {kept[1]:.4f}] | {s:.4f} [{lo:.4f}, {hi:.4f}] |")
        if args.expect is not None:
            total += 1
            held += lo <= args.expect <= hi
    if args.expect is not None:
        print(f"\nrecomputed CIs holding {args.expect}: {held}/{total}")
    overlap = service = 0
    for (section, task), cis in recomputed.items():
        serial = recomputed.get(("serial", task))
        if section != "service" or not serial:
            continue
        for lo, hi in cis:
            service += 1
            overlap += any(lo <= s_hi and s_lo <= hi for s_lo, s_hi in serial)
    if service:
        print(f"\nrecomputed service CIs overlapping a serial one: {overlap}/{service}")


if __name__ == "__main__":
    main()
