"""What the judge's watches share (``disk_watch``, ``memory_watch``): a thread that checks the
watched sides every period, the files a side's processes hold open, and sizes read from the
environment and written for a message."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Container, Iterable
from typing import Any, Generic, TypeVar

_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
MAX_OPEN_FILES = 65536
"""Open files of all of a side's processes: a runner holds a few hundred; a scan of millions
would keep a watch's thread busy while the sides are timed (``memory_watch`` stops a side that
holds more; every scan stops a little past it)."""

Side = TypeVar("Side")


def size_from_env(name: str, default: int, environ: Any = None) -> int:
    """A size in bytes from the variable ``name`` (bytes, or a number with a K, M, G or T
    suffix), ``default`` where it is unset; ValueError names a bad value."""
    text = (os.environ if environ is None else environ).get(name, "").strip()
    if not text:
        return default
    scale = _SUFFIXES.get(text[-1].upper(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        value = int(float(number) * scale)
    except ValueError:
        raise ValueError(f"{name}={text!r}: give bytes, or a number with K, M, G or T") from None
    if value <= 0:
        raise ValueError(f"{name}={text!r}: the limit must be positive")
    return value


def open_file_bytes(pids: Iterable[int], wanted: Callable[[str], bool],
                    seen: set[tuple[int, int]], devices: Container[int] | None = None,
                    max_fds: int | None = None) -> tuple[int, int]:
    """(bytes allocated to the regular files the processes ``pids`` hold open whose link in
    ``/proc/<pid>/fd`` is ``wanted`` (on ``devices``, where given), each file once, the
    descriptors looked at). Files in ``seen`` are skipped, those counted are added to it. The
    scan stops past ``max_fds`` descriptors: a side holding millions would hold the watch."""
    held = fds = 0
    for pid in pids:
        if max_fds is not None and fds > max_fds:
            break
        with contextlib.suppress(OSError):
            names = os.listdir(f"/proc/{pid}/fd")
            fds += len(names)
            for fd in names[:None if max_fds is None else max_fds + 1]:
                path = f"/proc/{pid}/fd/{fd}"
                with contextlib.suppress(OSError):
                    if not wanted(os.readlink(path)):
                        continue
                    info = os.stat(path)
                    key = (info.st_dev, info.st_ino)
                    if (stat.S_ISREG(info.st_mode) and key not in seen
                            and (devices is None or info.st_dev in devices)):
                        seen.add(key)
                        held += info.st_blocks * 512
    return held, fds


def mapped_file_bytes(pids: Iterable[int], wanted: Callable[[str], bool],
                      seen: set[tuple[int, int]], devices: Container[int] | None = None
                      ) -> int:
    """Bytes allocated to the files the processes ``pids`` map whose path in
    ``/proc/<pid>/maps`` is ``wanted`` (on ``devices``, where given), each file once (files in
    ``seen`` skipped, those counted added): a file mapped, then closed (and deleted), holds its
    memory or its disk blocks with no descriptor left to find it by. Each file's size is read
    through ``/proc/<pid>/map_files`` where the judge may (it takes ``CAP_SYS_ADMIN``); else the
    mapped extent counts, the least the file holds."""
    held = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/maps", "rb") as handle:
                lines = handle.read().splitlines()
            for line in lines:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or fields[4] == b"0":
                    continue  # anonymous
                path = fields[5].decode(errors="replace")
                if not wanted(path):
                    continue
                major, minor = (int(part, 16) for part in fields[3].split(b":"))
                key = (os.makedev(major, minor), int(fields[4]))
                if key in seen or (devices is not None and key[0] not in devices):
                    continue
                start, end = (int(part, 16) for part in fields[0].split(b"-"))
                try:
                    info = os.stat(f"/proc/{pid}/map_files/{fields[0].decode()}")
                    size = info.st_blocks * 512
                except OSError:  # no CAP_SYS_ADMIN: the mapped extent, at least
                    size = end - start
                seen.add(key)
                held += size
    return held


def size_text(value: int) -> str:
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


class WatchThread(Generic[Side]):
    """Watched sides, and a daemon thread (started with the first) that calls ``check`` every
    ``period`` seconds until ``halt``. A check that raises is skipped: a measurement never
    fails the judge."""

    thread_name = "aka-watch"

    def __init__(self, period: float):
        self.period = period
        self.sides: list[Side] = []
        self.steps: list[Callable[[], object]] = []
        """Called every step before ``check`` (``every_step``)."""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, side: Side) -> None:
        with self._lock:
            self.sides.append(side)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def live(self, done: Callable[[Side], bool]) -> list[Side]:
        """The watched sides not ``done``, as they are now (the list may grow meanwhile)."""
        with self._lock:
            return [side for side in self.sides if not done(side)]

    def every_step(self, call: Callable[[], object]) -> None:
        """Also call ``call`` every step, before the check (a failure skipped, as a check's)."""
        self.steps.append(call)

    def check(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            for call in list(self.steps):
                with contextlib.suppress(Exception):
                    call()
            with contextlib.suppress(Exception):
                self.check()

    def halt(self) -> None:
        """Stop the thread (waits for a check under way)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class EveryStep(WatchThread[object]):
    """A thread of steps alone (``every_step``), started at once: work a watch's own measures,
    which may take seconds on a loaded host, must not hold up."""

    thread_name = "aka-steps"

    def __init__(self, period: float, *calls: Callable[[], object]):
        super().__init__(period)
        for call in calls:
            self.every_step(call)
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def check(self) -> None:
        return None
