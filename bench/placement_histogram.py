"""How many placements each case of a service bench had, and what sized its blocks.

    python3 bench/placement_histogram.py SERVICE_BENCH_JSON

Prints, for the serial and the service evaluations, a histogram of placements per case, and the
cases whose blocks shrank so that more placements fit (``placement_sized``).
"""

from __future__ import annotations

import collections
import json
import sys


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    for part in ("serial", "service"):
        counts: collections.Counter[int] = collections.Counter()
        one: collections.Counter[str] = collections.Counter()
        shrunk = 0
        for run in data.get(part) or []:
            for case in run.get("cases") or []:
                placed = case.get("placements") or 1
                counts[placed] += 1
                shrunk += bool(case.get("placement_sized"))
                if placed == 1:
                    one[f"{run['task']}:{case.get('case')}"] += 1
        print(f"{part}: placements per case {dict(sorted(counts.items()))}, "
              f"{shrunk} cases with blocks shrunk for placements")
        for name, n in one.most_common(12):
            print(f"  one placement x{n}: {name}")


if __name__ == "__main__":
    main(sys.argv[1])
