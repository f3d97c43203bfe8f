"""Evaluating a task by its own commands (``Task.harness``): build, check and time with what the
task ships, for formats that predate the judge (``aka-tasks-akav1``).

Every command runs with ``/bin/sh -c`` in a folder of its own (the workspace for the candidate, a
writable copy of the preserved task for the baseline), confined like a runner (``sandbox``: that
folder writable, system and Python folders readable, the tasks, tests and run folders and
everything else kept out, no network), in a process group killed at its time limit or when it
fills the disk or the host's memory (``run_confined``: the judge's own watches). Correctness
is the correctness commands' exit status; time is what the performance commands write in their
JSON report, for the baseline and for the candidate, and the speedup their ratio.

The record says ``trust: harness``: the task's commands decide, and they run in the same
processes as the candidate's code, so none of the judge's guarantees (secret inputs, audits of
timed calls, the judge's clock, a baseline out of the candidate's reach) apply. Use such tasks to
compare agents on an existing corpus, not as an RL reward that must resist a policy.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from aka_core.bounded_files import read_at_most
from aka_core.evaluation.failures import FailureKind
from aka_core.models import Harness, Task
from aka_core.tails import tail

TIME_KEYS = ("time_ms", "latency_ms", "avg_time_ms", "mean_time_ms", "mean_ms", "ms")
TRUST_NOTE = ("harness-trusted: the task's own commands decided correctness and timing, in the "
              "candidate's processes; the judge's guarantees do not apply")


class StepFailed(Exception):
    def __init__(self, kind: str, phase: str, message: str, **details: Any):
        super().__init__(message)
        self.kind, self.phase, self.details = kind, phase, details


def evaluate(task: Task, workspace: Path, baseline: Path, logs: Path, *, device: str,
             measure_performance: bool, protected: Sequence[str], confinement: str) -> dict[str, Any]:
    """The evaluation record of ``task``'s candidate in ``workspace``: its commands' verdicts,
    its speedup against the preserved task ``baseline`` run the same way."""
    assert task.harness is not None
    harness = task.harness
    record: dict[str, Any] = {
        "trust": "harness", "trust_note": TRUST_NOTE, "phases": {},
        "harness": {"compile": list(harness.compile), "correctness": list(harness.correctness),
                    "performance": list(harness.performance), "report": harness.report},
        "confinement": {"policy": confinement, "confined": True}}
    runner = _Runner(logs, protected, confinement, harness.timeout_s, record)
    try:
        runner.phase("compile")
        runner.all(harness.compile, workspace, "compile", "candidate")
        record["compile"] = {"passed": True}
        runner.phase("correctness")
        runner.all(harness.correctness, workspace, "correctness", "candidate")
        record["correctness"] = {"passed": True, "checks": [
            {"case": "harness", "command": cmd, "held_out": False} for cmd in harness.correctness]}
        if not (measure_performance and device == "cuda" and harness.performance):
            record["performance"] = {"measured": False, "reason_not_measured": (
                "the task has no performance command" if not harness.performance else
                "performance was not measured: no GPU" if device != "cuda" else
                "performance measurement was switched off")}
        else:
            runner.phase("timing")
            record["performance"] = _time_both(runner, harness, workspace, baseline, logs)
    except StepFailed as exc:
        record["failure"] = {"kind": exc.kind, "phase": exc.phase, "message": str(exc),
                             "retryable": exc.kind == FailureKind.INFRA_ERROR, **exc.details}
    finally:
        runner.phase(None)
    return record


def _time_both(runner: _Runner, harness: Harness, workspace: Path, baseline: Path,
               logs: Path) -> dict[str, Any]:
    base_dir = logs.parent / "harness-baseline"
    if base_dir.exists():
        shutil.rmtree(base_dir)
    shutil.copytree(baseline, base_dir, symlinks=True)
    for path in base_dir.rglob("*"):  # the preserved copy is read-only; this one is built in
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    base_dir.chmod(base_dir.stat().st_mode | 0o200)
    runner.all(harness.compile, base_dir, "timing", "baseline")
    runner.all(harness.performance, base_dir, "timing", "baseline")
    base_ms = _report_time(base_dir, harness, "baseline")
    runner.all(harness.performance, workspace, "timing", "candidate")
    cand_ms = _report_time(workspace, harness, "candidate")
    speedup = base_ms / cand_ms
    return {"measured": True, "speedup": speedup, "ci95": None, "method": ["harness"],
            "description": "the task's performance commands, baseline then candidate; the "
                           "times their report gives",
            "cases": [{"case": "harness", "baseline_median_ms": base_ms,
                       "candidate_median_ms": cand_ms, "speedup": speedup, "method": "harness"}]}


def _report_time(folder: Path, harness: Harness, side: str) -> float:
    kind = FailureKind.TASK_ERROR if side == "baseline" else FailureKind.CRASHED
    if not harness.report:
        raise StepFailed(FailureKind.TASK_ERROR, "timing", "the task names no performance report "
                         "(aka.performance_report in its config)")
    path = folder / harness.report
    try:
        data = json.loads(_read_report(path))
    except (OSError, ValueError) as exc:
        raise StepFailed(kind, "timing", f"the {side}'s performance report {harness.report} "
                         f"cannot be read: {exc}") from None
    keys = (harness.time_key,) if harness.time_key else TIME_KEYS
    for key in keys:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
                value) and value > 0:
            return float(value)
    raise StepFailed(kind, "timing", f"the {side}'s performance report {harness.report} has no "
                     f"positive time under {', '.join(keys)}")


REPORT_LIMIT_BYTES = 1 << 20


def _read_report(path: Path) -> str:
    """A performance report the side's commands wrote: a regular file of at most
    ``REPORT_LIMIT_BYTES``, never read through a link or waited on (a FIFO would hang the judge,
    a link to ``/dev/zero`` fill its memory); OSError or ValueError (``not a regular file``,
    ``larger than 1 MiB``, not UTF-8) otherwise."""
    return read_at_most(path, REPORT_LIMIT_BYTES).decode("utf-8")


class _Runner:
    """Runs commands confined, one at a time, logging each; a failing one raises StepFailed."""

    def __init__(self, logs: Path, protected: Sequence[str], confinement: str, timeout: float,
                 record: dict[str, Any]):
        self.logs, self.protected, self.confinement = logs, list(protected), confinement
        self.timeout, self.record = timeout, record
        self.count = 0
        self._phase: str | None = None
        self._started = time.monotonic()

    def phase(self, name: str | None) -> None:
        now = time.monotonic()
        if self._phase is not None:
            self.record["phases"][self._phase] = round(
                self.record["phases"].get(self._phase, 0.0) + now - self._started, 3)
        self._phase, self._started = name, now

    def all(self, commands: Sequence[str], folder: Path, phase: str, side: str) -> None:
        for command in commands:
            self.one(command, folder, phase, side)

    def one(self, command: str, folder: Path, phase: str, side: str) -> None:
        self.count += 1
        log = self.logs / f"harness-{self.count:02d}-{side}-{phase}.log"
        run = run_confined(command, folder, log, self.protected, self.confinement,
                           self.timeout, side)
        code, seconds, confined = run.code, run.seconds, run.confinement
        if confined is not None:
            whole = self.record["confinement"]
            whole["confined"] = bool(whole.get("confined")) and bool(confined.get("confined"))
            whole.setdefault("sides", {})[side] = confined
        self.record.setdefault("steps", []).append(
            {"side": side, "phase": phase, "command": command, "exit": code,
             "seconds": round(seconds, 3), "log": log.name,
             "added_disk_bytes": run.added_disk_bytes, "peak_memory_bytes": run.peak_memory_bytes,
             "stopped": run.stopped})
        output = tail(log, 3000)
        if confined is None or "error" in confined:
            # The launcher did not confine and start the command: the evaluator's fault.
            raise StepFailed(FailureKind.INFRA_ERROR, phase, "the command could not be confined and "
                             f"started: {(confined or {}).get('error') or output[-800:]}")
        if run.stopped is not None:
            # It filled the disk or the host's memory (``disk_watch``, ``memory_watch``).
            kind = FailureKind.RESOURCES if side == "candidate" else FailureKind.TASK_ERROR
            raise StepFailed(kind, phase, f"the {side}'s `{command}` was stopped: {run.stopped}",
                             cause=run.cause, log_tail=output)
        if code == 0:
            return
        if code is None:
            kind = FailureKind.TIMEOUT if side == "candidate" else FailureKind.TASK_ERROR
            raise StepFailed(kind, phase, f"the {side}'s `{command}` ran past {self.timeout:.0f} "
                             "s and was killed", log_tail=output)
        if side == "baseline":
            raise StepFailed(FailureKind.TASK_ERROR, phase, f"the task's own code fails `{command}` "
                             f"(exit {code})", log_tail=output)
        kind = {"compile": FailureKind.COMPILE,
                "correctness": FailureKind.CORRECTNESS}.get(phase, FailureKind.CRASHED)
        raise StepFailed(kind, phase, f"`{command}` failed (exit {code}): {output[-800:]}",
                         log_tail=output)


@attrs.frozen
class ConfinedRun:
    code: int | None
    """The exit status; None when it was killed (its time limit, or a watch)."""
    seconds: float
    confinement: dict[str, Any] | None
    """The sandbox's record, as the launcher wrote it (None: it wrote none)."""
    stopped: str | None = None
    """Why a watch killed it: what it wrote or held over a limit."""
    cause: str | None = None
    """``disk_limit`` or ``memory_limit``, where a watch killed it."""
    added_disk_bytes: int | None = None
    """The most the watch found it had added to its folder (``disk_watch``)."""
    peak_memory_bytes: int | None = None
    """The most host memory the watch found its processes held (``memory_watch``)."""


def run_confined(command: str, folder: Path, log: Path, protected: Sequence[str],
                 confinement: str, timeout: float, side: str = "candidate") -> ConfinedRun:
    """Run ``command`` in ``folder`` confined to it, watched as a judge watches a side: killed
    where it writes more than ``AKA_SCRATCH_LIMIT`` into ``folder`` beyond what was there (or
    into files it deleted and holds), or holds more host memory, processes, threads or open
    files than ``memory_watch`` allows. A candidate's command that fills the host would fail
    every other evaluation on it."""
    from aka_core.evaluation import disk_watch, memory_watch, sandbox
    from aka_core.evaluation.evaluate import die_with_parent, worker_base_environment
    from aka_core.evaluation.sides import DISK_LIMIT, MEMORY_LIMIT
    from aka_core.processes import signal_tree

    home = folder / ".aka-home"
    if home.is_symlink() or (home.exists() and not home.is_dir()):
        home.unlink()  # a command of the side replaced it: made again, not a fault of aka's
    home.mkdir(exist_ok=True)
    # No connected sockets of its own, as a runner: Landlock does not govern ``connect``, and
    # a root command could otherwise ask a host daemon's socket for what it may not do itself.
    spec_json = json.dumps(sandbox.build_spec(scratch=folder, read=[], protected=protected,
                                              required=confinement == "required").to_json())
    read_fd, write_fd = os.pipe()
    env = {**worker_base_environment(), "HOME": str(home), "TMPDIR": str(home),
           "XDG_CACHE_HOME": str(home / "cache"), "TRITON_CACHE_DIR": str(home / "triton"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    # The folder holds the task's files already (a workspace, the baseline's copy): the limits
    # are on what the command adds.
    # Its log too: what it prints lands there, outside its folder.
    watched = [folder, log.parent]
    before, entries, _ = disk_watch.usage(watched, [])
    disk = disk_watch.DiskWatch(limit=before + disk_watch.limit_bytes(),
                                max_entries=entries + disk_watch.MAX_ENTRIES)
    memory = memory_watch.MemoryWatch(shortage=False)  # one side: no baseline to weigh
    verdict: list[tuple[str, str]] = []
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            # -P: the folder (the candidate's files) is not on the launcher's path: a json.py
            # there would run, unconfined, before the sandbox is applied.
            [sys.executable, "-P", "-m", "aka_core.evaluation.harness", str(write_fd),
             "on" if confinement != "off" else "off", spec_json, command],
            cwd=folder, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            pass_fds=(write_fd,), start_new_session=True,
            preexec_fn=die_with_parent(os.getpid(), sandbox.oom_score_adj(side)))
    os.close(write_fd)

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the command's children too
        except (ProcessLookupError, PermissionError):
            pass
        if proc.returncode is None:  # not reaped: its pid is still its own
            signal_tree(proc.pid, signal.SIGKILL)  # and those that left its group

    def stop(cause: str, message: str) -> None:
        if not verdict:
            verdict.append((cause, message))
        kill()

    disk.watch(side, watched, roots=lambda: [proc.pid],
               over=lambda message: stop(DISK_LIMIT, message))
    memory.watch(side, roots=lambda: [proc.pid],
                 over=lambda message: stop(MEMORY_LIMIT, message))
    try:
        with os.fdopen(read_fd, "r", encoding="utf-8") as reader:
            line = reader.readline()  # the launcher's sandbox record, before it runs the command
        confined = json.loads(line) if line.strip() else None
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        # The watches first: their thread must not signal a pid reaped meanwhile.
        disk_use, memory_use = disk.stop(), memory.stop()
        kill()
        proc.wait()
    if verdict:
        code = None
    cause, message = verdict[0] if verdict else (None, None)
    peak_disk = disk_use["peak_bytes"].get(side)
    return ConfinedRun(code, time.monotonic() - started, confined, message, cause,
                       None if peak_disk is None else max(0, peak_disk - before),
                       memory_use["peak_bytes"].get(side))


def main(argv: list[str]) -> None:
    """``python -m aka_core.evaluation.harness FD on|off SPEC COMMAND``: confine this process by SPEC (on),
    write what was applied to FD, then become ``/bin/sh -c COMMAND`` (the sandbox stays)."""
    from aka_core.evaluation import sandbox, sides  # before confinement: it may not read them

    fd, mode, spec_json, command = int(argv[0]), argv[1], argv[2], argv[3]
    os.set_inheritable(fd, False)
    record: dict[str, Any] = {"confined": False, "reason": "switched off"}
    if mode == "on":
        spec = sandbox.SandboxSpec.from_json(json.loads(spec_json))
        try:
            record = sandbox.apply(spec)
        except sandbox.SandboxError as exc:
            os.write(fd, (json.dumps({"confined": False, "error": str(exc)}) + "\n").encode())
            print(f"aka: the command could not be confined: {exc}", flush=True)
            os._exit(97)
    os.write(fd, (json.dumps(record) + "\n").encode())
    os.close(fd)
    sys.stdout.flush()
    # The command runs as this (confined) launcher's child, and whatever it leaves behind (a
    # daemon in a session of its own, a double fork) comes back to the launcher, a subreaper,
    # and is killed when the command ends: nothing of it outlives its step, to run beside the
    # next side's timing. While the command runs, the launcher is the root aka watches and
    # kills, with everything below it.
    sides.become_subreaper()
    command_process = subprocess.Popen(["/bin/sh", "-c", command])
    code = command_process.wait()
    sides.kill_orphans_and_wait(set())
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv[1:])
