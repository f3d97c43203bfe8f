"""Parallel execution on one host: a run's tasks spread over worker processes, one per GPU slot.

This is the machinery of the builtin ``local-parallel`` executor (``aka_core.builtin.executors``), which
a run gets when its config names the ``local`` executor and GPUs in ``resources``.

**Slots.** ``resources.gpus: [0, 1]`` makes one slot per GPU, ``resources.gpu_groups: [[0, 1],
[2, 3]]`` one per group; each slot gets ``workers_per_gpu`` workers. A worker sees only its slot's
devices through the visibility variables (``CUDA_VISIBLE_DEVICES`` on NVIDIA;
``ROCR_VISIBLE_DEVICES`` on AMD), which its agent and evaluation worker inherit. Agents (CPU and
network bound) overlap freely; the evaluator's per-GPU lock keeps checks and timing exclusive.

**Queue.** ``<run>/.queue/claims/<task id>.json`` is a claim: created atomically by the worker
that takes the task and holding its worker id, pid, the pid's start time, host and start time.
A claim is never removed when its task finishes: claim plus ``task_result.yaml`` means done.
A claim is created by hard-linking a fully written temporary file: like ``O_CREAT | O_EXCL`` it
fails when the claim exists, and in addition no reader ever sees a half-written claim (a claimer
killed between creating and writing would otherwise leave an empty claim that looks alive).

**Reclaim.** Only the parent reclaims, so reclaims never race. A claim without a result whose
process is gone (``os.kill(pid, 0)`` fails, its ``/proc`` state is Z, or the pid now belongs to a
process started later) is released: the interrupted task folder is set aside under
``.interrupted/`` exactly as a resume does, the claim moves to ``.queue/reclaimed/`` (kept as a
record), and the slot's worker is restarted so that the run completes. A task whose worker dies
``MAX_TASK_ATTEMPTS`` times in one run gets an error result instead of a fourth attempt.

**Workers are subprocesses** (``python -m aka_core.builtin.worker RUN_DIR WORKER --parent PID``),
not a ``multiprocessing`` pool: a worker rebuilds everything from ``run.yaml`` exactly as
``aka run-task`` does, so nothing crosses a pickle boundary and a worker behaves the same on a
first run and on a resume; the visibility variables are in its environment before any library
reads them; the pid in a claim is the process running that task, so SIGKILL loses only its
current task attempt; and there is no pool, pipe or semaphore whose owner can die holding it.
Workers share ``aka``'s process group (Ctrl-C and a kill of the group reach them) and die with
their parent (``PR_SET_PDEATHSIG``); SIGTERM (what ``stop`` sends) makes a worker stop its agent
CLI and record its interrupted task before it exits (``aka_core.interrupt``). Each writes
JSON-line logs to ``<log_directory>/worker-N.log`` with its worker id and devices on every line;
the parent draws the progress and writes reports.

Workers load the installed plugins (a fresh ``PluginHost``), like ``aka run-task``; plugins
registered only in the calling process are not seen by them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import attrs
import structlog

from aka_core.convert import structure, unstructure
from aka_core.errors import AkaError
from aka_core.models import TaskResult
from aka_core.run.resources import (  # noqa: F401 (re-exported: slots were planned here)
    VISIBILITY_VARIABLES,
    Slot,
    describe,
    missing_gpu_problems,
    needs_workers,
    parallel_record,
    plan_slots,
    resolve_vendor,
    resource_problems,
    visibility_environment,
)
from aka_core.run.results import (
    now_iso,
    set_aside_interrupted,
    task_result_path,
    write_task_result,
)

if TYPE_CHECKING:
    from aka_core.plugin.records import Run

log = structlog.get_logger("aka.parallel")

QUEUE_DIR = ".queue"
MAX_TASK_ATTEMPTS = 3
"""Worker deaths one task may cause in one run before it is recorded as an error."""
MAX_IDLE_FAILURES = 3
"""Failures of a slot's worker while it held no task (it cannot start) before the slot retires."""
POLL_SECONDS = 0.2
STOP_GRACE_SECONDS = 5.0

# --------------------------------------------------------------------------- processes


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) from /proc, or None where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _start_time(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def process_alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` still runs and is the process that was started at ``started``.

    The start time guards against pid reuse: after a reboot or a long run the pid of a dead
    worker may belong to an unrelated process.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: os.kill is all we can ask
    state, start = stat
    return state not in ("Z", "X") and (started is None or start == started)


# --------------------------------------------------------------------------- the queue


@attrs.frozen(kw_only=True)
class Claim:
    task_id: str
    worker: int
    pid: int
    pid_started: int | None
    host: str
    started_at: str

    def is_dead(self) -> bool:
        """Liveness can be checked on this host only; a claim from another host belongs to a run
        driven from there, which is over when this host resumes it."""
        return self.host != socket.gethostname() or not process_alive(self.pid, self.pid_started)


class TaskQueue:
    """Claims in ``<run>/.queue/``: ``claims/`` (held or done), ``reclaimed/`` (released)."""

    def __init__(self, run_dir: Path):
        self.root = run_dir / QUEUE_DIR
        self.claims_dir = self.root / "claims"
        self.reclaimed_dir = self.root / "reclaimed"
        self.tmp_dir = self.root / "tmp"
        for folder in (self.claims_dir, self.reclaimed_dir, self.tmp_dir):
            folder.mkdir(parents=True, exist_ok=True)

    def claim_path(self, task_id: str) -> Path:
        return self.claims_dir / f"{quote(task_id, safe='')}.json"

    def claim(self, task_id: str, worker: int) -> Claim | None:
        """Take ``task_id`` for ``worker`` (this process); ``None`` when it is already claimed."""
        pid = os.getpid()
        claim = Claim(task_id=task_id, worker=worker, pid=pid,
                      pid_started=_start_time(pid),
                      host=socket.gethostname(), started_at=now_iso())
        tmp = self.tmp_dir / f"{worker}-{pid}-{uuid.uuid4().hex}.json"
        tmp.write_text(json.dumps(unstructure(claim)), encoding="utf-8")
        try:
            os.link(tmp, self.claim_path(task_id))
        except FileExistsError:
            return None
        finally:
            tmp.unlink(missing_ok=True)
        return claim

    def read(self, task_id: str) -> Claim | None:
        try:
            return structure(json.loads(self.claim_path(task_id).read_text(encoding="utf-8")),
                             Claim)
        except FileNotFoundError:
            return None

    def release(self, claim: Claim) -> Path:
        """Make the task claimable again; the claim is kept under ``reclaimed/``."""
        stamp = time.strftime("%Y%m%d_%H%M%S") + f"_{uuid.uuid4().hex[:6]}"
        dest = self.reclaimed_dir / f"{stamp}_{self.claim_path(claim.task_id).name}"
        os.replace(self.claim_path(claim.task_id), dest)
        return dest


def has_result(run_dir: Path, task_id: str) -> bool:
    """Results are written atomically, so a file that exists is a whole result."""
    return task_result_path(run_dir, task_id).is_file()


def claim_next(queue: TaskQueue, run_dir: Path, task_ids: Sequence[str], worker: int) -> str | None:
    """The first task, in run order, with no result and no claim, now claimed by ``worker``."""
    for task_id in task_ids:
        if has_result(run_dir, task_id) or queue.claim_path(task_id).exists():
            continue
        if queue.claim(task_id, worker) is not None:
            return task_id
    return None


# --------------------------------------------------------------------------- the parent


@attrs.define
class _Worker:
    slot: Slot
    process: subprocess.Popen[bytes] | None = None
    idle_failures: int = 0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def retired(self) -> bool:
        return self.idle_failures >= MAX_IDLE_FAILURES


@attrs.define
class _WorkerEvents:
    """What the parent has seen, so that each event is reported (and each death counted) once."""

    started: dict[str, Claim] = attrs.Factory(dict)
    finished: set[str] = attrs.Factory(set)
    deaths: dict[str, int] = attrs.Factory(dict)
    dead_holders: set[int] = attrs.Factory(set)
    """Pids of workers that died holding a task: that task's attempt, not the slot, failed."""


def _failed(worker: _Worker) -> bool:
    return worker.process is not None and worker.process.returncode not in (0, None)


class ParallelRun:
    """The parent: starts a worker per slot, watches claims and results, reclaims, restarts."""

    def __init__(self, run: Run):
        self.handle = run
        self.run_dir = run.run_dir
        self.task_ids = list(run.task_ids)
        """The tasks this run still had to do; those already done are not watched."""
        plan = run.meta["parallel"]  # planned and checked when the run was created
        self.vendor: str = plan["vendor"]
        self.workers = [_Worker(structure(s, Slot)) for s in plan["slots"]]
        self.log_dir = run.run_dir / run.config.log_directory
        self.queue = TaskQueue(run.run_dir)
        self.watch = _WorkerEvents()

    def run(self) -> None:
        """Return when every task has a result; on any exit, no worker is left running."""
        self.take_over()
        try:
            while self.pending():
                self.report_progress()
                self.reclaim()
                self.start_needed_workers()
                time.sleep(POLL_SECONDS)
            self.report_progress()
        finally:
            self.stop()

    def pending(self) -> list[str]:
        return [t for t in self.task_ids if not has_result(self.run_dir, t)]

    def take_over(self) -> None:
        """Before any worker starts: set aside what an interrupted run left of the tasks
        (exactly as a serial resume does) and release their claims, unless a live worker still
        holds one."""
        for task_id in self.task_ids:
            claim = self.queue.read(task_id)
            if claim is not None and not claim.is_dead():
                log.warning("task still held by a live worker", task=task_id, pid=claim.pid)
                continue
            set_aside_interrupted(self.run_dir, task_id)
            if claim is not None:
                self.queue.release(claim)

    def report_progress(self) -> None:
        for task_id in self.task_ids:
            if task_id in self.watch.finished:
                continue
            if has_result(self.run_dir, task_id):
                self._finished(task_id)
                continue
            claim = self.queue.read(task_id)
            if claim is not None and self.watch.started.get(task_id) != claim:
                self.watch.started[task_id] = claim
                log.info("task started", task=task_id, worker=claim.worker, pid=claim.pid)
                self.handle.task_started(task_id)

    def _finished(self, task_id: str) -> None:
        self.watch.finished.add(task_id)
        result = self.handle.task_finished(task_id)
        if result is not None:
            log.info("task finished", task=task_id, status=result.status, score=result.score)

    def reclaim(self) -> None:
        """Release every pending task whose worker is gone, so that another worker redoes it."""
        for task_id in self.pending():
            claim = self.queue.read(task_id)
            if claim is None or not claim.is_dead() or has_result(self.run_dir, task_id):
                continue
            set_aside_interrupted(self.run_dir, task_id)
            self.watch.dead_holders.add(claim.pid)
            deaths = self.watch.deaths[task_id] = self.watch.deaths.get(task_id, 0) + 1
            if deaths >= MAX_TASK_ATTEMPTS:
                self._give_up(claim, deaths)
                continue
            moved = self.queue.release(claim)
            log.warning("reclaimed a task from a worker that is gone", task=task_id,
                        worker=claim.worker, pid=claim.pid, claim=str(moved))

    def _give_up(self, claim: Claim, deaths: int) -> None:
        """The claim stays (claim plus result: done), so no worker takes the task again."""
        result = TaskResult(
            task_id=claim.task_id, status="error", started_at=claim.started_at,
            finished_at=now_iso(),
            error=f"the worker running this task died during each of {deaths} attempts (last: "
                  f"worker {claim.worker}, pid {claim.pid}); the attempts are kept under "
                  ".interrupted/")
        write_task_result(self.run_dir, result)
        log.error("task abandoned after repeated worker deaths", task=claim.task_id,
                  attempts=deaths)
        self.handle.host.notify("aka_after_task", run_dir=self.run_dir, result=result)

    def start_needed_workers(self) -> None:
        """Start workers on stopped slots for pending tasks that nobody has claimed, less the
        running workers that hold no pending task (they are about to claim one)."""
        pending = self.pending()
        claims = [c for c in (self.queue.read(t) for t in pending) if c is not None]
        holders = {c.pid for c in claims}
        idle = sum(1 for w in self.workers
                   if w.running and w.process is not None and w.process.pid not in holders)
        needed = len(pending) - len(claims) - idle
        # A slot whose worker died gets the work first: its devices are free.
        for worker in sorted(self.workers, key=lambda w: not _failed(w)):
            if needed <= 0:
                return
            if worker.running or worker.retired:
                continue
            self._account_exit(worker)
            if not worker.retired:
                self.start(worker)
                needed -= 1
        if needed > 0 and all(w.retired for w in self.workers):
            raise AkaError(f"every worker failed to start (see {self.log_dir}/worker-*.log); "
                           "fix the cause and finish the run with `aka run --resume RUN_DIR`")

    def _account_exit(self, worker: _Worker) -> None:
        """A worker that failed while holding no task could not start: count it for its slot."""
        if worker.process is None:
            return
        code, pid = worker.process.returncode, worker.process.pid
        if code != 0 and pid not in self.watch.dead_holders:
            worker.idle_failures += 1
            log.error("worker failed without a task", worker=worker.slot.worker, exit_code=code,
                      failures=worker.idle_failures)
        worker.process = None

    def start(self, worker: _Worker) -> None:
        slot = worker.slot
        env = {**os.environ, **visibility_environment(slot.devices, self.vendor, os.environ)}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"worker-{slot.worker}.log"
        with log_path.open("ab") as out:  # the child keeps its own descriptor
            worker.process = subprocess.Popen(
                [sys.executable, "-m", "aka_core.builtin.worker", str(self.run_dir),
                 str(slot.worker), "--parent", str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        log.info("worker started", worker=slot.worker, devices=describe(slot.devices),
                 pid=worker.process.pid, log=str(log_path))

    def stop(self) -> None:
        """Terminate workers still running (after Ctrl-C or an error); the next resume reclaims
        their tasks."""
        running = [w.process for w in self.workers if w.process is not None and w.running]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
