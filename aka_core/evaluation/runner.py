"""Parent side of an evaluation: start a worker, watch it, bound it by the wall clock.

The worker runs in its own process group. Each phase (startup, compile, correctness, timing) has a
deadline; a worker that hangs is killed with its whole group, one that crashes (segfault, illegal
memory access, out of memory) fails this evaluation with the reason and the tail of its log, and
the run goes on. The parent timestamps the worker's messages with its own clock, which a candidate
cannot reach: the device times the worker claims must fit in the wall time the parent saw.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import secrets
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

from aka_core.evaluation.request import EvaluationRequest

STARTUP_SECONDS = 180.0
# How long a worker may queue for a GPU that other evaluations are checking and timing on.
GPU_WAIT_SECONDS = float(os.environ.get("AKA_GPU_WAIT_SECONDS", "3600"))
# A candidate's claimed speedup may exceed what the parent's wall clock shows by this factor
# before it is rejected: blocks run without L2 flushes and include launch gaps, so the two differ.
WALL_SLACK = 1.25
# Blocks faster than this per call are launch-bound: their wall ratio says little about the kernel.
WALL_MIN_MS_PER_CALL = 0.05
# The worker (which runs candidate code) inherits only these variables: no API keys or tokens.
WORKER_ENV_KEEP = frozenset({
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "USER", "LOGNAME",
    "SHELL", "TERM", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH",
    "XDG_CACHE_HOME", "CC", "CXX",
})
WORKER_ENV_PREFIXES = ("CUDA_", "HIP_", "ROCR_", "ROCM_", "HSA_", "TRITON_", "TORCH_", "PYTORCH_",
                       "NCCL_", "NVIDIA_", "NVSHMEM_", "OMP_", "MKL_", "OPENBLAS_", "AKA_GPU_",
                       "AKA_BUILD_", "NVCC_", "FLYDSL_")


WORKER_ENV_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def worker_base_environment() -> dict[str, str]:
    def allowed(name: str) -> bool:
        if name in WORKER_ENV_KEEP:
            return True
        upper = name.upper()
        return name.startswith(WORKER_ENV_PREFIXES) and not any(
            word in upper for word in WORKER_ENV_SECRET_WORDS)  # e.g. NVIDIA_API_KEY

    return {k: v for k, v in os.environ.items() if allowed(k)}


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> Any:
    """A ``preexec_fn`` that has Linux SIGKILL the worker when its parent dies.

    The worker has its own session, so nothing else stops it when ``aka`` is killed with SIGKILL
    (no ``finally`` runs): a hung candidate would keep the CPU, the GPU and its GPU lock forever.
    """
    if _LIBC is None:
        return None

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


KNOWN_CRASHES = (
    ("illegal memory access", "illegal memory access"),
    ("out of memory", "out of device memory"),
    ("misaligned address", "misaligned address"),
    ("device-side assert", "device-side assertion"),
)


@attrs.define
class _Watch:
    phase: str = "startup"
    phase_started: float = attrs.field(factory=time.monotonic)
    phase_times: dict[str, float] = attrs.field(factory=dict)
    blocks: list[tuple[float, dict[str, Any]]] = attrs.field(factory=list)
    result: dict[str, Any] | None = None


def _deadline_for(phase: str, request: EvaluationRequest) -> float:
    t = request.timeouts
    return {
        "startup": STARTUP_SECONDS,
        "gpu_wait": GPU_WAIT_SECONDS,
        "compile": t.compile_seconds,
        "correctness": t.correctness_seconds,
        "timing": t.timing_seconds,
    }.get(phase, 60.0)


def evaluate(
    request: EvaluationRequest,
    *,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Evaluate in a fresh worker process; always returns a record, never raises for the candidate."""
    request = attrs.evolve(request, secret_seed=secrets.randbits(62))
    log_path = log_path or Path(tempfile.mkstemp(prefix="aka-worker-", suffix=".log")[1])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    with open(log_path, "wb") as log, tempfile.TemporaryDirectory(prefix="aka-eval-") as scratch:
        proc = subprocess.Popen(
            [python, "-m", "aka_core.evaluation.worker", str(write_fd)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), start_new_session=True, cwd=scratch,
            preexec_fn=_die_with_parent(os.getpid()),
            env={**worker_base_environment(), **(env or {}), "PYTHONUNBUFFERED": "1",
                 "PYTHONDONTWRITEBYTECODE": "1"},
        )
        os.close(write_fd)
        messages: queue.Queue[tuple[float, dict[str, Any] | None]] = queue.Queue()
        reader = threading.Thread(target=_read_messages, args=(read_fd, messages), daemon=True)
        reader.start()
        try:
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(request.to_json()).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            watch, failure = _watch(proc, request, messages)
        finally:  # also on Ctrl-C: the worker has its own session and would outlive us
            _kill_group(proc)
        reader.join(timeout=5)
    record: dict[str, Any] = watch.result or {"phases": {}}
    record["phases_wall"] = watch.phase_times
    record["wall_seconds"] = round(time.monotonic() - started, 3)
    record["worker_log"] = str(log_path)
    if failure is not None:
        failure.setdefault("log_tail", _tail(log_path))
        record["failure"] = failure
    elif watch.result is not None and "failure" in watch.result:
        watch.result["failure"].setdefault("log_tail", _tail(log_path, 2000))
    perf = record.get("performance") or {}
    if perf.get("measured") and "failure" not in record:
        check = wall_clock_check(perf, watch)
        record["wall_clock_check"] = check
        if not check["passed"]:
            record["failure"] = {"kind": "wall_clock", "phase": "timing",
                                 "message": check["reason"]}
    return record


def _read_messages(fd: int, out: queue.Queue[tuple[float, dict[str, Any] | None]]) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            now = time.monotonic()
            try:
                out.put((now, json.loads(line)))
            except json.JSONDecodeError:
                continue
    out.put((time.monotonic(), None))


def _watch(proc: subprocess.Popen[bytes], request: EvaluationRequest,
           messages: queue.Queue[tuple[float, dict[str, Any] | None]]
           ) -> tuple[_Watch, dict[str, Any] | None]:
    watch = _Watch()
    while True:
        remaining = watch.phase_started + _deadline_for(watch.phase, request) - time.monotonic()
        if remaining <= 0:
            _kill_group(proc)
            watch.phase_times[watch.phase] = round(time.monotonic() - watch.phase_started, 3)
            return watch, {"kind": "timeout", "phase": watch.phase,
                           "message": f"the {watch.phase} phase ran past its limit of "
                                      f"{_deadline_for(watch.phase, request):.0f} s; the worker "
                                      "was killed"}
        try:
            now, msg = messages.get(timeout=min(remaining, 1.0))
        except queue.Empty:
            continue
        if msg is None:  # the worker closed its end: it exited
            break
        event = msg.get("event")
        if event == "phase":
            watch.phase_times[watch.phase] = round(now - watch.phase_started, 3)
            watch.phase, watch.phase_started = msg["phase"], now
        elif event == "wall_block":
            watch.blocks.append((now, msg))
        elif event == "result":
            watch.result = msg["result"]
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
        message = f"the worker died with {name} during {phase}"
    else:
        message = f"the worker exited with status {code} during {phase} without a result"
    return {"kind": "crashed", "phase": phase, "message": message, "exit_code": code}


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        try:  # children the candidate left behind share the group
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    for needle, label in KNOWN_CRASHES:
        if needle in text:
            return f"[{label}] " + text
    return text


def wall_clock_check(perf: dict[str, Any], watch: _Watch) -> dict[str, Any]:
    """Compare what the worker claims with what the parent's own clock saw.

    1. The device time claimed for the timing phase cannot exceed its wall time.
    2. Per case, the claimed speedup cannot exceed the speedup of back-to-back blocks timed by the
       parent (wall clock) by more than ``WALL_SLACK``, where the blocks are long enough to mean
       something (not launch-bound).
    """
    claimed_ms = 0.0
    for case in perf.get("cases", []):
        launches = case.get("graph_launches", 1)
        samples = case.get("samples_ms", {})
        claimed_ms += launches * (sum(samples.get("baseline", [])) + sum(samples.get("candidate", [])))
    timing_wall_ms = watch.phase_times.get("timing", 0.0) * 1000
    checks: dict[str, Any] = {"claimed_device_ms": round(claimed_ms, 3),
                              "timing_phase_wall_ms": round(timing_wall_ms, 3), "cases": []}
    reasons = []
    if timing_wall_ms and claimed_ms > timing_wall_ms * 1.01:
        reasons.append(f"the worker claims {claimed_ms:.1f} ms of device time in a timing phase "
                       f"that lasted {timing_wall_ms:.1f} ms of wall time")
    starts: dict[tuple[str, str, int], float] = {}
    walls: dict[str, dict[str, float]] = {}  # ms per unit: a call, or a graph replay of calls
    calls_per_unit: dict[str, int] = {}
    for now, msg in watch.blocks:
        key = (msg["case"], msg["side"], msg.get("block", 0))
        if msg["marker"] == "start":
            starts[key] = now
        elif key in starts:
            per_unit = (now - starts[key]) * 1000 / msg["calls"]
            sides = walls.setdefault(msg["case"], {})
            sides[msg["side"]] = min(per_unit, sides.get(msg["side"], per_unit))  # fastest block
            calls_per_unit[msg["case"]] = int(msg.get("per_call", 1))
    for case in perf.get("cases", []):
        wall = walls.get(case["case"], {})
        if "baseline" not in wall or "candidate" not in wall:
            continue
        wall_speedup = wall["baseline"] / wall["candidate"]
        unit = calls_per_unit.get(case["case"], 1)
        entry = {"case": case["case"],
                 "wall_ms_per_call": {side: ms / unit for side, ms in wall.items()},
                 "wall_speedup": wall_speedup, "claimed_speedup": case.get("speedup")}
        if unit > 1:
            entry["graph_replays_of"] = unit  # timed as graph replays, like the samples
        # A unit shorter than this is launch-bound: its wall time says little about the kernel.
        conclusive = min(wall.values()) >= WALL_MIN_MS_PER_CALL
        entry["conclusive"] = conclusive
        if conclusive and case.get("speedup", 0) > wall_speedup * WALL_SLACK:
            reasons.append(f"case {case['case']}: claimed speedup {case['speedup']:.3f} but the "
                           f"wall clock shows {wall_speedup:.3f}")
        checks["cases"].append(entry)
    checks["passed"] = not reasons
    if reasons:
        checks["reason"] = "timing inconsistent with the wall clock: " + "; ".join(reasons)
    return checks


def outcome(record: dict[str, Any]) -> dict[str, Any]:
    """The gates of an evaluation record: compiled? correct? performance measured? speedup?"""
    failure = record.get("failure")
    kind = failure.get("kind") if failure else None
    phase = failure.get("phase") if failure else None
    compiled: bool | None = True
    correct: bool | None = bool(record.get("correctness", {}).get("passed"))
    stopped = kind in ("timeout", "crashed")
    if kind == "compile" or (stopped and phase == "compile"):
        compiled, correct = False, None
    elif kind in ("task_error", "error") or (stopped and phase in ("startup", "gpu_wait")):
        compiled, correct = None, None  # the candidate was never judged
    elif kind in ("compile_ok_runtime_error", "correctness", "timing_check") or (
        stopped and phase == "correctness"
    ):
        correct = False
    compile_only = bool(record.get("compile_only"))
    if compile_only and failure is None:
        correct = None  # built for the target, never run
    perf = record.get("performance") or {}
    measured = bool(perf.get("measured")) and failure is None
    return {
        "compile_only": compile_only,
        "pass_compilation": compiled,
        "pass_correctness": correct,
        "performance_measured": measured,
        "speedup": perf.get("speedup") if measured else None,
        "ci95": tuple(perf["ci95"]) if measured and perf.get("ci95") else None,
        "failure_kind": kind,
        "task_error": kind in ("task_error",),
    }
