"""A side that fills the host's memory is stopped, and blamed, before the judge is.

Every process of a candidate's side starts with the highest OOM score (``sandbox``), so that the
kernel's OOM killer takes it first. But a process may lower its own score, down to the last
value a holder of ``CAP_SYS_RESOURCE`` wrote, and aka lacks that capability on many hosts (a
container's root among them). There a candidate lowers its score to the judge's, fills the
host's memory from many small processes, and the OOM killer takes the judge or the baseline's
runner (the largest at that score): an ``infra_error``, a dropped sample rather than the
candidate's zero. Memory held in a file instead of a mapping (a ``memfd`` written, never
mapped) counts in no process's size at all, and the OOM killer cannot free it.

So the judge measures each side's memory while the side lives, as killing it would free it:
the anonymous and shared pages its processes map, their swap (``RssAnon``, ``RssShmem``,
``VmSwap``), and the memory files (``memfd``, ``/dev/shm``) they hold open or map (a file
mapped untouched and closed holds its pages with none in ``RssShmem``), each file once;
its processes are found as the disk watch finds them (``Judge._side_processes``). A side is
killed with everything it started, and its runner's death is a ``resources`` failure naming
what it held, when

- it holds more than ``limit_bytes`` (``AKA_MEMORY_LIMIT``: bytes, or with a K/M/G/T suffix;
  default a quarter of the host's memory, at most 16 GiB), or runs more than ``MAX_PROCESSES``
  processes or ``MAX_THREADS`` threads (each takes one of the host's process ids, 32768 on
  many hosts: a fork or thread bomb would leave none for the judge; root is exempt from
  ``RLIMIT_NPROC``), or holds more than ``MAX_FILES`` open files (the watch looks at each);
- or, for the candidate, the host runs short (its available memory below ``RESERVE`` of its
  total) while the candidate holds more than the baseline plus ``SLACK``: the candidates of
  many evaluations (one policy's rollouts all do the same thing) each under the limit fill a
  host together, and each judge then stops its own.

A side that sent the judge something it did not ask for, on the socket of its GPU memory's
descriptors, is stopped too: a memory file queued there is in no process's size
(``sides.RunnerProcess.unasked``, asked every step). A baseline over the limit is the task's
fault (``task_error``); a baseline is never stopped for the host's shortage. Every ``PERIOD_S``
the watch reads the host's available memory (``/proc/meminfo``, one read); it measures the
sides when that fell by enough since their last measure for one to be over, while the host is
short, and every ``MEASURE_EVERY_S`` whatever it says (other processes freeing memory would
otherwise hide a side's growth).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from aka_core.evaluation.watch_thread import (
    MAX_OPEN_FILES,
    WatchThread,
    mapped_file_bytes,
    open_file_bytes,
    size_from_env,
    size_text,
)
from aka_core.processes import descendants

ENV = "AKA_MEMORY_LIMIT"
LIMIT_CAP = 16 * 2**30
MAX_PROCESSES = 1024
MAX_THREADS = 8192
"""Threads of all of a side's processes: PyTorch's pools, the CUDA driver's and Triton's come to
a few hundred on a large host."""
MAX_FILES = MAX_OPEN_FILES
PERIOD_S = 0.1
MEASURE_EVERY_S = 1.0
RESERVE = 0.10
"""The host is short of memory below this fraction of its total available."""
SLACK = 2**30
"""Under a shortage, what a candidate may hold beyond its baseline: the same framework loaded
twice costs about the same; a gigabyte more is the candidate's own doing."""
_FIELDS = {b"RssAnon:", b"RssShmem:", b"VmSwap:"}
_MEMORY_FILES = ("/memfd:", "/dev/shm/")


def host_memory() -> tuple[int, int]:
    """(total, available) bytes of the host's memory (``/proc/meminfo``)."""
    total = available = 0
    with open("/proc/meminfo", "rb") as handle:
        for line in handle:
            if line.startswith(b"MemTotal:"):
                total = int(line.split()[1]) * 1024
            elif line.startswith(b"MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    return total, available


def default_limit() -> int:
    """A quarter of the host's memory, at most ``LIMIT_CAP``."""
    try:
        total = host_memory()[0]
    except (OSError, ValueError, IndexError):
        total = 0
    return min(LIMIT_CAP, total // 4) if total > 0 else LIMIT_CAP


def limit_bytes(environ: Any = None) -> int:
    """The limit from ``AKA_MEMORY_LIMIT`` (default ``default_limit()``); ValueError names a
    bad value."""
    environ = os.environ if environ is None else environ
    return size_from_env(ENV, 0, environ) or default_limit()


def process_memory(pid: int) -> int:
    """What killing ``pid`` frees of its mappings: its anonymous and shared resident pages and
    its swap, in bytes (0 for a process gone)."""
    return process_status(pid)[0]


def process_status(pid: int) -> tuple[int, int]:
    """(``process_memory``, its threads) of ``pid`` from one read of its status; (0, 0) for a
    process gone."""
    used = threads = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                parts = line.split()
                if not parts:
                    continue
                if parts[0] in _FIELDS:
                    used += int(parts[1]) * 1024
                elif parts[0] == b"Threads:":
                    threads = int(parts[1])
    except (OSError, ValueError, IndexError):
        return 0, 0
    return used, threads


def memory_files(pids: list[int], max_fds: int | None = None) -> tuple[int, int]:
    """(bytes of the memory files (``memfd``, ``/dev/shm``) the processes ``pids`` hold open or
    map, each file once, the descriptors looked at: ``open_file_bytes``, ``mapped_file_bytes``).
    The pages a process touched through a mapping count in its ``RssShmem`` as well."""
    seen: set[tuple[int, int]] = set()
    held, fds = open_file_bytes(pids, _is_memory_file, seen, max_fds=max_fds)
    return held + mapped_file_bytes(pids, _is_memory_file, seen), fds


def _is_memory_file(path: str) -> bool:
    return path.startswith(_MEMORY_FILES)


class SideUse(NamedTuple):
    used: int
    """Bytes: ``process_memory`` of each process and the ``memory_files`` they hold."""
    threads: int
    files: int
    """Open file descriptors (the count stops a little past ``MAX_FILES``)."""


def side_memory(pids: list[int], max_fds: int = MAX_FILES) -> SideUse:
    """What the processes ``pids`` hold together."""
    statuses = [process_status(pid) for pid in pids]
    held, files = memory_files(pids, max_fds)
    return SideUse(sum(used for used, _ in statuses) + held,
                   sum(threads for _, threads in statuses), files)


class Watched:
    """One side: the roots of its processes, what to do when it is over, its last measure."""

    def __init__(self, side: str, roots: Callable[[], list[int]], over: Callable[[str], None],
                 unasked: Callable[[], str | None] | None = None):
        self.side, self.roots, self.over, self.unasked = side, roots, over, unasked
        self.done = False
        self.used = 0
        self.measured: tuple[float, int | None] | None = None
        """The last measure: (when, the host's available memory then)."""


class MemoryWatch(WatchThread[Watched]):
    """A thread of the judge that reads the host's available memory every ``period`` seconds
    and measures the watched sides when they may be over."""

    thread_name = "aka-memory-watch"

    def __init__(self, limit: int | None = None, period: float = PERIOD_S,
                 max_processes: int = MAX_PROCESSES,
                 host: Callable[[], tuple[int, int]] = host_memory, shortage: bool = True,
                 max_threads: int = MAX_THREADS):
        super().__init__(period)
        self.limit = limit_bytes() if limit is None else limit
        self.max_processes, self.max_threads, self.host = max_processes, max_threads, host
        self.shortage = shortage
        """Whether a short host stops a candidate heavier than its baseline (a watch of one
        side, an e2e engine's, has no baseline to weigh it against: it keeps the limit alone)."""
        self.peak: dict[str, int] = {}
        self.measures = 0
        self.least_available: int | None = None
        self.short = False
        """Whether the host ran short of memory while the sides were watched."""

    def watch(self, side: str, roots: Callable[[], list[int]],
              over: Callable[[str], None],
              unasked: Callable[[], str | None] | None = None) -> None:
        """Measure ``side``: the processes below ``roots()``; ``over(message)`` once, when it is
        over (the caller kills the side and keeps the message). ``unasked()``, asked every
        step, says what the side sent the judge unasked, which stops it as well
        (``sides.RunnerProcess.unasked``: files queued on a socket are in no process's size)."""
        self.add(Watched(side, roots, over, unasked))

    def check(self) -> None:
        """One step: the host's memory read, the sides measured where they may be over."""
        sides = self.live(lambda s: s.done)
        try:
            total, available = self.host()
        except (OSError, ValueError, IndexError):  # no /proc/meminfo: the sides by time alone
            total, available = 0, None
        if available is not None and (self.least_available is None
                                      or available < self.least_available):
            self.least_available = available
        short = available is not None and available < RESERVE * total
        self.short = self.short or short
        now = time.monotonic()
        for side in sides:
            breach = side.unasked() if side.unasked is not None else None
            if breach is not None:
                self._over(side, breach)
            elif short or self._may_be_over(side, available, now):
                self._measure(side, available, now)
        if short and available is not None and self.shortage:
            self._stop_the_heavy_candidate(available, total)

    def _may_be_over(self, side: Watched, available: int | None, now: float) -> bool:
        """Whether a measure could find ``side`` over the limit: it cannot have grown by more
        than the host's available memory fell since its last measure."""
        if side.measured is None or now - side.measured[0] >= MEASURE_EVERY_S:
            return True
        before = side.measured[1]
        if available is None or before is None:
            return False
        return side.used + max(0, before - available) > self.limit

    def _measure(self, side: Watched, available: int | None, now: float) -> None:
        # Each once: roots may name processes below other roots (an agent's remembered tree).
        pids = list(dict.fromkeys(p for root in side.roots() for p in (root, *descendants(root))))
        (side.used, threads, files), side.measured = side_memory(pids, MAX_FILES), (now, available)
        self.measures += 1
        self.peak[side.side] = max(self.peak.get(side.side, 0), side.used)
        if side.used > self.limit:
            self._over(side, f"it held {size_text(side.used)} of the host's memory, over the "
                             f"limit of {size_text(self.limit)} ({ENV})")
        elif len(pids) > self.max_processes:
            self._over(side, f"it ran {len(pids)} processes at once, over the limit of "
                             f"{self.max_processes}")
        elif threads > self.max_threads:
            self._over(side, f"it ran {threads} threads at once, over the limit of "
                             f"{self.max_threads}")
        elif files > MAX_FILES:
            self._over(side, f"it held more than {MAX_FILES} open files at once")

    def _stop_the_heavy_candidate(self, available: int, total: int) -> None:
        by_side = {s.side: s for s in self.sides}
        candidate, baseline = by_side.get("candidate"), by_side.get("baseline")
        if candidate is None or candidate.done:
            return
        allowed = (0 if baseline is None else baseline.used) + SLACK
        if candidate.used > allowed:
            self._over(candidate, f"it held {size_text(candidate.used)} of the host's memory "
                                  f"(its baseline {size_text(allowed - SLACK)}) while the host "
                                  f"ran short ({size_text(available)} of "
                                  f"{size_text(total)} available)")

    def _over(self, side: Watched, message: str) -> None:
        side.done = True
        side.over(message)

    def stop(self) -> dict[str, Any]:
        """Stop the thread; the record's summary (the limit, each side's peak, the host's
        least available memory and whether it ran short)."""
        self.halt()
        return {"limit_bytes": self.limit, "measures": self.measures,
                "peak_bytes": {side: used for side, used in sorted(self.peak.items())},
                "least_available_bytes": self.least_available, "host_short": self.short}
