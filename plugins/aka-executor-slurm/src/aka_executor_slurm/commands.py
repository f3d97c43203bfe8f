"""Slurm's command-line tools (sbatch, squeue, sacct, scancel), called as subprocesses.

Only the commands every Slurm installation has, with their machine-readable output options:
``sbatch --parsable``, ``squeue --noheader --format``, ``sacct --parsable2``. ``sacct`` needs the
accounting database (slurmdbd); without one it fails, and job states come from ``squeue`` alone
(which forgets a finished job after the cluster's ``MinJobAge``, 300 s by default).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import structlog

log = structlog.get_logger("aka.executor.slurm")

FINAL_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})
"""Job states after which a job runs no more (``PREEMPTED`` jobs that Slurm requeues come back as
``PENDING``)."""

COMMAND_TIMEOUT_SECONDS = 60.0


class SlurmCommandError(Exception):
    """A Slurm command failed; the message has its stderr."""


class SlurmCommands:
    """Submit, query and cancel jobs. One instance per executor; remembers whether sacct works."""

    def __init__(self, sbatch_retries: int = 3):
        self.sbatch_retries = sbatch_retries
        self._sacct_works: bool | None = None

    @staticmethod
    def available() -> str | None:
        """None when ``sbatch``, ``squeue`` and ``scancel`` are on PATH; else what is missing."""
        missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
        return ", ".join(missing) or None

    @staticmethod
    def _run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(list(args), capture_output=True, text=True, check=False,
                                  timeout=COMMAND_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SlurmCommandError(
                f"`{' '.join(args)}` did not answer within {COMMAND_TIMEOUT_SECONDS:.0f} s") from None
        except OSError as exc:
            raise SlurmCommandError(f"cannot run {args[0]}: {exc}") from None

    def submit(self, script: Path) -> str:
        """``sbatch --parsable SCRIPT``; returns the job id. Retries transient failures."""
        for attempt in range(1, self.sbatch_retries + 1):
            proc = self._run(["sbatch", "--parsable", str(script)])
            if proc.returncode == 0:
                lines = [line for line in proc.stdout.splitlines() if line.strip()]
                if lines:
                    return lines[-1].split(";")[0].strip()  # "123" or "123;cluster"
            error = (proc.stderr or proc.stdout).strip()
            if not _transient(error) or attempt == self.sbatch_retries:
                raise SlurmCommandError(f"sbatch {script} failed: {error or 'no output'}")
            log.warning("sbatch failed, retrying", error=error, attempt=attempt)
            time.sleep(2.0 * attempt)
        raise AssertionError("unreachable")

    def states(self, job_ids: Iterable[str]) -> dict[str, str]:
        """The state of each job id that Slurm still knows (``123`` or array element ``123_4``).

        A job Slurm no longer knows is absent from the answer.
        """
        wanted = sorted(set(job_ids))
        if not wanted:
            return {}
        base_ids = sorted({j.split("_")[0] for j in wanted})
        found = self._squeue(base_ids)
        missing = [j for j in wanted if j not in found]
        if missing:
            found.update(self._sacct(missing))
        return {j: found[j] for j in wanted if j in found}

    def _squeue(self, base_ids: list[str]) -> dict[str, str]:
        proc = self._run(["squeue", "--noheader", "--array", "--states=all",
                          f"--jobs={','.join(base_ids)}", "--format=%i|%T"])
        if proc.returncode != 0:
            # One unknown id is an error ("Invalid job id specified"); several are not.
            if "invalid job id" in proc.stderr.lower():
                return {}
            raise SlurmCommandError(f"squeue failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return _parse_states(proc.stdout)

    def _sacct(self, job_ids: list[str]) -> dict[str, str]:
        if self._sacct_works is False or shutil.which("sacct") is None:
            return {}
        proc = self._run(["sacct", "--noheader", "--parsable2", "--allocations",
                          f"--jobs={','.join(job_ids)}", "--format=JobID,State"])
        if proc.returncode != 0:
            if self._sacct_works is None:
                log.info("sacct unavailable; job states come from squeue and the results",
                         reason=proc.stderr.strip())
            self._sacct_works = False
            return {}
        self._sacct_works = True
        return _parse_states(proc.stdout)

    def cancel(self, job_ids: Iterable[str]) -> None:
        ids = sorted(set(job_ids))
        if not ids:
            return
        proc = self._run(["scancel", *ids])
        if proc.returncode != 0:
            raise SlurmCommandError(f"scancel {' '.join(ids)} failed: {proc.stderr.strip()}")


def _parse_states(text: str) -> dict[str, str]:
    """``123|RUNNING`` / ``123_4|CANCELLED by 0`` lines -> {"123": "RUNNING", "123_4": "CANCELLED"}."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        job_id, sep, state = line.strip().partition("|")
        if sep and job_id and state.strip():
            states[job_id.strip()] = state.split()[0].rstrip("+")
    return states


def _transient(error: str) -> bool:
    text = error.lower()
    return any(s in text for s in ("timed out", "temporarily unavailable", "try again",
                                   "unable to contact", "connection refused"))
