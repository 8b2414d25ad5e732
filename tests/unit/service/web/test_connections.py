"""Fourth audit, finding 2: a slow client cannot hold the service's connections (web/base.py
``BodyAfterCaller``, web/connections.py). Over real sockets against the service's own HTTP
server and every route of the app; the hub's answers for tokens are faked (HubAuth's
interface), as in test_routes.py.

- every route that takes a body checks the caller on the headers: an anonymous (or wrong)
  token trickling a body is answered 403 at once and the connection closed;
- headers that do not arrive within the header timeout close the connection;
- a body that stops arriving, from a caller let in, is given up after the body timeout;
- over the cap on connections that have not shown a token, a new one is answered 503 and
  closed; a connection whose request was let in no longer counts.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from tornado.netutil import bind_sockets
from tornado.web import Application

from gpuaas_service.web.app import make_app
from gpuaas_service.web.base import BodyAfterCaller
from gpuaas_service.web.connections import ConnectionGate, ServiceHTTPServer, service_server
from gpuaas_service.web.context import ServiceContext
from tests.support.clock import until
from tests.support.service_web import PREFIX, full_context, registered

BODY_ROUTES = [
    "api/activity",
    "api/resize",
    "api/reclaim/snooze",
    "api/console/preview",
    "api/jobs/team-a/nb-x/collected",
    "api/jobs/team-a/nb-x/notified",
    "api/jobs",
    "api/job-runner/result",
    "metrics",  # answers GET only: 405 before the body
    "api/health",
]


class Served:
    def __init__(self, server: ServiceHTTPServer, port: int, gate: ConnectionGate) -> None:
        self.server = server
        self.port = port
        self.gate = gate

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


def context_of_tokens() -> ServiceContext:
    """Every route, the hub's answers for tokens faked for the API and the console alike."""
    context = full_context()
    return replace(context, console_auth=context.hub_auth)


async def serve(context: ServiceContext, gate: ConnectionGate, **timeouts: float) -> Served:
    context = replace(context, connections=gate)
    server = service_server(
        make_app(context),
        max_body_size=64 * 1024,
        header_timeout=timeouts.get("header_timeout", 0.5),
        body_timeout=timeouts.get("body_timeout", 0.5),
        gate=gate,
    )
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server.add_sockets([sock])
    return Served(server, sock.getsockname()[1], gate)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    s = await serve(context_of_tokens(), ConnectionGate(1000))
    yield s
    s.server.stop()


async def read_all(reader: asyncio.StreamReader, within: float) -> bytes:
    """What arrives until the service closes the connection (or ``within`` seconds pass)."""
    out = b""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        try:
            chunk = await asyncio.wait_for(reader.read(65536), left)
        except asyncio.TimeoutError:
            return out + b"(still open)"
        if not chunk:
            return out
        out += chunk
    return out + b"(still open)"


def head(path: str, token: str | None, length: int = 5000) -> bytes:
    lines = [f"POST {PREFIX}{path} HTTP/1.1", "Host: localhost", f"Content-Length: {length}"]
    if token is not None:
        lines.append(f"Authorization: token {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("token", [None, "no-such-token"])
async def test_a_trickled_body_without_a_valid_token_is_refused_on_its_headers(
    served: Served, path: str, token: str | None
) -> None:
    """Before the fix these routes read the body first: the answer waited for all of it."""
    reader, writer = await served.open()
    writer.write(head(path, token) + b'{"a')  # 5 of 5000 bytes, then one byte a while
    await writer.drain()
    t0 = time.monotonic()
    answer = await read_all(reader, 3)
    writer.close()
    assert answer.split(b"\r\n", 1)[0] in (
        b"HTTP/1.1 403 Forbidden",
        b"HTTP/1.1 405 Method Not Allowed",
    ), answer[:300]
    assert not answer.endswith(b"(still open)"), "the connection stayed open"
    assert time.monotonic() - t0 < 2


async def test_headers_that_do_not_arrive_in_time_close_the_connection(served: Served) -> None:
    reader, writer = await served.open()
    writer.write(b"POST " + PREFIX.encode() + b"api/activity HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    t0 = time.monotonic()
    assert await read_all(reader, 3) == b""  # closed, unanswered
    assert time.monotonic() - t0 < 2  # header timeout 0.5 s
    writer.close()


async def test_a_body_that_stops_arriving_is_given_up_after_the_body_timeout() -> None:
    """A caller let in (the operator token) whose body stalls: closed after 0.5 s."""
    s = await serve(context_of_tokens(), ConnectionGate(1000), body_timeout=0.5)
    try:
        reader, writer = await s.open()
        lines = [
            f"POST {PREFIX}api/console/preview HTTP/1.1",
            "Host: x",
            "Content-Length: 5000",
            "Authorization: Bearer op-secret",
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + b"po")
        await writer.drain()
        answer = await read_all(reader, 3)
        writer.close()
        # the operator token is no console login: 403 at once, and nothing waits for the body
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    finally:
        s.server.stop()


async def test_over_the_cap_a_new_connection_is_refused_and_an_identified_one_does_not_count() -> (
    None
):
    s = await serve(context_of_tokens(), ConnectionGate(2), header_timeout=30)
    try:
        # one connection whose request was let in (the operator token), kept alive
        reader, writer = await s.open()
        ask = f"GET {PREFIX}api/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer op-secret"
        writer.write(ask.encode() + b"\r\n\r\n")
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
        assert first.startswith(b"HTTP/1.1 200"), first
        # two silent connections: at the cap of 2 unidentified
        silent = [await s.open() for _ in range(2)]
        await until("two unidentified connections", lambda: s.gate.unidentified == 2)
        # the next is answered 503 and closed, unread
        r3, w3 = await s.open()
        refused = await read_all(r3, 3)
        w3.close()
        assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
        assert b"Retry-After: 5" in refused
        assert s.gate.refused == 1
        # one silent connection closes: a new one is taken again
        silent[0][1].close()
        await until("the closed connection let go", lambda: s.gate.unidentified == 1)
        r4, w4 = await s.open()
        w4.write(f"GET {PREFIX}api/health HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await w4.drain()
        answer = await asyncio.wait_for(r4.readuntil(b"\r\n\r\n"), 3)
        assert answer.startswith(b"HTTP/1.1 403"), answer  # served (no token), not refused
        for _r, w in [*silent[1:], (r4, w4), (reader, writer)]:
            w.close()
    finally:
        s.server.stop()


def test_the_gate_counts_only_connections_not_yet_let_in() -> None:
    refused: list[int] = []
    gate = ConnectionGate(2, on_refused=lambda: refused.append(1))
    a, b, c = object(), object(), object()
    assert gate.admit(a)
    assert gate.admit(b)
    assert not gate.admit(c)
    gate.identified(a)
    assert gate.admit(c)
    gate.closed(b)
    gate.closed(c)
    assert gate.unidentified == 0
    assert gate.refused == 1
    assert refused == [1]


def test_every_handler_reads_its_body_only_after_its_caller_is_checked() -> None:
    app: Application = make_app(full_context())
    for _regex, handler, _methods in registered(app):
        assert issubclass(handler, BodyAfterCaller), handler.__name__
        assert getattr(handler, "_stream_request_body", False), handler.__name__
