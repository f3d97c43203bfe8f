"""Checks every test shares: a test must leave the process's signal handling as it found it (a
test run after it, in the same worker, would otherwise see Ctrl-C or SIGTERM behave otherwise)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

WATCHED = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def signal_handling_unchanged() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {sig: signal.getsignal(sig) for sig in WATCHED}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = [signal.Signals(sig).name for sig, handler in handlers.items()
               if signal.getsignal(sig) != handler]
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    now = signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if now != mask:
        changed.append(f"the blocked signals ({sorted(s.name for s in now)})")
    if changed:
        pytest.fail(f"the test left changed: {', '.join(changed)} (restored for the next test)")
