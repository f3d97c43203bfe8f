"""A progress bar for a run, on stderr, shown only where a person is watching.

``RunProgress`` draws a rich progress bar when the run has more than one task and stderr is a
terminal; otherwise every method does nothing, so callers never branch on it. Each finished task
also prints one line above the bar (status and score). Safe to call from several threads.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

_STATUS_STYLE = {"completed": "green", "compile_only": "cyan", "skipped": "yellow", "error": "red"}


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class RunProgress:
    """Context manager: ``with RunProgress(task_ids) as progress: progress.start_task(id) ...``.

    ``enabled``: ``None`` decides from the task count and whether stderr is a terminal.
    """

    def __init__(self, task_ids: Sequence[str] | int, *, enabled: bool | None = None,
                 console: Console | None = None):
        self.total = task_ids if isinstance(task_ids, int) else len(task_ids)
        if enabled is None:
            from aka_core.logging_setup import stderr_is_json

            enabled = self.total > 1 and _stderr_is_terminal() and not stderr_is_json()
        self.enabled = enabled
        self._console = console
        self._progress: Progress | None = None
        self._bar: TaskID | None = None
        self._running: list[str] = []
        self._finished: set[str] = set()
        self._statuses: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __enter__(self) -> RunProgress:
        if self.enabled:
            console = self._console or Console(stderr=True)
            self._progress = Progress(
                TextColumn("[bold]tasks"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=False,
            )
            self._progress.start()
            self._bar = self._progress.add_task("", total=self.total)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _describe(self) -> str:
        counts = " ".join(f"{k} {v}" for k, v in sorted(self._statuses.items()))
        running = ", ".join(self._running[:3]) + (" ..." if len(self._running) > 3 else "")
        parts = [p for p in (counts, f"running {running}" if running else "") if p]
        return escape(" | ".join(parts))

    def start_task(self, task_id: str) -> None:
        with self._lock:
            if task_id not in self._running:
                self._running.append(task_id)
            if self._progress is not None and self._bar is not None:
                self._progress.update(self._bar, description=self._describe())

    def finish_task(self, task_id: str, status: str, score: float | None) -> None:
        with self._lock:
            if task_id in self._running:
                self._running.remove(task_id)
            first_time = task_id not in self._finished
            self._finished.add(task_id)
            if first_time:
                self._statuses[status] += 1
            if self._progress is None or self._bar is None:
                return
            style = _STATUS_STYLE.get(status, "white")
            score_text = "-" if score is None else f"{score:.3f}"
            self._progress.console.print(
                f"[{style}]{escape(status):>9}[/]  {escape(task_id)}  score {score_text}")
            self._progress.update(self._bar, advance=1 if first_time else 0,
                                  description=self._describe())
