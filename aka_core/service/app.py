"""The reward service's HTTP interface (Starlette).

    POST   /v1/evaluations           {task, files, [id], [deadline_s], [priority], [held_out_seed]}
                                     201 accepted, 200 the same id and content again (idempotent),
                                     400/404/409/413/422 a request that cannot be accepted (the
                                     body names the field), 429 the queue is full, 503 the
                                     service is stopping (both with Retry-After)
    GET    /v1/evaluations/{id}      ?wait=S: until terminal or S seconds (at most 60);
                                     ?record=0 leaves out the full evaluation record
    DELETE /v1/evaluations/{id}      cancel (a running evaluation is killed)
    GET    /v1/health, /v1/stats

Every route but ``/v1/health`` asks for ``Authorization: Bearer <token>`` (401 without it:
``access_token``).

``files`` maps paths relative to the candidate's folder to their text (``files_base64`` to
base64 bytes); only the task's editable files are evaluated.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import math
import re
import secrets
import shutil
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from aka_core.bounded_files import MAX_NAME_BYTES, MAX_PATH_BYTES
from aka_core.models import TASK_FILE
from aka_core.service import access_token
from aka_core.service.scheduler import Scheduler
from aka_core.service.store import Conflict

ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # fullmatch: "$" would take a final newline
TASK_PATTERN = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
MAX_FILES = 256
MAX_BYTES = 16 * 2**20
# A body larger than this is refused before it is read: 16 MiB of files as base64 (4/3) or as
# JSON text with escapes, and the rest of the request.
MAX_BODY_BYTES = 4 * MAX_BYTES + 2**20
BODY_SECONDS = 60.0  # to send the whole body
MAX_WAIT_SECONDS = 60.0


class BadRequest(Exception):
    def __init__(self, status: int, field: str, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


class Service:
    """What the routes share: the store, the scheduler, the tasks, the limits."""

    def __init__(self, scheduler: Scheduler, tasks_root: Path, *, max_queue: int, token: str):
        self.scheduler = scheduler
        self.token = token
        self.store = scheduler.store
        self.tasks_root = tasks_root.resolve()
        self.max_queue = max_queue
        self._editable: dict[str, tuple[str, ...]] = {}
        self.started = time.time()

    def task(self, task_id: Any) -> tuple[Path, tuple[str, ...]]:
        if not isinstance(task_id, str) or not TASK_PATTERN.fullmatch(task_id) or ".." in task_id:
            raise BadRequest(400, "task", "task must be a task id such as triton2triton/gelu")
        folder = self.tasks_root / task_id
        try:
            found = (folder / TASK_FILE).is_file()
        except OSError:  # a name no file system holds (over 255 bytes): no such task either
            found = False
        if not found:
            raise BadRequest(404, "task", f"no task {task_id[:200]!r} under {self.tasks_root}")
        if task_id not in self._editable:
            from aka_core.builtin.operator_tasks import load_task
            from aka_core.errors import AkaError
            from aka_core.plugin.host import PluginHost

            try:
                self._editable[task_id] = tuple(load_task(folder, task_id, PluginHost()).editable)
            except AkaError as exc:
                raise BadRequest(422, "task", f"task {task_id} does not load: {exc}") from None
        return folder, self._editable[task_id]

    def retry_after(self) -> int:
        durations = self.store.recent_durations()
        per = (sum(durations) / len(durations)) if durations else 10.0
        wait = self.store.queued() * per / max(1, len(self.scheduler.slots))
        return int(min(120, max(1, math.ceil(wait / 4))))


def parse_files(body: dict[str, Any]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for field, decode in (("files", _text), ("files_base64", _b64)):
        given = body.get(field)
        if given is None:
            continue
        if not isinstance(given, dict):
            raise BadRequest(422, field, f"{field} must map relative paths to contents")
        for path, content in given.items():
            files[_safe_path(field, path)] = decode(field, path, content)
    if not files:
        raise BadRequest(422, "files", "files (or files_base64) must hold the candidate's files")
    folders = {str(parent) for path in files for parent in PurePosixPath(path).parents}
    clash = sorted(set(files) & folders)
    if clash:
        raise BadRequest(422, "files", f"{clash[0]!r} is both a file and a folder of other files")
    if len(files) > MAX_FILES:
        raise BadRequest(413, "files", f"at most {MAX_FILES} files")
    if sum(len(v) for v in files.values()) > MAX_BYTES:
        raise BadRequest(413, "files", f"at most {MAX_BYTES >> 20} MiB of files")
    return files


def _text(field: str, path: str, content: Any) -> bytes:
    if not isinstance(content, str):
        raise BadRequest(422, f"{field}.{path}", "a file's content must be a string")
    try:
        return content.encode()
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800") is no UTF-8 text
        raise BadRequest(422, f"{field}.{path}", "a file's text must be valid Unicode (send "
                         "bytes as files_base64)") from None


def _b64(field: str, path: str, content: Any) -> bytes:
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise BadRequest(422, f"{field}.{path}", "not valid base64") from None


def _safe_path(field: str, path: Any) -> str:
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path:
        raise BadRequest(422, field, f"bad file path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in pure.parts):
        raise BadRequest(422, field, f"file path {path!r} must be relative, without '..'")
    try:
        encoded = [part.encode() for part in pure.parts]
    except UnicodeEncodeError:
        raise BadRequest(422, field, f"file path {path!r} is not valid Unicode") from None
    if len(pure.as_posix().encode()) > MAX_PATH_BYTES or any(
            len(part) > MAX_NAME_BYTES for part in encoded):
        raise BadRequest(422, field, f"file path {path[:80]!r}... is too long (at most "
                         f"{MAX_PATH_BYTES} bytes, {MAX_NAME_BYTES} per name)")
    return pure.as_posix()


async def read_json(request: Any) -> Any:
    """The request's JSON body, refused past ``MAX_BODY_BYTES`` before it is all read (413),
    or when it takes longer than ``BODY_SECONDS`` to arrive (408); parsed off the event loop
    (a large body would stall every other request)."""
    import anyio

    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise BadRequest(413, None, f"the body is over {MAX_BODY_BYTES >> 20} MiB")
    chunks, size = [], 0
    try:
        with anyio.fail_after(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise BadRequest(413, None, f"the body is over {MAX_BODY_BYTES >> 20} MiB")
                chunks.append(chunk)
    except TimeoutError:
        raise BadRequest(408, None, f"the body took over {BODY_SECONDS:.0f} s to arrive") from None
    try:
        return await anyio.to_thread.run_sync(json.loads, b"".join(chunks))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest(400, None, "the body must be a JSON object") from None


def digest(task: str, files: dict[str, bytes], held_out_seed: Any) -> str:
    identity = {"task": task, "held_out_seed": held_out_seed,
                "files": {k: hashlib.sha256(v).hexdigest() for k, v in sorted(files.items())}}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def plain_json(value: Any) -> Any:
    """``value`` as strict JSON can carry it: every string valid Unicode (a lone surrogate
    becomes "?") and every float finite (NaN and infinities become None). A result holds what
    a side wrote (its error's text, from JSON that may escape a lone surrogate) and figures the
    judge computed on its outputs; Starlette encodes a response as UTF-8 with ``allow_nan``
    off, so one such value made every read of the request a 500: a wrong candidate raising
    ``ValueError("\\ud800")`` had its zero read by verl's reward function as no reward at all."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {plain_json(k) if isinstance(k, str) else k: plain_json(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def create_app(service: Service) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse as StarletteJSONResponse
    from starlette.routing import Route

    class JSONResponse(StarletteJSONResponse):
        def render(self, content: Any) -> bytes:
            return super().render(plain_json(content))

    def error(status: int, field: str | None, message: str, **headers: str) -> JSONResponse:
        return JSONResponse({"error": message, "field": field}, status_code=status,
                            headers=headers or None)

    def guarded(route: Any) -> Any:
        """``route`` for holders of the service's token only (``access_token``): asked before a
        body is read, so that no one without it costs the service more than the refusal."""
        async def check(request: Request) -> JSONResponse:
            if not access_token.allowed(request.headers.get(access_token.HEADER), service.token):
                return error(401, "authorization", "this service needs its access token: send "
                             "'Authorization: Bearer <token>' (aka's clients read it from "
                             f"${access_token.ENV}, or from ~/.aka/service-tokens/<port> on the "
                             "service's host)", **{"WWW-Authenticate": "Bearer"})
            return await route(request)
        return check

    async def submit(request: Request) -> JSONResponse:
        if service.scheduler.stopping:
            return error(503, None, "the service is stopping", **{"Retry-After": "5"})
        try:
            body = await read_json(request)
            if not isinstance(body, dict):
                raise BadRequest(400, None, "the body must be a JSON object")
            return _submit(body)
        except BadRequest as exc:
            return error(exc.status, exc.field, exc.message)

    def _submit(body: dict[str, Any]) -> JSONResponse:
        # No await from the look-up of the id to its row: two submissions of one id cannot
        # interleave.
        request_id = body.get("id") or uuid.uuid4().hex
        if not isinstance(request_id, str) or not ID_PATTERN.fullmatch(request_id):
            raise BadRequest(400, "id", "id must be 1-128 characters of A-Z a-z 0-9 _ . : -")
        task_id = body.get("task")
        folder, editable = service.task(task_id)
        files = parse_files(body)
        if not set(files) & set(editable):
            raise BadRequest(422, "files", f"none of the task's editable files "
                             f"({', '.join(editable)}) is among the files")
        deadline_s = body.get("deadline_s")
        if deadline_s is not None and (not isinstance(deadline_s, int | float)
                                       or isinstance(deadline_s, bool)
                                       or not 0 < deadline_s <= 7 * 86400):
            raise BadRequest(422, "deadline_s", "deadline_s must be seconds in (0, 604800]")
        priority = body.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > 1000:
            raise BadRequest(422, "priority", "priority must be an integer in [-1000, 1000]")
        seed = body.get("held_out_seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise BadRequest(422, "held_out_seed", "held_out_seed must be an integer")
        key = digest(task_id, files, seed)
        existing = service.store.get(request_id)
        if existing is not None:
            if existing.digest != key:
                raise BadRequest(409, "id", f"id {request_id} was used for other content")
            return JSONResponse(existing.public(), status_code=200)
        if service.store.queued() >= service.max_queue:
            return error(429, None, f"the queue is full ({service.max_queue} requests)",
                         **{"Retry-After": str(service.retry_after())})
        # The files are in the request's folder before its row is committed: an accepted id
        # always has them, and a refused one leaves nothing behind.
        target = service.scheduler.folder(request_id)
        staging = service.scheduler.spool / f".in-{uuid.uuid4().hex}"
        try:
            for path, content in files.items():
                file = staging / "candidate" / path
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(content)
            shutil.rmtree(target, ignore_errors=True)  # a forgotten request's (pruned) files
            staging.rename(target)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(target, ignore_errors=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                return error(503, None, "the service's disk is full",
                             **{"Retry-After": str(service.retry_after())})
            raise BadRequest(422, "files", f"the files cannot be written as given: "
                             f"{exc.strerror or exc}") from None
        try:
            row, new = service.store.submit(
                request_id, key, task_id, priority=priority,
                deadline=time.time() + deadline_s if deadline_s else None,
                options={"task_dir": str(folder), "held_out_seed": seed,
                         # Where the client fixed no draw: one secret draw for every attempt, so
                         # that a retry (an evaluator fault a candidate might provoke) judges the
                         # same held-out shapes, never a fresh draw the candidate may prefer.
                         "draw_seed": secrets.randbits(62)})
        except Conflict:  # not reached: nothing awaited since the id was looked up
            shutil.rmtree(target, ignore_errors=True)  # never another request's files judged
            raise BadRequest(409, "id", f"id {request_id} was used for other content") from None
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        service.scheduler.submitted()
        return JSONResponse(row.public(), status_code=201 if new else 200)

    async def get(request: Request) -> JSONResponse:
        request_id = request.path_params["id"]
        try:
            wait = float(request.query_params.get("wait", "0"))
        except ValueError:
            return error(400, "wait", "wait must be seconds")
        if not math.isfinite(wait) or wait < 0:
            return error(400, "wait", "wait must be seconds")
        row = (await service.scheduler.wait(request_id, min(wait, MAX_WAIT_SECONDS)) if wait
               else service.store.get(request_id))
        if row is None:
            return error(404, "id", f"no request {request_id}")
        public = row.public()
        if request.query_params.get("record") in ("0", "false") and public["result"]:
            public["result"] = {k: v for k, v in public["result"].items() if k != "record"}
        return JSONResponse(public)

    async def cancel(request: Request) -> JSONResponse:
        row = service.scheduler.cancel(request.path_params["id"])
        if row is None:
            return error(404, "id", f"no request {request.path_params['id']}")
        return JSONResponse(row.public())

    async def health(request: Request) -> JSONResponse:
        counts = service.store.counts()
        return JSONResponse({"ok": not service.scheduler.stopping,
                             "slots": [s.name for s in service.scheduler.slots],
                             "queued": counts.get("queued", 0),
                             "running": counts.get("running", 0)})

    async def stats(request: Request) -> JSONResponse:
        durations = service.store.recent_durations()
        return JSONResponse({"states": service.store.counts(),
                             "completed_since_start": service.scheduler.completed,
                             "uptime_s": round(time.time() - service.started, 1),
                             "recent_evaluation_s": (sorted(durations)[len(durations) // 2]
                                                     if durations else None),
                             "max_queue": service.max_queue})

    return Starlette(routes=[
        Route("/v1/evaluations", guarded(submit), methods=["POST"]),
        Route("/v1/evaluations/{id}", guarded(get), methods=["GET"]),
        Route("/v1/evaluations/{id}", guarded(cancel), methods=["DELETE"]),
        Route("/v1/health", health, methods=["GET"]),  # a liveness probe needs no token
        Route("/v1/stats", guarded(stats), methods=["GET"]),
    ])
