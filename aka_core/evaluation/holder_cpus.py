"""CPUs of their own for the evaluation that holds the GPU.

The reward service runs several evaluations per GPU: one holds the GPU (its checks and timing)
while the others start (PyTorch imported, CUDA contexts made, kernels built). Those starts are
CPU work, and they slowed the holder's own host steps (driver calls, captures, audits), which
are the serial part of the pipeline. So the service splits the host's CPUs (``plan``): a few per
GPU for whichever evaluation holds that GPU, the rest for every evaluation that starts or waits.
Each evaluation process starts on the waiting CPUs; its judge moves itself and every process
below it onto its GPU's CPUs once it holds the lock (``hold``), and back before it lets the lock
go (``let_go``), so that the next holder finds them idle.

The judge learns its GPU's CPUs from ``AKA_GPU_HOLDER_CPUS`` (a Linux CPU list, ``12-15``); the
waiting CPUs are the ones it started on. A process that moves itself elsewhere (candidate code
may call ``sched_setaffinity``) only takes CPU time from evaluations that are not timed, never
from the holder's timing: the GPU lock keeps every other evaluation's candidate code unloaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

ENV = "AKA_GPU_HOLDER_CPUS"
PER_GPU = 4
"""CPUs per GPU for its holder: the judge and the two runners, each with a core to itself, and
one for their threads and the kernel's work on their behalf."""
LEAST_WAITING = 4
"""CPUs left for the starting evaluations, below which no CPU is set aside at all."""


@attrs.frozen
class CpuPlan:
    holders: dict[int, frozenset[int]]
    """GPU index -> the CPUs of the evaluation holding that GPU."""
    waiting: frozenset[int]
    """The CPUs every evaluation starts and waits on."""


def parse(text: str) -> frozenset[int]:
    """A Linux CPU list (``0-3,8,10-11``) as a set; ValueError when it is not one."""
    found: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high) if high else int(low)
        if first < 0 or last < first:
            raise ValueError(f"not a CPU range: {part!r}")
        found.update(range(first, last + 1))
    if not found:
        raise ValueError("an empty CPU list")
    return frozenset(found)


def format_list(cpus: Iterable[int]) -> str:
    """The CPU list form of a set of CPUs (``parse``'s inverse)."""
    ordered = sorted(set(cpus))
    runs: list[str] = []
    start = prev = None
    for cpu in [*ordered, None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(runs)


def physical_cores(cpus: Iterable[int], topology: Path = Path("/sys/devices/system/cpu")
                   ) -> list[list[int]]:
    """``cpus`` grouped by physical core (hyper-threads together), in CPU order; a CPU whose
    topology is unknown is a core of its own."""
    allowed = set(cpus)
    groups: dict[frozenset[int], list[int]] = {}
    for cpu in sorted(allowed):
        try:
            siblings = parse((topology / f"cpu{cpu}" / "topology" / "thread_siblings_list")
                             .read_text())
        except (OSError, ValueError):
            siblings = frozenset({cpu})
        groups.setdefault(frozenset(siblings & allowed) or frozenset({cpu}), []).append(cpu)
    return sorted(groups.values(), key=min)


def plan(gpus: Sequence[int], cpus: Iterable[int] | None = None, per_gpu: int | None = None,
         topology: Path = Path("/sys/devices/system/cpu")) -> CpuPlan | None:
    """Each GPU's holder CPUs, whole physical cores from the highest-numbered down (away from
    CPU 0, where interrupts tend to land), and the rest for waiting; None where nothing is set
    aside (no GPU, ``per_gpu`` 0, or too few CPUs to leave ``LEAST_WAITING`` for the starts).
    ``per_gpu`` None: ``PER_GPU``, fewer where the host has too few."""
    available = sorted(set(os.sched_getaffinity(0) if cpus is None else cpus))
    if not gpus or per_gpu == 0:
        return None
    want = PER_GPU if per_gpu is None else per_gpu
    if per_gpu is None:
        want = min(want, (len(available) - LEAST_WAITING) // len(gpus))
        if want < 2:
            return None
    cores = physical_cores(available, topology)
    holders: dict[int, frozenset[int]] = {}
    for gpu in gpus:
        taken: list[int] = []
        while len(taken) < want and cores:
            taken += cores.pop()
        holders[gpu] = frozenset(taken)
    waiting = frozenset(cpu for core in cores for cpu in core)
    if len(waiting) < (LEAST_WAITING if per_gpu is None else 1) or any(
            len(held) < want for held in holders.values()):
        if per_gpu is None:
            return None
        raise ValueError(f"{len(available)} CPUs cannot give {want} to each of {len(gpus)} "
                         f"GPUs and leave some for the evaluations that start")
    return CpuPlan(holders, waiting)


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []  # gone


def move(pids: Iterable[int], cpus: frozenset[int]) -> tuple[int, int]:
    """Every thread of ``pids`` onto ``cpus``: (threads moved, threads that refused or were
    gone). A thread started later takes its creator's CPUs."""
    moved = failed = 0
    for pid in pids:
        for tid in threads(pid):
            try:
                os.sched_setaffinity(tid, cpus)
                moved += 1
            except OSError:
                failed += 1
    return moved, failed


@attrs.define
class Holding:
    """The judge's tree on its GPU's CPUs (``hold``) until ``let_go``."""

    cpus: frozenset[int]
    before: frozenset[int]
    moved: int = 0
    failed: int = 0

    def record(self) -> dict[str, object]:
        return {"cpus": format_list(self.cpus), "threads_moved": self.moved,
                "threads_refused": self.failed}

    def let_go(self) -> None:
        """The judge's tree back onto the CPUs it started on (the next holder's are its own)."""
        _move_tree(self.before)


def _move_tree(cpus: frozenset[int]) -> tuple[int, int]:
    """This process and everything below it onto ``cpus`` (``move``'s counts)."""
    from aka_core.processes import descendants

    me = os.getpid()
    return move([me, *descendants(me)], cpus)


def hold(environ: dict[str, str] | None = None) -> Holding | None:
    """This process and everything below it onto the CPUs ``AKA_GPU_HOLDER_CPUS`` names; None
    where it names none (or none this process may use)."""
    text = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not text:
        return None
    try:
        cpus = parse(text)
    except ValueError:
        return None  # the service wrote it; a bad list only costs the head start
    before = frozenset(os.sched_getaffinity(0))
    moved, failed = _move_tree(cpus)
    return Holding(cpus, before, moved, failed)
