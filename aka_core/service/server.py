"""``aka serve``: the reward service on a local port (uvicorn), its queue in ``STATE/queue.db``.

The state folder holds the durable queue, the candidates' files of requests not yet evaluated
(``spool/``) and ``service.json`` (the URL and pid of the running service, for clients and
scripts). Stopping the service (Ctrl-C, SIGTERM) kills the evaluations in progress and queues them
again: the next start runs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from aka_core.errors import UsageError
from aka_core.evaluation import holder_cpus
from aka_core.service import access_token, state_registry

if TYPE_CHECKING:  # asyncio is imported where the service runs: a client's ``read_url`` needs none
    import asyncio


@attrs.frozen(kw_only=True)
class ServeOptions:
    tasks_root: Path
    state: Path
    host: str = "127.0.0.1"
    port: int = 8765
    gpus: tuple[int, ...] = ()
    per_gpu: int = 4
    cpu_workers: int = 1
    max_queue: int = 1024
    max_attempts: int = 3
    evaluation_seconds: float = 3600.0
    evaluator: str | None = None
    """module:function called instead of ``api.evaluate_candidate`` (tests of the service)."""
    keep_days: float | None = 30.0
    """Terminal requests are forgotten this long after they ended (None: kept for ever)."""
    prestart: bool | None = None
    """Keep each slot's next evaluation started and waiting (None: on GPU slots only)."""
    holder_cpus: int | None = None
    """CPUs per GPU kept for the evaluation holding it (``holder_cpus.plan``; None, the default:
    four where the host leaves four others, else none; 0: none kept). On an H100 host (16 CPUs),
    four raised the service from 20.1 to 22.7 evaluations per GPU-minute
    (bench/results/h100-2026-12-07)."""


def require_dependencies() -> None:
    missing = [name for name in ("starlette", "uvicorn", "httpx")
               if not _importable(name)]
    if missing:
        raise UsageError(f"aka serve needs {', '.join(missing)}: pip install 'aka-core[serve]'")


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror} (choose another "
                         "--port, or 0 for any free one)") from None
    sock.listen(512)
    sock.set_inheritable(False)
    return sock


def prestart_protected(tasks_root: Path, state: Path) -> tuple[str, ...]:
    """The folders every request of this service protects (``lifecycle.protected_paths`` of a
    task below ``tasks_root``, and the service's state): what pre-started runners are confined
    away from."""
    root = tasks_root.resolve()
    found = [root, state.resolve()]
    for ancestor in root.parents:
        found += [ancestor / name for name in ("tasks", "tests") if (ancestor / name).is_dir()]
    return tuple(sorted({str(p) for p in found}))


async def serve(options: ServeOptions, *, ready: asyncio.Event | None = None) -> None:
    import asyncio

    require_dependencies()
    import uvicorn

    from aka_core.service.app import Service, create_app
    from aka_core.service.scheduler import Scheduler, make_slots
    from aka_core.service.store import RequestStore

    if not options.tasks_root.is_dir():
        raise UsageError(f"tasks folder {options.tasks_root} does not exist (--tasks)")
    spool = options.state / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    state_registry.record(options.state)  # hidden from the agents of `aka run` on this host
    store = RequestStore(options.state / "queue.db", max_attempts=options.max_attempts)
    try:
        cpu_plan = holder_cpus.plan(list(options.gpus), per_gpu=options.holder_cpus)
    except ValueError as exc:
        raise UsageError(f"--holder-cpus {options.holder_cpus}: {exc} (choose fewer, or 0)"
                         ) from None
    if cpu_plan is not None:  # the service's own threads (HTTP, queue) keep off them too
        holder_cpus.move([os.getpid()], cpu_plan.waiting)
    slots = make_slots(gpus=list(options.gpus), per_gpu=options.per_gpu,
                       cpu_workers=options.cpu_workers, cpu_plan=cpu_plan)
    prestart = options.prestart if options.prestart is not None else bool(options.gpus)
    scheduler = Scheduler(store, slots, spool, evaluator=options.evaluator,
                          evaluation_seconds=options.evaluation_seconds,
                          prestart=(prestart_protected(options.tasks_root, options.state)
                                    if prestart else None))
    sock = bind(options.host, options.port)
    host, port = sock.getsockname()[:2]
    try:
        token, token_source = access_token.for_service(port)
    except (OSError, ValueError) as exc:
        sock.close()
        raise UsageError(f"the service's access token: {exc} (or set {access_token.ENV} to a "
                         "token of your own: nothing is then written)") from None
    service = Service(scheduler, options.tasks_root, max_queue=options.max_queue, token=token)
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    config = uvicorn.Config(create_app(service), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5, lifespan="off",
                            limit_concurrency=connection_limit())
    server = _server(config, scheduler.release_waiters)
    await scheduler.start()
    pruner = (asyncio.create_task(_prune(store, scheduler, options.keep_days * 86400))
              if options.keep_days else None)
    descriptor = options.state / "service.json"
    descriptor.write_text(json.dumps({
        "url": url, "pid": os.getpid(), "slots": [s.name for s in slots],
        "holder_cpus": ({str(g): holder_cpus.format_list(c) for g, c in cpu_plan.holders.items()}
                        if cpu_plan is not None else None),
        "waiting_cpus": holder_cpus.format_list(cpu_plan.waiting) if cpu_plan else None}))
    print(f"aka serve: {url} ({len(slots)} slots: {', '.join(s.name for s in slots)}; "
          f"queue {options.state / 'queue.db'}; access token in {token_source})", flush=True)
    if ready is not None:
        ready.set()
    try:
        await server.serve(sockets=[sock])
    finally:
        if pruner is not None:
            pruner.cancel()
        await scheduler.stop()
        store.close()
        with contextlib.suppress(OSError):
            descriptor.unlink()
        if options.port == 0 and token_source != f"${access_token.ENV}":
            # A port of the moment is never asked for again: its token would only pile up.
            with contextlib.suppress(OSError):
                Path(token_source).unlink()
        sock.close()


def connection_limit() -> int:
    """How many connections the service serves at once (more are answered 503 at once): half
    the open files it may have, raised to the hard limit first, so that connections left open
    (clients that never finish a request) cannot take the descriptors its evaluations need
    (without them every evaluation fails, and is retried until it is an ``infra_error``)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    return int(min(4096, max(64, (soft if soft != resource.RLIM_INFINITY else 65536) // 2)))


def _server(config: Any, on_shutdown: Callable[[], None]) -> Any:
    """uvicorn's server, which first answers the long polls in flight when it shuts down (else
    they would hold their connections for the graceful-shutdown timeout, then be cancelled)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            on_shutdown()
            await super().shutdown(sockets=sockets)

    return Server(config)


async def _prune(store: Any, scheduler: Any, older_than_s: float) -> None:
    import asyncio

    while True:
        store.prune(older_than_s)
        scheduler.sweep()  # the folders of requests forgotten (kept: infra errors' logs)
        await asyncio.sleep(3600)


def read_url(state: Path) -> str:
    """The URL of the service running with ``state`` (from its ``service.json``)."""
    try:
        return str(json.loads((state / "service.json").read_text())["url"])
    except (OSError, ValueError, KeyError):
        raise UsageError(f"no service runs with state folder {state}") from None
