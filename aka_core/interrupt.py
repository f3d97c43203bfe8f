"""Stopping aka: SIGTERM becomes an exception, as Ctrl-C is, so that what aka started stops too.

Python turns Ctrl-C (SIGINT) into ``KeyboardInterrupt``, but SIGTERM (``kill``, a scheduler's
preemption, ``ParallelRun.stop`` ending a worker) ends the process at once: no ``finally`` runs, and
an agent CLI, which runs in a session of its own so that it can be stopped as a group, would keep
running with its children. With ``install_sigterm_handler`` SIGTERM raises ``Interrupted`` in the
main thread instead: the agent runtime stops the CLI and everything it started, the judge's
``finally`` kills the judge, the lifecycle records the interrupted task (``interrupted.json`` in its
folder, kept when ``aka run --resume`` sets the attempt aside) and aka exits with 143.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_SIGTERM = 128 + signal.SIGTERM


class Interrupted(BaseException):
    """aka was asked to stop by a signal (SIGTERM). A ``BaseException``, as ``KeyboardInterrupt``
    is, so that ``except Exception`` (how a task's own failures are caught) never swallows it."""

    def __init__(self, signal_name: str):
        super().__init__(f"stopped by {signal_name}")
        self.signal_name = signal_name


INTERRUPTS: tuple[type[BaseException], ...] = (KeyboardInterrupt, Interrupted)
"""What stopping aka raises: Ctrl-C and SIGTERM."""


def signal_name(exc: BaseException) -> str:
    """The signal behind an interruption: ``SIGINT`` for Ctrl-C."""
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While in the block, SIGTERM raises ``Interrupted`` in the main thread (the first one; later
    ones are ignored while aka stops what it started); the previous handler comes back after.
    Does nothing outside the main thread."""
    previous = signal.getsignal(signal.SIGTERM)
    installed = install_sigterm_handler()
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def install_sigterm_handler() -> bool:
    """Make SIGTERM raise ``Interrupted`` in the main thread (the first one; later ones are ignored
    while aka stops what it started). Returns False where it cannot (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired:
            return
        fired.append(signum)
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)
    return True


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """While stopping processes (an agent's, after an interruption or at the end of its run):
    SIGINT and SIGTERM that arrive are held and delivered once the block is done, so a second
    Ctrl-C cannot cut the cleanup short and leave processes running, and none is lost. Does
    nothing outside the main thread (only there do Python's handlers run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)
