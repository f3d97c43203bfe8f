"""The reward service's slots: each takes the next queued request and evaluates it in a fresh
process (``job``), one at a time.

A slot is a place an evaluation may run: ``gpu:<index>#<k>`` (``CUDA_VISIBLE_DEVICES`` set to
the GPU) or ``cpu#<k>``. Several slots per GPU form its pipeline: while one evaluation holds the
GPU (the judge's GPU lock, taken before any side's code is imported, keeps checks and timing
exclusive), the others start their processes and wait. Each evaluation is a process of its own,
used once (isolation), that dies with the service; cancelling a request kills it. A request's
deadline is for starting: one not started by then expires, one started runs to its verdict
(the task's own timeouts bound it; a deadline that cut it would turn a candidate that hangs into
an expired request, a dropped sample, instead of its zero). An evaluation that fails for the
evaluator's reasons is queued again (``store.retry``), after a short wait that grows with its
attempts.

Each request's files wait in a folder of the spool named by a digest of its id (any id is a safe
name), from before its row is committed until it is judged; a request that ends otherwise
(cancelled, expired, forgotten) has its folder removed, and ``sweep`` removes what a stopped
service left.

With ``prestart`` each slot keeps its next evaluation's process started and waiting: the
evaluator imported, a judge with PyTorch imported and its two runners confined and waiting
(``evaluation.warm``), so a request starts where the imports end. It is still one process tree per
evaluation, used once; the judge uses the waiting runners only where their sandbox is the one the
request's would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from aka_core.evaluation import holder_cpus
from aka_core.evaluation.evaluate import die_with_parent
from aka_core.service import outcome
from aka_core.service.store import Request, RequestStore

IDLE_POLL_SECONDS = 0.5
DEFAULT_EVALUATION_SECONDS = 3600.0


@attrs.frozen
class Slot:
    name: str
    env: dict[str, str] = attrs.Factory(dict)
    device: str = "auto"
    cpus: frozenset[int] | None = None
    """The CPUs its evaluations start on (None: the service's own)."""


def make_slots(*, gpus: list[int] | None, per_gpu: int, cpu_workers: int,
               cpu_plan: holder_cpus.CpuPlan | None = None) -> list[Slot]:
    """``per_gpu`` slots on each GPU of ``gpus``; ``cpu_workers`` CPU slots when there are none.
    With ``cpu_plan`` every GPU slot's evaluations start on its waiting CPUs and hold the GPU on
    their GPU's holder CPUs (``holder_cpus``)."""
    if gpus:
        slots = []
        for g in gpus:
            env = {"CUDA_VISIBLE_DEVICES": str(g)}
            if cpu_plan is not None:
                env[holder_cpus.ENV] = holder_cpus.format_list(cpu_plan.holders[g])
            slots += [Slot(f"gpu:{g}#{k}", env, "cuda",
                           cpu_plan.waiting if cpu_plan is not None else None)
                      for k in range(per_gpu)]
        return slots
    return [Slot(f"cpu#{k}", {"CUDA_VISIBLE_DEVICES": ""}, "cpu") for k in range(cpu_workers)]


def _preexec(slot: Slot) -> Any:
    """Die with the service; start on the slot's CPUs."""
    die = die_with_parent(os.getpid())
    cpus = slot.cpus

    def preexec() -> None:
        if die is not None:
            die()
        if cpus is not None:
            with contextlib.suppress(OSError):  # a CPU taken offline since: the service's CPUs
                os.sched_setaffinity(0, cpus)

    return preexec


class Scheduler:
    def __init__(self, store: RequestStore, slots: list[Slot], spool: Path, *,
                 evaluator: str | None = None, evaluation_seconds: float = DEFAULT_EVALUATION_SECONDS,
                 python: str = sys.executable, prestart: tuple[str, ...] | None = None):
        """``prestart``: keep each slot's next evaluation started, its runners confined away from
        these folders (the tasks folder and the service's state: what every request protects);
        None: start each evaluation when its request comes."""
        self.store = store
        self.slots = slots
        self.spool = spool
        self.evaluator = evaluator
        self.evaluation_seconds = evaluation_seconds
        self.python = python
        self.running: dict[str, asyncio.subprocess.Process] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.stopping = False
        self.draining = False
        self.completed = 0
        self.prestart = prestart
        self.standby: dict[str, tuple[asyncio.subprocess.Process, Path]] = {}
        self._standby_count = 0

    def folder(self, request_id: str) -> Path:
        """The folder of a request's files (its candidate, its job's spec, log and result)."""
        return self.spool / ("r-" + hashlib.sha256(request_id.encode()).hexdigest()[:32])

    def sweep(self) -> int:
        """Remove the spool's folders no request needs (those of requests judged, cancelled,
        expired or forgotten; stagings a stopped service left), keeping those of requests still
        queued or running and of those that ended as the evaluator's failure (their logs say
        why). Returns how many."""
        keep = {self.folder(request_id).name for request_id in self.store.ids_with_files()}
        removed = 0
        for entry in self.spool.iterdir() if self.spool.is_dir() else []:
            if entry.name == "_standby" or entry.name in keep:
                continue
            if entry.name.startswith(("r-", ".in-")):
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
        return removed

    def _forget_files(self, request_ids: list[str]) -> None:
        for request_id in request_ids:
            if request_id not in self.running:
                shutil.rmtree(self.folder(request_id), ignore_errors=True)
            self.notify(request_id)

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        self.sweep()
        recovered = self.store.recover()
        for request_id in recovered:
            self.notify(request_id)
        self._tasks = [asyncio.create_task(self._worker(slot), name=slot.name)
                       for slot in self.slots]
        self._tasks.append(asyncio.create_task(self._expire(), name="expire"))

    async def _expire(self) -> None:
        """Queued requests expire when their deadline passes, also while every slot is busy."""
        while not self.stopping:
            self._forget_files(self.store.expire())
            await asyncio.sleep(IDLE_POLL_SECONDS)

    async def stop(self) -> None:
        """Stop taking requests; evaluations in progress are killed and queued again (the next
        start of the service runs them)."""
        self.stopping = True
        self._wake.set()
        for proc in list(self.running.values()):
            _kill(proc)
        for proc, _ in self.standby.values():
            _kill(proc)
        self.standby = {}
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ waiting
    def notify(self, request_id: str) -> None:
        event = self._events.pop(request_id, None)
        if event is not None:
            event.set()

    def submitted(self) -> None:
        self._wake.set()

    def release_waiters(self) -> None:
        """The service is shutting down: every long poll answers now with the request as it
        is (the client polls again, and finds the service restarted or gone), instead of being
        cut off mid-request by the server's shutdown."""
        self.draining = True
        for request_id in list(self._events):
            self.notify(request_id)

    async def wait(self, request_id: str, timeout: float) -> Request | None:
        """The request once terminal, or as it is after ``timeout`` seconds (or at shutdown)."""
        deadline = time.monotonic() + timeout
        while True:
            request = self.store.get(request_id)
            if request is None or request.terminal:
                return request
            left = deadline - time.monotonic()
            if left <= 0 or self.draining:
                return request
            event = self._events.setdefault(request_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(left, 5.0))

    def cancel(self, request_id: str) -> Request | None:
        request = self.store.cancel(request_id)
        proc = self.running.get(request_id)
        if proc is not None:
            _kill(proc)  # its folder goes once the evaluation has ended (``_evaluate``)
        elif request is not None and request.state == "cancelled":
            shutil.rmtree(self.folder(request_id), ignore_errors=True)
        self.notify(request_id)
        return request

    # ------------------------------------------------------------------ the slots
    async def _start_standby(self, slot: Slot) -> None:
        """The slot's next evaluation process, started and waiting for its spec. Only ever a head
        start: where it cannot be started, the next request starts its own process."""
        if self.prestart is None or slot.device not in ("cuda", "cpu") or self.stopping:
            return
        try:
            await self._spawn_standby(slot)
        except Exception as exc:  # a missed head start is not a fault
            print(f"aka serve: slot {slot.name}: no evaluation started ahead ({exc})",
                  file=sys.stderr, flush=True)

    async def _spawn_standby(self, slot: Slot) -> None:
        from aka_core.evaluation.warm import WarmProfile

        profile = WarmProfile(device=slot.device, confinement="required",
                              protected=self.prestart)
        folder = self.spool / "_standby"
        folder.mkdir(parents=True, exist_ok=True)
        self._standby_count += 1
        log_path = folder / f"{slot.name.replace(':', '-').replace('#', '-')}-{self._standby_count}.log"
        env = {**os.environ, **slot.env, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "wb") as log:
            proc = await asyncio.create_subprocess_exec(
                self.python, "-m", "aka_core.service.job", "--warm", json.dumps(profile.to_json()),
                stdin=asyncio.subprocess.PIPE, stdout=log, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True, env=env, preexec_fn=_preexec(slot))
        self.standby[slot.name] = (proc, log_path)

    async def _take_standby(self, slot: Slot, spec_path: Path
                            ) -> tuple[asyncio.subprocess.Process, Path] | None:
        """The slot's waiting process, handed ``spec_path``; None where it is not there or gone."""
        entry = self.standby.pop(slot.name, None)
        if entry is None:
            return None
        proc, log_path = entry
        if proc.returncode is None and proc.stdin is not None:
            try:
                proc.stdin.write(f"{spec_path}\n".encode())
                await proc.stdin.drain()
                proc.stdin.close()
                return proc, log_path
            except (BrokenPipeError, ConnectionResetError):
                pass
        _kill(proc)
        with contextlib.suppress(Exception):
            await proc.wait()
        log_path.unlink(missing_ok=True)
        return None

    async def _worker(self, slot: Slot) -> None:
        await self._start_standby(slot)
        while not self.stopping:
            self._forget_files(self.store.expire())
            request = self.store.claim(slot.name)
            if request is None:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)
                continue
            self._wake.set()  # there may be more: let the other slots look
            try:
                await self._evaluate(slot, request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the service's own fault: the request is retried
                self.store.retry(request.id, f"the service failed: {type(exc).__name__}: {exc}")
            self.notify(request.id)

    async def _evaluate(self, slot: Slot, request: Request) -> None:
        folder = self.folder(request.id)
        candidate = folder / "candidate"
        result_path = folder / f"result-{request.attempts}.json"
        with contextlib.suppress(FileNotFoundError):
            result_path.unlink()
        spec = {"task_dir": request.options["task_dir"], "candidate_dir": str(candidate),
                "device": slot.device, "result_path": str(result_path),
                "evaluator": self.evaluator, "held_out_seed": held_out_seed(request.options),
                # Other candidates' files and every result wait in the service's state folder.
                "protect": [str(self.spool.parent)]}
        spec_path = folder / "job.json"
        spec_path.write_text(json.dumps(spec))
        limit = self.evaluation_seconds  # not the request's deadline: that one is for starting
        env = {**os.environ, **slot.env, "PYTHONUNBUFFERED": "1"}
        handed = time.time()
        taken = await self._take_standby(slot, spec_path)
        standby_log = None
        if taken is not None:
            proc, standby_log = taken
        else:
            with open(folder / f"job-{request.attempts}.log", "wb") as log:
                proc = await asyncio.create_subprocess_exec(
                    self.python, "-m", "aka_core.service.job", str(spec_path),
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True, env=env, preexec_fn=_preexec(slot))
        self.running[request.id] = proc
        # Under load (requests waiting) the slot's next evaluation starts now, while this one
        # runs: it has to be ready when this one ends. With none waiting it starts once this one
        # is over (below): its five processes importing PyTorch and making CUDA contexts would
        # compete with this evaluation's checks and timing (single requests to an idle service
        # on an H200: 5.2 s p50 with them, 3.9 s without, that run also with shorter baseline
        # blocks).
        ahead = self.store.queued() > 0
        if ahead:
            await self._start_standby(slot)
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=limit)
        except TimeoutError:
            timed_out = True
            _kill(proc)
            await proc.wait()
        except asyncio.CancelledError:
            _kill(proc)
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
            self.store.retry(request.id, "the service stopped during the evaluation")
            raise
        finally:
            exited = time.time()
            self.running.pop(request.id, None)
            if standby_log is not None:  # its log joins the request's folder, like a job's
                with contextlib.suppress(OSError):
                    os.replace(standby_log, folder / f"job-{request.attempts}.log")
        if not ahead:
            await self._start_standby(slot)
        current = self.store.get(request.id)
        if current is None or current.state != "running":
            shutil.rmtree(folder, ignore_errors=True)  # cancelled meanwhile
            return
        if timed_out:
            self.store.retry(request.id, f"the evaluation ran past {limit:.0f} s")
            return
        try:
            payload = json.loads(result_path.read_text())
        except (OSError, ValueError):
            code = proc.returncode
            how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                   else f"exit status {code}")
            self.store.retry(request.id, f"the evaluation process ended without a result ({how})")
            return
        status, result = outcome.classify(payload)
        if status == outcome.RETRY:
            self.store.retry(request.id, result["message"], result.get("blame_if_repeated"))
            return
        result["timeline"] = timeline(request, payload.get("timeline"), handed=handed,
                                      exited=exited, started_ahead=taken is not None)
        self.store.finish(request.id, status, result)
        self.completed += 1
        # Judged: the record is in the queue's database; the folder (the candidate's files, the
        # job's log) is only kept for requests that end in the evaluator's failure.
        shutil.rmtree(folder, ignore_errors=True)


def held_out_seed(options: dict[str, Any]) -> int | None:
    """The request's held-out draw: the client's, else the request's own secret (the same in
    every attempt: a retry cannot draw shapes anew), else (a queue made before it) a fresh one."""
    given = options.get("held_out_seed")
    return given if given is not None else options.get("draw_seed")


def timeline(request: Request, job: object, *, handed: float, exited: float,
             started_ahead: bool) -> dict[str, float | bool | None]:
    """Where a request's seconds went outside its evaluation's phases (the record has those):
    queued (from submission to a slot), handed (the slot's process given the request: the wait
    for a process started ahead to be ready, or a cold start's imports), evaluation (the
    evaluator's call: the judge's phases and what surrounds them), exit (the process ending)."""
    marks = ({k: float(v) for k, v in job.items() if isinstance(v, int | float)}
             if isinstance(job, dict) else {})

    def span(start: float | None, end: float | None) -> float | None:
        return round(end - start, 4) if start is not None and end is not None else None

    return {"started_ahead": started_ahead,
            "queued_s": span(request.created, request.started),
            "handed_s": span(handed, marks.get("spec_read")),
            "evaluation_s": span(marks.get("spec_read"), marks.get("evaluated")),
            "exit_s": span(marks.get("evaluated"), exited)}


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
