"""The state folders of this host's reward services, for the agents' sandbox to hide.

A service's state folder holds its queue (each request's secret held-out draw) and the files of
the candidates waiting for a slot: other rollouts' work. ``aka serve --state`` may put it
anywhere (``./.aka-serve`` by default), where a confined agent of ``aka run`` on the same host
could read it: its sandbox shows the host read-only but for the folders it hides. Each service
therefore records its state folder in ``~/.aka/service-states/`` (itself hidden from agents,
with the rest of ``$HOME``), and ``aka run`` hides every folder recorded there from its agents.
A record stays after its service stops (the queue, and its draws, are resumed by the next start);
one whose folder is gone is dropped when the records are read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from pathlib import Path

MAX_RECORDS = 256
"""Read at most this many records (each a path): a folder of records is the host's, but a run
must not stall on a flood of them."""


def records_folder() -> Path:
    return Path.home() / ".aka" / "service-states"


def record(state: Path) -> None:
    """Record ``state`` as a service's state folder (nothing where the home folder is not
    writable: the service runs, its folder is then not hidden from agents)."""
    folder = records_folder()
    path = str(state.resolve())
    name = hashlib.sha256(path.encode()).hexdigest()[:24]
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        (folder / name).write_text(path + "\n")


def recorded() -> tuple[Path, ...]:
    """The recorded state folders that still exist, but none that holds aka's installation or
    the Python running it (hiding it would leave an agent without its tools)."""
    folder = records_folder()
    keep = [Path(sys.prefix).resolve(), Path(__file__).resolve()]
    found: list[Path] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_RECORDS]
    except OSError:
        return ()
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False) or entry.stat().st_size > 4096:
                continue
            state = Path(Path(entry.path).read_text().strip())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        try:
            if not state.is_absolute() or not state.is_dir():
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)  # its folder is gone
                continue
        except OSError:
            continue
        if any(p == state or p.is_relative_to(state) for p in keep):
            continue
        found.append(state)
    return tuple(found)
