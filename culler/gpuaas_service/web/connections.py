"""The service's HTTP server: bounded time for headers and bodies, and a cap on the
connections that have not yet shown who they are.

Every hub user (and every notebook Job's pod, which runs the user's code) reaches the service
port. Without bounds, a few hundred anonymous connections trickling headers or bodies hold the
service's sockets and memory while they wait. Here:

- the headers of each request (and a kept-alive connection's wait for the next one) must arrive
  within ``header_timeout`` seconds, else the connection is closed;
- a body, read only once its handler has checked the caller on the headers (every handler
  streams its body: web/base.py), must arrive within ``body_timeout`` seconds (a job upload's
  own, longer, limit is set by web/base.py ``admit_body``);
- at most ``max_unidentified`` connections may be open at once that no request has yet been
  let in on (a valid token or login, :meth:`ConnectionGate.identified`): a new connection over
  the cap is answered ``503`` with ``Retry-After`` and closed before a byte of it is read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.iostream import IOStream

__all__ = ["ConnectionGate", "ServiceHTTPServer", "identified", "service_server"]

log = logging.getLogger("gpuaas.service")

RETRY_AFTER_SECONDS = 5
"""What a connection refused over the cap is told to wait."""


class ConnectionGate:
    """Which open connections no request has yet been let in on; whether a new one may open.

    Connections are the server's streams (any hashable object here: the gate only counts)."""

    def __init__(self, max_unidentified: int, on_refused: Callable[[], None] | None = None) -> None:
        self.max_unidentified = max_unidentified
        self.on_refused = on_refused
        self._unidentified: set[object] = set()
        self.refused = 0

    def admit(self, connection: object) -> bool:
        """``True``: ``connection`` is counted until :meth:`identified` or :meth:`closed`;
        ``False``: the cap is reached, refuse it."""
        if len(self._unidentified) >= self.max_unidentified:
            self.refused += 1
            if self.on_refused is not None:
                self.on_refused()
            return False
        self._unidentified.add(connection)
        return True

    def identified(self, connection: object) -> None:
        """A request on ``connection`` was let in (its caller known): no longer counted."""
        self._unidentified.discard(connection)

    def closed(self, connection: object) -> None:
        self._unidentified.discard(connection)

    @property
    def unidentified(self) -> int:
        return len(self._unidentified)


def identified(handler: web.RequestHandler, gate: ConnectionGate | None) -> None:
    """Tell ``gate`` that ``handler``'s caller is known (call once a token or login passed)."""
    stream = getattr(handler.request.connection, "stream", None)
    if gate is not None and stream is not None:
        gate.identified(stream)


def _refusal() -> bytes:
    body = json.dumps(
        {
            "status": 503,
            "message": "too many connections are waiting to show a token: try again shortly",
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\n"
        f"Retry-After: {RETRY_AFTER_SECONDS}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class ServiceHTTPServer(HTTPServer):
    """tornado's HTTP server with a :class:`ConnectionGate` (``gate``: set after creation)."""

    gate: ConnectionGate | None = None

    def handle_stream(self, stream: IOStream, address: tuple[Any, ...]) -> None:
        gate = self.gate
        if gate is not None and not gate.admit(stream):
            written = stream.write(_refusal())
            written.add_done_callback(lambda _f: stream.close())
            return
        super().handle_stream(stream, address)

    def on_close(self, server_conn: object) -> None:
        super().on_close(server_conn)
        stream = getattr(server_conn, "stream", None)
        if self.gate is not None and stream is not None:
            self.gate.closed(stream)


def service_server(
    app: web.Application,
    *,
    max_body_size: int,
    header_timeout: float,
    body_timeout: float,
    gate: ConnectionGate | None,
) -> ServiceHTTPServer:
    """The server of ``app`` (not listening yet: ``.listen(port, address)``)."""
    server = ServiceHTTPServer(
        app,
        max_body_size=max_body_size,
        idle_connection_timeout=header_timeout,  # tornado's header timeout too
        body_timeout=body_timeout,
    )
    server.gate = gate
    return server
