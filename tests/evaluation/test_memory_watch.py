"""The judge's watch on each side's host memory (``memory_watch``): what it counts, that a side
over the limit or with too many processes is reported once, and that a candidate holding more
than its baseline is stopped when the host runs short (and a baseline never is)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from aka_core.evaluation import memory_watch

MIB = 2**20

# A child that holds ``n`` MiB, written (so resident), then says so and waits.
HOLD = """
import sys, time
n = int(sys.argv[1])
block = bytearray(n << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
print("ready", flush=True)
time.sleep(600)
"""

# A child that writes ``n`` MiB into a memfd it never maps: in no process's size.
MEMFD = """
import os, sys, time
n = int(sys.argv[1])
fd = os.memfd_create("hidden")
chunk = b"x" * (1 << 20)
for _ in range(n):
    os.write(fd, chunk)
print("ready", flush=True)
time.sleep(600)
"""

# A child that writes ``n`` MiB into a memfd, maps one page of it untouched and closes it: the
# mapping holds the whole file, with no page in RssShmem and no descriptor left.
# (Python's mmap keeps a duplicate of the descriptor: libc's does not.)
MAPPED_MEMFD = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
n = int(sys.argv[1])
fd = os.memfd_create("hidden")
chunk = b"x" * (1 << 20)
for _ in range(n):
    os.write(fd, chunk)
assert libc.mmap(None, 4096, 1, 1, fd, 0) not in (None, 2**64 - 1)  # PROT_READ, MAP_SHARED
os.close(fd)
print("ready", flush=True)
time.sleep(600)
"""

# A child that starts ``n`` sleeping children, then says so and waits.
FORKS = """
import os, sys, time
for _ in range(int(sys.argv[1])):
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
print("ready", flush=True)
time.sleep(600)
"""


def start(script: str, n: int) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    from aka_core.processes import signal_tree

    for child in started:
        signal_tree(child.pid, 9)
        child.wait(timeout=30)


def test_the_limit_from_the_environment() -> None:
    assert memory_watch.limit_bytes({"AKA_MEMORY_LIMIT": "256M"}) == 256 * MIB
    default = memory_watch.limit_bytes({})
    total = memory_watch.host_memory()[0]
    assert default == min(memory_watch.LIMIT_CAP, total // 4) > 0
    for bad in ("lots", "-1", "0"):
        with pytest.raises(ValueError, match="AKA_MEMORY_LIMIT"):
            memory_watch.limit_bytes({"AKA_MEMORY_LIMIT": bad})


def test_written_memory_counts_and_untouched_memory_does_not(
        children: list[subprocess.Popen[str]]) -> None:
    small = start(HOLD, 1)
    big = start(HOLD, 96)
    children += [small, big]
    grown = memory_watch.process_memory(big.pid) - memory_watch.process_memory(small.pid)
    assert 90 * MIB < grown < 110 * MIB
    assert memory_watch.process_memory(2**22 + 12345) == 0  # no such process: nothing


def test_a_memory_file_held_but_never_mapped_counts(
        children: list[subprocess.Popen[str]]) -> None:
    holder = start(MEMFD, 48)
    children.append(holder)
    held, fds = memory_watch.memory_files([holder.pid])
    assert 48 * MIB <= held < 50 * MIB and 3 < fds < 100
    assert memory_watch.process_memory(holder.pid) < 40 * MIB  # its mappings miss it
    assert memory_watch.side_memory([holder.pid]).used >= 48 * MIB
    assert memory_watch.memory_files([holder.pid, holder.pid])[0] == held  # the file once


def test_a_memory_file_mapped_then_closed_counts(children: list[subprocess.Popen[str]]) -> None:
    holder = start(MAPPED_MEMFD, 48)
    children.append(holder)
    held, _ = memory_watch.memory_files([holder.pid])
    assert memory_watch.process_memory(holder.pid) < 40 * MIB  # its size misses it
    if os.geteuid() == 0 and _may_read_map_files(holder.pid):
        assert 48 * MIB <= held < 50 * MIB  # the file's size, through map_files
    else:
        assert held >= 4096  # the mapped extent: the least the file holds
    assert memory_watch.memory_files([holder.pid, holder.pid])[0] == held  # the file once


def _may_read_map_files(pid: int) -> bool:
    try:
        os.listdir(f"/proc/{pid}/map_files")
        return True
    except OSError:
        return False


def test_a_side_over_the_limit_is_reported_once_with_what_it_held(
        children: list[subprocess.Popen[str]]) -> None:
    parent = start(FORKS, 0)
    big = start(HOLD, 64)
    children += [parent, big]
    reports: dict[str, list[str]] = {"candidate": [], "baseline": []}
    watch = memory_watch.MemoryWatch(limit=48 * MIB, period=3600)
    watch.watch("baseline", roots=lambda: [parent.pid], over=reports["baseline"].append)
    watch.watch("candidate", roots=lambda: [big.pid], over=reports["candidate"].append)
    watch.check()
    watch.check()
    assert reports["baseline"] == []
    assert len(reports["candidate"]) == 1
    assert "of the host's memory, over the limit of 48.0 MiB (AKA_MEMORY_LIMIT)" in (
        reports["candidate"][0])
    summary = watch.stop()
    assert summary["limit_bytes"] == 48 * MIB
    assert summary["peak_bytes"]["candidate"] >= 64 * MIB
    assert summary["peak_bytes"]["baseline"] < 48 * MIB


def test_what_a_side_sent_the_judge_unasked_stops_it_at_the_next_step() -> None:
    # ``RunnerProcess.unasked``: memory files queued on the judge's socket are in no process's
    # size; the watch asks every step, whatever the host's memory says.
    reports: dict[str, list[str]] = {"candidate": [], "baseline": []}
    breaches = iter([None, "it sent 8 file descriptors"])
    watch = memory_watch.MemoryWatch(limit=2**40, period=3600)
    watch.watch("baseline", roots=lambda: [], over=reports["baseline"].append,
                unasked=lambda: None)
    watch.watch("candidate", roots=lambda: [], over=reports["candidate"].append,
                unasked=lambda: next(breaches))
    watch.check()
    assert reports == {"candidate": [], "baseline": []}
    watch.check()
    watch.check()  # once: the side is done
    assert reports == {"candidate": ["it sent 8 file descriptors"], "baseline": []}
    watch.stop()


def test_memory_spread_over_many_small_processes_adds_up(
        children: list[subprocess.Popen[str]]) -> None:
    # The attack the watch exists for: each process small, the side large.
    parts = [start(HOLD, 24) for _ in range(4)]
    children += parts
    reports: list[str] = []
    watch = memory_watch.MemoryWatch(limit=64 * MIB, period=3600)
    watch.watch("candidate", roots=lambda: [p.pid for p in parts], over=reports.append)
    watch.check()
    assert len(reports) == 1


def test_too_many_processes_is_over(children: list[subprocess.Popen[str]]) -> None:
    parent = start(FORKS, 6)
    children.append(parent)
    reports: list[str] = []
    watch = memory_watch.MemoryWatch(limit=2**40, period=3600, max_processes=5)
    watch.watch("candidate", roots=lambda: [parent.pid], over=reports.append)
    watch.check()
    assert reports == ["it ran 7 processes at once, over the limit of 5"]


# A child that starts ``n`` sleeping threads, then says so and waits.
THREADS = """
import sys, threading, time
for _ in range(int(sys.argv[1])):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print("ready", flush=True)
time.sleep(600)
"""


def test_too_many_threads_is_over(children: list[subprocess.Popen[str]]) -> None:
    # Threads take process ids as processes do: a thread bomb is a fork bomb in one process.
    spinner = start(THREADS, 40)
    children.append(spinner)
    reports: list[str] = []
    watch = memory_watch.MemoryWatch(limit=2**40, period=3600, max_threads=40)
    watch.watch("candidate", roots=lambda: [spinner.pid], over=reports.append)
    watch.check()
    assert reports == ["it ran 41 threads at once, over the limit of 40"]
    control = memory_watch.MemoryWatch(limit=2**40, period=3600, max_threads=41)
    control.watch("candidate", roots=lambda: [spinner.pid], over=reports.append)
    control.check()
    assert len(reports) == 1


# A child that opens ``n`` descriptors of /dev/null, then says so and waits.
FILES = """
import os, resource, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]) + 64, int(sys.argv[1]) + 64))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(int(sys.argv[1]))]
print("ready", flush=True)
time.sleep(600)
"""


def test_too_many_open_files_is_over(children: list[subprocess.Popen[str]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Every measure looks at each descriptor: millions of them would hold the judge's thread.
    holder = start(FILES, 300)
    children.append(holder)
    reports: list[str] = []
    monkeypatch.setattr(memory_watch, "MAX_FILES", 200)
    watch = memory_watch.MemoryWatch(limit=2**40, period=3600)
    watch.watch("candidate", roots=lambda: [holder.pid], over=reports.append)
    watch.check()
    assert reports == ["it held more than 200 open files at once"]
    monkeypatch.setattr(memory_watch, "MAX_FILES", 400)  # the control
    control = memory_watch.MemoryWatch(limit=2**40, period=3600)
    control.watch("candidate", roots=lambda: [holder.pid], over=reports.append)
    control.check()
    assert len(reports) == 1


def test_the_thread_stops_a_growing_side(children: list[subprocess.Popen[str]]) -> None:
    grower = subprocess.Popen([sys.executable, "-c", (
        "import time\nheld = []\n"
        "for _ in range(400):\n    held.append(bytearray(1 << 20)); time.sleep(0.01)")])
    reports: list[str] = []

    def over(message: str) -> None:
        reports.append(message)
        grower.kill()

    watch = memory_watch.MemoryWatch(limit=64 * MIB, period=0.05)
    watch.watch("candidate", roots=lambda: [grower.pid], over=over)
    grower.wait(timeout=60)
    watch.stop()
    assert len(reports) == 1, "the grower finished unreported"


class FakeHost:
    """The host's (total, available) memory as a test sets it; sides' memory by root."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, held: dict[int, int]):
        self.total, self.available = 100 * 2**30, 50 * 2**30
        self.measured: list[int] = []
        monkeypatch.setattr(memory_watch, "descendants", lambda root: [])

        def side_memory(pids: list[int], max_fds: int = 0) -> memory_watch.SideUse:
            self.measured.append(pids[0])
            return memory_watch.SideUse(held[pids[0]], 1, 3)

        monkeypatch.setattr(memory_watch, "side_memory", side_memory)

    def __call__(self) -> tuple[int, int]:
        return self.total, self.available


def test_a_short_host_stops_a_candidate_heavier_than_its_baseline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    held = {1: 3 * 2**30, 2: 5 * 2**30}  # baseline 3 GiB, candidate 5 GiB: under the limit
    host = FakeHost(monkeypatch, held)
    reports: dict[str, list[str]] = {"candidate": [], "baseline": []}
    watch = memory_watch.MemoryWatch(limit=8 * 2**30, period=3600, host=host)
    watch.watch("baseline", roots=lambda: [1], over=reports["baseline"].append)
    watch.watch("candidate", roots=lambda: [2], over=reports["candidate"].append)
    watch.check()
    assert reports == {"candidate": [], "baseline": []}  # the host has room
    host.available = 9 * 2**30  # under a tenth
    watch.check()
    assert reports["baseline"] == []
    assert reports["candidate"] == [
        "it held 5.00 GiB of the host's memory (its baseline 3.00 GiB) while the host ran short "
        "(9.00 GiB of 100.00 GiB available)"]
    summary = watch.stop()
    assert summary["host_short"] is True and summary["least_available_bytes"] == 9 * 2**30


def test_a_short_host_spares_a_candidate_no_heavier_than_its_baseline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The control: the same shortage, a candidate within the slack of its baseline, and a
    # baseline far heavier than both (the task's own size is never the candidate's fault).
    held = {1: 7 * 2**30, 2: 7 * 2**30 + memory_watch.SLACK}
    host = FakeHost(monkeypatch, held)
    host.available = 2**30
    reports: list[str] = []
    watch = memory_watch.MemoryWatch(limit=8 * 2**30, period=3600, host=host)
    watch.watch("baseline", roots=lambda: [1], over=reports.append)
    watch.watch("candidate", roots=lambda: [2], over=reports.append)
    for _ in range(3):
        watch.check()
    assert reports == []
    assert watch.stop()["host_short"] is True


def test_sides_are_measured_only_when_they_may_be_over(monkeypatch: pytest.MonkeyPatch) -> None:
    held = {1: 2**30}
    host = FakeHost(monkeypatch, held)
    reports: list[str] = []
    watch = memory_watch.MemoryWatch(limit=4 * 2**30, period=3600, host=host)
    watch.watch("candidate", roots=lambda: [1], over=reports.append)
    watch.check()
    host.available -= 2 * 2**30  # it may have grown by 2 GiB: 3 GiB, not over
    watch.check()
    assert host.measured == [1]
    host.available -= 2 * 2**30  # 4 GiB fallen: it may be over
    held[1] = 5 * 2**30
    watch.check()
    assert host.measured == [1, 1] and len(reports) == 1


def test_freed_memory_elsewhere_hides_growth_for_one_measure_period_at_most(
        monkeypatch: pytest.MonkeyPatch) -> None:
    held = {1: 2**30}
    host = FakeHost(monkeypatch, held)
    reports: list[str] = []
    watch = memory_watch.MemoryWatch(limit=4 * 2**30, period=3600, host=host)
    watch.watch("candidate", roots=lambda: [1], over=reports.append)
    watch.check()
    held[1] = 6 * 2**30  # grown while a colluder freed as much: the available memory holds
    watch.check()
    assert reports == []
    monkeypatch.setattr(memory_watch, "MEASURE_EVERY_S", 0.0)
    watch.check()
    assert len(reports) == 1


def test_no_meminfo_measures_by_time_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    held = {1: 2**30}
    FakeHost(monkeypatch, held)

    def no_meminfo() -> tuple[int, int]:
        raise OSError("no /proc/meminfo")

    watch = memory_watch.MemoryWatch(limit=4 * 2**30, period=3600, host=no_meminfo)
    watch.watch("candidate", roots=lambda: [1], over=lambda message: None)
    watch.check()
    watch.check()
    assert watch.measures == 1
    monkeypatch.setattr(memory_watch, "MEASURE_EVERY_S", 0.0)
    time.sleep(0.001)
    watch.check()
    assert watch.measures == 2
