"""The reward service's durable queue: one SQLite database, every accepted id to a terminal state.

A request is accepted once its row is committed (WAL, ``synchronous=FULL``: it survives a crash
of the service or the machine). States::

    queued -> running -> scored | candidate_failure | task_error | infra_error
    queued | running -> cancelled            (DELETE, or the service told to cancel it)
    queued -> expired                        (its deadline passed before a slot was free)

A row left ``running`` by a service that died is queued again when the service starts (its
evaluation, a child of the dead service, died with it), up to ``max_attempts``; after that it is
an ``infra_error``. An evaluator fault (``infra_error``) is retried the same way before it is
reported. Nothing here runs an evaluation: ``scheduler`` does.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from aka_core.service import outcome

RETRY_WAIT_SECONDS = 0.5
"""A retried request's wait before its second attempt; each later one waits 4x longer."""
TERMINAL = frozenset({"scored", "candidate_failure", "task_error", "infra_error", "cancelled",
                      "expired"})
ACTIVE = frozenset({"queued", "running"})

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    task TEXT NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    deadline REAL,
    started REAL,
    finished REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    slot TEXT,
    result TEXT,
    options TEXT NOT NULL DEFAULT '{}',
    blames TEXT NOT NULL DEFAULT '[]',
    not_before REAL
);
CREATE INDEX IF NOT EXISTS requests_queue ON requests (state, priority DESC, created);
"""


@attrs.frozen
class Request:
    id: str
    digest: str
    task: str
    state: str
    priority: int
    created: float
    deadline: float | None
    started: float | None
    finished: float | None
    attempts: int
    slot: str | None
    result: dict[str, Any] | None
    options: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def public(self) -> dict[str, Any]:
        """What a client sees."""
        return {"id": self.id, "task": self.task, "state": self.state,
                "terminal": self.terminal, "attempts": self.attempts,
                "created": self.created, "started": self.started, "finished": self.finished,
                "deadline": self.deadline, "result": self.result}


def _row(row: sqlite3.Row) -> Request:
    return Request(id=row["id"], digest=row["digest"], task=row["task"], state=row["state"],
                   priority=row["priority"], created=row["created"], deadline=row["deadline"],
                   started=row["started"], finished=row["finished"], attempts=row["attempts"],
                   slot=row["slot"],
                   result=json.loads(row["result"]) if row["result"] else None,
                   options=json.loads(row["options"] or "{}"))


class Conflict(Exception):
    """The id exists with different content."""


class RequestStore:
    """Thread-safe access to the queue database (one connection, serialised)."""

    def __init__(self, path: Path, *, max_attempts: int = 3,
                 retry_wait_s: float = RETRY_WAIT_SECONDS):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.executescript(SCHEMA)
        columns = {row["name"] for row in self._db.execute("PRAGMA table_info(requests)")}
        if "blames" not in columns:  # a queue made before attempts kept whom they might blame
            self._db.execute("ALTER TABLE requests ADD COLUMN blames TEXT NOT NULL DEFAULT '[]'")
        if "not_before" not in columns:  # before retries waited
            self._db.execute("ALTER TABLE requests ADD COLUMN not_before REAL")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ------------------------------------------------------------------ requests
    def submit(self, request_id: str, digest: str, task: str, *, deadline: float | None,
               priority: int = 0, options: dict[str, Any] | None = None) -> tuple[Request, bool]:
        """Accept a request; returns (its row, whether it is new). The same id with the same
        digest is the same request (idempotent); with another digest it is a ``Conflict``."""
        with self._tx() as db:
            row = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
            if row is not None:
                if row["digest"] != digest:
                    raise Conflict(request_id)
                return _row(row), False
            db.execute("INSERT INTO requests (id, digest, task, state, priority, created, deadline,"
                       " options) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
                       (request_id, digest, task, priority, time.time(), deadline,
                        json.dumps(options or {})))
            created = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return _row(created), True

    def get(self, request_id: str) -> Request | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return _row(row) if row is not None else None

    def expire(self) -> list[str]:
        """Queued requests whose deadline passed, now ``expired``: their ids."""
        now = time.time()
        overdue = ("SELECT id FROM requests WHERE state = 'queued' AND deadline IS NOT NULL "
                   "AND deadline < ?")
        with self._lock:  # a read first: no write transaction twice a second for nothing
            if self._db.execute(overdue, (now,)).fetchone() is None:
                return []
        with self._tx() as db:
            rows = db.execute(overdue, (now,)).fetchall()
            db.executemany("UPDATE requests SET state = 'expired', finished = ?, result = ? "
                           "WHERE id = ? AND state = 'queued'",
                           [(now, json.dumps(_expired()), row["id"]) for row in rows])
        return [row["id"] for row in rows]

    def claim(self, slot: str) -> Request | None:
        """The next queued request (highest priority, oldest first; a retried one once its wait
        is over), now ``running`` on ``slot``; requests whose deadline passed on the way are
        ``expired``."""
        now = time.time()
        with self._tx() as db:
            db.execute("UPDATE requests SET state = 'expired', finished = ?, result = ? "
                       "WHERE state = 'queued' AND deadline IS NOT NULL AND deadline < ?",
                       (now, json.dumps(_expired()), now))
            row = db.execute("SELECT * FROM requests WHERE state = 'queued' AND (not_before IS "
                             "NULL OR not_before <= ?) ORDER BY priority DESC, created LIMIT 1",
                             (now,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE requests SET state = 'running', started = ?, slot = ?, "
                       "attempts = attempts + 1 WHERE id = ?", (now, slot, row["id"]))
            claimed = db.execute("SELECT * FROM requests WHERE id = ?", (row["id"],)).fetchone()
        return _row(claimed)

    def finish(self, request_id: str, state: str, result: dict[str, Any]) -> Request | None:
        """Record the terminal state of a running request (a request cancelled meanwhile stays
        cancelled); returns the row, or None if it was not running."""
        assert state in TERMINAL, state
        with self._tx() as db:
            cur = db.execute("UPDATE requests SET state = ?, finished = ?, result = ? "
                             "WHERE id = ? AND state = 'running'",
                             (state, time.time(), json.dumps(result), request_id))
            if cur.rowcount == 0:
                return None
            row = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return _row(row)

    def retry(self, request_id: str, reason: str, blame: str | None = None) -> Request | None:
        """A running request whose evaluation failed for the evaluator's reasons: queued again,
        or, once it used its attempts, an ``infra_error`` (or the candidate's failure where
        every attempt carried the same ``blame``: ``outcome.exhausted``)."""
        with self._tx() as db:
            row = db.execute("SELECT * FROM requests WHERE id = ? AND state = 'running'",
                             (request_id,)).fetchone()
            if row is None:
                return None
            blames = [*json.loads(row["blames"] or "[]"), blame]
            if row["attempts"] >= self.max_attempts:
                # Attempts made before this queue kept blames (an older service) count as none.
                blames = [None] * (row["attempts"] - len(blames)) + blames
                state, result = outcome.exhausted(reason, blames)
                db.execute("UPDATE requests SET state = ?, finished = ?, result = ?, blames = ? "
                           "WHERE id = ?", (state, time.time(), json.dumps(result),
                                            json.dumps(blames), request_id))
            else:  # a fault that ends every attempt at once (no file descriptors left, a
                # full disk) would use them all within a second: each waits longer
                wait = self.retry_wait_s * 4 ** (row["attempts"] - 1)
                db.execute("UPDATE requests SET state = 'queued', slot = NULL, blames = ?, "
                           "not_before = ? WHERE id = ?",
                           (json.dumps(blames), time.time() + wait, request_id))
            row = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return _row(row)

    def cancel(self, request_id: str) -> Request | None:
        """Cancel a queued or running request (a running one is also killed by the scheduler)."""
        with self._tx() as db:
            db.execute("UPDATE requests SET state = 'cancelled', finished = ?, result = ? "
                       "WHERE id = ? AND state IN ('queued', 'running')",
                       (time.time(), json.dumps({"status": "cancelled", "reward": None,
                                                 "retryable": False}), request_id))
            row = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return _row(row) if row is not None else None

    def recover(self) -> list[str]:
        """At start-up: requests a dead service left running are queued again (or, past their
        attempts, an ``infra_error``). Returns their ids."""
        with self._tx() as db:
            rows = db.execute("SELECT id FROM requests WHERE state = 'running'").fetchall()
        recovered = []
        for row in rows:
            if self.retry(row["id"], "the service stopped during the evaluation") is not None:
                recovered.append(row["id"])
        return recovered

    def ids_with_files(self) -> list[str]:
        """The requests whose files the spool keeps: queued or running, and ended as the
        evaluator's failure (their job logs say why)."""
        with self._lock:
            rows = self._db.execute("SELECT id FROM requests WHERE state IN ('queued', "
                                    "'running', 'infra_error')").fetchall()
        return [row["id"] for row in rows]

    def prune(self, older_than_s: float) -> int:
        """Forget terminal requests that ended more than ``older_than_s`` seconds ago (their ids
        may then be used again); returns how many."""
        with self._tx() as db:
            cur = db.execute("DELETE FROM requests WHERE state IN ('scored', 'candidate_failure', "
                             "'task_error', 'infra_error', 'cancelled', 'expired') "
                             "AND finished < ?", (time.time() - older_than_s,))
            return int(cur.rowcount)

    # ------------------------------------------------------------------ counts
    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) AS n FROM requests GROUP BY state")
            return {row["state"]: row["n"] for row in rows}

    def queued(self) -> int:
        with self._lock:
            return int(self._db.execute(
                "SELECT COUNT(*) FROM requests WHERE state = 'queued'").fetchone()[0])

    def recent_durations(self, limit: int = 50) -> list[float]:
        with self._lock:
            rows = self._db.execute(
                "SELECT finished - started AS d FROM requests WHERE state IN ('scored', "
                "'candidate_failure', 'task_error') AND started IS NOT NULL "
                "ORDER BY finished DESC LIMIT ?", (limit,)).fetchall()
        return [float(row["d"]) for row in rows if row["d"] is not None]


def _expired() -> dict[str, Any]:
    return {"status": "expired", "reward": None, "retryable": True,
            "message": "the request's deadline passed before a slot was free"}
