"""The end of a log file, read from its end: a candidate may print gigabytes."""

from __future__ import annotations

import os
from pathlib import Path


def tail(path: Path, limit: int = 4000) -> str:
    """The last ``limit`` bytes of ``path`` as text ("" if it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
