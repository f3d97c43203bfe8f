"""Whether the memory watch sees pinned host memory (``memory_watch``): a process's counted
memory, its other resident counters, the host's available memory and its mappings by file,
before and after it pins 2 GiB through the CUDA driver (``pin_memory=True``: page-locked pages
the driver allocates and maps, which need not be anonymous pages of the process).

    python3 bench/pinned_memory_probe.py [--gib 2]

Prints one JSON line per state and the differences; needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from typing import Any

from aka_core.evaluation import memory_watch


def status_fields() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if name.startswith(("Rss", "Vm")) and rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0]) * 1024
    return fields


def mappings() -> dict[str, dict[str, int]]:
    """Per mapped file (or kind of anonymous mapping): total Size and Rss in bytes."""
    totals: dict[str, dict[str, int]] = defaultdict(lambda: {"size": 0, "rss": 0})
    name = ""
    with open("/proc/self/smaps") as handle:
        for line in handle:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                name = parts[5] if len(parts) > 5 else "[anonymous]"
            elif parts[0] == "Size:":
                totals[name]["size"] += int(parts[1]) * 1024
            elif parts[0] == "Rss:":
                totals[name]["rss"] += int(parts[1]) * 1024
    return dict(totals)


def state() -> dict[str, Any]:
    return {"counted": memory_watch.side_memory([os.getpid()])[0],
            "available": memory_watch.host_memory()[1], "status": status_fields(),
            "mappings": mappings()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=2.0)
    args = parser.parse_args()
    import torch

    torch.zeros(1, device="cuda")
    before = state()
    size = int(args.gib * 2**30)
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    pinned.fill_(1)
    after = state()
    gib = 2**30
    print(json.dumps({"pinned_gib": args.gib, "is_pinned": pinned.is_pinned()}))
    print(f"counted by the watch: +{(after['counted'] - before['counted']) / gib:.3f} GiB")
    print(f"host available: -{(before['available'] - after['available']) / gib:.3f} GiB")
    for name, value in after["status"].items():
        grown = value - before["status"].get(name, 0)
        if abs(grown) >= 2**24:
            print(f"status {name}: {grown / gib:+.3f} GiB")
    for name, sizes in after["mappings"].items():
        was = before["mappings"].get(name, {"size": 0, "rss": 0})
        if abs(sizes["size"] - was["size"]) >= 2**24 or abs(sizes["rss"] - was["rss"]) >= 2**24:
            print(f"mapping {name}: size {(sizes['size'] - was['size']) / gib:+.3f} GiB, "
                  f"rss {(sizes['rss'] - was['rss']) / gib:+.3f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
