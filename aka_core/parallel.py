"""Parallel execution on one host: a run's tasks spread over worker processes, one per GPU slot.

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

**Workers are subprocesses** (``python -m aka_core.parallel worker RUN_DIR WORKER --parent PID``),
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

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import structlog

from aka_core.convert import structure, unstructure
from aka_core.errors import AkaError, ConfigError, Problem
from aka_core.host import PluginHost
from aka_core.lifecycle import now_iso
from aka_core.models import ResourcesConfig, RunConfig, TaskResult
from aka_core.results import read_task_result, task_result_path, write_task_result
from aka_core.yamlio import line_of, load_yaml

log = structlog.get_logger("aka.parallel")

QUEUE_DIR = ".queue"
VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
MAX_TASK_ATTEMPTS = 3
"""Worker deaths one task may cause in one run before it is recorded as an error."""
MAX_IDLE_FAILURES = 3
"""Failures of a slot's worker while it held no task (it cannot start) before the slot retires."""
POLL_SECONDS = 0.2
STOP_GRACE_SECONDS = 5.0

# --------------------------------------------------------------------------- slots and devices


@attrs.frozen(kw_only=True)
class Slot:
    """One worker's place: its id and the GPU ids it sees (empty: whatever aka sees)."""

    worker: int
    devices: tuple[int, ...] = ()


def plan_slots(resources: ResourcesConfig) -> list[Slot]:
    """Workers in round-robin order over the GPUs or groups, so the first ones use distinct GPUs."""
    groups: list[tuple[int, ...]] = (
        [tuple(g) for g in resources.gpu_groups] if resources.gpu_groups
        else [(g,) for g in resources.gpus] if resources.gpus else [()])
    count = len(groups) * resources.workers_per_gpu
    return [Slot(worker=i, devices=groups[i % len(groups)]) for i in range(count)]


def needs_workers(config: RunConfig) -> bool:
    """Whether a run goes through worker processes: with the local executor, whenever the
    resources name more than one slot or restrict the one slot to some GPUs (a single listed GPU
    must be honoured too, which a serial run in this process could not do)."""
    slots = plan_slots(config.resources)
    return config.executor.name == "local" and (len(slots) > 1 or bool(slots[0].devices))


def resolve_vendor(resources: ResourcesConfig, gpu: Mapping[str, Any] | None) -> str:
    """``nvidia`` or ``amd``; ``none`` on a host without a GPU (every variable is set then)."""
    if resources.vendor != "auto":
        return resources.vendor
    vendor = str((gpu or {}).get("vendor") or "none")
    return vendor if vendor in ("nvidia", "amd") else "none"


def visibility_environment(devices: Sequence[int], vendor: str,
                           environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that restrict a worker to ``devices``.

    Ids count the GPUs aka itself sees, so they are translated through the visibility list aka
    was started with (under Slurm, GPU 0 of the config is the allocation's first GPU, never the
    host's). On AMD, ``ROCR_VISIBLE_DEVICES`` selects the devices and HIP/CUDA_VISIBLE_DEVICES
    count within that selection; on a host without a GPU nothing reads them, but agents and
    tests still see which slot they are in.
    """
    if not devices:
        return {}
    if vendor == "nvidia":
        return {"CUDA_VISIBLE_DEVICES": _select(devices, _split(environ.get("CUDA_VISIBLE_DEVICES")))}
    if vendor == "amd":
        local = ",".join(str(i) for i in range(len(devices)))
        return {"ROCR_VISIBLE_DEVICES": _select(devices, _amd_visible(environ)),
                "HIP_VISIBLE_DEVICES": local, "CUDA_VISIBLE_DEVICES": local}
    return dict.fromkeys(VISIBILITY_VARIABLES, ",".join(str(i) for i in devices))


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def _amd_visible(environ: Mapping[str, str]) -> list[str] | None:
    """The devices aka sees on AMD: ROCR's selection, then HIP's indices within it."""
    rocr = _split(environ.get("ROCR_VISIBLE_DEVICES"))
    hip = _split(environ.get("HIP_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES")))
    if hip is None or rocr is None:
        return hip if rocr is None else rocr
    try:
        return [rocr[int(h)] for h in hip]
    except (ValueError, IndexError):
        raise ConfigError("cannot combine ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES of this "
                          "process into one device list; set only ROCR_VISIBLE_DEVICES") from None


def _select(devices: Sequence[int], visible: list[str] | None) -> str:
    if visible is None:
        return ",".join(str(i) for i in devices)
    missing = [i for i in devices if i >= len(visible)]
    if missing:
        raise ConfigError(f"resources name GPU id(s) {missing}, but this process sees only "
                          f"{len(visible)} GPU(s) ({','.join(visible)}): ids count those GPUs")
    return ",".join(visible[i] for i in devices)


def resource_problems(resources: ResourcesConfig, file: Path | None, source: Any) -> list[Problem]:
    """What the schema cannot say: gpus and gpu_groups together, an id in two groups."""
    where = ["resources", "gpu_groups"]
    if resources.gpus is not None and resources.gpu_groups is not None:
        return [Problem("gpus and gpu_groups are mutually exclusive", file=file,
                        line=line_of(source, where), field="resources",
                        hint="keep one: gpus: [0, 1] gives each worker one GPU, "
                             "gpu_groups: [[0, 1], [2, 3]] gives each worker a group")]
    seen: dict[int, int] = {}
    problems = []
    for index, group in enumerate(resources.gpu_groups or ()):
        for gpu in group:
            if gpu in seen:
                problems.append(Problem(
                    f"GPU {gpu} is already in group {seen[gpu]}", file=file,
                    line=line_of(source, [*where, index]), field=f"resources.gpu_groups[{index}]",
                    hint="each GPU may belong to one group only"))
            seen.setdefault(gpu, index)
    return problems


def missing_gpu_problems(resources: ResourcesConfig, count: int, file: Path | None) -> list[Problem]:
    """GPU ids that this host does not have (``count`` GPUs visible to aka)."""
    key = "gpu_groups" if resources.gpu_groups else "gpus"
    ids = sorted({g for slot in plan_slots(resources) for g in slot.devices})
    missing = [g for g in ids if g >= count]
    if not missing:
        return []
    source = load_yaml(file) if file is not None and file.is_file() else None
    return [Problem(f"GPU id(s) {missing} do not exist: this host shows aka {count} GPU(s), "
                    f"ids 0-{count - 1}", file=file, line=line_of(source, ["resources", key]),
                    field=f"resources.{key}")]


def parallel_record(config: RunConfig, gpu: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What ``run.yaml`` records under ``parallel`` (``None``: a serial run).

    Raises ``ConfigError`` when a slot's devices cannot be made visible from this process.
    """
    if not needs_workers(config):
        return None
    vendor = resolve_vendor(config.resources, gpu)
    slots = plan_slots(config.resources)
    for slot in slots:
        visibility_environment(slot.devices, vendor, os.environ)
    return {"vendor": vendor, "slots": [unstructure(s) for s in slots]}


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


# --------------------------------------------------------------------------- the worker


def worker_main(run_dir: Path, worker: int, parent: int) -> int:
    """Claim and run tasks until none is left; stdout and stderr are the worker's log file."""
    from aka_core.evaluation.evaluate import die_with_parent  # one implementation of the guard
    from aka_core.logging_setup import bind_context, configure_logging
    from aka_core.run import read_run_file, run_one_task  # run.py dispatches here: no cycle

    guard = die_with_parent(parent)
    if guard is not None:
        guard()
    meta = read_run_file(run_dir)
    slot = structure(meta["parallel"]["slots"][worker], Slot)
    configure_logging(json_output=True, force=True)
    bind_context(run=run_dir.name, worker=worker, devices=describe(slot.devices))
    log.info("worker started", pid=os.getpid(),
             visible={k: os.environ[k] for k in VISIBILITY_VARIABLES if k in os.environ})
    host, queue = PluginHost(), TaskQueue(run_dir)
    finished = 0
    while (task_id := claim_next(queue, run_dir, meta["task_ids"], worker)) is not None:
        log.info("task claimed", task=task_id)
        result = run_one_task(run_dir, task_id, host)
        finished += 1
        log.info("task finished", task=task_id, status=result.status, score=result.score)
    log.info("nothing left to claim; worker exits", tasks=finished)
    return 0


def describe(devices: Sequence[int]) -> str:
    return ",".join(str(d) for d in devices) or "all"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aka_core.parallel")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("worker", help="claim and run tasks of a run (started by `aka run`)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("worker", type=int)
    p.add_argument("--parent", type=int, required=True, help="pid whose death ends this worker")
    args = parser.parse_args(argv)
    from aka_core.interrupt import EXIT_SIGTERM, Interrupted, install_sigterm_handler

    # The parent stops a worker with SIGTERM: the worker then stops its agent CLI (which has a
    # session of its own) and records the interrupted task before it exits.
    install_sigterm_handler()
    try:
        return worker_main(args.run_dir.resolve(), args.worker, args.parent)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole group; the parent reports it
        return 130
    except Interrupted:
        return EXIT_SIGTERM


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
class _Watch:
    """What the parent has seen, so that each event is reported (and each death counted) once."""

    started: dict[str, Claim] = attrs.Factory(dict)
    finished: set[str] = attrs.Factory(set)
    deaths: dict[str, int] = attrs.Factory(dict)
    dead_holders: set[int] = attrs.Factory(set)
    """Pids of workers that died holding a task: that task's attempt, not the slot, failed."""


OnStarted = Callable[[str, Claim], None]
OnFinished = Callable[[str, TaskResult], None]


def _failed(worker: _Worker) -> bool:
    return worker.process is not None and worker.process.returncode not in (0, None)


class ParallelRun:
    """The parent: starts a worker per slot, watches claims and results, reclaims, restarts."""

    def __init__(self, run_dir: Path, meta: Mapping[str, Any], tasks: Sequence[str],
                 host: PluginHost, on_started: OnStarted, on_finished: OnFinished):
        self.run_dir = run_dir
        self.task_ids = list(tasks)
        """The tasks this run still had to do; those already done are not watched."""
        self.vendor: str = meta["parallel"]["vendor"]
        self.workers = [_Worker(structure(s, Slot)) for s in meta["parallel"]["slots"]]
        self.log_dir = run_dir / meta["config"].get("log_directory", "logs")
        self.host, self.on_started, self.on_finished = host, on_started, on_finished
        self.queue = TaskQueue(run_dir)
        self.watch = _Watch()

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
        from aka_core.run import set_aside_interrupted  # run.py dispatches here: no cycle

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
                self.on_started(task_id, claim)

    def _finished(self, task_id: str) -> None:
        try:
            result = read_task_result(task_result_path(self.run_dir, task_id))
        except AkaError as exc:  # never fatal: the reports show the task without a result
            log.warning("unreadable task result", task=task_id, error=str(exc))
            result = TaskResult(task_id=task_id, status="error", error=str(exc))
        self.watch.finished.add(task_id)
        self.on_finished(task_id, result)

    def reclaim(self) -> None:
        """Release every pending task whose worker is gone, so that another worker redoes it."""
        from aka_core.run import set_aside_interrupted  # run.py dispatches here: no cycle

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
        self.host.notify("aka_after_task", run_dir=self.run_dir, result=result)

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
                [sys.executable, "-m", "aka_core.parallel", "worker", str(self.run_dir),
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


def run_parallel(run_dir: Path, meta: Mapping[str, Any], pending: Sequence[str], host: PluginHost,
                 on_started: OnStarted, on_finished: OnFinished) -> None:
    """Run the ``pending`` tasks of ``run_dir`` in workers over the slots recorded in run.yaml."""
    ParallelRun(run_dir, meta, pending, host, on_started, on_finished).run()


if __name__ == "__main__":
    sys.exit(main())
