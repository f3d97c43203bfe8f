"""Clients of the reward service (``aka serve``), blocking and ``asyncio``.

    from aka_core.api import ServiceClient
    client = ServiceClient("http://127.0.0.1:8765")
    result = client.evaluate("triton2triton/gelu", {"kernel.py": source})
    result["status"], result["reward"]      # see aka_core.service.outcome

Every request carries an id chosen here (or by the caller): a submission repeated after a lost
answer or a restarted service is the same request. A full queue (429) or a stopping service
(503) is waited out (``Retry-After``), and so is a service that does not answer yet, up to
``retries`` times; a request the service refuses raises ``ServiceError`` naming the field.
The service's access token (``access_token``) is ``token``, else ``$AKA_SERVICE_TOKEN``, else the
one a service on the URL's port of this host made. ``first_contact_s``: how long a client that
has had no answer yet keeps trying (a command line asking a service that is not running should
say so in seconds, not after every retry).

The blocking client speaks HTTP through the standard library (``http.client``, a kept-alive
connection per thread): `aka eval --service` and a trainer's loop may start a process per
sample, and importing httpx (and asyncio) and setting up its TLS context were 0.17 s of each such
process on a 2-core machine (``bench/cli_service_latency.py``, bench/results/cpu-2026-12-06).
The ``asyncio`` client, made once per trainer, uses httpx.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from aka_core.service import access_token

DEFAULT_URL = "http://127.0.0.1:8765"
LONG_POLL_SECONDS = 30.0


class ServiceError(Exception):
    """The service refused a request (4xx), or could not be reached within the retries."""

    def __init__(self, message: str, *, status: int | None = None, field: str | None = None):
        super().__init__(message)
        self.status, self.field = status, field


# What ``files_of`` reads at most: the service's own limits on a request's files.
FILES_OF_MAX_BYTES = 16 * 2**20
FILES_OF_MAX_FILES = 256
FILES_OF_MAX_DEPTH = 32


def files_of(folder: str | Path) -> dict[str, bytes]:
    """Every regular file below ``folder`` (a rollout's workspace), by relative path (caches in
    ``__pycache__`` left out).

    The workspace is the agent's and this process is not confined, so what would make it read
    more than a request may hold, or read outside the folder, is refused with a ``ValueError``
    naming the path: a symbolic link (it would send what it points at: a held-out draw, another
    rollout's files), more than 16 MiB in all (sizes are read before any content: a sparse file
    of terabytes costs nothing to make), more than 256 files, or folders nested deeper than 32.
    FIFOs, sockets and devices are skipped unread."""
    import stat as stat_module

    # Here, not at the top: a process that only sends files it was given imports no more.
    from aka_core.bounded_files import FileTooLarge, NotRegularFile, read_at_most

    root = Path(folder)
    found: list[tuple[str, Path]] = []
    total = 0
    pending = [(root, 0)]
    while pending:
        directory, depth = pending.pop()
        if depth > FILES_OF_MAX_DEPTH:
            raise ValueError(f"{directory}: folders nested deeper than {FILES_OF_MAX_DEPTH}")
        with os.scandir(directory) as entries:
            for entry in entries:
                path = Path(entry.path)
                if entry.is_symlink():
                    raise ValueError(f"{path}: a symbolic link in the workspace; only regular "
                                     "files are sent (copy what it points at into the workspace)")
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        pending.append((path, depth + 1))
                    continue
                info = entry.stat(follow_symlinks=False)
                if not stat_module.S_ISREG(info.st_mode):
                    continue
                total += info.st_size
                found.append((path.relative_to(root).as_posix(), path))
                if total > FILES_OF_MAX_BYTES or len(found) > FILES_OF_MAX_FILES:
                    raise ValueError(f"{root}: more than {FILES_OF_MAX_BYTES >> 20} MiB or "
                                     f"{FILES_OF_MAX_FILES} files (at {path}); a request holds "
                                     "no more: send the candidate's own files")
    files = {}
    left = FILES_OF_MAX_BYTES
    for rel, path in sorted(found):
        # The entry may have changed since it was listed: a link now is refused (OSError), and
        # what is no longer a regular file is skipped unread, as it would have been when listed.
        # Each file may take only what the others left, so growing files cost no more memory
        # than the request may hold.
        try:
            data = read_at_most(path, left)
        except NotRegularFile:
            continue
        except FileTooLarge:
            raise ValueError(f"{root}: its files grew past {FILES_OF_MAX_BYTES >> 20} MiB while "
                             "read") from None
        files[rel] = data
        left -= len(data)
    return files


def _escapes_badly(text: str) -> bool:
    """Whether ``text`` takes over twice its UTF-8 size as a JSON string (control characters
    take six bytes each): such a file goes as base64, a third larger, so that a response's files
    within the service's limit never make a body over its limit. Text that is not valid Unicode
    (a lone surrogate) stays text, for the service to name."""
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        return False
    return len(json.dumps(text)) > 2 * size + 2  # escaped as the blocking client sends it


def request_body(task: str, files: dict[str, str | bytes], *, request_id: str | None,
                 deadline_s: float | None, priority: int, held_out_seed: int | None
                 ) -> dict[str, Any]:
    text = {k: v for k, v in files.items() if isinstance(v, str) and not _escapes_badly(v)}
    binary = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
              for k, v in files.items() if k not in text}
    body: dict[str, Any] = {"id": request_id or uuid.uuid4().hex, "task": task, "files": text,
                            "priority": priority}
    if binary:
        body["files_base64"] = binary
    if deadline_s is not None:
        body["deadline_s"] = deadline_s
    if held_out_seed is not None:
        body["held_out_seed"] = held_out_seed
    return body


def _refusal(response: Any) -> ServiceError:
    try:
        data = response.json()
    except ValueError:
        data = {"error": response.text[:500]}
    return ServiceError(f"{response.status_code}: {data.get('error')}",
                        status=response.status_code, field=data.get("field"))


def _retry_after(response: Any, attempt: int) -> float:
    try:
        return min(60.0, max(0.1, float(response.headers.get("Retry-After", ""))))
    except ValueError:
        return min(30.0, 0.5 * 2**attempt)


class _Reconnects:
    """When a client that could not reach the service tries again, and what it says when not."""

    url: str
    retries: int

    def _init_reconnects(self, url: str, retries: int, first_contact_s: float | None,
                         token: str | None) -> None:
        self.url = url.rstrip("/")
        try:
            self.token = token or access_token.for_client(self.url)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None
        self.retries = retries
        self.first_contact_s = first_contact_s
        self._answered = False
        self._first_try: float | None = None

    def _unreachable(self, exc: Exception, attempt: int) -> float:
        """Seconds to wait before trying again, or ``ServiceError`` where no more tries are left."""
        now = time.monotonic()
        if self._first_try is None:
            self._first_try = now
        wait = min(30.0, 0.5 * 2**attempt)
        limit = self.first_contact_s
        if not self._answered and limit is not None and now + wait - self._first_try > limit:
            raise ServiceError(f"the service at {self.url} does not answer ({exc}; tried for "
                               f"{now - self._first_try:.1f} s): is `aka serve` running? Start it "
                               "with `aka serve --state DIR`, or give its URL") from None
        if attempt == self.retries:
            raise ServiceError(f"the service at {self.url} does not answer: {exc}") from None
        return wait


_dumps = json.dumps  # ``_call``'s keyword ``json`` (httpx's name for the body) hides the module


class _Answer:
    """An HTTP response read whole, as ``_refusal`` and ``_retry_after`` read httpx's."""

    def __init__(self, status_code: int, headers: Any, body: bytes):
        self.status_code, self.headers, self.body = status_code, headers, body

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


class ServiceClient(_Reconnects):
    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 90.0, retries: int = 10,
                 first_contact_s: float | None = None, token: str | None = None):
        self._init_reconnects(url, retries, first_contact_s, token)
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ServiceError(f"{url!r} is not an http:// or https:// URL of a service: give the "
                               "URL `aka serve` printed (its STATE/service.json holds it), e.g. "
                               f"{DEFAULT_URL}")
        self._https, self._netloc, self._prefix = (parts.scheme == "https", parts.netloc,
                                                   parts.path.rstrip("/"))
        self.timeout = timeout
        # One kept-alive connection per thread: a trainer may share one client among threads,
        # and an ``http.client`` connection carries one exchange at a time.
        self._local = threading.local()
        self._open: set[Any] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            for conn in self._open:
                conn.close()
            self._open.clear()
        self._local = threading.local()

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = self._local.conn = kind(self._netloc, timeout=self.timeout)
            with self._lock:
                self._open.add(conn)
        return conn

    def _drop(self, conn: Any) -> None:
        conn.close()
        self._local.conn = None
        with self._lock:
            self._open.discard(conn)

    def _send(self, method: str, target: str, body: bytes | None) -> _Answer:
        """One exchange on this thread's kept-alive connection (opened if there is none). A
        connection the service closed while it sat idle (uvicorn keeps one 5 s) fails on its
        first use: that exchange is made again at once on a new one, not waited for like a
        service that does not answer (a request is the same request when sent twice: its id)."""
        headers = {"Accept": "application/json", **access_token.header(self.token)}
        if body is not None:
            headers["Content-Type"] = "application/json"
        for fresh in (getattr(self._local, "conn", None) is None, True):
            conn = self._connection()
            try:
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
                return _Answer(response.status, response.headers, response.read())
            except BaseException as exc:
                self._drop(conn)  # a connection left mid-exchange is never used again
                # (RemoteDisconnected is a ConnectionError: what a dropped idle connection says)
                if fresh or not isinstance(exc, ConnectionError | http.client.BadStatusLine):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, *, json: Any = None,
              params: dict[str, str] | None = None) -> dict[str, Any]:
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        body = None if json is None else _dumps(json).encode()
        for attempt in range(self.retries + 1):
            try:
                response = self._send(method, target, body)
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
                time.sleep(self._unreachable(exc, attempt))
                continue
            self._answered = True
            if response.status_code in (429, 503) and attempt < self.retries:
                time.sleep(_retry_after(response, attempt))
                continue
            if response.status_code >= 400:
                raise _refusal(response)
            return dict(response.json())
        raise ServiceError("unreachable")  # pragma: no cover

    def submit(self, task: str, files: dict[str, str | bytes], *, id: str | None = None,
               deadline_s: float | None = None, priority: int = 0,
               held_out_seed: int | None = None) -> dict[str, Any]:
        body = request_body(task, files, request_id=id, deadline_s=deadline_s, priority=priority,
                            held_out_seed=held_out_seed)
        return self._call("POST", "/v1/evaluations", json=body)

    def get(self, id: str, *, wait: float = 0.0, record: bool = True) -> dict[str, Any]:
        params = {"wait": str(wait)} | ({} if record else {"record": "0"})
        return self._call("GET", f"/v1/evaluations/{id}", params=params)

    def wait(self, id: str, *, timeout: float | None = None, record: bool = True
             ) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            row = self.get(id, wait=max(0.0, min(LONG_POLL_SECONDS, left)), record=record)
            if row["terminal"] or (deadline is not None and time.monotonic() >= deadline):
                return row

    def cancel(self, id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/evaluations/{id}")

    def evaluate(self, task: str, files: dict[str, str | bytes], *, id: str | None = None,
                 deadline_s: float | None = None, priority: int = 0,
                 held_out_seed: int | None = None, record: bool = True) -> dict[str, Any]:
        """Submit and wait: the result (``status``, ``reward``, ...) with the request's id."""
        row = self.submit(task, files, id=id, deadline_s=deadline_s, priority=priority,
                          held_out_seed=held_out_seed)
        row = self.wait(row["id"], record=record)
        return {"id": row["id"], **(row["result"] or {"status": row["state"], "reward": None})}

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/v1/health")


class AsyncServiceClient(_Reconnects):
    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 90.0, retries: int = 10,
                 first_contact_s: float | None = None, token: str | None = None):
        import httpx

        self._init_reconnects(url, retries, first_contact_s, token)
        self._http = httpx.AsyncClient(timeout=timeout, headers=access_token.header(self.token))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncServiceClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        import asyncio  # here: the blocking client's processes need not import it

        import httpx

        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, self.url + path, **kwargs)
            except httpx.TransportError as exc:
                await asyncio.sleep(self._unreachable(exc, attempt))
                continue
            self._answered = True
            if response.status_code in (429, 503) and attempt < self.retries:
                await asyncio.sleep(_retry_after(response, attempt))
                continue
            if response.status_code >= 400:
                raise _refusal(response)
            return dict(response.json())
        raise ServiceError("unreachable")  # pragma: no cover

    async def submit(self, task: str, files: dict[str, str | bytes], *, id: str | None = None,
                     deadline_s: float | None = None, priority: int = 0,
                     held_out_seed: int | None = None) -> dict[str, Any]:
        body = request_body(task, files, request_id=id, deadline_s=deadline_s, priority=priority,
                            held_out_seed=held_out_seed)
        return await self._call("POST", "/v1/evaluations", json=body)

    async def get(self, id: str, *, wait: float = 0.0, record: bool = True) -> dict[str, Any]:
        params = {"wait": str(wait)} | ({} if record else {"record": "0"})
        return await self._call("GET", f"/v1/evaluations/{id}", params=params)

    async def wait(self, id: str, *, timeout: float | None = None, record: bool = True
                   ) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            row = await self.get(id, wait=max(0.0, min(LONG_POLL_SECONDS, left)), record=record)
            if row["terminal"] or (deadline is not None and time.monotonic() >= deadline):
                return row

    async def cancel(self, id: str) -> dict[str, Any]:
        return await self._call("DELETE", f"/v1/evaluations/{id}")

    async def evaluate(self, task: str, files: dict[str, str | bytes], *, id: str | None = None,
                       deadline_s: float | None = None, priority: int = 0,
                       held_out_seed: int | None = None, record: bool = True) -> dict[str, Any]:
        row = await self.submit(task, files, id=id, deadline_s=deadline_s, priority=priority,
                                held_out_seed=held_out_seed)
        row = await self.wait(row["id"], record=record)
        return {"id": row["id"], **(row["result"] or {"status": row["state"], "reward": None})}

    async def health(self) -> dict[str, Any]:
        return await self._call("GET", "/v1/health")
