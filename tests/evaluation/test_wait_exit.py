"""A killed runner is waited for until it is gone, and no longer: the wait wakes when the process
exits (``Popen.wait`` with a timeout looks only every 50 ms), and still gives up at its limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aka_core.evaluation import sides


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_the_wait_ends_when_the_process_exits() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    states: list[str] = []
    real_wait = proc.wait

    def wait(timeout: float | None = None) -> int:
        # What the process is when Popen's own wait starts: gone already (a zombie), so Popen
        # never polls for it.
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        states.append(stat.rsplit(")", 1)[1].split()[0])
        return real_wait(timeout)

    proc.wait = wait  # type: ignore[method-assign]
    try:
        assert sides.wait_exit(proc, 30) == 0
    finally:
        proc.kill()
        real_wait()
    assert states == ["Z"]


def test_a_killed_process_is_waited_for() -> None:
    proc = sleeper()
    try:
        os.kill(proc.pid, signal.SIGKILL)
        assert sides.wait_exit(proc, 30) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_does_not_exit_times_out() -> None:
    proc = sleeper()
    try:
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            sides.wait_exit(proc, 0.2)
        assert 0.15 < time.monotonic() - started < 5
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_without_pidfd_popen_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(pid: int) -> int:
        raise OSError(38, "pidfd_open is not implemented here")

    monkeypatch.setattr(os, "pidfd_open", refused, raising=False)
    proc = sleeper()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            sides.wait_exit(proc, 0.1)
        proc.kill()
        assert sides.wait_exit(proc, 30) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_an_exited_process_is_answered_at_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert sides.wait_exit(proc, 0.0) == 0
