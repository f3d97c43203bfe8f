"""The builtin engine, driven from the judge: ``python -I -m aka_backend_e2e.engine_main`` in its
own process group, confined before it imports torch or the kernel tree, spoken to over its
stdin/stdout in JSON lines (the pipe protocol of ``engine_main``).

The judge's clock is the measurement: a reader thread takes ``time.perf_counter()`` the moment
each chunk of the engine's stdout arrives, and every line in it carries that time; requests are
sent by the judge at the case's rate. Every wait has a deadline; stopping (or any failure) kills
the engine's whole process group.

Before the engine says, during "load", that the kernel tree's code starts to run
(``engine_main.IMPORTING``), nothing of the tree has run, so a failure before then is a setup
fault (``EngineSetupError``); from that line on it is the arm's (``EngineFailure``), whatever a
line the tree may have forged says.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import queue
import select
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from aka_backend_e2e.adapters.base import (
    ARMS,
    EngineCrashed,
    EngineFailure,
    EngineOverLimit,
    EngineProtocolError,
    EngineSetupError,
    EngineTimeout,
    KernelLoadFailed,
    Request,
    RequestResult,
    RunResult,
    SettingChanged,
)
from aka_core.plugin import protocol

ENGINE_MODULE = "aka_backend_e2e.engine_main"
# ``-I`` ignores PYTHONPATH: the engine gets the judge's import path as the operator runners do
# (AKA_RUNNER_SYSPATH), so that plugins installed on a path of their own are found.
CPUS_ENV = "AKA_E2E_ENGINE_CPUS"
# The engine's first statements, before any thread exists: its CPU cores (every thread it starts
# later inherits them), then the interpreter's search path (``-I`` ignores PYTHONPATH).
BOOT = ("import json, os, runpy, sys; "
        f"c = os.environ.get({CPUS_ENV!r}); c and os.sched_setaffinity(0, json.loads(c)); "
        "sys.path[:0] = json.loads(os.environ.get('AKA_RUNNER_SYSPATH', '[]')); "
        f"runpy.run_module({ENGINE_MODULE!r}, run_name='__main__', alter_sys=True)")
MAX_LINE_BYTES = 64 * 2**20
STDERR_TAIL_BYTES = 4000
# Packages the engine imports; readable inside its sandbox wherever they are installed.
ENGINE_PACKAGES = ("aka_core", "aka_backend_e2e", "torch", "triton", "numpy", "safetensors")
CONFINEMENT_MODES = ("required", "best_effort", "off")


@attrs.frozen(kw_only=True)
class Timeouts:
    """Deadlines (seconds) of the engine's answers."""

    confine: float = 60.0
    load: float = 900.0
    """Loading the weights and kernels, capturing the decode graph, the warm-up generate."""
    stall: float = 120.0
    """During a generate: the longest wait for any line."""
    generate: float = 1800.0
    """A whole generate."""
    check: float = 120.0
    stop: float = 10.0


def engine_cpus(device: str) -> list[int] | None:
    """The one CPU core a GPU engine runs on, or None (no pinning: a CPU engine, or a host
    where this process may use a single core).

    Measured on an H200 (bench/e2e_step_probe.py): an engine left to the scheduler moves between
    cores and its server loop's decode steps read 5.87-6.05 ms around a graph replay of 5.825 ms;
    pinned to one core, 5.871-5.883 ms (run-to-run throughput 4.3% -> 0.7% standard deviation).
    The core is the last of this process's cores, or an earlier one for a judge whose first
    visible GPU has a higher index (one engine per GPU at a time, so judges of different GPUs
    never share the core), never the only core left to the judge. ``AKA_E2E_ENGINE_CPUS`` in the
    judge's environment (a JSON list of core numbers) chooses them instead, on any device."""
    forced = os.environ.get(CPUS_ENV)
    if forced:
        try:
            cores = json.loads(forced)
            if not (isinstance(cores, list) and cores
                    and all(isinstance(c, int) and c >= 0 for c in cores)):
                raise ValueError("not a list of core numbers")
        except ValueError as exc:
            raise EngineSetupError(f"{CPUS_ENV}={forced!r}: expected a JSON list of CPU core "
                                   f"numbers such as [3] ({exc})") from exc
        return cores
    if device != "cuda" or not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    gpu = int(first) if first.isdigit() else 0
    return [cpus[-1 - gpu % (len(cpus) - 1)]]


def cores_besides(engine: Sequence[int] | None) -> set[int] | None:
    """The cores this thread may use, less the engine's; None when the engine is not pinned or
    nothing would be left."""
    if not engine or not hasattr(os, "sched_getaffinity"):
        return None
    others = os.sched_getaffinity(0) - set(engine)
    return others or None


@contextlib.contextmanager
def off_engine_cores(engine: Sequence[int] | None) -> Iterator[None]:
    """Keep the calling thread off the engine's cores for the block (Linux: an affinity of pid 0
    is the calling thread's), then give it back its own. The judge's threads talk to the engine
    through pipes, and the scheduler tends to wake a pipe's reader on the writer's core: a judge
    thread woken on the engine's core every decode step preempts the engine it is timing."""
    others = cores_besides(engine)
    if others is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, others)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def engine_read_folders() -> list[str]:
    """Folders of installed code the engine imports (the Python installation itself is readable
    by ``sandbox.build_spec``): site-packages and the packages the engine needs."""
    folders = [p for p in site.getsitepackages() if os.path.isdir(p)]
    for name in ENGINE_PACKAGES:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin:
            folders.append(str(Path(found.origin).resolve().parent))
    return folders


def sandbox_protected(protected: Sequence[str | Path]) -> list[str]:
    """The caller's protected paths plus those every runner is kept out of."""
    from aka_core.plugin import SANDBOX_PROTECTED_ALWAYS

    return [str(p) for p in (*protected, *SANDBOX_PROTECTED_ALWAYS)]


class BuiltinAdapter:
    """Starts confined builtin engines. ``weights``: the safetensors file of the workload's model
    (``weights_digest`` is checked by the engine at load); ``protected``: paths the engine must
    not read (the tasks folder, the run folder, the other arm's tree); ``confinement``:
    ``required`` (fail when the host cannot confine), ``best_effort`` or ``off``; ``graph``:
    capture the decode step in a CUDA graph (default: on CUDA); ``dtype``: the engine's
    precision (default: the workload's); ``cpus``: the CPU cores the engine runs on (default:
    ``engine_cpus``, one core for a GPU engine). ``command``, ``extra_read`` and ``env`` replace
    the engine's command line, add readable paths and variables (tests: a fake engine)."""

    name = "builtin"

    def __init__(self, *, weights: Path, weights_digest: str | None, device: str,
                 protected: Sequence[str | Path] = (), confinement: str = "required",
                 graph: bool | None = None, timeouts: Timeouts | None = None,
                 scratch_root: Path | None = None, command: Sequence[str] | None = None,
                 extra_read: Sequence[str | Path] = (), env: Mapping[str, str] | None = None,
                 dtype: str | None = None, cpus: Sequence[int] | None = None):
        if confinement not in CONFINEMENT_MODES:
            raise ValueError(f"confinement must be one of {CONFINEMENT_MODES}, got {confinement!r}")
        self.weights = Path(weights)
        self.weights_digest = weights_digest
        self.device = device
        self.protected = list(protected)
        self.confinement = confinement
        self.graph = device == "cuda" if graph is None else graph
        self.timeouts = timeouts or Timeouts()
        self.scratch_root = scratch_root
        self.command = list(command) if command else [sys.executable, "-I", "-c", BOOT]
        self.extra_read = [str(p) for p in extra_read]
        self.env = dict(env or {})
        self.dtype = dtype
        self.cpus = list(cpus) if cpus is not None else engine_cpus(device)

    def start(self, arm: str, kernels_dir: Path, workload: Any, case: Any,
              log_dir: Path) -> BuiltinRun:
        if arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
        from aka_core.plugin import runner_environment, sandbox

        kernels_dir = Path(kernels_dir).resolve()
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        if self.scratch_root is not None:
            self.scratch_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"aka-e2e-{arm}-", dir=self.scratch_root))
        for sub in ("home", "tmp", "cache"):  # TMPDIR and the caches point here (a compiler
            (scratch / sub).mkdir()          # falls back to /tmp, closed to the engine, without)
        spec = sandbox.build_spec(
            scratch=scratch,
            read=[str(kernels_dir), str(self.weights), *engine_read_folders(), *self.extra_read],
            protected=sandbox_protected(self.protected),
            required=self.confinement == "required")  # no connected sockets of its own, as a
        # kernel's runner: it talks to the judge over pipes (``seccomp``)
        # Triton kernels of a tree run in Triton's interpreter on a CPU (as the triton backend's
        # runners do); never on a GPU.
        interpret = {"TRITON_INTERPRET": "1"} if self.device == "cpu" else {}
        env = {**runner_environment(scratch, interpret), **dict(workload.env), **self.env,
               "AKA_RUNNER_SYSPATH": json.dumps([p for p in sys.path if p and os.path.isdir(p)]),
               **({CPUS_ENV: json.dumps(self.cpus)} if self.cpus else {})}
        try:
            run = BuiltinRun(arm, self.command, env=env, scratch=scratch,
                             log_path=log_dir / f"engine.{arm}.log", timeouts=self.timeouts,
                             cpus=self.cpus)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        try:
            run.confine(spec.to_json(), confine=self.confinement != "off")
            run.load({
                "op": "load", "model": workload.model.config, "weights": str(self.weights),
                "weights_digest": self.weights_digest, "kernels": str(kernels_dir),
                "slots": int(case.max_concurrency),
                "max_len": max_len_of(case),
                "device": self.device, "graph": self.graph,
                "dtype": self.dtype or workload.precision},
                entrypoints=tuple(workload.kernels.entrypoints))
        except BaseException:
            run.stop()
            raise
        return run


class BuiltinRun:
    """One engine process serving one arm."""

    def __init__(self, arm: str, command: Sequence[str], *, env: Mapping[str, str],
                 scratch: Path, log_path: Path, timeouts: Timeouts,
                 cpus: Sequence[int] | None = None):
        self.arm = arm
        self.timeouts = timeouts
        self.scratch = scratch
        self.log_path = log_path
        self.cpus: list[int] | None = list(cpus) if cpus else None
        """The cores the engine is pinned to (None: not pinned); the judge's threads that talk
        to it keep off them."""
        self.info: dict[str, Any] = {"log": str(log_path), "cpus": self.cpus}
        self.lines: queue.Queue[tuple[float, bytes | None, str | None]] = queue.Queue()
        self._stopped = False
        from aka_core.plugin import disk_watch, memory_watch, sandbox

        # Made before the engine starts: a bad AKA_SCRATCH_LIMIT or AKA_MEMORY_LIMIT leaves no
        # process behind.
        self.disk = disk_watch.DiskWatch()
        self.memory = memory_watch.MemoryWatch(shortage=False)
        self.over_limit: str | None = None
        self._log = log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                cwd=scratch, env=dict(env), start_new_session=True, bufsize=0)
        except OSError as exc:
            self._log.close()
            raise EngineSetupError(f"cannot start the engine ({command[0]}): {exc}",
                                   arm=arm) from exc
        # Before "confine", the engine runs nothing it was given: the OOM killer takes the
        # candidate's engine and what it starts first, then the baseline's, then the judge.
        sandbox.set_oom_score_adj(self.proc.pid, sandbox.oom_score_adj(arm))
        # Its disk and memory use watched while it lives: over a limit, the engine's tree is
        # killed and its death is its arm's ``resources`` failure, not a host's fault.
        self.disk.watch(arm, [scratch], roots=lambda: [self.proc.pid], over=self._over_limit)
        self.memory.watch(arm, roots=lambda: [self.proc.pid], over=self._over_limit)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin.fileno()
        os.set_blocking(self._stdin, False)
        self._reader = threading.Thread(target=self._read_stdout, args=(self.proc.stdout.fileno(),),
                                        name=f"aka-e2e-{arm}-reader", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ pipes
    def _read_stdout(self, fd: int) -> None:
        """Reader thread: split stdout into lines, each stamped with the arrival time of the
        chunk that completed it; ``None`` at end of file; an error for an oversized line."""
        others = cores_besides(self.cpus)
        if others is not None:
            os.sched_setaffinity(0, others)  # this thread only, for its whole life
        buffer = bytearray()
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:
                chunk = b""
            now = time.perf_counter()
            if not chunk:
                self.lines.put((now, None, None))
                return
            buffer += chunk
            while (newline := buffer.find(b"\n")) >= 0:
                self.lines.put((now, bytes(buffer[:newline]), None))
                del buffer[: newline + 1]
            if len(buffer) > MAX_LINE_BYTES:
                self.lines.put((now, None, f"a line of more than {MAX_LINE_BYTES} bytes"))
                return

    def send(self, message: Mapping[str, Any], timeout: float) -> None:
        """Write one command line, bounded: an engine that stops reading is a timeout."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._failure(EngineTimeout, "did not read its commands in time")
            _, ready, _ = select.select([], [self._stdin], [], remaining)
            if not ready:
                continue
            try:
                written = os.write(self._stdin, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise self._failure(EngineCrashed, "exited (its command pipe is closed)") from None
            view = view[written:]

    def receive(self, timeout: float, what: str) -> tuple[float, dict[str, Any]]:
        """The next line (its arrival time and JSON object), within ``timeout`` seconds."""
        got = self.poll(timeout, what)
        if got is None:
            raise self._failure(EngineTimeout, f"no answer within {timeout:.0f} s ({what})")
        return got

    def poll(self, timeout: float, what: str) -> tuple[float, dict[str, Any]] | None:
        """The next line within ``timeout`` seconds, or None."""
        try:
            at, line, error = self.lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None
        if error is not None:
            self.lines.put((at, None, error))  # every later read fails the same way
            raise self._failure(EngineProtocolError, f"sent {error} ({what})")
        if line is None:
            self.lines.put((at, None, None))
            raise self._failure(EngineCrashed, f"exited ({what})")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            raise self._failure(EngineProtocolError, f"sent a line that is not JSON ({what}): "
                                f"{line[:200]!r}") from None
        if not isinstance(message, dict):
            raise self._failure(EngineProtocolError, f"sent a line that is not a JSON object "
                                f"({what})")
        return at, message

    def _over_limit(self, message: str) -> None:
        """A watch's verdict (from its thread): the engine and its tree killed now."""
        if self.over_limit is None:  # the first verdict is the one the failure gives
            self.over_limit = message
        kill_group(self.proc)

    def _failure(self, cls: type[EngineFailure], message: str, phase: str = "") -> EngineFailure:
        if self.over_limit is not None and cls in (EngineCrashed, EngineTimeout,
                                                   EngineProtocolError):
            cls, message = EngineOverLimit, f"was stopped: {self.over_limit}"
        if cls is EngineCrashed:
            try:
                code = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            message += f" (exit status {code})" if code is not None else ""
        tail = self.stderr_tail()
        return cls(message + (f"; its log ends: {tail}" if tail else ""), arm=self.arm,
                   phase=phase or self.info.get("phase", ""), log=str(self.log_path))

    def stderr_tail(self) -> str:
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - STDERR_TAIL_BYTES))
                return handle.read().decode(errors="replace").strip()[-STDERR_TAIL_BYTES:]
        except OSError:
            return ""

    # ------------------------------------------------------------------ start-up
    def confine(self, sandbox: Mapping[str, Any], *, confine: bool) -> None:
        """Nothing of the tree has run yet: any failure here is the host's or the evaluator's."""
        self.info["phase"] = "startup"
        try:
            self.send({"op": "confine", "sandbox": dict(sandbox), "confine": confine},
                      self.timeouts.confine)
            _, reply = self.receive(self.timeouts.confine, "confine")
        except EngineFailure as exc:
            raise EngineSetupError(f"the {self.arm} engine did not start: {exc.message}",
                                   arm=self.arm) from exc
        if not reply.get("ok"):
            raise EngineSetupError(f"the {self.arm} engine could not be confined: "
                                   f"{reply.get('error') or reply.get('message') or reply}",
                                   arm=self.arm)
        self.info["confinement"] = reply.get("confinement")

    def load(self, command: Mapping[str, Any], *, entrypoints: Sequence[str]) -> dict[str, Any]:
        """Load the model and the kernel tree; the engine's warm-up must have called every
        declared entrypoint."""
        from aka_backend_e2e.engine_main import IMPORTING

        self.info["phase"] = "load"
        started = time.monotonic()
        self.send(command, self.timeouts.load)
        _, reply = self.receive(self.timeouts.load, "load")
        importing = reply.get("event") == IMPORTING
        if importing:  # the tree's code runs from here: what fails now is the arm's
            _, reply = self.receive(max(0.0, self.timeouts.load - (time.monotonic() - started)),
                                    "load")
        if not reply.get("ok"):
            error = str(reply.get("error") or reply)[:4000]
            if reply.get("build_error"):
                place = protocol.source_place(reply.get("file"), reply.get("line"))
                where = ":".join(str(x) for x in (place["file"], place["line"]) if x)
                raise KernelLoadFailed(f"the kernel tree did not load: "
                                       f"{where + ': ' if where else ''}{error}", arm=self.arm,
                                       phase="load", log=str(self.log_path))
            if "traceback" in reply:  # the warm-up generate ran the tree's kernels and failed
                raise self._failure(EngineCrashed, f"failed its warm-up: {error}", phase="load")
            if importing:  # a failure the tree's code could have written itself
                raise self._failure(EngineCrashed, f"failed once its kernel tree was imported: "
                                    f"{error}", phase="load")
            # Settings and weights are checked before the tree is imported: not the arm's doing.
            raise EngineSetupError(f"the {self.arm} engine could not load: {error}",
                                   arm=self.arm, phase="load")
        called = reply.get("entrypoints_called")
        if not isinstance(called, list):
            raise self._failure(EngineProtocolError, "its load reply lacks entrypoints_called")
        missing = [name for name in entrypoints if name not in called]
        if missing:
            raise self._failure(EngineProtocolError, "never called the kernel tree's "
                                f"{', '.join(missing)} during its warm-up", phase="load")
        self.info.update(load_s=reply.get("load_s"), kernel_digest=reply.get("kernel_digest"),
                         entrypoints_called=called)
        # The rest of the reply (device, dtype, graph, slots ...): diagnostics, small ones only.
        self.info["engine"] = {k: v for k, v in reply.items()
                               if k != "ok" and len(json.dumps(v, default=str)) <= 4096}
        return reply

    # ------------------------------------------------------------------ serving
    def request(self, message: Mapping[str, Any], timeout: float | None = None
                ) -> dict[str, Any]:
        """Send one command and return its one reply (e.g. ``check`` of the operator oracle)."""
        timeout = self.timeouts.check if timeout is None else timeout
        self.info["phase"] = str(message.get("op", ""))
        self.send(message, timeout)
        return self.receive(timeout, str(message.get("op")))[1]

    def check(self, kernel: str, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None,
              timeout: float | None = None) -> dict[str, Any]:
        """One call of ``kernel`` on the engine's device (tensors encoded as the protocol says)."""
        return self.request({"op": "check", "kernel": kernel, "args": list(args),
                             "kwargs": dict(kwargs or {})}, timeout)

    def generate(self, requests: Sequence[Request], rate: float, *, seed: int = 0,
                 max_concurrency: int | None = None) -> RunResult:
        """Send ``requests`` (at ``rate`` per second by the judge's clock: ``inf``, all due at
        once; else each due at its ``arrival_offsets``), a request only while fewer than
        ``max_concurrency`` are in flight (sent, not done: the judge's count, not the engine's),
        the requests sendable at one moment in one command; read the engine's lines until every
        request is sent and done and the engine is idle. All at once under a limit (a closed
        loop), each command says how many requests will follow (the engine waits for them rather
        than racing the pipe: ``BuiltinEngine.expect``). An engine that never finishes a request
        fails by the stall or generate deadline. The calling thread keeps off the engine's
        cores meanwhile (``off_engine_cores``)."""
        with off_engine_cores(self.cpus):
            return self._generate(requests, rate, seed=seed, max_concurrency=max_concurrency)

    def _generate(self, requests: Sequence[Request], rate: float, *, seed: int,
                  max_concurrency: int | None) -> RunResult:
        from aka_backend_e2e.measure import arrival_offsets

        self.info["phase"] = "generate"
        if len({r.id for r in requests}) != len(requests):
            raise ValueError("request ids must be unique")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        limit = len(requests) if max_concurrency is None else max_concurrency
        results = {r.id: RequestResult(id=r.id, expected_tokens=r.max_tokens) for r in requests}
        offsets = arrival_offsets(len(requests), rate, seed)
        if not requests:
            now = time.perf_counter()
            return RunResult(arm=self.arm, requests={}, start=now, end=now)
        start = time.perf_counter()
        deadline = time.monotonic() + self.timeouts.generate
        next_index = 0
        in_flight = 0
        # All due at once under a limit: the next request goes out as soon as one is done, and
        # the engine is told so (it admits each at the step after the one that freed its slot).
        closed_loop = math.isinf(rate) and limit < len(requests)

        def send_due() -> None:
            """Send every request that is due while the limit allows, in one command."""
            nonlocal next_index, in_flight
            batch: list[Request] = []
            while (next_index < len(requests) and in_flight + len(batch) < limit
                   and time.perf_counter() - start >= offsets[next_index]):
                batch.append(requests[next_index])
                next_index += 1
            if not batch:
                return
            at = time.perf_counter()
            for req in batch:
                results[req.id].sent = at
            in_flight += len(batch)
            command: dict[str, Any] = {"op": "generate", "requests": [r.to_json() for r in batch]}
            if closed_loop:
                command["expect"] = {"more": len(requests) - next_index, "window": limit}
            self.send(command, max(deadline - time.monotonic(), 0.0))

        send_due()
        start = min(r.sent for r in results.values() if r.sent is not None)
        end = start
        stall_until = time.monotonic() + self.timeouts.stall
        while True:
            now = time.monotonic()
            if now > deadline:
                raise self._failure(EngineTimeout, f"did not finish {len(requests)} requests "
                                    f"within {self.timeouts.generate:.0f} s")
            if now > stall_until:
                raise self._failure(EngineTimeout, f"sent nothing for {self.timeouts.stall:.0f} s "
                                    "while requests were pending")
            wait = min(stall_until, deadline) - now
            if next_index < len(requests) and in_flight < limit:
                wait = min(wait, max(start + offsets[next_index] - time.perf_counter(), 0.0))
            got = self.poll(wait, "generate")
            if got is not None:
                at, message = got
                end = at
                stall_until = time.monotonic() + self.timeouts.stall
                idle = self._take(message, at, results)
                if "done" in message:
                    in_flight -= 1
                # Idle with every request sent and done: the run is over. (An idle read while
                # requests are pending answered an earlier command: the engine goes on.)
                if idle and next_index >= len(requests) and all(
                        r.completed is not None for r in results.values()):
                    break
            send_due()
        widened = self.cores_left()
        if widened:
            raise self._failure(SettingChanged, f"the engine left its CPU cores {self.cpus}: "
                                f"{'; '.join(widened[:4])} (the judge pins every engine alike)")
        return RunResult(arm=self.arm, requests=results, start=start, end=end,
                         info={k: v for k, v in self.info.items() if k != "phase"})

    def _take(self, message: dict[str, Any], at: float,
              results: dict[str, RequestResult]) -> bool:
        """Apply one generate line; True when the engine says it is idle."""
        if "step" in message:
            step = message["step"]
            if not isinstance(step, list):
                raise self._failure(EngineProtocolError, "sent a step that is not a list")
            for item in step:
                if not (isinstance(item, list) and len(item) == 3):
                    raise self._failure(EngineProtocolError, f"sent a malformed step entry "
                                        f"{str(item)[:100]}")
                rid, token, logprob = item
                got = results.get(rid) if isinstance(rid, str) else None
                if got is None or got.sent is None:
                    raise self._failure(EngineProtocolError, f"sent a token for request "
                                        f"{str(rid)[:80]!r}, which was not sent")
                if got.completed is not None:
                    raise self._failure(EngineProtocolError, f"sent a token for request {rid} "
                                        "after it was done")
                if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                    raise self._failure(EngineProtocolError, f"sent token {token!r} for {rid}")
                if isinstance(logprob, bool) or not isinstance(logprob, int | float):
                    raise self._failure(EngineProtocolError, f"sent logprob {logprob!r} for {rid}")
                if len(got.tokens) >= got.expected_tokens:
                    raise self._failure(EngineProtocolError, f"sent more than max_tokens "
                                        f"({got.expected_tokens}) tokens for {rid}")
                got.add(token, float(logprob), at)
            return False
        if "done" in message:
            rid = message["done"]
            got = results.get(rid) if isinstance(rid, str) else None
            if got is None or got.sent is None or got.completed is not None:
                raise self._failure(EngineProtocolError, f"said request {str(rid)[:80]!r} is done "
                                    "(not sent, or done already)")
            got.completed = at
            return False
        if message.get("idle") is True:
            self.info["steps"] = message.get("steps")
            return True
        if message.get("ok") is False:
            error = str(message.get("error"))[:2000]
            if message.get("fatal"):
                raise self._failure(EngineCrashed, f"failed while generating: {error}")
            raise self._failure(EngineProtocolError, f"refused a generate command: {error}")
        raise self._failure(EngineProtocolError, f"sent an unexpected line {str(message)[:200]}")

    # ------------------------------------------------------------------ stopping
    def cores_left(self) -> list[str]:
        """Threads of the engine, or of any process below it, allowed on cores other than the
        ones it was pinned to ("pid/tid: cores"); empty when it is not pinned or stayed."""
        from aka_core.plugin import children

        if not self.cpus:
            return []
        pinned, found, todo, seen = set(self.cpus), [], [self.proc.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:  # gone
                continue
            for tid in tids:
                try:
                    cores = os.sched_getaffinity(tid)
                except OSError:
                    continue
                if not cores <= pinned:
                    found.append(f"{pid}/{tid}: {sorted(cores)}")
            todo.extend(children(pid))
        return found

    def stop(self) -> None:
        """Ask the engine to stop, then kill its whole process group (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            try:
                self.send({"op": "stop"}, min(self.timeouts.stop, 2.0))
            except EngineFailure:
                pass
            try:
                self.proc.wait(timeout=self.timeouts.stop)
            except subprocess.TimeoutExpired:
                pass
        self.info["disk"] = self.disk.stop()
        self.info["memory"] = self.memory.stop()
        kill_group(self.proc)
        # The reader sees end of file once the group is gone; join it before closing the pipe,
        # so that it never reads a descriptor number reused by someone else.
        self._reader.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill everything ``proc`` started: its process group (started with ``start_new_session``)
    and every process below it, those that left the group for a session of their own included
    (the engine's supervisor is a child subreaper: what the engine's tree leaves behind stays
    below it). The group and the tree are frozen first, top down, so that nothing forks while
    it is being found; then everything found is killed, and ``proc`` reaped."""
    from aka_core.plugin import signal_pids, signal_tree

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGSTOP)
    frozen = signal_tree(proc.pid, signal.SIGSTOP) if proc.poll() is None else []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    signal_pids(frozen, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def max_len_of(case: Any) -> int:
    """The longest sequence a case needs (prompt and output at their upper bounds)."""
    return int(case.input_len[1]) + int(case.output_len[1])

