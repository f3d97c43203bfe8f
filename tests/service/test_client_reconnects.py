"""The clients' waits for a service that does not answer: seconds where it never did, the retries
where it answered before (a restart)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

pytest.importorskip("httpx")

from aka_core.service.client import AsyncServiceClient, ServiceClient, ServiceError


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_service_that_never_answered_is_said_so_within_first_contact_s() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with ServiceClient(url, first_contact_s=2.0) as client, pytest.raises(ServiceError) as exc:
        client.health()
    assert time.monotonic() - started < 5.0
    assert "aka serve" in str(exc.value) and url in str(exc.value)


def test_the_async_client_gives_up_as_soon() -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    async def ask() -> None:
        async with AsyncServiceClient(url, first_contact_s=1.0) as client:
            await client.health()

    started = time.monotonic()
    with pytest.raises(ServiceError, match="is `aka serve` running"):
        asyncio.run(ask())
    assert time.monotonic() - started < 4.0


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_service_that_answered_before_is_waited_for_past_first_contact_s() -> None:
    """Answered once, then gone for longer than ``first_contact_s`` (a restart): the client keeps
    trying and gets the restarted service's answer."""
    first = HTTPServer(("127.0.0.1", 0), Health)
    port = first.server_address[1]
    threading.Thread(target=first.serve_forever, daemon=True).start()
    with ServiceClient(f"http://127.0.0.1:{port}", first_contact_s=0.2, retries=6) as client:
        assert client.health() == {"ok": True}
        first.shutdown()
        first.server_close()

        def restart() -> None:
            time.sleep(1.2)
            second = HTTPServer(("127.0.0.1", port), Health)
            threading.Thread(target=second.serve_forever, daemon=True).start()

        threading.Thread(target=restart, daemon=True).start()
        assert client.health() == {"ok": True}


class KeptThenDropped(Health):
    """Answers as HTTP/1.1 (the connection stays open for the client) and then drops it, as a
    service does with a connection left idle past its keep-alive."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        super().do_GET()
        self.close_connection = True


def test_a_connection_the_service_dropped_is_replaced_at_once(monkeypatch: Any) -> None:
    """The blocking client keeps its connection between requests; one the service closed while
    idle is replaced without the wait meant for a service that does not answer."""
    from aka_core.service import client as client_module

    server = HTTPServer(("127.0.0.1", 0), KeptThenDropped)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", waits.append)
    try:
        with ServiceClient(f"http://127.0.0.1:{server.server_address[1]}") as client:
            answers = [client.health() for _ in range(3)]
    finally:
        server.shutdown()
        server.server_close()
    assert answers == [{"ok": True}] * 3
    assert waits == []


def test_the_blocking_client_takes_only_http_urls() -> None:
    with pytest.raises(ServiceError, match="not an http:// or https:// URL"):
        ServiceClient("127.0.0.1:8765")


class KeptAlive(Health):
    protocol_version = "HTTP/1.1"


def test_one_blocking_client_serves_many_threads(monkeypatch: Any) -> None:
    """A trainer's threads may share one client: each has a connection of its own, so no
    exchange is mixed with another's (which would read as a service that does not answer)."""
    from concurrent.futures import ThreadPoolExecutor
    from http.server import ThreadingHTTPServer

    from aka_core.service import client as client_module

    server = ThreadingHTTPServer(("127.0.0.1", 0), KeptAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", waits.append)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with ServiceClient(url, retries=2) as client, ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda _: client.health(), range(200)))
    finally:
        server.shutdown()
        server.server_close()
    assert answers == [{"ok": True}] * 200
    assert waits == []
