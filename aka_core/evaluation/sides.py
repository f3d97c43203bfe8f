"""The judge's handle on one runner process: start it confined, ask it things, stop it.

Each runner runs in a session of its own, confined by a ``SandboxSpec`` it applies before it
imports anything it was asked to run, with private caches (Triton, native builds, CUDA's JIT
cache) and a private temporary folder in its scratch folder. The judge is a child subreaper, so
processes a runner leaves behind (even ones that started their own session) come back to the judge
and are killed with the runner.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aka_core.evaluation import protocol
from aka_core.evaluation.evaluate import die_with_parent
from aka_core.evaluation.failures import FailureKind
from aka_core.processes import children, descendants, signal_pids, signal_tree
from aka_core.tails import tail

PR_SET_CHILD_SUBREAPER = 36

# Why a block may never be armed: its calls are queued behind the judge's start signal, so a call
# that waits for the GPU, or more queued launches than the GPU accepts, blocks the runner.
ARM_HINT = (": its calls are queued behind the judge's start signal, so a call that waits for "
            "the GPU (.item(), torch.nonzero, boolean-mask indexing, a copy to the host, a "
            "synchronize) blocks there, and so, most likely, does a block of more launches than "
            "the GPU's launch queue holds; keep every call asynchronous and its launches few")


RAISED = "raised"
"""A ``SideFailure``'s kind when the side's own code raised: whose fault that is depends on the
side and the phase (``Judge.side_failure``)."""


class SideFailure(Exception):
    """A runner failed a request; ``kind`` is ``FailureKind.TIMEOUT``, ``CRASHED``, ``PROTOCOL``
    or ``RAISED``, which the judge turns into the evaluation's failure (``Judge.side_failure``)."""

    def __init__(self, kind: str, message: str, **details: Any):
        super().__init__(message)
        self.kind = kind
        self.details = details


def become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap() -> None:
    """Collect exited children (the judge is a subreaper: orphans become its children)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


DISK_LIMIT = "disk_limit"
"""A failure's ``cause`` when the judge killed the side for its disk use (``disk_watch``)."""
MEMORY_LIMIT = "memory_limit"
"""A failure's ``cause`` when the judge killed the side for the host memory or the processes
it held (``memory_watch``)."""
UNASKED = "unasked_descriptors"
"""A failure's ``cause`` when the judge stopped the side for what it sent on the judge's
descriptor socket unasked (``RunnerProcess.unasked``): a breach of the protocol."""
WATCHED = (DISK_LIMIT, MEMORY_LIMIT)


class RunnerProcess:
    """One runner. ``request`` sends a command and returns the reply, or raises ``SideFailure``."""

    def __init__(self, side: str, *, scratch: Path, env: Mapping[str, str], log_path: Path):
        self.side = side
        self.scratch = scratch
        self.log_path = log_path
        self.counter = 0
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # File descriptors of GPU memory travel on a socket of their own (SCM_RIGHTS).
        self.fd_socket, child_socket = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fd = child_socket.fileno()
        for sub in ("home", "tmp", "cache"):
            (scratch / sub).mkdir(parents=True, exist_ok=True)
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        full_env = {**env, "AKA_RUNNER_SYSPATH": json.dumps(paths)}
        from aka_core.evaluation import runner as runner_module
        from aka_core.evaluation import sandbox

        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", runner_module.BOOT, str(cmd_r), str(rep_w),
                 str(child_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(cmd_r, rep_w, child_fd), cwd=scratch, env=full_env, start_new_session=True,
                # The OOM killer takes a candidate's processes first, then a baseline's.
                preexec_fn=die_with_parent(os.getpid(), sandbox.oom_score_adj(side)),
            )
        os.close(cmd_r)
        os.close(rep_w)
        child_socket.close()
        self.cmd_fd = cmd_w
        self.replies = protocol.LineReader(rep_r)
        self.stopped = False
        self.frozen: list[int] = []
        self.op_stats: dict[str, dict[str, Any]] = {}
        self._sent = ("", 0.0)
        self.dead = False
        self.over_limit: str | None = None
        """Why the judge killed this side for its disk or memory use (``disk_watch``,
        ``memory_watch``), if it did; ``over_cause`` says which."""
        self.over_cause = DISK_LIMIT
        self._fd_lock = threading.Lock()
        self._fds_due = 0
        """Descriptors the judge asked for (a ``setup`` sent) and has not received yet."""

    waited_s = 0.0
    """Seconds the judge waited on this side: its answers (``answer``) and its timed blocks."""

    # ------------------------------------------------------------------ messages
    def send(self, **message: Any) -> None:
        self._sent = (str(message.get("op")), time.monotonic())
        if message.get("op") == "setup":
            with self._fd_lock:
                self._fds_due += 1
        try:
            protocol.send(self.cmd_fd, message)
        except (BrokenPipeError, OSError) as exc:
            raise self._gone(f"the {self.side} runner is gone ({exc})") from None

    def read(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            reply = self.replies.read(timeout)
            self._count(reply)
            return reply
        except protocol.RunnerGone as exc:
            if exc.timed_out:
                raise SideFailure(FailureKind.TIMEOUT, f"the {self.side} did not answer within "
                                  f"{timeout:.0f} s ({what}){ARM_HINT if what == 'arm' else ''}",
                                  side=self.side) from None
            raise self._gone(f"the {self.side} runner exited during {what}") from None
        except protocol.ProtocolError as exc:
            raise SideFailure(FailureKind.PROTOCOL, f"the {self.side} runner broke the protocol: {exc}",
                              side=self.side) from None

    def request(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        self.send(op=op, **fields)
        return self.answer(op, timeout)

    def answer(self, op: str, timeout: float) -> dict[str, Any]:
        """The reply to ``op`` (sent before), or ``SideFailure``. The seconds waited add to
        ``waited_s`` (whose waits used up a phase: ``Judge.spent_by_candidate``)."""
        started = time.monotonic()
        try:
            reply = self.read(timeout, op)
        finally:
            self.waited_s += time.monotonic() - started
        if reply.get("ok") is not True:
            error = str(reply.get("error", "failed"))[:4000]
            raise SideFailure(RAISED, error, side=self.side,
                              traceback=str(reply.get("traceback", ""))[-3000:],
                              build_error=bool(reply.get("build_error")),
                              **protocol.source_place(reply.get("file"), reply.get("line")))
        return reply

    def receive_fd(self, tag: str, timeout: float = 30.0) -> int:
        """The file descriptor the runner sent with ``tag`` (its reply said it did)."""
        with self._fd_lock:
            try:
                self.fd_socket.settimeout(timeout)
                message, fds, _, _ = socket.recv_fds(self.fd_socket, 256, 4)
            except (TimeoutError, OSError) as exc:
                raise SideFailure(FailureKind.PROTOCOL, f"the {self.side} runner sent no memory "
                                  f"descriptor ({exc})", side=self.side) from None
            finally:
                self._fds_due = max(0, self._fds_due - 1)
        if message.decode(errors="replace") != tag or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise SideFailure(FailureKind.PROTOCOL, f"the {self.side} runner sent {len(fds)} descriptors "
                              f"tagged {message[:40]!r}, expected one tagged {tag!r}",
                              side=self.side)
        return fds[0]

    def unasked(self) -> str | None:
        """What the runner queued on its descriptor socket that the judge did not ask for, or
        None. A memory file sent there and closed by its sender is held by the socket's queue:
        in no process's size, behind no descriptor of the side's, so the memory watch (which
        calls this, from its thread) would not see it. An honest runner sends one descriptor
        per ``setup``, which the judge receives at once; anything else is drained here, each
        descriptor closed (its memory freed), and the side is to be stopped."""
        if self._fds_due or self.cmd_fd == -1 or not self._fd_lock.acquire(blocking=False):
            return None
        try:
            if self._fds_due:
                return None
            queued = queued_bytes(self.fd_socket)
            if not queued:
                return None
            count, held = drain_descriptors(self.fd_socket)
        finally:
            self._fd_lock.release()
        from aka_core.evaluation.watch_thread import size_text

        data = f"{queued} byte{'' if queued == 1 else 's'}"
        if not count:
            return f"it wrote {data} on its descriptor socket that the judge did not ask for"
        files = f"{count} file descriptor{'' if count == 1 else 's'}"
        return (f"it sent {files} ({size_text(held)} in their files) and {data} on its "
                f"descriptor socket that the judge did not ask for (a file queued there is "
                f"memory no process's size shows)")

    def _count(self, reply: Mapping[str, Any]) -> None:
        """Diagnostics of where an evaluation's time goes: per operation, how many, the judge's
        seconds from request to reply, and the seconds the runner says it was busy (its word,
        never used for anything but this record)."""
        op, sent = self._sent
        entry = self.op_stats.setdefault(op, {"count": 0, "round_trip_s": 0.0, "busy_s": 0.0})
        entry["count"] += 1
        entry["round_trip_s"] += time.monotonic() - sent
        busy = reply.get("busy_s")
        if isinstance(busy, int | float) and 0 <= busy < 1e6:
            entry["busy_s"] += float(busy)
        steps = reply.get("steps")
        if isinstance(steps, dict):
            kept = entry.setdefault("steps_s", {})
            for name, seconds in list(steps.items())[:16]:
                if isinstance(seconds, int | float) and 0 <= seconds < 1e6:
                    kept[str(name)[:40]] = kept.get(str(name)[:40], 0.0) + float(seconds)

    def _gone(self, message: str) -> SideFailure:
        if self.over_limit is not None:
            self.dead = True
            kind = FailureKind.PROTOCOL if self.over_cause == UNASKED else FailureKind.RESOURCES
            return SideFailure(kind, f"the {self.side} was stopped: "
                               f"{self.over_limit}", side=self.side, cause=self.over_cause,
                               log_tail=tail(self.log_path))
        # Its group first, while the runner is not yet collected (its pid, the group's number,
        # cannot be another's): what it started stays in the group (the seccomp filter keeps it
        # there), and a runner that exits on its own would leave it to kills by pid, which a
        # process that hops from pid to pid outruns.
        self._kill_group()
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        self.dead = True
        detail = message
        if code is not None and code < 0:
            try:
                detail += f" (killed by {signal.Signals(-code).name})"
            except ValueError:
                detail += f" (signal {-code})"
        elif code is not None:
            detail += f" (exit status {code})"
        return SideFailure(FailureKind.CRASHED, detail, side=self.side, exit_code=code,
                           log_tail=tail(self.log_path))

    # ------------------------------------------------------------------ process control
    def stop(self, spare: int | None = None) -> None:
        """Freeze the runner's processes (its GPU work already queued is not stopped), and every
        other process that came back to the judge (a subreaper: orphans of a runner that left
        its tree become the judge's children) except ``spare`` (the other runner's pid)."""
        if self.dead or self.stopped:
            return
        frozen = self._signal_tree(signal.SIGSTOP)
        for child in children(os.getpid()):
            if child not in (self.proc.pid, spare):
                frozen += signal_tree(child, signal.SIGSTOP)
        self.frozen = frozen
        self.stopped = True

    def cont(self) -> None:
        """Thaw exactly what ``stop`` froze (a frozen process started nothing since)."""
        if self.stopped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGCONT)
            signal_pids(self.frozen, signal.SIGCONT)
            self.frozen = []
            self.stopped = False

    def _signal_tree(self, sig: int) -> list[int]:
        """The runner's process group at once, then its tree top down; the pids signalled."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        return signal_tree(self.proc.pid, sig)

    def _kill_group(self) -> None:
        """SIGKILL the runner's process group, which holds everything it started, whole: sent
        even when the runner is gone, for what it left there."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def kill_soon(self) -> None:
        """SIGKILL the runner and everything it started, without waiting (``kill`` waits): two
        runners' exits, their GPU contexts torn down, then overlap."""
        if not self.dead:
            self._signal_tree(signal.SIGKILL)  # its group first, then its tree
        else:
            self._kill_group()  # the runner is gone; what it left in its group may not be

    def kill(self) -> None:
        """Kill the runner and everything it started; wait until it is gone (its GPU context
        with it)."""
        if self.proc.poll() is not None and self.dead:
            self._kill_group()  # the runner is gone; what it left in its group may not be
        else:
            self._signal_tree(signal.SIGKILL)
            try:
                wait_exit(self.proc, 30)
            except subprocess.TimeoutExpired:
                pass
        self.dead = True
        if self.cmd_fd != -1:  # once: a number closed twice may by then be another open file's
            for fd in (self.cmd_fd, self.replies.fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            with self._fd_lock:  # the memory watch's thread may be looking at it (``unasked``)
                self.fd_socket.close()
                self.cmd_fd = -1
        reap()


def queued_bytes(sock: socket.socket) -> int:
    """Bytes waiting in ``sock``'s receive queue (``SIOCINQ``; 0 where it cannot tell). A
    descriptor travels with at least one byte on a stream socket, so none are queued at 0."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD,
                                                  b"\0\0\0\0"))[0])
    except (OSError, ValueError):
        return 0


def drain_descriptors(sock: socket.socket, max_messages: int = 4096) -> tuple[int, int]:
    """Everything queued on ``sock`` read without waiting, each descriptor it carried closed:
    (descriptors, the bytes their files held on disk or in memory)."""
    count = held = 0
    timeout = sock.gettimeout()
    # Non-blocking for the drain: a socket with a timeout (``receive_fd`` sets one) would wait
    # that long for more, MSG_DONTWAIT or not, holding the memory watch's thread.
    sock.setblocking(False)
    try:
        for _ in range(max_messages):
            message = _next_message(sock)
            if message is None:
                break
            data, fds = message
            for fd in fds:
                with contextlib.suppress(OSError):
                    held += os.fstat(fd).st_blocks * 512
                with contextlib.suppress(OSError):
                    os.close(fd)
            count += len(fds)
            if not data and not fds:
                break
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)
    return count, held


def _next_message(sock: socket.socket) -> tuple[bytes, list[int]] | None:
    """One message queued on the non-blocking ``sock`` and the descriptors it carried; None when
    nothing is queued or the socket is closed."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, 65536, 253)
    except OSError:
        return None
    return data, fds


def wait_exit(proc: subprocess.Popen[Any], timeout: float) -> int:
    """``proc.wait(timeout)``, woken the moment the process exits: ``Popen.wait`` with a timeout
    polls, at 50 ms between looks once it has waited 64 ms (a runner killed with its CUDA
    context takes 60-110 ms to go, and every look past it was held by the GPU lock). Raises
    ``subprocess.TimeoutExpired`` as ``Popen.wait`` does."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (or the process is already reaped)
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0.0, timeout) * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(pidfd)
    return proc.wait(timeout=timeout)  # it has exited: reaped at once


def kill_orphans(keep: set[int]) -> None:
    """Kill the processes below this (subreaper) one, except ``keep`` and what is below them."""
    kept = set(keep).union(*(descendants(k) for k in keep))
    found = False
    for pid in descendants(os.getpid()):
        if pid in kept:
            continue
        found = True
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if found:  # a moment for them to exit before they are collected (none found: no wait)
        time.sleep(0.01)
    reap()


def kill_orphans_and_wait(keep: set[int], timeout: float = 5.0) -> bool:
    """``kill_orphans`` until none is left (each one's exit complete, its GPU memory freed with
    its context), at most ``timeout`` seconds; True if none is left."""
    deadline = time.monotonic() + timeout
    while True:
        kill_orphans(keep)
        kept = set(keep).union(*(descendants(k) for k in keep))
        if not [pid for pid in descendants(os.getpid()) if pid not in kept]:
            return True
        if time.monotonic() > deadline:
            return False
