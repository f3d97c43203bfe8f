"""The parent side of an evaluation: start the judge, bound it by deadlines, return its record.

The judge (``judge.py``) is trusted: it loads the task's reference and inputs, holds the secret,
starts the two runners that execute baseline and candidate code, and owns the clock. This module
runs it in a fresh process (so the lifecycle never imports PyTorch or holds a GPU), gives it the
request and a fresh secret on stdin, and enforces a deadline per phase the judge reports: a judge
that hangs is killed with its process group and the evaluation is an ``infra_error``, retryable.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from aka_core.evaluation.failures import (  # noqa: F401 (re-exported: they were defined here)
    CANDIDATE_FAILURES,
    TIMING_FAILURES,
    FailureKind,
)
from aka_core.evaluation.record import EvaluationRecord, Gates
from aka_core.evaluation.request import EvaluationRequest
from aka_core.tails import tail

STARTUP_SECONDS = 300.0
# How long a judge may queue for a GPU that other evaluations are checking and timing on.
GPU_WAIT_SECONDS = float(os.environ.get("AKA_GPU_WAIT_SECONDS", "3600"))
# Margin on the judge's own limits: the judge enforces the task's timeouts on its runners; these
# deadlines only catch a judge that stopped reporting.
JUDGE_MARGIN_SECONDS = 120.0
# Processes that run code of a side (and the judge) inherit only these variables: no API keys.
WORKER_ENV_KEEP = frozenset({
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "USER", "LOGNAME",
    "SHELL", "TERM", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH",
    "XDG_CACHE_HOME", "CC", "CXX", "AKA_KERNEL_CACHE", "AKA_FUSED_COMPARE",
    "AKA_SCRATCH_LIMIT", "AKA_MEMORY_LIMIT",
})
WORKER_ENV_PREFIXES = ("CUDA_", "HIP_", "ROCR_", "ROCM_", "HSA_", "TRITON_", "TORCH_", "PYTORCH_",
                       "NCCL_", "NVIDIA_", "NVSHMEM_", "OMP_", "MKL_", "OPENBLAS_", "AKA_GPU_",
                       "AKA_BUILD_", "NVCC_", "FLYDSL_")
WORKER_ENV_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
WORKER_ENV_DROP = frozenset({"OMP_PROC_BIND", "OMP_PLACES"})
"""Thread binding: an OpenMP pool would set its threads' CPUs by thread id, which the runners'
seccomp filter refuses (``seccomp``)."""



def _judge_profile() -> dict[str, str]:
    """The judge alone profiles itself where ``AKA_JUDGE_PROFILE`` names a folder."""
    folder = os.environ.get("AKA_JUDGE_PROFILE")
    return {"AKA_JUDGE_PROFILE": folder} if folder else {}


def worker_base_environment() -> dict[str, str]:
    def allowed(name: str) -> bool:
        if name in WORKER_ENV_KEEP:
            return True
        if name in WORKER_ENV_DROP:
            return False
        upper = name.upper()
        return name.startswith(WORKER_ENV_PREFIXES) and not any(
            word in upper for word in WORKER_ENV_SECRET_WORDS)  # e.g. NVIDIA_API_KEY

    return {k: v for k, v in os.environ.items() if allowed(k)}


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, oom_score_adj: int | None = None) -> Any:
    """A ``preexec_fn`` that has Linux SIGKILL the judge when its parent dies (no ``finally``
    runs on SIGKILL: a judge would keep the GPU and its lock); with ``oom_score_adj``, the child
    also gets that score for the kernel's OOM killer (``sandbox.OOM_SCORE_ADJ``), set before it
    runs anything (where aka holds ``CAP_SYS_RESOURCE``, the child can never lower it)."""
    if _LIBC is None:
        return None
    from aka_core.evaluation.sandbox import set_oom_score_adj  # imported here, not in the child

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if oom_score_adj is not None:  # the child's record (``sandbox.apply``) says what it got
            set_oom_score_adj("self", oom_score_adj)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


@attrs.define
class _JudgeProgress:
    """What the parent has seen of one judge process: its phase and their times, its result."""

    phase: str = "startup"
    phase_started: float = attrs.field(factory=time.monotonic)
    phase_times: dict[str, float] = attrs.field(factory=dict)
    result: dict[str, Any] | None = None
    spawned: bool = False  # the judge's first message came (the time before it is "spawn")


def _deadline_for(phase: str, request: EvaluationRequest) -> float:
    t = request.timeouts
    return JUDGE_MARGIN_SECONDS + {
        "startup": STARTUP_SECONDS,
        "gpu_wait": GPU_WAIT_SECONDS,
        "compile": t.compile_seconds + STARTUP_SECONDS,
        "correctness": t.correctness_seconds,
        "timing": t.timing_seconds * 2,  # the interleaved phase, then the baseline alone
    }.get(phase, 60.0)


@attrs.define(eq=False)
class StartedJudge:
    """A judge process waiting for its request on stdin (its messages read into ``messages``)."""

    proc: subprocess.Popen[bytes]
    messages: queue.Queue[tuple[float, dict[str, Any] | None]]
    reader: threading.Thread
    scratch: tempfile.TemporaryDirectory[str]
    log_path: Path
    env: dict[str, str] | None
    python: str

    def close(self, *, settled: bool = False) -> None:
        """Kill the judge's process group, then wait for its exit and remove its scratch folder.
        ``settled``: the judge sent its record, so its runners are killed and nothing writes in
        the folder any more: it is removed now and the exit is waited for by a thread (the
        judge's CUDA context torn down: 0.2 s of every request on an H200, bench/job_profile.py)."""
        if not settled:
            _kill_group(self.proc)
            self.reader.join(timeout=5)
            self.scratch.cleanup()
            return
        _signal_group(self.proc)
        with contextlib.suppress(OSError):
            self.scratch.cleanup()
        threading.Thread(target=self._reap, name="aka-judge-reaper", daemon=True).start()

    def _reap(self) -> None:
        self.proc.wait()
        self.reader.join(timeout=5)
        with contextlib.suppress(OSError):
            self.scratch.cleanup()  # what a late writer left (none is expected)


def _spawn(python: str, env: Mapping[str, str] | None, log_path: Path | None,
           extra: list[str]) -> StartedJudge:
    log_path = log_path or Path(tempfile.mkstemp(prefix="aka-judge-", suffix=".log")[1])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    read_fd, write_fd = os.pipe()
    scratch = tempfile.TemporaryDirectory(prefix="aka-eval-")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python, "-m", "aka_core.evaluation.judge", str(write_fd), *extra],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), start_new_session=True, cwd=scratch.name,
            preexec_fn=die_with_parent(os.getpid()),
            env={**worker_base_environment(), **(env or {}), "PYTHONUNBUFFERED": "1",
                 "PYTHONDONTWRITEBYTECODE": "1",
                 "AKA_JUDGE_LOG_PREFIX": str(log_path.with_suffix("")),
                 **_judge_profile()},
        )
    os.close(write_fd)
    messages: queue.Queue[tuple[float, dict[str, Any] | None]] = queue.Queue()
    reader = threading.Thread(target=_read_messages, args=(read_fd, messages), daemon=True)
    reader.start()
    return StartedJudge(proc=proc, messages=messages, reader=reader, scratch=scratch,
                        log_path=log_path, env=None if env is None else dict(env), python=python)


def prestart_judge(profile: Any, *, env: Mapping[str, str] | None = None,
                   log_path: Path | None = None, python: str = sys.executable) -> StartedJudge:
    """A judge started before its request (``warm.WarmProfile``): it imports PyTorch and starts
    its two runners, confined for ``profile``, then waits. Hand it to ``offer``; the next
    ``evaluate`` in this process uses it (its runners only if the request fits the profile)."""
    return _spawn(python, env, log_path, ["--warm", json.dumps(profile.to_json())])


_offered: StartedJudge | None = None


def offer(judge: StartedJudge) -> None:
    """The judge the next ``evaluate`` call of this process starts from (used once)."""
    global _offered
    if _offered is not None:
        _offered.close()
    _offered = judge


def _take_offered(python: str, env: Mapping[str, str] | None) -> StartedJudge | None:
    global _offered
    judge, _offered = _offered, None
    if judge is None:
        return None
    wanted = None if env is None else dict(env)
    if judge.python != python or judge.env != wanted or judge.proc.poll() is not None:
        judge.close()  # started for another environment, or gone: a fresh one is started
        return None
    return judge


def evaluate(
    request: EvaluationRequest,
    *,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Evaluate in a fresh judge process (one ``offer``ed ahead, where there is one); always
    returns a record, never raises for the candidate."""
    request = attrs.evolve(request, secret_seed=secrets.randbits(62))
    started = time.monotonic()
    judge = _take_offered(python, env) or _spawn(python, env, log_path, [])
    try:
        try:
            assert judge.proc.stdin is not None
            judge.proc.stdin.write(json.dumps(request.to_json()).encode())
            judge.proc.stdin.close()
        except BrokenPipeError:
            pass
        watch, failure = _watch(judge.proc, request, judge.messages)
        judge.close(settled=watch.result is not None and failure is None)
    except BaseException:  # also on Ctrl-C: the judge has its own session and would outlive us
        judge.close()
        raise
    if log_path is not None and log_path != judge.log_path:  # a judge started ahead logged there
        log_path.parent.mkdir(parents=True, exist_ok=True)
        for part in ("", ".baseline", ".candidate"):  # the judge's log, then its runners'
            with contextlib.suppress(OSError):
                shutil.copyfile(f"{judge.log_path.with_suffix('')}{part}.log",
                                f"{log_path.with_suffix('')}{part}.log")
    log_path = log_path or judge.log_path
    record: dict[str, Any] = watch.result or {"phases": {}}
    record["phases_wall"] = watch.phase_times
    record["wall_seconds"] = round(time.monotonic() - started, 3)
    record["worker_log"] = str(log_path)
    if failure is not None:
        failure.setdefault("log_tail", tail(log_path))
        record["failure"] = failure
    return record


def _read_messages(fd: int, out: queue.Queue[tuple[float, dict[str, Any] | None]]) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            try:
                out.put((time.monotonic(), json.loads(line)))
            except json.JSONDecodeError:
                continue
    out.put((time.monotonic(), None))


def _watch(proc: subprocess.Popen[bytes], request: EvaluationRequest,
           messages: queue.Queue[tuple[float, dict[str, Any] | None]]
           ) -> tuple[_JudgeProgress, dict[str, Any] | None]:
    watch = _JudgeProgress()
    while True:
        remaining = watch.phase_started + _deadline_for(watch.phase, request) - time.monotonic()
        if remaining <= 0:
            _kill_group(proc)
            watch.phase_times[watch.phase] = round(time.monotonic() - watch.phase_started, 3)
            return watch, {"kind": FailureKind.INFRA_ERROR, "phase": watch.phase, "retryable": True,
                           "message": f"the judge stopped reporting during {watch.phase} (limit "
                                      f"{_deadline_for(watch.phase, request):.0f} s) and was "
                                      "killed"}
        try:
            now, msg = messages.get(timeout=min(remaining, 1.0))
        except queue.Empty:
            continue
        if msg is None:  # the judge closed its end: it exited
            break
        event = msg.get("event")
        if event == "phase":
            watch.phase_times[watch.phase if watch.spawned else "spawn"] = round(
                now - watch.phase_started, 3)
            watch.phase, watch.phase_started, watch.spawned = msg["phase"], now, True
        elif event == "result":
            # The judge closed its runners and saved what it keeps before it sent this; its
            # own exit (interpreter and CUDA teardown, ~0.7 s) is not waited for: the caller
            # kills its process group, which also lets go of the GPU lock sooner.
            watch.result = msg["result"]
            watch.phase_times[watch.phase] = round(now - watch.phase_started, 3)
            return watch, None
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        code = proc.wait()
    if watch.result is None:
        return watch, _crash(code, watch.phase)
    return watch, None


def _crash(code: int, phase: str) -> dict[str, Any]:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        message = f"the judge died with {name} during {phase}"
    else:
        message = f"the judge exited with status {code} during {phase} without a result"
    return {"kind": FailureKind.INFRA_ERROR, "phase": phase, "message": message, "exit_code": code,
            "retryable": True}


def _signal_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the judge's process group (the judge alone where the group is gone)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            proc.kill()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    _signal_group(proc)
    proc.wait()


def outcome(record: EvaluationRecord) -> Gates:
    """The gates of an evaluation record: compiled? correct? performance measured? speedup?"""
    failure = record.failure
    kind = failure.kind if failure is not None else None
    phase = failure.phase if failure is not None else None
    compiled: bool | None = True
    correct: bool | None = record.correctness_passed()
    stopped = kind in (FailureKind.TIMEOUT, FailureKind.CRASHED, FailureKind.PROTOCOL)
    # Built, then crashed or hung in its first call (the warm-up that ends the compile phase):
    # a runtime failure, not a build failure.
    first_call = failure is not None and failure.stage == "first_call"
    if kind == FailureKind.COMPILE or (stopped and phase == "compile" and not first_call):
        compiled, correct = False, None
    elif kind in (FailureKind.TASK_ERROR, FailureKind.INFRA_ERROR) or (
        stopped and phase in ("startup", "gpu_wait")
    ):
        compiled, correct = None, None  # the candidate was never judged
    elif kind == FailureKind.POLICY and record.correctness is None:
        correct = None  # rejected before it ran
    elif kind in (FailureKind.COMPILE_OK_RUNTIME_ERROR, FailureKind.CORRECTNESS,
                  FailureKind.PRECISION) or (
        stopped and (phase == "correctness" or first_call)
    ):
        correct = False
    compile_only = record.compile_only is not None
    if compile_only and failure is None:
        correct = None  # built for the target, never run
    perf = record.performance
    measured = perf is not None and perf.measured and failure is None
    ci95 = perf.ci95 if measured and perf is not None else None
    return Gates(
        compile_only=compile_only,
        pass_compilation=compiled,
        pass_correctness=correct,
        performance_measured=measured,
        speedup=perf.speedup if measured and perf is not None else None,
        ci95=(ci95[0], ci95[1]) if ci95 else None,
        failure_kind=kind,
        task_error=kind == FailureKind.TASK_ERROR,
        infra_error=kind == FailureKind.INFRA_ERROR,
    )
