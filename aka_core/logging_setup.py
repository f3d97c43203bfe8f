"""Logging for aka: structlog, configured once by the CLI.

Logs go to stderr, never stdout (stdout carries results such as the run directory or ``--json``).
On a terminal they are human-readable; otherwise each event is one JSON line. Context bound with
``bind_context(run=..., task=..., agent=...)`` appears on every line logged in that context
(thread or asyncio task). With ``log_file`` every event is also appended there as JSON.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from aka_core.errors import ConfigError

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

_lock = threading.Lock()
_configured = False
_json_stderr = False
_file_sink: _JsonFileSink | None = None


class _StderrLogger:
    """Writes rendered lines to whatever ``sys.stderr`` is at call time.

    Resolving it late keeps logs visible through rich's live display (which swaps stderr for a
    proxy) and through pytest's capture.
    """

    def msg(self, message: str) -> None:
        stream: TextIO = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


def _stderr_logger_factory(*_args: Any) -> _StderrLogger:
    return _StderrLogger()


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def _to_json(event_dict: Mapping[str, Any]) -> str:
    return json.dumps(event_dict, default=_json_default, ensure_ascii=False)


class _JsonFileSink:
    """A processor that appends every event as a JSON line to a file and passes it on unchanged."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._format_exc_info = structlog.processors.ExceptionRenderer()

    def __call__(self, logger: WrappedLogger, method_name: str,
                 event_dict: EventDict) -> EventDict:
        rendered = self._format_exc_info(logger, method_name, dict(event_dict))
        line = _to_json(rendered)
        with self._lock:
            if not self._handle.closed:
                self._handle.write(line + "\n")
                self._handle.flush()
        return event_dict

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def _render_json(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    return _to_json(event_dict)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def stderr_is_json() -> bool:
    """Whether stderr carries JSON log lines (then nothing else may be printed there)."""
    return _json_stderr


def configure_logging(*, json_output: bool | None = None, level: str = "info",
                      log_file: Path | None = None, force: bool = False) -> None:
    """Configure structlog for the process. Later calls do nothing unless ``force`` is true.

    ``json_output``: ``None`` picks readable output on a terminal and JSON lines otherwise.
    ``level``: one of ``LEVELS``. ``log_file``: also append every event there as JSON.
    """
    global _configured, _file_sink, _json_stderr
    level_no = LEVELS.get(level.lower())
    if level_no is None:
        raise ConfigError(f"unknown log level {level!r}: choose one of {', '.join(LEVELS)}")
    with _lock:
        if _configured and not force:
            return
        if _file_sink is not None:
            _file_sink.close()
            _file_sink = None
        use_json = (not _stderr_is_terminal()) if json_output is None else json_output
        _json_stderr = use_json
        processors: list[Processor] = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
        ]
        if log_file is not None:
            _file_sink = _JsonFileSink(Path(log_file))
            processors.append(_file_sink)
        if use_json:
            processors += [structlog.processors.ExceptionRenderer(), _render_json]
        else:
            # tracebacks without locals: they can hold tokens and API keys
            processors.append(structlog.dev.ConsoleRenderer(
                colors=_stderr_is_terminal(),
                exception_formatter=structlog.dev.RichTracebackFormatter(show_locals=False)))
        structlog.configure(
            processors=processors,
            wrapper_class=structlog.make_filtering_bound_logger(level_no),
            logger_factory=_stderr_logger_factory,
            context_class=dict,
            # not cached: loggers made at import time must follow a forced reconfiguration
            cache_logger_on_first_use=False,
        )
        _configured = True


def reset_logging() -> None:
    """Undo ``configure_logging`` (structlog defaults, log file closed); for tests."""
    global _configured, _file_sink
    with _lock:
        if _file_sink is not None:
            _file_sink.close()
            _file_sink = None
        structlog.reset_defaults()
        _configured = False


def get_logger(name: str | None = None, **initial: Any) -> Any:
    """A structlog logger; ``name`` is recorded as ``logger`` on each event."""
    log = structlog.get_logger(**initial)
    # ``logger=`` cannot go through get_logger (it names wrap_logger's first parameter)
    return log.bind(logger=name) if name is not None else log


def bind_context(**values: Any) -> Mapping[str, Any]:
    """Bind ``values`` (e.g. ``run=..., task=..., agent=...``) to every later log line here.

    Returns tokens for ``structlog.contextvars.reset_contextvars``.
    """
    return structlog.contextvars.bind_contextvars(**values)


def unbind_context(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars(*keys)


def clear_context() -> None:
    structlog.contextvars.clear_contextvars()


@contextmanager
def bound_context(**values: Any) -> Iterator[dict[str, Any]]:
    """Bind ``values`` for the duration of a ``with`` block, restoring what was bound before."""
    with structlog.contextvars.bound_contextvars(**values):
        yield structlog.contextvars.get_contextvars()
