"""Processes below a process, from /proc: what aka kills when a judge, a runner or a worker ends,
and what the judge freezes while it times the other side (``aka_core.testing.processes`` offers
the same to tests)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def children(pid: int) -> list[int]:
    """The direct children of ``pid``: from its threads' ``children`` files (a few small reads),
    or, where the kernel does not offer them, from a scan of /proc (one file per process)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found += [int(p) for p in handle.read().split()]
        except FileNotFoundError:
            if os.path.exists(f"/proc/{pid}/task/{tid}"):
                return _scan_children(pid)  # no children files in this kernel
        except OSError:
            continue
    return found


def _scan_children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, grandchildren ...), parents before children."""
    found, frontier = [], [pid]
    while frontier:
        below = children(frontier.pop(0))
        found += below
        frontier += below
    return found


def signal_tree(pid: int, sig: int) -> list[int]:
    """Send ``sig`` to ``pid`` and then to everything below it, top down (a stopped parent forks
    no new child while its children are being found). Returns the processes signalled."""
    done: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop(0)
        try:
            os.kill(current, sig)
        except (ProcessLookupError, PermissionError):
            continue
        done.append(current)
        frontier += children(current)
    return done


def signal_pids(pids: list[int], sig: int = signal.SIGCONT) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
