"""A side that fills the disk is stopped, and blamed, before the host is.

A runner may write only its own scratch folder (``sandbox``), and no file of it larger than
512 MB, but as many files as it likes. A candidate that filled the disk would leave its judge
unable to write the record, the service unable to commit its queue, and every other evaluation
on the host failing: each an ``infra_error``, a dropped sample rather than the candidate's zero.
So the judge measures each side's disk use while the side lives: the blocks of every file in
its runner's and its builder's scratch folders, plus the files its processes hold open or map
after deleting them (which no folder shows; readable where the judge may look into the side's
``/proc/<pid>/fd`` and ``maps``: the same user as root, or root; a mapped file's size where it
may read ``map_files``, else its mapped extent). A side above ``limit_bytes``, or with more
than ``MAX_ENTRIES`` files (a walk of millions would slow the judge), is killed with everything
it started, and its runner's death is a ``resources`` failure naming what it wrote. Every half
second the watch reads the file system's free space and inodes (one ``statvfs``), and walks a
side's folders when they fell by enough since its last walk for the side to be over, or every
``WALK_EVERY_S``: the judge's thread stays mostly off the GIL while the sides are timed.

The limit is ``AKA_SCRATCH_LIMIT`` (bytes, or with a K/M/G suffix; default 8G): builds of a
task's extension take hundreds of megabytes, not gigabytes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from aka_core.evaluation.watch_thread import (
    MAX_OPEN_FILES,
    WatchThread,
    mapped_file_bytes,
    open_file_bytes,
    size_from_env,
    size_text,
)
from aka_core.processes import descendants

ENV = "AKA_SCRATCH_LIMIT"
DEFAULT_LIMIT = 8 * 2**30
MAX_ENTRIES = 200_000
PERIOD_S = 0.5
WALK_EVERY_S = 5.0
"""A side's folders are walked at least this often, whatever the free space says: another
process freeing space (a colluding candidate deleting what it wrote) would otherwise hide this
side's growth from the free-space test for as long as it kept deleting."""


def limit_bytes(environ: Any = None) -> int:
    """The limit from ``AKA_SCRATCH_LIMIT`` (default 8 GiB); ValueError names a bad value."""
    return size_from_env(ENV, DEFAULT_LIMIT, environ)


def usage(folders: Iterable[Path], pids: Iterable[int], max_entries: int = MAX_ENTRIES
          ) -> tuple[int, int, int]:
    """(bytes on disk, entries seen, bytes of deleted files still open) of ``folders`` and of
    the processes ``pids``; the walk stops after ``max_entries`` entries. Each file counts once
    (hard links, a file both in a folder and open), by its allocated blocks (a sparse file's
    holes fill nothing); an open deleted file counts where it is on the folders' file systems
    (a ``memfd`` is memory, the OOM killer's business)."""
    folders = list(folders)
    devices = set()
    for folder in folders:
        with contextlib.suppress(OSError):
            devices.add(os.stat(folder).st_dev)
    seen: set[tuple[int, int]] = set()
    used = entries = 0
    stack = [str(f) for f in folders]
    while stack and entries <= max_entries:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    entries += 1
                    if entries > max_entries:
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(entry.path)
                    elif (info.st_dev, info.st_ino) not in seen:
                        seen.add((info.st_dev, info.st_ino))
                        used += info.st_blocks * 512
        except OSError:
            continue
    pids = list(pids)
    hidden, _ = open_file_bytes(pids, _deleted, seen, devices, max_fds=MAX_OPEN_FILES)
    hidden += mapped_file_bytes(pids, _deleted, seen, devices)
    return used + hidden, entries, hidden


def _deleted(path: str) -> bool:
    return path.endswith(" (deleted)")


def _free(folders: Sequence[Path]) -> tuple[int, int] | None:
    """(free bytes, free inodes) of the file system of the first of ``folders`` that exists."""
    for folder in folders:
        with contextlib.suppress(OSError):
            info = os.statvfs(folder)
            return info.f_bavail * info.f_frsize, info.f_favail
    return None


class Watched:
    """One side: its folders, the roots of its processes, and what to do when it is over."""

    def __init__(self, side: str, folders: Sequence[Path], roots: Callable[[], list[int]],
                 over: Callable[[str], None]):
        self.side, self.folders, self.roots, self.over = side, list(folders), roots, over
        self.done = False
        self.walked: tuple[int, int, tuple[int, int] | None] | None = None
        """The last walk: (bytes, entries, the file system's free bytes and inodes then)."""
        self.walked_at = 0.0

    def may_be_over(self, now: tuple[int, int] | None, limit: int, max_entries: int) -> bool:
        """Whether a walk could find the side over a limit, the file system's free space and
        inodes being ``now``: the side cannot have grown by more than they fell since its last
        walk. One ``statvfs`` instead of a walk while nothing fills the disk, as in almost every
        evaluation."""
        if self.walked is None or time.monotonic() - self.walked_at >= WALK_EVERY_S:
            return True
        used, entries, free = self.walked
        if free is None or now is None:
            return True
        return (used + max(0, free[0] - now[0]) > limit
                or entries + max(0, free[1] - now[1]) > max_entries)


class DiskWatch(WatchThread[Watched]):
    """A thread of the judge that measures each watched side every ``period`` seconds."""

    thread_name = "aka-disk-watch"

    def __init__(self, limit: int | None = None, period: float = PERIOD_S,
                 max_entries: int = MAX_ENTRIES):
        super().__init__(period)
        self.limit = limit_bytes() if limit is None else limit
        self.max_entries = max_entries
        self.peak: dict[str, int] = {}
        """Per side, the most a walk found (the first walk, and those the free space called for)."""
        self.walks = 0

    def watch(self, side: str, folders: Sequence[Path], roots: Callable[[], list[int]],
              over: Callable[[str], None]) -> None:
        """Measure ``side``: ``folders`` and the processes below ``roots()``; ``over(message)``
        once, when it is over the limit (the caller kills the side and keeps the message)."""
        self.add(Watched(side, folders, roots, over))

    def check(self) -> None:
        """Measure every watched side once (the thread's step; callable on its own)."""
        for side in self.live(lambda s: s.done):
            free = _free(side.folders)
            if not side.may_be_over(free, self.limit, self.max_entries):
                continue
            pids = [p for root in side.roots() for p in (root, *descendants(root))]
            used, entries, hidden = usage(side.folders, pids, self.max_entries)
            side.walked, side.walked_at = (used, entries, free), time.monotonic()
            self.walks += 1
            self.peak[side.side] = max(self.peak.get(side.side, 0), used)
            if used > self.limit:
                message = (f"it used {size_text(used)} of disk ({size_text(hidden)} in files it deleted "
                           f"but kept open), over the limit of {size_text(self.limit)} "
                           f"({ENV})")
            elif entries > self.max_entries:
                message = (f"it made more than {self.max_entries} files and folders in its "
                           "scratch folder")
            else:
                continue
            side.done = True
            side.over(message)

    def stop(self) -> dict[str, Any]:
        """Stop the thread; the record's summary (the limit, each side's peak)."""
        self.halt()
        return {"limit_bytes": self.limit, "walks": self.walks,
                "peak_bytes": {side: used for side, used in sorted(self.peak.items())}}
