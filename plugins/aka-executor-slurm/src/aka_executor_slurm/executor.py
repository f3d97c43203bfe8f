"""The ``slurm`` executor: submit each task as a Slurm job, wait for the jobs, report what is missing.

A job runs ``aka run-task RUN_DIR TASK_ID`` on a compute node, which writes the task's result into
the shared run directory exactly as the local executor would. This process only submits, watches
and records: ``<run>/.slurm/jobs.json`` lists every job of the run (all attempts) with its task,
script, log and last known state.

A job that is cancelled, fails or runs out of time leaves its task without ``task_result.yaml``;
the executor says which and returns, the run's reports list the task as missing, and
``aka run --resume RUN_DIR`` submits jobs for those tasks only.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import structlog

from aka_core.plugin import (
    AkaError,
    Run,
    now_iso,
    task_result_path,
    write_json_atomic,
    write_text_atomic,
)
from aka_executor_slurm.batch import SLURM_DIR, array_script, task_script, task_slug
from aka_executor_slurm.commands import FINAL_STATES, SlurmCommandError, SlurmCommands
from aka_executor_slurm.options import SlurmOptions

log = structlog.get_logger("aka.executor.slurm")

JOBS_FILE = "jobs.json"
GONE = "UNKNOWN"
"""State recorded for a job that Slurm no longer reports (purged, and no sacct to ask)."""
MISSES_BEFORE_GONE = 2
OUTAGE_SECONDS = 600.0
"""How long Slurm may fail to answer before the executor gives up waiting (jobs keep running)."""


@attrs.define(kw_only=True)
class Job:
    """One submitted job (or job array element) and the task it runs."""

    job_id: str
    task_id: str
    script: str
    log: str
    submitted_at: str
    state: str = "SUBMITTED"
    ended_at: str | None = None
    has_result: bool | None = None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES or self.state == GONE


class JobLedger:
    """``<run>/.slurm/jobs.json``: every job of the run, oldest first; rewritten atomically."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / SLURM_DIR / JOBS_FILE
        self.jobs: list[Job] = []
        if self.path.is_file():
            known = {a.name for a in attrs.fields(Job)}
            entries = json.loads(self.path.read_text(encoding="utf-8")).get("jobs", [])
            self.jobs = [Job(**{k: v for k, v in e.items() if k in known}) for e in entries]

    def add(self, job: Job) -> None:
        self.jobs.append(job)

    def save(self) -> None:
        write_json_atomic(self.path, {"jobs": [attrs.asdict(j) for j in self.jobs]})


class SlurmExecutor:
    """Runs every task as a Slurm job; see the module docstring and the plugin's README."""

    def __init__(self, options: SlurmOptions, commands: SlurmCommands | None = None):
        self.options = options
        self.commands = commands or SlurmCommands()

    # ----------------------------------------------------------------- the protocol

    def execute(self, run: Run) -> None:
        """Submit a job per task (or one array), wait for all of them, report tasks left
        without a result. ``run.run_task`` is not used: the jobs run ``aka run-task`` instead."""
        task_ids = list(run.task_ids)
        if not task_ids:
            return
        missing = self.commands.available()
        if missing:
            raise AkaError(f"the slurm executor needs Slurm's commands; not on PATH: {missing} "
                           "(run aka on a login node of the cluster)")
        run_dir = run.run_dir.resolve()
        if any(c.isspace() or c == "%" for c in str(run_dir)):
            raise AkaError(f"{run_dir}: the slurm executor needs a run directory path without "
                           "spaces or '%' (Slurm reads '%' in log paths as a pattern)")
        ledger = JobLedger(run_dir)
        pending = self._settle_earlier_jobs(run_dir, ledger, task_ids)
        if not pending:
            return
        watch = _Watch(self, run_dir, run.tasks_root, ledger, run.task_finished)
        try:
            if self.options.array:
                watch.submit_array(pending)
            else:
                watch.queue = list(pending)
            watch.wait()
        except KeyboardInterrupt:
            watch.interrupted()
            raise
        self._report(run_dir, ledger, task_ids)

    # ----------------------------------------------------------------- before and after

    def _settle_earlier_jobs(self, run_dir: Path, ledger: JobLedger,
                             task_ids: list[str]) -> list[str]:
        """Cancel jobs of an earlier attempt that still run one of ``task_ids``.

        The core has already set those tasks' folders aside: a job still running would write
        into a folder that is gone, and two jobs of one task would race. Returns the tasks that
        still need a job (one whose old job finished with a result just now is done).
        """
        wanted = set(task_ids)
        earlier = [j for j in ledger.jobs if j.task_id in wanted and not j.final]
        if earlier:
            states = self._current_states([j.job_id for j in earlier])
            alive = [j for j in earlier if states.get(j.job_id) not in (None, *FINAL_STATES)]
            for job in earlier:
                job.state = states.get(job.job_id, GONE)
            if alive:
                ids = [j.job_id for j in alive]
                log.warning("cancelling jobs of an earlier attempt that still run tasks of this "
                            "resume", jobs=ids, tasks=[j.task_id for j in alive])
                try:
                    self.commands.cancel(ids)
                except SlurmCommandError as exc:
                    raise AkaError(f"cannot cancel earlier jobs {', '.join(ids)}: {exc}") from None
                self._wait_until_ended(alive)
            for job in earlier:
                job.has_result = task_result_path(run_dir, job.task_id).is_file()
                job.ended_at = job.ended_at or now_iso()
            ledger.save()
        return [t for t in task_ids if not task_result_path(run_dir, t).is_file()]

    def _wait_until_ended(self, jobs: Sequence[Job], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self._current_states([j.job_id for j in jobs])
            for job in jobs:
                job.state = states.get(job.job_id, GONE)
            if all(j.final for j in jobs):
                return
            time.sleep(min(self.options.poll_seconds, 2.0))
        raise AkaError(f"jobs {', '.join(j.job_id for j in jobs)} did not end within "
                       f"{timeout:.0f} s of scancel; check them with squeue and resume again")

    def _current_states(self, job_ids: list[str]) -> dict[str, str]:
        try:
            return self.commands.states(job_ids)
        except SlurmCommandError as exc:
            raise AkaError(f"cannot ask Slurm about jobs {', '.join(job_ids)}: {exc}") from None

    def _report(self, run_dir: Path, ledger: JobLedger, task_ids: list[str]) -> None:
        latest: dict[str, Job] = {j.task_id: j for j in ledger.jobs}
        missing = [t for t in task_ids if not task_result_path(run_dir, t).is_file()]
        for task_id in missing:
            job = latest.get(task_id)
            log.warning("task has no result", task=task_id,
                        job=job.job_id if job else None,
                        job_state=job.state if job else "not submitted",
                        slurm_log=job.log if job else None)
        if missing:
            log.warning(f"{len(missing)} of {len(task_ids)} tasks have no result; "
                        f"`aka run --resume {run_dir}` submits jobs for those only",
                        tasks=missing)


class _Watch:
    """Submits the jobs of one ``execute`` call and follows them until every one has ended."""

    def __init__(self, executor: SlurmExecutor, run_dir: Path, tasks_root: Path,
                 ledger: JobLedger, task_finished: Callable[[str], object]):
        self.options = executor.options
        self.task_finished = task_finished
        """Tells the run that a task has its result (the progress and the reports follow)."""
        self.commands = executor.commands
        self.run_dir = run_dir
        self.tasks_root = tasks_root
        self.ledger = ledger
        self.slurm_dir = run_dir / SLURM_DIR
        self.log_dir = self.slurm_dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.queue: list[str] = []
        self.active: dict[str, Job] = {}
        self.misses: dict[str, int] = {}
        self.submit_error: str | None = None

    # ----------------------------------------------------------------- submitting

    def _script_path(self, name: str) -> Path:
        return self.slurm_dir / "scripts" / f"{name}.sh"

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.run_dir).as_posix()

    def submit_array(self, task_ids: list[str]) -> None:
        stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S")
        script = self._script_path(f"array-{stamp}")
        write_text_atomic(script, array_script(self.options, run_dir=self.run_dir,
                                               tasks_root=self.tasks_root, task_ids=task_ids,
                                               log_dir=self.log_dir))
        array_id = self._submit(script, what=f"{len(task_ids)} tasks")
        if array_id is None:
            return
        for index, task_id in enumerate(task_ids):
            job_id = f"{array_id}_{index}"
            self._track(Job(job_id=job_id, task_id=task_id, script=self._relative(script),
                            log=self._relative(self.log_dir / f"array-{job_id}.out"),
                            submitted_at=now_iso()))
        log.info("submitted a job array", job=array_id, tasks=len(task_ids))

    def submit_from_queue(self) -> None:
        limit = self.options.max_concurrent
        while self.queue and self.submit_error is None and (limit is None
                                                            or len(self.active) < limit):
            task_id = self.queue.pop(0)
            slug = task_slug(task_id)
            script = self._script_path(slug)
            write_text_atomic(script, task_script(self.options, run_dir=self.run_dir,
                                                  tasks_root=self.tasks_root, task_id=task_id,
                                                  log_dir=self.log_dir))
            job_id = self._submit(script, what=task_id)
            if job_id is None:
                self.queue.insert(0, task_id)
                return
            self._track(Job(job_id=job_id, task_id=task_id, script=self._relative(script),
                            log=self._relative(self.log_dir / f"{slug}-{job_id}.out"),
                            submitted_at=now_iso()))
            log.info("submitted", task=task_id, job=job_id)

    def _submit(self, script: Path, what: str) -> str | None:
        """The job id; None (and no more submissions) when sbatch refused after some jobs ran."""
        try:
            return self.commands.submit(script)
        except SlurmCommandError as exc:
            if not self.active:  # nothing of this call runs: the options are likely wrong
                raise AkaError(f"{exc} (check executor.options in the run config)") from None
            self.submit_error = str(exc)
            log.error("sbatch failed; no more jobs are submitted, the running ones are awaited",
                      what=what, error=str(exc))
            return None

    def _track(self, job: Job) -> None:
        self.ledger.add(job)
        self.active[job.job_id] = job
        self.ledger.save()

    # ----------------------------------------------------------------- waiting

    def wait(self) -> None:
        failing_since: float | None = None
        self.submit_from_queue()
        while self.active or (self.queue and self.submit_error is None):
            time.sleep(self.options.poll_seconds)
            try:
                states = self.commands.states(self.active)
            except SlurmCommandError as exc:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > OUTAGE_SECONDS:
                    raise AkaError(
                        f"Slurm has not answered for {OUTAGE_SECONDS:.0f} s ({exc}); the jobs "
                        f"may still be running: see {self.ledger.path}, then `aka run --resume "
                        f"{self.run_dir}`") from None
                log.warning("cannot read job states; retrying", error=str(exc))
                continue
            failing_since = None
            if self._update(states):
                self.ledger.save()
            self.submit_from_queue()

    def _update(self, states: dict[str, str]) -> bool:
        changed = False
        for job_id, job in list(self.active.items()):
            state = states.get(job_id)
            if state is None:
                self.misses[job_id] = self.misses.get(job_id, 0) + 1
                if self.misses[job_id] < MISSES_BEFORE_GONE:
                    continue
                state = GONE
            self.misses.pop(job_id, None)
            if state != job.state:
                job.state, changed = state, True
                if state == "RUNNING":
                    log.info("running", task=job.task_id, job=job_id)
            if job.final:
                self._ended(job)
                del self.active[job_id]
        return changed

    def _ended(self, job: Job) -> None:
        job.ended_at = now_iso()
        job.has_result = task_result_path(self.run_dir, job.task_id).is_file()
        if job.has_result:
            log.info("task finished", task=job.task_id, job=job.job_id, job_state=job.state)
            self.task_finished(job.task_id)
        else:
            log.warning("job ended without a result", task=job.task_id, job=job.job_id,
                        job_state=job.state, slurm_log=str(self.run_dir / job.log))

    def interrupted(self) -> None:
        ids = sorted(self.active)
        if not ids:
            return
        if self.options.cancel_on_interrupt:
            try:
                self.commands.cancel(ids)
            except SlurmCommandError as exc:
                log.error("could not cancel the run's jobs", jobs=ids, error=str(exc))
            else:
                for job in self.active.values():
                    job.state, job.ended_at = "CANCELLED", now_iso()
                log.warning("interrupted: cancelled the run's Slurm jobs", jobs=ids,
                            hint=f"aka run --resume {self.run_dir}")
        else:
            log.warning(
                "interrupted: the run's Slurm jobs keep running and write their results into "
                "the run directory", jobs=ids,
                hint=f"when they have ended (squeue --jobs={','.join(ids)}), `aka run --resume "
                f"{self.run_dir}` submits the tasks still without a result; a resume started "
                "earlier cancels the jobs still running first")
        self.ledger.save()

