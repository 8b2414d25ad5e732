"""What the service's handlers are given: one :class:`ServiceContext`, built once by the app
(:mod:`gpuaas_service.app`) and handed to every handler through tornado's ``initialize()``
keyword arguments, with the part each handler serves (the queue index, the reclaim loop, the
console, the job service)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyterhub.services.auth import HubAuth, HubOAuth

from gpuaas_service.api_types import ServiceHealthPolicy
from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.jobs.service import JobService
from gpuaas_service.queue.index import QueueIndex
from gpuaas_service.reclaim.loop import ReclaimLoop
from gpuaas_service.resize.resizer import Resizer
from gpuaas_service.web.connections import ConnectionGate
from gpuaas_service.web.limits import RateLimit
from gpuaas_service.web.servers import ServerTokens
from jupyter_gpuaas.core.api_documents import RequestBodies, request_bodies

__all__ = ["RequestStats", "ServiceContext", "service_prefix"]


def service_prefix(prefix: str) -> str:
    """``prefix`` with one leading and one trailing slash (``/`` for an empty one)."""
    return "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"


@dataclass
class RequestStats:
    """What ``api/health`` counts."""

    requests: int = 0
    """Queue questions answered."""


@dataclass(frozen=True, kw_only=True)
class ServiceContext:
    """The service's parts and its web settings; a part that is ``None`` has no endpoints."""

    prefix: str = "/services/gpuaas/"
    """The URL prefix of every endpoint."""
    hub_auth: HubAuth | None = None
    """Identifies the callers of the API by their hub tokens (``None``: from the environment)."""
    console_auth: HubOAuth | None = None
    """Logs browsers in to the console through the hub's OAuth."""
    servers: ServerTokens | None = None
    """Which running server a token was issued to, as the hub says (``None``: every request
    only a server may make is refused with 503)."""
    operator_token: str = ""
    """The token of ``metrics`` and ``api/health`` (``""``: both closed)."""
    limits: Mapping[str, RateLimit] = field(default_factory=dict)
    """Per-caller request limits by name (``activity``, ``queue``)."""
    on_refused: Callable[[str], None] | None = None
    """Told the limit's name of each request refused by it (the metric)."""
    monotonic: Callable[[], float] = time.monotonic
    """The seconds the limits refill in."""
    stats: RequestStats = field(default_factory=RequestStats)
    health_policy: Callable[[], ServiceHealthPolicy] | None = None
    """``api/health``'s ``policy``: the policy's state (absent without it)."""
    index: QueueIndex | None = None
    loop: ReclaimLoop | None = None
    console: ConsoleState | None = None
    jobs: JobService | None = None
    resize: Resizer | None = None
    """Moves a server to a bigger offering (``api/resize``; ``None``: no such endpoint)."""
    job_max_body: int = 1_100_000
    """The largest body of a job submission or a runner's upload, in bytes (let in only once
    the caller is known; every other body is held to the server's ``max_request_bytes``)."""
    body_timeout: float = 60.0
    """Seconds such a body may take to arrive, once let in."""
    connections: ConnectionGate | None = None
    """The server's cap on connections whose caller is not known yet (``None``: no cap)."""
    checks: Callable[..., Awaitable[Mapping[str, Any]]] | None = None
    """The doctor's checks for the console (``api/console/checks``, doctor/cached.py;
    ``None``: that endpoint answers 404)."""
    bodies: RequestBodies = field(default_factory=lambda: request_bodies("service"))
    """The request bodies the service's OpenAPI document allows, their validators compiled
    once, as the context is built (the handlers refuse any other body with a 400)."""

    @property
    def root(self) -> str:
        """:attr:`prefix` with one leading and one trailing slash."""
        return service_prefix(self.prefix)
